# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""topo -m / -q -x parser tests on real outputs found in public issues (tests/fixtures/nvidia-smi/topo/
README.md gives each file's URL), and on variants DERIVED from them, labelled as such with why."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu.nvidia_smi import (
    NvidiaSmiParseError,
    parse_query_xml,
    parse_topology,
    split_glued_affinity,
)

FIX = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures")


def read(*parts):
    with open(os.path.join(FIX, *parts), "rb") as handle:
        return handle.read().decode("utf-8")


def topo_fixture(name):
    return read("nvidia-smi", "topo", name)


def test_real_h100_with_lost_tabs():
    """vllm-project/vllm#13855 (8 x H100, 12 NICs): the pasted header reads 'NIC8NIC9' and rows
    'NODENODE' / 'NODEPXB' where a tab was lost. Every cell still lands in its column."""
    topo = parse_topology(topo_fixture("h100x8_vllm-13855.txt"))
    assert topo["nics"] == ["NIC%d" % i for i in range(12)]
    assert len(topo["links"]) == 28 and set(topo["links"].values()) == {"NV18"}
    assert topo["nic_links"]["5"]["NIC9"] == "PXB"      # the 'NODEPXB' cell of GPU5
    assert topo["nic_links"]["5"]["NIC8"] == "NODE"
    assert topo["nic_links"]["4"]["NIC6"] == "PXB"
    assert topo["nic_links"]["7"]["NIC11"] == "PXB"
    assert topo["affinity"]["0"] == {"cpu_affinity": "0-55,112-167", "numa_affinity": "0", "gpu_numa_id": None}
    assert topo["affinity"]["4"] == {"cpu_affinity": "56-111,168-223", "numa_affinity": "1", "gpu_numa_id": None}


def test_real_rtx4090_tabs():
    """NVIDIA/go-gpuallocator#17 (8 x RTX 4090, 2 NICs, NUMA and GPU NUMA ID columns)."""
    topo = parse_topology(topo_fixture("rtx4090x8_go-gpuallocator-17.txt"))
    assert topo["gpus"] == ["GPU%d" % i for i in range(8)] and topo["nics"] == ["NIC0", "NIC1"]
    assert set(topo["links"].values()) == {"SYS"}
    assert topo["nic_links"]["6"] == {"NIC0": "PHB", "NIC1": "PHB"}
    assert [topo["affinity"][str(i)]["numa_affinity"] for i in range(8)] == ["0"] * 4 + ["1"] * 4
    assert topo["warnings"] == []


def test_real_gtx1080ti_spaces_with_legend():
    """A GTX 1080 Ti pair on a desktop board (XueSongTap blog, spaces, legend, NUMA N/A)."""
    topo = parse_topology(topo_fixture("gtx1080tix2_xuesongtap-blog.txt"))
    assert topo["links"] == {"0-1": "PHB"}
    assert topo["affinity"]["1"] == {"cpu_affinity": "0-11", "numa_affinity": None, "gpu_numa_id": None}


def _glued_4090():
    # DERIVED from the real go-gpuallocator#17 output: tabs expanded (as a terminal copy shows them)
    # and, on GPU4-7, the two spaces between the CPU list and the NUMA node removed, reproducing a
    # lost separator like the ones in vllm#13855. Why derived: no public paste with exactly this
    # glue was found.
    text = topo_fixture("rtx4090x8_go-gpuallocator-17.txt").expandtabs(8)
    return text.replace("56-111,168-223  1", "56-111,168-2231")


def test_derived_cpu_list_glued_to_numa_node():
    topo = parse_topology(_glued_4090())
    for gpu in "4567":
        assert topo["affinity"][gpu] == {"cpu_affinity": "56-111,168-223", "numa_affinity": "1", "gpu_numa_id": None}
    assert topo["affinity"]["0"]["cpu_affinity"] == "0-55,112-167"


@pytest.mark.parametrize("token,known,expected", [
    ("0-31,64-951", (), ("0-31,64-95", "1")),         # the example
    ("0-55,112-1670", (), ("0-55,112-167", "0")),
    ("0-151", ("0-15",), ("0-15", "1")),
    ("0-151", ("0-1",), ("0-1", "51")),                # another row printed '0-1' whole
    ("abc", (), None),
])
def test_split_glued_affinity(token, known, expected):
    assert split_glued_affinity(token, known) == expected


def _messy_1080ti():
    # DERIVED from the real XueSongTap output: mixed tabs and spaces, uneven runs, trailing blanks
    # and a note on the GPU0 line, the kinds of damage the issue lists.
    return ("    GPU0 \t GPU1\t   CPU Affinity   NUMA Affinity   \n"
            "GPU0  \t X \t PHB\t\t 0-11   N/A   <- note pasted on the same line  \n"
            "GPU1 PHB    X  0-11\tN/A\t\t\n\nLegend:\n\n  X    = Self\n")


