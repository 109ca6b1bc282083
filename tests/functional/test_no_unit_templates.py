# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""issue 42 item 1: no systemd unit is rendered from a Jinja template - every unit kind goes through the one writer
(the vllm_units and service_unit modules: staged systemd-analyze verify, the rollback copy, every value checked).
A unit file here is anything systemd loads from a unit folder: a .service/.socket/.timer/... file, or a drop-in."""
import pathlib
import re

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
UNIT_SUFFIX = re.compile(r"\.(service|socket|timer|mount|path|target|slice)(\.j2)?$|\.d/[^/]+\.conf$")


def _tasks(node):
    if isinstance(node, list):
        for item in node:
            yield from _tasks(item)
    elif isinstance(node, dict):
        yield node
        for key in ("block", "rescue", "always", "tasks", "handlers", "pre_tasks", "post_tasks"):
            if key in node:
                yield from _tasks(node[key])


def _writers(task):
    for module in ("ansible.builtin.template", "ansible.builtin.copy", "template", "copy"):
        args = task.get(module)
        if isinstance(args, dict):
            yield module, str(args.get("src", "")), str(args.get("dest", ""))


def test_no_role_ships_a_unit_template():
    found = [str(p.relative_to(ROOT)) for p in ROOT.glob("roles/*/templates/**/*") if UNIT_SUFFIX.search(p.name)]
    assert found == []


def test_no_role_or_playbook_task_writes_a_unit_with_template_or_copy():
    offenders = []
    for path in list(ROOT.glob("roles/*/tasks/*.yml")) + list(ROOT.glob("roles/*/handlers/*.yml")) \
            + list(ROOT.glob("playbooks/**/*.yml")):
        for task in _tasks(yaml.safe_load(path.read_text()) or []):
            for module, src, dest in _writers(task):
                if UNIT_SUFFIX.search(dest) or UNIT_SUFFIX.search(src):
                    offenders.append("%s: %s %s -> %s" % (path.relative_to(ROOT), module, src, dest))
    assert offenders == []
