#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: service_unit
short_description: Install or roll back the Ray node's, vLLM router's, DCGM exporter's or persistence daemon's unit, checked first
version_added: 0.1.0
author:
  - gpufleet.vllm maintainers (@gpufleet)
description:
  - Writes one unit of a kind with the collection's one unit writer (the one the vllm_units module uses for the vLLM
    instances) - the Ray node of a group on Ray (the vllm role), vLLM's router (the router role), NVIDIA's DCGM
    exporter (the monitoring role) or NVIDIA's persistence daemon where the driver ships no unit (the host_tuning
    role).
  - With O(state=present) it renders the unit, compares it with the live file, checks a changed unit on its staged
    copy with C(systemd-analyze verify) (any error, or any line about the unit, refuses it and leaves the live unit
    as it was), keeps the live unit as the rollback copy in O(rollback_dir), writes the new one atomically and
    reloads systemd. It never starts or restarts the service; RV(restart) says whether the unit changed.
  - With O(state=rollback) it puts the rollback copy back and keeps the unit it replaces as the new copy.
  - Every value that lands in the unit is checked - a newline or another control character (which would add a
    line, such as a root C(ExecStartPre=+)) is refused with the option's name.
options:
  kind:
    description: The unit kind.
    type: str
    choices: [ray, router, dcgm, persistenced]
    required: true
  settings:
    description:
      - The role's values under short names.
      - For V(ray) - C(header), C(unit_name), C(ray_version), C(node_rank), C(cluster_hosts), C(token_file),
        C(fabric_address), C(fabric_iface), C(argv) (C(ray start --block ...)), C(ray_environment), C(environment)
        (vllm_environment), C(user), C(group), C(home), C(cache_dir), C(temp_dir), C(read_write_paths),
        C(limit_nofile), C(limit_memlock), C(platform), C(device_allow), C(rdma), C(rdma_device_allow).
      - For V(router) - C(header), C(unit_name), C(version), C(model), C(policy), C(host), C(config),
        C(drained_dir), C(python), C(launcher), C(user), C(group).
      - For V(dcgm) - C(header), C(unit_name), C(exporter) (the program), C(counters), C(port), C(hostengine)
        (connect to a running nvidia-dcgm), C(hostengine_address).
      - For V(persistenced) - C(header), C(unit_name), C(program) (nvidia-persistenced), C(user) (the account the
        daemon drops root for).
      - O(state=rollback) reads only C(unit_name).
    type: dict
    required: true
  state:
    description: V(present) installs the unit; V(rollback) restores the rollback copy.
    type: str
    choices: [present, rollback]
    default: present
  unit_dir:
    description: Where the unit lives.
    type: path
    default: /etc/systemd/system
  staging_dir:
    description: Where a changed unit is written and checked before the live one is touched (mode 0700).
    type: path
  rollback_dir:
    description: The rollback copy of the live unit (its own folder per kind).
    type: path
    required: true
  verify:
    description: Check a changed unit with C(systemd-analyze verify) before it replaces the live one.
    type: bool
    default: true
  daemon_reload:
    description: Reload systemd after a change (off only where the unit is written for inspection, not for systemd).
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    description: Reports what would change; the unit is checked in a temporary folder when its program exists.
  diff_mode:
    support: full
    description: The unit's text before and after.
"""

EXAMPLES = r"""
- name: Write the router's unit
  gpufleet.vllm.service_unit:
    kind: router
    settings: "{{ _router_unit_settings }}"
    staging_dir: /opt/vllm-router/rollback/staging
    rollback_dir: /opt/vllm-router/rollback/unit
  register: router_unit
"""

RETURN = r"""
unit:
  description: The unit's file name.
  returned: always
  type: str
  sample: vllm-router.service
text:
  description: The rendered unit.
  returned: state=present
  type: str
restart:
  description: The unit is new or changed (the service restarts for it).
  returned: state=present
  type: bool
units_replaced:
  description: A live unit was replaced and kept as the rollback copy.
  returned: state=present
  type: bool
validation:
  description: The check's report, or why the unit was not checked.
  returned: state=present
  type: list
  elements: str
  sample: ["vllm-router.service: systemd-analyze verify - ok"]
restored:
  description: The unit put back.
  returned: state=rollback
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import run_guarded
from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu.gpu_gather import ModuleRunner
from ansible_collections.gpufleet.vllm.plugins.module_utils.units import service


def main():
    module = AnsibleModule(
        argument_spec=dict(
            kind=dict(type="str", choices=["ray", "router", "dcgm", "persistenced"], required=True),
            settings=dict(type="dict", required=True),
            state=dict(type="str", choices=["present", "rollback"], default="present"),
            unit_dir=dict(type="path", default="/etc/systemd/system"),
            staging_dir=dict(type="path"),
            rollback_dir=dict(type="path", required=True),
            verify=dict(type="bool", default=True),
            daemon_reload=dict(type="bool", default=True),
        ),
        required_if=[("state", "present", ["staging_dir"])],
        supports_check_mode=True,
    )
    req = dict(module.params, check_mode=module.check_mode, diff=module._diff)
    module.exit_json(**run_guarded(module, lambda m: service.run(req, ModuleRunner(m)), "Managing the %s unit" % req["kind"]))


if __name__ == "__main__":
    main()
