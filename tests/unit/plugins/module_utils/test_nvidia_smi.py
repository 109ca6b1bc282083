# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parser tests on real nvidia-smi outputs (provenance in tests/fixtures/nvidia-smi/README.md)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu.nvidia_smi import (
    NvidiaSmiParseError,
    classify_error,
    parse_compute_cap_csv,
    parse_query_xml,
    parse_topology,
)

FIX = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures")


def read(*parts):
    with open(os.path.join(FIX, *parts), "rb") as handle:
        return handle.read().decode("utf-8")


@pytest.mark.parametrize("path", [("h200x2", "smi_q.xml"), ("h200x2", "ansible-run", "smi_q.xml")])
def test_h200_query_xml(path):
    data = parse_query_xml(read(*path))
    assert data["driver_version"] == "580.159.04"
    assert data["cuda_version"] == "13.0"
    assert data["attached_gpus"] == 2
    assert [g["product_name"] for g in data["gpus"]] == ["NVIDIA H200", "NVIDIA H200"]
    assert [g["pci_bus_id"] for g in data["gpus"]] == ["00000000:00:06.0", "00000000:00:07.0"]
    assert [g["minor_number"] for g in data["gpus"]] == [0, 1]
    for gpu in data["gpus"]:
        assert gpu["memory_total_mib"] == 143771
        assert gpu["persistence_mode"] is True
        assert gpu["mig"] == {"current": "disabled", "pending": "disabled"}
        assert gpu["mig_devices"] == []
        assert gpu["uuid"].startswith("GPU-")
        assert gpu["power_limit_watts"] == 700.0
        assert gpu["fabric_state"] == "Completed"


@pytest.mark.parametrize("path", [("h200x2", "smi_topo.txt"), ("h200x2", "ansible-run", "smi_topo.txt")])
def test_h200_topology_with_ansi_and_tabs(path):
    topo = parse_topology(read(*path))
    assert topo["gpus"] == ["GPU0", "GPU1"]
    assert topo["nics"] == []
    assert topo["links"] == {"0-1": "NV18"}
    assert topo["affinity"]["0"] == {"cpu_affinity": "0-31", "numa_affinity": "0", "gpu_numa_id": None}
    assert topo["affinity"]["1"]["cpu_affinity"] == "0-31"


# Schema variants derived from the real H200 capture (tests/fixtures/nvidia-smi/README.md says why:
# no other real capture with recorded provenance was available in time). Each transformation
# reproduces one documented difference between nvidia-smi versions/platforms.
def _h200():
    return read("h200x2", "ansible-run", "smi_q.xml")


def _no_doctype_v7(text):
    # DTD v7-era output: no DOCTYPE line, no MIG elements at all, persistence N/A.
    text = text.replace('<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v13.dtd">\n', "")
    start, end = text.index("<mig_mode>"), text.index("</mig_devices>") + len("</mig_devices>")
    text = text[:start] + text[end:]
    return text.replace("<persistence_mode>Enabled</persistence_mode>", "<persistence_mode>N/A</persistence_mode>")


def _windows(text):
    # Windows: CRLF line ends, minor number N/A, a WDDM driver model.
    text = text.replace("<minor_number>0</minor_number>", "<minor_number>N/A</minor_number>")
    text = text.replace("<current_dm>N/A</current_dm>", "<current_dm>WDDM</current_dm>")
    return text.replace("\n", "\r\n")


def _fewer_gpus(text):
    # A file listing fewer <gpu> elements than attached_gpus (a GPU that fell off the bus mid-query).
    first = text.index('<gpu id="00000000:00:07.0">')
    last = text.index("</gpu>", first) + len("</gpu>")
    return text[:first] + text[last:]


def _mig_pending(text):
    return text.replace("<pending_mig>Disabled</pending_mig>", "<pending_mig>Enabled</pending_mig>", 1)


@pytest.mark.parametrize("transform,listed,checks", [
    (_no_doctype_v7, 2, {"mig": {"current": None, "pending": None}, "persistence_mode": None, "mig_devices": []}),
    (_windows, 2, {"minor_number": None, "memory_total_mib": 143771, "mig": {"current": "disabled", "pending": "disabled"}}),
    (_fewer_gpus, 1, {"pci_bus_id": "00000000:00:06.0"}),
    (_mig_pending, 2, {"mig": {"current": "disabled", "pending": "enabled"}}),
])
def test_query_xml_schema_variants(transform, listed, checks):
    data = parse_query_xml(transform(_h200()))
    assert data["attached_gpus"] == 2
    assert len(data["gpus"]) == listed
    for key, value in checks.items():
        assert data["gpus"][0][key] == value, key


