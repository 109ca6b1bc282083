# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 28 (truth round 3), checked on real outputs of the project's 2 x H200 host running vLLM 0.26.0
(tests/fixtures/gpu-acceptance: gpu_facts.json is gpu_facts' own result there, cases/*.engine.log the
engines' whole logs, results.json the argv each engine ran with)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu import hardware_profiles as hp
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan.planner import build_plan

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures")
ACC = os.path.join(FIXTURES, "gpu-acceptance")
GIB = 1024 ** 3


def _json(*parts):
    with open(os.path.join(*parts)) as fh:
        return json.load(fh)


def _read(*parts):
    with open(os.path.join(*parts)) as fh:
        return fh.read()


FACTS = _json(ACC, "gpu_facts.json")["nvml"]
UTIL_CASES = [c for c in _json(ACC, "results.json")["cases"] if not c["exact"]]


def _flag(argv, name):
    return argv[argv.index(name) + 1]


def _util_plan(case, gpus):
    model = case["model"]
    raw = _json(FIXTURES, "model-configs", model + ".config.json")
    total = int(re.search(r'"total_size":\s*(\d+)', _read(FIXTURES, "model-configs", model + ".model.safetensors.index.PARTIAL.txt")).group(1))
    argv = case["argv"]
    params = dict(model="unused", gpus=gpus, tensor_parallel_size=int(_flag(argv, "--tensor-parallel-size")),
                  pipeline_parallel_size=1, instances=1, max_model_len=int(_flag(argv, "--max-model-len")),
                  kv_cache_dtype="auto", gpu_memory_utilization=float(_flag(argv, "--gpu-memory-utilization")),
                  enable_prefix_caching=True, num_speculative_tokens=0, host="127.0.0.1", port_base=8000,
                  extra_args=["--enforce-eager"], vllm_version="0.26.0")
    return build_plan(params, raw, "unused", weights_total=total, weights_source="index")


def test_cuda_total_of_the_real_h200_is_the_engines():
    """gpu_facts' NVML total minus the gap once = the total vLLM logged on that host ("(139.29/139.8 GiB)")."""
    gpu = FACTS["gpus"][0]
    log = _read(ACC, "cases", "dense-qwen3-14b-tp1-util.engine.log")
    logged_total = float(re.search(r"Free memory on device \([\d.]+/([\d.]+) GiB\)", log).group(1))
    assert gpu["memory_total_bytes"] == 150754820096
    assert round(hp.cuda_total(gpu["name"], gpu["memory_total_bytes"]) / float(GIB), 2) == logged_total == 139.8
    assert hp.cuda_total(gpu["name"], gpu["memory_total_bytes"]) == 150109880320


def test_declared_profile_holds_the_same_total_as_gpu_facts():
    """The h200 profile's memory_total_bytes is what gpu_facts reports (NVML), not the CUDA total."""
    assert hp.PROFILES["h200"]["memory_total_bytes"] == FACTS["gpus"][0]["memory_total_bytes"]


@pytest.mark.parametrize("case", UTIL_CASES, ids=[c["id"] for c in UTIL_CASES])
def test_profile_h200_plans_what_gpu_facts_plans(case):
    """Round 2 subtracted the 615 MiB gap twice for the profile (-0.6 % to -1.3 %): the same plan now."""
    tp = int(_flag(case["argv"], "--tensor-parallel-size"))
    from_facts = _util_plan(case, FACTS)["capacity"]
    from_profile = _util_plan(case, {"profile": "h200", "count": tp})["capacity"]
    assert from_profile["available_kv_bytes"] == from_facts["available_kv_bytes"]
    assert from_profile["kv_cache_tokens"] == from_facts["kv_cache_tokens"]
    assert abs(from_profile["kv_cache_tokens"] / float(case["logged_kv_tokens"]) - 1) <= 0.01


def test_oom_check_uses_the_cuda_total():
    """kv_cache_memory_bytes that fits the NVML total but not CUDA's is refused (vLLM sizes from CUDA's)."""
    case = UTIL_CASES[0]
    raw = _json(FIXTURES, "model-configs", case["model"] + ".config.json")
    cuda = hp.cuda_total(FACTS["gpus"][0]["name"], FACTS["gpus"][0]["memory_total_bytes"])
    weights = 27 * GIB
    params = dict(model="unused", gpus=FACTS, tensor_parallel_size=1, instances=1, max_model_len=4096,
                  memory_overhead_bytes=GIB, vllm_version="0.26.0")
    # 100 MiB under the NVML total but 515 MiB above CUDA's.
    params["kv_cache_memory_bytes"] = FACTS["gpus"][0]["memory_total_bytes"] - weights - GIB - 100 * 1024 ** 2
    codes = [f["code"] for f in build_plan(params, raw, "unused", weights_total=weights, weights_source="index")["findings"]]
    assert "kv_memory_exceeds_gpu" in codes
    params["kv_cache_memory_bytes"] = cuda - weights - GIB
    codes = [f["code"] for f in build_plan(params, raw, "unused", weights_total=weights, weights_source="index")["findings"]]
    assert "kv_memory_exceeds_gpu" not in codes


ALL_CASES = _json(ACC, "results.json")["cases"]


@pytest.mark.parametrize("case", ALL_CASES, ids=[c["id"] for c in ALL_CASES])
def test_runner_table_matches_the_engines_own_choice(case):
    """vLLM 0.26.0 logs "Using V2 Model Runner" for the dense cases only (MoE and hybrid stay on V1)."""
    from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import engine_memory as em
    from ansible_collections.gpufleet.vllm.plugins.module_utils.plan.model_config import parse_config

    cfg = parse_config(_json(FIXTURES, "model-configs", case["model"] + ".config.json"))
    spec = "mtp" if "--speculative-config" in case["argv"] else None
    runner, reason = em.model_runner(cfg, "0.26.0", spec)
    logged = "Using V2 Model Runner" in _read(ACC, "cases", case["id"] + ".engine.log")
    assert (runner == "v2") is logged, reason


def test_runner_override_and_releases():
    from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import engine_memory as em
    from ansible_collections.gpufleet.vllm.plugins.module_utils.plan.model_config import parse_config

    moe = parse_config(_json(FIXTURES, "model-configs", "Qwen__Qwen3-30B-A3B.config.json"))
    assert em.model_runner(moe, "0.26.0")[0] == "v1"
    assert em.model_runner(moe, "0.32.0")[0] == "v2"      # 0.32.0: V2 for every family
    assert em.model_runner(moe, "0.25.0")[0] == "v1"      # not read: the runner that takes more off
    assert em.model_runner(moe, "0.26.0", environment={"VLLM_USE_V2_MODEL_RUNNER": "1"})[0] == "v2"
    assert em.model_runner(moe, "0.32.0", speculative_method="ngram")[0] == "v1"


@pytest.mark.parametrize("case", UTIL_CASES, ids=[c["id"] for c in UTIL_CASES])
def test_calibration_from_the_engines_boot_log(case):
    """Fed its own boot log, the plan is at most 0.05 % under the engine's KV tokens and never above."""
    log = _read(ACC, "cases", case["id"] + ".engine.log")
    got = _calibrated_plan(case, log)
    cap = got["capacity"]
    assert cap["estimate"]["calibrated"] is True and "kv_calibrated" in [f["code"] for f in got["findings"]]
    assert cap["kv_cache_tokens"] <= case["logged_kv_tokens"]
    assert cap["kv_cache_tokens"] >= case["logged_kv_tokens"] * (1 - 0.0005), (cap["kv_cache_tokens"], case["logged_kv_tokens"])


def _calibrated_plan(case, log):
    model = case["model"]
    raw = _json(FIXTURES, "model-configs", model + ".config.json")
    argv = case["argv"]
    params = dict(model="unused", gpus=FACTS, tensor_parallel_size=int(_flag(argv, "--tensor-parallel-size")),
                  pipeline_parallel_size=1, instances=1, max_model_len=int(_flag(argv, "--max-model-len")),
                  kv_cache_dtype="auto", gpu_memory_utilization=float(_flag(argv, "--gpu-memory-utilization")),
                  enable_prefix_caching=True, num_speculative_tokens=0, host="127.0.0.1", port_base=8000,
                  extra_args=["--enforce-eager"], vllm_version="0.26.0", calibration_log=log)
    return build_plan(params, raw, "unused", weights_total=1, weights_source="index")


def test_calibration_log_without_the_usage_line_is_refused_by_name():
    """A --kv-cache-memory-bytes engine skips profiling and prints no "Actual usage" line."""
    log = _read(ACC, "cases", "dense-bf16-tp1.engine.log")
    got = _calibrated_plan(UTIL_CASES[0], log)
    errors = [f for f in got["findings"] if f["code"] == "calibration_log_unusable"]
    assert errors and "Actual usage" in errors[0]["message"] and "--gpu-memory-utilization" in errors[0]["message"]
