# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The offload tier's pinned host memory against the host's memory (issue 46: "pinned memory checked against the
host's RAM ... and other instances"): every instance on the host pins about 1.9 x its cpu_offload_bytes
(kv_capacity.PINNED_HOST_FACTOR); above 90 % of MemTotal the plan fails, above 70 % it warns, each naming the
largest offload that fits. The expected values below are worked by hand from those three numbers."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import model_families as fam
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan.planner import build_plan

GIB = 1024 ** 3
FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures")
with open(os.path.join(FIXTURES, "model-configs", "Qwen__Qwen3-8B.config.json")) as _fh:
    QWEN3_8B = json.load(_fh)


@pytest.mark.parametrize("offload_gib,instances,host_gib,code,fits", [
    # 1.9 x 40 = 76 GiB of 256: 30 % - nothing to say
    (40, 1, 256, None, None),
    # 1.9 x 100 = 190 GiB of 256: 74 % - tight; fits at 0.7 x 256 / 1.9 = 94.3 GiB
    (100, 1, 256, "offload_host_memory_tight", 94.3),
    # 1.9 x 200 = 380 GiB of 256: 148 % (seed 000's "200 GiB arc" on a 256 GiB host) - refused; 0.9 x 256 / 1.9
    (200, 1, 256, "offload_exceeds_host_memory", 121.3),
    # two instances x 1.9 x 40 = 152 GiB of 192: 79 % - tight; per instance 0.7 x 192 / 2 / 1.9 = 35.4 GiB
    (40, 2, 192, "offload_host_memory_tight", 35.4),
    # four instances x 1.9 x 40 = 304 GiB of 256 - refused; per instance 0.9 x 256 / 4 / 1.9 = 30.3 GiB
    (40, 4, 256, "offload_exceeds_host_memory", 30.3),
    # unknown host memory: not checked
    (200, 1, 0, None, None),
])
def test_pinned_memory_of_all_instances_against_the_host(offload_gib, instances, host_gib, code, fits):
    found = fam.host_memory_findings(offload_gib * GIB, instances, host_gib * GIB)
    if code is None:
        assert found == []
        return
    (finding,) = found
    assert finding["code"] == code
    assert finding["level"] == ("error" if code == "offload_exceeds_host_memory" else "warning")
    assert "cpu_offload_bytes" in finding["message"] and "%.1f GiB)" % fits in finding["fix"]


def _plan(**over):
    params = dict(model="unused", gpus={"profile": "h200", "count": 1}, max_model_len=32768,
                  kv_cache_memory_bytes=20 * GIB, host="127.0.0.1", port_base=8000, vllm_version="0.26.0")
    params.update(over)
    params["gpus"] = fam.expand_gpus(params["gpus"])
    return build_plan(params, QWEN3_8B, "/models/m", weights_total=16 * GIB, weights_source="index")


def test_the_plan_refuses_an_offload_the_host_cannot_pin():
    plan = _plan(cpu_offload_bytes=200 * GIB, host_memory_bytes=256 * GIB)
    errors = [f for f in plan["findings"] if f["level"] == "error"]
    assert [f["code"] for f in errors] == ["offload_exceeds_host_memory"], plan["findings"]


def test_the_plan_without_host_memory_or_offload_says_nothing_of_it():
    for over in ({"cpu_offload_bytes": 200 * GIB}, {"host_memory_bytes": 16 * GIB}):
        codes = [f["code"] for f in _plan(**over)["findings"]]
        assert not [c for c in codes if c.startswith(("offload_exceeds", "offload_host_memory_tight"))], codes


# --- per NUMA node: an instance on one known node runs under numactl --membind=NODE (units/render.py), so its
# pinned memory comes from that node alone. Expected values worked by hand as above, per node.
def _groups(*nodes):
    return [{"numa_node": n, "gpu_indices": [i]} for i, n in enumerate(nodes)]


