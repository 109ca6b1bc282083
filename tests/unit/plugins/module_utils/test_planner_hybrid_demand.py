# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 28, hybrid models: the demand check counts the state blocks each request takes, and the plan says
which prefix-caching default the release has for a hybrid model.

Real figures (vLLM 0.26.0, H200, tests/fixtures/gpu-acceptance/cases): Qwen3.6-27B with 8 GiB of KV logged
"Setting attention block size to 784 tokens", /metrics num_gpu_blocks 167 and "Maximum concurrency for 65,536
tokens per request: 1.86x" with prefix caching (1.92x without). 167 / 1.86 = 90 blocks per request = 84 attention
blocks (65,536 / 784, rounded up) + 6 state blocks (3 linear-attention groups x 2); 167 / 1.92 = 87 = 84 + 3.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.plan.planner import build_plan

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures")
ACC = os.path.join(FIXTURES, "gpu-acceptance")
GIB = 1024 ** 3
CASES = dict((c["id"], c) for c in json.load(open(os.path.join(ACC, "results.json")))["cases"])


def _real(case_id):
    """(block size, num_blocks, blocks per request) from the engine's own log and /metrics figures."""
    case = CASES[case_id]
    with open(os.path.join(ACC, "cases", case_id + ".engine.log")) as fh:
        log = fh.read()
    block = int(re.search(r"Setting attention block size to (\d+) tokens", log).group(1))
    conc = float(re.search(r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x", log).group(1))
    blocks = case["metrics_num_gpu_blocks"]
    return block, blocks, int(round(blocks / conc))


def _plan(prefix, prompt, concurrency):
    with open(os.path.join(FIXTURES, "model-configs", "Qwen__Qwen3.6-27B.config.json")) as fh:
        raw = json.load(fh)
    params = dict(model="unused", gpus={"profile": "h200", "count": 1}, tensor_parallel_size=1, instances=1,
                  max_model_len=65536, kv_cache_memory_bytes=8 * GIB, enable_prefix_caching=prefix,
                  language_model_only=True, extra_args=["--enforce-eager"], vllm_version="0.26.0",
                  expected_prompt_tokens=prompt, expected_concurrency=concurrency)
    return build_plan(params, raw, "unused")


ROWS = [("hybrid-qwen3.6-27b-tp1-prefix", True, 6), ("hybrid-qwen3.6-27b-tp1-noprefix", False, 3)]


@pytest.mark.parametrize("case_id, prefix, state", ROWS, ids=[r[0] for r in ROWS])
@pytest.mark.parametrize("prompt", [4096, 8192, 32768, 65536])
def test_demand_check_counts_state_blocks(case_id, prefix, state, prompt):
    block, blocks, per_request_at_max = _real(case_id)
    assert per_request_at_max == -(-65536 // block) + state
    fit = blocks // (-(-prompt // block) + state)   # requests of this length the engine's pool holds
    ok = _plan(prefix, prompt, fit)
    assert ok["capacity"]["num_blocks"] == blocks
    assert "demand_exceeds_gpu_kv" not in [f["code"] for f in ok["findings"]]
    over = [f for f in _plan(prefix, prompt, fit + 1)["findings"] if f["code"] == "demand_exceeds_gpu_kv"]
    assert over and ("%d state blocks" % state) in over[0]["message"] and ("%d requests fit" % fit) in over[0]["message"]


def _prefix_plan(version, prefix):
    with open(os.path.join(FIXTURES, "model-configs", "Qwen__Qwen3.6-27B.config.json")) as fh:
        raw = json.load(fh)
    params = dict(model="unused", gpus={"profile": "h200", "count": 1}, tensor_parallel_size=1, instances=1,
                  max_model_len=65536, kv_cache_memory_bytes=8 * GIB, enable_prefix_caching=prefix,
                  language_model_only=True, vllm_version=version)
    return build_plan(params, raw, "unused")


# (release, vLLM's default for a hybrid model as its engine/arg_utils.py sets it). The real 0.26.0 engines of
# graphs-0.26.0 and cases/ had the flag rendered explicitly (--enable-prefix-caching / --no-enable-prefix-caching).
PREFIX_ROWS = [("0.26.0", "off"), ("0.29.0", "off"), ("0.32.0", "on"), ("0.33.0", "on")]


@pytest.mark.parametrize("version, default", PREFIX_ROWS, ids=[r[0] for r in PREFIX_ROWS])
@pytest.mark.parametrize("prefix", [True, False])
def test_plan_says_the_releases_hybrid_prefix_caching_default(version, default, prefix):
    got = _prefix_plan(version, prefix)
    said = [f for f in got["findings"] if f["code"] == "hybrid_prefix_caching_default"]
    flag = "--enable-prefix-caching" if prefix else "--no-enable-prefix-caching"
    assert said and ("prefix caching %s by default" % default) in said[0]["message"] and flag in said[0]["message"]
    assert flag in got["instances"][0]["argv"]


def test_dense_plan_says_nothing_about_hybrid_prefix_caching():
    with open(os.path.join(FIXTURES, "model-configs", "Qwen__Qwen3-8B.config.json")) as fh:
        raw = json.load(fh)
    params = dict(model="unused", gpus={"profile": "h200", "count": 1}, max_model_len=32768, kv_cache_memory_bytes=8 * GIB,
                  vllm_version="0.26.0")
    assert "hybrid_prefix_caching_default" not in [f["code"] for f in build_plan(params, raw, "unused")["findings"]]


def test_rtx4090x4_example_demand_no_longer_overstated():
    """Issue 28's outside check: on inventories/examples/rtx4090x4 (Qwen3.6-27B TP4, MTP 3, 32K prompts) the demand
    check counted the pool as if it held only attention blocks and overstated capacity 1.76x; each request of 32,768
    tokens takes cdiv(32768, 1600) = 21 attention blocks + 3 linear groups x (2 + 3 speculative) state blocks."""
    import yaml

    with open(os.path.join(FIXTURES, "..", "..", "inventories", "examples", "rtx4090x4", "group_vars", "all.yml")) as fh:
        inv = yaml.safe_load(fh)
    with open(os.path.join(FIXTURES, "model-configs", "Qwen__Qwen3.6-27B.config.json")) as fh:
        raw = json.load(fh)
    params = dict(inv["gpufleet_serving"], model="unused", gpus=inv["gpufleet_hardware"], vllm_version="0.33.0")
    cap = build_plan(params, raw, "unused")["capacity"]
    holds = cap["offload"]["tokens_beyond_gpu"] == 0
    fit = cap["num_blocks"] // (-(-32768 // cap["block_size"]) + 3 * (2 + 3))
    assert holds and fit >= 16
    assert round(cap["kv_pool_tokens"] / float(fit * 32768), 2) >= 1.75
    over = dict(params, expected_concurrency=fit + 1, cpu_offload_bytes=None)
    codes = [f["code"] for f in build_plan(over, raw, "unused")["findings"]]
    assert "demand_exceeds_gpu_kv" in codes
