# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The report: the results directory's name, the Markdown table (client figures from vLLM's result
JSON beside the engine's from /metrics), and the regression verdict against a baseline run.

The client figures are vLLM's own keys, copied, never recomputed: ``vllm bench serve`` writes
``request_throughput``, ``request_goodput``, ``output_throughput``, ``max_concurrent_requests`` and
``p{50,90,99}_{ttft,tpot,itl,e2el}_ms`` (vllm/benchmarks/serve.py, ``benchmark``). A length mix's
per-class rows come from mix.py's split of vLLM's own per-request lists of the same result.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.vllm.plugins.module_utils.bench import failures, slo
from ansible_collections.gpufleet.vllm.plugins.module_utils.bench.errors import BenchError

# vLLM result keys kept in the summary of each point (the raw result keeps every key).
SUMMARY_KEYS = ("completed", "failed", "duration", "request_throughput", "request_goodput", "output_throughput",
                "total_token_throughput", "max_concurrent_requests",
                "mean_ttft_ms", "p50_ttft_ms", "p90_ttft_ms", "p99_ttft_ms",
                "mean_tpot_ms", "p50_tpot_ms", "p90_tpot_ms", "p99_tpot_ms",
                "mean_itl_ms", "p50_itl_ms", "p90_itl_ms", "p99_itl_ms",
                "p50_e2el_ms", "p90_e2el_ms", "p99_e2el_ms")
# Regression figures: (vLLM key, "higher is worse" | "lower is worse")
REGRESSION = {"p90_ttft_ms": "higher", "p99_ttft_ms": "higher", "p90_itl_ms": "higher",
              "p90_tpot_ms": "higher", "output_throughput": "lower", "request_throughput": "lower"}
_SAFE = re.compile(r"[^A-Za-z0-9_.+-]+")


def run_dir_name(host, instance, version, plan_hash, stamp):
    """``<host>_<instance>_vllm-<version>_plan-<hash>_<UTC stamp>``, one path component, safe characters."""
    parts = [host, instance, "vllm-%s" % version, "plan-%s" % plan_hash, stamp]
    return "_".join(_SAFE.sub("-", str(p)).strip("-") or "none" for p in parts)


def summary(result):
    """The summary figures of one vLLM result (missing keys None)."""
    return dict((key, result.get(key)) for key in SUMMARY_KEYS)


def _fmt(value, digits=1):
    if value is None:
        return "-"
    if isinstance(value, float):
        return ("%." + str(digits) + "f") % value
    return str(value)


def _engine_cells(engine):
    hit = engine.get("prefix_cache_hit_rate")
    kv = engine.get("peak_kv_usage")
    spec = engine.get("spec_decode_acceptance_rate")
    return [_fmt(None if hit is None else hit * 100.0), _fmt(None if kv is None else kv * 100.0, 2),
            _fmt(engine.get("peak_running"), 0), _fmt(engine.get("preemptions"), 0),
            _fmt(engine.get("queue_time_mean_ms"), 2), "-" if spec is None else _fmt(spec * 100.0)]


HEADER = ["workload", "via", "conc.", "req/s", "goodput req/s", "out tok/s", "TTFT p50/p90/p99 ms",
          "ITL p50/p90/p99 ms", "TPOT p90 ms", "req. in busiest s (vLLM)", "prefix hit %", "peak KV %",
          "peak running (engine)", "preempt.", "queue ms", "spec accept %", "failed/sent", "truncated",
          "aborted (engine)"]


def _failure_cells(point):
    """failed/sent (vLLM's own counts), outputs shorter than asked, requests the engine aborted."""
    found = failures.of_point(point)
    aborted = [v for v in (found.get("aborted"), found.get("errored")) if v is not None]
    return ["%d/%d" % (found["failed"], found["sent"]), _fmt(found["truncated"], 0),
            _fmt(sum(aborted), 0) if aborted else "-"]


def table_rows(points):
    """One Markdown row per benchmark point."""
    rows = []
    for p in points:
        r = p.get("result") or {}
        rows.append([p["workload"], p["target"], str(p["concurrency"]), _fmt(r.get("request_throughput"), 2),
                     _fmt(r.get("request_goodput"), 2), _fmt(r.get("output_throughput")),
                     "/".join(_fmt(r.get("p%d_ttft_ms" % q)) for q in (50, 90, 99)),
                     "/".join(_fmt(r.get("p%d_itl_ms" % q)) for q in (50, 90, 99)),
                     _fmt(r.get("p90_tpot_ms")), _fmt(r.get("max_concurrent_requests"), 0)]
                    + _engine_cells(p.get("engine") or {}) + _failure_cells(p))
    return rows


