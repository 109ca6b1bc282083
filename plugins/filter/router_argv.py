# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: router_argv
short_description: The vllm-router command line of the router role, from its router_* variables
version_added: 0.1.0
author: gpufleet.vllm maintainers
description:
  - One table in C(plugins/module_utils/router/argv.py) maps each flag the role sets to its C(router_*) variable;
    C(--disable-circuit-breaker) unless C(router_circuit_breaker); C(router_extra_args) last.
options:
  _input:
    description: The role's variables, C(router_*) name -> value (every one the table names).
    type: dict
    required: true
  venv:
    description: The router's venv (its C(bin/vllm-router) is the program).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: The router's argv
  ansible.builtin.debug:
    msg: "{{ dict(query('ansible.builtin.varnames', '^router_') | zip(query('ansible.builtin.vars',
      *query('ansible.builtin.varnames', '^router_')))) | gpufleet.vllm.router_argv('/opt/vllm-router/venvs/x') }}"
"""

RETURN = r"""
_value:
  description: The argv, every item a string.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.vllm.plugins.module_utils.router.argv import RouterArgvError, router_argv as _argv


def router_argv(values, venv):
    try:
        return _argv(dict(values), str(venv))
    except RouterArgvError as exc:
        raise AnsibleFilterError("router_argv: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"router_argv": router_argv}
