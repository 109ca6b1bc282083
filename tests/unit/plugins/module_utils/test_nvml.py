# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVML layer + facts assembly against the FAKE pynvml driven by fixture topologies."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu import nvml as N
from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu.gpu_facts_assembly import (
    compare_backends,
    facts_from_nvml,
    facts_from_smi,
)
from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu.nvidia_smi import (
    parse_compute_cap_csv,
    parse_query_xml,
    parse_topology,
)
from ansible_collections.gpufleet.vllm.tests.fakes.fake_nvml.loader import (
    FIXTURES,
    fake,
    fake_pynvml,
    topologies,
)


def facts_for(name, sysfs=None, cpu_count=32):
    nvml = N.Nvml(fake(name))
    nvml.init()
    try:
        raw = N.collect(nvml, cpu_count)
    finally:
        nvml.shutdown()
    assert nvml.lib.initialised == 0, "nvmlShutdown must balance nvmlInit"
    return facts_from_nvml(raw, sysfs or {})


# (topology, gpu_count, links subset, islands, numa_nodes, nvswitch)
CASES = [
    ("h200x2", 2, {"0-1": "NV18"}, [[0, 1]], [[0, 1]], True),
    ("h100x8_nvswitch", 8, {"0-7": "NV18", "3-4": "NV18"}, [list(range(8))], [[0, 1, 2, 3], [4, 5, 6, 7]], True),
    ("a100x2_pcie_bridge", 2, {"0-1": "NV12"}, [[0, 1]], [[0, 1]], False),
    ("rtx4090x4_two_numa", 4, {"0-1": "NODE", "0-2": "SYS", "2-3": "NODE"}, [[0], [1], [2], [3]],
     [[0, 1], [2, 3]], False),
    ("a100x8_mig", 8, {"0-1": "NV12"}, [list(range(8))], [[0, 1, 2, 3], [4, 5, 6, 7]], True),
]


@pytest.mark.parametrize("name,count,links,islands,numa,nvswitch", CASES)
def test_topologies(name, count, links, islands, numa, nvswitch):
    facts = facts_for(name)
    assert facts["gpu_count"] == count
    for key, word in links.items():
        assert facts["topology"]["links"][key] == word
    assert facts["nvlink_islands"] == islands
    assert facts["numa_nodes"] == numa
    assert facts["nvswitch"] is nvswitch
    for gpu in facts["gpus"]:
        assert gpu["cpu_affinity_str"]
        assert isinstance(gpu["cpu_affinity"], list)
        assert "." in gpu["compute_capability"]


def test_h200_matches_the_real_capture():
    facts = facts_for("h200x2")
    g0 = facts["gpus"][0]
    assert g0["name"] == "NVIDIA H200"
    assert g0["memory_total_bytes"] == 150754820096 and g0["memory_total_mib"] == 143771
    assert g0["compute_capability"] == "9.0"
    assert g0["mig"] == {"current": "disabled", "pending": "disabled", "supported": True, "devices": []}
    assert g0["persistence_mode"] is True
    assert g0["numa_node"] is None
    assert g0["nvlink_active_count"] == 18
    assert {l["remote"] for l in g0["nvlinks"]} == {"nvswitch"}
    assert {l["remote_pci_bus_id"] for l in g0["nvlinks"]} == {"FFFFFFFF:FF:FF.0"}
    assert g0["fabric"] == {"state": "completed", "status": "success"}
    assert g0["cpu_affinity_str"] == "0-31"
    assert facts["pairs"]["0-1"]["common_ancestor"] == "PHB"  # PCIe path; NVLink comes from P2P status
    assert facts["driver_version"] == "580.159.04" and facts["cuda_driver_version"] == "13.0"
    assert g0["errors"] == {}


def test_sysfs_numa_fills_unknown_nvml_numa():
    facts = facts_for("h200x2", sysfs={"00000000:00:06.0": {"numa_node": 1}, "00000000:00:07.0": {"numa_node": -1}})
    assert [g["numa_node"] for g in facts["gpus"]] == [1, None]
    assert facts["numa_nodes"] == [[0], [1]]
    assert facts["numa_groups"] == [{"node": 1, "gpus": [0]}, {"node": None, "gpus": [1]}]


def test_mig_devices_and_pending():
    facts = facts_for("a100x8_mig")
    g = facts["gpus"]
    assert g[0]["mig"]["current"] == "enabled"
    assert [(d["gpu_instance_id"], d["compute_instance_id"], d["memory_bytes"]) for d in g[0]["mig"]["devices"]] == [
        (1, 0, 40 * 1024 ** 3), (2, 0, 40 * 1024 ** 3)]
    assert g[0]["mig"]["devices"][0]["uuid"] == "MIG-0-gi1"
    assert (g[2]["mig"]["current"], g[2]["mig"]["pending"]) == ("disabled", "enabled")
    assert g[3]["mig"]["devices"] == []


def test_consumer_gpu_has_no_mig_and_no_ecc():
    g = facts_for("rtx4090x4_two_numa")["gpus"][0]
    assert g["mig"]["current"] is None and g["mig"]["supported"] is False
    assert g["ecc_mode"] is None and g["errors"]["ecc_mode"].startswith("not_supported")
    assert g["nvlinks"] == [] and g["nvlink_active_count"] == 0


