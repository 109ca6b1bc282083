# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How long a rollout waits for an engine's in-flight requests (issue 44): a timeout derived from the request time the
engines measured, not a fixed number. vLLM's own histogram vllm:e2e_request_latency_seconds (seconds from arrival to
the last token, every finished request since the engine started) gives the p99 the way Prometheus'
histogram_quantile reads a histogram (linear within the bucket; the +Inf bucket answers the highest finite bound).
The wait is FACTOR x the worst engine's p99, at least FLOOR and at most CEILING seconds; with no finished request
yet there is nothing to derive it from, so CEILING. The wait itself ends as soon as vLLM's running and waiting
gauges are 0 (playbooks/tasks/rollout_inflight.yml): the timeout only bounds a request that does not end."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import re

LATENCY = "vllm:e2e_request_latency_seconds_bucket"
FACTOR, FLOOR, CEILING = 3.0, 30, 1800
_SAMPLE = re.compile(r'^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)')
_LE = re.compile(r'(?:^|,)le="([^"]*)"')


def buckets(metrics_text, name=LATENCY):
    """{upper bound: cumulative count} of one histogram, summed over its other labels (+Inf as math.inf)."""
    out = {}
    for line in (metrics_text or "").splitlines():
        found = _SAMPLE.match(line.strip())
        if not found or found.group("name") != name:
            continue
        le = _LE.search(found.group("labels"))
        if not le:
            continue
        bound = math.inf if le.group(1) in ("+Inf", "Inf") else float(le.group(1))
        out[bound] = out.get(bound, 0.0) + float(found.group("value"))
    return out


def quantile(cumulative, q):
    """Prometheus' histogram_quantile over {bound: cumulative count}; None without an observation."""
    bounds = sorted(cumulative)
    if not bounds or cumulative[bounds[-1]] <= 0:
        return None
    rank = q * cumulative[bounds[-1]]
    lower, below = 0.0, 0.0
    for bound in bounds:
        count = cumulative[bound]
        if count >= rank:
            if math.isinf(bound):
                finite = [b for b in bounds if not math.isinf(b)]
                return finite[-1] if finite else None
            return lower + (bound - lower) * ((rank - below) / (count - below) if count > below else 1.0)
        lower, below = bound, count
    return None


def drain_timeout(metrics_texts, factor=FACTOR, floor=FLOOR, ceiling=CEILING):
    """(timeout seconds, the worst p99 or None) for the engines whose /metrics texts are given."""
    p99s = [p for p in (quantile(buckets(text), 0.99) for text in metrics_texts or []) if p is not None]
    if not p99s:
        return int(ceiling), None
    worst = max(p99s)
    return int(math.ceil(min(float(ceiling), max(float(floor), factor * worst)))), worst
