# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpufleet.vllm.vllm_units on temporary directories: install, idempotence, check and diff mode, the shrink
guard, a refused unit, stale units, the rollback copy and rollback. systemctl is recorded, not run; the unit
checker is a TEST STAND-IN (CHECKER below) run with this Python as the venv's."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import os
import sys

import pytest

from ansible.module_utils import basic

from ansible_collections.gpufleet.vllm.plugins.modules import vllm_units
from ansible_collections.gpufleet.vllm.tests.unit.plugins.modules.module_harness import run_module
from ansible_collections.gpufleet.vllm.tests.unit.plugins.module_utils.units.test_render import CASES, fixture

# TEST STAND-IN for roles/vllm/files/vllm_check_unit.py (its command line: --name N ... --parser|--no-parser FILE ...):
# refuses a unit whose ExecStart holds --bad-flag, naming it; counts its runs in calls.log beside it.
CHECKER = """import os, sys
args = sys.argv[1:]
names = [args[i + 1] for i, word in enumerate(args) if word == "--name"]
mode = [word for word in args if word in ("--parser", "--no-parser")][0]
paths = args[args.index(mode) + 1:]
with open(os.path.join(os.path.dirname(__file__), "calls.log"), "a") as log:
    log.write(" ".join(names) + "\\n")
for name, path in zip(names, paths):
    if "--bad-flag" in open(path).read():
        sys.stderr.write("UNIT CHECK FAILED: %s: vLLM rejects the command line: --bad-flag\\n" % name)
        sys.exit(1)
    print("%s: stand-in check - ok (%s)" % (name, mode))
"""


@pytest.fixture
def host(tmp_path, monkeypatch):
    """A host's paths under tmp_path, a venv whose python is this one, and systemctl recorded."""
    venv = tmp_path / "venvs" / "0.32.0-aaaa"
    (venv / "bin").mkdir(parents=True)
    os.symlink(sys.executable, str(venv / "bin" / "python"))
    (venv / "bin" / "vllm").write_text("")
    (tmp_path / "units").mkdir()
    (tmp_path / "checker.py").write_text(CHECKER)
    calls = []
    real = basic.AnsibleModule.run_command

    def run_command(self, args, **kwargs):
        if args[0] == "systemctl":
            calls.append(list(args))
            return 0, "", ""
        return real(self, args, **kwargs)

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    settings = dict(CASES[2]["settings"], venv=str(venv))
    args = dict(instances=[CASES[2]["instance"]], settings=settings, unit_dir=str(tmp_path / "units"),
                staging_dir=str(tmp_path / "staging"), rollback_dir=str(tmp_path / "rollback" / "units"),
                current_link=str(tmp_path / "current"), previous_link=str(tmp_path / "previous"),
                checker=str(tmp_path / "checker.py"))
    return dict(root=tmp_path, args=args, calls=calls, venv=str(venv))


def run(monkeypatch, host, check_mode=False, diff=False, **changes):
    return run_module(monkeypatch, vllm_units.main, dict(host["args"], **changes), check_mode=check_mode, diff=diff)


def unit_file(host, name="vllm-a.service"):
    return (host["root"] / "units" / name).read_text()


def second_instance(name="b"):
    inst = copy.deepcopy(CASES[2]["instance"])
    inst.update(name=name, argv=inst["argv"][:-1] + ["8102"], port=8102)
    return inst


def test_first_install_then_idempotent(monkeypatch, host):
    result = run(monkeypatch, host)
    assert result["changed"] and result["changed_units"] == ["a"] and result["restart"] == ["a"]
    assert result["units_replaced"] is False and result["installed"] == []  # first deployment: no rollback copy
    assert result["validation"] == ["vllm-a.service: stand-in check - ok (--parser)"]
    expected = fixture("cpu-single").replace("/opt/vllm/venvs/0.33.0-f08601881163", host["venv"])
    assert unit_file(host) == expected
    assert os.readlink(str(host["root"] / "current")) == host["venv"]
    assert host["calls"] == [["systemctl", "daemon-reload"]]
    assert not (host["root"] / "rollback" / "units").exists()
    again = run(monkeypatch, host)
    assert again["changed"] is False and again["restart"] == [] and again["validation"] == []
    assert again["installed"] == ["vllm-a.service"]
    assert host["calls"] == [["systemctl", "daemon-reload"]]


def test_check_mode_reports_and_touches_nothing_with_diff(monkeypatch, host):
    result = run(monkeypatch, host, check_mode=True, diff=True)
    assert result["changed"] and result["changed_units"] == ["a"] and result["restart"] == ["a"]
    assert result["validation"] == ["vllm-a.service: stand-in check - ok (--parser)"]  # in a temporary directory
    assert result["diff"][0]["before"] == "" and "X-GpufleetVllmInstance=a" in result["diff"][0]["after"]
    assert os.listdir(str(host["root"] / "units")) == [] and not (host["root"] / "staging").exists()
    assert not os.path.lexists(str(host["root"] / "current")) and host["calls"] == []


def test_check_mode_on_a_fresh_host_says_the_units_were_not_checked(monkeypatch, host):
    settings = dict(host["args"]["settings"], venv=str(host["root"] / "venvs" / "0.33.0-new"))
    result = run(monkeypatch, host, check_mode=True, settings=settings)
    assert result["changed"] and result["validation"] == [
        "not checked (check mode): %s is not installed yet" % settings["venv"]]


