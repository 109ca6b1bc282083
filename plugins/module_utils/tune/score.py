# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Scoring of the measured candidates: goodput under the SLOs, noise, the winner, the Pareto set.

Each repeat of a candidate is one bench role run (its results.json ``points``, vLLM's own result keys). Its
score is the sum over the points of ``request_goodput`` (requests/s that met the per-request ``goodput_*_ms``
thresholds, vLLM's ``--goodput``) when the SLO declares such thresholds, else of ``output_throughput``. The
candidate's score is the median over its repeats, its range [min, max] widened by ``noise_pct`` on each side
(one repeat has no spread of its own). Two candidates whose ranges overlap are within noise of each other.
A candidate that misses a latency SLO (``gpufleet_slo`` keys, bench/slo.py) in any repeat cannot win, nor one
below the defaults beyond noise on any single workload (its total may still be higher).
The winner must beat ``defaults`` beyond noise to be applied; otherwise the defaults stay.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.vllm.plugins.module_utils.bench import slo as slo_rules
from ansible_collections.gpufleet.vllm.plugins.module_utils.tune import grid as G


def metric(slo):
    """(vLLM result key summed per repeat, what it is)."""
    if any(k in (slo or {}) for k in ("goodput_ttft_ms", "goodput_tpot_ms", "goodput_e2el_ms")):
        return "request_goodput", "goodput (requests/s meeting the per-request SLOs)"
    return "output_throughput", "output throughput (tokens/s; no goodput_*_ms SLO declared)"


def median(values):
    ordered = sorted(values)
    n = len(ordered)
    if not n:
        return None
    return ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2.0


def _sum(points, key):
    values = [(p.get("result") or {}).get(key) for p in points]
    values = [v for v in values if v is not None]
    return sum(values) if values else None


def _mean(points, key):
    values = [(p.get("result") or {}).get(key) for p in points]
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def repeat_figures(points, key, gpus):
    """One repeat's score, output tokens/s per GPU and per-request decode speed (tokens/s, 1000 / p50 TPOT)."""
    tpot = _mean(points, "median_tpot_ms") or _mean(points, "p50_tpot_ms")
    output = _sum(points, "output_throughput")
    return dict(score=_sum(points, key), output_tps_per_gpu=None if output is None else output / float(gpus),
                request_tps=(1000.0 / tpot) if tpot else None,
                p90_ttft_ms=max([(p.get("result") or {}).get("p90_ttft_ms") or 0 for p in points] or [0]))


def workload_ranges(runs, key, band):
    """{workload: {score, low, high}}: each workload's sum of ``key`` per repeat, median and widened range."""
    per = {}
    for points in runs:
        sums = {}
        for point in points:
            value = (point.get("result") or {}).get(key)
            if value is not None:
                sums[point.get("workload")] = sums.get(point.get("workload"), 0.0) + value
        for name, value in sums.items():
            per.setdefault(name, []).append(value)
    return dict((name, dict(score=median(v), low=min(v) * (1 - band), high=max(v) * (1 + band))) for name, v in per.items())


def mark_workload_losses(scored):
    """A candidate below the defaults beyond noise on any workload cannot win, however it scores in total (a win on
    one workload must not hide a loss on another): its ``loses_on`` lists those workloads."""
    defaults = next((s for s in scored if s["id"] == "defaults" and s.get("eligible")), None)
    if defaults is None:
        return scored
    base = defaults.get("by_workload") or {}
    for s in scored:
        if s is defaults or not s.get("eligible"):
            continue
        losses = sorted(w for w, f in (s.get("by_workload") or {}).items() if w in base and f["high"] < base[w]["low"])
        if losses:
            s["loses_on"] = losses
            s["reason"] = ((s.get("reason") or "") + " below the defaults beyond noise on %s: cannot win"
                           % ", ".join(losses)).strip()
    return scored


def score_candidate(measured, slo, noise_pct):
    """Figures of one measured candidate: {id, status, score, low, high, repeats, ...}."""
    key = metric(slo)[0]
    out = dict(id=measured["id"], label=measured.get("label", measured["id"]), status=measured.get("status"),
               reason=measured.get("reason", ""), repeats=len(measured.get("runs") or []), planned=measured.get("planned") or {},
               lossy=G.lossy_reason(measured.get("overrides") or {}), ready_seconds=measured.get("ready_seconds"))
    if measured.get("status") != "measured" or not measured.get("runs"):
        out.update(score=None, low=None, high=None, eligible=False)
        return out
    gpus = int(measured.get("gpus") or 1)
    figures = [repeat_figures(points, key, gpus) for points in measured["runs"]]
    scores = [f["score"] for f in figures if f["score"] is not None]
    violations = []
    for points in measured["runs"]:  # max_error_rate (default 0) holds without an SLO too
        violations.extend(v["message"] for v in slo_rules.check(slo, points))
    band = noise_pct / 100.0
    out.update(score=median(scores), low=(min(scores) * (1 - band)) if scores else None,
               high=(max(scores) * (1 + band)) if scores else None, scores=scores,
               output_tps_per_gpu=median([f["output_tps_per_gpu"] for f in figures if f["output_tps_per_gpu"] is not None]),
               request_tps=median([f["request_tps"] for f in figures if f["request_tps"] is not None]),
               p90_ttft_ms=median([f["p90_ttft_ms"] for f in figures]),
               slo_violations=sorted(set(violations)), eligible=bool(scores) and not violations,
               by_workload=workload_ranges(measured["runs"], key, band))
    if violations:
        out["status"] = "misses SLO"
    return out


def within_noise(a, b):
    """Two scored candidates' widened ranges overlap."""
    if a.get("low") is None or b.get("low") is None:
        return False
    return a["low"] <= b["high"] and b["low"] <= a["high"]


def pareto(scored):
    """Ids of the measured candidates no other beats on both output tokens/s per GPU and per-request speed."""
    rows = [s for s in scored if s.get("output_tps_per_gpu") is not None and s.get("request_tps") is not None]
    front = []
    for s in rows:
        dominated = any(o is not s and o["output_tps_per_gpu"] >= s["output_tps_per_gpu"] and o["request_tps"] >= s["request_tps"]
                        and (o["output_tps_per_gpu"] > s["output_tps_per_gpu"] or o["request_tps"] > s["request_tps"]) for o in rows)
        if not dominated:
            front.append(s["id"])
    return front


def decide(scored):
    """{winner, apply, reason, best, within_noise_of_best}: the winner is applied only beyond noise of defaults."""
    eligible = [s for s in scored if s.get("eligible") and not s.get("loses_on")]
    defaults = next((s for s in scored if s["id"] == "defaults"), None)
    if not eligible:
        return dict(winner="defaults", apply=False, best=None, within_noise_of_best=[],
                    reason="no candidate was measured within the SLOs: vLLM's defaults stay")
    best = max(eligible, key=lambda s: (s["score"], s["id"] == "defaults"))
    close = sorted(s["id"] for s in scored if s is not best and within_noise(s, best))
    if best["id"] == "defaults":
        return dict(winner="defaults", apply=False, best="defaults", within_noise_of_best=close,
                    reason="vLLM's defaults scored best%s" % (" (%s within noise)" % ", ".join(close) if close else ""))
    if defaults is not None and defaults.get("eligible") and within_noise(best, defaults):
        return dict(winner="defaults", apply=False, best=best["id"], within_noise_of_best=close,
                    reason="%s scored %.4g against the defaults' %.4g, within noise (ranges %.4g-%.4g and %.4g-%.4g overlap): "
                    "the defaults stay" % (best["id"], best["score"], defaults["score"], best["low"], best["high"],
                                           defaults["low"], defaults["high"]))
    why = "the defaults missed the SLOs or failed" if defaults is None or not defaults.get("eligible") else \
        "%.4g against the defaults' %.4g, beyond noise" % (best["score"], defaults["score"])
    lossy = "; lossy: %s - check the model's accuracy before serving it" % best["lossy"] if best.get("lossy") else ""
    return dict(winner=best["id"], apply=True, best=best["id"], within_noise_of_best=close,
                reason="%s (%s) wins: %s%s" % (best["id"], best["label"], why, lossy))
