# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vllm role's guards and unit template, evaluated with Ansible's own templating on the shipped
task files (issue 15 items 3, 5, 6, 7 and 9). Each case below passed the round-1 role unnoticed:
--api-ke in argv, two --port flags, port 70000, an instance without GPUs, two instances on one GPU,
secret-looking vllm_environment names, a key ending in a newline and a path with a space in
ReadWritePaths. (The removal guard and the unit text are the vllm_units module's: tests/unit/.../units/.)
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


@pytest.mark.parametrize("planned, sharing, ok", [
    ([instance(), instance(name="m-1", port=8001, cuda_visible_devices="1")], False, True),
    ([instance(), instance(name="m-1", port=8001, cuda_visible_devices="1,0")], False, False),
    ([instance(), instance(name="m-1", port=8001, cuda_visible_devices="0")], True, True),
    ([instance(), instance(name="m-1", cuda_visible_devices="1")], False, False),  # same port
])
def test_unique_ports_and_gpus(planned, sharing, ok):
    assert holds("plan.yml", "Check that instance names, ports and GPUs are unique", _vllm_planned=planned,
                 vllm_allow_gpu_sharing=sharing) is ok


# The shrink guard moved into the unit module's core: tests/unit/plugins/module_utils/units/test_lifecycle.py.


@pytest.mark.parametrize("env, ok", [
    ({"VLLM_NO_USAGE_STATS": "1", "TOKENIZERS_PARALLELISM": "false"}, True),
    ({"OPENAI_API_KEY": "x"}, False),
    ({"MY_SECRET": "x"}, False),
    ({"HF_HUB_TOKEN": "x"}, False),
    ({"DB_PASSWORD": "x"}, False),
    ({"BAD NAME": "x"}, False),
])
def test_environment_names(env, ok):
    assert holds("validate.yml", "Check vllm_environment (its values go into the world-readable unit file)",
                 vllm_environment=env) is ok


@pytest.mark.parametrize("key, ok", [("sk-abc", True), ("sk-abc\n", False), ("sk a", False), ("", True)])
def test_api_key_with_final_newline_refused(key, ok):
    assert holds("validate.yml", "Check the secrets can be written to an environment file", vllm_api_key=key) is ok


@pytest.mark.parametrize("paths, ok", [([], True), (["/data/models"], True), (["/data /etc"], False),
                                       (["/data\nExecStartPre=/x"], False), (["relative"], False), (["/a%h"], False)])
def test_unit_paths(paths, ok):
    assert holds("validate.yml", "Check the paths written into the units", vllm_read_write_paths=paths) is ok


def holds_for_each(file_name, name, **overrides):
    """True when every `that` of the assert task holds for each item of its loop."""
    t = task(file_name, name)
    extra = dict((k, trust_as_template(v) if isinstance(v, str) else v) for k, v in (t.get("vars") or {}).items())
    templar = Templar(loader=DataLoader(), variables=variables(**dict(extra, **overrides)))
    items = templar.template(trust_as_template(t["loop"]))
    for item in items:
        each = Templar(loader=DataLoader(), variables=variables(**dict(extra, item=item, **overrides)))
        if not all(each.template(trust_as_template("{{ (%s) | bool }}" % c)) for c in t["ansible.builtin.assert"]["that"]):
            return False
    return True


BIND = "Refuse an engine API reachable beyond this host (vLLM checks vllm_api_key on /v1 only)"
SERVE = ["vllm", "serve", "/m", "--port", "8000"]


# vLLM binds (args.host or "", port) (vllm/entrypoints/launchers/launcher.py, 0.32.0): no --host is every address.
@pytest.mark.parametrize("profile, instances, key, allow, ok", [
    ({"model": "/m"}, [], "", False, True),                        # the planner's default 127.0.0.1
    ({"model": "/m", "host": "127.0.0.1"}, [], "", False, True),
    ({"model": "/m", "host": "::1"}, [], "", False, True),
    ({"model": "/m", "host": "localhost"}, [], "", False, True),
    ({"model": "/m", "host": "0.0.0.0"}, [], "", False, False),     # issue 27: accepted with no key
    ({"model": "/m", "host": "10.0.0.5"}, [], "", False, False),
    ({"model": "/m", "host": ""}, [], "", False, True),             # "" is the planner's default, 127.0.0.1
    ({"model": "/m", "host": "0.0.0.0"}, [], "sk-1", False, False),  # the key guards /v1 only: /invocations is open
    ({"model": "/m", "host": "0.0.0.0"}, [], "", True, True),       # a trusted network, said explicitly
    ({"model": "/m", "host": "127.0.0.1\n"}, [], "", False, False),
    ({}, [instance()], "", False, True),
    ({}, [instance(argv=SERVE)], "", False, False),                 # no --host: every address
    ({}, [instance(argv=SERVE + ["--host=0.0.0.0"])], "", False, False),
    ({}, [instance(argv=SERVE + ["--hos", "0.0.0.0"])], "", False, False),  # an argparse prefix of --host
    ({}, [instance(argv=SERVE + ["--host", "0.0.0.0", "--host", "127.0.0.1"])], "", False, False),
    ({}, [instance(argv=SERVE + ["--host", "127.0.0.1", "--headless"])], "", False, True),
    ({}, [instance(argv=SERVE + ["--headless"])], "", False, True),  # a headless member serves no HTTP
    ({}, [{"name": "g", "port": 8000, "nodes": [{"argv": SERVE + ["--host", "127.0.0.1"]},
                                                {"argv": SERVE + ["--host", "0.0.0.0"]}]}], "", False, False),
])
def test_engine_bind_needs_loopback_or_consent(profile, instances, key, allow, ok):
    assert holds_for_each("validate.yml", BIND, vllm_profile=profile, vllm_instances=instances, vllm_api_key=key,
                          vllm_allow_unauthenticated=allow) is ok


def test_engine_bind_refusal_names_the_options():
    t = task("validate.yml", BIND)
    extra = dict((k, trust_as_template(v) if isinstance(v, str) else v) for k, v in t["vars"].items())
    templar = Templar(loader=DataLoader(), variables=variables(**dict(
        extra, vllm_profile={"model": "/m", "host": "0.0.0.0"}, item=["--host", "0.0.0.0"])))
    msg = templar.template(trust_as_template(t["ansible.builtin.assert"]["fail_msg"]))
    for word in ("vllm_profile.host", "0.0.0.0", "no API key", "/invocations", "nginx", "vllm_allow_unauthenticated=true"):
        assert word in msg, (word, msg)


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


# Issue 27 LOW: Python's `$` matches before a final newline, and these values are written into the units as they
# are: "infinity\nExecStartPre=..." passed and added a root directive that systemd-analyze verify accepts.
INJECT = "\nExecStartPre=/bin/sh -c id"


@pytest.mark.parametrize("overrides, ok", [
    ({}, True),
    ({"vllm_unit_prefix": "vllm\n"}, False),
    ({"vllm_limit_memlock": "8M"}, True),
    ({"vllm_limit_memlock": "infinity" + INJECT}, False),
    ({"vllm_limit_nofile": "16384 x"}, False),
    ({"vllm_user": "vllm" + INJECT}, False),
    ({"vllm_restart_sec": "2s"}, True),
    ({"vllm_timeout_start_sec": "3600\n"}, False),
    ({"vllm_device_allow": ["char-nvidia-frontend rw", "/dev/nvidia0 rw"]}, True),
    ({"vllm_device_allow": ["char-nvidia-frontend rw" + INJECT]}, False),
    ({"vllm_rdma_device_allow": ["/dev/infiniband/rdma_cm rw\n"]}, False),
    ({"vllm_cluster_hosts": ["gpu-01", "gpu-02\nExecStartPre=/x"]}, False),
])
def test_unit_directive_values(overrides, ok):
    first = "Check the install and start settings"
    second = "Check the values written as unit directives (a newline would add a root directive)"
    both = holds("validate.yml", first, **overrides) and holds("validate.yml", second, **overrides)
    assert both is ok


@pytest.mark.parametrize("inst, ok", [
    (instance(), True),
    (instance(argv=GOOD["argv"][:5] + ["--port", "8001"], port=8000), False),   # vLLM listens on 8001, nginx uses 8000
    (instance(argv=GOOD["argv"][:5] + ["--port=8000"], port=8000), True),
    (instance(argv=GOOD["argv"][:5] + ["--port=9000"], port=8000), False),
    (instance(cuda_visible_devices="0\nExecStartPre=/x"), False),             # the CPU platform skipped this check
    (instance(cuda_visible_devices=""), True),                                # the CPU build needs no GPU
])
def test_hand_written_instance_port_and_gpus(inst, ok):
    name = "Check each hand-written instance's port and GPUs (they reach the unit and the health gate's URL)"
    assert holds_for_each("validate.yml", name, vllm_instances=[inst], vllm_platform="cpu") is ok


@pytest.mark.parametrize("profile, instances, ok", [
    ({"model": "/srv/models/m"}, [], True),
    ({"served_model_name": "m"}, [], False),      # issue 27: the planner's error did not name vllm_profile.model
    ({"model": ""}, [], False),
    ({}, [], True),                               # nothing to serve: the check before says so
    ({"served_model_name": "m"}, [GOOD], True),   # given instances: the profile is not used
])
def test_a_profile_names_its_model(profile, instances, ok):
    assert holds("validate.yml", "Check that a profile names its model (vllm_profile.model)",
                 vllm_profile=profile, vllm_instances=instances) is ok
