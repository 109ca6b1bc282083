# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: router_workers
short_description: The vLLM router's worker URLs for one model, from the fleet's planned instances (router role)
version_added: 0.1.0
author: gpufleet.vllm maintainers
description:
  - Takes one entry per host of the router's C(router_workers_from) group (C(name), C(instances) - that host's
    C(vllm_served_instances) - and C(address), its C(router_worker_address) or C(ansible_host)) and returns the
    worker URLs the router host reaches - loopback for its own instances, the address for other hosts' - of the
    chosen model, heads only.
  - Never raises on bad input; returns C(error) (the message naming the variable and the fix) instead, so the
    role can fail with it.
options:
  _input:
    description: The hosts, each C({name, instances, address}).
    type: list
    elements: dict
    required: true
  router_host:
    description: The host the router runs on (C(inventory_hostname)).
    type: str
    required: true
  model:
    description: C(router_model); empty - the only model the group serves.
    type: str
    default: ""
  group:
    description: C(router_workers_from), for the messages.
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: The worker list
  ansible.builtin.set_fact:
    workers: "{{ [{'name': 'gpu1', 'instances': hostvars['gpu1'].vllm_served_instances, 'address': '10.0.0.11'}]
                 | gpufleet.vllm.router_workers(inventory_hostname, '', 'vllm_hosts') }}"
  # {"model": "qwen3-8b", "urls": ["http://10.0.0.11:8000", "http://10.0.0.11:8001"], "models": {...}, "error": ""}
"""

RETURN = r"""
_value:
  description: C(model), C(urls) (of that model), C(models) (every model's URLs) and C(error) (empty when fine).
  type: dict
"""

from ansible_collections.gpufleet.vllm.plugins.module_utils.router.workers import (
    RouterWorkersError,
    fleet_workers,
    select_model,
)


def router_workers(hosts, router_host, model="", group=""):
    """See DOCUMENTATION."""
    try:
        models = fleet_workers(list(hosts or []), router_host)
    except RouterWorkersError as exc:
        return {"model": model or "", "urls": [], "models": {}, "error": str(exc)}
    try:
        name, urls = select_model(models, model or "", group)
    except RouterWorkersError as exc:
        return {"model": model or "", "urls": [], "models": models, "error": str(exc)}
    return {"model": name, "urls": urls, "models": models, "error": ""}


class FilterModule(object):
    """Filters of the router role."""

    def filters(self):
        return {"router_workers": router_workers}
