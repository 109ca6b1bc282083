# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Metric names: which ones the alert rules and the dashboard use, which ones a live /metrics scrape
exposes, what is missing, and the plan's KV block count against the engine's.

Why: vLLM renamed and removed metrics between releases (``vllm:gpu_cache_usage_perc`` ->
``vllm:kv_cache_usage_perc`` in 0.11, removed in 0.12); a rule on a vanished name never fires and a
panel goes blank without any error. The deploy-time check compares names, not values.

Names are found by their exporter prefix (``vllm:``, ``node_``, ``DCGM_FI_``): no PromQL function,
keyword or label of ours starts with one of them, so a regular expression finds every metric name in
an expression without a PromQL parser. Pure Python, no Ansible import.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError

# Exporter prefix -> the scrape job that exposes it (the jobs of roles/monitoring's prometheus.yml).
PREFIXES = {"vllm": ("vllm:",), "node": ("node_",), "dcgm": ("DCGM_FI_",), "router": ("vllm_router_",)}

_NAME_RE = re.compile(r"(?<![A-Za-z0-9_:])(vllm:[A-Za-z0-9_:]+|vllm_router_[A-Za-z0-9_]+|node_[A-Za-z0-9_]+|DCGM_FI_[A-Za-z0-9_]+)")
# One exposition sample line: name, optional {labels}, value (text format 0.0.4).
_SAMPLE_RE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{.*\})?\s+\S+")
_TYPE_RE = re.compile(r"^#\s+TYPE\s+([A-Za-z_:][A-Za-z0-9_:]*)\s+\S+")
_LABEL_RE = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')
_ASCII_COUNT = re.compile(r"[0-9]{1,18}\Z")


def names_in_text(text):
    """The metric names (with an exporter prefix) a rules file, dashboard JSON or expression uses."""
    return set(_NAME_RE.findall(text or ""))


def exposed_names(exposition):
    """Every sample name and family name in a Prometheus text exposition (``GET /metrics`` body)."""
    names = set()
    for line in (exposition or "").splitlines():
        line = line.strip()
        match = _TYPE_RE.match(line) if line.startswith("#") else _SAMPLE_RE.match(line)
        if match:
            names.add(match.group(1))
    return names


def required_for(job, used):
    """The names of ``used`` that the scrape job ``job`` (vllm, node, dcgm) must expose."""
    if job not in PREFIXES:
        raise UserError("Unknown scrape job %r: use one of %s." % (job, ", ".join(sorted(PREFIXES))))
    return set(name for name in used if name.startswith(PREFIXES[job]))


# vllm-router (0.1.17) creates its per-request series at the first request it routes: a fresh router exposes only
# vllm_router_active_workers and vllm_router_worker_health (tests/fixtures/vllm-router-metrics/, real scrapes).
# Until its scrape shows one of these, they are not asked of it; once it routed anything, all of them are.
ROUTER_FIRST_REQUEST = frozenset([
    "vllm_router_requests_total", "vllm_router_processed_requests_total", "vllm_router_policy_decisions_total",
    "vllm_router_cb_outcomes_total", "vllm_router_cb_state", "vllm_router_generate_duration_seconds",
    "vllm_router_generate_duration_seconds_bucket", "vllm_router_generate_duration_seconds_sum",
    "vllm_router_generate_duration_seconds_count", "vllm_router_retries_total",
])


def missing_names(job, used, exposition):
    """Sorted names the rules/dashboard use for ``job`` that the scrape does not expose."""
    exposed = exposed_names(exposition)
    if not exposed:
        raise UserError("The %s scrape exposed no metrics at all: is it a Prometheus /metrics endpoint?" % job)
    required = required_for(job, used)
    if job == "router" and not exposed & ROUTER_FIRST_REQUEST:
        required -= ROUTER_FIRST_REQUEST
    return sorted(required - exposed)


def sample_labels(exposition, name):
    """The label dicts of every sample called ``name`` in the exposition."""
    found = []
    for line in (exposition or "").splitlines():
        match = _SAMPLE_RE.match(line.strip())
        if match and match.group(1) == name:
            found.append(dict(_LABEL_RE.findall(match.group(2) or "")))
    return found


def engine_blocks(exposition):
    """The KV block count the engine reports (``vllm:cache_config_info``'s ``num_gpu_blocks``), or None.

    vLLM (v1/metrics/loggers.py, PrometheusStatLogger.__init__, 0.11 to 0.33) publishes CacheConfig as
    the labels of an info gauge; one series per engine (data parallel), all with the same count.
    """
    counts = []
    for labels in sample_labels(exposition, "vllm:cache_config_info"):
        value = labels.get("num_gpu_blocks", "None")
        if _ASCII_COUNT.match(value):  # str.isdigit() takes "²" (int() then raises) and "١٢" (int() reads 12)
            counts.append(int(value))
    return min(counts) if counts else None


def compare_blocks(planned, engine):
    """The plan's predicted KV blocks against the engine's: {planned, engine, difference, ratio, status}.

    ``difference`` is engine - planned (positive: the engine found more room than the plan predicted).
    """
    result = dict(planned=planned, engine=engine, difference=None, ratio=None)
    if planned is None or engine is None:
        result["status"] = "unknown"
        return result
    result["difference"] = engine - planned
    result["ratio"] = round(float(engine) / planned, 4) if planned else None
    result["status"] = "match" if engine == planned else "differs"
    return result
