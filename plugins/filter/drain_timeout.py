# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: drain_timeout
short_description: How long a rollout waits for engines' in-flight requests, from their measured p99 request time
version_added: 0.1.0
author: gpufleet.vllm maintainers
description:
  - Reads vLLM's own histogram C(vllm:e2e_request_latency_seconds) (arrival to last token, every finished request)
    from each engine's C(/metrics) text, takes the p99 the way Prometheus' C(histogram_quantile) does, and returns
    O(factor) times the worst engine's p99, at least O(floor) and at most O(ceiling) seconds. With no finished
    request yet it returns O(ceiling).
  - playbooks/rollout.yml uses it when C(gpufleet_rollout_drain_timeout) is V(auto) (the default).
options:
  _input:
    description: The engines' C(/metrics) texts.
    type: list
    elements: str
    required: true
  factor:
    description: The multiple of the p99 request time.
    type: float
    default: 3.0
  floor:
    description: The shortest timeout (seconds).
    type: int
    default: 30
  ceiling:
    description: The longest timeout (seconds), and the one used when nothing was measured.
    type: int
    default: 1800
"""

EXAMPLES = r"""
- name: Derive the drain timeout from the engines' own request times
  ansible.builtin.debug:
    msg: "{{ __metrics.results | map(attribute='content') | list | gpufleet.vllm.drain_timeout }}"
  # {"seconds": 30, "p99_seconds": 0.297}
"""

RETURN = r"""
_value:
  description: C(seconds), the timeout; C(p99_seconds), the worst engine's p99 request time (null - none measured).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.vllm.plugins.module_utils.bench.drain import CEILING, FACTOR, FLOOR
from ansible_collections.gpufleet.vllm.plugins.module_utils.bench.drain import drain_timeout as _drain_timeout


def drain_timeout(texts, factor=FACTOR, floor=FLOOR, ceiling=CEILING):
    if isinstance(texts, str) or not isinstance(texts, (list, tuple)):
        raise AnsibleFilterError("drain_timeout: the input must be a list of /metrics texts, got %s" % type(texts).__name__)
    seconds, p99 = _drain_timeout([str(t) for t in texts], float(factor), int(floor), int(ceiling))
    return {"seconds": seconds, "p99_seconds": None if p99 is None else round(p99, 3)}


class FilterModule(object):
    def filters(self):
        return {"drain_timeout": drain_timeout}
