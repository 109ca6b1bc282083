# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 28 (truth round 3), facts and drift: a space-aligned ``topo -m`` with empty CPU Affinity cells,
NVLink bridges of different widths, CPU masks past CPU 1023.

Provenance: tests/fixtures/nvidia-smi/topo/README.md (h200x8_empty-cpu-affinity_spaces.txt: the cell layout,
tabs, legend and "N/A" cells of the real 2 x H200 capture in ../shared/fixtures/h200x2/smi_topo.txt, widened
to the 8 x H200 board the issue's sample came from; DERIVED, see the README). The NVML cases run NVIDIA's
calls through the project's fake pynvml (tests/fakes/fake_nvml), states derived from its real-capture
topologies as each test says."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu import nvml as N
from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu.gpu_facts_assembly import (
    check_expected,
    facts_from_nvml,
    facts_from_smi,
)
from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu.nvidia_smi import parse_topology
from ansible_collections.gpufleet.vllm.tests.fakes.fake_nvml.loader import fake

FIX = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures")


def _read(*parts):
    with open(os.path.join(FIX, *parts)) as handle:
        return handle.read()


H200X8 = _read("nvidia-smi", "topo", "h200x8_empty-cpu-affinity_spaces.txt")


def test_space_aligned_empty_cpu_affinity_keeps_the_numa_node():
    """GPUs 0-3 print no CPU list: their NUMA node "0" sits on the tab stop halfway between the header's
    "CPU Affinity" and "NUMA Affinity" labels. Read by the header alone it became the CPU list "0" and the
    NUMA node was lost (issue 28); the row's own tab stops put it under NUMA Affinity."""
    topo = parse_topology(H200X8)
    for gpu in "0123":
        assert topo["affinity"][gpu] == {"cpu_affinity": "", "numa_affinity": "0", "gpu_numa_id": None}, gpu
    for gpu in "4567":
        assert topo["affinity"][gpu] == {"cpu_affinity": "48-95,144-191", "numa_affinity": "1", "gpu_numa_id": None}, gpu
    assert len(topo["links"]) == 28 and set(topo["links"].values()) == {"NV18"}
    assert topo["warnings"] == []


def test_the_same_rows_with_tabs_read_the_same():
    """The fixture is the tab-separated print expanded at 8 columns: putting the tabs back changes nothing."""
    retabbed = "\n".join(_retab_line(line) for line in H200X8.split("\n"))
    assert "\t" in retabbed
    assert parse_topology(retabbed)["affinity"] == parse_topology(H200X8)["affinity"]


def _retab_line(line):
    """Runs of 2+ spaces that end on a multiple of 8 as one tab per stop (the inverse of expandtabs(8))."""
    out, col, i = [], 0, 0
    while i < len(line):
        j = i
        while j < len(line) and line[j] == " ":
            j += 1
        if j - i >= 2 and j % 8 == 0 and j < len(line):
            out.append("\t" * ((j - ((i // 8) + 1) * 8) // 8 + 1))
            i = j
            continue
        out.append(line[i])
        i += 1
    return "".join(out)


def test_facts_from_the_space_aligned_topo():
    """nvidia-smi backend: an empty cell is an unknown CPU list (an error, as NVML's empty mask), and the
    NUMA Affinity cell gives the node where sysfs has none."""
    query = {"gpus": [{"pci_bus_id": "00000000:%02X:00.0" % (0x10 + i), "product_name": "NVIDIA H200",
                       "memory_total_mib": 143771, "mig": {"current": None, "pending": None}} for i in range(8)],
             "driver_version": "580.159.04", "cuda_version": "13.0"}
    facts = facts_from_smi(query, parse_topology(H200X8))
    gpus = facts["gpus"]
    assert [g["numa_node"] for g in gpus] == [0] * 4 + [1] * 4
    assert gpus[0]["cpu_affinity"] is None and gpus[0]["errors"]["cpu_affinity"].startswith("empty")
    assert gpus[4]["cpu_affinity_str"] == "48-95,144-191"
    sysfs = dict((g["pci_bus_id"], {"numa_node": -1}) for g in query["gpus"])
    assert [g["numa_node"] for g in facts_from_smi(query, parse_topology(H200X8), sysfs=sysfs)["gpus"]] == [None] * 8


def _bridged_pairs(links_01, links_23):
    """4 x A100 PCIe as two bridged pairs (DERIVED from the fake's a100x2_pcie_bridge, the layout the issue
    names: GPUs 0-1 bridged with 4 links, 2-3 with 2)."""
    lib = fake("a100x2_pcie_bridge")
    pair = [dict(g) for g in lib.state["gpus"]]
    buses = ["00000000:17:00.0", "00000000:65:00.0", "00000000:B1:00.0", "00000000:CA:00.0"]
    gpus = []
    for i in range(4):
        gpu = dict(pair[i % 2], pci_bus_id=buses[i], minor_number=i, uuid="GPU-a100-%d" % i, errors={})
        peer = buses[i ^ 1]
        width = links_01 if i < 2 else links_23
        gpu["nvlinks"] = [{"state": 1, "version": 3, "remote_type": 0, "remote": peer} for dummy in range(width)]
        gpus.append(gpu)
    lib.state["gpus"] = gpus
    lib.state["pairs"] = dict(("%d-%d" % (a, b), {"p2p_nvlink": 0 if (a, b) in ((0, 1), (2, 3)) else 5, "ancestor": 50})
                              for a in range(4) for b in range(a + 1, 4))
    return lib


def _facts(lib, cpu_count=32):
    nvml = N.Nvml(lib)
    nvml.init()
    try:
        return facts_from_nvml(N.collect(nvml, cpu_count), {})
    finally:
        nvml.shutdown()


def test_bridges_of_different_widths_are_not_drift():
    facts = _facts(_bridged_pairs(4, 2))
    assert facts["nvlink_islands"] == [[0, 1], [2, 3]]
    assert [g["nvlink_active_count"] for g in facts["gpus"]] == [4, 4, 2, 2]
    assert check_expected(facts, {}) == []   # was: "GPU2 has 2 active NVLinks while its peers have 4"


def test_a_link_down_within_an_island_is_still_drift():
    lib = _bridged_pairs(4, 2)
    lib.state["gpus"][1]["nvlinks"][3]["state"] = 0
    problems = check_expected(_facts(lib), {})
    assert "GPU1 has 1 NVLink(s) down: [3]" in problems
    assert "GPU1 has 3 active NVLinks while its peers have 4 (NVLink island [0, 1])" in problems
    assert not [p for p in problems if p.startswith(("GPU2", "GPU3"))]


def test_declared_wiring_is_compared_per_gpu():
    problems = check_expected(_facts(_bridged_pairs(4, 2)), {"nvlinks_per_gpu": 4})
    assert problems == ["GPU2 has 2 active NVLinks, expected 4", "GPU3 has 2 active NVLinks, expected 4"]


def test_cpu_mask_past_cpu_1023_is_read_whole():
    """A NUMA node with CPUs 1024-2047 (DERIVED from the fake's HGX H100 layout): the 1024-CPU mask NVML
    was asked for held none of them (an "empty" error), and CPUs 960-1100 came back cut at 1023."""
    lib = fake("h100x8_nvswitch")
    lib.state["gpus"][4]["cpu_affinity"] = list(range(1024, 2048))
    lib.state["gpus"][5]["cpu_affinity"] = list(range(960, 1101))
    gpus = _facts(lib, cpu_count=32)["gpus"]
    assert gpus[4]["cpu_affinity_str"] == "1024-2047" and "cpu_affinity" not in gpus[4]["errors"]
    assert gpus[5]["cpu_affinity_str"] == "960-1100"
    assert gpus[0]["cpu_affinity_str"] == "0-55,112-167"


def test_cpu_mask_cut_by_the_binding_is_an_error():
    """A binding that returns fewer words than asked (or a mask set up to the widest read) is reported."""
    lib = fake("h100x8_nvswitch")
    real = lib.nvmlDeviceGetCpuAffinity
    lib.nvmlDeviceGetCpuAffinity = lambda handle, size: real(handle, size)[:16]
    gpu = _facts(lib)["gpus"][0]
    assert gpu["cpu_affinity"] is None and gpu["errors"]["cpu_affinity"].startswith("cut")
    lib = fake("h100x8_nvswitch")
    lib.state["gpus"][0]["cpu_affinity"] = list(range(0, N.CPU_SET_WORDS_MAX * 64, 64))   # one CPU per word, to the top
    gpu = _facts(lib)["gpus"][0]
    assert gpu["cpu_affinity"] is None and gpu["errors"]["cpu_affinity"].startswith("cut")
