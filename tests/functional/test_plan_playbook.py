# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/plan.yml answers the seeds' three hardware questions (4 x RTX 4090, 2 x A100 80GB, 4 x H100)
from config.json alone, offline, on the controller, and its figures equal the plan made once the
index (real metadata.total_size) is present."""
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "model-configs"
SEED_EXAMPLES = ["rtx4090x4", "a100x2", "h100x4"]


def run_plan(venv_bin, collections, *extra):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections), ANSIBLE_NOCOLOR="1",
               ANSIBLE_ROLES_PATH=str(ROOT / "roles"))
    return subprocess.run(
        [str(venv_bin / "ansible-playbook"), str(ROOT / "playbooks" / "plan.yml"),
         "-e", f"ansible_python_interpreter={sys.executable}", "-e", "plan_offline=true"] + list(extra),
        capture_output=True, text=True, env=env, check=False, timeout=600,
    )


def table_value(out, label):
    match = re.search(r'"%s\s+(.*?)",?$' % re.escape(label), out, re.M)
    assert match, out[-4000:]
    return match.group(1)


@pytest.mark.parametrize("example", SEED_EXAMPLES)
def test_plan_from_config_alone(example, tmp_path, venv_bin, installed_collection):
    inventory = ROOT / "inventories" / "examples" / example
    group_vars = yaml.safe_load((inventory / "group_vars" / "all.yml").read_text())
    config = FIXTURES / (group_vars["gpufleet_model_id"].replace("/", "__") + ".config.json")
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    shutil.copy(config, model_dir / "config.json")
    started = time.monotonic()
    proc = run_plan(venv_bin, installed_collection, "-i", str(inventory), "-e", f"plan_model={model_dir}")
    elapsed = time.monotonic() - started
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "GPU KV cache size" in table_value(out, "vLLM will log")
    assert "weights_estimated" in out  # config only: the weight figure is labelled an estimate
    assert f"vllm serve {group_vars['gpufleet_model_dir']} " in out  # the path the vllm role serves from
    assert elapsed < 120, elapsed  # seconds, not a download


def test_config_estimate_matches_plan_with_index(tmp_path, venv_bin, installed_collection):
    """The h100x4 seed case: config-only figures equal those planned from the index's total_size.

    The index here is a stand-in that carries only the real metadata.total_size of Qwen/Qwen3-32B
    (65524246528, tests/fixtures/model-configs/Qwen__Qwen3-32B.model.safetensors.index.PARTIAL.txt)."""
    inventory = ROOT / "inventories" / "examples" / "h100x4"
    outs = {}
    for kind in ("config", "index"):
        model_dir = tmp_path / kind
        model_dir.mkdir()
        shutil.copy(FIXTURES / "Qwen__Qwen3-32B.config.json", model_dir / "config.json")
        if kind == "index":
            (model_dir / "model.safetensors.index.json").write_text(
                json.dumps({"metadata": {"total_size": 65524246528}, "weight_map": {}}))
        proc = run_plan(venv_bin, installed_collection, "-i", str(inventory), "-e", f"plan_model={model_dir}")
        outs[kind] = proc.stdout + proc.stderr
        assert proc.returncode == 0, outs[kind][-4000:]
    assert "weights_estimated" in outs["config"] and "weights_estimated" not in outs["index"]
    assert table_value(outs["config"], "weights per GPU").endswith("(estimate from config.json)")
    assert table_value(outs["config"], "weights per GPU").split(" (")[0] == table_value(outs["index"], "weights per GPU")
    for label in ("KV memory per GPU", "block size", "vLLM will log"):
        assert table_value(outs["config"], label) == table_value(outs["index"], label), label


def test_online_fetches_only_config_and_index(tmp_path, venv_bin, installed_collection):
    """A model id: model_weights fetches config.json and the index from the (fake) hub, never a shard;
    the plan then uses the index's total (no estimate)."""
    pytest.importorskip("huggingface_hub")
    sys.path.insert(0, str(ROOT / "tests" / "functional"))
    from weights_support import FakeHub

    hub = FakeHub(lfs_threshold=4096)
    hub.add_commit("Qwen/Qwen3-32B", {
        "config.json": (FIXTURES / "Qwen__Qwen3-32B.config.json").read_bytes(),
        # Stand-in index: the real metadata.total_size of Qwen/Qwen3-32B, an empty weight_map.
        "model.safetensors.index.json": json.dumps({"metadata": {"total_size": 65524246528}, "weight_map": {}}).encode(),
        "model-00001-of-00017.safetensors": os.urandom(64 * 1024),
    })
    hub.start()
    try:
        cache = tmp_path / "cache"
        env_extra = ["-i", str(ROOT / "inventories" / "examples" / "h100x4"), "-e", "plan_offline=false",
                     "-e", "plan_model=Qwen/Qwen3-32B", "-e", f"plan_cache_dir={cache}", "-e", f"plan_hf_endpoint={hub.endpoint}"]
        proc = run_plan(venv_bin, installed_collection, *env_extra)
    finally:
        hub.stop()
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert sorted(p.name for p in cache.iterdir() if not p.name.startswith(".")) == ["config.json", "model.safetensors.index.json"]
    assert "weights_estimated" not in out and "GPU KV cache size" in out
    assert "vllm serve /srv/models/Qwen3-32B " in out
