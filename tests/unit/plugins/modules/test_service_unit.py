# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpufleet.vllm.service_unit on temporary directories: the router's and the Ray node's unit installed with the
text the former templates wrote, idempotence, the staged check refusing a unit (the live one untouched), the
rollback copy and rollback, check mode, and values that would add a line refused by name. systemctl and
systemd-analyze are recorded, not run (TEST STAND-INS in ``host``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

import pytest

from ansible.module_utils import basic

from ansible_collections.gpufleet.vllm.plugins.modules import service_unit
from ansible_collections.gpufleet.vllm.tests.unit.plugins.modules.module_harness import run_module
from ansible_collections.gpufleet.vllm.tests.unit.plugins.module_utils.units.test_writer import (
    DCGM, PERSISTENCED, RAY, ROUTER, _with, fixture)


@pytest.fixture
def host(tmp_path, monkeypatch):
    """The host's folders under tmp_path; systemctl recorded; systemd-analyze verify a stand-in that refuses a
    unit holding 'BadKey' (as the real one reports an unknown key: a line naming the unit)."""
    (tmp_path / "units").mkdir()
    calls = []

    def run_command(self, args, **kwargs):
        calls.append(list(args))
        if args[:2] == ["systemd-analyze", "verify"]:
            with open(args[2]) as handle:
                text = handle.read()
            if "BadKey" in text:
                return 1, "", "%s:12: Unknown key name 'BadKey' in section 'Service', ignoring.\n" % args[2]
        return 0, "", ""

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, *a, **k: "/usr/bin/" + name)
    args = dict(kind="router", settings=dict(ROUTER), unit_dir=str(tmp_path / "units"),
                staging_dir=str(tmp_path / "staging"), rollback_dir=str(tmp_path / "rollback"))
    return dict(root=tmp_path, args=args, calls=calls)


def run(monkeypatch, host, check_mode=False, diff=False, **changes):
    return run_module(monkeypatch, service_unit.main, dict(host["args"], **changes), check_mode=check_mode, diff=diff)


def live(host, name="vllm-router.service"):
    return (host["root"] / "units" / name).read_text()


def test_router_unit_installed_as_the_template_wrote_it_then_idempotent(monkeypatch, host):
    result = run(monkeypatch, host)
    assert result["changed"] and result["restart"] and not result["units_replaced"]
    assert live(host) == fixture("router-default")
    staged = str(host["root"] / "staging" / "vllm-router.service")
    assert ["systemd-analyze", "verify", staged] in host["calls"] and ["systemctl", "daemon-reload"] in host["calls"]
    assert result["validation"] == ["vllm-router.service: systemd-analyze verify - ok"]
    again = run(monkeypatch, host)
    assert not again["changed"] and not again["restart"]


def test_ray_unit_installed_as_the_template_wrote_it(monkeypatch, host):
    result = run(monkeypatch, host, kind="ray", settings=dict(RAY))
    assert result["changed"] and live(host, "vllm-ray.service") == fixture("ray-head")


@pytest.mark.parametrize("kind, settings, program, unit, expected", [
    ("router", ROUTER, "python", "vllm-router.service", "router-default"),
    ("ray", RAY, "argv", "vllm-ray.service", "ray-head"),
    ("dcgm", DCGM, "exporter", "gpufleet-dcgm-exporter.service", "dcgm-embedded"),
    ("persistenced", PERSISTENCED, "program", "nvidia-persistenced.service", "persistenced-default"),
])
def test_every_kind_checks_in_check_mode_then_installs_its_text(
        monkeypatch, host, kind, settings, program, unit, expected):
    # check mode: the unit is checked in a temporary folder when the program it starts exists (here this Python),
    # and said unchecked when it does not; nothing is written. Then the real run writes the former template's text.
    present = _with(settings, **{program: [sys.executable] if program == "argv" else sys.executable})
    dry = run(monkeypatch, host, check_mode=True, kind=kind, settings=present)
    assert dry["changed"] and not (host["root"] / "units" / unit).exists(), dry
    assert dry["validation"] == ["%s: systemd-analyze verify - ok" % unit], dry
    missing = _with(settings, **{program: ["/nonexistent/prog"] if program == "argv" else "/nonexistent/prog"})
    unchecked = run(monkeypatch, host, check_mode=True, kind=kind, settings=missing)
    assert unchecked["validation"] == ["not checked (check mode): /nonexistent/prog is not installed yet"]
    result = run(monkeypatch, host, kind=kind, settings=dict(settings))
    assert result["changed"] and live(host, unit) == fixture(expected)


def test_a_refused_unit_leaves_the_live_one_and_no_rollback_copy(monkeypatch, host):
    run(monkeypatch, host)
    result = run(monkeypatch, host, settings=_with(ROUTER, policy="BadKey"))
    assert result.get("failed") and "systemd-analyze verify" in result["msg"] and "live unit is unchanged" in result["msg"]
    assert live(host) == fixture("router-default")
    assert not (host["root"] / "rollback").exists()


def test_a_change_keeps_the_rollback_copy_and_rollback_swaps_back(monkeypatch, host):
    run(monkeypatch, host)
    changed = run(monkeypatch, host, settings=_with(ROUTER, policy="round_robin"))
    assert changed["changed"] and changed["units_replaced"] and "(round_robin)" in live(host)
    assert (host["root"] / "rollback" / "vllm-router.service").read_text() == fixture("router-default")
    back = run(monkeypatch, host, state="rollback")
    assert back["changed"] and back["restored"] == ["vllm-router.service"] and live(host) == fixture("router-default")
    assert "(round_robin)" in (host["root"] / "rollback" / "vllm-router.service").read_text()


def test_rollback_without_a_copy_is_refused(monkeypatch, host):
    result = run(monkeypatch, host, state="rollback")
    assert result.get("failed") and "Nothing to roll back to" in result["msg"]


def test_check_mode_writes_nothing_and_diff_shows_the_text(monkeypatch, host):
    result = run(monkeypatch, host, check_mode=True, diff=True)
    assert result["changed"] and result["diff"][0]["after"] == fixture("router-default")
    assert not os.path.exists(str(host["root"] / "units" / "vllm-router.service"))
    assert ["systemctl", "daemon-reload"] not in host["calls"]


@pytest.mark.parametrize("key", ["user", "group", "model", "host", "policy", "python", "config"])
def test_a_newline_in_a_router_value_adds_no_line(monkeypatch, host, key):
    """Issue 43 class 6: a newline in a router role value used to add a root ExecStartPre=+ line."""
    bad = "x\nExecStartPre=+/bin/sh -c 'id > /tmp/pwned'"
    result = run(monkeypatch, host, settings=_with(ROUTER, **{key: bad}))
    assert result.get("failed") and "settings.%s" % key in result["msg"] and "control character" in result["msg"]
    assert not os.path.exists(str(host["root"] / "units" / "vllm-router.service"))


@pytest.mark.parametrize("name", ["vllm-router\nExecStartPre=+/bin/true", "../../etc/x", ""])
def test_a_bad_unit_name_is_refused(monkeypatch, host, name):
    result = run(monkeypatch, host, settings=_with(ROUTER, unit_name=name))
    assert result.get("failed") and "settings.unit_name" in result["msg"]
