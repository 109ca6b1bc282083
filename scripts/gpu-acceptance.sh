#!/usr/bin/env bash
# GPU acceptance suite: run on a GPU host with vLLM installed (never part of the CPU suite).
#
#   scripts/gpu-acceptance.sh --venv /opt/vllm/current --vllm-version 0.26.0 [--only id,id] [--out DIR] [--work DIR]
#
# 1. gpu_facts (nvml and nvidia-smi: must agree), gpu_preflight against what the host is,
#    vllm_plan for every case of tests/gpu/cases.yml from the live facts, and the vllm role's own
#    unit template rendered from each plan (tests/gpu/acceptance.yml, ansible-playbook on localhost);
# 2. the real engine started from each rendered unit (+ --load-format dummy), its KV lines read,
#    the role's health gate run for a real completion, /metrics scraped (tests/gpu/run_engines.py);
# 3. results.json + results.md + every log under --out.
# Environment: PYTHON (the interpreter that has ansible-core and vLLM's dependencies, default
# python3), GPU_ACC_ENV (JSON: extra engine environment, set through the role's vllm_environment),
# GPU_ACC_COMMON_ARGS (default --enforce-eager; a case's own common_args replace it), GPU_ACC_DEADLINE
# (seconds, default 3600). --work DIR keeps units, plans and engine logs there as the run goes (default:
# a new /tmp/gpu-acceptance.XXXXXX), so a run cut short still leaves them readable.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="" VERSION="" ONLY="" OUTDIR="$ROOT/gpu-acceptance-out" WORKDIR=""
while [ $# -gt 0 ]; do
  case "$1" in
    --venv) VENV="$2"; shift 2;;
    --vllm-version) VERSION="$2"; shift 2;;
    --only) ONLY="$2"; shift 2;;
    --out) OUTDIR="$2"; shift 2;;
    --work) WORKDIR="$2"; shift 2;;
    -h|--help) sed -n '2,18p' "$0"; exit 0;;
    *) echo "unknown argument $1 (see --help)" >&2; exit 2;;
  esac
done
[ -x "$VENV/bin/vllm" ] || { echo "--venv must name the vLLM environment (with bin/vllm), got '$VENV'" >&2; exit 2; }
[ -n "$VERSION" ] || { echo "--vllm-version is required (the installed vLLM's version selects the planner's rules)" >&2; exit 2; }
PY="${PYTHON:-python3}"
if [ -n "$WORKDIR" ]; then
  mkdir -p "$WORKDIR"; WORK="$(cd "$WORKDIR" && pwd)"
  [ -z "$(ls -A "$WORK")" ] || { echo "--work $WORK must be empty (it holds one run)" >&2; exit 2; }
else
  WORK="$(mktemp -d /tmp/gpu-acceptance.XXXXXX)"
fi
mkdir -p "$WORK/coll/ansible_collections/gpufleet" "$OUTDIR"
ln -s "$ROOT" "$WORK/coll/ansible_collections/gpufleet/vllm"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export GPU_ACC_WORK="$WORK/run" GPU_ACC_VENV="$VENV" GPU_ACC_VLLM_VERSION="$VERSION" GPU_ACC_ONLY="$ONLY"
PY_PATH="$(command -v "$PY")"
export ANSIBLE_COLLECTIONS_PATH="$WORK/coll" ANSIBLE_PYTHON_INTERPRETER="$PY_PATH" \
  ANSIBLE_LOCALHOST_WARNING=False ANSIBLE_INVENTORY_UNPARSED_WARNING=False ANSIBLE_NOCOLOR=1 \
  ANSIBLE_HOME="$WORK/ansible-home" LC_ALL=C.UTF-8 LANG=C.UTF-8
mkdir -p "$GPU_ACC_WORK"
"$PY" "$ROOT/tests/gpu/run_engines.py" prepare --work "$GPU_ACC_WORK"
set +e
"$PY" -m ansible.cli.playbook -i localhost, -c local "$ROOT/tests/gpu/acceptance.yml" 2>&1 | tee "$OUTDIR/ansible.log"
rc=${PIPESTATUS[0]}
set -e
[ "$rc" -eq 0 ] || { echo "the Ansible part failed (rc=$rc): see $OUTDIR/ansible.log" >&2; exit "$rc"; }
"$PY" "$ROOT/tests/gpu/run_engines.py" run --work "$GPU_ACC_WORK" --only "$ONLY" --deadline "${GPU_ACC_DEADLINE:-3600}"
"$PY" "$ROOT/tests/gpu/run_engines.py" report --work "$GPU_ACC_WORK" --out "$OUTDIR" --only "$ONLY"
cp "$GPU_ACC_WORK"/*.service "$GPU_ACC_WORK"/*.plan.json "$GPU_ACC_WORK"/*.engine.log "$GPU_ACC_WORK"/gpu_facts.json \
  "$OUTDIR"/ 2>/dev/null || true
cp "$GPU_ACC_WORK"/*.metrics.txt "$GPU_ACC_WORK"/*.bench.* "$OUTDIR"/ 2>/dev/null || true
echo "results: $OUTDIR/results.md"
