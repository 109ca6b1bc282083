# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cross-host checks of a multi-host group (group_check.py): each planted difference is found, on the
host that has it, and a consistent group has no finding. Expected codes are written out per case."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.cluster import group_check as gc

HOSTS = ["gpu-a", "gpu-b"]


def probe(host, rank, **changes):
    base = {"host": host, "node_rank": rank, "vllm_version": "0.33.0", "ray_version": "2.60.0", "venv_digest": "v1",
            "model_digest": "m1", "manifest_digest": "s1",
            "driver_version": "580.65.06", "fabric_manager_version": "580.65.06", "gpu_count": 8, "gpu_name": ["NVIDIA H200"],
            "mig_enabled": [], "interface": {"name": "ens1", "up": True, "address": "10.0.0.%d" % (rank + 1)},
            "reach": {} if rank == 0 else {"29501": "ok"}, "shm_bytes": 64 << 30,
            "hcas": [{"name": "mlx5_0", "port": "1", "state": "4: ACTIVE"}], "peermem": True}
    base.update(copy.deepcopy(changes))
    return base


# (what the second host has, the finding codes on it)
CASES = [
    ({}, []),
    ({"vllm_version": "0.32.0"}, ["different_vllm_version"]),
    ({"venv_digest": "v2"}, ["different_venv_digest"]),
    # the Ray backend: another Ray on one host (Ray refuses the node; named before any unit starts)
    ({"ray_version": "2.59.0", "venv_digest": "v2"}, ["different_ray_version", "different_venv_digest"]),
    ({"model_digest": "m2"}, ["different_model_digest"]),
    ({"manifest_digest": "s2"}, ["different_manifest_digest"]),
    ({"driver_version": "570.133.20"}, ["different_driver_version"]),
    ({"fabric_manager_version": None}, ["different_fabric_manager_version"]),
    ({"gpu_count": 4}, ["different_gpu_count"]),
    ({"gpu_name": ["NVIDIA H100 80GB HBM3"]}, ["different_gpu_name"]),
    ({"mig_enabled": [0, 1]}, ["mig_enabled"]),
    ({"interface": {"name": "ens1", "up": False, "address": None}}, ["interface_down"]),
    ({"interface": {"name": "ens1", "up": True, "address": None}}, ["interface_without_address"]),
    ({"reach": {"29501": "[Errno 111] Connection refused"}}, ["head_port_unreachable"]),
    ({"shm_bytes": 64 << 20}, ["shm_too_small"]),
    ({"hcas": [{"name": "mlx5_0", "port": "1", "state": "1: DOWN"}]}, ["no_active_hca"]),
    ({"hcas": []}, ["no_active_hca"]),
    ({"peermem": False}, ["peermem_not_loaded"]),
    # several at once: every one is listed (one message for all)
    ({"vllm_version": "0.32.0", "venv_digest": "v2", "reach": {"29501": "timed out"}},
     ["different_vllm_version", "different_venv_digest", "head_port_unreachable"]),
]


@pytest.mark.parametrize("changes,codes", CASES, ids=[",".join(c[1]) or "consistent" for c in CASES])
def test_second_host_differences(changes, codes):
    found = gc.group_findings([probe("gpu-a", 0), probe("gpu-b", 1, **changes)], HOSTS, rdma=True,
                              memlock="infinity", shm_min_bytes=256 << 20)
    assert sorted(f["code"] for f in found) == sorted(codes)
    assert all(f["host"] == "gpu-b" for f in found)
    assert all(f["message"] and f["fix"] for f in found)


def test_rdma_checks_only_when_asked():
    probes = [probe("gpu-a", 0, hcas=[], peermem=False), probe("gpu-b", 1, hcas=[], peermem=False)]
    assert gc.group_findings(probes, HOSTS, rdma=False) == []
    codes = sorted(f["code"] for f in gc.group_findings(probes, HOSTS, rdma=True, memlock="8M"))
    assert codes == ["memlock_limited", "memlock_limited", "no_active_hca", "no_active_hca",
                     "peermem_not_loaded", "peermem_not_loaded"]


def test_a_host_not_probed_and_no_head():
    found = gc.group_findings([probe("gpu-b", 1)], HOSTS)
    assert [(f["host"], f["code"]) for f in found] == [("gpu-a", "not_probed"), (None, "no_head")]


def test_keys_not_probed_are_not_compared():
    head = probe("gpu-a", 0)
    other = probe("gpu-b", 1)
    del other["driver_version"], other["gpu_count"]  # a CPU host: no GPU facts
    del head["fabric_manager_version"]
    assert gc.group_findings([head, other], HOSTS) == []


def test_the_head_itself_is_not_reach_checked():
    found = gc.group_findings([probe("gpu-a", 0, reach={"29501": "refused"}), probe("gpu-b", 1)], HOSTS)
    assert found == []


@pytest.mark.parametrize("state, active, codes", [
    ("listening", False, []),
    ("in use (the running engine holds it, or another process)", True, []),   # the serving group's own port
    ("in use (the running engine holds it, or another process)", False, ["head_port_taken"]),
    ("[Errno 13] Permission denied", False, ["head_port_taken"]),
])
def test_the_heads_master_port(state, active, codes):
    head = probe("gpu-a", 0, listened={"29501": {"state": state, "peers": []}}, unit_active=active)
    found = gc.group_findings([head, probe("gpu-b", 1)], HOSTS)
    assert [f["code"] for f in found] == codes
    assert all(f["host"] == "gpu-a" for f in found)


@pytest.mark.parametrize("reach, active, codes", [
    ("ok", False, []),
    ("open", True, []),                           # the serving group's engine holds the port: re-run of a group
    ("open", False, ["head_port_not_probe"]),     # something else answered where the head's probe should be
    ("[Errno 111] Connection refused", True, ["head_port_unreachable"]),
])
def test_a_reach_that_is_not_the_heads_probe(reach, active, codes):
    """Issue 27: any TCP answer counted; now only the head's probe proving this run's token (or the engine)."""
    found = gc.group_findings([probe("gpu-a", 0, unit_active=active), probe("gpu-b", 1, reach={"29501": reach})], HOSTS)
    assert [f["code"] for f in found] == codes
    assert all(f["host"] == "gpu-b" for f in found)
