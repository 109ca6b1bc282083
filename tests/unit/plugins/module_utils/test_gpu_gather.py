# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_gather behind a recording stand-in runner: the exact argv of every nvidia-smi call, in order.

The answers are the real captures of the H200 x2 host (tests/fixtures/h200x2/ansible-run, provenance in
its README) and real nvidia-smi error texts; 'nvlink -R' was not captured there, so it is answered as
a failing command.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu import gpu_gather as G
from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu.nvml import NvmlFatalError
from ansible_collections.gpufleet.vllm.tests.fakes.fake_nvml.loader import FIXTURES, fake

SMI = "/usr/bin/nvidia-smi"
Q = (SMI, "-q", "-x")
TOPO = (SMI, "topo", "-m")
CAP = (SMI, "--query-gpu=pci.bus_id,compute_cap", "--format=csv,noheader")
LINK_S = (SMI, "nvlink", "-s")
LINK_R = (SMI, "nvlink", "-R")


def _read(name):
    with open(os.path.join(FIXTURES, "h200x2", "ansible-run", name)) as handle:
        return handle.read()


def h200_answers():
    return {Q: (0, _read("smi_q.xml"), ""), TOPO: (0, _read("smi_topo.txt"), ""),
            CAP: (0, _read("smi_compute_cap.csv"), ""), LINK_S: (0, _read("smi_nvlink_s.txt"), ""),
            LINK_R: (1, "", "not captured")}


class RecordingRunner(object):
    """Test stand-in for ModuleRunner: answers exact argv tuples, records every call."""

    def __init__(self, answers, path=SMI):
        self.answers = answers
        self.path = path
        self.calls = []

    def run(self, argv):
        self.calls.append(tuple(argv))
        if tuple(argv) not in self.answers:
            raise AssertionError("unexpected command %r" % (argv,))
        return self.answers[tuple(argv)]

    def which(self, name):
        assert name == "nvidia-smi"
        return self.path


def _answers(**changes):
    answers = h200_answers()
    for key, value in changes.items():
        answers[globals()[key]] = value
    return answers


SMI_CASES = [
    # id, answers, nvidia-smi path, expected calls, expected gpu_count (None: raises NvmlFatalError)
    ("h200x2", _answers(), SMI, [Q, TOPO, CAP, LINK_S, LINK_R], 2),
    ("no nvlink command", _answers(LINK_S=(3, "", "nvlink: not supported")), SMI, [Q, TOPO, CAP, LINK_S], 2),
    ("no compute_cap query", _answers(CAP=(2, "", "Field compute_cap is not a valid field")), SMI,
     [Q, TOPO, CAP, LINK_S, LINK_R], 2),
    ("no devices", {Q: (6, "No devices were found\n", "")}, SMI, [Q], 0),
    ("driver not loaded", {Q: (9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                               "Make sure that the latest NVIDIA driver is installed and running.\n", "")}, SMI, [Q], 0),
    ("not in PATH", {}, None, [], 0),
    ("version mismatch", {Q: (18, "Failed to initialize NVML: Driver/library version mismatch\n", "")}, SMI, [Q], None),
]


@pytest.mark.parametrize("answers,path,calls,count", [c[1:] for c in SMI_CASES], ids=[c[0] for c in SMI_CASES])
def test_smi_backend_argv(answers, path, calls, count, monkeypatch):
    monkeypatch.setattr(G, "read_sysfs", lambda bus_ids, root=None: {})
    runner = RecordingRunner(answers, path)
    params = {"backend": "nvidia-smi", "expected": {}, "min_gpus": 0}
    if count is None:
        with pytest.raises(NvmlFatalError) as info:
            G.gpu_facts(params, runner)
        assert info.value.kind == "lib_rm_version_mismatch" and "reboot" in info.value.message
    else:
        facts, dummy = G.gpu_facts(params, runner)
        assert facts["gpu_count"] == count
    assert runner.calls == calls


def _library_missing():
    raise NvmlFatalError("library_missing", "No module named 'pynvml'")


