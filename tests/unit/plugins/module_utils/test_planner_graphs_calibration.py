# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 28: the utilization-only KV estimate against REAL vLLM 0.26.0 engines on one H200.

One row per real run: CUDA graphs on (tests/fixtures/gpu-acceptance/graphs-0.26.0/cases: dense Qwen3-8B on the
V2 runner, MoE Qwen3-30B-A3B and hybrid Qwen3.6-27B on the V1 runner) and eager (tests/fixtures/gpu-acceptance
cases/ and rerun/: Qwen3-14B TP1, Qwen3-32B TP2). The expected figure is the "GPU KV cache size: N tokens"
line of each committed engine log; the plan's argv comes from the argv that engine ran with (results.json).
The estimate must be within 1 % of the engine and never above it; fed the engine's own boot log
(calibration_log) the plan is exact within 0.05 % and never above.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import engine_memory as em
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan.planner import build_plan

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures")
ACC = os.path.join(FIXTURES, "gpu-acceptance")
GIB = 1024 ** 3


def _read(*parts):
    with open(os.path.join(*parts)) as fh:
        return fh.read()


def _json(*parts):
    return json.loads(_read(*parts))


FACTS = _json(ACC, "gpu_facts.json")["nvml"]
GRAPH_ARGV = dict((c["id"], c) for c in _json(ACC, "graphs-0.26.0", "results.json")["cases"])
EAGER_ARGV = dict((c["id"], c) for c in _json(ACC, "results.json")["cases"])

# (log folder, case id, results.json table, runner the engine logged, weights from the safetensors index)
RUNS = [
    ("graphs-0.26.0/cases", "graphs-dense-qwen3-8b-util", GRAPH_ARGV, "v2", False),
    ("graphs-0.26.0/cases", "graphs-moe-qwen3-30b-a3b-util", GRAPH_ARGV, "v1", False),
    ("graphs-0.26.0/cases", "graphs-hybrid-qwen3.6-27b-util", GRAPH_ARGV, "v1", False),
    ("cases", "dense-qwen3-14b-tp1-util", EAGER_ARGV, "v2", True),
    ("cases", "dense-qwen3-32b-tp2-util", EAGER_ARGV, "v2", True),
    ("rerun", "dense-qwen3-14b-tp1-util", EAGER_ARGV, "v2", True),
    ("rerun", "dense-qwen3-32b-tp2-util", EAGER_ARGV, "v2", True),
]
IDS = ["%s/%s" % (r[0].split("/", maxsplit=1)[0], r[1]) for r in RUNS]
GRAPH_RUNS = [r for r in RUNS if r[0].startswith("graphs")]


def _logged_tokens(folder, case_id):
    log = _read(ACC, folder, case_id + ".engine.log")
    return int(re.search(r"GPU KV cache size: ([\d,]+) tokens", log).group(1).replace(",", "")), log


def _flag(argv, name):
    return argv[argv.index(name) + 1]


def _plan(case, with_index, **extra):
    argv = case["argv"]
    model = case["model"]
    raw = _json(FIXTURES, "model-configs", model + ".config.json")
    params = dict(model="unused", gpus=FACTS, tensor_parallel_size=int(_flag(argv, "--tensor-parallel-size")),
                  pipeline_parallel_size=1, instances=1, max_model_len=int(_flag(argv, "--max-model-len")),
                  kv_cache_dtype="auto", gpu_memory_utilization=float(_flag(argv, "--gpu-memory-utilization")),
                  enable_prefix_caching="--no-enable-prefix-caching" not in argv, num_speculative_tokens=0,
                  host="127.0.0.1", port_base=8000, vllm_version="0.26.0",
                  language_model_only="--language-model-only" in argv,
                  extra_args=["--enforce-eager"] if "--enforce-eager" in argv else [])
    params.update(extra)
    if not with_index:
        return build_plan(params, raw, "unused")
    index = _read(FIXTURES, "model-configs", model + ".model.safetensors.index.PARTIAL.txt")
    total = int(re.search(r'"total_size":\s*(\d+)', index).group(1))
    return build_plan(params, raw, "unused", weights_total=total, weights_source="index")


