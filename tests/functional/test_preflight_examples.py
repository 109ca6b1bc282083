# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/preflight.yml plans every example inventory from its declared hardware (--tags plan) with
zero errors and prints the plan table and the command lines. Runs against this machine with a local
connection: the planner is pure, and the model directory holds only the fixture config.json."""
import os
import pathlib
import shutil
import subprocess
import sys

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p.name for p in (ROOT / "inventories" / "examples").iterdir() if (p / "hosts.yml").exists())


# The commit the user pins after plan.yml printed it (any 40 hex characters: preflight only checks the form).
PINNED = "0123456789abcdef0123456789abcdef01234567"


def run_preflight(inventory, model_dir, venv_bin, collections, revision=PINNED):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections), ANSIBLE_NOCOLOR="1",
               ANSIBLE_ROLES_PATH=str(ROOT / "roles"))
    return subprocess.run(
        [str(venv_bin / "ansible-playbook"), "-i", str(inventory), str(ROOT / "playbooks" / "preflight.yml"),
         "--tags", "plan", "--check",
         "-e", "ansible_connection=local", "-e", f"ansible_python_interpreter={sys.executable}",
         "-e", "ansible_become=false", "-e", f"gpufleet_model_dir={model_dir}",
         "-e", f"gpufleet_model_revision={revision}"],
        capture_output=True, text=True, env=env, check=False, timeout=600,
    )


@pytest.mark.parametrize("example", EXAMPLES)
def test_example_inventory_plans_in_preflight(example, tmp_path, venv_bin, installed_collection):
    inventory = ROOT / "inventories" / "examples" / example
    group_vars = yaml.safe_load((inventory / "group_vars" / "all.yml").read_text())
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    fixture = ROOT / "tests" / "fixtures" / "model-configs" / (group_vars["gpufleet_model_id"].replace("/", "__") + ".config.json")
    shutil.copy(fixture, model_dir / "config.json")
    proc = run_preflight(inventory, model_dir, venv_bin, installed_collection)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "Preflight passed" in out
    assert "GPU KV cache size" in out or "kv_cache_tokens" in out or "KV" in out
    assert f"vllm serve {model_dir}" in out, out[-4000:]
    nodes = group_vars["gpufleet_serving"].get("nodes", 1)
    if nodes > 1:  # one instance over several hosts: a command per host, rank 0 first, the others headless
        for rank in range(nodes):
            assert f"--node-rank {rank} --master-addr" in out, out[-4000:]
        assert "node 1 (headless):" in out and "--headless" in out


def test_preflight_reports_plan_errors(tmp_path, venv_bin, installed_collection):
    """A profile vLLM would reject makes the preflight fail with the planner's findings listed."""
    inventory = tmp_path / "inv"
    (inventory / "group_vars").mkdir(parents=True)
    shutil.copy(ROOT / "inventories" / "examples" / "a100x2" / "hosts.yml", inventory / "hosts.yml")
    group_vars = yaml.safe_load((ROOT / "inventories" / "examples" / "a100x2" / "group_vars" / "all.yml").read_text())
    group_vars["gpufleet_serving"]["tensor_parallel_size"] = 3  # does not divide the attention heads
    (inventory / "group_vars" / "all.yml").write_text(yaml.safe_dump(group_vars))
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    shutil.copy(ROOT / "tests" / "fixtures" / "model-configs" / (group_vars["gpufleet_model_id"].replace("/", "__") + ".config.json"),
                model_dir / "config.json")
    proc = run_preflight(inventory, model_dir, venv_bin, installed_collection)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "Plan:" in out and "tensor_parallel_size" in out, out[-4000:]


def test_preflight_reports_the_unpinned_revision(tmp_path, venv_bin, installed_collection):
    """The finding site.yml stops on before any change, reported by preflight with the plan still shown."""
    inventory = ROOT / "inventories" / "examples" / "h100x4"
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    shutil.copy(ROOT / "tests" / "fixtures" / "model-configs" / "Qwen__Qwen3-32B.config.json", model_dir / "config.json")
    proc = run_preflight(inventory, model_dir, venv_bin, installed_collection, revision="")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "Inventory: Inventory of gpuh100-01, nothing was changed: gpufleet_model_revision is" in out, out[-3000:]
    assert f"vllm serve {model_dir}" in out