def check_points(points, where):
    """Refuse points that are not vllm_bench's (a hand-edited or truncated results.json): BenchError naming
    ``where`` (the file or option) and the point."""
    if not isinstance(points, list):
        raise BenchError("%s: points must be a list of vllm_bench points, not %s." % (where, type(points).__name__),
                         file=where)
    for i, p in enumerate(points):
        here = "%s points[%d]" % (where, i)
        if not isinstance(p, dict) or not all(k in p for k in ("workload", "target", "concurrency", "result")):
            raise BenchError("%s is not a vllm_bench point (workload, target, concurrency, result): give the points "
                             "of gpufleet.vllm.vllm_bench or an earlier report's results.json." % here, file=where)
        if isinstance(p["concurrency"], bool) or not isinstance(p["concurrency"], int):
            raise BenchError("%s: concurrency is %r, not a whole number." % (here, p["concurrency"]), file=where)
        failures.check_result(p["result"], "%s.result" % here, SUMMARY_KEYS[2:])
    return points


CLASS_HEADER = ["workload", "via", "conc.", "class", "requests ok/failed/truncated", "prompt tok", "out tok",
                "TTFT mean/p50/p90/p99 ms", "TPOT p50/p90 ms", "ITL p90 ms", "E2EL p50/p90/p99 ms"]


def class_rows(points):
    """One Markdown row per class of each length-mix point (mix.py's split of vLLM's per-request output)."""
    rows = []
    for p in points:
        for c in p.get("classes") or []:
            rows.append([p["workload"], p["target"], str(p["concurrency"]), c["name"],
                         "%d/%d/%s" % (c["completed"], c["failed"], _fmt(c.get("truncated"), 0)), str(c["input_len"]),
                         str(c["output_len"]),
                         "/".join(_fmt(c.get(k)) for k in ("mean_ttft_ms", "p50_ttft_ms", "p90_ttft_ms", "p99_ttft_ms")),
                         "/".join(_fmt(c.get(k)) for k in ("p50_tpot_ms", "p90_tpot_ms")), _fmt(c.get("p90_itl_ms")),
                         "/".join(_fmt(c.get("p%d_e2el_ms" % q)) for q in (50, 90, 99))])
    return rows


def _table(header, rows):
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(r) + " |" for r in rows]


def markdown_table(points):
    """The client and engine figures side by side, one row per (workload, target, concurrency); below it,
    for a length mix, one row per class (short vs long TTFT in the same run)."""
    lines = _table(HEADER, table_rows(points))
    per_class = class_rows(points)
    if per_class:
        lines += ["", "Length mix, per class (vLLM's per-request output of the same run, --save-detailed):", ""]
        lines += _table(CLASS_HEADER, per_class)
    return "\n".join(lines)


def _key(point):
    return (point["workload"], point["target"], point["concurrency"])


def _pairs(old, point):
    """(figure, baseline, measured, worse) of a point and its baseline: vLLM's run figures, and for a length
    mix each class's latency figures (``short:p90_ttft_ms``)."""
    out = [(f, old["result"].get(f), point["result"].get(f), w) for f, w in sorted(REGRESSION.items())]
    before = dict((c["name"], c) for c in old.get("classes") or [])
    for c in point.get("classes") or []:
        if c["name"] in before:
            out += [("%s:%s" % (c["name"], f), before[c["name"]].get(f), c.get(f), w)
                    for f, w in sorted(REGRESSION.items()) if f.endswith("_ms")]
    return out


def regression(baseline_points, points, threshold_pct):
    """Compare each point with the same (workload, target, concurrency) of a baseline run.

    A figure worse by more than ``threshold_pct`` percent is a regression. Returns
    {regressed, compared, findings: [{workload, target, concurrency, figure, baseline, measured, change_pct}]}.
    """
    if isinstance(threshold_pct, bool) or not isinstance(threshold_pct, (int, float)) or threshold_pct <= 0:
        raise BenchError("bench_regression_threshold_pct must be a number > 0 (percent), not %r." % (threshold_pct,))
    base = dict((_key(p), p) for p in baseline_points or [])
    findings, compared = [], 0
    for point in points:
        old = base.get(_key(point))
        if old is None:
            continue
        compared += 1
        for figure, before, after, worse in _pairs(old, point):
            if not before or after is None:
                continue
            if not (slo.finite(before) and slo.finite(after)):  # NaN/inf: never "no regression"
                findings.append(dict(workload=point["workload"], target=point["target"],
                                     concurrency=point["concurrency"], figure=figure, baseline=before,
                                     measured=after, change_pct=None))
                continue
            change = 100.0 * (after - before) / before
            if (change if worse == "higher" else -change) > threshold_pct:
                findings.append(dict(workload=point["workload"], target=point["target"],
                                     concurrency=point["concurrency"], figure=figure, baseline=before,
                                     measured=after, change_pct=round(change, 1)))
    if baseline_points and not compared:
        raise BenchError("The baseline run has no point with the same workload, target and concurrency as this "
                         "run: benchmark with the same gpufleet_workloads before and after the change.")
    return dict(regressed=bool(findings), compared=compared, findings=findings)