@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_utilization_estimate_within_one_percent_and_never_above(run):
    folder, case_id, table, runner, with_index = run
    logged, log = _logged_tokens(folder, case_id)
    assert ("Using V2 Model Runner" in log) is (runner == "v2")
    assert ("--enforce-eager" in table[case_id]["argv"]) is (not folder.startswith("graphs"))
    cap = _plan(table[case_id], with_index)["capacity"]
    assert cap["estimate"]["model_runner"] == runner
    rel = cap["kv_cache_tokens"] / float(logged) - 1
    assert -0.01 <= rel <= 0, (cap["kv_cache_tokens"], logged, rel)


BENCH = os.path.join(FIXTURES, "bench", "h200-0.26.0")


def _unit_argv(path):
    """The argv of a committed unit's ExecStart (the engine ran it plus --load-format dummy)."""
    line = [x for x in _read(path).splitlines() if x.startswith("ExecStart=")][0]
    return line[len("ExecStart="):].split()


def test_bench_dense_run_with_graphs():
    """A second real graphs-on dense engine (tests/fixtures/bench/h200-0.26.0, its own unit and whole log)."""
    logged = int(re.search(r"GPU KV cache size: ([\d,]+) tokens", _read(BENCH, "bench-dense-qwen3-8b-32k.engine.log")).group(1).replace(",", ""))
    case = {"model": "Qwen__Qwen3-8B", "argv": _unit_argv(os.path.join(BENCH, "bench-dense-qwen3-8b-32k.service"))}
    cap = _plan(case, False)["capacity"]
    assert -0.01 <= cap["kv_cache_tokens"] / float(logged) - 1 <= 0, (cap["kv_cache_tokens"], logged)


def test_yarn_128k_dense_run_with_graphs():
    """The 128K YaRN x4 graphs-on run (tests/gpu/cases.yml bench-dense-qwen3-8b-128k): its engine "started and
    logged 793,744 tokens / 6.06x" (tests/fixtures/bench/h200-0.26.0/README.md; the log itself was not kept)."""
    text = _read(BENCH, "README.md")
    match = re.search(r"logged ([\d,]+) tokens / ([\d.]+)x", text)
    logged, conc = int(match.group(1).replace(",", "")), float(match.group(2))
    assert (logged, conc) == (793744, 6.06)
    case = {"model": "Qwen__Qwen3-8B", "argv": ["--tensor-parallel-size", "1", "--max-model-len", "131072",
                                                "--gpu-memory-utilization", "0.9", "--enable-prefix-caching"]}
    cap = _plan(case, False, yarn={"factor": 4.0, "original_max_position_embeddings": 32768})["capacity"]
    assert -0.01 <= cap["kv_cache_tokens"] / float(logged) - 1 <= 0, (cap["kv_cache_tokens"], logged)
    assert conc - 0.07 <= round(cap["max_concurrency"], 2) <= conc


@pytest.mark.parametrize("run", GRAPH_RUNS, ids=[r[1] for r in GRAPH_RUNS])
def test_calibration_from_the_graphs_boot_log_is_exact(run):
    folder, case_id, table, runner, with_index = run
    logged, log = _logged_tokens(folder, case_id)
    got = _plan(table[case_id], with_index, calibration_log=log)
    cap = got["capacity"]
    assert cap["estimate"]["calibrated"] is True
    assert cap["estimate"]["calibration"]["runner"] == runner
    assert cap["kv_cache_tokens"] <= logged
    assert cap["kv_cache_tokens"] >= logged * (1 - 0.0005), (cap["kv_cache_tokens"], logged)


