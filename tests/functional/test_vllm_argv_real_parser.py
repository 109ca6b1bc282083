# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The argv vllm_plan renders is accepted by the REAL pinned vLLM (the default release, releases.DEFAULT_RELEASE) on CPU: its own parser,
validate_parsed_serve_args, AsyncEngineArgs.from_cli_args and create_engine_config on a config-only
model directory (VLLM_TARGET_DEVICE=cpu, HF_HUB_OFFLINE=1). Covers every example inventory.

The venv comes from scripts/vllm-venv.sh (built once from the shared wheelhouse; ~4.6 GB download the
first time). Skipped ONLY when GPUFLEET_SKIP_VLLM=1.
"""
from __future__ import absolute_import, division, print_function

import json
import os
import subprocess
import sys

import filelock
import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "model-configs")
EXAMPLES = ("rtx4090x4", "a100x2", "h200x8", "h100x4", "h200x8x2")
sys.path.insert(0, os.path.join(ROOT, "plugins", "module_utils"))
from releases import DEFAULT_RELEASE  # noqa: E402 (a leaf: imports nothing of ours)

pytestmark = pytest.mark.skipif(os.environ.get("GPUFLEET_SKIP_VLLM") == "1", reason="GPUFLEET_SKIP_VLLM=1")


@pytest.fixture(scope="session")
def collection_path(tmp_path_factory):
    base = tmp_path_factory.mktemp("collections")
    os.makedirs(str(base / "ansible_collections" / "gpufleet"))
    os.symlink(ROOT, str(base / "ansible_collections" / "gpufleet" / "vllm"))
    sys.path.insert(0, str(base))
    return base


@pytest.fixture(scope="session")
def vllm_python():
    out = subprocess.run([os.path.join(ROOT, "scripts", "vllm-venv.sh")], stdout=subprocess.PIPE, check=True,
                         universal_newlines=True, timeout=3000)
    return out.stdout.strip().splitlines()[-1]


def check(vllm_python, argvs):
    env = dict(os.environ, VLLM_TARGET_DEVICE="cpu", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    proc = subprocess.run([vllm_python, os.path.join(ROOT, "tests", "functional", "vllm_argv_check.py")],
                          input=json.dumps({"argvs": argvs}), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, env=env, timeout=1200, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def config_only_dir(tmp_path, model_id):
    d = tmp_path / model_id.replace("/", "__")
    d.mkdir(exist_ok=True)
    with open(os.path.join(FIXTURES, model_id.replace("/", "__") + ".config.json")) as src:
        (d / "config.json").write_text(src.read())
    return str(d)


def plan_example(name, model_dir):
    from ansible_collections.gpufleet.vllm.plugins.module_utils.plan.planner import build_plan
    with open(os.path.join(ROOT, "inventories", "examples", name, "group_vars", "all.yml")) as fh:
        gv = yaml.safe_load(fh)
    with open(os.path.join(model_dir, "config.json")) as fh:
        raw = json.load(fh)
    p = dict(gv["gpufleet_serving"])
    p["gpus"] = gv["gpufleet_hardware"]
    return gv, build_plan(p, raw, model_dir)


def _example_argvs(tmp_path):
    """Every example's planned command lines (each host's, for a multi-host instance), with what each must parse to."""
    argvs, expect = [], []
    for name in EXAMPLES:
        with open(os.path.join(ROOT, "inventories", "examples", name, "group_vars", "all.yml")) as fh:
            model_id = yaml.safe_load(fh)["gpufleet_model_id"]
        gv, result = plan_example(name, config_only_dir(tmp_path, model_id))
        errors = [f for f in result["findings"] if f["level"] == "error"]
        assert errors == [], (name, errors)
        assert result["instances"], name
        for inst in result["instances"]:
            # a multi-host instance: every host's command line (node 0 serves, the others are --headless)
            for argv in [n["argv"] for n in inst.get("nodes") or []] or [inst["argv"]]:
                argvs.append(argv)
                expect.append((name, gv["gpufleet_serving"]["max_model_len"], result["capacity"]["block_size"]))
    return {"argvs": argvs, "expect": expect}


def _rule_argvs(tmp_path):
    """Removed flags, a max_model_len beyond the model's without YaRN, and the planner's YaRN argv for it."""
    from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import vllm_args as va
    from ansible_collections.gpufleet.vllm.plugins.module_utils.plan.planner import build_plan
    model = config_only_dir(tmp_path, "Qwen/Qwen3-14B")
    with open(os.path.join(model, "config.json")) as fh:
        raw = json.load(fh)
    base = ["vllm", "serve", model, "--max-model-len", "32768"]
    removed = {flag: base + [flag, "1"] for flag in ("--rope-theta", "--swap-space", "--num-scheduler-steps")}
    removed["--rope-scaling"] = base + ["--rope-scaling", '{"rope_type":"yarn","factor":4.0}']
    removed["--enable-reasoning"] = base + ["--enable-reasoning"]
    assert set(removed) == set(va.REMOVED_FLAGS)
    too_long = ["vllm", "serve", model, "--max-model-len", "131072"]
    p = dict(tensor_parallel_size=1, pipeline_parallel_size=1, instances="auto", kv_cache_dtype="auto",
             enable_prefix_caching=True, num_speculative_tokens=0, host="127.0.0.1", port_base=8000, extra_args=[],
             max_model_len=131072, yarn={"factor": 4.0, "original_max_position_embeddings": 32768},
             kv_cache_memory_bytes=8 * 1024 ** 3)
    yarn_argv = build_plan(p, raw, model)["instances"][0]["argv"]
    return {"argvs": list(removed.values()) + [too_long, yarn_argv], "removed": list(removed)}


def _ray_argvs(tmp_path):
    """The two-host example on Ray: the head's one command line (the worker gets none)."""
    from ansible_collections.gpufleet.vllm.plugins.module_utils.plan.planner import build_plan
    with open(os.path.join(ROOT, "inventories", "examples", "h200x8x2", "group_vars", "all.yml")) as fh:
        gv = yaml.safe_load(fh)
    model = config_only_dir(tmp_path, gv["gpufleet_model_id"])
    with open(os.path.join(model, "config.json")) as fh:
        raw = json.load(fh)
    p = dict(gv["gpufleet_serving"], gpus=gv["gpufleet_hardware"], distributed_executor_backend="ray")
    result = build_plan(p, raw, model)
    assert [f for f in result["findings"] if f["level"] == "error"] == []
    nodes = result["instances"][0]["nodes"]
    return {"argvs": [nodes[0]["argv"]], "workers": [n["argv"] for n in nodes[1:]],
            "max_model_len": gv["gpufleet_serving"]["max_model_len"]}


