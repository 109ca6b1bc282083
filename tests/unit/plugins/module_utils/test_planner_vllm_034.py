# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""vLLM 0.34.0's rules in the planner, one test per rule (issue 45). Expected figures come from vLLM's own code,
never from the planner: tests/fixtures/vllm-0.34.0 (PROVENANCE.md: the commands, run in the 0.34.0 and 0.33.0
venvs on this CPU machine). No real 0.34 engine log exists here: the extensible KV cache is checked with 0.34's
own measure_kv_cache_bytes applied to the memory terms of the real 0.26.0 H200 engines' boot logs.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import kv_capacity as kv
from ansible_collections.gpufleet.vllm.plugins.module_utils import releases as R
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import vllm_args as va
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan.planner import build_plan

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures")
V034 = os.path.join(FIXTURES, "vllm-0.34.0")
ACC = os.path.join(FIXTURES, "gpu-acceptance")
GIB = 1024 ** 3


def _json(*parts):
    with open(os.path.join(*parts)) as fh:
        return json.load(fh)


def _text(*parts):
    with open(os.path.join(*parts)) as fh:
        return fh.read()


FLAGS = _json(V034, "serve-flags.json")
FACTS = _json(ACC, "gpu_facts.json")["nvml"]
QWEN14 = _json(FIXTURES, "model-configs", "Qwen__Qwen3-14B.config.json")


def _plan(version, raw=QWEN14, **options):
    p = dict(model="unused", gpus=FACTS, tensor_parallel_size=1, pipeline_parallel_size=1, instances=1,
             max_model_len=32768, kv_cache_dtype="auto", enable_prefix_caching=True, num_speculative_tokens=0,
             host="127.0.0.1", port_base=8000, vllm_version=version, extra_args=[])
    p.update(options)
    return build_plan(p, raw, "unused", weights_total=int(options.pop("weights", 29.5 * GIB)), weights_source="index")


def _codes(result, level=None):
    return [f["code"] for f in result["findings"] if level is None or f["level"] == level]


# --- block size: CacheConfig.DEFAULT_BLOCK_SIZE of each release's own parser (serve-flags.json) ------------------

@pytest.mark.parametrize("version", ["0.33.0", "0.34.0"])
def test_default_block_size_is_the_release_own(version):
    assert kv.default_block_size(version) == FLAGS[version]["DEFAULT_BLOCK_SIZE"]
    assert _plan(version, kv_cache_memory_bytes=8 * GIB)["capacity"]["block_size"] == FLAGS[version]["DEFAULT_BLOCK_SIZE"]


@pytest.mark.parametrize("version, block_size, expected", [
    ("0.34.0", 16, 16),     # --block-size given: _apply_block_size_default keeps it (user_specified_block_size)
    ("0.34.0", 32, 32),
    ("0.33.0", 32, 32),
])
def test_explicit_block_size_wins(version, block_size, expected):
    assert _plan(version, kv_cache_memory_bytes=8 * GIB, block_size=block_size)["capacity"]["block_size"] == expected


def test_fa4_hd256_page_raises_the_064_default_to_its_page():
    """flash_attn.py get_preferred_block_size (0.34.0): max(default, FA4_HD256_PAGE_SIZE 128) on SM10x, head 256."""
    cfg = dict(num_layers=2, full_attention_layers=2, num_attention_heads=8, num_kv_heads=2, head_dim=256,
               dtype_bytes=2, max_position_embeddings=4096)
    assert kv.size_kv_cache(cfg, compute_capability="10.0", vllm_version="0.34.0")["block_size"] == 128
    assert kv.size_kv_cache(cfg, compute_capability="9.0", vllm_version="0.34.0")["block_size"] == 64


# --- the extensible KV cache ------------------------------------------------------------------------------------

SIZING = _json(V034, "extensible-sizing.json")


