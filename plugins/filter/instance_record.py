# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: instance_record
short_description: A vLLM instance of the plan as a record (host, port, served model name, ...)
version_added: 0.1.0
author: gpufleet.vllm maintainers
description:
  - The fields the planner wrote beside an instance's argv (M(gpufleet.vllm.vllm_plan) RETURN C(instances)), or,
    for an entry written by hand or whose argv was changed after the plan, the same fields read from its argv the
    way vLLM's argparse reads it (the last of a repeated flag, C(--flag=value), abbreviations).
  - The core is C(plugins/module_utils/plan/instance.py), which the unit writer, the router's worker list and the
    benchmark use too, so a role's template reads the same values as the unit.
options:
  _input:
    description: One instance (a dict with at least C(name) and C(argv)).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: The address and port each planned instance listens on
  ansible.builtin.debug:
    msg: "{{ (item | gpufleet.vllm.instance_record).host | default('every address', true) }}:{{ (item | gpufleet.vllm.instance_record).port }}"
  loop: "{{ vllm_served_instances }}"
"""

RETURN = r"""
_value:
  description:
    - C(name), C(model), C(served_model_name), C(host) (null - every address), C(port) (null when neither the argv
      nor the entry names one), C(max_model_len) (null when the argv names none), C(devices), C(environment), C(argv).
    - C(listen_address) and C(listen_port) - where the engine binds, with vLLM's defaults (C(0.0.0.0), C(8000))
      filled in.
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.vllm.plugins.module_utils.plan.instance import listen_address, listen_port, record


def instance_record(instance):
    if not isinstance(instance, dict):
        raise AnsibleFilterError("instance_record: the input must be one instance (a dict with name and argv), got %s"
                                 % type(instance).__name__)
    out = record(instance)
    # where the engine binds, vLLM's defaults filled in (consumers write no default of their own)
    out.update(listen_address=listen_address(out), listen_port=listen_port(out))
    return out


class FilterModule(object):
    def filters(self):
        return {"instance_record": instance_record}
