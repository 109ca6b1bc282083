#!/usr/bin/env bash
# Fill (or reuse) the vLLM wheelhouse: a plain directory of wheels for the pinned vLLM and every
# dependency (cp311, manylinux x86_64), downloaded once and shared by
#   - scripts/vllm-venv.sh (the CPU validation venv used by tests/functional/test_vllm_argv_real_parser.py)
#   - the vllm role (installs on a target with `pip install --no-index --find-links WHEELHOUSE`).
# Usage: scripts/vllm-wheelhouse.sh            progress on stderr; the wheelhouse path alone on stdout
# Env:   GPUFLEET_VLLM_VERSION (default: VLLM_VERSION below, releases.DEFAULT_RELEASE)
#        GPUFLEET_WHEELHOUSE   (default ${XDG_CACHE_HOME:-$HOME/.cache}/gpufleet-vllm/wheelhouse)
#        GPUFLEET_PYTHON       (default python3; must be CPython 3.11 like the Debian 12 targets)
set -euo pipefail
VLLM_VERSION="${GPUFLEET_VLLM_VERSION:-0.33.0}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/gpufleet-vllm"
WHEELHOUSE="${GPUFLEET_WHEELHOUSE:-$CACHE/wheelhouse}"
PY="${GPUFLEET_PYTHON:-python3}"
log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'ERROR: %s\n' "$*" >&2; exit 1; }

"$PY" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)' \
  || die "$PY is not Python 3.11: set GPUFLEET_PYTHON to a CPython 3.11 (the wheelhouse is cp311, like Debian 12 targets)"
[ "$(uname -m)" = x86_64 ] || die "the wheelhouse is built for x86_64 (uname -m says $(uname -m))"

mkdir -p "$WHEELHOUSE"
# One filler at a time: scripts/test.sh starts this in the background while pytest's workers may call it too
# (through scripts/vllm-venv.sh); a second caller waits here and then finds the stamp.
exec 9>"$WHEELHOUSE/.lock"
flock 9
STAMP="$WHEELHOUSE/.complete-vllm-$VLLM_VERSION"
if [ -f "$STAMP" ]; then
  log "wheelhouse for vLLM $VLLM_VERSION already complete: $WHEELHOUSE"
  printf '%s\n' "$WHEELHOUSE"
  exit 0
fi

# PIP_CONFIG_FILE=/dev/null: ignore machine-wide pip config such as /etc/xdg/pip's torch cap
# ("torch<=2.14.1"); vLLM pins its own torch and the wheelhouse must hold exactly that one.
# --only-binary: the wheelhouse must be installable with --no-index and no compiler on the target.
# No --platform flags: this machine's tags (CPython 3.11, glibc 2.36, x86_64) are exactly the Debian 12
# targets' (explicit manylinux tags miss wheels such as llguidance's manylinux_2_34 builds).
log "downloading vLLM $VLLM_VERSION and its dependencies into $WHEELHOUSE (about 4.6 GB, once)"
PIP_CONFIG_FILE=/dev/null "$PY" -m pip download --disable-pip-version-check \
  --only-binary=:all: \
  -d "$WHEELHOUSE" "vllm==$VLLM_VERSION" pip setuptools wheel 1>&2  # pip's lines to stderr: stdout is the path alone
# A pip recent enough to install the wheelhouse offline is part of it (ensurepip's 23.x works too).
ls "$WHEELHOUSE"/vllm-"$VLLM_VERSION"-*.whl >/dev/null 2>&1 || die "no vllm-$VLLM_VERSION wheel in $WHEELHOUSE"
touch "$STAMP"
log "wheelhouse complete: $(find "$WHEELHOUSE" -name '*.whl' | wc -l) wheels, $(du -sh "$WHEELHOUSE" | cut -f1)"
printf '%s\n' "$WHEELHOUSE"