MIG_XML = """<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log>
  <driver_version>535.129.03</driver_version>
  <cuda_version>12.2</cuda_version>
  <attached_gpus>2</attached_gpus>
  <gpu id="00000000:07:00.0">
    <product_name>NVIDIA A100-SXM4-80GB</product_name>
    <mig_mode><current_mig>Enabled</current_mig><pending_mig>Enabled</pending_mig></mig_mode>
    <mig_devices>
      <mig_device>
        <index>0</index><gpu_instance_id>1</gpu_instance_id><compute_instance_id>0</compute_instance_id>
        <device_attributes><shared><multiprocessor_count>42</multiprocessor_count></shared></device_attributes>
        <fb_memory_usage><total>40192 MiB</total><used>37 MiB</used></fb_memory_usage>
      </mig_device>
      <mig_device>
        <index>1</index><gpu_instance_id>2</gpu_instance_id><compute_instance_id>0</compute_instance_id>
        <fb_memory_usage><total>40192 MiB</total></fb_memory_usage>
      </mig_device>
    </mig_devices>
    <uuid>GPU-aaaaaaaa-0000-0000-0000-000000000000</uuid>
    <minor_number>0</minor_number>
    <fb_memory_usage><total>81920 MiB</total></fb_memory_usage>
  </gpu>
  <gpu id="00000000:0F:00.0">
    <product_name>NVIDIA A100-SXM4-80GB</product_name>
    <mig_mode><current_mig>Disabled</current_mig><pending_mig>Enabled</pending_mig></mig_mode>
    <mig_devices>None</mig_devices>
  </gpu>
</nvidia_smi_log>
"""


def test_query_xml_mig_devices():
    # Layout of <mig_device> as in nvidia-smi 535 (schema v12) output quoted in public exporters' tests.
    data = parse_query_xml(MIG_XML)
    devices = data["gpus"][0]["mig_devices"]
    assert [(d["gpu_instance_id"], d["compute_instance_id"]) for d in devices] == [(1, 0), (2, 0)]
    assert [d["memory_total_mib"] for d in devices] == [40192, 40192]
    assert data["gpus"][1]["mig_devices"] == []
    assert data["gpus"][1]["mig"] == {"current": "disabled", "pending": "enabled"}
    assert data["gpus"][1]["minor_number"] is None


