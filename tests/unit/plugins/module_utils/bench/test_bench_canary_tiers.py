# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench.canary.tier_verdict: the canary across the GPU prefix cache and the offload tier (issue 46), and the
offload connector's counters in a benchmark window. Every expected value is written here by hand."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.bench import canary, engine

IDS = [11, 12, 13, 14]


@pytest.mark.parametrize("cold, warm, cold_hits, warm_hits, status, tier, first", [
    # evicted from the GPU, found in host memory: the CPU-tier hit the offload canary must prove
    (IDS, IDS, {"gpu": 0, "offload": 0}, {"gpu": 0, "offload": 1024}, "pass", "offload", None),
    (IDS, IDS, {"gpu": 0, "offload": 0}, {"gpu": 512, "offload": 0}, "pass", "gpu", None),
    (IDS, IDS, {"gpu": 0, "offload": 0}, {"gpu": 256, "offload": 768}, "pass", "gpu+offload", None),
    # an engine without a connector: its offload counter is None
    (IDS, IDS, {"gpu": 0, "offload": None}, {"gpu": 512, "offload": None}, "pass", "gpu", None),
    (IDS, [11, 12, 99, 14], {"gpu": 0, "offload": 0}, {"gpu": 0, "offload": 1024}, "mismatch", None, 2),
    (IDS, IDS[:3], {"gpu": 0, "offload": 0}, {"gpu": 0, "offload": 1024}, "mismatch", None, 3),
    (IDS, IDS, {"gpu": 0, "offload": 0}, {"gpu": 0, "offload": 0}, "no_hit", None, None),
    # the planted reset: the GPU cache was reset, the offload tier was not, so the "cold" send found the prompt there
    (IDS, IDS, {"gpu": 0, "offload": 1024}, {"gpu": 1024, "offload": 0}, "not_cold", None, None),
    (IDS, [1, 2, 3, 4], {"gpu": 16, "offload": 0}, {"gpu": 0, "offload": 0}, "not_cold", None, None),
])
def test_tier_verdict(cold, warm, cold_hits, warm_hits, status, tier, first):
    verdict = canary.tier_verdict(cold, warm, cold_hits, warm_hits)
    assert (verdict["status"], verdict["tier"], verdict["first_difference"]) == (status, tier, first)


def test_not_cold_names_the_tier_and_the_reset_that_reaches_it():
    verdict = canary.tier_verdict(IDS, IDS, {"gpu": 0, "offload": 1024}, {"gpu": 1024, "offload": 0})
    assert "1024 from the offload tier" in verdict["message"]
    assert "reset_external=true" in verdict["message"]


# The two counters as vLLM 0.26.0 exposes them (vllm/v1/metrics/loggers.py: Counter "vllm:external_prefix_cache_
# queries" / "vllm:external_prefix_cache_hits"; prometheus_client adds _total), with the engine label.
BEFORE = """# TYPE vllm:external_prefix_cache_hits_total counter
vllm:external_prefix_cache_queries_total{engine="0",model_name="tuned"} 1000.0
vllm:external_prefix_cache_hits_total{engine="0",model_name="tuned"} 200.0
vllm:prefix_cache_queries_total{engine="0",model_name="tuned"} 5000.0
vllm:prefix_cache_hits_total{engine="0",model_name="tuned"} 1000.0
"""
AFTER = """vllm:external_prefix_cache_queries_total{engine="0",model_name="tuned"} 9000.0
vllm:external_prefix_cache_hits_total{engine="0",model_name="tuned"} 6200.0
vllm:prefix_cache_queries_total{engine="0",model_name="tuned"} 13000.0
vllm:prefix_cache_hits_total{engine="0",model_name="tuned"} 1000.0
"""


def test_a_window_counts_what_the_offload_tier_served():
    figures = engine.window(engine.snapshot([BEFORE]), engine.snapshot([AFTER]))
    assert (figures["offload_cache_queries"], figures["offload_cache_hits"]) == (8000.0, 6000.0)
    assert (figures["prefix_cache_queries"], figures["prefix_cache_hits"]) == (8000.0, 0.0)


def test_a_window_without_a_connector_has_no_offload_figures():
    plain = "vllm:prefix_cache_hits_total{engine=\"0\"} 3.0\n"
    figures = engine.window(engine.snapshot([plain]), engine.snapshot([plain]))
    assert (figures["offload_cache_queries"], figures["offload_cache_hits"]) == (None, None)
