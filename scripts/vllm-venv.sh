#!/usr/bin/env bash
# Build (or reuse) the CPU validation venv holding the pinned vLLM, installed offline from the
# wheelhouse that scripts/vllm-wheelhouse.sh fills. Used by tests/functional/test_vllm_argv_real_parser.py
# to check rendered argv with vLLM's own parser and create_engine_config (VLLM_TARGET_DEVICE=cpu).
# Usage: scripts/vllm-venv.sh     progress on stderr; the venv's python path alone on stdout
# Env:   GPUFLEET_VLLM_VERSION (default: VLLM_VERSION below, releases.DEFAULT_RELEASE), GPUFLEET_WHEELHOUSE, GPUFLEET_PYTHON,
#        GPUFLEET_RAY_VERSION (default 2.60.0: Ray, for the Ray backend's command line),
#        GPUFLEET_VLLM_VENV (default ${XDG_CACHE_HOME:-$HOME/.cache}/gpufleet-vllm/vllm-<version>-venv)
#        GPUFLEET_VLLM_OVERLAY_ON (a release whose venv this script builds): build an overlay instead: this
#        release's wheel alone (--no-deps, ~240 MB) over the named release's complete venv (its site-packages on
#        the path), for a parser check of a release that pins the same torch without a second 4.6 GB wheelhouse.
#        Not an install a GPU host would get: dependency floors the base venv misses stay missing (what that
#        means for vLLM 0.34.0: tests/fixtures/vllm-0.34.0/PROVENANCE.md).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VLLM_VERSION="${GPUFLEET_VLLM_VERSION:-0.33.0}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/gpufleet-vllm"
VENV="${GPUFLEET_VLLM_VENV:-$CACHE/vllm-$VLLM_VERSION-venv}"
PY="${GPUFLEET_PYTHON:-python3}"
log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'ERROR: %s\n' "$*" >&2; exit 1; }

# One builder at a time: pytest's two workers may both ask for the venv on a fresh machine.
mkdir -p "$(dirname "$VENV")"
exec 9>"$VENV.lock"
flock 9
STAMP="$VENV/.gpufleet-complete-vllm-$VLLM_VERSION"
# Ray too: vLLM checks that Ray imports when a command line says --distributed-executor-backend ray (the vllm
# role's Ray backend). Its own stamp, so a venv built before it gets Ray added once (about 80 MB).
RAY="${GPUFLEET_RAY_VERSION:-2.60.0}"
RAY_STAMP="$VENV/.gpufleet-ray-$RAY"
add_ray() {
  local wheels="$WHEELHOUSE/ray-$RAY"
  if [ ! -f "$wheels/.complete" ]; then
    log "downloading ray $RAY and its requirements into $wheels (about 80 MB, once)"
    mkdir -p "$wheels"
    PIP_CONFIG_FILE=/dev/null "$PY" -m pip download --disable-pip-version-check -q --only-binary=:all: \
      -d "$wheels" "ray==$RAY" 1>&2
    touch "$wheels/.complete"
  fi
  # --find-links the vLLM wheelhouse first: what vLLM already installed stays as it is.
  PIP_CONFIG_FILE=/dev/null "$VENV/bin/python" -m pip install --disable-pip-version-check -q \
    --no-index --find-links "$WHEELHOUSE" --find-links "$wheels" "ray==$RAY" 1>&2
  touch "$RAY_STAMP"
}
if [ -f "$STAMP" ] && [ -x "$VENV/bin/python" ]; then
  if [ ! -f "$RAY_STAMP" ]; then
    WHEELHOUSE="$(GPUFLEET_VLLM_VERSION="$VLLM_VERSION" "$HERE/vllm-wheelhouse.sh")"
    add_ray
  fi
  printf '%s\n' "$VENV/bin/python"
  exit 0
fi

if [ -n "${GPUFLEET_VLLM_OVERLAY_ON:-}" ]; then
  BASE_PY="$(env -u GPUFLEET_VLLM_OVERLAY_ON GPUFLEET_VLLM_VERSION="$GPUFLEET_VLLM_OVERLAY_ON" GPUFLEET_VLLM_VENV= "$HERE/vllm-venv.sh")"
  WHEELHOUSE="${GPUFLEET_WHEELHOUSE:-$CACHE/wheelhouse}"
  if ! ls "$WHEELHOUSE"/vllm-"$VLLM_VERSION"-*.whl >/dev/null 2>&1; then
    log "downloading the vLLM $VLLM_VERSION wheel alone into $WHEELHOUSE (about 240 MB, once)"
    PIP_CONFIG_FILE=/dev/null "$BASE_PY" -m pip download --disable-pip-version-check -q --no-deps \
      --only-binary=:all: -d "$WHEELHOUSE" "vllm==$VLLM_VERSION" 1>&2
  fi
  log "building the overlay $VENV: vLLM $VLLM_VERSION over the vLLM $GPUFLEET_VLLM_OVERLAY_ON venv"
  rm -rf "$VENV"
  "$BASE_PY" -m venv "$VENV" 1>&2
  site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  "$BASE_PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > "$site/zz-gpufleet-overlay-base.pth"
  PIP_CONFIG_FILE=/dev/null "$VENV/bin/python" -m pip install --disable-pip-version-check -q --no-deps \
    --no-index --find-links "$WHEELHOUSE" "vllm==$VLLM_VERSION" 1>&2
  got="$(cd / && VLLM_TARGET_DEVICE=cpu "$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("vllm"))')"
  [ "$got" = "$VLLM_VERSION" ] || die "overlay venv has vLLM $got, expected $VLLM_VERSION"
  touch "$STAMP" "$RAY_STAMP"
  printf '%s\n' "$VENV/bin/python"
  exit 0
fi

WHEELHOUSE="$(GPUFLEET_VLLM_VERSION="$VLLM_VERSION" "$HERE/vllm-wheelhouse.sh")"
log "building $VENV from $WHEELHOUSE (offline)"
rm -rf "$VENV"
"$PY" -m venv "$VENV" 1>&2
# Offline from the wheelhouse only; PIP_CONFIG_FILE=/dev/null drops machine-wide constraints
# (/etc/xdg/pip caps torch) so exactly the torch vLLM pins is installed.
PIP_CONFIG_FILE=/dev/null "$VENV/bin/python" -m pip install --disable-pip-version-check -q \
  --no-index --find-links "$WHEELHOUSE" --upgrade pip 1>&2  # stdout carries the python path alone
PIP_CONFIG_FILE=/dev/null "$VENV/bin/python" -m pip install --disable-pip-version-check -q \
  --no-index --find-links "$WHEELHOUSE" "vllm==$VLLM_VERSION" 1>&2
got="$(VLLM_TARGET_DEVICE=cpu "$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("vllm"))')"
[ "$got" = "$VLLM_VERSION" ] || die "venv has vLLM $got, expected $VLLM_VERSION"
add_ray
touch "$STAMP"
log "vLLM $VLLM_VERSION venv ready: $VENV ($(du -sh "$VENV" | cut -f1))"
printf '%s\n' "$VENV/bin/python"