def test_query_xml_rejects_garbage():
    with pytest.raises(NvidiaSmiParseError):
        parse_query_xml("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
    with pytest.raises(NvidiaSmiParseError):
        parse_query_xml("<?xml version='1.0'?><other/>")


# DGX-1 (8 x V100) layout with four mlx5 NICs, space separated, as printed by drivers 4xx (the NV1/NV2
# hybrid cube mesh is the documented DGX-1 topology).
DGX1_SPACES = """        GPU0    GPU1    GPU2    GPU3    GPU4    GPU5    GPU6    GPU7    mlx5_0  mlx5_2  mlx5_1  mlx5_3  CPU Affinity
GPU0     X      NV1     NV1     NV2     NV2     SYS     SYS     SYS     PIX     SYS     PHB     SYS     0-19,40-59
GPU1    NV1      X      NV2     NV1     SYS     NV2     SYS     SYS     PIX     SYS     PHB     SYS     0-19,40-59
GPU2    NV1     NV2      X      NV2     SYS     SYS     NV1     SYS     PHB     SYS     PIX     SYS     0-19,40-59
GPU3    NV2     NV1     NV2      X      SYS     SYS     SYS     NV1     PHB     SYS     PIX     SYS     0-19,40-59
GPU4    NV2     SYS     SYS     SYS      X      NV1     NV1     NV2     SYS     PIX     SYS     PHB     20-39,60-79
GPU5    SYS     NV2     SYS     SYS     NV1      X      NV2     NV1     SYS     PIX     SYS     PHB     20-39,60-79
GPU6    SYS     SYS     NV1     SYS     NV1     NV2      X      NV2     SYS     PHB     SYS     PIX     20-39,60-79
GPU7    SYS     SYS     SYS     NV1     NV2     NV1     NV2      X      SYS     PHB     SYS     PIX     20-39,60-79
mlx5_0  PIX     PIX     PHB     PHB     SYS     SYS     SYS     SYS      X      SYS     PHB     SYS
mlx5_2  SYS     SYS     SYS     SYS     PIX     PIX     PHB     PHB     SYS      X      SYS     PHB
mlx5_1  PHB     PHB     PIX     PIX     SYS     SYS     SYS     SYS     PHB     SYS      X      SYS
mlx5_3  SYS     SYS     SYS     SYS     PHB     PHB     PIX     PIX     SYS     PHB     SYS      X

Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NV#  = Connection traversing a bonded set of # NVLinks
"""

# Old drivers (3xx) printed SOC instead of SYS; no legend here (cut off).
OLD_SOC = """        GPU0    GPU1    GPU2    GPU3    CPU Affinity
GPU0     X      PIX     SOC     SOC     0-5,12-17
GPU1    PIX      X      SOC     SOC     0-5,12-17
GPU2    SOC     SOC      X      PIX     6-11,18-23
GPU3    SOC     SOC     PIX      X      6-11,18-23
"""

# Tab separated like the H200 capture, NICn columns with the NIC legend, an empty CPU affinity cell.
NIC_TABS = ("\tGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
            "GPU0\t X \tNODE\tSYS\tSYS\tPHB\t0-15\t0\t\tN/A\n"
            "GPU1\tNODE\t X \tSYS\tSYS\tNODE\t0-15\t0\t\tN/A\n"
            "GPU2\tSYS\tSYS\t X \tNODE\tSYS\t\t1\t\tN/A\n"
            "GPU3\tSYS\tSYS\tNODE\t X \tSYS\t16-31\t1\t\tN/A\n"
            "NIC0\tPHB\tNODE\tSYS\tSYS\t X \t\t\t\t\n\n"
            "Legend:\n\n  X    = Self\n\nNIC Legend:\n\n  NIC0: mlx5_0\n\n")

TOPO_CASES = [
    (DGX1_SPACES, 8, ["mlx5_0", "mlx5_2", "mlx5_1", "mlx5_3"],
     {"0-1": "NV1", "0-3": "NV2", "0-4": "NV2", "0-5": "SYS", "6-7": "NV2"}, "0-19,40-59"),
    (OLD_SOC, 4, [], {"0-1": "PIX", "0-2": "SYS", "2-3": "PIX"}, "0-5,12-17"),
    (NIC_TABS, 4, ["NIC0"], {"0-1": "NODE", "0-2": "SYS", "2-3": "NODE"}, "0-15"),
    ("\x1b[4m" + OLD_SOC.replace("\n", "\r\n", 1) + "\x1b[0m", 4, [], {"1-3": "SYS"}, "0-5,12-17"),
]


@pytest.mark.parametrize("text,count,nics,links,aff0", TOPO_CASES)
def test_topology_variants(text, count, nics, links, aff0):
    topo = parse_topology(text)
    assert topo["gpus"] == ["GPU%d" % i for i in range(count)]
    assert topo["nics"] == nics
    for key, word in links.items():
        assert topo["links"][key] == word, key
    assert len(topo["links"]) == count * (count - 1) // 2
    assert topo["affinity"]["0"]["cpu_affinity"] == aff0


def test_topology_nic_legend_and_empty_affinity():
    topo = parse_topology(NIC_TABS)
    assert topo["nic_names"] == {"NIC0": "mlx5_0"}
    assert topo["nic_links"]["0"] == {"NIC0": "PHB"}
    assert topo["affinity"]["2"] == {"cpu_affinity": "", "numa_affinity": "1", "gpu_numa_id": None}
    assert topo["affinity"]["3"]["cpu_affinity"] == "16-31"


def test_topology_spaces_empty_affinity():
    text = OLD_SOC.replace("6-11,18-23\nGPU3", "\nGPU3", 1)
    assert parse_topology(text)["affinity"]["2"]["cpu_affinity"] == ""


def test_topology_without_header_fails():
    with pytest.raises(NvidiaSmiParseError):
        parse_topology("nothing here\n")


@pytest.mark.parametrize("text,kind", [
    ("Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 550.90", "lib_rm_version_mismatch"),
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
     "NVIDIA driver is installed and running.", "driver_not_loaded"),
    ("No devices were found", "no_devices"),
    ("Failed to initialize NVML: Insufficient Permissions", "no_permission"),
    ("NVIDIA-SMI couldn't find libnvidia-ml.so library in your system.", "library_not_found"),
    ("something else", "unknown"),
])
def test_classify_error(text, kind):
    assert classify_error(text) == kind


def test_compute_cap_csv():
    assert parse_compute_cap_csv(read("h200x2", "ansible-run", "smi_compute_cap.csv")) == {
        "00000000:00:06.0": "9.0", "00000000:00:07.0": "9.0"}
    assert parse_compute_cap_csv("00000000:01:00.0, [N/A]\r\n") == {}
