#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: vllm_units
short_description: Install, replace, remove and roll back the systemd units of planned vLLM instances
version_added: 0.1.0
author:
  - gpufleet.vllm maintainers (@gpufleet)
description:
  - The unit life cycle of the gpufleet.vllm.vllm role. With O(state=present) it renders one unit per planned
    instance, finds the live units of the role (by their C(X-GpufleetVllmInstance=) marker line) and the stale
    ones, refuses to shrink a host unless O(allow_removal), checks every changed unit (C(systemd-analyze verify)
    and the installed vLLM's own parser on the unit's real C(ExecStart=), through O(checker)), keeps a rollback
    copy of the live units (and points O(previous_link) at the venv they use) when it replaces or removes one,
    writes the units atomically, stops, disables and removes the stale ones, switches O(current_link) to the
    venv by renaming a new link, reloads systemd, and returns the instances to restart.
  - With O(state=rollback) it puts back the units of the rollback copy, stops and removes the live units that
    did not exist before, keeps the live ones as the new rollback copy and swaps the two venv links, so a
    second rollback rolls forward again.
  - Computes everything first and acts last; check mode reports and touches nothing.
options:
  state:
    description: V(present) installs the planned units; V(rollback) restores the rollback copy.
    type: str
    choices: [present, rollback]
    default: present
  instances:
    description:
      - The planned instances (C(_vllm_planned)) - each with C(name), C(argv) (V(vllm), V(serve), MODEL, flags...),
        C(port), and optionally C(cuda_visible_devices), C(numa_node), C(environment), C(node_rank), C(headless).
    type: list
    elements: dict
    default: []
  settings:
    description:
      - The role's unit settings under short names - C(venv), C(unit_prefix), C(marker), C(env_file), C(header)
        (the ansible_managed text), C(platform), C(numa_binding), C(shutdown_timeout), C(cpu_omp_threads_bind),
        C(cpu_reserved_cpus), C(home), C(cache_dir), C(environment), C(cluster), C(cluster_hosts),
        C(fabric_address), C(fabric_iface), C(engine_ready_timeout), C(user), C(group), C(timeout_start_sec),
        C(restart_sec), C(limit_nofile), C(limit_memlock), C(read_write_paths), C(device_allow), C(rdma),
        C(rdma_device_allow).
      - O(state=rollback) reads only C(unit_prefix) and C(marker).
    type: dict
    required: true
  unit_dir:
    description: Where the units live.
    type: path
    default: /etc/systemd/system
  staging_dir:
    description: Where changed units are written and checked before any live unit is touched (mode 0700).
    type: path
  rollback_dir:
    description: The rollback copy of the live units.
    type: path
    required: true
  current_link:
    description: The link to the venv the units run (switched to C(settings.venv)).
    type: path
    required: true
  previous_link:
    description: The link to the venv of the rollback copy.
    type: path
    required: true
  checker:
    description:
      - The unit checker (the role's C(vllm_check_unit.py)), run once with the venv's Python on all the staged units.
        Unset, the units are not checked.
      - In check mode the units are checked in a temporary directory when the venv exists, and not checked
        (said in RV(validation)) on a host where it is not installed yet.
    type: path
  parser:
    description: Also check the unit's C(ExecStart=) with the installed vLLM's parser (not only C(systemd-analyze verify)).
    type: bool
    default: true
  allow_removal:
    description: Stop and remove live units of instances the plan no longer has, also when the plan is smaller.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Reports what would change and touches nothing (the units are checked in a temporary directory when the venv exists).
  diff_mode:
    support: full
    description: The text of each changed or removed unit before and after.
notes:
  - RV(restart) is this host's own set (the instances whose unit changed). The role adds two rules around it -
    every instance when the secrets file changed (written after this module, so a unit that fails its check
    leaves the old secrets and their restart for the next run), and every member of a multi-host group when
    one member's unit changed (a rule across hosts).
"""

EXAMPLES = r"""
- name: Install the planned units
  gpufleet.vllm.vllm_units:
    instances: "{{ _vllm_planned }}"
    settings: "{{ _vllm_unit_settings }}"
    staging_dir: /opt/vllm/rollback/staging
    rollback_dir: /opt/vllm/rollback/units
    current_link: /opt/vllm/current
    previous_link: /opt/vllm/previous
    checker: /opt/vllm/libexec/vllm_check_unit.py
  register: units

- name: Roll back to the units and venv from before the last change
  gpufleet.vllm.vllm_units:
    state: rollback
    settings: {unit_prefix: vllm, marker: X-GpufleetVllmInstance=}
    rollback_dir: /opt/vllm/rollback/units
    current_link: /opt/vllm/current
    previous_link: /opt/vllm/previous
"""

RETURN = r"""
units:
  description: The rendered text of every planned unit, by file name.
  returned: state=present
  type: dict
  sample: {"vllm-a.service": "#\n# Ansible managed\n#\n..."}
changed_units:
  description: The instances whose unit is new or changes.
  returned: state=present
  type: list
  elements: str
  sample: [a]
stale:
  description: The live units of instances no longer planned (stopped, disabled and removed).
  returned: state=present
  type: list
  elements: str
  sample: [vllm-c.service]
installed:
  description: The role's units that were live before this run (check mode restarts only those).
  returned: state=present
  type: list
  elements: str
  sample: [vllm-a.service, vllm-b.service]
restart:
  description: The instances of this host whose unit changed, so they restart.
  returned: state=present
  type: list
  elements: str
  sample: [a]
units_replaced:
  description: This run replaced or removed live units and kept them (and O(previous_link)) for a rollback.
  returned: state=present
  type: bool
validation:
  description: The checker's report on each changed unit, or why the units were not checked.
  returned: state=present
  type: list
  elements: str
  sample: ["vllm-a.service: systemd-analyze verify - ok; vLLM 0.32.0 parser - ok"]
restored:
  description: The instances whose units were put back.
  returned: state=rollback
  type: list
  elements: str
  sample: [a, b]
removed:
  description: The live units that did not exist before and were stopped and removed.
  returned: state=rollback
  type: list
  elements: str
venv:
  description: The venv rolled back to (O(current_link) now points there).
  returned: state=rollback
  type: str
  sample: /opt/vllm/venvs/0.32.0-0123456789ab
version:
  description: The vLLM version of that venv (the first part of its name).
  returned: state=rollback
  type: str
  sample: 0.32.0
"""

import os
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError, run_guarded
from ansible_collections.gpufleet.vllm.plugins.module_utils.units import files, lifecycle as lc
from ansible_collections.gpufleet.vllm.plugins.module_utils.units.render import render_unit, unit_name


def _stop(module, unit):
    for verb in ("stop", "disable"):  # a unit that never started cannot be stopped; removing it is what counts
        module.run_command(["systemctl", verb, unit])


def _validate(module, names, rendered):
    p = module.params
    python = os.path.join(p["settings"]["venv"], "bin", "python")
    if not names or not p["checker"]:
        return [] if not names else ["not checked: no checker given"]
    if module.check_mode and not (os.path.exists(python) and os.path.exists(p["checker"])):
        return ["not checked (check mode): %s is not installed yet" % p["settings"]["venv"]]
    staging = tempfile.mkdtemp(prefix="vllm-units-") if module.check_mode else p["staging_dir"]

    def check_all(staged):
        # One checker run for every changed unit: vLLM's parser is imported once, not once per unit.
        argv = [python, p["checker"]] + [w for name, _path in staged for w in ("--name", name)]
        argv += ["--parser" if p["parser"] else "--no-parser"] + [path for _name, path in staged]
        rc, out, err = module.run_command(argv)
        if rc != 0:
            reason = (err or out).strip()
            refused = [name for name, _path in staged if ("UNIT CHECK FAILED: %s:" % name) in reason]
            raise UserError("%s was not installed, the live units are unchanged: %s. Fix the plan (vllm_profile or "
                            "vllm_instances), or set vllm_validate_argv=false to skip vLLM's parser."
                            % (refused[0] if refused else ", ".join(n for n, _p in staged), reason),
                            unit=refused[0] if refused else None, option="instances")
        return out.strip().splitlines()
    try:
        return files.stage_and_check(staging, dict((name, rendered[name]) for name in names), check_all)
    finally:
        if module.check_mode:
            shutil.rmtree(staging, ignore_errors=True)


def _present(module):
    p, s = module.params, module.params["settings"]
    prefix = s["unit_prefix"]
    rendered = dict((unit_name(prefix, i["name"]), render_unit(i, s)) for i in p["instances"])
    live = lc.ours(files.read_dir(p["unit_dir"]), prefix, s["marker"])
    stale = lc.shrink_guard(live, rendered, p["allow_removal"])
    changing = lc.change_set(rendered, live)
    names = [i["name"] for i in p["instances"]]
    changed_names = [lc.instance_name(n, prefix) for n in changing]
    result = dict(units=rendered, changed_units=changed_names, stale=stale, installed=sorted(live), units_replaced=False,
                  restart=lc.restart_set(names, changed_names),
                  changed=bool(changing or stale or files.link_target(p["current_link"]) != s["venv"]))
    if module._diff:
        result["diff"] = [dict(before_header=os.path.join(p["unit_dir"], n), after_header=os.path.join(p["unit_dir"], n),
                               before=live.get(n, ""), after=rendered.get(n, "")) for n in changing + stale]
    result["validation"] = _validate(module, changing, rendered)
    if module.check_mode:
        return result
    if lc.keeps_rollback_copy(changing, stale, live):
        files.write_dir(p["rollback_dir"], live)
        if files.link_target(p["current_link"]):
            files.switch_link(p["previous_link"], files.link_target(p["current_link"]))
        result["units_replaced"] = True
    for name in changing:
        files.write_atomic(os.path.join(p["unit_dir"], name), rendered[name])
    for name in stale:
        _stop(module, name)
        files.remove(os.path.join(p["unit_dir"], name))
    files.switch_link(p["current_link"], s["venv"])
    if changing or stale:
        module.run_command(["systemctl", "daemon-reload"], check_rc=True)
    return result


def _rollback(module):
    p, prefix = module.params, module.params["settings"]["unit_prefix"]
    previous, current = files.link_target(p["previous_link"]), files.link_target(p["current_link"])
    restore = lc.ours(files.read_dir(p["rollback_dir"]), prefix)
    lc.rollback_source(previous, restore, p["previous_link"], p["rollback_dir"])
    if not os.path.exists(os.path.join(previous, "bin", "vllm")):
        raise UserError("The venv of the rollback copy, %s, is no longer installed: deploy again instead (the role "
                        "prunes only venvs no unit and no link uses)." % previous, option="state")
    moves = lc.rollback_moves(restore, lc.ours(files.read_dir(p["unit_dir"]), prefix, p["settings"]["marker"]))
    result = dict(changed=True, restored=[lc.instance_name(n, prefix) for n in moves["restore"]], removed=moves["remove"],
                  venv=previous, version=lc.venv_version(previous))
    if module.check_mode:
        return result
    for name in moves["remove"]:
        _stop(module, name)
        files.remove(os.path.join(p["unit_dir"], name))
    for name in moves["restore"]:
        files.write_atomic(os.path.join(p["unit_dir"], name), restore[name])
    files.write_dir(p["rollback_dir"], moves["keep"])
    files.switch_link(p["current_link"], previous)
    if current:
        files.switch_link(p["previous_link"], current)
    module.run_command(["systemctl", "daemon-reload"], check_rc=True)
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["present", "rollback"], default="present"),
            instances=dict(type="list", elements="dict", default=[]),
            settings=dict(type="dict", required=True),
            unit_dir=dict(type="path", default="/etc/systemd/system"),
            staging_dir=dict(type="path"),
            rollback_dir=dict(type="path", required=True),
            current_link=dict(type="path", required=True),
            previous_link=dict(type="path", required=True),
            checker=dict(type="path"),
            parser=dict(type="bool", default=True),
            allow_removal=dict(type="bool", default=False),
        ),
        required_if=[("state", "present", ["staging_dir"])],
        supports_check_mode=True,
    )
    body = _rollback if module.params["state"] == "rollback" else _present
    module.exit_json(**run_guarded(module, body, "Managing the vLLM units"))


if __name__ == "__main__":
    main()
