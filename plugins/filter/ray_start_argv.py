# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: ray_start_argv
short_description: The C(ray start --block) command line of one host of a multi-host vLLM group on Ray
version_added: 0.1.0
author: gpufleet.vllm maintainers
description:
  - The head (node rank 0) starts the Ray cluster (C(--head --port GCS), no dashboard); every other host joins
    it at C(HEAD:GCS). Each binds its node to its fabric address, and every port Ray would otherwise pick at
    random is planned (node manager, object manager, runtime-env agent, dashboard agent, metrics, the
    worker range), so the fabric network's firewall can list them.
  - C(--block) keeps C(ray start) in the foreground for systemd; usage statistics are off.
options:
  _input:
    description: The C(ray) executable of the group's venv.
    type: str
    required: true
  is_head:
    description: This host is the head (node rank 0).
    type: bool
    required: true
  node_address:
    description: This host's address on the group's fabric interface.
    type: str
    required: true
  head_address:
    description: The head's fabric address (the workers join it).
    type: str
    required: true
  ports:
    description: Overrides of the planned ports (C(vllm_ray_ports)); unknown keys, a port below 1024 or two alike are refused.
    type: dict
    default: {}
  num_cpus:
    description: CPUs this node offers to Ray.
    type: int
    required: true
  num_gpus:
    description: GPUs this node offers to Ray (vLLM places one rank per GPU).
    type: int
    required: true
  object_store_bytes:
    description: Ray's object store (in C(/dev/shm)).
    type: int
    required: true
  temp_dir:
    description: Ray's session folder (sockets, logs).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Render the Ray unit's command line
  ansible.builtin.debug:
    msg: >-
      {{ '/opt/vllm/venvs/0.33.0-abc/bin/ray' | gpufleet.vllm.ray_start_argv(is_head=true, node_address='10.0.0.1',
         head_address='10.0.0.1', num_cpus=32, num_gpus=8, object_store_bytes=4294967296, temp_dir='/var/lib/vllm/ray') }}
"""

RETURN = r"""
_value:
  description: The argv, C(ray start --block --disable-usage-stats --node-ip-address ADDRESS ...).
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.gpufleet.vllm.plugins.module_utils.cluster import ray_cluster


def ray_start_argv(ray_bin, is_head, node_address, head_address, num_cpus, num_gpus, object_store_bytes, temp_dir, ports=None):
    """The host's `ray start` argv (see DOCUMENTATION)."""
    try:
        planned = ray_cluster.planned_ports(ports or {})
    except ray_cluster.RayClusterError as exc:
        raise AnsibleFilterError(str(exc))
    return ray_cluster.start_argv(str(ray_bin), boolean(is_head, strict=False), str(node_address), str(head_address), planned,
                                  int(num_cpus), int(num_gpus), int(object_store_bytes), str(temp_dir))


class FilterModule(object):
    """The Ray unit's command line."""

    def filters(self):
        return {"ray_start_argv": ray_start_argv}
