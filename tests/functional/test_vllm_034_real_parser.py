# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""issue 45: what the planner renders for vLLM 0.34.0 is accepted by the REAL 0.34.0 on CPU (its own parser,
validate_parsed_serve_args, AsyncEngineArgs.from_cli_args, create_engine_config), and the fixtures the unit
tests read (tests/fixtures/vllm-0.34.0) are what 0.34.0 says today: its flags and KV defaults, parser registries,
route table with sleep mode on, and its extensible KV sizing on the real 0.26.0 H200 terms.

The venv: scripts/vllm-venv.sh with GPUFLEET_VLLM_OVERLAY_ON=0.33.0 (the 0.34.0 wheel alone, ~240 MB, over the
0.33.0 parser venv: both pin torch 2.14.0). Every question to 0.34.0 goes in ONE process (vllm_batch.py: importing
vLLM costs 15-20 s of CPU a time), asked once per run (the asked034 fixture). Skipped ONLY when GPUFLEET_SKIP_VLLM=1.
"""
from __future__ import absolute_import, division, print_function

import json
import os
import subprocess

import pytest
import yaml

from test_vllm_argv_real_parser import EXAMPLES, ROOT, ask_once, collection_path, config_only_dir  # pylint: disable=unused-import  # noqa: F401

V034 = os.path.join(ROOT, "tests", "fixtures", "vllm-0.34.0")
ACC = os.path.join(ROOT, "tests", "fixtures", "gpu-acceptance", "graphs-0.26.0", "cases")
ENV = dict(os.environ, VLLM_TARGET_DEVICE="cpu", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")

pytestmark = pytest.mark.skipif(os.environ.get("GPUFLEET_SKIP_VLLM") == "1", reason="GPUFLEET_SKIP_VLLM=1")


def vllm034_python():
    env = dict(os.environ, GPUFLEET_VLLM_VERSION="0.34.0", GPUFLEET_VLLM_OVERLAY_ON="0.33.0")
    out = subprocess.run([os.path.join(ROOT, "scripts", "vllm-venv.sh")], stdout=subprocess.PIPE, check=True,
                         universal_newlines=True, timeout=3000, env=env)
    return out.stdout.strip().splitlines()[-1]


def _fixture(name):
    with open(os.path.join(V034, name)) as fh:
        return json.load(fh)


def _example_plans(tmp_path, **override):
    from ansible_collections.gpufleet.vllm.plugins.module_utils.plan.planner import build_plan
    out = []
    for name in EXAMPLES:
        with open(os.path.join(ROOT, "inventories", "examples", name, "group_vars", "all.yml")) as fh:
            gv = yaml.safe_load(fh)
        model = config_only_dir(tmp_path, gv["gpufleet_model_id"])
        with open(os.path.join(model, "config.json")) as fh:
            raw = json.load(fh)
        p = dict(gv["gpufleet_serving"], gpus=gv["gpufleet_hardware"], vllm_version="0.34.0", **override)
        out.append((name, p, build_plan(p, raw, model)))
    return out


def _batch(python, jobs):
    """{name: the job's JSON answer} - every job in one vLLM 0.34.0 process (vllm_batch.py)."""
    proc = subprocess.run([python, os.path.join(ROOT, "tests", "functional", "vllm_batch.py")],
                          input=json.dumps({"jobs": [job for _name, job in jobs]}), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, env=ENV, timeout=1800, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = {}
    for (name, _job), res in zip(jobs, json.loads(proc.stdout.strip().splitlines()[-1])):
        assert res["rc"] == 0, (name, res["error"], res["stdout"][-2000:])
        out[name] = json.loads(res["stdout"].strip().splitlines()[-1])
    return out


@pytest.fixture(scope="session")
def asked034(collection_path, tmp_path_factory, worker_id):
    """Everything the tests ask vLLM 0.34.0, asked once per run (test_vllm_argv_real_parser.ask_once)."""
    return ask_once(tmp_path_factory, worker_id, "vllm-0.34.0", _ask034)


def _ask034(tmp):
    """The answers of one vLLM 0.34.0 process, with what the tests need beside them."""
    from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import vllm_args as va
    argvs, expect = [], []
    for name, p, result in _example_plans(tmp):
        assert [f for f in result["findings"] if f["level"] == "error"] == [], name
        for inst in result["instances"]:
            for argv in [n["argv"] for n in inst.get("nodes") or []] or [inst["argv"]]:
                argvs.append(argv)
                expect.append((name, p, result["capacity"]))
    ((_n, _p, sleep),) = [x for x in _example_plans(tmp, enable_sleep_mode=True) if x[0] == "h200x8"]
    sleep_argv = sleep["instances"][0]["argv"]
    removed = [["vllm", "serve", sleep_argv[2], flag, "1"] for flag in sorted(va.REMOVED_FLAGS)]
    model = config_only_dir(tmp, "Qwen/Qwen3-14B")
    sizing_cases = []
    for case_id in sorted(set(r["id"] for r in _fixture("extensible-sizing.json")["results"])):
        with open(os.path.join(ACC, case_id + ".engine.log")) as fh:
            sizing_cases.append({"id": case_id, "log": fh.read()})
    answers = _batch(vllm034_python(), [
        ("examples", {"script": "vllm_argv_check.py", "stdin": json.dumps({"argvs": argvs})}),
        ("sleep", {"script": "vllm_argv_check.py", "stdin": json.dumps({"argvs": [sleep_argv] + removed})}),
        ("flags", {"script": "vllm_serve_flags.py"}),
        ("routes_sleep", {"script": "vllm_routes_dump.py", "args": [model, "--enable-sleep-mode"]}),
        ("routes", {"script": "vllm_routes_dump.py", "args": [model]}),
        ("sizing", {"script": "vllm_extensible_sizing.py", "stdin": json.dumps({"cases": sizing_cases})}),
    ])
    answers["expect"] = expect
    return answers


def test_examples_planned_for_034_pass_its_parser_and_engine_config(asked034):
    report, expect = asked034["examples"], asked034["expect"]
    assert report["version"] == "0.34.0"
    assert len(report["results"]) == len(expect)
    for (name, p, cap), res in zip(expect, report["results"]):
        assert res["ok"], (name, res.get("error"), res.get("trace"))
        assert res["max_model_len"] == p["max_model_len"], name
        if p.get("cpu_offload_bytes") and res["kv_transfer"] is not None:   # the native flags, resolved by vLLM
            assert res["kv_transfer"]["kv_connector"] == "OffloadingConnector", name
            assert res["kv_transfer"]["extra"]["cpu_bytes_to_use"] == p["cpu_offload_bytes"], name
    # Dense models: 0.34.0's own config has the 64-token default block the planner counts in.
    dense = [(cap["block_size"], r["block_size"]) for (n, _p, cap), r in zip(expect, report["results"]) if n == "h200x8"]
    assert dense and all(planned == real == 64 for planned, real in dense), dense
    offloaded = [r for (_n, p, _c), r in zip(expect, report["results"]) if p.get("cpu_offload_bytes")]
    assert offloaded and all(r["kv_transfer"] for r in offloaded)


def test_sleep_mode_argv_and_removed_flags_on_034(asked034):
    report = asked034["sleep"]
    # create_engine_config refuses sleep mode on the CPU platform only ("not supported on current platform")
    first = report["results"][0]
    assert first["ok"] or "Sleep mode is not supported on current platform" in first["error"], first
    assert len(report["results"]) > 1 and all(not r["ok"] for r in report["results"][1:])


def test_fixtures_are_what_034_says(asked034):
    assert asked034["flags"] == _fixture("serve-flags.json")["0.34.0"]
    parsers, report = _fixture("parsers.json"), asked034["examples"]
    assert (report["tool_parsers"], report["reasoning_parsers"]) == (parsers["tool_parsers"], parsers["reasoning_parsers"])
    assert asked034["routes_sleep"] == _fixture("routes-sleep-mode.json")
    assert asked034["routes"] == _fixture("routes.json")
    got = asked034["sizing"]
    assert sorted(got["results"], key=json.dumps) == sorted(_fixture("extensible-sizing.json")["results"], key=json.dumps)
