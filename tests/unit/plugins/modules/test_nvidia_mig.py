# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvidia_mig module with the FAKE pynvml: enable/disable, pending != current, busy, force, consumer GPU."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.vllm.tests.unit.plugins.modules.module_harness import Exit, Fail, patch_exits, patch_module_args
from ansible_collections.gpufleet.vllm.plugins.modules import nvidia_mig
from ansible_collections.gpufleet.vllm.tests.fakes.fake_nvml.loader import fake


@pytest.fixture(autouse=True)
def exits(monkeypatch):
    patch_exits(monkeypatch)


def run(args, monkeypatch, lib):
    monkeypatch.setattr(nvidia_mig, "load_pynvml", lambda: lib)
    with patch_module_args(args):
        with pytest.raises((Exit, Fail)) as info:
            nvidia_mig.main()
    return info.type is Exit, info.value.args[0]


def test_disable_on_a100_mig_host(monkeypatch):
    lib = fake("a100x8_mig")
    ok, res = run({"mode": "disabled"}, monkeypatch, lib)
    assert ok and res["changed"] is True
    assert sorted(i for i, mode in lib.set_calls) == [0, 1, 2]
    assert all(mode == 0 for i, mode in lib.set_calls)
    by = dict((g["index"], g) for g in res["gpus"])
    assert (by[0]["current"], by[0]["pending"], by[0]["reset_required"]) == ("enabled", "disabled", True)
    assert (by[2]["current"], by[2]["pending"], by[2]["reset_required"]) == ("disabled", "disabled", False)
    assert by[5]["changed"] is False
    assert res["reset_required"] is True and res["reboot_required"] is False
    # second run: pending already disabled -> not changed, still reset required on 0 and 1
    lib.set_calls[:] = []
    ok, res = run({"mode": "disabled"}, monkeypatch, lib)
    assert ok and res["changed"] is False and lib.set_calls == []
    assert [g["index"] for g in res["gpus"] if g["reset_required"]] == [0, 1]


def test_enable_h100_and_applies_without_reset_when_supported(monkeypatch):
    lib = fake("h100x8_nvswitch")
    for gpu in lib.state["gpus"]:
        gpu["mig_applies_without_reset"] = True
    ok, res = run({"mode": "enabled", "gpus": ["0", lib.state["gpus"][3]["uuid"]]}, monkeypatch, lib)
    assert ok and res["changed"] is True
    assert [g["index"] for g in res["gpus"]] == [0, 3]
    assert all(g["current"] == "enabled" and not g["reset_required"] for g in res["gpus"])
    assert res["gpus"][0]["activation_status"] == "success"


def test_check_mode_and_diff_change_nothing(monkeypatch):
    lib = fake("a100x8_mig")
    ok, res = run({"mode": "disabled", "_ansible_check_mode": True, "_ansible_diff": True}, monkeypatch, lib)
    assert ok and res["changed"] is True and lib.set_calls == []
    assert lib.state["gpus"][0]["mig"] == [1, 1]
    assert "GPU0 GPU-a1000000-0000-0000-0000-000000000000: current=enabled pending=enabled" in res["diff"]["before"]
    assert "GPU0 GPU-a1000000-0000-0000-0000-000000000000: current=enabled pending=disabled" in res["diff"]["after"]
    assert res["gpus"][0]["pending"] == "disabled"  # what it would be


def test_h200_capture_check_mode(monkeypatch):
    lib = fake("h200x2")
    ok, res = run({"mode": "disabled", "_ansible_check_mode": True}, monkeypatch, lib)
    assert ok and res["changed"] is False and res["reset_required"] is False
    ok, res = run({"mode": "enabled", "_ansible_check_mode": True}, monkeypatch, lib)
    assert ok and res["changed"] is True and lib.set_calls == []


def test_busy_gpu_refused_listing_pids_then_forced(monkeypatch):
    lib = fake("a100x8_mig")
    lib.state["gpus"][0]["processes"] = [{"pid": 4242, "name": "vllm-serve", "used": 1 << 30}]
    ok, res = run({"mode": "disabled"}, monkeypatch, lib)
    assert not ok and "pid 4242 (vllm-serve)" in res["msg"] and lib.set_calls == []
    ok, res = run({"mode": "disabled", "force": True}, monkeypatch, lib)
    assert ok and res["changed"] is True
    # NVML_ERROR_IN_USE: idle the GPU and reset it (the role's gpu-reset policy), not a reboot
    assert res["gpus"][0]["activation_status"] == "in_use" and res["reboot_required"] is False
    assert res["gpus"][0]["reset_required"] is True