def test_erroring_fields_become_null_with_the_error_recorded():
    facts = facts_for("erroring_gpu")
    good, bad = facts["gpus"]
    assert good["errors"] == {}
    assert bad["power_limit_watts"] is None and bad["errors"]["power_limit_watts"].startswith("not_supported")
    assert bad["ecc_mode"] is None and bad["errors"]["ecc_mode"].startswith("unknown")
    assert bad["cpu_affinity"] is None and bad["cpu_affinity_str"] is None
    assert bad["errors"]["cpu_affinity"].startswith("no_permission")
    assert bad["compute_capability"] is None and bad["errors"]["compute_capability"].startswith("gpu_is_lost")
    assert bad["name"] == "NVIDIA A100 80GB PCIe"  # the rest of the GPU is still read
    assert facts["topology"]["links"]["0-1"] == "NV12"


@pytest.mark.parametrize("name,kind,absent,words", [
    ("nvml_mismatch", "lib_rm_version_mismatch", False, "reboot"),
    ("no_driver", "driver_not_loaded", True, "modprobe"),
])
def test_fatal_init(name, kind, absent, words):
    nvml = N.Nvml(fake(name))
    with pytest.raises(N.NvmlFatalError) as info:
        nvml.init()
    assert info.value.kind == kind
    assert info.value.absent is absent
    assert words in info.value.message


def test_mismatch_in_the_middle_is_fatal():
    lib = fake("h200x2")
    lib.state["gpus"][1]["errors"] = {"nvmlDeviceGetName": "lib_rm_version_mismatch"}
    nvml = N.Nvml(lib)
    nvml.init()
    with pytest.raises(N.NvmlFatalError) as info:
        N.collect(nvml, 32)
    assert info.value.kind == "lib_rm_version_mismatch"


def test_load_pynvml_refuses_the_unofficial_package(monkeypatch):
    import sys
    import types
    pkg = types.ModuleType("pynvml")
    pkg.__path__ = ["/usr/lib/python3/dist-packages/pynvml"]
    pkg.nvmlInit = lambda: None
    monkeypatch.setitem(sys.modules, "pynvml", pkg)
    with pytest.raises(N.NvmlFatalError) as info:
        N.load_pynvml()
    assert info.value.kind == "unofficial_library"
    assert "nvidia-ml-py" in info.value.message


def test_load_pynvml_missing(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "pynvml", None)
    with pytest.raises(N.NvmlFatalError) as info:
        N.load_pynvml()
    assert info.value.kind == "library_missing"


@pytest.mark.parametrize("given,canonical,sysfs", [
    ("00000000:00:06.0", "00000000:00:06.0", "0000:00:06.0"),
    ("0000:3b:00.0", "00000000:3B:00.0", "0000:3b:00.0"),
    ("3b:00.0", "00000000:3B:00.0", "0000:3b:00.0"),
    ("00000001:C1:00.0", "00000001:C1:00.0", "0001:c1:00.0"),
])
def test_pci_ids(given, canonical, sysfs):
    assert N.canonical_pci_bus_id(given) == canonical
    assert N.sysfs_pci_address(given) == sysfs


def test_cpu_mask():
    assert N.cpu_mask_to_list([0b1011, 1], 64) == [0, 1, 3, 64]
    assert N.cpu_mask_to_list([], 64) == []


# --- acceptance 3: the two backends agree on the real H200 captures ----------------------------------
def _load_json(*parts):
    with open(os.path.join(FIXTURES, *parts)) as handle:
        return json.load(handle)


def _check_h200(facts):
    assert facts["gpu_count"] == 2
    assert facts["topology"]["links"] == {"0-1": "NV18"}
    assert facts["nvlink_islands"] == [[0, 1]]
    assert facts["numa_nodes"] == [[0, 1]]
    assert facts["nvswitch"] is True
    for gpu in facts["gpus"]:
        assert (gpu["mig"]["current"], gpu["mig"]["pending"]) == ("disabled", "disabled")
        assert gpu["persistence_mode"] is True
        assert gpu["numa_node"] is None
        assert gpu["compute_capability"] == "9.0"
        assert gpu["memory_total_mib"] == 143771
        assert gpu["cpu_affinity_str"] == "0-31"
    assert facts["ansible_facts"]["gpufleet_gpu"]["gpu_count"] == 2


def test_backends_agree_on_the_real_device_run():
    """Second device run (tests/fixtures/h200x2/roles-run): both backends agree on every shared field."""
    nvml_facts = _load_json("h200x2", "roles-run", "gpu_facts_nvml.json")
    smi_facts = _load_json("h200x2", "roles-run", "gpu_facts_nvidia_smi.json")
    assert nvml_facts["backend"] == "nvml" and smi_facts["backend"] == "nvidia-smi"
    assert compare_backends(nvml_facts, smi_facts) == []
    assert nvml_facts["gpus"][0]["fabric"] == {"state": "completed", "status": "success"}
    assert nvml_facts["gpus"][0]["nvlink_active_count"] == 18
    for facts in (nvml_facts, smi_facts):
        _check_h200(facts)


