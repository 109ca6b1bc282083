# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import struct

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import model_config as mc

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "model-configs")


def load(name):
    with open(os.path.join(FIXTURES, name)) as fh:
        return mc.parse_config(json.load(fh))


@pytest.mark.parametrize("name,expected", [
    ("Qwen__Qwen3-14B.config.json", dict(attention="full", num_layers=40, num_kv_heads=8, head_dim=128, rope_theta=1000000,
                                         max_position_embeddings=40960, is_moe=False, family="qwen3")),
    ("Qwen__Qwen3-30B-A3B.config.json", dict(attention="full", num_layers=48, num_kv_heads=4, is_moe=True, family="qwen3_moe")),
    ("Qwen__Qwen3-VL-32B-Instruct.config.json", dict(attention="full", num_layers=64, num_kv_heads=8, rope_theta=5000000,
                                                     rope_scaling=None, is_multimodal=True, family="qwen3_vl")),
    ("Qwen__Qwen3.6-27B.config.json", dict(attention="hybrid", full_attention_layers=16, linear_attention_layers=48,
                                           head_dim=256, num_kv_heads=4, mtp_layers=1, rope_theta=10000000, family="qwen3_5")),
    ("Qwen__Qwen3-Next-80B-A3B-Instruct.config.json", dict(attention="hybrid", full_attention_layers=12,
                                                           linear_attention_layers=36, family="qwen3_next")),
    ("deepseek-ai__DeepSeek-V3.config.json", dict(attention="mla", mtp_layers=1, quantization="fp8", family="deepseek")),
    ("meta-llama__Llama-3.1-8B-Instruct.config.json", dict(head_dim=128, rope_theta=500000.0, family="llama")),
])
def test_parse(name, expected):
    cfg = load(name)
    family = expected.pop("family")
    assert mc.model_family(cfg) == family
    for key, value in expected.items():
        assert cfg[key] == value, key


def test_hybrid_linear_figures_and_ssm_dtype():
    lin = load("Qwen__Qwen3.6-27B.config.json")["linear"]
    assert lin == {"num_k_heads": 16, "num_v_heads": 48, "k_head_dim": 128, "v_head_dim": 128, "conv_kernel": 4,
                   "ssm_dtype": "float32", "ssm_dtype_bytes": 4}
    assert load("Qwen__Qwen3-Next-80B-A3B-Instruct.config.json")["linear"]["ssm_dtype_bytes"] == 2


def test_missing_keys():
    with pytest.raises(mc.ModelConfigError, match="num_hidden_layers"):
        mc.parse_config({"num_attention_heads": 8})


def _write_safetensors(path, tensors):
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, nbytes in tensors:
        header[name] = {"dtype": "BF16", "shape": [nbytes // 2], "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    blob = json.dumps(header).encode()
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(blob)) + blob + b"\0" * offset)


def test_weight_bytes_from_index_headers_and_none(tmp_path):
    d = str(tmp_path)
    assert mc.weight_bytes(d) == (None, "no safetensors files (config-only directory)")
    _write_safetensors(os.path.join(d, "a.safetensors"), [("x", 64), ("y", 32)])
    _write_safetensors(os.path.join(d, "b.safetensors"), [("z", 16)])
    assert mc.weight_bytes(d) == (112, "safetensors headers")
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as fh:
        json.dump({"metadata": {"total_size": 29536614400}, "weight_map": {}}, fh)
    assert mc.weight_bytes(d)[0] == 29536614400


def test_read_config_errors(tmp_path):
    with pytest.raises(mc.ModelConfigError, match="no config.json"):
        mc.read_config(str(tmp_path))
    (tmp_path / "config.json").write_text("{nope")
    with pytest.raises(mc.ModelConfigError, match="not valid JSON"):
        mc.read_config(str(tmp_path))
