# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: group_findings
short_description: Compare the probes of a multi-host vLLM group and list every problem, per host
version_added: 0.1.0
author: gpufleet.vllm maintainers
description:
  - Takes the probes of every host of one multi-host vLLM instance (from M(gpufleet.vllm.vllm_group_probe),
    merged with the GPU facts) and returns one finding per problem - a host whose vLLM version, venv
    contents, model files, driver, fabric manager, GPU count or GPU model differ from the head's, a
    fabric interface down or without an address, a port of the head this host cannot reach, MIG on,
    C(/dev/shm) too small, and with O(rdma) no active HCA port, no C(nvidia_peermem), a limited memlock.
  - An empty list means the group may start. vLLM itself checks none of this.
options:
  _input:
    description: The probes, one dict per host with C(host) and C(node_rank) (0 is the head).
    type: list
    elements: dict
    required: true
  expected_hosts:
    description: Every host of the group; one without a probe is a finding.
    type: list
    elements: str
    required: true
  rdma:
    description: The group uses RDMA (InfiniBand/RoCE) between hosts.
    type: bool
    default: false
  memlock:
    description: The units' C(LimitMEMLOCK=) (checked with O(rdma)).
    type: str
    default: infinity
  shm_min_bytes:
    description: The least C(/dev/shm) each host needs; 0 skips the check.
    type: int
    default: 0
"""

EXAMPLES = r"""
- name: Stop before anything starts when the hosts of the group differ
  ansible.builtin.assert:
    that: _findings | length == 0
    fail_msg: "{{ _findings | map(attribute='message') | join('; ') }}"
  vars:
    _findings: "{{ probes | gpufleet.vllm.group_findings(expected_hosts=['gpu-a', 'gpu-b']) }}"
"""

RETURN = r"""
_value:
  description: The findings, each C({host, code, message, fix}); empty when the group is consistent.
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.gpufleet.vllm.plugins.module_utils.cluster.group_check import group_findings as _group_findings


def group_findings(probes, expected_hosts, rdma=False, memlock="infinity", shm_min_bytes=0):
    """Every problem of the group, per host (see DOCUMENTATION)."""
    if not isinstance(probes, list) or not all(isinstance(p, dict) and "host" in p for p in probes):
        raise AnsibleFilterError("group_findings: the input must be a list of probes, each a dict with 'host' and 'node_rank'")
    return _group_findings(probes, list(expected_hosts), rdma=boolean(rdma, strict=False), memlock=str(memlock), shm_min_bytes=int(shm_min_bytes))


class FilterModule(object):
    """Filters for multi-host vLLM groups."""

    def filters(self):
        return {"group_findings": group_findings}
