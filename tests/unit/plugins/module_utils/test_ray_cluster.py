# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Ray cluster under a multi-host group (issue 30, item 3): planned ports, `ray start` argv and the node
check against what ray.nodes() returned. The ray.nodes() fixture is a real Ray 2.60.0 output
(tests/fixtures/ray/PROVENANCE.md); the flags were read in Ray 2.60.0's ray/scripts/scripts.py."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.cluster import ray_cluster as rc

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "ray")

# overrides -> message fragment of the refusal (None: accepted)
PORT_CASES = [
    ({}, None),
    ({"gcs": 7000}, None),
    ({"gcs": "7000"}, None),
    ({"gsc": 7000}, "unknown key 'gsc'"),
    ({"gcs": "x"}, "vllm_ray_ports.gcs is 'x', not a port number"),
    ({"gcs": 80}, "gcs=80 must be between 1024 and 65535"),
    ({"node_manager": 6379}, "is also gcs"),
    ({"metrics_export": 10050}, "is also the worker range 10002-10101"),
    ({"min_worker": 20000, "max_worker": 19999}, "min_worker 20000 is above max_worker 19999"),
]


@pytest.mark.parametrize("overrides,refusal", PORT_CASES, ids=[str(c[0]) for c in PORT_CASES])
def test_planned_ports(overrides, refusal):
    if refusal is None:
        ports = rc.planned_ports(overrides)
        assert ports["gcs"] == int(overrides.get("gcs", 6379))
        assert set(ports) == set(rc.DEFAULT_PORTS)
    else:
        with pytest.raises(rc.RayClusterError) as err:
            rc.planned_ports(overrides)
        assert refusal in str(err.value)


def test_head_argv_is_exact():
    argv = rc.start_argv("/v/bin/ray", True, "10.0.0.1", "10.0.0.1", rc.planned_ports(), 32, 8, 4 * 1024 ** 3, "/var/lib/vllm/ray")
    assert argv == ["/v/bin/ray", "start", "--block", "--disable-usage-stats", "--node-ip-address", "10.0.0.1",
                    "--head", "--port", "6379", "--ray-client-server-port", "10001", "--include-dashboard", "false",
                    "--node-manager-port", "6380", "--object-manager-port", "6381", "--runtime-env-agent-port", "6382",
                    "--dashboard-agent-grpc-port", "6383", "--dashboard-agent-listen-port", "6384",
                    "--metrics-export-port", "6385", "--min-worker-port", "10002", "--max-worker-port", "10101",
                    "--num-cpus", "32", "--num-gpus", "8", "--object-store-memory", "4294967296",
                    "--temp-dir", "/var/lib/vllm/ray"]


def test_worker_argv_joins_the_head_and_never_starts_one():
    argv = rc.start_argv("/v/bin/ray", False, "10.0.0.2", "10.0.0.1", rc.planned_ports({"gcs": 7000}), 32, 8, 1, "/t")
    assert argv[argv.index("--address") + 1] == "10.0.0.1:7000"
    assert "--head" not in argv and "--port" not in argv and "--ray-client-server-port" not in argv
    assert argv[argv.index("--node-ip-address") + 1] == "10.0.0.2"


def _real_nodes():
    with open(os.path.join(FIXTURES, "nodes-2-cpu-hosts.json")) as handle:
        return json.load(handle)["nodes"]


def _members(real):
    return [{"host": "head", "address": real[0]["NodeManagerAddress"]}, {"host": "worker", "address": real[1]["NodeManagerAddress"]}]


def test_real_two_node_cluster_passes():
    real = _real_nodes()
    assert rc.node_findings(real, _members(real), 0) == []
    assert [n["alive"] for n in rc.node_table(real)] == [True, True]


def test_a_dead_or_absent_worker_is_named():
    real = _real_nodes()
    members = _members(real)
    dead = [dict(real[0]), dict(real[1], Alive=False)]
    assert [(f["host"], f["code"]) for f in rc.node_findings(dead, members, 0)] == [("worker", "ray_node_missing")]
    assert "is dead in the Ray cluster" in rc.node_findings(dead, members, 0)[0]["message"]
    absent = [real[0]]
    assert "is not a node in the Ray cluster" in rc.node_findings(absent, members, 0)[0]["message"]


def test_gpus_below_the_plan_and_strangers_are_named():
    real = _real_nodes()
    members = _members(real)
    assert [f["code"] for f in rc.node_findings(real, members, 1)] == ["ray_gpus_missing", "ray_gpus_missing"]
    stranger = real + [dict(real[1], NodeManagerAddress="10.9.9.9")]
    assert [f["code"] for f in rc.node_findings(stranger, members, 0)] == ["ray_node_unexpected"]
