# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The router job of module_utils/metric_names against REAL vllm-router 0.1.17 scrapes.

Fixtures: tests/fixtures/vllm-router-metrics/ (provenance in its README): one right after start (two gauges
only) and one after traffic. Expected values are read off those files by hand.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.metric_names import (
    exposed_names, missing_names, names_in_text, required_for,
)

HERE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "vllm-router-metrics")
USED = {"vllm_router_processed_requests_total", "vllm_router_active_workers", "vllm_router_worker_health",
        "vllm:prefix_cache_hits_total"}


def _read(name):
    with open(os.path.join(HERE, "vllm-router-0.1.17.%s.metrics.txt" % name), encoding="utf-8") as handle:
        return handle.read()


def test_names_of_the_real_scrapes():
    assert exposed_names(_read("fresh")) == {"vllm_router_active_workers", "vllm_router_worker_health"}
    assert {"vllm_router_processed_requests_total", "vllm_router_requests_total", "vllm_router_policy_decisions_total",
            "vllm_router_cb_outcomes_total", "vllm_router_cb_state"} <= exposed_names(_read("after-traffic"))


def test_router_names_in_rules_text():
    text = 'sum by (worker) (rate(vllm_router_processed_requests_total[5m])) / vllm:prefix_cache_queries_total'
    assert names_in_text(text) == {"vllm_router_processed_requests_total", "vllm:prefix_cache_queries_total"}
    assert required_for("router", USED) == USED - {"vllm:prefix_cache_hits_total"}


@pytest.mark.parametrize("scrape, used, expected", [
    ("fresh", USED, []),                                          # not routed yet: per-request counters not asked
    ("after-traffic", USED, []),
    ("fresh", USED | {"vllm_router_made_up"}, ["vllm_router_made_up"]),  # a wrong name is missing at once
    ("after-traffic", USED | {"vllm_router_retries_total"}, ["vllm_router_retries_total"]),  # routed: all asked
])
def test_missing_names(scrape, used, expected):
    assert missing_names("router", used, _read(scrape)) == expected
