# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_facts module glue with the FAKE pynvml and recorded nvidia-smi outputs."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible.module_utils import basic

from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu import gpu_gather
from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu.nvml import NvmlFatalError
from ansible_collections.gpufleet.vllm.tests.unit.plugins.modules.module_harness import Exit, Fail, patch_exits, patch_module_args
from ansible_collections.gpufleet.vllm.plugins.modules import gpu_facts
from ansible_collections.gpufleet.vllm.tests.fakes.fake_nvml.loader import FIXTURES, fake


@pytest.fixture(autouse=True)
def exits(monkeypatch):
    patch_exits(monkeypatch)
    monkeypatch.setattr(gpu_gather, "read_sysfs", lambda bus_ids, root=None: {})


def run(args, monkeypatch, topology=None, load_error=None, smi=None):
    def load():
        if load_error:
            raise NvmlFatalError(load_error, "test")
        return fake(topology)

    monkeypatch.setattr(gpu_gather, "load_pynvml", load)
    smi_path = "/usr/bin/nvidia-smi" if smi is not None else None
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, *a, **k: smi_path)

    def run_command(self, argv, **kwargs):
        assert kwargs.get("environ_update", {}).get("LC_ALL") == "C"
        key = " ".join(argv[1:])
        for prefix, answer in smi.items():
            if key.startswith(prefix):
                return answer
        raise AssertionError("unexpected command %s" % argv)

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    with patch_module_args(args):
        with pytest.raises((Exit, Fail)) as info:
            gpu_facts.main()
    return info.type is Exit, info.value.args[0]


def smi_outputs():
    def read(name):
        with open(os.path.join(FIXTURES, "h200x2", "ansible-run", name)) as handle:
            return handle.read()
    return {"-q -x": (0, read("smi_q.xml"), ""), "topo -m": (0, read("smi_topo.txt"), ""),
            "--query-gpu=pci.bus_id,compute_cap": (0, read("smi_compute_cap.csv"), ""),
            "nvlink -s": (0, read("smi_nvlink_s.txt"), ""),
            # 'nvlink -R' was not captured on the H200 host: answered as a failing command here.
            "nvlink -R": (1, "", "not captured")}


def test_nvml_backend_facts_and_result_match(monkeypatch):
    ok, result = run({"backend": "nvml"}, monkeypatch, topology="h200x2")
    assert ok and result["changed"] is False
    facts = result["ansible_facts"]["gpufleet_gpu"]
    assert facts["backend"] == "nvml" and facts["gpu_count"] == 2
    for key in ("gpus", "nvlink_islands", "numa_nodes", "topology", "gpu_count"):
        assert result[key] == facts[key]
    gpu = facts["gpus"][0]
    for key in ("index", "name", "memory_total_bytes", "compute_capability", "numa_node", "cpu_affinity",
                "cpu_affinity_str"):
        assert key in gpu
    assert facts["topology"]["links"] == {"0-1": "NV18"}


def test_smi_backend(monkeypatch):
    ok, result = run({"backend": "nvidia-smi"}, monkeypatch, smi=smi_outputs())
    assert ok
    assert result["backend"] == "nvidia-smi"
    assert result["gpu_count"] == 2
    assert result["gpus"][1]["compute_capability"] == "9.0"
    assert result["topology"]["links"] == {"0-1": "NV18"}
    assert result["unavailable"] == ["nvml_version"]
    # nvlink -s (real capture): 18 active links per GPU, as NVML reports on the same host
    assert [g["nvlink_active_count"] for g in result["gpus"]] == [18, 18]
    link17 = {"link": 17, "active": True, "version": None, "remote": None, "remote_pci_bus_id": None}
    assert result["gpus"][0]["nvlinks"][17] == link17


def test_smi_backend_without_nvlink_command(monkeypatch):
    outputs = smi_outputs()
    outputs["nvlink -s"] = (3, "", "nvlink: not supported")
    ok, result = run({"backend": "nvidia-smi"}, monkeypatch, smi=outputs)
    assert ok and result["unavailable"] == ["nvml_version", "nvlinks"] and result["gpus"][0]["nvlinks"] is None


@pytest.mark.parametrize("expected,words", [
    ({"count": "two"}, "expected.count (gpu_preflight_expected.count) must be a whole number"),
    ({"nvlinks_per_gpu": 1.5}, "expected.nvlinks_per_gpu"),
    ({"min_memory_mib": -1}, "expected.min_memory_mib"),
    ({"name_pattern": "H200("}, "expected.name_pattern (gpu_preflight_expected.name_pattern) is not a valid regular"),
    ({"min_driver": "latest"}, "expected.min_driver"),
])
def test_bad_expectations_name_the_key(monkeypatch, expected, words):
    ok, result = run({"backend": "nvml", "expected": expected}, monkeypatch, topology="h200x2")
    assert not ok and words in result["msg"] and "exception" not in result


def test_auto_falls_back_to_smi_without_nvidia_ml_py(monkeypatch):
    ok, result = run({}, monkeypatch, load_error="library_missing", smi=smi_outputs())
    assert ok and result["backend"] == "nvidia-smi"
    assert "nvidia-ml-py" in result["errors"]["nvml"]


def test_nvml_backend_without_nvidia_ml_py_fails_with_the_fix(monkeypatch):
    ok, result = run({"backend": "nvml"}, monkeypatch, load_error="library_missing")
    assert not ok and "pip install nvidia-ml-py" in result["msg"]


def test_no_driver_is_zero_gpus_with_reason(monkeypatch):
    ok, result = run({}, monkeypatch, topology="no_driver")
    assert ok and result["gpu_count"] == 0 and "driver" in result["reason"]
    assert result["summary"][0].startswith("No NVIDIA GPU on this host")


def test_no_driver_but_min_gpus_fails(monkeypatch):
    ok, result = run({"min_gpus": 1}, monkeypatch, topology="no_driver")
    assert not ok and "min_gpus=1" in result["msg"] and "found 0 GPU(s)" in result["msg"]


def test_mismatch_fails_with_reboot_hint(monkeypatch):
    ok, result = run({}, monkeypatch, topology="nvml_mismatch")
    assert not ok and result["kind"] == "lib_rm_version_mismatch" and "reboot" in result["msg"]


def test_smi_mismatch_fails_with_the_same_hint(monkeypatch):
    smi = {"-q -x": (18, "Failed to initialize NVML: Driver/library version mismatch\n", "")}
    ok, result = run({"backend": "nvidia-smi"}, monkeypatch, smi=smi)
    assert not ok and "reboot" in result["msg"]


def test_smi_no_devices(monkeypatch):
    ok, result = run({"backend": "nvidia-smi"}, monkeypatch, smi={"-q -x": (6, "No devices were found\n", "")})
    assert ok and result["gpu_count"] == 0 and "No devices" in result["reason"]


def test_min_gpus_satisfied(monkeypatch):
    ok, result = run({"min_gpus": 8}, monkeypatch, topology="h100x8_nvswitch")
    assert ok and result["gpu_count"] == 8


def test_erroring_gpu_warns_but_succeeds(monkeypatch):
    ok, result = run({}, monkeypatch, topology="erroring_gpu")
    assert ok and result["gpus"][1]["power_limit_watts"] is None
    assert result["gpus"][1]["errors"]["ecc_mode"].startswith("unknown")
