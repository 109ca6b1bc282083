# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""render_unit: the exact unit text, against units the role's former Jinja template rendered
(tests/fixtures/units/PROVENANCE.md), plus the cases issue 15 fixed (NUMA, specifiers, group members)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import os

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.units.systemd_unit import parse_exec_line
from ansible_collections.gpufleet.vllm.plugins.module_utils.units.render import UnitRenderError, render_unit

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "fixtures", "units")
with open(os.path.join(FIXTURES, "cases.json")) as handle:
    CASES = json.load(handle)
BASE = CASES[0]["settings"]
GOOD = CASES[0]["instance"]


def fixture(name):
    with open(os.path.join(FIXTURES, name + ".service")) as handle:
        return handle.read()


def instance(**changes):
    out = copy.deepcopy(GOOD)
    out.update(changes)
    return out


def settings(**changes):
    out = copy.deepcopy(BASE)
    out.update(changes)
    return out


def line(unit, key):
    return [text for text in unit.splitlines() if text.startswith(key + "=")]


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_byte_identical_to_the_former_template(case):
    assert render_unit(case["instance"], case["settings"]) == fixture(case["id"])


@pytest.mark.parametrize("numa, binds", [(0, True), (1, True), (None, False), (-1, False), ("unknown", False), ("", False)])
def test_numa_binding_only_for_a_known_node(numa, binds):
    unit = render_unit(instance(numa_node=numa), BASE)
    assert ("--membind=" in unit) is binds
    if binds:
        assert "--membind=%d " % numa in unit
    assert "--membind" not in render_unit(instance(numa_node=numa), settings(numa_binding=False))


def test_served_name_specifiers_escaped():
    unit = render_unit(instance(argv=["vllm", "serve", "/m", "--port", "8000", "--served-model-name", "m%n"]), BASE)
    assert "Description=vLLM OpenAI-compatible server, instance m-0 (m%%n)" in unit
    assert "X-GpufleetVllmServedModelName=m%%n" in unit


GROUP = dict(cluster=True, cluster_hosts=["gpu-01", "gpu-02"], fabric_iface="ens1f0", fabric_address="10.0.0.2", rdma=True)


def test_group_member_units():
    head = render_unit(instance(node_rank=0, headless=False), settings(**GROUP))
    member = render_unit(instance(node_rank=1, headless=True, argv=GOOD["argv"] + ["--headless"]), settings(**GROUP))
    for unit in (head, member):
        assert "Environment=VLLM_HOST_IP=10.0.0.2" in unit
        assert "Environment=GLOO_SOCKET_IFNAME=ens1f0" in unit
        assert "Environment=NCCL_SOCKET_IFNAME=ens1f0" in unit
        assert "Environment=VLLM_ENGINE_READY_TIMEOUT_S=1800" in unit
        assert "X-GpufleetVllmGroup=gpu-01 gpu-02" in unit
        assert "DeviceAllow=char-infiniband_verbs rw" in unit and "DeviceAllow=/dev/infiniband/rdma_cm rw" in unit
    assert "X-GpufleetVllmNodeRank=0" in head and "X-GpufleetVllmURL=http://127.0.0.1:8000" in head
    assert "X-GpufleetVllmHeadless" not in head
    assert "X-GpufleetVllmNodeRank=1" in member and "X-GpufleetVllmHeadless=yes" in member
    assert "X-GpufleetVllmURL" not in member  # no HTTP endpoint: the gate checks the engine instead
    assert "Description=vLLM headless member (node rank 1) of instance m-0" in member
    single = render_unit(instance(), BASE)
    assert "GLOO_SOCKET_IFNAME" not in single and "infiniband" not in single and "X-GpufleetVllmNodeRank" not in single


# (argv tail, instance port) -> the URL the health gate reads
@pytest.mark.parametrize("tail, url", [
    (["--host", "127.0.0.1", "--port", "8000"], "http://127.0.0.1:8000"),
    (["--host=0.0.0.0", "--port=9000"], "http://127.0.0.1:9000"),
    (["--host", "::", "--port", "8000"], "http://[::1]:8000"),
    (["--host", "::1"], "http://[::1]:8000"),
    (["--host", "localhost"], "http://127.0.0.1:8000"),
    ([], "http://127.0.0.1:8000"),
])
def test_health_url(tail, url):
    unit = render_unit(instance(argv=["vllm", "serve", "/m"] + tail), BASE)
    assert line(unit, "X-GpufleetVllmURL") == ["X-GpufleetVllmURL=" + url]


@pytest.mark.parametrize("tail, timeout, drain", [
    ([], 30, ["--shutdown-timeout", "30"]),
    ([], 0, []),
    (["--shutdown-timeout", "5"], 30, []),  # the plan's own value stays, not a second flag
    (["--shutdown-timeout=5"], 30, []),
])
def test_drain_timeout_appended_once(tail, timeout, drain):
    argv = ["vllm", "serve", "/m"] + tail
    unit = render_unit(instance(argv=argv, numa_node=None), settings(shutdown_timeout=timeout))
    exec_line = line(unit, "ExecStart")[0][len("ExecStart="):]
    assert parse_exec_line(exec_line) == [BASE["venv"] + "/bin/vllm", "serve", "/m"] + tail + drain
    assert line(unit, "TimeoutStopSec") == ["TimeoutStopSec=%d" % (timeout + 30)]


def test_exec_start_round_trips_hostile_arguments():
    tail = ["--chat-template", "/a b/$HOME.jinja", "--served-model-name", "50%", "--x", 'say "hi"\\n', 3]
    unit = render_unit(instance(argv=["vllm", "serve", "/m"] + tail, numa_node=None), settings(shutdown_timeout=0))
    words = parse_exec_line(line(unit, "ExecStart")[0][len("ExecStart="):])
    assert words == [BASE["venv"] + "/bin/vllm", "serve", "/m"] + [str(word) for word in tail]


def test_cpu_platform_environment_and_devices():
    unit = render_unit(instance(), settings(platform="cpu", cpu_reserved_cpus="2"))
    assert line(unit, "Environment")[:3] == ["Environment=VLLM_TARGET_DEVICE=cpu", "Environment=VLLM_CPU_OMP_THREADS_BIND=auto",
                                             "Environment=VLLM_CPU_NUM_OF_RESERVED_CPU=2"]
    assert "CUDA_VISIBLE_DEVICES" not in unit and "DeviceAllow" not in unit and "nvidia-persistenced" not in unit


@pytest.mark.parametrize("inst, sett, words", [
    (instance(argv=["vllm", "run", "/m"]), BASE, ["argv must be a list starting vllm, serve, MODEL", "vllm_instances"]),
    (instance(argv="vllm serve /m"), BASE, ["argv must be a list"]),
    (instance(environment={"BAD NAME": "x"}), BASE, ["instance m-0", "not a valid environment variable name"]),
    (instance(), dict((k, v) for k, v in BASE.items() if k != "venv"), ["settings lacks venv"]),
])
def test_refusals_name_the_input(inst, sett, words):
    with pytest.raises(UnitRenderError) as info:
        render_unit(inst, sett)
    for word in words:
        assert word in info.value.message
