# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host_tuning role's checks, evaluated with Ansible's own templating on the shipped task files (issue 27 LOW):
Python's `$` matched before a final newline, so "vm.swappiness\\n" and "1\\nkernel.x = 2" passed and added lines
to the sysctl file root writes; host_tuning_sysctl_file took a relative path or any file (/etc/passwd)."""
import pathlib

import pytest
import yaml

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROLE = pathlib.Path(__file__).resolve().parents[2] / "roles" / "host_tuning"


def variables(**overrides):
    out = {}
    for name in ("defaults", "vars"):
        out.update((k, trust_as_template(v) if isinstance(v, str) else v)
                   for k, v in yaml.safe_load((ROLE / name / "main.yml").read_text()).items())
    out.update(overrides)
    return out


def task(name):
    return next(t for t in yaml.safe_load((ROLE / "tasks" / "validate.yml").read_text()) if t["name"] == name)


def holds(name, item=None, **overrides):
    t = task(name)
    extra = dict(overrides)
    if item is not None:
        extra["item"] = item
    templar = Templar(loader=DataLoader(), variables=variables(**extra))
    return all(templar.template(trust_as_template("{{ (%s) | bool }}" % c)) for c in t["ansible.builtin.assert"]["that"])


SYSCTL = "Check that every kernel setting is an integer (or space-separated integers)"


@pytest.mark.parametrize("key, value, ok", [
    ("vm.swappiness", 1, True),
    ("net.ipv4.ip_local_port_range", "1024 65000", True),
    ("vm.swappiness\n", 1, False),
    ("vm.swappiness", "1\nkernel.core_pattern = |/tmp/x", False),
    ("vm.swappiness", "1\n", False),
    ("vm.swappiness", True, False),
])
def test_sysctl_names_and_values(key, value, ok):
    assert holds(SYSCTL, item={"key": key, "value": value}) is ok


@pytest.mark.parametrize("path, ok", [
    ("/etc/sysctl.d/90-gpufleet-vllm.conf", True),
    ("/etc/sysctl.d/99-x.conf", True),
    ("90-gpufleet-vllm.conf", False),                  # relative: lands where Ansible runs
    ("/etc/sysctl.conf", False),                       # the system's own file
    ("/etc/passwd", False),
    ("/etc/sysctl.d/../passwd.conf", False),
    ("/etc/sysctl.d/90-x.conf\n", False),
    ("/etc/sysctl.d/90 x.conf", False),
])
def test_sysctl_file(path, ok):
    name = "Check host_tuning_sysctl_file (root writes it; the kernel reads every *.conf in /etc/sysctl.d)"
    assert holds(name, host_tuning_sysctl_file=path) is ok


@pytest.mark.parametrize("overrides, ok", [
    ({}, True),
    ({"host_tuning_memlock": "unlimited"}, True),
    ({"host_tuning_memlock": "1024\n"}, False),
    ({"host_tuning_unit_prefix": "vllm\n"}, False),
    ({"host_tuning_service_user": "vllm\n"}, False),
    ({"host_tuning_persistenced_user": "nvidia-persistenced\n"}, False),
])
def test_limits_and_names_have_no_final_newline(overrides, ok):
    assert holds("Check the limits", **overrides) is ok