@pytest.mark.parametrize("row", SIZING["results"], ids=["%s@%s" % (r["id"], r["utilization"]) for r in SIZING["results"]])
def test_extensible_kv_from_the_boot_log_matches_vllm_034_own_sizing(row):
    """Fed a real engine's memory terms (calibration_log), the plan is 0.34's measure_kv_cache_bytes on them,
    within the logs' 2-decimal rounding and never above."""
    case = dict((c["id"], c) for c in _json(ACC, "graphs-0.26.0", "results.json")["cases"])[row["id"]]
    raw = _json(FIXTURES, "model-configs", case["model"] + ".config.json")
    extra = {} if row["utilization"] == 1.0 else {"gpu_memory_utilization": row["utilization"]}
    result = _plan("0.34.0", raw, calibration_log=_text(ACC, "graphs-0.26.0", "cases", row["id"] + ".engine.log"),
                   language_model_only="--language-model-only" in case["argv"], max_model_len=4096, **extra)
    got = result["capacity"]["available_kv_bytes"]
    assert -0.03 * GIB <= got - row["kv_bytes"] <= 0, (got, row["kv_bytes"])
    assert result["capacity"]["estimate"]["sizing"] == "extensible"


def test_extensible_model_without_a_log_stays_under_vllm_for_the_dense_v2_engine():
    """The modelled terms (no calibration_log) for the dense Qwen3-8B run, the one that ran the V2 runner 0.34 uses."""
    row = [r for r in SIZING["results"] if r["id"] == "graphs-dense-qwen3-8b-util" and r["utilization"] == 1.0][0]
    raw = _json(FIXTURES, "model-configs", "Qwen__Qwen3-8B.config.json")
    got = _plan("0.34.0", raw, max_model_len=4096, weights=row["terms"]["weights"])["capacity"]["available_kv_bytes"]
    assert -0.6 * GIB <= got - row["kv_bytes"] <= 0, (got, row["kv_bytes"])


@pytest.mark.parametrize("version, options, extensible", [
    ("0.33.0", {}, False),
    ("0.34.0", {}, True),
    ("0.34.0", {"extra_args": ["--no-enable-extensible-kv-cache"]}, False),
    ("0.34.0", {"extra_args": ["--disable-extensible-kv-cache"]}, False),
    ("0.34.0", {"extra_args": ["--num-gpu-blocks-override", "1000"]}, False),
])
def test_extensible_kv_cache_on_by_default_from_034_and_its_off_switches(version, options, extensible):
    """config/vllm.py _resolve_extensible_kv_cache: on for CUDA unless kv_cache_memory_bytes or
    num_gpu_blocks_override; the flag pair turns it off. Off: the profiled estimate at 0.92."""
    result = _plan(version, **options)
    assert ("kv_estimate_extensible" in _codes(result)) is extensible
    assert ("kv_estimate" in _codes(result)) is (not extensible)
    requested = result["capacity"]["estimate"]["requested_bytes"]
    total = requested / (1.0 if extensible else FLAGS["0.33.0"]["defaults"]["gpu_memory_utilization"])
    assert abs(total - hp_total()) < 2


def hp_total():
    from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu import hardware_profiles as hp
    return hp.cuda_total(FACTS["gpus"][0]["name"], FACTS["gpus"][0]["memory_total_bytes"])


def test_explicit_kv_bytes_switch_the_extensible_cache_off():
    result = _plan("0.34.0", kv_cache_memory_bytes=8 * GIB)
    assert result["capacity"]["available_kv_bytes"] == 8 * GIB
    assert not set(_codes(result)) & {"kv_estimate", "kv_estimate_extensible"}


@pytest.mark.parametrize("version, utilization, warned", [
    ("0.34.0", 0.9, True), ("0.34.0", 0.95, True), ("0.34.0", 0.7, False), ("0.34.0", 1.0, False),
    ("0.33.0", 0.9, False),
])
def test_utilization_below_one_is_a_warning_with_the_extensible_cache(version, utilization, warned):
    """measure_kv_cache_blocks warns for 0.7 < gpu_memory_utilization < 1.0 (withheld memory)."""
    result = _plan(version, gpu_memory_utilization=utilization)
    assert ("utilization_caps_extensible_kv" in _codes(result, "warning")) is warned


