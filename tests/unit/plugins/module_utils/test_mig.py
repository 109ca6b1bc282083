# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu.mig import MigPlanError, after_apply, decide_actions, diff


def gpu(index, current, pending, processes=None, name="NVIDIA A100-SXM4-80GB"):
    return {"index": index, "uuid": "GPU-%d" % index, "name": name, "current": current, "pending": pending,
            "processes": processes or []}


# (state, desired, targets, per-GPU (changed, reset_required), top changed, top reset)
CASES = [
    ([gpu(0, "disabled", "disabled")], "disabled", None, [(False, False)], False, False),
    ([gpu(0, "enabled", "enabled")], "disabled", None, [(True, True)], True, True),
    ([gpu(0, "disabled", "disabled")], "enabled", None, [(True, True)], True, True),
    # pending == desired, current != desired: not a change, reset required
    ([gpu(0, "enabled", "disabled")], "disabled", None, [(False, True)], False, True),
    # pending != desired but current == desired: setting it back is a change, no reset needed
    ([gpu(0, "disabled", "enabled")], "disabled", None, [(True, False)], True, False),
    # consumer GPU: disabled is satisfied
    ([gpu(0, None, None, name="NVIDIA GeForce RTX 4090")], "disabled", None, [(False, False)], False, False),
    # targets by index and by UUID; other GPUs untouched
    ([gpu(0, "enabled", "enabled"), gpu(1, "enabled", "enabled"), gpu(2, "enabled", "enabled")], "disabled",
     ["2", "gpu-0"], [(True, True), (True, True)], True, True),
]


@pytest.mark.parametrize("state,desired,targets,per_gpu,changed,reset", CASES)
def test_plan(state, desired, targets, per_gpu, changed, reset):
    result = decide_actions(state, desired, targets)
    assert [(e["changed"], e["reset_required"]) for e in result["gpus"]] == per_gpu
    assert result["changed"] is changed
    assert result["reset_required"] is reset


def test_targets_select_in_index_order():
    state = [gpu(0, "enabled", "enabled"), gpu(1, "enabled", "enabled"), gpu(2, "enabled", "enabled")]
    assert [e["index"] for e in decide_actions(state, "disabled", ["2", "GPU-0"])["gpus"]] == [0, 2]


def test_busy_gpu_refused_with_pids_unless_forced():
    state = [gpu(0, "enabled", "enabled", [{"pid": 4242, "name": "vllm"}, {"pid": 7, "name": None}]),
             gpu(1, "disabled", "disabled", [{"pid": 99, "name": "dcgm"}])]
    with pytest.raises(MigPlanError) as info:
        decide_actions(state, "disabled")
    text = str(info.value)
    assert "pid 4242 (vllm)" in text and "pid 7 (?)" in text and "force=true" in text
    assert "99" not in text  # GPU1 needs no change, its process does not matter
    assert decide_actions(state, "disabled", force=True)["gpus"][0]["changed"] is True


def test_every_problem_in_one_error():
    state = [gpu(0, None, None, name="NVIDIA L40S"), gpu(1, "disabled", "disabled", [{"pid": 1, "name": "x"}])]
    with pytest.raises(MigPlanError) as info:
        decide_actions(state, "enabled", ["0", "1", "7"])
    assert len(info.value.problems) == 3
    assert "does not support MIG" in info.value.problems[1]
    assert "no GPU matches 7" in info.value.problems[0]


def test_bad_mode():
    with pytest.raises(MigPlanError):
        decide_actions([gpu(0, "disabled", "disabled")], "on")


def test_diff_and_after_apply():
    planned = decide_actions([gpu(0, "enabled", "enabled"), gpu(1, "disabled", "disabled")], "disabled")
    d = diff(planned)
    assert "GPU0 GPU-0: current=enabled pending=enabled" in d["before"]
    assert "GPU0 GPU-0: current=enabled pending=disabled" in d["after"]
    assert "GPU1 GPU-1: current=disabled pending=disabled" in d["after"]
    applied = after_apply(planned["gpus"][0], "disabled", "disabled", "success")
    assert applied["reset_required"] is False and applied["activation_status"] == "success"
    assert after_apply(planned["gpus"][0], "enabled", "disabled", "in_use")["reset_required"] is True
