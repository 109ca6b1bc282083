# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: bench_setup
short_description: Check a benchmark's inputs and derive its targets, workloads and SLO (bench role)
version_added: 0.1.0
author: gpufleet.vllm maintainers
description:
  - From a host's planned instances (C(vllm_served_instances)) and its rendered nginx.conf, returns what
    M(gpufleet.vllm.vllm_bench) needs - the targets (each instance's port and the front door, with the
    C(/metrics) URLs behind each), the served model name, tokenizer folder and max_model_len (from the
    instance's argv), the front door's URL and C(proxy_read_timeout), the workloads (C(gpufleet_workloads),
    or the plan's two defaults when empty) and the SLO (C(gpufleet_slo)), and a hash of the plan.
  - A bad workload or SLO fails here, before any request, with the key and the fix.
options:
  _input:
    description: The planned instances (C(name), C(port), C(argv)).
    type: list
    elements: dict
    required: true
  nginx_conf:
    description: The rendered nginx.conf text (empty - no front door).
    type: str
    default: ""
  workloads:
    description: C(gpufleet_workloads); empty for the plan's defaults.
    type: list
    elements: dict
    default: []
  slo:
    description: C(gpufleet_slo).
    type: dict
    default: {}
  address:
    description: The address the instances listen on, from the host itself.
    type: str
    default: 127.0.0.1
  front_door_url:
    description: Overrides the front door read from O(nginx_conf) (V("") - none).
    type: str
"""

EXAMPLES = r"""
- name: Check the benchmark's inputs
  ansible.builtin.set_fact:
    _bench: >-
      {{ vllm_served_instances | gpufleet.vllm.bench_setup(nginx_conf=_conf, workloads=gpufleet_workloads | default([]),
                                                           slo=gpufleet_slo | default({})) }}
"""

RETURN = r"""
_value:
  description: C(targets), C(instance) (model, tokenizer, max_model_len), C(front_door), C(workloads), C(slo),
    C(plan_hash), C(instance_names).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.vllm.plugins.module_utils.bench import targets
from ansible_collections.gpufleet.vllm.plugins.module_utils.bench.errors import BenchError


def bench_setup(instances, nginx_conf="", workloads=None, slo=None, address="127.0.0.1", front_door_url=None):
    try:
        return targets.setup(instances, nginx_conf, workloads, slo, address, front_door_url)
    except BenchError as exc:
        raise AnsibleFilterError(exc.message)


class FilterModule(object):
    def filters(self):
        return dict(bench_setup=bench_setup)