def test_the_034_defaults_in_the_table_are_the_parser_own():
    rule = R.rule_for(R.KV_SIZING_RULES, "0.34.0")[1]
    assert FLAGS["0.34.0"]["defaults"]["gpu_memory_utilization"] is None  # resolved by the sizing mode
    assert R.rule_for(R.KV_SIZING_RULES, "0.33.0")[1]["utilization"] == FLAGS["0.33.0"]["defaults"]["gpu_memory_utilization"]
    assert FLAGS["0.34.0"]["DEFAULT_GPU_MEMORY_UTILIZATION"] == R.KV_SIZING_RULES[0][1]["utilization"]
    assert rule["extensible"] and FLAGS["0.34.0"]["defaults"]["enable_extensible_kv_cache"] is None


# --- flags: none removed or renamed in 0.34.0; what the off switches name exists ------------------------------

def test_034_removed_no_flag_of_033_and_accepts_the_off_switches():
    removed = sorted(set(FLAGS["0.33.0"]["flags"]) - set(FLAGS["0.34.0"]["flags"]))
    assert removed == []
    assert "--disable-extensible-kv-cache" in FLAGS["0.34.0"]["flags"]
    assert "--num-gpu-blocks-override" in FLAGS["0.34.0"]["flags"]
    assert set(va.REMOVED_FLAGS).isdisjoint(FLAGS["0.34.0"]["flags"])
    assert set(va.REMOVED_FLAGS).isdisjoint(FLAGS["0.33.0"]["flags"])


# --- KV offload: 0.34's own spelling ------------------------------------------------------------------------------

def _argv(result):
    return result["instances"][0]["argv"]


@pytest.mark.parametrize("version, options, native", [
    ("0.33.0", {}, False),
    ("0.34.0", {}, True),
    ("0.34.0", {"cpu_offload_eviction_policy": "arc"}, False),   # the flags carry no eviction policy
    ("0.34.0", {"cpu_offload_prompt_only": False}, False),
])
def test_offload_rendering_by_release(version, options, native):
    off = 100 * GIB + 12345
    argv = _argv(_plan(version, kv_cache_memory_bytes=8 * GIB, cpu_offload_bytes=off, **options))
    assert ("--kv-offloading-size" in argv) is native
    assert ("--kv-transfer-config" in argv) is (not native)
    if native:
        size = float(argv[argv.index("--kv-offloading-size") + 1])
        # VllmConfig._post_init_kv_transfer_config: cpu_bytes_to_use = kv_offloading_size * (1 << 30)
        assert size * (1 << 30) == off
        assert argv[argv.index("--kv-offloading-backend") + 1] == "native"
        assert "--kv-offloading-backend" in FLAGS["0.34.0"]["flags"]


@pytest.mark.parametrize("flag", ["--kv-offloading-size", "--kv-offloading-backend"])
def test_offload_flags_in_extra_args_point_at_cpu_offload_bytes(flag):
    (finding,) = va.check_extra_args([flag, "4"])
    assert finding["code"] == "planner_owned_flag" and "cpu_offload_bytes" in finding["fix"]


def test_a_disk_tier_is_refused_with_the_reason():
    # vLLM's disk-backed connector (ExampleConnector, shared_storage_path) never deletes a block: no quota to enforce.
    disk = '{"kv_connector":"ExampleConnector","kv_role":"kv_both","kv_connector_extra_config":{"shared_storage_path":"/d"}}'
    for words in (["--kv-transfer-config", disk], ["--kv-transfer-config=" + disk], ["--kv-transfer-c", disk]):
        (finding,) = va.check_extra_args(words)
        assert finding["level"] == "error" and finding["code"] == "planner_owned_flag"
        assert "a disk tier is not offered" in finding["fix"] and "never deletes" in finding["fix"]


