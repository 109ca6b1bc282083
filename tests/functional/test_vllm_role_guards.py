# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vllm role's guards and unit template, evaluated with Ansible's own templating on the shipped
task files (issue 15 items 3, 5, 6, 7 and 9). Each case below passed the round-1 role unnoticed:
--api-ke in argv, two --port flags, port 70000, an instance without GPUs, two instances on one GPU,
secret-looking vllm_environment names, a key ending in a newline and a path with a space in
ReadWritePaths. (The removal guard and the unit text are the vllm_units module's, the settings checks the
vllm_settings_check module's: tests/unit/.../units/.)
The Molecule scenario `fleet` runs the same tasks on real systemd hosts."""
import pathlib

import pytest
import yaml

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROLE = pathlib.Path(__file__).resolve().parents[2] / "roles" / "vllm"
GOOD = {"name": "m-0", "port": 8000, "cuda_visible_devices": "0", "numa_node": 0,
        "argv": ["vllm", "serve", "/srv/models/m", "--host", "127.0.0.1", "--port", "8000", "--served-model-name", "m"]}


def trusted(value):
    """A role file's value as Ansible loads it: its strings (also inside a dict) are templates."""
    if isinstance(value, dict):
        return dict((k, trusted(v)) for k, v in value.items())
    return trust_as_template(value) if isinstance(value, str) else value


def variables(**overrides):
    out = dict((k, trusted(v)) for k, v in yaml.safe_load((ROLE / "defaults" / "main.yml").read_text()).items())
    out.update((k, trusted(v)) for k, v in yaml.safe_load((ROLE / "vars" / "main.yml").read_text()).items())
    out.update(inventory_hostname="gpu-01", ansible_managed="Ansible managed: test", _vllm_venv="/opt/vllm/venvs/x")
    out.update(overrides)
    return out


def task(file_name, name):
    return next(t for t in yaml.safe_load((ROLE / "tasks" / file_name).read_text()) if t["name"] == name)


def holds(file_name, name, **overrides):
    """True when every `that` of the assert task holds for these variables."""
    t = task(file_name, name)
    extra = dict((k, trust_as_template(v) if isinstance(v, str) else v) for k, v in (t.get("vars") or {}).items())
    templar = Templar(loader=DataLoader(), variables=variables(**dict(extra, **overrides)))
    return all(templar.template(trust_as_template("{{ (%s) | bool }}" % c)) for c in t["ansible.builtin.assert"]["that"])


def instance(**changes):
    out = dict(GOOD, argv=list(GOOD["argv"]))
    out.update(changes)
    return out


@pytest.mark.parametrize("inst, ok", [
    (instance(), True),
    (instance(argv=GOOD["argv"] + ["--api-ke", "sk-1"]), False),
    (instance(argv=GOOD["argv"] + ["--api-key=sk-1"]), False),
    (instance(argv=GOOD["argv"] + ["--hf-tok", "hf_1"]), False),
    (instance(argv=GOOD["argv"] + ["--port", "8001"]), False),
    (instance(argv=GOOD["argv"] + ["--served-model-name", "m\nExecStartPre=/bin/sh -c id"]), False),
    (instance(port=70000), False),
    (instance(port=0), False),
    (instance(port="80; rm"), False),
    (dict((k, v) for k, v in GOOD.items() if k != "cuda_visible_devices"), False),
    (instance(cuda_visible_devices=""), False),
    (instance(cuda_visible_devices="0,1"), True),
])
def test_instance_checks(inst, ok):
    assert holds("plan.yml", "Check every planned instance", _vllm_instance=inst) is ok


def on_port(port, **changes):
    """A second instance listening on ``port`` (its argv's --port and its port key agree, as the plan writes them)."""
    argv = [str(port) if i > 0 and GOOD["argv"][i - 1] == "--port" else a for i, a in enumerate(GOOD["argv"])]
    return instance(port=port, argv=argv, **changes)


# _vllm_ports reads each entry's record (the filter gpufleet.vllm.instance_record), which this in-process Templar
# cannot load without installing the collection loader for every test of the worker: each case gives the ports the
# engines bind (their argv's --port), written by hand; the Molecule scenarios run the expression itself.
@pytest.mark.parametrize("planned, ports, sharing, ok", [
    ([instance(), on_port(8001, name="m-1", cuda_visible_devices="1")], [8000, 8001], False, True),
    ([instance(), on_port(8001, name="m-1", cuda_visible_devices="1,0")], [8000, 8001], False, False),
    ([instance(), on_port(8001, name="m-1", cuda_visible_devices="0")], [8000, 8001], True, True),
    ([instance(), instance(name="m-1", cuda_visible_devices="1")], [8000, 8000], False, False),  # same port
    # the port key says 8001 but the argv (what the engine binds) says 8000: a clash the entries' keys hid
    ([instance(), instance(name="m-1", port=8001, cuda_visible_devices="1")], [8000, 8000], False, False),
])
def test_unique_ports_and_gpus(planned, ports, sharing, ok):
    assert holds("plan.yml", "Check that instance names, ports and GPUs are unique", _vllm_planned=planned,
                 vllm_allow_gpu_sharing=sharing, _vllm_ports=ports) is ok


# The shrink guard moved into the unit module's core: tests/unit/plugins/module_utils/units/test_lifecycle.py.


# The settings checks of validate.yml (vllm_environment names, the secrets' characters, the unit paths and
# directive values, the engine's bind address, hand-written instances' ports and GPUs, vllm_profile.model) are
# the vllm_settings_check module's core now: tests/unit/plugins/module_utils/units/test_settings.py.


# The unit text (NUMA binding, specifiers, group members) is rendered by plugins/module_utils/units/render.py
# now: tests/unit/plugins/module_utils/units/test_render.py.


@pytest.mark.parametrize("profile, instances, cluster, ok", [
    ({"model": "/m"}, [], False, True),
    ({"model": "/m", "nodes": 1}, [], False, True),
    ({"model": "/m", "nodes": 2}, [], False, False),   # a group over hosts needs the hosts that run it
    ({"model": "/m", "nodes": 2}, [], True, True),     # vllm_cluster_hosts names them
    ({"model": "/m", "nodes": 2}, [GOOD], False, True),  # explicit instances: the profile is not used
])
def test_multi_host_profile_needs_its_hosts(profile, instances, cluster, ok):
    assert holds("plan.yml", "Refuse a multi-host plan without the hosts that run it", vllm_profile=profile,
                 vllm_instances=instances, _vllm_cluster=cluster) is ok


# (vllm_cluster_hosts, this host, the play's batch, vllm_profile, vllm_instances) -> accepted
CLUSTER_PLACES = [
    (["gpu-01", "gpu-02"], "gpu-01", ["gpu-01", "gpu-02"], {"model": "/m"}, [], True),
    (["gpu-01", "gpu-02"], "gpu-02", ["gpu-01", "gpu-02", "gpu-03"], {"model": "/m", "nodes": 2}, [], True),
    (["gpu-01", "gpu-02"], "gpu-03", ["gpu-01", "gpu-02", "gpu-03"], {"model": "/m"}, [], False),  # not a member
    (["gpu-01", "gpu-02"], "gpu-01", ["gpu-01"], {"model": "/m"}, [], False),          # serial split the group
    (["gpu-01", "gpu-01"], "gpu-01", ["gpu-01"], {"model": "/m"}, [], False),          # a host twice
    (["gpu-01", "gpu-02"], "gpu-01", ["gpu-01", "gpu-02"], {"model": "/m", "nodes": 3}, [], False),
    (["gpu-01", "gpu-02"], "gpu-01", ["gpu-01", "gpu-02"], {"model": "/m"}, [GOOD], False),  # a group is planned here
    ("gpu-01,gpu-02", "gpu-01", ["gpu-01", "gpu-02"], {"model": "/m"}, [], False),     # a string, not a list
]


@pytest.mark.parametrize("hosts, me, batch, profile, instances, ok", CLUSTER_PLACES)
def test_cluster_place_checks(hosts, me, batch, profile, instances, ok):
    assert holds("cluster.yml", "Check this host's place in the group", vllm_cluster_hosts=hosts, inventory_hostname=me,
                 ansible_play_batch=batch, vllm_profile=profile, vllm_instances=instances) is ok


# Issue 27: a group silently used the default-route interface for vLLM's unauthenticated traffic between hosts.
@pytest.mark.parametrize("iface, ok", [("eth0", True), ("ens1f0np0", True), ("ib0", True), ("", False),
                                       ("eth0\n", False), ("eth0; x", False), ("a-very-long-name0", False)])
def test_a_group_needs_its_fabric_interface_named(iface, ok):
    name = "Require the group's network interface to be named (vLLM's traffic between hosts is unauthenticated)"
    assert holds("cluster.yml", name, vllm_fabric_interface=iface, vllm_cluster_hosts=["gpu-01", "gpu-02"]) is ok
    t = task("cluster.yml", name)
    assert t["when"] == "vllm_cluster_hosts | length > 1"  # a single host needs none
