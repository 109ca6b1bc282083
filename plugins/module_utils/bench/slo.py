# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""SLOs as a gate (``gpufleet_slo``): each key against the figure vLLM's own result JSON reports for it.

Latency keys are upper bounds in milliseconds on vLLM's percentile keys (``p90_ttft_ms`` ...);
``min_goodput_rps`` and ``min_output_tps`` are lower bounds on ``request_goodput`` (requests/s that met
the per-request ``goodput_*_ms`` thresholds, vLLM's ``--goodput``) and ``output_throughput``.
``concurrency`` picks the sweep point the SLO holds at (default: every point), ``workloads`` the
workloads (default: all). The long-context workload is usually left out of a latency SLO.

A length mix (workloads.py ``mix``): its latency bounds hold for EACH class (short, long ...), on the
per-class figures mix.py reads from vLLM's per-request output, not on the whole run's percentiles (with
20 % long prompts, the run's p90 TTFT is a long prompt's). ``classes: {short: {ttft_p90_ms: 500}}`` gives a
class its own latency bounds, which then replace the top-level ones for that class (``{long: {}}``: no
latency bound on the long class). Throughput bounds (``min_*``) hold for the whole run.

``max_error_rate`` (default 0, whether or not an SLO is declared): the share of a point's requests that failed
(vLLM's ``failed``) or came back with fewer output tokens than asked (failures.py). It holds at EVERY point,
whatever ``concurrency``, ``workloads`` and ``targets`` pick for the other bounds: a point with a failed
request is not a pass, and the message names the workload (and a mix's class) and vLLM's error text.

A figure that is not a finite number (NaN, inf: a JSON result may carry them) never meets a bound, and a
bound must itself be a finite number.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

from ansible_collections.gpufleet.vllm.plugins.module_utils.bench import failures
from ansible_collections.gpufleet.vllm.plugins.module_utils.bench.errors import BenchError

# SLO key -> (vLLM result key, what it is, "max" | "min")
BOUNDS = {
    "ttft_p50_ms": ("p50_ttft_ms", "p50 TTFT (ms)", "max"),
    "ttft_p90_ms": ("p90_ttft_ms", "p90 TTFT (ms)", "max"),
    "ttft_p99_ms": ("p99_ttft_ms", "p99 TTFT (ms)", "max"),
    "tpot_p90_ms": ("p90_tpot_ms", "p90 TPOT (ms)", "max"),
    "tpot_p99_ms": ("p99_tpot_ms", "p99 TPOT (ms)", "max"),
    "itl_p90_ms": ("p90_itl_ms", "p90 ITL (ms)", "max"),
    "itl_p99_ms": ("p99_itl_ms", "p99 ITL (ms)", "max"),
    "e2el_p90_ms": ("p90_e2el_ms", "p90 end-to-end latency (ms)", "max"),
    "e2el_p99_ms": ("p99_e2el_ms", "p99 end-to-end latency (ms)", "max"),
    "min_goodput_rps": ("request_goodput", "goodput (requests/s)", "min"),
    "min_output_tps": ("output_throughput", "output throughput (tokens/s)", "min"),
}
ERROR_RATE = "max_error_rate"
OTHER_KEYS = ("concurrency", "workloads", "targets", "goodput_ttft_ms", "goodput_tpot_ms", "goodput_e2el_ms",
              "classes", ERROR_RATE)
LATENCY_KEYS = tuple(sorted(k for k, v in BOUNDS.items() if v[2] == "max"))


def finite(value):
    """A real number that is neither NaN nor infinite (bool is not a number here)."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and not math.isnan(value) \
        and not math.isinf(value)


def _number(key, value):
    if not finite(value) or value < 0:
        raise BenchError("gpufleet_slo.%s must be a number >= 0 (not NaN or inf), not %r." % (key, value))
    return value


def _validate_classes(classes, class_names):
    if not isinstance(classes, dict):
        raise BenchError("gpufleet_slo.classes must map a mix class to its bounds, e.g. {short: {ttft_p90_ms: 500}}, "
                         "not %r." % (classes,))
    for name, bounds in classes.items():
        where = "gpufleet_slo.classes.%s" % name
        if class_names is not None and name not in class_names:
            raise BenchError("%s: no workload's mix has a class %s (classes: %s): use one of those names."
                             % (where, name, ", ".join(sorted(class_names)) or "none, no workload has a mix"))
        if not isinstance(bounds, dict):
            raise BenchError("%s must be a mapping of latency bounds such as {ttft_p90_ms: 500}, not %r."
                             % (where, bounds))
        bad = sorted(set(bounds) - set(LATENCY_KEYS))
        if bad:
            raise BenchError("%s has key(s) %s: a class takes latency bounds only (%s); throughput bounds hold for "
                             "the whole run (top level)." % (where, ", ".join(bad), ", ".join(LATENCY_KEYS)))
        for key, value in bounds.items():
            _number("classes.%s.%s" % (name, key), value)


def validate_slo(slo, workload_names, class_names=None):
    """Check ``gpufleet_slo``: known keys, numbers, workloads (and mix classes, when known) that exist."""
    if slo in (None, ""):
        return {}
    if not isinstance(slo, dict):
        raise BenchError("gpufleet_slo must be a mapping such as {ttft_p90_ms: 500}, not %r." % (slo,))
    unknown = sorted(set(slo) - set(BOUNDS) - set(OTHER_KEYS))
    if unknown:
        raise BenchError("gpufleet_slo has unknown key(s) %s: use %s." % (
            ", ".join(unknown), ", ".join(sorted(BOUNDS) + sorted(OTHER_KEYS))))
    out = dict(slo)
    for key in list(BOUNDS) + ["goodput_ttft_ms", "goodput_tpot_ms", "goodput_e2el_ms", ERROR_RATE]:
        if key in out:
            _number(key, out[key])
    if out.get(ERROR_RATE, 0) > 1:
        raise BenchError("gpufleet_slo.max_error_rate is a share of the requests, 0 to 1 (0.01 = 1 %%), not %r."
                         % (out[ERROR_RATE],))
    if "min_goodput_rps" in out and not any(k.startswith("goodput_") for k in out):
        raise BenchError("gpufleet_slo.min_goodput_rps needs the per-request thresholds that define goodput: "
                         "set goodput_ttft_ms and/or goodput_tpot_ms (vLLM's --goodput).")
    names = out.get("workloads") or list(workload_names)
    missing = [n for n in names if n not in workload_names]
    if missing:
        raise BenchError("gpufleet_slo.workloads names %s, which are not workloads (%s)." % (
            missing, ", ".join(workload_names)))
    if "classes" in out:
        _validate_classes(out["classes"], class_names)
    if "concurrency" in out and (isinstance(out["concurrency"], bool) or not isinstance(out["concurrency"], int)):
        raise BenchError("gpufleet_slo.concurrency must be one concurrency of the sweep (a whole number).")
    return out


def _applies(slo, point):
    if slo.get("workloads") and point["workload"] not in slo["workloads"]:
        return False
    if slo.get("targets") and point["target"] not in slo["targets"]:
        return False
    return "concurrency" not in slo or point["concurrency"] == slo["concurrency"]


def _judged(slo, point):
    """(figures, {bound key: limit}, class name or None) for each set of figures of ``point`` the SLO judges."""
    limits = dict((k, slo[k]) for k in BOUNDS if k in slo)
    if not point.get("classes"):
        return [((point.get("result") or {}), limits, None)]
    whole = dict((k, v) for k, v in limits.items() if BOUNDS[k][2] == "min")
    out = [((point.get("result") or {}), whole, None)] if whole else []
    for figures in point["classes"]:
        own = (slo.get("classes") or {}).get(figures["name"])
        latency = own if own is not None else dict((k, v) for k, v in limits.items() if BOUNDS[k][2] == "max")
        out.append((figures, latency, figures["name"]))
    return out


def _violation(key, limit, measured, point, klass):
    what, kind = BOUNDS[key][1:]
    if finite(measured) and (measured <= limit if kind == "max" else measured >= limit):
        return None
    workload = point["workload"] + (" (class %s)" % klass if klass else "")
    shown = "(not reported)" if measured is None else round(measured, 3) if finite(measured) else \
        "%r (not a finite number)" % (measured,)
    message = "SLO %s %s %s missed: measured %s %s on workload %s via %s at concurrency %d" % (
        key, "<=" if kind == "max" else ">=", limit, what, shown, workload, point["target"], point["concurrency"])
    violation = dict(slo=key, limit=limit, measured=measured, workload=point["workload"], target=point["target"],
                     concurrency=point["concurrency"], message=message)
    violation["class"] = klass
    return violation


def _class_failures(point):
    """(names, descriptions) of a mix point's classes with a failed request."""
    names, parts = [], []
    for c in point.get("classes") or []:
        if c.get("failed"):
            names.append(c["name"])
            parts.append("class %s: %s" % (c["name"], failures.describe(dict(
                sent=c.get("requests", 0), failed=c.get("failed", 0), truncated=c.get("truncated"),
                errors=c.get("errors") or [], error_texts_saved=True))))
    return names, parts


def _error_violation(limit, point):
    """The max_error_rate violation of one point, naming the workload, the classes and vLLM's error texts."""
    found = failures.of_point(point)
    rate = found["error_rate"]
    if finite(rate) and rate <= limit:
        return None
    names, parts = _class_failures(point)
    message = "SLO max_error_rate <= %s missed: %s on workload %s via %s at concurrency %d%s" % (
        limit, failures.describe(found), point["workload"], point["target"], point["concurrency"],
        "".join("; " + p for p in parts))
    violation = dict(slo=ERROR_RATE, limit=limit, measured=rate, workload=point["workload"], target=point["target"],
                     concurrency=point["concurrency"], message=message, failed=found["failed"],
                     truncated=found["truncated"], errors=found["errors"])
    violation["class"] = ", ".join(names) or None
    return violation


def check(slo, points):
    """Violations of ``slo`` over the benchmark points ({workload, target, concurrency, result[, classes]}).

    Returns a list of {slo, limit, measured, workload, class, target, concurrency, message} (class: the mix
    class, else None); an SLO that no point was measured for (a concurrency outside every sweep) is itself
    a violation. ``max_error_rate`` (default 0) is checked at every point, also with an empty ``slo``.
    """
    slo = slo or {}
    violations, checked = [], 0
    for point in points:
        found = _error_violation(slo.get(ERROR_RATE, 0), point)
        if found:
            violations.append(found)
        if not _applies(slo, point):
            continue
        checked += 1
        for figures, limits, klass in _judged(slo, point):
            for key in sorted(limits):
                found = _violation(key, limits[key], figures.get(BOUNDS[key][0]), point, klass)
                if found:
                    violations.append(found)
    if checked == 0 and any(key in slo for key in BOUNDS):
        message = "SLO applies to no measured point (concurrency %s, workloads %s): add that concurrency to a " \
            "workload's sweep." % (slo.get("concurrency"), slo.get("workloads"))
        violations.append(dict(slo="concurrency", limit=slo.get("concurrency"), measured=None, workload=None,
                               target=None, concurrency=None, message=message, **{"class": None}))
    return violations
