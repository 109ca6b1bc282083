# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The tune report: one table of every candidate (planned figures, measured figures, verdict), the winner, the
launch count (failed / OOM among the candidates the planner passed), and the Pareto picture (PNG, lazily)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def _num(value, digits=4):
    return "-" if value is None else ("%.*g" % (digits, value))


def _by_workload(s):
    per = s.get("by_workload") or {}
    return "; ".join("%s %s" % (name, _num(per[name]["score"])) for name in sorted(per)) or "-"


def table(scored, pareto_ids):
    head = ["| candidate | flags | planned concurrency at the workload's length | status | score (median) | range | "
            "per workload | output tok/s per GPU | per-request tok/s | p90 TTFT ms | start s | Pareto | verdict |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    rows = []
    for s in scored:
        planned = (s.get("planned") or {}).get("concurrency_at_length")
        rows.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            s["id"], s.get("label", ""), "-" if planned is None else planned, s.get("status"), _num(s.get("score")),
            "-" if s.get("low") is None else "%s-%s" % (_num(s["low"]), _num(s["high"])), _by_workload(s),
            _num(s.get("output_tps_per_gpu")), _num(s.get("request_tps")), _num(s.get("p90_ttft_ms")),
            _num(s.get("ready_seconds")), "yes" if s["id"] in pareto_ids else "", (s.get("reason") or "").replace("|", "/")))
    return "\n".join(head + rows)


def launch_counts(scored):
    """Among the candidates the planner passed: launched, failed to come up, of which OOM."""
    passed = [s for s in scored if s.get("status") not in ("skipped",)]
    failed = [s for s in passed if s.get("status") == "failed"]
    oom = [s for s in failed if "out of memory" in (s.get("reason") or "").lower() or "outofmemory" in (s.get("reason") or "").lower()]
    return dict(planner_passed=len(passed), failed_launches=len(failed), oom_launches=len(oom),
                skipped=len([s for s in scored if s.get("status") == "skipped"]))


def markdown(doc):
    counts = doc["counts"]
    lines = ["# Tune of %s" % doc["host"], "",
             "vLLM %s, model %s, GPU %s, base plan %s, inputs %s. Score: %s, median of %d repeat(s), noise band +-%s %%."
             % (doc["vllm_version"], doc["model"], doc["gpu_type"], doc["plan_hash"], doc["inputs_hash"], doc["metric"],
                doc["repeats"], doc["noise_pct"]), "",
             "Grid: %s." % ("; ".join(doc.get("grid_why") or []) or "tune_grid as given"), "",
             table(doc["candidates"], doc["pareto"]), "",
             "**Winner: %s** - %s." % (doc["decision"]["winner"], doc["decision"]["reason"]),
             "Within noise of the best: %s." % (", ".join(doc["decision"]["within_noise_of_best"]) or "none"),
             "Lossy candidates (tune_allow_lossy; their answers differ from the model's): %s." % (
                 ", ".join("%s: %s" % (c["id"], c["lossy"]) for c in doc["candidates"] if c.get("lossy")) or "none"),
             "Launches: %d candidate(s) passed the planner, %d failed to come up (%d out of memory); %d skipped by the planner."
             % (counts["planner_passed"], counts["failed_launches"], counts["oom_launches"], counts["skipped"]),
             "Pareto set (output tokens/s per GPU vs per-request tokens/s): %s. Picture: pareto.png (%s)." % (
                 ", ".join(doc["pareto"]) or "none", doc.get("plot", "-")), ""]
    return "\n".join(lines)


def write_png(scored, pareto_ids, path, title):
    """Throughput per GPU against per-request speed, one dot per measured candidate; "written" or why not."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        from matplotlib import pyplot
    except ImportError as exc:
        return "not drawn: matplotlib is missing on the controller (%s); pip install -r requirements-dev.txt" % exc
    rows = [s for s in scored if s.get("output_tps_per_gpu") is not None and s.get("request_tps") is not None]
    figure, axis = pyplot.subplots(figsize=(6.5, 4.2))
    for s in rows:
        axis.scatter([s["output_tps_per_gpu"]], [s["request_tps"]], marker="o" if s["id"] in pareto_ids else "x")
        axis.annotate(s["id"], (s["output_tps_per_gpu"], s["request_tps"]), textcoords="offset points", xytext=(4, 4), fontsize=7)
    axis.set_xlabel("output tokens/s per GPU")
    axis.set_ylabel("per-request tokens/s (1000 / median TPOT)")
    axis.grid(True, alpha=0.3)
    figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    pyplot.close(figure)
    return "written"