@pytest.mark.parametrize("nodes, offload_gib, node_gib, found", [
    # one instance per node, 1.9 x 60 = 114 GiB of 256 each: 45 % - nothing to say
    ((0, 1), 60, {0: 256, 1: 256}, []),
    # both on node 0: 2 x 114 = 228 GiB of 256 (89 %) - tight there; 0.7 x 256 / 2 / 1.9 = 47.2 GiB per instance
    ((0, 0), 60, {0: 256, 1: 256}, [("offload_numa_node_memory_tight", 0, 47.2)]),
    # both on node 1 of a host whose node 1 holds 128 GiB: 228 of 128 - refused; 0.9 x 128 / 2 / 1.9 = 30.3 GiB
    ((1, 1), 60, {0: 384, 1: 128}, [("offload_exceeds_numa_node_memory", 1, 30.3)]),
    # unknown node (no NUMA information) or a node the facts lack: not checked per node
    ((None, None), 200, {0: 64}, []),
    ((2,), 200, {0: 64}, []),
    # no per-node facts, or no offload
    ((0, 0), 200, None, []),
    ((0, 0), 0, {0: 8}, []),
])
def test_pinned_memory_per_numa_node(nodes, offload_gib, node_gib, found):
    numa = dict((k, v * GIB) for k, v in node_gib.items()) if node_gib else None
    got = fam.numa_memory_findings(_groups(*nodes) + [None], offload_gib * GIB, numa)
    assert [(f["code"], int(f["message"].split("NUMA node ")[1].split()[0]), float(f["fix"].split("(")[1].split()[0]))
            for f in got] == found


def test_the_plan_checks_each_node_it_binds():
    two_on_node0 = _plan(gpus={"profile": "h200", "count": 2, "numa_nodes": [[0, 1]]}, cpu_offload_bytes=60 * GIB,
                         host_memory_bytes=512 * GIB, host_numa_memory_bytes={0: 256 * GIB, 1: 256 * GIB})
    codes = [f["code"] for f in two_on_node0["findings"]]
    assert "offload_numa_node_memory_tight" in codes and "offload_host_memory_tight" not in codes, codes
    one_each = _plan(gpus={"profile": "h200", "count": 2, "numa_nodes": [[0], [1]]}, cpu_offload_bytes=60 * GIB,
                     host_memory_bytes=512 * GIB, host_numa_memory_bytes={0: 256 * GIB, 1: 256 * GIB})
    assert not [f for f in one_each["findings"] if "numa_node_memory" in f["code"]], one_each["findings"]


def test_an_instance_over_two_nodes_pins_half_its_tier_on_each():
    # rtx4090x4's shape: one TP-4 instance over nodes 0 (GPUs 0, 1) and 1 (GPUs 2, 3), vLLM binding each worker to its
    # GPU's node (--numa-bind-nodes 0 0 1 1): 1.9 x 200 GiB / 2 = 190 GiB per node. Of 256 GiB: 74 % - tight on both;
    # fits at 0.7 x 256 / 0.5 / 1.9 = 188.6 GiB per instance.
    hw = {"gpus": [{"index": i, "numa_node": n} for i, n in enumerate((0, 0, 1, 1))]}
    group = {"numa_node": None, "gpu_indices": [0, 1, 2, 3], "locality": "cross_numa"}
    got = fam.numa_memory_findings([group], 200 * GIB, {0: 256 * GIB, 1: 256 * GIB}, hw)
    assert [f["code"] for f in got] == ["offload_numa_node_memory_tight"] * 2
    assert ["NUMA node 0 (0.5 instance" in got[0]["message"], "188.6 GiB)" in got[0]["fix"]] == [True, True]
    # the seed rig's 512 GiB as one node: 380 of 512 GiB (74 %) - the host-wide rule's figure, once
    assert len(fam.numa_memory_findings([dict(group, numa_node=0)], 200 * GIB, {0: 512 * GIB}, hw)) == 1
