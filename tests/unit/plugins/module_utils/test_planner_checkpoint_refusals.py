# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checkpoints the planned release refuses to load are found by the plan, before any download or start.

GPTQ with group activation ordering: vLLM 0.33.0 raises in
model_executor/layers/quantization/utils/gptq_utils.py (normalize_and_validate_gptq_desc_act) unless group_size is
-1 (one group per output channel, where ordering is a no-op). Found on the real 0.33.0 config check
(tests/functional/test_vllm_argv_real_parser.py) with a public GPTQ W4A16 of Qwen3.6-27B (desc_act true, group 128).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import os

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.plan.planner import build_plan

CONFIG = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "model-configs", "Qwen__Qwen3-8B.config.json")
H200 = {"count": 1, "name": "NVIDIA H200", "memory_total_bytes": 150754820096, "compute_capability": "9.0"}


def _codes(quant, version):
    with open(CONFIG) as handle:
        config = json.load(handle)
    if quant is not None:
        config["quantization_config"] = copy.deepcopy(quant)
    p = dict(gpus=H200, max_model_len=8192, kv_cache_memory_bytes=8 * 1024 ** 3, vllm_version=version)
    return [f["code"] for f in build_plan(p, config, "/srv/models/m")["findings"] if f["level"] == "error"]


GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": True, "sym": True}


@pytest.mark.parametrize("quant, version, refused", [
    (GPTQ, "0.33.0", True),                                    # the checkpoint the real check refused
    (GPTQ, "0.34.0", True),                                    # a later release follows the 0.33.0 row
    (dict(GPTQ, desc_act=False), "0.33.0", False),             # static ordering loads
    (dict(GPTQ, group_size=-1), "0.33.0", False),              # one group per channel: ordering is a no-op
    (dict(GPTQ, quant_method="awq"), "0.33.0", False),         # not GPTQ
    (GPTQ, "0.32.0", False),                                   # before the first row: not known here, no finding
    (None, "0.33.0", False),                                   # unquantized
])
def test_gptq_group_activation_ordering(quant, version, refused):
    assert ("gptq_desc_act_refused" in _codes(quant, version)) is refused
