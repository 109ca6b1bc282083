# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""report.md: the page a person reads after a benchmark - what ran, the table, the canary, the probe,
the SLO verdict and the regression verdict."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.vllm.plugins.module_utils.bench import failures, report


def _peaks(doc):
    measured = [p.get("engine", {}).get("peak_running") for p in doc["points"]]
    measured = [m for m in measured if m is not None]
    client = [(p.get("result") or {}).get("max_concurrent_requests") for p in doc["points"]]
    client = [c for c in client if c is not None]
    return ("Concurrency: the plan predicts **%s** requests of max_model_len fit the KV cache; measured peak: "
            "%s running in the engine (vllm:num_requests_running, sampled), %s requests active in the busiest second "
            "(vLLM's max_concurrent_requests: per one-second bucket, not instantaneous)."
            % (doc.get("planned_concurrency") if doc.get("planned_concurrency") is not None else "(unknown)",
               int(max(measured)) if measured else "-", max(client) if client else "-"))


def _canary_lines(doc):
    lines = []
    for c in doc.get("canary") or []:
        lines.append("- canary on %s: **%s** - %s" % (c.get("target"), c.get("status"), c.get("message", "")))
    return lines or ["- canary: not run"]


def _probe_lines(doc):
    p = doc.get("probe") or {}
    if not p.get("ttft_s"):
        return ["- long-context probe: not run"]
    line = "- long-context probe via %s: %d prompt tokens + %d generated, TTFT %.3f s, whole response %.3f s" % (
        p["target"], p["prompt_tokens"], p["output_tokens"], p["ttft_s"], p["e2e_s"])
    finding = p.get("finding")
    return [line] + (["  - proxy timeout (%s): %s" % (finding["level"], finding["message"])] if finding else [])


def _failure_lines(doc):
    """One line per point where a request failed, came back short, or the engine aborted one."""
    lines = []
    for p in doc["points"]:
        found = failures.of_point(p)
        if found["failed"] or found.get("truncated") or found.get("aborted") or found.get("errored"):
            lines.append("- FAILURES on %s via %s at concurrency %d: %s" % (
                p["workload"], p["target"], p["concurrency"], failures.describe(found)))
    return lines


def _verdict_lines(doc):
    lines = _failure_lines(doc)
    for v in doc.get("slo_violations") or []:
        lines.append("- SLO MISSED: %s" % v["message"])
    if doc.get("slo") and not doc.get("slo_violations"):
        lines.append("- SLO: every objective holds (%s)" % ", ".join(
            "%s=%s" % (k, doc["slo"][k]) for k in sorted(doc["slo"])))
    verdict = doc.get("verdict") or {}
    if verdict.get("compared"):
        lines.append("- against the baseline: %s (%d points compared)" % (
            "REGRESSED" if verdict["regressed"] else "no regression", verdict["compared"]))
        for f in verdict["findings"]:
            lines.append("  - %s via %s at concurrency %d: %s %s -> %s (%s)" % (
                f["workload"], f["target"], f["concurrency"], f["figure"], f["baseline"], f["measured"],
                "not a finite number" if f["change_pct"] is None else "%+.1f %%" % f["change_pct"]))
    return lines


def render(doc):
    """The whole report.md."""
    head = ["# Benchmark of %s / %s" % (doc["host"], doc["instance"]), "",
            "vLLM %s, plan %s, %s (UTC). Client figures are vLLM's own `vllm bench serve` results; engine figures "
            "are the engines' /metrics over the same window." % (doc["vllm_version"], doc["plan_hash"], doc["stamp"]),
            "", report.markdown_table(doc["points"]), "", _peaks(doc), ""]
    body = _canary_lines(doc) + _probe_lines(doc) + _verdict_lines(doc)
    tail = ["", "Picture: latency-throughput.png (%s). Raw results: results.json." % doc.get("plot", "-"), ""]
    return "\n".join(head + body + tail)
