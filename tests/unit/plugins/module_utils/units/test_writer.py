# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one unit writer (writer.py) and its Ray and router kinds (kinds.py): the exact text, against the units the
former Jinja templates rendered (tests/fixtures/units/PROVENANCE.md, render-ray-router-dcgm.play.yml gives the
same values), and values that would add a line to a unit refused, naming the option (issue 43 class 6)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import os

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError
from ansible_collections.gpufleet.vllm.plugins.module_utils.units import kinds, writer
from ansible_collections.gpufleet.vllm.plugins.module_utils.units.render import render_unit
from ansible_collections.gpufleet.vllm.tests.unit.plugins.module_utils.units.test_render import CASES as VLLM_CASES

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "fixtures", "units")
VENV = "/opt/vllm/venvs/0.33.0-0123456789ab"
# The vllm role's defaults (roles/vllm/defaults/main.yml, vars/main.yml) as the play rendered them.
RAY = {
    "header": "Ansible managed", "unit_name": "vllm-ray", "ray_version": "2.60.0", "node_rank": 0,
    "cluster_hosts": ["gpu-a", "gpu-b"], "token_file": "/etc/vllm/ray-token", "fabric_address": "10.0.0.1",
    "fabric_iface": "ens1",
    "argv": [VENV + "/bin/ray", "start", "--head", "--block", "--node-ip-address", "10.0.0.1", "--port", "6379",
             "--num-gpus", "8", "--temp-dir", "/var/lib/vllm/ray"],
    "ray_environment": {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": "/etc/vllm/ray-token", "RAY_USAGE_STATS_ENABLED": "0"},
    "environment": {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}, "user": "vllm", "group": "vllm",
    "home": "/var/lib/vllm", "cache_dir": "/var/cache/vllm", "temp_dir": "/var/lib/vllm/ray", "read_write_paths": [],
    "limit_nofile": 1048576, "limit_memlock": "infinity", "platform": "cuda",
    "device_allow": ["char-nvidia-frontend rw", "char-nvidia-uvm rw", "char-nvidia-caps r"], "rdma": False,
    "rdma_device_allow": ["char-infiniband_verbs rw", "/dev/infiniband/rdma_cm rw"],
}
# The router role's defaults (roles/router/defaults/main.yml, vars/main.yml).
ROUTER = {
    "header": "Ansible managed", "unit_name": "vllm-router", "version": "0.1.17", "model": "qwen3-8b",
    "policy": "cache_aware", "host": "127.0.0.1", "config": "/etc/vllm-router/router.json",
    "drained_dir": "/var/lib/vllm-router/drained", "python": "/usr/bin/python3",
    "launcher": "/opt/vllm-router/libexec/router_launch.py", "user": "vllm-router", "group": "vllm-router",
}

# The monitoring role's defaults (roles/monitoring/defaults/main.yml, vars/main.yml).
DCGM = {"header": "Ansible managed", "unit_name": "gpufleet-dcgm-exporter", "exporter": "/usr/bin/dcgm-exporter",
        "counters": "/etc/dcgm-exporter/gpufleet-counters.csv", "port": 9400, "hostengine": False,
        "hostengine_address": "localhost:5555"}

# The host_tuning role's defaults (roles/host_tuning/defaults/main.yml, vars/main.yml).
PERSISTENCED = {"header": "Ansible managed", "unit_name": "nvidia-persistenced",
                "program": "/usr/bin/nvidia-persistenced", "user": "nvidia-persistenced"}


def _with(base, **changes):
    out = copy.deepcopy(base)
    out.update(changes)
    return out


CASES = [
    ("ray-head", "ray", RAY),
    ("ray-worker-rdma", "ray", _with(
        RAY, node_rank=1, fabric_address="10.0.0.2", fabric_iface="ib0", rdma=True,
        read_write_paths=["/scratch", "/var/lib/vllm/ray"], environment={"NCCL_DEBUG": "WARN", "ODD": 'a b$c%d"e'},
        argv=[VENV + "/bin/ray", "start", "--address", "10.0.0.1:6379", "--block", "--node-ip-address", "10.0.0.2",
              "--resources", '{"x": 1}'])),
    ("ray-cpu", "ray", _with(
        RAY, platform="cpu", cluster_hosts=["cpu-a", "cpu-b"], fabric_address="192.168.1.5", fabric_iface="eth0",
        argv=["/opt/vllm/venvs/0.32.0-0123456789ab/bin/ray", "start", "--head", "--block"])),
    ("router-default", "router", ROUTER),
    ("router-quoting", "router", _with(
        ROUTER, model="m%50 x", host="fd00::1", policy="round_robin", user="svc-router", group="svc-router",
        unit_name="my-router", python="/opt/py/bin/python3", launcher="/opt/r outer/libexec/router_launch.py",
        config="/etc/r$outer/router.json")),
    ("dcgm-embedded", "dcgm", DCGM),
    ("dcgm-hostengine", "dcgm", _with(DCGM, hostengine=True)),
    ("persistenced-default", "persistenced", PERSISTENCED),
    ("persistenced-other-user", "persistenced", _with(PERSISTENCED, user="gpu-persist")),
]


def fixture(name):
    with open(os.path.join(FIXTURES, name + ".service")) as handle:
        return handle.read()


@pytest.mark.parametrize("name, kind, settings", CASES, ids=[c[0] for c in CASES])
def test_kind_matches_the_former_template(name, kind, settings):
    assert kinds.render_kind(kind, settings) == fixture(name)


def test_one_hardening_table_serves_the_vllm_and_ray_units():
    """The engine profile's lines appear, in order, in the vLLM instance's and the Ray node's unit alike."""
    vllm_text = render_unit(VLLM_CASES[0]["instance"], VLLM_CASES[0]["settings"])
    expected = ["NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=read-only", "PrivateTmp=yes",
                "ProtectKernelModules=yes", "ProtectKernelTunables=yes", "ProtectControlGroups=yes",
                "RestrictSUIDSGID=yes", "LockPersonality=yes", "DevicePolicy=closed"]
    for text in (vllm_text, kinds.render_kind("ray", RAY)):
        lines = [line for line in text.splitlines() if line in expected]
        assert lines == expected


BAD_VALUES = ["a\nExecStartPre=+/bin/sh -c id", "a\rb", "a\x00b", "a\tb", "a\x1bb", "a\x7fb"]
RAY_KEYS = ["user", "group", "home", "unit_name", "fabric_iface", "fabric_address", "token_file", "temp_dir",
            "limit_memlock", "ray_version"]
ROUTER_KEYS = ["user", "group", "unit_name", "model", "policy", "host", "config", "drained_dir", "python", "launcher",
               "version"]


DCGM_KEYS = ["header", "counters", "port", "hostengine_address", "exporter"]
PERSISTENCED_KEYS = ["header", "unit_name", "program", "user"]


@pytest.mark.parametrize("bad", BAD_VALUES)
@pytest.mark.parametrize("kind, base, key", [("ray", RAY, k) for k in RAY_KEYS] + [("router", ROUTER, k) for k in ROUTER_KEYS]
                         + [("dcgm", _with(DCGM, hostengine=True), k) for k in DCGM_KEYS]
                         + [("persistenced", PERSISTENCED, k) for k in PERSISTENCED_KEYS])
def test_a_control_character_in_any_value_is_refused_naming_the_option(kind, base, key, bad):
    with pytest.raises(UserError) as err:
        kinds.render_kind(kind, _with(base, **{key: bad}))
    assert "settings.%s" % key in str(err.value) and "control character" in str(err.value)


@pytest.mark.parametrize("where", ["argv", "environment", "read_write_paths", "device_allow", "cluster_hosts"])
def test_a_newline_in_a_list_or_mapping_of_the_ray_unit_is_refused(where):
    bad = "x\nExecStartPre=+/bin/true"
    value = {"argv": RAY["argv"] + [bad], "environment": {"A": bad}, "read_write_paths": [bad], "device_allow": [bad],
             "cluster_hosts": ["gpu-a", bad]}[where]
    with pytest.raises(UserError) as err:
        kinds.render_kind("ray", _with(RAY, **{where: value}))
    assert "settings.%s" % where in str(err.value)


def test_unknown_kind_and_missing_settings_name_the_option():
    with pytest.raises(UserError, match="kind"):
        kinds.render_kind("nginx", {})
    with pytest.raises(UserError, match="settings lacks .*python"):
        kinds.render_kind("router", dict((k, v) for k, v in ROUTER.items() if k != "python"))


@pytest.mark.parametrize("bad", BAD_VALUES)
def test_writer_value_refuses_control_characters(bad):
    with pytest.raises(writer.UnitValueError, match="opt"):
        writer.directive("User", bad, "opt")
    with pytest.raises(writer.UnitValueError, match="opt"):
        writer.environment({"A": bad}, "opt")


INJECT = "x\nExecStartPre=+/bin/sh -c 'id > /tmp/pwned'"


@pytest.mark.parametrize("where, instance_changes, settings_changes", [
    ("instances.name", {"name": INJECT}, {}),
    ("instances.name", {"name": "../../etc/systemd/system/x"}, {}),
    ("settings.user", {}, {"user": INJECT}),
    ("settings.group", {}, {"group": INJECT}),
    ("settings.home", {}, {"home": INJECT}),
    ("settings.env_file", {}, {"env_file": INJECT}),
    ("settings.environment", {}, {"environment": {"A": INJECT}}),
    ("settings.environment", {"environment": {"B": "a\rb"}}, {}),
    ("settings.read_write_paths", {}, {"read_write_paths": [INJECT]}),
    ("settings.device_allow", {}, {"device_allow": [INJECT]}),
    ("settings.limit_memlock", {}, {"limit_memlock": INJECT}),
    ("instances.argv", {"argv": ["vllm", "serve", "/m", "--served-model-name", INJECT]}, {}),
    ("instances.argv", {"argv": ["vllm", "serve", "/m", "--x", INJECT]}, {}),
    ("instances.cuda_visible_devices", {"cuda_visible_devices": "0\nExecStartPre=+/bin/true"}, {}),
])
def test_a_vllm_unit_value_with_a_control_character_adds_no_line(where, instance_changes, settings_changes):
    """Issue 43 class 6: vllm_units rendered a newline in an instance name or a setting as a new unit line."""
    inst = dict(VLLM_CASES[0]["instance"], **instance_changes)
    sett = dict(VLLM_CASES[0]["settings"], **settings_changes)
    with pytest.raises(UserError) as err:
        render_unit(inst, sett)
    assert where in str(err.value)