# --- sleep mode and the routes it opens ----------------------------------------------------------------------------

ROUTES_SLEEP = _json(V034, "routes-sleep-mode.json")
ROUTES = _json(V034, "routes.json")


def test_the_table_names_the_routes_sleep_mode_adds_in_034():
    added = sorted(set(ROUTES_SLEEP["routes"]) - set(ROUTES["routes"]))
    assert ROUTES_SLEEP["version"] == "0.34.0" and ROUTES_SLEEP["enable_sleep_mode"] and not ROUTES["enable_sleep_mode"]
    assert list(R.rule_for(R.SLEEP_MODE_ROUTES, "0.34.0")[1]) == added
    assert R.rule_for(R.SLEEP_MODE_ROUTES, "0.33.0")[1] == ()


def test_sleep_mode_in_extra_args_is_refused_naming_the_option():
    result = _plan("0.34.0", kv_cache_memory_bytes=8 * GIB, extra_args=["--enable-sleep-mode"])
    (finding,) = [f for f in result["findings"] if f["code"] == "planner_owned_flag"]
    assert finding["level"] == "error" and "enable_sleep_mode: true" in finding["fix"]


@pytest.mark.parametrize("version, host, platform, code, level", [
    ("0.34.0", "0.0.0.0", "cuda", "sleep_mode_routes_exposed", "error"),
    ("0.34.0", "10.0.0.5", "cuda", "sleep_mode_routes_exposed", "error"),
    ("0.34.0", "127.0.0.1", "cuda", "sleep_mode_unguarded_routes", "warning"),
    ("0.33.0", "0.0.0.0", "cuda", None, None),
])
def test_sleep_mode_asked_for(version, host, platform, code, level):
    result = _plan(version, kv_cache_memory_bytes=8 * GIB, enable_sleep_mode=True, host=host)
    found = [f for f in result["findings"] if f["code"].startswith("sleep_mode")]
    assert "--enable-sleep-mode" in _argv(result)
    if code is None:
        assert found == []
        return
    assert [(f["code"], f["level"]) for f in found] == [(code, level)]
    assert "/checkpoint/prepare" in found[0]["message"] and "enable_sleep_mode" in found[0]["fix"]


def test_sleep_mode_on_the_cpu_build_is_an_error():
    raw = _json(FIXTURES, "model-configs", "Qwen__Qwen3-8B.config.json")
    p = dict(model="unused", platform="cpu", max_model_len=2048, kv_cache_memory_bytes=GIB, enable_sleep_mode=True,
             tensor_parallel_size=1, pipeline_parallel_size=1, instances=1, kv_cache_dtype="auto",
             enable_prefix_caching=True, host="127.0.0.1", port_base=8000, vllm_version="0.32.0", extra_args=[])
    assert "sleep_mode_on_cpu" in _codes(build_plan(p, raw, "unused", weights_total=GIB), "error")


def test_no_sleep_mode_unless_asked():
    assert "--enable-sleep-mode" not in _argv(_plan("0.34.0", kv_cache_memory_bytes=8 * GIB))


# --- parser registries: 0.34.0 renamed musespark1x ----------------------------------------------------------------

def test_034_parser_registries_are_the_release_own():
    real = _json(V034, "parsers.json")
    release, tools, reasonings = va.registry_for("0.34.0")
    assert (release, sorted(tools), sorted(reasonings)) == ("0.34.0", real["tool_parsers"], real["reasoning_parsers"])


@pytest.mark.parametrize("version, codes", [("0.33.0", []), ("0.34.0", ["unknown_tool_parser", "unknown_reasoning_parser"])])
def test_renamed_parser_is_refused_with_the_new_name(version, codes):
    found = va.check_parsers("other", "musespark1x", "musespark1x", version)
    assert [f["code"] for f in found] == codes
    assert all("use musespark " in f["fix"] and version in f["message"] for f in found)
