# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The record of one start kept on the host, the restart budget, the one-line summary and the metric lines."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.gpufleet.vllm.plugins.module_utils.startup import boot_log, cache_key

RECORD_VERSION = 1


def build(instance, invocation, journal_text, process_start, start_inputs, previous=None, budget=0,
          expect_hit=False, copied_from=None, year=2000):
    """The record of this start (a dict, JSON-ready)."""
    parsed = boot_log.parse(journal_text, process_start=process_start, year=year)
    diffs = cache_key.differences((previous or {}).get("inputs"), start_inputs)
    verdict = cache_key.judge(parsed["compile_cache"], parsed["compile"]["keys"], previous, diffs,
                              expect_hit=expect_hit, copied_from=copied_from)
    total = parsed["total_seconds"]
    over = bool(budget and total is not None and total > budget)
    return {
        "record_version": RECORD_VERSION,
        "instance": instance,
        "invocation_id": invocation,
        "process_start": process_start,
        "complete": parsed["complete"],
        "clock": parsed["clock"],
        "vllm_version_logged": parsed["version"],
        "total_seconds": total,
        "phases": parsed["phases"],
        "compile": parsed["compile"],
        "cache": verdict,
        "changes": diffs,
        "inputs": start_inputs,
        "fingerprint": cache_key.fingerprint(start_inputs),
        "kv_tokens": parsed["kv_tokens"],
        "budget_seconds": budget,
        "over_budget": over,
        "expect_hit": bool(expect_hit),
        "copied_from": copied_from,
    }


def summary(record):
    """``a: ready 25.0 s (api_server 7.0, weights 8.0, torch_compile 8.0 [unloadable], ...) cache ...``"""
    parts = []
    for phase in record["phases"]:
        if phase["seconds"] is None:
            continue
        label = "%s %.1f" % (phase["name"], phase["seconds"])
        if phase["name"] == "torch_compile":
            label += " [%s]" % record["cache"]["status"]
        parts.append(label)
    total = record["total_seconds"]
    line = "%s: %s (%s)" % (
        record["instance"], ("ready %.1f s" % total) if total is not None else "not ready in its log",
        ", ".join(parts) or "no phase logged")
    cache = record["cache"]
    if cache.get("finding"):
        line += "; FINDING: %s (%s)" % (cache["finding"], cache.get("cause"))
    elif cache.get("cause"):
        line += "; cache: %s" % cache["cause"]
    if record["over_budget"]:
        line += "; OVER BUDGET: %.1f s > %s s" % (total, record["budget_seconds"])
    return line


def metric_lines(records, prefix="gpufleet_vllm_startup"):
    """Prometheus text (node exporter's textfile collector) for the last start of each instance."""
    out = [
        "# HELP %s_seconds Seconds from the process start to ready, last start of the instance." % prefix,
        "# TYPE %s_seconds gauge" % prefix,
    ]
    phase_lines = ["# HELP %s_phase_seconds Seconds of one start-up phase, last start." % prefix,
                   "# TYPE %s_phase_seconds gauge" % prefix]
    budget_lines = ["# HELP %s_budget_seconds The restart budget (0: none)." % prefix,
                    "# TYPE %s_budget_seconds gauge" % prefix]
    hit_lines = ["# HELP %s_compile_cache_hit 1 when the last start loaded its compiled graphs from the cache." % prefix,
                 "# TYPE %s_compile_cache_hit gauge" % prefix]
    unexpected = ["# HELP %s_unexpected_recompile 1 when the last start compiled where a cache hit was due." % prefix,
                  "# TYPE %s_unexpected_recompile gauge" % prefix]
    for record in sorted(records, key=lambda r: r["instance"]):
        label = 'instance_name="%s"' % _label(record["instance"])
        if record["total_seconds"] is not None:
            out.append("%s_seconds{%s} %s" % (prefix, label, record["total_seconds"]))
        for phase in record["phases"]:
            if phase["seconds"] is not None:
                phase_lines.append('%s_phase_seconds{%s,phase="%s"} %s' % (
                    prefix, label, phase["name"], phase["seconds"]))
        budget_lines.append("%s_budget_seconds{%s} %s" % (prefix, label, record["budget_seconds"] or 0))
        hit_lines.append("%s_compile_cache_hit{%s} %d" % (prefix, label, record["cache"]["status"] == "hit"))
        unexpected.append("%s_unexpected_recompile{%s} %d" % (prefix, label, not record["cache"]["expected"]))
    return "\n".join(out + phase_lines + budget_lines + hit_lines + unexpected) + "\n"


def _label(value):
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def dumps(record):
    return json.dumps(record, indent=2, sort_keys=True) + "\n"
