# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Weight bytes from config.json, checked against real index totals (metadata.total_size).

Expected totals come from the real model.safetensors.index.json heads in tests/fixtures/model-configs
(INDEX.md gives their provenance), never from the estimate itself.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import weight_estimate as we

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "model-configs")


def raw(name):
    with open(os.path.join(FIXTURES, name)) as fh:
        return json.load(fh)


def index_total(name):
    """metadata.total_size from a (partial) real index copy."""
    with open(os.path.join(FIXTURES, name)) as fh:
        text = fh.read()
    return int(text.split('"total_size":', 1)[1].split("}", 1)[0].strip())


@pytest.mark.parametrize("model", ["Qwen__Qwen3-14B", "Qwen__Qwen3-32B"])
def test_bf16_estimate_equals_real_index_total(model):
    total, source = we.estimate_weight_bytes(raw(model + ".config.json"))
    assert total == index_total(model + ".model.safetensors.index.PARTIAL.txt")
    assert source.startswith("estimate from config.json")


def test_online_fp8_shrinks_only_linear_weights():
    cfg = raw("Qwen__Qwen3-32B.config.json")
    bf16 = we.estimate_weight_bytes(cfg)[0]
    fp8, source = we.estimate_weight_bytes(cfg, online_quantization="fp8")
    counts = we.count_params(cfg)
    assert "online fp8" in source
    # Linear weights go from 2 bytes to 1; embeddings, lm_head and norms stay at bf16.
    assert bf16 - fp8 == counts["linear"] == we.online_fp8_saving(cfg)
    assert fp8 > bf16 // 2


def test_vision_tower_is_counted_for_vl_models():
    vl = we.count_params(raw("Qwen__Qwen3-VL-32B-Instruct.config.json"))
    text = we.count_params(raw("Qwen__Qwen3-32B.config.json"))
    assert vl["vision"] > 0 and text["vision"] == 0
    assert vl["linear"] == text["linear"]  # same language model shape as Qwen3-32B


@pytest.mark.parametrize("name,match", [
    ("deepseek-ai__DeepSeek-V3.config.json", "no parameter count for model_type 'deepseek_v3'"),
    ("nvidia__Qwen3.6-27B-NVFP4.config.json", "not one uniform scheme"),
])
def test_refuses_what_it_does_not_count(name, match):
    with pytest.raises(we.EstimateUnavailable, match=match):
        we.estimate_weight_bytes(raw(name))


@pytest.mark.parametrize("quant,per_param", [
    ({"quant_method": "fp8", "weight_block_size": [128, 128]}, 1 + 4.0 / 16384),
    ({"quant_method": "gptq", "bits": 4, "group_size": 128}, 0.5 + 2.0 / 128 + 0.5 / 128),
    ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {
        "weights": {"num_bits": 4, "type": "int", "group_size": 128, "symmetric": True}}}}, 0.5 + 2.0 / 128),
])
def test_checkpoint_quantization_bytes_per_linear_param(quant, per_param):
    cfg = dict(raw("Qwen__Qwen3-14B.config.json"), quantization_config=quant)
    counts = we.count_params(cfg)
    total, source = we.estimate_weight_bytes(cfg)
    rest = (counts["embedding"] + counts["other"]) * 2
    assert total == int(rest + counts["linear"] * per_param)
    assert quant["quant_method"] in source
