# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/rollout.yml's benchmark gate: a bad gpufleet_rollout_bench is refused by name before anything
runs on a host, and the gate sits where a regression is rolled back (between the vllm role and the point
where the rollout calls the host upgraded). The gate itself runs on a real CPU engine in Molecule."""
import os
import pathlib
import subprocess
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_unknown_bench_mode_is_refused_by_name(tmp_path, venv_bin, installed_collection):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"vllm_hosts": {"hosts": {"local-test": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(installed_collection), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run(
        [str(venv_bin / "ansible-playbook"), "-i", str(inventory), str(ROOT / "playbooks" / "rollout.yml"),
         "-e", "gpufleet_rollout_bench=sometimes", "-e", "ansible_become=false"],
        capture_output=True, text=True, env=env, check=False, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert "gpufleet_rollout_bench is sometimes: use none" in out, out[-3000:]
    assert "Read the GPUs the plan is made from" not in out  # refused before the first host task


def _task_names(tasks):
    return [t.get("name", "") for t in tasks]


def test_gate_sits_between_the_upgrade_and_the_upgraded_mark():
    play = next(p for p in yaml.safe_load((ROOT / "playbooks" / "rollout.yml").read_text())
                if p["name"] == "Roll out vLLM in batches")
    block = next(t for t in play["tasks"] if "block" in t)
    names = _task_names(block["block"])
    before = next(i for i, n in enumerate(names) if n.startswith("Benchmark the host before"))
    upgrade = next(i for i, n in enumerate(names) if n.startswith("Upgrade / reconfigure"))
    after = next(i for i, n in enumerate(names) if n.startswith("Benchmark it again"))
    upgraded = next(i for i, n in enumerate(names) if n.startswith("Note that the upgrade passed"))
    # before runs on the drained host with the old version; after must fail BEFORE _rollout_stage becomes
    # 'upgraded', or the rescue would not roll the regression back.
    assert before < upgrade < after < upgraded
    gate = yaml.safe_load((ROOT / "playbooks" / "tasks" / "rollout_bench.yml").read_text())
    bench_vars = gate[0]["vars"]
    assert bench_vars["bench_front_door"] is False  # the host is drained: measure the instances
    assert "after" in bench_vars["bench_fail_on_regression"]
