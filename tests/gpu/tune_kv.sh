#!/usr/bin/env bash
# The tuner on a KV-bound, long-context case on one H200 (issue 46): vLLM's defaults vs the seeds' hand flags vs
# the grid the tuner derives itself (tune/grid.py default_grid: an offload tier for the reused prefixes, an fp8 KV
# cache with --allow-lossy), through tests/gpu/tune_ab.py. One call = one repeat of every candidate on fresh engines
# started together on the GPU (--parallel-starts); the second call resumes the first and measures repeat 2.
#
#   tests/gpu/tune_kv.sh OUT [--resume DIR] [more tune_ab.py options]     on the GPU host, after
#   scripts/gpu-bundle.sh unpack --to /tmp/site (PYTHONPATH=/tmp/site, vllm at /tmp/site/bin/vllm)
#
# Case: Qwen3-8B (real config, dummy weights), max_model_len 16384, 4,831,838,208 KV bytes per candidate (32,768 tokens
# in bf16, 65,536 in fp8). Workloads, same prompts for every candidate of a repeat (seed 1 + repeat):
#   reuse - 8 shared 8,000-token prefixes, 200-token suffixes, 48 prompts, 128 out, concurrency 4: the working set
#           (64,000 tokens) is twice the GPU cache, so prefixes are evicted before they are reused;
#   long  - 32 distinct 8,000-token prompts, 256 out, concurrency 16: 132,096 tokens wanted at once, 32,768 held.
# SLO for goodput: TTFT <= 10 s, TPOT <= 100 ms. Engines: --gpu-memory-utilization 0.12 each (the driver's: five
# engines share the GPU; the KV is sized in bytes, so the utilization only gates each engine's start-up check).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${1:?give the output folder}"; shift
export PYTHONPATH="${PYTHONPATH:-/tmp/site}" NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
exec "${PYTHON:-python3}" "$ROOT/tests/gpu/tune_ab.py" --vllm "${VLLM:-/tmp/site/bin/vllm}" --vllm-version 0.26.0 --out "$OUT" \
  --work "${WORK:-/tmp/gpufleet-tune-kv}" --host h200 --model-config Qwen__Qwen3-8B --max-model-len 16384 \
  --kv-cache-memory-bytes 4831838208 --allow-lossy --parallel-starts --engine-gpu-memory-utilization 0.12 \
  --repeats 2 --runs-per-launch 1 --budget-seconds "${BUDGET:-480}" \
  --workloads '[{"name": "reuse", "dataset": "prefix_repetition", "prefix_len": 8000, "input_len": 200, "num_prefixes": 8, "output_len": 128, "num_prompts": 48, "concurrency": [4]}, {"name": "long", "input_len": 8000, "range_ratio": 0.0, "output_len": 256, "num_prompts": 32, "concurrency": [16]}]' \
  --slo '{"goodput_ttft_ms": 10000, "goodput_tpot_ms": 100}' \
  --extra-env '{"VLLM_USE_FLASHINFER_SAMPLER": "0"}' "$@"