def ask_once(tmp_path_factory, worker_id, name, ask):
    """ask(tmp_folder) once per pytest run, its JSON answers shared by every worker: under pytest-xdist the first
    worker asks and writes them where every worker of this run reads them (its base folder's parent), under a file
    lock. Importing vLLM is most of a parser check's cost (test_vllm_034_real_parser.py uses it too)."""
    shared = tmp_path_factory.getbasetemp() if worker_id == "master" else tmp_path_factory.getbasetemp().parent
    answers = shared / ("%s-answers.json" % name)
    with filelock.FileLock(str(answers) + ".lock"):
        if not answers.is_file():
            answers.write_text(json.dumps(ask(tmp_path_factory.mktemp(name))))
    return json.loads(answers.read_text())


@pytest.fixture(scope="session")
def asked(collection_path, vllm_python, tmp_path_factory, worker_id):
    """Every command line the tests below ask the default release about, in ONE vLLM process per run
    (ask_once). {group: its inputs + results, "report": the rest of the checker's answer}."""
    def ask(tmp):
        groups = {"examples": _example_argvs(tmp), "rules": _rule_argvs(tmp), "ray": _ray_argvs(tmp)}
        report = check(vllm_python, [argv for group in groups.values() for argv in group["argvs"]])
        start = 0
        for group in groups.values():
            group["results"] = report["results"][start:start + len(group["argvs"])]
            start += len(group["argvs"])
        groups["report"] = dict((k, v) for k, v in report.items() if k != "results")
        return groups
    return ask_once(tmp_path_factory, worker_id, "vllm-default", ask)


def test_examples_plan_and_pass_real_parser(asked):
    expect, results = asked["examples"]["expect"], asked["examples"]["results"]
    assert asked["report"]["version"] == DEFAULT_RELEASE
    assert len(results) == len(expect)
    for (name, max_len, _block), res in zip(expect, results):
        assert res["ok"], (name, res.get("error"), res.get("trace"))
        assert res["max_model_len"] == max_len, name
    # Dense models: vLLM's own CPU config keeps the 16-token block the planner used.
    assert [r["block_size"] for (n, _max_len, _block), r in zip(expect, results) if n == "h200x8"] == [16] * 4


def test_planner_rules_match_real_vllm(asked):
    """Removed flags are rejected, a too-long max_model_len is rejected without YaRN and accepted with the
    planner's --hf-overrides, and the parser registries equal the names vllm_args knows."""
    from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import vllm_args as va
    removed, results = asked["rules"]["removed"], asked["rules"]["results"]
    assert len(results) == len(removed) + 2
    for flag, res in zip(removed, results):
        assert not res["ok"] and "argparse" in res["error"], flag
    assert not results[-2]["ok"] and "max_model_len" in results[-2]["error"]
    assert results[-1]["ok"], results[-1]
    assert results[-1]["max_model_len"] == 131072
    assert set(asked["report"]["tool_parsers"]) == set(va.TOOL_PARSERS)
    assert set(asked["report"]["reasoning_parsers"]) == set(va.REASONING_PARSERS)


def test_ray_backend_head_argv_passes_real_vllm(asked):
    """The two-host example on Ray (vllm_cluster_backend: ray): the head's one command line, with
    --distributed-executor-backend ray and no per-host launch flags, is what the default release accepts."""
    ray = asked["ray"]
    assert ray["workers"] == [[]]
    (res,) = ray["results"]
    assert res["ok"], (res.get("error"), res.get("trace"))
    assert res["tp"] == 8 and res["max_model_len"] == ray["max_model_len"]
