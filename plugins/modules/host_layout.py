#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: host_layout
short_description: Make a role's directories and files in one call (owner, group, mode; symlinks refused)
version_added: 0.1.0
author:
  - gpufleet.vllm maintainers (@gpufleet)
description:
  - Creates each directory of O(directories) and writes each file of O(files) (through a temporary file and a
    rename), and puts owner, group and mode right, in the order given. One call instead of one
    C(ansible.builtin.file) / C(ansible.builtin.copy) task per item (each costs a round trip per host).
  - A symlink, or a path of another kind, where a directory or file is wanted is refused with its path, never
    followed.
  - The core is C(plugins/module_utils/host/host_layout.py).
options:
  directories:
    description: The directories, parents before children.
    type: list
    elements: dict
    default: []
    suboptions:
      path: {description: The directory., type: path, required: true}
      owner: {description: Its owner., type: str, default: root}
      group: {description: Its group., type: str, default: root}
      mode: {description: "Its mode in octal, for example V('0755').", type: str, required: true}
  files:
    description: The files, each with its whole content.
    type: list
    elements: dict
    default: []
    suboptions:
      path: {description: The file., type: path, required: true}
      content: {description: Its text., type: str, required: true}
      owner: {description: Its owner., type: str, default: root}
      group: {description: Its group., type: str, default: root}
      mode: {description: Its mode in octal., type: str, default: '0644'}
attributes:
  check_mode:
    support: full
    description: Reports what it would create or change and changes nothing (an account that does not exist yet
      counts as a change, since an earlier task in check mode did not create it).
  diff_mode:
    support: full
    description: Each written file before and after; each other change as a line.
"""

EXAMPLES = r"""
- name: The role's folders and helper scripts
  gpufleet.vllm.host_layout:
    directories:
      - {path: /opt/vllm, mode: "0755"}
      - {path: /var/cache/vllm, owner: vllm, group: vllm, mode: "0750"}
    files:
      - path: /opt/vllm/libexec/vllm_health_gate.py
        content: "{{ lookup('ansible.builtin.file', 'vllm_health_gate.py', rstrip=false) }}"
"""

RETURN = r"""
changes:
  description: One line per change made (or, in check mode, that would be made).
  returned: always
  type: list
  elements: str
  sample: ["/opt/vllm/libexec: create directory (mode 0755)", "/opt/vllm/libexec/vllm_check_unit.py: create file"]
"""

import grp
import pwd

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError, run_guarded
from ansible_collections.gpufleet.vllm.plugins.module_utils.host import host_layout as layout


def _account_id(lookup, name, check_mode, what):
    try:
        return lookup(name)
    except KeyError:
        if check_mode:
            return None
        raise UserError("The %s %r does not exist on this host: create it first (the role's user/group tasks)." % (what, name))


def _entry(raw, index, option, check_mode):
    where = "%s[%d] (%s)" % (option, index, raw["path"])
    entry = dict(raw, mode=layout.parse_mode(raw["mode"], where))
    entry["uid"] = _account_id(lambda n: pwd.getpwnam(n).pw_uid, raw["owner"], check_mode, "owner of " + where)
    entry["gid"] = _account_id(lambda n: grp.getgrnam(n).gr_gid, raw["group"], check_mode, "group of " + where)
    return entry


def _ensure(module):
    p = module.params
    dirs = [_entry(d, i, "directories", module.check_mode) for i, d in enumerate(p["directories"])]
    files = [_entry(f, i, "files", module.check_mode) for i, f in enumerate(p["files"])]
    entries = dict((e["path"], e) for e in dirs + files)
    actions, before = layout.plan(dirs, files)
    if actions and not module.check_mode:
        layout.apply(actions, entries)
    result = {"changed": bool(actions), "changes": ["%s: %s" % (path, why) for _verb, path, why in actions]}
    if module._diff:
        result["diff"] = layout.diff(actions, entries, before)
    return result


def main():
    common = dict(owner=dict(type="str", default="root"), group=dict(type="str", default="root"))
    module = AnsibleModule(
        argument_spec=dict(
            directories=dict(type="list", elements="dict", default=[], options=dict(
                path=dict(type="path", required=True), mode=dict(type="str", required=True), **common)),
            files=dict(type="list", elements="dict", default=[], options=dict(
                path=dict(type="path", required=True), content=dict(type="str", required=True),
                mode=dict(type="str", default="0644"), **common)),
        ),
        supports_check_mode=True,
    )
    module.exit_json(**run_guarded(module, _ensure, "Making the directories and files"))


if __name__ == "__main__":
    main()
