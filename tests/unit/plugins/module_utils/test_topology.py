# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu.topology import (
    format_cpu_list,
    nvlink_islands,
    nvlink_label,
    numa_groups,
    parse_cpu_list,
    render_matrix,
)

SW = "FFFFFFFF:FF:FF.0"


@pytest.mark.parametrize("text,cpus", [
    ("", []), (None, []), ("0-3", [0, 1, 2, 3]), ("0-1,8,10-11", [0, 1, 8, 10, 11]), ("5", [5]),
])
def test_cpu_list_roundtrip(text, cpus):
    assert parse_cpu_list(text) == cpus
    assert format_cpu_list(cpus) == (text or "")


def _gpu(bus, links):
    return {"pci_bus_id": bus, "nvlinks": links}


def _links(n, remote, bus=None, active=True):
    return [{"link": i, "active": active, "remote": remote, "remote_pci_bus_id": bus} for i in range(n)]


@pytest.mark.parametrize("a,b,pair,word", [
    # NVSwitch: remote ids are all FFFFFFFF:FF:FF.0, P2P over NVLink OK -> NV<links>
    (_gpu("A", _links(18, "nvswitch", SW)), _gpu("B", _links(18, "nvswitch", SW)),
     {"p2p_nvlink": True, "common_ancestor": "PHB"}, "NV18"),
    # NVSwitch links but NVLink P2P not OK (fabric manager down): fall back to PCIe
    (_gpu("A", _links(18, "nvswitch", SW)), _gpu("B", _links(18, "nvswitch", SW)),
     {"p2p_nvlink": False, "common_ancestor": "SYS"}, "SYS"),
    # Direct bridge: count the links that point at the peer
    (_gpu("A", _links(4, "gpu", "B")), _gpu("B", _links(4, "gpu", "A")), {"p2p_nvlink": True}, "NV4"),
    # Links to a third GPU do not count for this pair
    (_gpu("A", _links(2, "gpu", "C")), _gpu("B", _links(2, "gpu", "C")), {"common_ancestor": "NODE"}, "NODE"),
    # Inactive links do not count
    (_gpu("A", _links(4, "gpu", "B", active=False)), _gpu("B", []), {"common_ancestor": "PIX"}, "PIX"),
    # Nothing known
    (_gpu("A", []), _gpu("B", []), {}, None),
])
def test_nvlink_label(a, b, pair, word):
    assert nvlink_label(a, b, pair) == word


def test_islands():
    links = {"0-1": "NV4", "2-3": "NV4", "0-2": "SYS", "1-3": "SYS", "0-3": "SYS", "1-2": "SYS", "4-5": None}
    assert nvlink_islands([0, 1, 2, 3, 4], links) == [[0, 1], [2, 3], [4]]
    assert nvlink_islands([], {}) == []


def test_numa_groups_unknown_last():
    gpus = [{"index": 0, "numa_node": 1}, {"index": 1, "numa_node": None}, {"index": 2, "numa_node": 0}]
    assert numa_groups(gpus) == [{"node": 0, "gpus": [2]}, {"node": 1, "gpus": [0]}, {"node": None, "gpus": [1]}]


def test_render_matrix():
    text = render_matrix(2, {"0-1": "NV18"})
    assert text.splitlines()[1].split() == ["GPU0", "X", "NV18"]
    assert render_matrix(0, {}) == ""
