# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Ray filters as the vllm role calls them: the unit's argv, a bad vllm_ray_ports named, the node check."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.vllm.plugins.filter.ray_node_findings import ray_node_findings
from ansible_collections.gpufleet.vllm.plugins.filter.ray_start_argv import ray_start_argv

NODES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "ray", "nodes-2-cpu-hosts.json")


def test_worker_argv_from_role_values():
    # Ansible hands over strings for ints and "True" for booleans at times: the filter takes both.
    argv = ray_start_argv("/v/bin/ray", "False", "10.88.0.3", "10.88.0.2", "2", "0", "268435456", "/var/lib/vllm/ray")
    assert argv[:6] == ["/v/bin/ray", "start", "--block", "--disable-usage-stats", "--node-ip-address", "10.88.0.3"]
    assert argv[argv.index("--address") + 1] == "10.88.0.2:6379"
    assert argv[argv.index("--num-gpus") + 1] == "0"


def test_bad_ports_are_named():
    with pytest.raises(AnsibleFilterError, match="vllm_ray_ports.node_manager 6379 is also gcs"):
        ray_start_argv("/v/bin/ray", True, "a", "a", 1, 0, 1, "/t", ports={"node_manager": 6379})


def test_node_findings_on_the_real_output():
    with open(NODES) as handle:
        nodes = json.load(handle)["nodes"]
    members = [{"host": "h", "address": nodes[0]["NodeManagerAddress"]}, {"host": "w", "address": "10.0.0.9"}]
    assert [(f["host"], f["code"]) for f in ray_node_findings(nodes, members)] == [
        ("w", "ray_node_missing"), (None, "ray_node_unexpected")]
    with pytest.raises(AnsibleFilterError, match="members must be a list of"):
        ray_node_findings(nodes, [{"host": "h"}])
