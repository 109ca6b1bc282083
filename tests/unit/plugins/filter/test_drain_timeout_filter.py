# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The filter drain_timeout as playbooks/tasks/rollout_inflight.yml calls it (the arithmetic: bench/drain.py and
tests/unit/plugins/module_utils/bench/test_bench_drain.py, whose worked values these reuse)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.vllm.plugins.filter.drain_timeout import FilterModule, drain_timeout

FAST = 'vllm:e2e_request_latency_seconds_bucket{le="1.0"} 100\nvllm:e2e_request_latency_seconds_bucket{le="+Inf"} 100'
# 50 <= 10 s, 99 <= 60 s, 100 <= 120 s: p99 60 s, 3 x 60 = 180 s
SLOW_COUNTS = (("10.0", 50), ("60.0", 99), ("120.0", 100), ("+Inf", 100))
SLOW = "\n".join('vllm:e2e_request_latency_seconds_bucket{le="%s"} %d' % (b, c) for b, c in SLOW_COUNTS)


def test_the_worst_engine_sets_it_and_the_filter_says_both():
    assert drain_timeout([FAST, SLOW]) == {"seconds": 180, "p99_seconds": 60.0}
    assert drain_timeout([FAST, SLOW], factor=2, floor=10, ceiling=100) == {"seconds": 100, "p99_seconds": 60.0}
    assert drain_timeout([]) == {"seconds": 1800, "p99_seconds": None}
    assert FilterModule().filters()["drain_timeout"] is drain_timeout


def test_refuses_what_is_not_a_list_of_texts():
    with pytest.raises(AnsibleFilterError, match="list of /metrics texts"):
        drain_timeout("vllm:e2e_request_latency_seconds_bucket 1")
