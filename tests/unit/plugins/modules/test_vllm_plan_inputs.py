# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""vllm_plan refuses bad input by name (issue 15, items 4, 5 and 9), and never ends in a traceback.

The table cases each failed on the round-1 code: a traceback (MODULE FAILURE), a silently different
plan (TP 1.5 -> 1, max_model_len 0 -> the model default) or a plan vLLM would reject at start.
The hypothesis tests drive the module with random and malformed inputs and files.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.gpufleet.vllm.plugins.modules import vllm_plan
from ansible_collections.gpufleet.vllm.tests.unit.plugins.modules.module_harness import run_module as harness_run_module

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "model-configs")
GIB = 1024 ** 3
H200 = {"count": 2, "name": "NVIDIA H200", "memory_total_bytes": 150109880320, "compute_capability": "9.0"}
FACTS = {"gpu_count": 2, "nvlink_islands": [[0, 1]], "numa_nodes": [],
         "gpus": [{"index": i, "name": "NVIDIA H200", "memory_total_bytes": 150109880320, "compute_capability": "9.0",
                   "numa_node": None, "cpu_affinity": [i]} for i in range(2)]}
BASE = {"max_model_len": 32768, "kv_cache_memory_bytes": 6989963018}


def fixture_config():
    with open(os.path.join(FIXTURES, "Qwen__Qwen3-14B.config.json")) as fh:
        return json.load(fh)


def model_dir(tmp_path, config=None, files=None):
    model = tmp_path / "m"
    if model.exists():
        shutil.rmtree(str(model))
    model.mkdir()
    (model / "config.json").write_text(json.dumps(fixture_config() if config is None else config))
    for name, data in (files or {}).items():
        (model / name).write_bytes(data)
    return str(model)


def safetensors(header):
    body = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(body)) + body


def run(monkeypatch, args):
    return harness_run_module(monkeypatch, vllm_plan.main, args)


# (id, extra module args, config.json changes, files, text the failure must hold)
REFUSED = [
    ("gmu_zero", dict(gpu_memory_utilization=0.0, kv_cache_memory_bytes=None), {}, {}, "gpu_memory_utilization must be in (0, 1]"),
    ("gmu_above_one", dict(gpu_memory_utilization=1.5, kv_cache_memory_bytes=None), {}, {}, "gpu_memory_utilization"),
    ("gpu_memory_zero", dict(gpus=dict(H200, memory_total_bytes=0)), {}, {}, "gpus.memory_total_bytes must be >= 1"),
    ("tp_fraction", dict(tensor_parallel_size=1.5), {}, {}, "tensor_parallel_size must be an integer"),
    ("tp_bool", dict(tensor_parallel_size=True), {}, {}, "tensor_parallel_size must be an integer"),
    ("max_model_len_zero", dict(max_model_len=0), {}, {}, "max_model_len must be >= 1"),
    ("yarn_factor_zero", dict(yarn={"factor": 0.0}), {}, {}, "yarn.factor must be a number > 0"),
    ("yarn_factor_negative", dict(yarn={"factor": -2.0}), {}, {}, "yarn.factor"),
    ("yarn_list_of_null", dict(yarn=[None]), {}, {}, "yarn must be a mapping"),
    ("yarn_unknown_key", dict(yarn={"factor": 2.0, "type": "yarn"}), {}, {}, "yarn has unknown key(s) type"),
    ("numa_gpu_missing", dict(gpus=dict(H200, numa_nodes=[[0, 1], [2, 3]])), {}, {}, "gpus.numa_nodes names GPU 2"),
    ("island_gpu_missing", dict(gpus=dict(H200, nvlink_islands=[[0, 7]])), {}, {}, "gpus.nvlink_islands names GPU 7"),
    ("port_zero", dict(port_base=0), {}, {}, "port_base must be >= 1"),
    ("port_too_high", dict(port_base=70000), {}, {}, "port_base must be <= 65535"),
    ("ports_overflow", dict(port_base=65535, gpus=H200), {}, {}, "needs ports up to 65536"),
    ("pp_above_layers", dict(pipeline_parallel_size=41, gpus=dict(H200, count=64)), {}, {}, "pipeline_parallel_size 41 is larger than the model's 40 layers"),
    ("block_size_negative", dict(block_size=-16), {}, {}, "block_size must be >= 1"),
    ("offload_negative", dict(cpu_offload_bytes=-1), {}, {}, "cpu_offload_bytes must be >= 0"),
    ("spec_negative", dict(num_speculative_tokens=-1), {}, {}, "num_speculative_tokens must be >= 0"),
    ("kv_bytes_negative", dict(kv_cache_memory_bytes=-5), {}, {}, "kv_cache_memory_bytes must be >= 1"),
    ("served_name_newline", dict(served_model_name="m\nExecStartPre=/bin/sh"), {}, {}, "served_model_name must be a one-line string"),
    ("host_newline", dict(host="0.0.0.0\nUser=root"), {}, {}, "host must be a one-line string"),
    ("serve_path_relative", dict(serve_path="models/m"), {}, {}, "serve_path must be an absolute path"),
    ("serve_path_newline", dict(serve_path="/srv/m\nExecStartPre=/bin/sh"), {}, {}, "serve_path must be a one-line string"),
    ("gpus_entry_string", dict(gpus={"gpu_count": 1, "gpus": ["GPU0"]}), {}, {}, "gpus.gpus[0] must be a mapping"),
    ("gpus_index_string", dict(gpus={"gpu_count": 1, "gpus": [{"index": "zero"}]}), {}, {}, "gpus.gpus[0].index must be an integer"),
    ("gpus_count_string", dict(gpus=dict(H200, count="two")), {}, {}, "gpus.count must be an integer"),
    ("config_layers_string", {}, {"num_hidden_layers": "forty"}, {}, "field num_hidden_layers must be an integer"),
    ("config_heads_zero", {}, {"num_attention_heads": 0}, {}, "field num_attention_heads must be >= 1"),
    ("config_kv_heads_zero", {}, {"num_key_value_heads": 0}, {}, "field num_key_value_heads must be >= 1"),
    ("config_head_dim_list", {}, {"head_dim": [128]}, {}, "field head_dim must be an integer"),
    ("config_text_config_list", {}, {"text_config": [1]}, {}, "field text_config must be a JSON object"),
    ("config_not_object", {}, None, {}, "must hold a JSON object"),
    ("yarn_without_max_positions", dict(yarn={"factor": 4.0}), {"max_position_embeddings": None}, {},
     "yarn needs original_max_position_embeddings"),
    ("safetensors_header_not_json", {}, {}, {"model.safetensors": safetensors(b"{not json")}, "model.safetensors: the safetensors header is not valid"),
    ("safetensors_header_list", {}, {}, {"model.safetensors": safetensors([1, 2])}, "is not a JSON object"),
    ("safetensors_offsets_bad", {}, {}, {"model.safetensors": safetensors({"w": {"data_offsets": "0-9"}})}, "has no valid data_offsets"),
    ("safetensors_offsets_missing", {}, {}, {"model.safetensors": safetensors({"w": {"dtype": "BF16"}})}, "has no valid data_offsets"),
    ("index_not_json", {}, {}, {"model.safetensors.index.json": b"\xff\xfe"}, "model.safetensors.index.json: the index is not valid"),
    ("index_total_string", {}, {}, {"model.safetensors.index.json": b'{"metadata": {"total_size": "big"}}'}, "metadata.total_size"),
    ("index_weight_map_list", {}, {}, {"model.safetensors.index.json": b'{"weight_map": ["a"]}'}, "expected {metadata"),
]


