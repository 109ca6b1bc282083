# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Windowed-attention refusal, weight resolution and GPU profiles.

The windowed-attention cases are excerpts (only the attention keys) of public configs, each with
where it was read; they are not whole config.json files.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import model_families as fam
from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu.hardware_profiles import PROFILES, hardware_profile, cuda_total
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan.placement import PlacementError

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "model-configs")
GIB = 1024 ** 3


def raw(name):
    with open(os.path.join(FIXTURES, name)) as fh:
        return json.load(fh)


WINDOWED = [
    # gpt-oss-20b: alternating sliding (128) / full layers (openai/gpt-oss-20b config.json keys).
    ("gpt-oss", {"model_type": "gpt_oss", "sliding_window": 128,
                 "layer_types": ["sliding_attention", "full_attention"] * 12}, "12 of 24 layers use sliding_attention"),
    # Llama 4 Maverick text_config (TensorRT-LLM test constant LLAMA_4_MAVERICK_TWO_LAYER_CONFIG, search id 115210306).
    ("llama4", {"model_type": "llama4", "text_config": {"model_type": "llama4_text", "attention_chunk_size": 8192}},
     "chunked-local attention (attention_chunk_size 8192)"),
    # mistralai/Mistral-7B-v0.1: every layer windowed at 4096.
    ("mistral", {"model_type": "mistral", "sliding_window": 4096}, "sliding-window attention (sliding_window 4096)"),
]


@pytest.mark.parametrize("name,config,desc", WINDOWED, ids=[w[0] for w in WINDOWED])
def test_windowed_attention_is_refused_by_name(name, config, desc):
    findings = fam.windowed_attention_findings(config)
    assert [f["code"] for f in findings] == ["windowed_attention_not_modelled"]
    assert findings[0]["level"] == "error" and desc in findings[0]["message"]


@pytest.mark.parametrize("name", ["Qwen__Qwen2.5-7B-Instruct-1M.config.json", "Qwen__Qwen3-32B.config.json",
                                  "Qwen__Qwen3.6-27B.config.json", "meta-llama__Llama-3.1-8B-Instruct.config.json"])
def test_full_attention_models_pass(name):
    # Qwen2.5 carries sliding_window with use_sliding_window false: vLLM ignores the window.
    assert fam.windowed_attention_findings(raw(name)) == []


def test_resolve_weights_exact_total_wins_over_estimate():
    total, source, findings = fam.resolve_weights(raw("Qwen__Qwen3-14B.config.json"), [], 123, "index")
    assert (total, source, findings) == (123, "index", [])


def test_resolve_weights_online_fp8_on_exact_total():
    cfg = raw("Qwen__Qwen3-32B.config.json")
    total, source, findings = fam.resolve_weights(cfg, ["--quantization", "fp8"], 65524246528, "index")
    assert total == 65524246528 - 31205621760  # the real index total minus one byte per linear parameter
    assert "--quantization fp8" in source and findings[0]["code"] == "fp8_online_weights"


def test_resolve_weights_without_estimate_warns():
    total, _source, findings = fam.resolve_weights(raw("deepseek-ai__DeepSeek-V3.config.json"), [], None, None)
    assert total is None and findings[0]["code"] == "weights_not_estimated"


@pytest.mark.parametrize("args,expected", [
    (["--quantization", "fp8"], "fp8"), (["--quantization=fp8"], "fp8"), (["-q", "awq"], "awq"), (["--max-num-seqs", "8"], None)])
def test_online_quantization_from_extra_args(args, expected):
    assert fam.online_quantization(args) == expected


def test_profiles_use_driver_memory_not_marketing_size():
    # The profile holds nvidia-smi's 81920 MiB (what gpu_facts reports); vLLM gets CUDA's 81251 MiB, below 80 GiB.
    a100 = PROFILES["a100-80gb"]
    assert a100["memory_total_bytes"] == 81920 * 1024 ** 2
    assert cuda_total(a100["name"], a100["memory_total_bytes"]) == 81251 * 1024 ** 2 < 80 * GIB
    assert PROFILES["h100"]["memory_total_bytes"] == 85520809984  # nvidia-smi 81559 MiB (modal-client#2797)
    assert all(p["source"] for p in PROFILES.values())
    gpus = fam.expand_gpus({"profile": "H100", "count": 4})
    assert gpus == hardware_profile("h100", 4)
    assert gpus["count"] == 4 and gpus["numa_nodes"] == [[0, 1, 2, 3]]


def test_unknown_profile_names_the_choices():
    with pytest.raises(PlacementError, match="unknown GPU profile 'v100'.*a100-80gb"):
        fam.expand_gpus({"profile": "v100", "count": 2})
