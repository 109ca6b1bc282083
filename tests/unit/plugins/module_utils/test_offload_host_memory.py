# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The offload tier's pinned host memory against the host's memory (issue 46: "pinned memory checked against the
host's RAM ... and other instances"): every instance on the host pins about 1.9 x its cpu_offload_bytes
(kv_capacity.PINNED_HOST_FACTOR); above 90 % of MemTotal the plan fails, above 70 % it warns, each naming the
largest offload that fits. The expected values below are worked by hand from those three numbers."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import model_families as fam
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan.planner import build_plan

GIB = 1024 ** 3
FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures")
with open(os.path.join(FIXTURES, "model-configs", "Qwen__Qwen3-8B.config.json")) as _fh:
    QWEN3_8B = json.load(_fh)


@pytest.mark.parametrize("offload_gib,instances,host_gib,code,fits", [
    # 1.9 x 40 = 76 GiB of 256: 30 % - nothing to say
    (40, 1, 256, None, None),
    # 1.9 x 100 = 190 GiB of 256: 74 % - tight; fits at 0.7 x 256 / 1.9 = 94.3 GiB
    (100, 1, 256, "offload_host_memory_tight", 94.3),
    # 1.9 x 200 = 380 GiB of 256: 148 % (seed 000's "200 GiB arc" on a 256 GiB host) - refused; 0.9 x 256 / 1.9
    (200, 1, 256, "offload_exceeds_host_memory", 121.3),
    # two instances x 1.9 x 40 = 152 GiB of 192: 79 % - tight; per instance 0.7 x 192 / 2 / 1.9 = 35.4 GiB
    (40, 2, 192, "offload_host_memory_tight", 35.4),
    # four instances x 1.9 x 40 = 304 GiB of 256 - refused; per instance 0.9 x 256 / 4 / 1.9 = 30.3 GiB
    (40, 4, 256, "offload_exceeds_host_memory", 30.3),
    # unknown host memory: not checked
    (200, 1, 0, None, None),
])
def test_pinned_memory_of_all_instances_against_the_host(offload_gib, instances, host_gib, code, fits):
    found = fam.host_memory_findings(offload_gib * GIB, instances, host_gib * GIB)
    if code is None:
        assert found == []
        return
    (finding,) = found
    assert finding["code"] == code
    assert finding["level"] == ("error" if code == "offload_exceeds_host_memory" else "warning")
    assert "cpu_offload_bytes" in finding["message"] and "%.1f GiB)" % fits in finding["fix"]


def _plan(**over):
    params = dict(model="unused", gpus={"profile": "h200", "count": 1}, max_model_len=32768,
                  kv_cache_memory_bytes=20 * GIB, host="127.0.0.1", port_base=8000, vllm_version="0.26.0")
    params.update(over)
    params["gpus"] = fam.expand_gpus(params["gpus"])
    return build_plan(params, QWEN3_8B, "/models/m", weights_total=16 * GIB, weights_source="index")


def test_the_plan_refuses_an_offload_the_host_cannot_pin():
    plan = _plan(cpu_offload_bytes=200 * GIB, host_memory_bytes=256 * GIB)
    errors = [f for f in plan["findings"] if f["level"] == "error"]
    assert [f["code"] for f in errors] == ["offload_exceeds_host_memory"], plan["findings"]


def test_the_plan_without_host_memory_or_offload_says_nothing_of_it():
    for over in ({"cpu_offload_bytes": 200 * GIB}, {"host_memory_bytes": 16 * GIB}):
        codes = [f["code"] for f in _plan(**over)["findings"]]
        assert not [c for c in codes if c.startswith(("offload_exceeds", "offload_host_memory_tight"))], codes
