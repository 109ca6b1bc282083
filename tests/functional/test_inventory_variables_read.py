# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every variable a shipped inventory sets is read by a playbook or a role (a variable nothing reads is a
setting the user believes in and the collection ignores: gpufleet_model_id was one until this test)."""
from __future__ import annotations

import glob
import os
import re

import pytest
import yaml

from weights_support import ROOT

INVENTORIES = sorted(glob.glob(os.path.join(ROOT, "inventories", "examples", "*"))) + [
    os.path.join(ROOT, "inventories", "demo")]
# Where a variable is read: the playbooks and the roles' code (not their docs or argument specs).
READERS = (glob.glob(os.path.join(ROOT, "playbooks", "**", "*.yml"), recursive=True)
           + [p for p in glob.glob(os.path.join(ROOT, "roles", "*", "**", "*"), recursive=True)
              if os.path.isfile(p) and "/meta/" not in p and not p.endswith(".md")])


def reader_text():
    chunks = []
    for path in READERS:
        with open(path, errors="replace") as handle:
            chunks.append(handle.read())
    return "\n".join(chunks)


def inventory_variables(path):
    """(variable, file) for every top-level variable of group_vars/*.yml and every host variable."""
    found = []
    for vars_file in sorted(glob.glob(os.path.join(path, "group_vars", "*.yml"))):
        with open(vars_file) as handle:
            found += [(name, vars_file) for name in (yaml.safe_load(handle) or {})]

    def walk(group):
        for host_vars in (group.get("hosts") or {}).values():
            found.extend((name, os.path.join(path, "hosts.yml")) for name in (host_vars or {}))
        for child in (group.get("children") or {}).values():
            walk(child or {})

    with open(os.path.join(path, "hosts.yml")) as handle:
        walk((yaml.safe_load(handle) or {}).get("all", {}))
    return [(name, where) for name, where in found if not name.startswith("ansible_")]


def plan_options():
    with open(os.path.join(ROOT, "plugins", "modules", "vllm_plan.py")) as handle:
        text = handle.read()
    documentation = yaml.safe_load(text.split('DOCUMENTATION = r"""', 1)[1].split('"""', 1)[0])
    return set(documentation["options"])


@pytest.mark.parametrize("inventory", INVENTORIES, ids=[os.path.basename(p) for p in INVENTORIES])
def test_every_inventory_variable_is_read(inventory):
    text = reader_text()
    unread = [(name, os.path.relpath(where, ROOT)) for name, where in inventory_variables(inventory)
              if not re.search(r"\b%s\b" % re.escape(name), text)]
    assert unread == [], "set in the inventory but read by no playbook or role: %s" % unread


@pytest.mark.parametrize("inventory", INVENTORIES, ids=[os.path.basename(p) for p in INVENTORIES])
def test_serving_profile_keys_are_planner_options(inventory):
    options = plan_options()
    for vars_file in glob.glob(os.path.join(inventory, "group_vars", "*.yml")):
        with open(vars_file) as handle:
            serving = (yaml.safe_load(handle) or {}).get("gpufleet_serving") or {}
        assert sorted(set(serving) - options) == [], "%s: gpufleet_serving keys vllm_plan does not take" % vars_file


def test_the_check_finds_an_unread_variable(tmp_path):
    """The test itself can fail: a planted variable nothing reads is reported."""
    planted = tmp_path / "inv"
    (planted / "group_vars").mkdir(parents=True)
    (planted / "group_vars" / "all.yml").write_text("gpufleet_model_name: nobody-reads-me\n")
    (planted / "hosts.yml").write_text("all:\n  hosts:\n    h1:\n      gpufleet_typo_var: 1\n")
    text = reader_text()
    names = [name for name, _where in inventory_variables(str(planted)) if not re.search(r"\b%s\b" % name, text)]
    assert names == ["gpufleet_model_name", "gpufleet_typo_var"]
