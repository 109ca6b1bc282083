# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""issue 45: what the planner renders for vLLM 0.34.0 is accepted by the REAL 0.34.0 on CPU (its own parser,
validate_parsed_serve_args, AsyncEngineArgs.from_cli_args, create_engine_config), and the fixtures the unit
tests read (tests/fixtures/vllm-0.34.0) are what 0.34.0 says today: its flags and KV defaults, parser registries,
route table with sleep mode on, and its extensible KV sizing on the real 0.26.0 H200 terms.

The venv: scripts/vllm-venv.sh with GPUFLEET_VLLM_OVERLAY_ON=0.33.0 (the 0.34.0 wheel alone, ~240 MB, over the
0.33.0 parser venv: both pin torch 2.14.0). Skipped ONLY when GPUFLEET_SKIP_VLLM=1.
"""
from __future__ import absolute_import, division, print_function

import json
import os
import subprocess

import pytest
import yaml

from test_vllm_argv_real_parser import EXAMPLES, ROOT, check, collection_path, config_only_dir  # pylint: disable=unused-import  # noqa: F401

V034 = os.path.join(ROOT, "tests", "fixtures", "vllm-0.34.0")
ACC = os.path.join(ROOT, "tests", "fixtures", "gpu-acceptance", "graphs-0.26.0", "cases")
ENV = dict(os.environ, VLLM_TARGET_DEVICE="cpu", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")

pytestmark = pytest.mark.skipif(os.environ.get("GPUFLEET_SKIP_VLLM") == "1", reason="GPUFLEET_SKIP_VLLM=1")


@pytest.fixture(scope="session")
def vllm034_python():
    env = dict(os.environ, GPUFLEET_VLLM_VERSION="0.34.0", GPUFLEET_VLLM_OVERLAY_ON="0.33.0")
    out = subprocess.run([os.path.join(ROOT, "scripts", "vllm-venv.sh")], stdout=subprocess.PIPE, check=True,
                         universal_newlines=True, timeout=3000, env=env)
    return out.stdout.strip().splitlines()[-1]


def _run(python, script, args=(), stdin=""):
    proc = subprocess.run([python, os.path.join(ROOT, "tests", "functional", script)] + list(args), input=stdin,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, env=ENV, timeout=900,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _fixture(name):
    with open(os.path.join(V034, name)) as fh:
        return json.load(fh)


def _example_plans(tmp_path, **override):
    from ansible_collections.gpufleet.vllm.plugins.module_utils.planner import build_plan
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


def test_examples_planned_for_034_pass_its_parser_and_engine_config(collection_path, vllm034_python, tmp_path):
    argvs, expect = [], []
    for name, p, result in _example_plans(tmp_path):
        assert [f for f in result["findings"] if f["level"] == "error"] == [], name
        for inst in result["instances"]:
            for argv in [n["argv"] for n in inst.get("nodes") or []] or [inst["argv"]]:
                argvs.append(argv)
                expect.append((name, p, result["capacity"]))
    report = check(vllm034_python, argvs)
    assert report["version"] == "0.34.0"
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


def test_sleep_mode_argv_and_removed_flags_on_034(collection_path, vllm034_python, tmp_path):
    from ansible_collections.gpufleet.vllm.plugins.module_utils import vllm_args as va
    ((_n, _p, result),) = [x for x in _example_plans(tmp_path, enable_sleep_mode=True) if x[0] == "h200x8"]
    argv = result["instances"][0]["argv"]
    model = argv[2]
    removed = [["vllm", "serve", model, flag, "1"] for flag in sorted(va.REMOVED_FLAGS)]
    report = check(vllm034_python, [argv] + removed)
    # create_engine_config refuses sleep mode on the CPU platform only ("not supported on current platform")
    first = report["results"][0]
    assert first["ok"] or "Sleep mode is not supported on current platform" in first["error"], first
    assert all(not r["ok"] for r in report["results"][1:])


def test_fixtures_are_what_034_says(collection_path, vllm034_python, tmp_path):
    flags = _run(vllm034_python, "vllm_serve_flags.py")
    assert flags == _fixture("serve-flags.json")["0.34.0"]
    report = check(vllm034_python, [])
    parsers = _fixture("parsers.json")
    assert (report["tool_parsers"], report["reasoning_parsers"]) == (parsers["tool_parsers"], parsers["reasoning_parsers"])
    model = config_only_dir(tmp_path, "Qwen/Qwen3-14B")
    assert _run(vllm034_python, "vllm_routes_dump.py", [model, "--enable-sleep-mode"]) == _fixture("routes-sleep-mode.json")
    assert _run(vllm034_python, "vllm_routes_dump.py", [model]) == _fixture("routes.json")
    sizing = _fixture("extensible-sizing.json")
    cases = []
    for case_id in sorted(set(r["id"] for r in sizing["results"])):
        with open(os.path.join(ACC, case_id + ".engine.log")) as fh:
            cases.append({"id": case_id, "log": fh.read()})
    got = _run(vllm034_python, "vllm_extensible_sizing.py", stdin=json.dumps({"cases": cases}))
    assert sorted(got["results"], key=json.dumps) == sorted(sizing["results"], key=json.dumps)
