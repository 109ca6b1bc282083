# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The internal role `common` (issue 17, item 4): the check-mode and the start decisions every role now
takes from one place, run for real with ansible-playbook on this machine (connection local). The Molecule
scenarios run the same entry points inside the roles on systemd hosts.

`ansible_check_mode` only reflects --check on the command line; the round-1 vllm, model_weights, mig and
monitoring roles read it, so a `check_mode: true` on an include ran their restarts and downloads' follow-up
steps as if for real. The first cases fail on that rule."""
import base64
import json
import os
import pathlib
import subprocess
import sys

import pytest

from weights_support import collections_path

ROOT = pathlib.Path(__file__).resolve().parents[2]
HAS_DRIVER = os.path.exists("/dev/nvidiactl")


def play(tmp_path, tasks, *args):
    (tmp_path / "play.yml").write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n" + tasks)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_path(), ANSIBLE_NOCOLOR="1",
               ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    proc = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), str(tmp_path / "play.yml"),
         "-e", "ansible_python_interpreter=%s" % sys.executable] + list(args),
        capture_output=True, text=True, env=env, check=False, timeout=300)
    return proc.returncode, proc.stdout + proc.stderr


def reported(out):
    """The RESULT line a play prints through debug."""
    line = next(x for x in out.splitlines() if "RESULT " in x)
    return json.loads(base64.b64decode(line.split("RESULT ", 1)[1].split(" END", 1)[0]))


CHECK_MODE = """
    - name: Probe
      ansible.builtin.import_role:
        name: gpufleet.vllm.common
        tasks_from: check_mode
      %s
    - name: Report
      ansible.builtin.debug:
        msg: "RESULT {{ {'common': common_check_mode, 'cli': ansible_check_mode} | to_json | b64encode }} END"
      tags: [report]
"""


@pytest.mark.parametrize("keyword, cli, expected", [
    ("", [], {"common": False, "cli": False}),
    ("", ["--check"], {"common": True, "cli": True}),
    # check mode set on the import only: the variable round 1 read says false
    ("check_mode: true", [], {"common": True, "cli": False}),
    # a --tags run that selects none of the caller's tasks still gets the fact (the multinode verify's
    # `--tags vllm_cluster_check` failed on it: the account entry point's argument check reads it)
    ("tags: [model_weights]", ["--tags", "report"], {"common": False, "cli": False}),
])
def test_check_mode_decision(tmp_path, keyword, cli, expected):
    rc, out = play(tmp_path, CHECK_MODE % keyword, *cli)
    assert rc == 0, out[-3000:]
    assert reported(out) == expected


START = """
    - name: Decide
      ansible.builtin.import_role:
        name: gpufleet.vllm.common
        tasks_from: start_decision
      vars:
        common_start_mode: "%s"
        common_start_platform: %s
        common_start_option: vllm_start_services
    - name: Report
      ansible.builtin.debug:
        msg: "RESULT {{ {'start': common_start_here, 'reason': common_start_reason} | to_json | b64encode }} END"
"""


@pytest.mark.parametrize("mode, platform, start, reason", [
    ("auto", "cuda", HAS_DRIVER,
     "the NVIDIA driver is here (/dev/nvidiactl)" if HAS_DRIVER else "no NVIDIA driver here (/dev/nvidiactl is missing)"),
    ("auto", "cpu", True, "the CPU platform needs no GPU"),
    ("true", "cuda", True, "vllm_start_services is true"),
    ("false", "cpu", False, "vllm_start_services is false"),
    ("no", "cuda", False, "vllm_start_services is no"),
])
def test_start_decision(tmp_path, mode, platform, start, reason):
    rc, out = play(tmp_path, START % (mode, platform))
    assert rc == 0, out[-3000:]
    assert reported(out) == {"start": start, "reason": reason}


@pytest.mark.parametrize("mode, platform, message", [
    ("sometimes", "cuda", 'vllm_start_services must be auto, true or false (got \\"sometimes\\")'),
    ("auto", "rocm", "common_start_platform must be one of: cuda, cpu, got: rocm"),  # the entry point's spec
])
def test_start_decision_refuses_bad_input_by_name(tmp_path, mode, platform, message):
    rc, out = play(tmp_path, START % (mode, platform))
    assert rc != 0
    assert message in out, out[-3000:]
    assert "Traceback" not in out


PROFILE = """
    - name: Plan
      ansible.builtin.include_role:
        name: gpufleet.vllm.vllm
        tasks_from: plan_profile
      vars:
        vllm_platform: cuda
        vllm_profile: %s
"""


def test_profile_passes_whole_and_a_misspelt_key_is_named(tmp_path):
    """vllm_profile reaches vllm_plan as module_defaults: an option the task file never names (yarn, here)
    takes effect, and a misspelt one fails in the module by name instead of being dropped silently."""
    model = ROOT / "tests" / "fixtures" / "model-configs" / "Qwen__Qwen3-14B.config.json"
    profile = {"model": str(model), "gpus": {"profile": "h100", "count": 1}, "max_model_len": 65536,
               "yarn": {"factor": 2.0, "original_max_position_embeddings": 32768}}
    rc, out = play(tmp_path, PROFILE % json.dumps(profile) + """
    - name: Report
      ansible.builtin.debug:
        msg: "RESULT {{ __vllm_plan.instances[0].argv | to_json | b64encode }} END"
""")
    assert rc == 0, out[-3000:]
    argv = reported(out)
    assert argv[argv.index("--max-model-len") + 1] == "65536"
    assert any("rope_scaling" in a or "yarn" in a for a in argv), argv

    rc, out = play(tmp_path, PROFILE % json.dumps(dict(profile, max_model_length=65536)))
    assert rc != 0
    assert "Unsupported parameters" in out and "max_model_length" in out, out[-3000:]


@pytest.mark.parametrize("tasks", [
    "    - name: Use it directly\n      ansible.builtin.include_role:\n        name: gpufleet.vllm.common\n",
    "    - name: Import it directly\n      ansible.builtin.import_role:\n        name: gpufleet.vllm.common\n",
])
def test_the_role_itself_refuses_to_run(tmp_path, tasks):
    """prometheus-community's _common pattern: the internal role is used through its entry points only."""
    rc, out = play(tmp_path, tasks)
    assert rc != 0 and "gpufleet.vllm.common is internal to the gpufleet.vllm roles" in out, out
    assert "(used as a play role)" in out and "tasks_from: account, check_mode or start_decision" in out