def test_consumer_gpu(monkeypatch):
    lib = fake("rtx4090x4_two_numa")
    ok, res = run({"mode": "disabled"}, monkeypatch, lib)
    assert ok and res["changed"] is False and res["gpus"][0]["current"] is None
    ok, res = run({"mode": "enabled", "gpus": ["1"]}, monkeypatch, lib)
    assert not ok and "GPU1 (NVIDIA GeForce RTX 4090) does not support MIG" in res["msg"]


def test_no_driver(monkeypatch):
    ok, res = run({"mode": "disabled"}, monkeypatch, fake("no_driver"))
    assert ok and res["changed"] is False and res["gpus"] == [] and "driver" in res["reason"]
    ok, res = run({"mode": "enabled"}, monkeypatch, fake("no_driver"))
    assert not ok and "modprobe" in res["msg"]


def test_unknown_target(monkeypatch):
    ok, res = run({"mode": "disabled", "gpus": ["9"]}, monkeypatch, fake("h200x2"))
    assert not ok and "no GPU matches 9" in res["msg"]


def test_passthrough_vm_reset_required_means_reboot(monkeypatch):
    """NVML documents activationStatus NVML_ERROR_RESET_REQUIRED for pass-through VMs: a VM reboot."""
    lib = fake("h200x2")
    for gpu in lib.state["gpus"]:
        gpu["passthrough"] = True
    ok, res = run({"mode": "enabled"}, monkeypatch, lib)
    assert ok and res["changed"] is True
    assert [g["activation_status"] for g in res["gpus"]] == ["reset_required"] * 2
    assert res["reset_required"] is True and res["reboot_required"] is True


def test_idle_gpu_in_use_activation_is_a_reset_not_a_reboot(monkeypatch):
    lib = fake("h200x2")
    ok, res = run({"mode": "enabled"}, monkeypatch, lib)
    assert ok and res["reset_required"] is True and res["reboot_required"] is False
    assert [g["activation_status"] for g in res["gpus"]] == ["in_use"] * 2


@pytest.mark.parametrize("call,kind,words", [
    ("nvmlDeviceGetCount", "lib_rm_version_mismatch", "reboot the host or reload"),
    ("nvmlDeviceGetCount", "gpu_is_lost", "Xid 79"),
])
def test_fatal_nvml_mid_run_is_a_clean_failure(monkeypatch, call, kind, words):
    """NvmlFatalError after init (a driver upgrade under us, a GPU off the bus): no traceback."""
    lib = fake("h200x2")
    monkeypatch.setattr(lib, call, _raiser(lib, kind))
    ok, res = run({"mode": "disabled"}, monkeypatch, lib)
    assert not ok and words in res["msg"] and res["kind"] == kind
    assert "exception" not in res or "Traceback" not in res.get("msg", "")


def test_fatal_set_mig_mode_is_a_clean_failure(monkeypatch):
    lib = fake("h200x2")
    lib.state["gpus"][0]["errors"] = {"nvmlDeviceSetMigMode": "gpu_is_lost"}
    ok, res = run({"mode": "enabled"}, monkeypatch, lib)
    assert not ok and res["msg"].startswith("setting MIG enabled on GPU0") and res["kind"] == "gpu_is_lost"


def _raiser(lib, kind):
    code = {"lib_rm_version_mismatch": 18, "gpu_is_lost": 15}[kind]

    def fail(*args):
        raise lib.NVMLError(code)
    return fail


def test_a_missing_nvml_library_is_not_told_to_use_an_option_the_module_lacks(monkeypatch):
    """Issue 27 LOW: the hint said "use backend=nvidia-smi", an option of gpu_facts, not of nvidia_mig."""
    from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu.nvml import NvmlFatalError

    def missing():
        raise NvmlFatalError("library_missing", "No module named 'pynvml'")

    monkeypatch.setattr(nvidia_mig, "load_pynvml", missing)
    with patch_module_args({"mode": "enabled"}):
        with pytest.raises(Fail) as info:
            nvidia_mig.main()
    msg = info.value.args[0]["msg"]
    assert "pip install nvidia-ml-py" in msg and "backend" not in msg.replace("no nvidia-smi backend", "")