def test_calibration_subtracts_the_graph_estimate_not_the_capture():
    """The V1 engine subtracted "Estimated CUDA graph memory: 0.64 GiB total" and captured 0.8 GiB after sizing;
    the V2 engine subtracted nothing and captured 1.0 GiB (graphs-0.26.0/README.md)."""
    moe = em.calibration_from_log(_read(ACC, "graphs-0.26.0", "cases", "graphs-moe-qwen3-30b-a3b-util.engine.log"))
    dense = em.calibration_from_log(_read(ACC, "graphs-0.26.0", "cases", "graphs-dense-qwen3-8b-util.engine.log"))
    assert (moe["cudagraph_bytes"], moe["cudagraph_captured_bytes"]) == (int(round(0.64 * GIB)), int(round(0.8 * GIB)))
    assert (dense["cudagraph_bytes"], dense["cudagraph_captured_bytes"]) == (0, int(round(1.0 * GIB)))


@pytest.mark.parametrize("folder, case_id", [(r[0], r[1]) for r in GRAPH_RUNS], ids=[r[1] for r in GRAPH_RUNS])
def test_engine_terms_add_up_as_determine_available_memory_does(folder, case_id):
    """requested - weights - activation - non-torch - (V1's graph estimate) = the logged available KV, to the
    rounding of the 2-decimal figures: the rule profile_overhead models (0.26.0 gpu_worker.py)."""
    cal = em.calibration_from_log(_read(ACC, folder, case_id + ".engine.log"))
    requested = int(cal["gpu_memory_utilization"] * cal["cuda_total_gib"] * GIB)
    computed = requested - cal["weights_bytes"] - cal["activation_bytes"] - cal["non_torch_bytes"] - cal["cudagraph_bytes"]
    assert abs(computed - cal["available_kv_bytes"]) <= 4 * em.ROUNDING + 0.01 * GIB


# (release, GPU name, CUDA total GiB, compute capability, (max_num_batched_tokens, max_num_seqs)), from each
# release's engine/arg_utils.py (0.26.0 _get_default_max_num_batched_tokens_and_seqs; 0.32.0 / 0.33.0 add the
# >= 160 GiB B200/B300 tier; 0.33.0 keeps GB10, compute capability 12.1, out of the 70 GiB tier).
SCHEDULER_ROWS = [
    ("0.26.0", "NVIDIA H200", 139.8, "9.0", (8192, 1024)),
    ("0.26.0", "NVIDIA A100-SXM4-80GB", 79.25, "8.0", (2048, 256)),
    ("0.26.0", "NVIDIA B200", 178.4, "10.0", (8192, 1024)),
    ("0.26.0", "NVIDIA GeForce RTX 4090", 23.5, "8.9", (2048, 256)),
    ("0.32.0", "NVIDIA B200", 178.4, "10.0", (16384, 1024)),
    ("0.32.0", "NVIDIA H200", 139.8, "9.0", (8192, 1024)),
    ("0.32.0", "NVIDIA A100-SXM4-80GB", 79.25, "8.0", (2048, 256)),
    ("0.33.0", "NVIDIA B200", 178.4, "10.0", (16384, 1024)),
    ("0.33.0", "NVIDIA GB10", 119.7, "12.1", (2048, 256)),
    ("0.33.0", "NVIDIA H100 80GB HBM3", 79.2, "9.0", (8192, 1024)),
    ("0.29.0", "NVIDIA B200", 178.4, "10.0", (8192, 1024)),   # not read: follows 0.26.0, the last read below
]


@pytest.mark.parametrize("row", SCHEDULER_ROWS, ids=["%s-%s" % (r[0], r[1]) for r in SCHEDULER_ROWS])
def test_scheduler_defaults_per_release_and_gpu_class(row):
    version, name, total_gib, cc, expected = row
    assert em.scheduler_defaults(int(total_gib * GIB), name, version, cc) == expected


def _a100_plan(**over):
    raw = _json(FIXTURES, "model-configs", "Qwen__Qwen3-8B.config.json")
    params = dict(model="unused", gpus={"profile": "a100-80gb", "count": 1}, tensor_parallel_size=1, instances=1,
                  max_model_len=32768, gpu_memory_utilization=0.9, vllm_version="0.26.0")
    params.update(over)
    return build_plan(params, raw, "unused")["capacity"]["estimate"]["overhead_bytes"]


