# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""docs/DEVELOPING.md's claims: a new vLLM release is a change of releases.py, a new GPU a change of
gpu_families.py. Each test changes ONLY that table (monkeypatch, the stand-in of an edit) and plans: the
planner follows without any other file changing. The rows planted here are test stand-ins, not facts."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import math
import os

from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu import gpu_families as F
from ansible_collections.gpufleet.vllm.plugins.module_utils import releases as R
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan.planner import build_plan

GIB = 1024 ** 3
CONFIG = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "model-configs", "Qwen__Qwen3-8B.config.json")


def _raw():
    with open(CONFIG) as handle:
        return json.load(handle)


def _plan(**options):
    p = dict(model="/m", gpus={"profile": "h200", "count": 1}, gpu_memory_utilization=0.9, max_model_len=32768)
    p.update(options)
    return build_plan(p, _raw(), "/m", weights_total=16 * GIB, weights_source="test stand-in figure")


def test_a_new_release_is_a_change_of_releases_py(monkeypatch):
    before = _plan()
    assert before["capacity"]["estimate"]["model_runner"] == "v2"
    monkeypatch.setattr(R, "DEFAULT_RELEASE", "0.34.0")
    monkeypatch.setattr(R, "NEWEST_VERIFIED", "0.34.0")
    stand_in = ((0, 34, 0), {"dense": "v1", "moe": "v1", "moe_v2_arch": "v1", "hybrid": "v1"}, "test stand-in row for 0.34.0")
    monkeypatch.setattr(R, "RUNNER_RULES", R.RUNNER_RULES + (stand_in,))
    after = _plan()   # no vllm_version: the table's default release
    assert after["capacity"]["estimate"]["model_runner"] == "v1"
    assert "vLLM 0.34.0: test stand-in row for 0.34.0" in after["capacity"]["estimate"]["model_runner_reason"]
    assert _plan(vllm_version="0.33.0")["capacity"]["estimate"]["model_runner"] == "v2"   # older releases keep theirs


def test_a_new_gpu_is_a_change_of_gpu_families_py(monkeypatch):
    name = "NVIDIA X300 (test stand-in)"
    monkeypatch.setitem(F.PROFILES, "x300", {"name": name, "memory_total_bytes": 200 * 1024 * F.MIB,
                                             "compute_capability": "13.0", "source": "test stand-in"})
    monkeypatch.setitem(F.CUDA_GAPS, name, 1024 * F.MIB)
    monkeypatch.setattr(F, "FAMILIES", F.FAMILIES + (((13, 5), "test stand-in family", False, False, False, None),))
    plan = _plan(gpus={"profile": "x300", "count": 2}, tensor_parallel_size=2, kv_cache_dtype="fp8")
    codes = [f["code"] for f in plan["findings"]]
    assert "fp8_kv_without_fp8_hardware" not in codes   # 13.0: the (13, 0) row, native FP8
    assert plan["capacity"]["estimate"]["requested_bytes"] == math.ceil(0.9 * (200 * 1024 - 1024) * F.MIB)
    monkeypatch.setitem(F.PROFILES["x300"], "compute_capability", "13.5")
    plan = _plan(gpus={"profile": "x300", "count": 2}, tensor_parallel_size=2, kv_cache_dtype="fp8")
    assert "fp8_kv_without_fp8_hardware" in [f["code"] for f in plan["findings"]]   # the planted row's gate
