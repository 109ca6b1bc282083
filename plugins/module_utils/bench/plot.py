# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The report's picture: latency against throughput over each workload's concurrency sweep (PNG).

matplotlib runs on the controller only (requirements-dev.txt pins it); without it the report says so
and everything else is written. Imported lazily: importing this file needs nothing.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def series(points):
    """(workload, target) -> [(output tok/s, p90 TTFT ms, p90 ITL ms, concurrency)] sorted by concurrency."""
    out = {}
    for p in points:
        r = p.get("result") or {}
        out.setdefault((p["workload"], p["target"]), []).append(
            (r.get("output_throughput"), r.get("p90_ttft_ms"), r.get("p90_itl_ms"), p["concurrency"]))
    return dict((k, sorted(v, key=lambda row: row[3])) for k, v in out.items())


def write_png(points, path, title):
    """Draw the sweep into ``path``. Returns "written" or why not (never raises for a missing library)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        from matplotlib import pyplot
    except ImportError as exc:
        return "not drawn: matplotlib is missing on the controller (%s); pip install -r requirements-dev.txt" % exc
    figure, axes = pyplot.subplots(1, 2, figsize=(11, 4.2))
    for (workload, target), rows in sorted(series(points).items()):
        rows = [r for r in rows if None not in r[:3]]
        if not rows:
            continue
        for axis, column in ((axes[0], 1), (axes[1], 2)):
            axis.plot([r[0] for r in rows], [r[column] for r in rows], marker="o", label="%s via %s" % (workload, target))
            for r in rows:
                axis.annotate("c=%d" % r[3], (r[0], r[column]), textcoords="offset points", xytext=(4, 4), fontsize=7)
    for axis, what in ((axes[0], "p90 TTFT (ms)"), (axes[1], "p90 ITL (ms)")):
        axis.set_xlabel("output throughput (tokens/s)")
        axis.set_ylabel(what)
        axis.grid(True, alpha=0.3)
    axes[0].legend(fontsize=7)
    figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    pyplot.close(figure)
    return "written"
