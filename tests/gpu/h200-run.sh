#!/usr/bin/env bash
# One GPU acceptance run on a lent, offline H200 machine (the device tool), from a checkout that carries
# the bundle built by scripts/gpu-bundle.sh (`carry: [".gpu"]`). Everything it learns lands in OUT as it
# goes, so a command cut off at its time limit still returns the logs:
#   OUT/host.txt     the machine: GPUs, driver, PID 1, python3, torch, whether `vllm bench serve` imports
#   OUT/console.log  this script's and the suite's output
#   OUT/run.tgz      the suite's work dir (units, plans, whole engine logs, per-case results, bench
#                    results; results.json/results.md once the run ends), re-packed every 15 s
#
#   tests/gpu/h200-run.sh OUT DEADLINE_S CASE_ID[,CASE_ID...]
#
# DEADLINE_S bounds the engines' part (GPU_ACC_DEADLINE); the unpack and the Ansible part come before it.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${1:?usage: h200-run.sh OUT DEADLINE_S CASE_IDS}" DEADLINE="${2:?deadline seconds}" ONLY="${3:?case ids}"
# A fresh work dir per call: a second call to a machine still warm keeps the first one's files apart.
SITE=/tmp/site WORK="/tmp/gpu-acc/work-$(date +%s)" RES="/tmp/gpu-acc/out-$(date +%s)"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
mkdir -p "$OUT" /tmp/gpu-acc
exec > >(tee -a "$OUT/console.log") 2>&1
began=$(date +%s)
stamp() { echo "[$(date +%H:%M:%S) +$(( $(date +%s) - began ))s] $*"; }

stamp "unpacking the bundle"
"$ROOT/scripts/gpu-bundle.sh" unpack --to "$SITE" || exit 3
export PYTHONPATH="$SITE"
# The bench role runs vLLM's benchmark code with the python beside bin/vllm, as in a venv.
# A wrapper, not a link: a link to a venv's python outside that venv loses the venv's site-packages (torch).
rm -f "$SITE/bin/python"; printf '#!/bin/sh\nexec %s "$@"\n' "$(command -v python3)" >"$SITE/bin/python"
chmod +x "$SITE/bin/python"
{
  nvidia-smi -L; nvidia-smi --query-gpu=name,memory.total,driver_version,mig.mode.current --format=csv
  echo "PID 1: $(ps -p 1 -o comm=)"; echo "python3: $(command -v python3) $(python3 --version 2>&1)"
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda,
              "transformers", transformers.__version__)'
  python3 -c 'import vllm, ansible; print("vllm", vllm.__version__, "from", vllm.__file__, "ansible-core", ansible.__version__)'
  python3 -c 'import vllm.benchmarks.serve, vllm.benchmarks.datasets; print("vllm bench serve imports: ok")'
} > "$OUT/host.txt" 2>&1
cat "$OUT/host.txt"

snapshot() {  # the work dir as one file, replaced atomically (OUT returns at most 8 files)
  [ -d "$WORK" ] || return 0
  tar -C "$(dirname "$WORK")" -czf "$OUT/run.tgz.tmp" --exclude='*/models/*/tokenizer.json' \
    --exclude='*/cache' "$(basename "$WORK")" "$(basename "$RES")" 2>/dev/null
  mv -f "$OUT/run.tgz.tmp" "$OUT/run.tgz"
}
( while sleep 15; do snapshot; done ) &
snapper=$!

stamp "GPU acceptance: $ONLY (engines' deadline ${DEADLINE}s)"
GPU_ACC_ENV='{"PYTHONPATH":"'"$SITE"'","VLLM_USE_FLASHINFER_SAMPLER":"0","HF_HUB_OFFLINE":"1","TRANSFORMERS_OFFLINE":"1","NCCL_NVLS_ENABLE":"0","TORCH_SYMM_MEM_DISABLE_MULTICAST":"1","NVSHMEM_DISABLE_NVLS":"1"}' \
GPU_ACC_DEADLINE="$DEADLINE" PYTHON=python3 \
  "$ROOT/scripts/gpu-acceptance.sh" --venv "$SITE" --vllm-version 0.26.0 --only "$ONLY" --work "$WORK" --out "$RES"
rc=$?
stamp "suite rc=$rc"
kill "$snapper" 2>/dev/null
snapshot
stamp "done"
exit $rc
