# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The example inventories say what they serve, and a change to what one would serve shows in review.

Each example's plan table (gpufleet.vllm.plan, offline, from the example model's real config.json in
tests/fixtures/model-configs) is committed under tests/fixtures/examples/<example>.plan.txt. A change to the
planner, the releases table or an example that alters a plan fails here until the file is rewritten
(GPUFLEET_UPDATE_EXAMPLE_PLANS=1) and the diff is reviewed. Beside the table, the example's own words are
checked against each other: the model folder names the model, the quantization in the comment is the one the
plan loads, the context is the one the seed asked for.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from weights_support import ROOT, collections_path

EXAMPLES = os.path.join(ROOT, "inventories", "examples")
GOLDEN = os.path.join(ROOT, "tests", "fixtures", "examples")
CONFIGS = os.path.join(ROOT, "tests", "fixtures", "model-configs")
# example -> (the config.json fixture of its model, what the plan must say about the weights, the context
# the seed it stands for serves)
EXAMPLE_MODELS = {
    "a100x2": ("Qwen__Qwen3.6-27B.config.json", "bfloat16", 131072),
    "h100x4": ("Qwen__Qwen3-32B.config.json", "online fp8", 32768),
    "h200x8": ("Qwen__Qwen3-32B.config.json", "bfloat16", 32768),
    "h200x8x2": ("Qwen__Qwen3-235B-A22B.config.json", "bfloat16", 131072),
    "rtx4090x4": ("88plug__Qwen3.6-27B-W4A16.config.json", "compressed-tensors", 750000),
}


def example_vars(name):
    with open(os.path.join(EXAMPLES, name, "group_vars", "all.yml")) as handle:
        return yaml.safe_load(handle)


def plan_table(name):
    config = os.path.join(CONFIGS, EXAMPLE_MODELS[name][0])
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_path(), ANSIBLE_NOCOLOR="1",
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json")
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", os.path.join(EXAMPLES, name),
           "gpufleet.vllm.plan", "-e", "plan_model=" + config, "-e", "plan_offline=true",
           "-e", "ansible_python_interpreter=" + sys.executable]
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads(result.stdout)
    for task in report["plays"][0]["tasks"]:
        if task["task"]["name"].startswith("Show the plan"):
            return "\n".join(task["hosts"]["localhost"]["msg"]) + "\n"
    raise AssertionError("plan.yml printed no plan for %s" % name)


def test_every_example_has_a_model_fixture():
    assert sorted(os.listdir(EXAMPLES)) == sorted(EXAMPLE_MODELS)


@pytest.mark.parametrize("name", sorted(EXAMPLE_MODELS))
def test_example_plan_matches_the_committed_table(name):
    table = plan_table(name)
    path = os.path.join(GOLDEN, name + ".plan.txt")
    if os.environ.get("GPUFLEET_UPDATE_EXAMPLE_PLANS") == "1":
        os.makedirs(GOLDEN, exist_ok=True)
        with open(path, "w") as handle:
            handle.write(table)
    with open(path) as handle:
        assert table == handle.read(), "the plan of inventories/examples/%s changed: review, then rewrite %s" % (name, path)
    weights_word, context = EXAMPLE_MODELS[name][1:]
    assert weights_word in table, "%s: the plan does not load %s weights:\n%s" % (name, weights_word, table)
    assert "--max-model-len %d " % context in table
    assert "ERROR" not in table


@pytest.mark.parametrize("name", sorted(EXAMPLE_MODELS))
def test_example_names_agree(name):
    """The model folder names the repository's model, and the release is one variable (vllm_version)."""
    data = example_vars(name)
    repo_name = data["gpufleet_model_id"].split("/")[-1]
    assert data["gpufleet_model_dir"].rstrip("/").split("/")[-1] == repo_name, data["gpufleet_model_dir"]
    assert "vllm_version" not in data["gpufleet_serving"], "set vllm_version once, at the top level"
    assert "vllm_version" in data
    assert data["gpufleet_model_revision"] == "", "the user pins the commit plan.yml prints"
    header = open(os.path.join(EXAMPLES, name, "group_vars", "all.yml")).read().split("gpufleet_model_id")[0]
    if "W4A16" in header:
        assert "W4A16" in data["gpufleet_model_id"]
