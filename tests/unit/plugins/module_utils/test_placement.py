# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import placement as pl

PROFILE = {"name": "GPU", "memory_total_bytes": 1, "compute_capability": "9.0"}


def hw(count, islands=None, numa=None):
    return pl.normalize_gpus(dict(PROFILE, count=count, nvlink_islands=islands or [], numa_nodes=numa or []))


@pytest.mark.parametrize("h,size,instances,expected,codes", [
    (hw(8, islands=[list(range(8))], numa=[[0, 1, 2, 3], [4, 5, 6, 7]]), 2, "auto",
     [[0, 1], [2, 3], [4, 5], [6, 7]], []),
    (hw(8, islands=[list(range(8))], numa=[[0, 1, 2, 3], [4, 5, 6, 7]]), 4, 2, [[0, 1, 2, 3], [4, 5, 6, 7]], []),
    (hw(4, numa=[[0, 1], [2, 3]]), 4, "auto", [[0, 1, 2, 3]], ["instance_spans_numa"]),
    (hw(4, numa=[[0, 1], [2, 3]]), 2, "auto", [[0, 1], [2, 3]], []),
    (hw(4, islands=[[0, 2], [1, 3]]), 2, "auto", [[0, 2], [1, 3]], []),
    (hw(4, islands=[[0, 1]]), 4, "auto", [[0, 1, 2, 3]], ["instance_spans_islands"]),
    (hw(3), 2, "auto", [[0, 1]], ["unused_gpus"]),
    (hw(2), 4, "auto", [], ["too_many_gpus"]),
    (hw(2), 1, 3, [[0], [1]], ["too_many_instances"]),
])
def test_place(h, size, instances, expected, codes):
    groups, findings = pl.place(h, size, instances)
    assert [g["gpu_indices"] for g in groups] == expected
    assert [f["code"] for f in findings] == codes


def test_facts_input_numa_and_cpus():
    facts = {"gpu_count": 2, "nvlink_islands": [[0, 1]],
             "gpus": [{"index": 0, "name": "H200", "memory_total_bytes": 1, "compute_capability": "9.0", "numa_node": 0,
                       "cpu_affinity": [0, 1]},
                      {"index": 1, "name": "H200", "memory_total_bytes": 1, "compute_capability": "9.0", "numa_node": 0,
                       "cpu_affinity": [1, 2]}]}
    h = pl.normalize_gpus(facts)
    assert h["numa_nodes"] == [[0, 1]]
    groups, _findings = pl.place(h, 2)
    assert groups[0]["numa_node"] == 0 and groups[0]["cpus"] == [0, 1, 2] and groups[0]["locality"] == "nvlink"


def test_declared_profile_missing_keys():
    with pytest.raises(pl.PlacementError, match="memory_total_bytes"):
        pl.normalize_gpus({"count": 2, "name": "x", "compute_capability": "8.0"})
