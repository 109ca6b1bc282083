# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/tune.yml refuses `-e vllm_profile=...` before it touches a host: extra vars outrank the include_role
vars each candidate is launched with, so every candidate would be the same unit (found on a real CPU engine: the
Ctrl-C check saw candidate c2 serve the base unit). tune_profile given with -e passes the guard."""
import json
import os
import pathlib
import subprocess
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROFILE = {"model": "/nonexistent-model", "platform": "cpu", "max_model_len": 1024}


def _run_tune(tmp_path, venv_bin, installed_collection, extra):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"vllm_hosts": {"hosts": {"local-test": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(installed_collection), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run(
        [str(venv_bin / "ansible-playbook"), "-i", str(inventory), str(ROOT / "playbooks" / "tune.yml"),
         "-e", json.dumps(dict(extra, ansible_become=False, _tune_dir=str(tmp_path / "tune")))],
        capture_output=True, text=True, env=env, check=False, timeout=300)
    return proc.returncode, proc.stdout + proc.stderr


def test_vllm_profile_as_extra_var_is_refused_by_name(tmp_path, venv_bin, installed_collection):
    rc, out = _run_tune(tmp_path, venv_bin, installed_collection, {"vllm_profile": PROFILE})
    assert rc != 0, out[-3000:]
    assert "vllm_profile is given as an extra var (-e)" in out, out[-3000:]
    assert "Pass the base profile as tune_profile instead" in out, out[-3000:]
    assert "Restore the units an interrupted tune left" not in out  # refused before the first host task


def test_tune_profile_as_extra_var_passes_the_guard(tmp_path, venv_bin, installed_collection):
    rc, out = _run_tune(tmp_path, venv_bin, installed_collection, {"tune_profile": PROFILE})
    assert "vllm_profile is given as an extra var" not in out, out[-3000:]
    # past the guard: the next step reads the model's config.json, which this test host does not have
    assert "Read the model's config.json" in out, out[-3000:]
    assert rc != 0 and "/nonexistent-model/config.json" in out, out[-3000:]


def test_an_inventory_without_a_folder_needs_a_named_winner_file(tmp_path, venv_bin, installed_collection):
    """Issue 43 class 3: with `-i HOST,` the winner file has no inventory folder to go to; it never lands beside
    the playbook (or in a folder named "None"): the play stops before the first host task and names the fix."""
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(installed_collection), ANSIBLE_NOCOLOR="1")
    extra = {"tune_profile": PROFILE, "tune_hosts": "all", "ansible_connection": "local", "ansible_become": False,
             "ansible_python_interpreter": sys.executable, "_tune_dir": str(tmp_path / "tune")}
    proc = subprocess.run([str(venv_bin / "ansible-playbook"), "-i", "local-test,", str(ROOT / "playbooks" / "tune.yml"),
                           "-e", json.dumps(extra)], capture_output=True, text=True, env=env, check=False, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and 'tune_vars_file is \\"\\"' in out, out[-3000:]
    assert "-e tune_vars_file=/path/to/host_vars/local-test/vllm_tuned.yml" in out, out[-3000:]
    assert "Restore the units an interrupted tune left" not in out