@pytest.mark.parametrize("case", REFUSED, ids=[c[0] for c in REFUSED])
def test_refused_by_name(case, tmp_path, monkeypatch):
    _id, args, config_changes, files, text = case
    config = fixture_config()
    if config_changes is None:
        config = [config]
    else:
        for key, value in config_changes.items():
            if value is None:
                config.pop(key, None)
            else:
                config[key] = value
    full = dict(BASE, model=model_dir(tmp_path, config, files))
    full.update(args)
    full = dict((k, v) for k, v in full.items() if v is not None)
    result = run(monkeypatch, full)
    assert result.get("failed"), result
    assert text in result["msg"], result["msg"]
    assert "bug in gpufleet.vllm" not in result["msg"]
    assert result["findings"] == []


@pytest.mark.parametrize("arg", ["--api-ke=sk-123", "--api-k", "--hf-toke=hf_x"])
def test_secret_flag_prefixes_refused(arg, tmp_path, monkeypatch):
    result = run(monkeypatch, dict(BASE, model=model_dir(tmp_path), extra_args=[arg]))
    assert result.get("failed") and "forbidden_flag" in result["msg"] and arg.split("=")[0] in result["msg"]


def test_kv_bytes_plus_overhead_beyond_gpu_is_refused(tmp_path, monkeypatch):
    # 14.5 GiB KV + 27.5 GiB of Qwen3-14B-size weights fits 48 GiB without the overhead, not with it
    # (round 1 compared KV + weights only). Weights: index total_size of the real Qwen3-14B (29536614400,
    # tests/fixtures/model-configs/Qwen__Qwen3-14B.model.safetensors.index.PARTIAL.txt).
    index = json.dumps({"metadata": {"total_size": 29536614400}, "weight_map": {}}).encode()
    gpus = {"count": 1, "name": "NVIDIA L40S", "memory_total_bytes": 48 * GIB, "compute_capability": "8.9"}
    kv = 48 * GIB - 29536614400 - GIB // 2
    result = run(monkeypatch, dict(model=model_dir(tmp_path, files={"model.safetensors.index.json": index}),
                                   gpus=gpus, max_model_len=4096, kv_cache_memory_bytes=kv))
    assert result.get("failed")
    assert "kv_memory_exceeds_gpu" in result["msg"] and "overhead" in result["msg"]