def test_a_refused_unit_leaves_the_live_units(monkeypatch, host):
    run(monkeypatch, host)
    before = unit_file(host)
    bad = copy.deepcopy(CASES[2]["instance"])
    bad["argv"].append("--bad-flag")
    result = run(monkeypatch, host, instances=[bad])
    assert result["failed"] and result["unit"] == "vllm-a.service"
    assert "vLLM rejects the command line: --bad-flag" in result["msg"] and "vllm_validate_argv=false" in result["msg"]
    assert unit_file(host) == before and not (host["root"] / "rollback" / "units").exists()


def test_every_changed_unit_is_checked_in_one_run_and_the_refused_one_named(monkeypatch, host):
    # one checker run (one vLLM import) for both changed units, in order
    result = run(monkeypatch, host, instances=[CASES[2]["instance"], second_instance()])
    assert result["validation"] == ["vllm-a.service: stand-in check - ok (--parser)",
                                    "vllm-b.service: stand-in check - ok (--parser)"]
    assert (host["root"] / "calls.log").read_text().splitlines() == ["vllm-a.service vllm-b.service"]
    bad = second_instance()
    bad["argv"] = bad["argv"] + ["--bad-flag"]
    refused = run(monkeypatch, host, instances=[CASES[2]["instance"], bad])
    assert refused["failed"] and refused["unit"] == "vllm-b.service"
    assert refused["msg"].startswith("vllm-b.service was not installed, the live units are unchanged")


def test_a_change_keeps_the_rollback_copy_and_previous(monkeypatch, host):
    run(monkeypatch, host)
    first = unit_file(host)
    newer = host["root"] / "venvs" / "0.33.0-bbbb"
    (newer / "bin").mkdir(parents=True)
    os.symlink(sys.executable, str(newer / "bin" / "python"))
    settings = dict(host["args"]["settings"], venv=str(newer))
    result = run(monkeypatch, host, settings=settings, diff=True)
    assert result["units_replaced"] is True and result["restart"] == ["a"]
    assert result["diff"][0]["before"] == first and str(newer) in result["diff"][0]["after"]
    assert (host["root"] / "rollback" / "units" / "vllm-a.service").read_text() == first
    assert os.readlink(str(host["root"] / "previous")) == host["venv"]
    assert os.readlink(str(host["root"] / "current")) == str(newer)


def test_shrink_refused_then_allowed_removes_the_stale_unit(monkeypatch, host):
    run(monkeypatch, host, instances=[CASES[2]["instance"], second_instance()])
    refused = run(monkeypatch, host)
    assert refused["failed"] and refused["stale"] == ["vllm-b.service"] and "vllm_allow_instance_removal" in refused["msg"]
    assert (host["root"] / "units" / "vllm-b.service").exists()
    result = run(monkeypatch, host, allow_removal=True)
    assert result["changed"] and result["stale"] == ["vllm-b.service"] and result["restart"] == []
    assert result["units_replaced"] is True  # a removal can be rolled back
    assert not (host["root"] / "units" / "vllm-b.service").exists()
    assert ["systemctl", "stop", "vllm-b.service"] in host["calls"] and ["systemctl", "disable", "vllm-b.service"] in host["calls"]


def test_units_of_others_are_left_alone(monkeypatch, host):
    (host["root"] / "units" / "vllm-mine.service").write_text("[Unit]\nDescription=hand-made\n")
    result = run(monkeypatch, host)
    assert result["stale"] == [] and (host["root"] / "units" / "vllm-mine.service").exists()


def test_rollback_puts_back_and_a_second_one_rolls_forward(monkeypatch, host):
    run(monkeypatch, host)
    first = unit_file(host)
    newer = host["root"] / "venvs" / "0.33.0-bbbb"
    (newer / "bin").mkdir(parents=True)
    (newer / "bin" / "vllm").write_text("")
    run(monkeypatch, host, settings=dict(host["args"]["settings"], venv=str(newer)), instances=[CASES[2]["instance"], second_instance()],
        checker=None)
    second = unit_file(host)
    rb = dict(state="rollback", settings={"unit_prefix": "vllm", "marker": "X-GpufleetVllmInstance="})
    assert run(monkeypatch, host, check_mode=True, **rb)["restored"] == ["a"]
    assert unit_file(host) == second  # check mode touched nothing
    result = run(monkeypatch, host, **rb)
    assert result["restored"] == ["a"] and result["removed"] == ["vllm-b.service"]
    assert result["venv"] == host["venv"] and result["version"] == "0.32.0"
    assert unit_file(host) == first and not (host["root"] / "units" / "vllm-b.service").exists()
    assert os.readlink(str(host["root"] / "current")) == host["venv"]
    assert os.readlink(str(host["root"] / "previous")) == str(newer)
    forward = run(monkeypatch, host, **rb)
    assert sorted(forward["restored"]) == ["a", "b"] and forward["version"] == "0.33.0"
    assert unit_file(host) == second


def test_rollback_with_nothing_kept_fails_plainly(monkeypatch, host):
    run(monkeypatch, host)
    result = run(monkeypatch, host, state="rollback", settings={"unit_prefix": "vllm", "marker": "X-GpufleetVllmInstance="})
    assert result["failed"] and "Nothing to roll back to" in result["msg"] and "exception" not in result


def test_result_is_json(monkeypatch, host):
    json.dumps(run(monkeypatch, host, diff=True))


@pytest.mark.parametrize("name", ["a\nExecStartPre=+/bin/sh -c id", "a\rb", "../../tmp/x"])
def test_an_instance_name_that_would_add_a_line_or_leave_the_folder_is_refused(monkeypatch, host, name):
    """Issue 43 class 6: a newline in an instance name added a root ExecStartPre=+ line to the unit."""
    inst = dict(CASES[2]["instance"], name=name)
    result = run(monkeypatch, host, instances=[inst])
    assert result.get("failed") and "instances.name" in result["msg"]
    assert os.listdir(str(host["root"] / "units")) == []