def test_plan_takes_the_a100_defaults_and_the_engine_flags():
    """An A100 80GB runs 2048 batched tokens and 256 sequences on 0.26.0 (the H100-class 8192 / 1024 made the
    activation peak about 4x too big); --max-num-seqs / --max-num-batched-tokens in extra_args replace them."""
    cfg = {"hidden_size": 4096, "vocab_size": 151936, "dtype_bytes": 2}
    text = {"intermediate_size": 12288}
    small = em.profile_overhead(text, cfg, 1, 80 * GIB, gpu={"name": "NVIDIA A100-SXM4-80GB"})
    assert small == em.NON_TORCH_BOUND + 2048 * 3 * 12288 * 2 + 256 * 151936 * (2 + 4)
    assert _a100_plan() == small
    assert _a100_plan(extra_args=["--max-num-seqs", "1024", "--max-num-batched-tokens=8192"]) == em.profile_overhead(
        text, cfg, 1, 140 * GIB, gpu={"name": "NVIDIA H200"})


@pytest.mark.parametrize("run", GRAPH_RUNS, ids=[r[1] for r in GRAPH_RUNS])
def test_oom_check_counts_the_graphs_captured_after_the_kv_cache(run):
    """vLLM's own "--kv-cache-memory=N ... to fit into requested memory" (each graphs log) is requested - weights -
    activation - non-torch - CAPTURED graphs - 150 MiB: so the whole GPU holds at most CUDA total - (requested - N -
    150 MiB) of KV. 64 MiB more is refused; 1 GiB less is planned."""
    from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu import hardware_profiles as hp

    folder, case_id, table, runner, with_index = run
    log = _read(ACC, folder, case_id + ".engine.log")
    suggested = int(re.search(r"--kv-cache-memory=(\d+)", log).group(1))
    total = hp.cuda_total(FACTS["gpus"][0]["name"], FACTS["gpus"][0]["memory_total_bytes"])
    requested = -(-9 * total // 10)
    assert requested == 135098892288  # "Desired GPU memory utilization is (0.9, 125.82 GiB)"
    non_kv = requested - suggested - 150 * 1024 ** 2
    for kv_bytes, refused in ((total - non_kv + 64 * 1024 ** 2, True), (total - non_kv - GIB, False)):
        got = _plan(table[case_id], with_index, gpu_memory_utilization=None, kv_cache_memory_bytes=kv_bytes)
        assert ("kv_memory_exceeds_gpu" in [f["code"] for f in got["findings"]]) is refused, (kv_bytes, refused)


def test_capture_set_matches_the_engines_own_profile_line():
    """The V1 logs: "Profiling CUDA graph memory: PIECEWISE=51 (largest=512), FULL=51 (largest=512)" at the H200
    defaults (1024 sequences, 8192 batched tokens). 32 sequences: 1, 2, 4, 8, ..., 64 (11 sizes), the set on which
    the V2 dense engine took 0.17 GiB instead of 1.00 (VLLM_FACTS round 3), inside the scaled bound."""
    log = _read(ACC, "graphs-0.26.0", "cases", "graphs-moe-qwen3-30b-a3b-util.engine.log")
    count, largest = (int(x) for x in re.search(r"PIECEWISE=(\d+) \(largest=(\d+)\)", log).groups())
    assert (count, largest) == (51, 512)
    assert em.capture_sizes(1024, 8192) == count
    assert em.capture_sizes(32, 8192) == 11
    assert em.graph_bound(em.GRAPH_CAPTURE_BOUND, 32, 8192, 0) >= int(0.17 * GIB)
    assert em.graph_bound(em.GRAPH_CAPTURE_BOUND, 1024, 8192, 0) >= int(1.14 * GIB)
