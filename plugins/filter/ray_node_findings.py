# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: ray_node_findings
short_description: Compare a Ray cluster's nodes with the hosts of a multi-host vLLM group
version_added: 0.1.0
author: gpufleet.vllm maintainers
description:
  - Takes what C(ray.nodes()) returned on the head and the group's members (host and fabric address), and
    returns one finding per problem - a member that is not a live node (its Ray worker did not join, or died),
    a member offering fewer GPUs than the plan needs, a node at an address that is not a member.
  - An empty list means vLLM's Ray executor may place its ranks.
options:
  _input:
    description: C(ray.nodes()) as JSON (each with C(NodeManagerAddress), C(Alive), C(Resources)).
    type: list
    elements: dict
    required: true
  members:
    description: The group's hosts, head first, each C({host, address}).
    type: list
    elements: dict
    required: true
  gpus_per_host:
    description: GPUs each node must offer (0 on a CPU-only cluster).
    type: int
    default: 0
"""

EXAMPLES = r"""
- name: Every host of the group is a live Ray node with its GPUs
  ansible.builtin.assert:
    that: _findings | length == 0
    fail_msg: "{{ _findings | map(attribute='message') | join('; ') }}"
  vars:
    _findings: "{{ ray_nodes | gpufleet.vllm.ray_node_findings(members=[{'host': 'gpu-a', 'address': '10.0.0.1'}], gpus_per_host=8) }}"
"""

RETURN = r"""
_value:
  description: The findings, each C({host, code, message, fix}); empty when every member is a live node.
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.vllm.plugins.module_utils.cluster.ray_cluster import node_findings


def ray_node_findings(nodes, members, gpus_per_host=0):
    """Every member a live Ray node with its GPUs (see DOCUMENTATION)."""
    if not isinstance(nodes, list) or not all(isinstance(n, dict) for n in nodes):
        raise AnsibleFilterError("ray_node_findings: the input must be ray.nodes(), a list of dicts")
    if not all(isinstance(m, dict) and "host" in m and "address" in m for m in members or []):
        raise AnsibleFilterError("ray_node_findings: members must be a list of {host, address}")
    return node_findings(nodes, list(members), int(gpus_per_host))


class FilterModule(object):
    """Checks of the Ray cluster under a multi-host vLLM group."""

    def filters(self):
        return {"ray_node_findings": ray_node_findings}