def test_unknown_numa_gives_no_binding_and_a_finding(tmp_path, monkeypatch):
    facts = json.loads(json.dumps(FACTS))
    facts["gpus"][1]["numa_node"] = -1
    result = run(monkeypatch, dict(BASE, model=model_dir(tmp_path), gpus=facts))
    assert not result.get("failed"), result["msg"]
    assert [i["numa_node"] for i in result["instances"]] == [None, None]
    assert [f["code"] for f in result["findings"]].count("numa_unknown") == 2


# ---- property-based: random and malformed inputs --------------------------------------------------------------

OPTION_NAMES = ("tensor_parallel_size", "pipeline_parallel_size", "instances", "max_model_len", "kv_cache_dtype",
                "kv_cache_memory_bytes", "gpu_memory_utilization", "memory_overhead_bytes", "block_size",
                "num_speculative_tokens", "cpu_offload_bytes", "yarn", "expected_prompt_tokens", "expected_concurrency",
                "served_model_name", "host", "port_base", "tool_call_parser", "reasoning_parser", "extra_args",
                "vllm_version", "gpus", "model", "speculative_method")
scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2 ** 70), max_value=2 ** 70),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
                    st.sampled_from(["auto", "1", "1.5", "0", "-1", "fp8", "\n", "a\nb", "\u2603", "8000"]))


def _containers(inner):
    return st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4))


values = st.recursive(scalars, _containers, max_leaves=8)
CONFIG_KEYS = ("num_hidden_layers", "num_attention_heads", "num_key_value_heads", "hidden_size", "head_dim",
               "max_position_embeddings", "vocab_size", "rope_theta", "rope_parameters", "text_config", "layer_types",
               "full_attention_interval", "linear_num_value_heads", "kv_lora_rank", "qk_rope_head_dim", "architectures",
               "dtype", "num_experts", "mtp_num_hidden_layers", "quantization_config")


def _named(msg):
    """Every refusal names an option, a config.json field or a model file."""
    return any(name in msg for name in OPTION_NAMES + ("config.json", ".safetensors", "vllm_plan found"))


def _check(result):
    assert "bug in gpufleet.vllm" not in result.get("msg", ""), result["msg"]
    assert "exception" not in result or not result.get("failed") or "unexpected" not in result["msg"]
    if result.get("failed"):
        assert _named(result["msg"]), result["msg"]


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


@SETTINGS
@given(args=st.dictionaries(st.sampled_from(OPTION_NAMES[:-2]), values, max_size=5))
def test_random_options_never_crash(args, tmp_path_factory, monkeypatch):
    tmp = tmp_path_factory.mktemp("opts")
    full = dict(BASE, model=model_dir(tmp))
    full.update(args)
    try:
        result = run(monkeypatch, full)
    except Exception as exc:  # pylint: disable=broad-except
        # AnsibleModule's own argument-spec refusal (type=int given "x") exits through fail_json too;
        # anything else escaping is a crash.
        raise AssertionError("escaped: %r" % exc)
    _check(result)


@SETTINGS
@given(changes=st.dictionaries(st.sampled_from(CONFIG_KEYS), values, max_size=4),
       gpus=st.one_of(st.none(), values, st.fixed_dictionaries({"gpu_count": values, "gpus": st.lists(values, max_size=3)}),
                      st.fixed_dictionaries({"count": values, "name": values, "memory_total_bytes": values,
                                             "compute_capability": values, "numa_nodes": values})))
def test_random_config_and_gpus_never_crash(changes, gpus, tmp_path_factory, monkeypatch):
    config = fixture_config()
    config.update(changes)
    full = dict(BASE, model=model_dir(tmp_path_factory.mktemp("cfg"), config))
    if gpus is not None:
        full["gpus"] = gpus
    _check(run(monkeypatch, full))


@SETTINGS
@given(name=st.sampled_from(["model.safetensors", "model.safetensors.index.json", "config.json"]),
       data=st.one_of(st.binary(max_size=64),
                      st.builds(safetensors, st.one_of(values, st.dictionaries(st.text(max_size=4), values, max_size=3))),
                      st.builds(lambda v: json.dumps(v).encode(), values),
                      st.builds(lambda v: json.dumps({"metadata": {"total_size": v}, "weight_map": v}).encode(), values)))
def test_malformed_files_never_crash(name, data, tmp_path_factory, monkeypatch):
    model = model_dir(tmp_path_factory.mktemp("files"))
    with open(os.path.join(model, name), "wb") as fh:
        fh.write(data)
    _check(run(monkeypatch, dict(BASE, model=model)))
