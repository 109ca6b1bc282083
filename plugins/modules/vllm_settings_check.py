#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: vllm_settings_check
short_description: Check the vllm role's settings before anything is installed
version_added: 0.1.0
author:
  - gpufleet.vllm maintainers (@gpufleet)
description:
  - The first step of the gpufleet.vllm.vllm role, on every phase. Fails, listing every finding (each names the role
    variable and the fix), when a setting cannot be used as it is - most are written into the units, the 0600
    environment file or the engine's command line, where a newline or a space would add a directive or split a line.
  - Checks that there is something to serve (O(instances) or O(profile) with C(model)); C(vllm_venvs_keep) >= 2,
    C(vllm_start_services), the health and shutdown timeouts, C(vllm_unit_prefix), C(vllm_user) not root,
    C(vllm_platform); C(vllm_environment) names (shell-style, none that looks like a secret); the values written as
    unit directives (account names, limits, timeouts, device rules, C(vllm_cluster_hosts)) and paths; each
    hand-written instance's C(cuda_visible_devices) and C(--port) against its C(port); the secrets' characters; and
    refuses an engine that listens beyond loopback unless C(vllm_allow_unauthenticated) (vLLM checks the API key on
    C(/v1) paths only).
  - Read-only; the core is C(plugins/module_utils/units/settings.py).
options:
  settings:
    description:
      - The role's variables by their names - C(vllm_venvs_keep), C(vllm_start_services), C(vllm_health_timeout),
        C(vllm_health_poll_interval), C(vllm_shutdown_timeout), C(vllm_unit_prefix), C(vllm_user), C(vllm_group),
        C(vllm_platform), C(vllm_environment), C(vllm_limit_memlock), C(vllm_limit_nofile), C(vllm_timeout_start_sec),
        C(vllm_restart_sec), C(vllm_device_allow), C(vllm_rdma_device_allow), C(vllm_cluster_hosts), C(vllm_home),
        C(vllm_cache_dir), C(vllm_config_dir), C(vllm_base_dir), C(vllm_read_write_paths), C(vllm_allow_unauthenticated).
    type: dict
    required: true
  instances:
    description: The hand-written planned instances (C(vllm_instances)); empty when the role plans from O(profile).
    type: list
    elements: dict
    default: []
  profile:
    description: C(vllm_profile), the options of gpufleet.vllm.vllm_plan (read - C(model), C(host)).
    type: dict
    default: {}
  hf_token:
    description: C(vllm_hf_token) (only its characters are checked; never returned).
    type: str
    default: ""
  api_key:
    description: C(vllm_api_key) (only its characters and whether it is set are checked; never returned).
    type: str
    default: ""
attributes:
  check_mode:
    support: full
    description: Reads only; runs the same in check mode.
  diff_mode:
    support: none
    description: Changes nothing.
"""

EXAMPLES = r"""
- name: Check the vllm role's settings
  gpufleet.vllm.vllm_settings_check:
    settings:
      vllm_venvs_keep: 2
      vllm_start_services: auto
      vllm_health_timeout: 900
      vllm_health_poll_interval: 5
      vllm_shutdown_timeout: 30
      vllm_unit_prefix: vllm
      vllm_user: vllm
      vllm_group: vllm
      vllm_platform: cuda
      vllm_environment: {VLLM_NO_USAGE_STATS: "1"}
    profile: {model: /srv/models/qwen, host: 127.0.0.1}
    api_key: "{{ vllm_api_key }}"
"""

RETURN = r"""
findings:
  description: Every problem found, each naming the role variable and the fix (empty when the settings hold).
  returned: always
  type: list
  elements: str
  sample: ["vllm_venvs_keep must be >= 2 (the current venv and the previous one for rollback; got 1)."]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError, run_guarded
from ansible_collections.gpufleet.vllm.plugins.module_utils import redact
from ansible_collections.gpufleet.vllm.plugins.module_utils.units.settings import SECRET_NAME_RE, findings


def _check(module):
    p = module.params
    found = findings(p["settings"], p["instances"], p["profile"], hf_token=p["hf_token"], api_key=p["api_key"])
    if found:
        raise UserError("Invalid vllm role settings (%d): %s" % (len(found), " | ".join(found)), findings=found)
    return dict(changed=False, findings=[])


def main():
    module = AnsibleModule(
        argument_spec=dict(
            settings=dict(type="dict", required=True),
            instances=dict(type="list", elements="dict", default=[]),
            profile=dict(type="dict", default={}),
            hf_token=dict(type="str", default="", no_log=True),
            api_key=dict(type="str", default="", no_log=True),
        ),
        supports_check_mode=True,
    )
    # a secret refused in vllm_environment (HF_TOKEN, ...) is masked in everything returned, the echoed settings too
    redact.hide(module, redact.named_secrets(module.params["settings"].get("vllm_environment"), SECRET_NAME_RE))
    module.exit_json(**run_guarded(module, _check, "Checking the vllm role's settings", findings=[]))


if __name__ == "__main__":
    main()