FALLBACK_CASES = [
    # id, backend, NVML loader, runner answers, path, calls, outcome (backend of the facts, or the error's words)
    ("auto, NVML works", "auto", lambda: fake("h200x2"), {}, SMI, [], "nvml"),
    ("auto, no nvidia-ml-py", "auto", _library_missing, h200_answers(), SMI, [Q, TOPO, CAP, LINK_S, LINK_R],
     "nvidia-smi"),
    ("auto, no tools at all", "auto", _library_missing, {}, None, [], "none"),
    ("nvml, no nvidia-ml-py", "nvml", _library_missing, {}, SMI, [], "(or set backend=nvidia-smi)"),
    ("auto, no driver", "auto", lambda: fake("no_driver"), {}, SMI, [], "none"),
]


@pytest.mark.parametrize("backend,load,answers,path,calls,outcome", [c[1:] for c in FALLBACK_CASES],
                         ids=[c[0] for c in FALLBACK_CASES])
def test_backend_choice_and_fallback(backend, load, answers, path, calls, outcome, monkeypatch):
    monkeypatch.setattr(G, "read_sysfs", lambda bus_ids, root=None: {})
    runner = RecordingRunner(answers, path)
    params = {"backend": backend, "expected": {}, "min_gpus": 0}
    if outcome.startswith("("):
        with pytest.raises(NvmlFatalError) as info:
            G.gpu_facts(params, runner, load=load)
        assert outcome in info.value.message and "pip install nvidia-ml-py" in info.value.message
    else:
        facts, dummy = G.gpu_facts(params, runner, load=load)
        assert facts["backend"] == outcome
    assert runner.calls == calls


def test_min_gpus_failure_carries_the_facts():
    runner = RecordingRunner({}, None)
    with pytest.raises(G.UserError) as info:
        G.gpu_facts({"backend": "nvidia-smi", "expected": {}, "min_gpus": 1}, runner)
    assert info.value.message == ("found 0 GPU(s) but min_gpus=1 (nvidia-smi not found in PATH). Check the driver "
                                  "with 'nvidia-smi', or lower min_gpus")
    assert info.value.details["gpu_count"] == 0


def test_module_runner_runs_in_the_c_locale():
    class StandInModule(object):
        """Test stand-in for AnsibleModule: records run_command's keyword arguments."""

        def __init__(self):
            self.kwargs = None

        def run_command(self, argv, **kwargs):
            self.kwargs = kwargs
            return 0, "", ""

        def get_bin_path(self, name):
            return "/opt/bin/" + name

    module = StandInModule()
    runner = G.ModuleRunner(module)
    assert runner.run(list(Q)) == (0, "", "") and module.kwargs == {"environ_update": {"LC_ALL": "C", "LANG": "C"}}
    assert runner.which("nvidia-smi") == "/opt/bin/nvidia-smi"


def test_read_sysfs_numa_nodes(tmp_path):
    (tmp_path / "0000:18:00.0").mkdir()
    (tmp_path / "0000:18:00.0" / "numa_node").write_text("1\n")
    (tmp_path / "0000:2a:00.0").mkdir()
    (tmp_path / "0000:2a:00.0" / "numa_node").write_text("junk\n")
    got = G.read_sysfs(["00000000:18:00.0", "00000000:2A:00.0", "00000000:3B:00.0", None], str(tmp_path))
    assert got == {"00000000:18:00.0": {"numa_node": 1}}


def test_read_numa_memory(tmp_path):
    # The kernel's per-node meminfo (drivers/base/node.c); node 0's lines as this 2-core test machine's
    # /sys/devices/system/node/node0/meminfo printed them on 2026-12-05, node 1 with another size.
    (tmp_path / "node0").mkdir()
    (tmp_path / "node0" / "meminfo").write_text("Node 0 MemTotal:       24683784 kB\nNode 0 MemFree:         7078412 kB\n")
    (tmp_path / "node1").mkdir()
    (tmp_path / "node1" / "meminfo").write_text("Node 1 MemTotal:       1048576 kB\n")
    (tmp_path / "node2").mkdir()                       # no meminfo: left out
    (tmp_path / "possible").write_text("0-2\n")        # not a node folder
    assert G.read_numa_memory(str(tmp_path)) == {0: 24683784 * 1024, 1: 1024 ** 3}
    assert G.read_numa_memory(str(tmp_path / "absent")) == {}