def test_first_device_run_differs_only_in_fabric():
    """First device run: the unversioned fabric call answered NotSupported on driver 580 (fixed since)."""
    nvml_facts = _load_json("h200x2", "ansible-run", "gpu_facts_nvml.json")
    smi_facts = _load_json("h200x2", "ansible-run", "gpu_facts_nvidia_smi.json")
    diffs = compare_backends(nvml_facts, smi_facts)
    assert diffs and all(" fabric:" in d for d in diffs)
    for facts in (nvml_facts, smi_facts):
        _check_h200(facts)


def test_backends_agree_fake_nvml_vs_real_smi_capture():
    """The fake built from the shared capture agrees with the parsers on the same capture, fabric included."""
    nvml_facts = facts_for("h200x2", sysfs={"00000000:00:06.0": {"numa_node": -1}, "00000000:00:07.0": {"numa_node": -1}})
    with open(os.path.join(FIXTURES, "h200x2", "smi_q.xml")) as q, open(os.path.join(FIXTURES, "h200x2", "smi_topo.txt")) as t:
        smi_facts = facts_from_smi(parse_query_xml(q.read()), parse_topology(t.read()),
                                   parse_compute_cap_csv("00000000:00:06.0, 9.0\n00000000:00:07.0, 9.0\n"),
                                   {"00000000:00:06.0": {"numa_node": -1}, "00000000:00:07.0": {"numa_node": -1}})
    assert compare_backends(nvml_facts, smi_facts) == []
    assert smi_facts["unavailable"] == ["nvml_version", "nvlinks"]


def test_compare_backends_reports_differences():
    a = facts_for("h200x2")
    b = facts_for("h200x2")
    b["gpus"][1]["memory_total_mib"] = 1
    b["gpus"][0]["mig"]["pending"] = "enabled"
    b["topology"]["links"]["0-1"] = "PHB"
    diffs = compare_backends(a, b)
    assert any("memory_total_mib" in d for d in diffs)
    assert any("mig.pending" in d for d in diffs)
    assert any("topology.links" in d for d in diffs)


def test_fake_is_a_test_double_only():
    assert fake_pynvml.FakePynvml.__doc__ and "gpufleet" in fake_pynvml.__doc__
    assert set(topologies.TOPOLOGIES) >= {"h200x2", "h100x8_nvswitch", "a100x2_pcie_bridge", "rtx4090x4_two_numa",
                                          "a100x8_mig", "erroring_gpu", "nvml_mismatch", "no_driver"}


# --- gpu_preflight comparison (acceptance 5: every mismatch listed) ---------------------------------
from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu.gpu_facts_assembly import check_expected  # noqa: E402


def test_expected_matches_h200():
    facts = facts_for("h200x2")
    assert check_expected(facts, {"count": 2, "name_pattern": "H200", "min_memory_mib": 140000, "nvlink": "required",
                                  "nvlinks_per_gpu": 18, "mig_disabled": True, "persistence": True,
                                  "min_driver": "550.54.15"}) == []


def test_expected_lists_every_mismatch():
    lib = fake("a100x8_mig")
    lib.state["gpus"][5]["nvlinks"][3]["state"] = 0
    lib.state["gpus"][5]["nvlinks"][4]["state"] = 0
    lib.state["gpus"][6]["persistence"] = 0
    nvml = N.Nvml(lib)
    nvml.init()
    facts = facts_from_nvml(N.collect(nvml, 32), {})
    problems = check_expected(facts, {"count": 4, "name_pattern": "H100", "min_memory_mib": 90000, "nvlink": "forbidden",
                                      "mig_disabled": True, "persistence": True, "min_driver": "550.0", "colour": 1})
    text = "\n".join(problems)
    assert "unknown key(s) in expected: colour" in text
    assert "GPU count: expected 4, found 8" in text
    assert text.count("does not match 'H100'") == 8
    assert text.count("below the expected minimum 90000 MiB") == 8
    assert "NVLink forbidden" in text
    assert "GPU0 MIG is enabled" in text and "GPU2 MIG is disabled (pending enabled)" in text
    assert "GPU6 persistence mode is off" in text
    assert "driver 535.161.08 is older than the expected minimum 550.0" in text
    assert "GPU5 has 2 NVLink(s) down: [3, 4]" in text
    assert "GPU5 has 10 active NVLinks while its peers have 12" in text


def test_expected_nvlink_required_on_pcie():
    facts = facts_for("rtx4090x4_two_numa")
    assert check_expected(facts, {"nvlink": "required"})[0].startswith("NVLink required between all GPUs")
    assert check_expected(facts, {"nvlink": "forbidden"}) == []


def test_expected_count_on_a_host_without_gpu():
    from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu.gpu_facts_assembly import empty_facts
    facts = empty_facts("none", "nvidia-smi not found in PATH")
    assert check_expected(facts, {}) == []
    assert check_expected(facts, {"count": 2}) == ["GPU count: expected 2, found 0 (nvidia-smi not found in PATH)"]