def test_derived_misaligned_cells():
    topo = parse_topology(_messy_1080ti())
    assert topo["links"] == {"0-1": "PHB"}
    for gpu in "01":
        assert topo["affinity"][gpu] == {"cpu_affinity": "0-11", "numa_affinity": None, "gpu_numa_id": None}


def _with_internal_dtd(xml_text):
    # DERIVED from the real H200 capture: its external DOCTYPE replaced by an internal subset, the
    # form drivers 340-352 print (the DTD inline). Why derived: no verbatim public capture of one of
    # those drivers was found; the subset holds '>' inside, which ended the old DOCTYPE match early.
    subset = ('<!DOCTYPE nvidia_smi_log [\n<!ELEMENT nvidia_smi_log (timestamp, driver_version, '
              'attached_gpus, gpu+)>\n<!ELEMENT timestamp (#PCDATA)>\n<!ATTLIST gpu id CDATA #REQUIRED>\n'
              '<!ENTITY boom "expanded">\n]>')
    return xml_text.replace('<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v13.dtd">', subset)


def test_query_xml_internal_dtd_subset():
    text = _with_internal_dtd(read("h200x2", "smi_q.xml"))
    assert "<!ELEMENT" in text
    parsed = parse_query_xml(text)
    assert [g["memory_total_mib"] for g in parsed["gpus"]] == [143771, 143771]


def test_query_xml_entities_never_expanded():
    text = _with_internal_dtd(read("h200x2", "smi_q.xml")).replace(
        "<driver_version>580.159.04</driver_version>", "<driver_version>&boom;</driver_version>")
    with pytest.raises(NvidiaSmiParseError):
        parse_query_xml(text)
    with pytest.raises(NvidiaSmiParseError):
        parse_query_xml('<?xml version="1.0"?><nvidia_smi_log><!ENTITY x "y"></nvidia_smi_log>')


def test_nvlink_status_real_h200():
    from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu.nvidia_smi import parse_nvlink_status
    status = parse_nvlink_status(read("h200x2", "smi_nvlink_s.txt"))
    assert sorted(status) == [0, 1]
    assert [l["link"] for l in status[0]] == list(range(18))
    assert all(l["active"] and l["speed_gbps"] == 26.562 for l in status[1])


def test_nvlink_status_real_v100_inactive_links():
    from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu.nvidia_smi import parse_nvlink_status
    status = parse_nvlink_status(read("nvidia-smi", "nvlink", "v100_status_azhpc-diagnostics-73.txt"))
    assert list(status) == [3]
    assert [l["link"] for l in status[3] if not l["active"]] == [3, 5]
    assert status[3][0]["speed_gbps"] == 25.781


def test_nvlink_remote_real_a100_and_remote_kinds():
    from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu.gpu_facts_assembly import smi_nvlinks
    from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu.nvidia_smi import (
        parse_nvlink_remote,
        parse_nvlink_status,
    )
    remote = parse_nvlink_remote(read("nvidia-smi", "nvlink", "a100_remote_go-nvml-166.txt"))
    assert remote == {5: {0: "00000008:00:00.0", 1: "00000008:00:00.0"}}
    status = {5: [{"link": 0, "active": True, "speed_gbps": 25.0}, {"link": 1, "active": True, "speed_gbps": 25.0},
                  {"link": 2, "active": False, "speed_gbps": None}]}
    links = smi_nvlinks(status, remote, ["00000000:07:00.0"])[5]
    assert [l["remote"] for l in links] == ["nvswitch", "nvswitch", None]
    assert links[0]["remote_pci_bus_id"] == "00000008:00:00.0"
    # a remote that is a GPU of this host is a direct GPU link
    assert smi_nvlinks(status, {5: {0: "0000:07:00.0"}}, ["00000000:07:00.0"])[5][0]["remote"] == "gpu"


def test_derived_lost_tab_between_cpu_and_numa():
    # DERIVED from the real go-gpuallocator#17 output, tabs kept: the tab between the CPU list and the
    # NUMA node removed on GPU4-7, the same kind of loss as 'NODENODE' in the real vllm#13855 paste.
    text = topo_fixture("rtx4090x8_go-gpuallocator-17.txt").replace("56-111,168-223\t1\t", "56-111,168-2231\t")
    topo = parse_topology(text)
    for gpu in "4567":
        assert topo["affinity"][gpu] == {"cpu_affinity": "56-111,168-223", "numa_affinity": "1", "gpu_numa_id": None}
