# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""issue 42 item 6: the vllm_serve scenario's verify is split by feature. Every top-level task is a `Feature: ...`
block whose rescue records the feature (tasks/feature_failed.yml) and lets the next feature run; the play's last task
fails naming every feature that failed and the task it failed at. The mechanism runs here on localhost with the
scenario's own rescue file and its own last task, around stand-in features (one planted failure)."""
import os
import pathlib
import subprocess
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "extensions" / "molecule" / "vllm_serve"
RESCUE = SCENARIO / "tasks" / "feature_failed.yml"


def _verify_tasks():
    return yaml.safe_load((SCENARIO / "verify.yml").read_text())[0]["tasks"]


def test_every_verify_task_is_a_feature_block_with_the_recording_rescue():
    tasks = _verify_tasks()
    features, last = tasks[:-1], tasks[-1]
    assert len(features) >= 10
    for task in features:
        assert task["name"].startswith("Feature: "), task["name"]
        assert "block" in task and task["block"], task["name"]
        rescue = task.get("rescue") or []
        assert len(rescue) == 1 and rescue[0]["ansible.builtin.include_tasks"] == "tasks/feature_failed.yml", task["name"]
        # the recorded name is the feature's own (the block's name up to its parenthesis)
        assert task["name"][len("Feature: "):].split(" (")[0] == rescue[0]["vars"]["_feature"], task["name"]
    assert "_srv_failed_features" in str(last["ansible.builtin.assert"]["that"])
    names = [t["name"] for t in features]
    assert len(set(names)) == len(names)


def _play(features):
    tasks = []
    for name, body in features:
        tasks.append({"name": "Feature: %s" % name, "block": body,
                      "rescue": [{"name": "record", "ansible.builtin.include_tasks": str(RESCUE),
                                  "vars": {"_feature": name}}]})
    tasks.append(_verify_tasks()[-1])
    return [{"hosts": "localhost", "connection": "local", "gather_facts": False, "tasks": tasks}]


def _run(tmp_path, venv_bin, features):
    play = tmp_path / "play.yml"
    play.write_text(yaml.safe_dump(_play(features), sort_keys=False))
    env = dict(os.environ, ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
               ANSIBLE_PYTHON_INTERPRETER=sys.executable, ANSIBLE_NOCOLOR="1")
    return subprocess.run([str(venv_bin / "ansible-playbook"), "-i", "localhost,", str(play)], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=120,
                          check=False)


def test_a_failed_feature_is_named_and_the_next_feature_still_runs(tmp_path, venv_bin):
    marker = tmp_path / "second-ran"
    proc = _run(tmp_path, venv_bin, [
        ("router", [{"name": "Planted failure", "ansible.builtin.assert": {"that": "1 == 2", "fail_msg": "planted"}}]),
        ("bench", [{"name": "Touch", "ansible.builtin.file": {"path": str(marker), "state": "touch"}}]),
    ])
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert marker.exists(), proc.stdout[-3000:]
    assert "vllm_serve: 1 feature(s) failed: router (at: Planted failure)" in proc.stdout, proc.stdout[-3000:]
    assert "FEATURE FAILED: router - at task 'Planted failure': planted" in proc.stdout


def test_features_that_pass_pass_the_play(tmp_path, venv_bin):
    proc = _run(tmp_path, venv_bin, [("install", [{"name": "Fine", "ansible.builtin.debug": {"msg": "ok"}}])])
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "feature(s) failed" not in proc.stdout
