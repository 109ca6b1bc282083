# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What vLLM takes off the GPU before the KV cache, per release and model family (pure, no Ansible import).

Two parts:

* ``model_runner``: the model runner the installed release uses for a model, in ONE table
  (``RUNNER_RULES``), read in each release's ``vllm/config/vllm.py`` ``VllmConfig.use_v2_model_runner``:
  - 0.26.0: the newer runner (V2, ``vllm/v1/worker/gpu/model_runner.py``) by default for generate models
    that are neither hybrid (``model_config.is_hybrid``) nor attention-free and either not MoE or one of
    ``DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES`` (DeepseekV2, GraniteMoe, Inkling, LongcatFlashNgram,
    Qwen2Moe); the older runner (V1, ``vllm/v1/worker/gpu_model_runner.py``) otherwise, and for the features
    ``_get_v2_model_runner_unsupported_features`` lists (here: ngram speculative decoding);
  - 0.32.0 (the CPU build's shared config code): V2 for every family unless a feature V2 lacks;
  - releases in between follow the last one read below them; before 0.26.0 (not read) the planner assumes V1,
    the runner that takes more memory off (so the estimate stays on the low side).
  ``VLLM_USE_V2_MODEL_RUNNER`` in the instance's environment overrides the table, as it does in vLLM.
  The real 0.26.0 engine logs "Using V2 Model Runner" (gpu_worker.py) exactly for the dense cases of
  tests/fixtures/gpu-acceptance and not for the MoE and hybrid ones.
* What each runner subtracts (0.26.0 ``gpu_worker.determine_available_memory``): requested - weights -
  non-torch increase - torch peak of ``profile_run`` - the CUDA-graph estimate of
  ``model_runner.profile_cudagraph_memory()``. V2's returns 0 (graphs are captured after the KV cache is
  sized), V1's measures a capture (subtracted by default since 0.21, ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS``).
  V1's ``_dummy_sampler_run`` samples ``max_num_seqs`` dummy requests WITH top-k/top-p over the whole
  vocabulary (with Triton top-k/top-p in place: the float32 cast, the softmax probs and the exponential
  noise), V2's skips top-k/top-p in profiling (one float32 cast).
* ``profile_overhead``: that subtraction modelled from config.json for the utilization-only estimate
  (``scheduler_defaults`` per release and GPU class, ``forward_peak``, the sampler's logits copies), with
  bounds for what vLLM measures at boot (non-torch growth, V1's CUDA-graph estimate). Real H200 runs,
  graphs on and eager: 0.15-0.61 % under the engine, never above (test_planner_graphs_calibration.py).
* ``calibration_from_log``: the terms one engine printed at boot ("Actual usage is W GiB for weight, A GiB
  for peak activation, N GiB for non-torch memory, and G GiB for CUDAGraph memory", "Available KV cache
  memory", "Free memory on device (F/T GiB)", and V1's "Estimated CUDA graph memory: X GiB total", the graph
  memory it subtracted; the "Actual usage" graph figure is the capture made after sizing), so a host already
  serving (or the GPU acceptance run) gives the planner its measured overhead.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import re

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import kv_capacity as kv
from ansible_collections.gpufleet.vllm.plugins.module_utils import releases as R

GIB = kv.GIB

# Runner per family and release: releases.RUNNER_RULES (read at call time: the table is the one copy).
DEFAULT_V2_MOE_ARCHITECTURES = ("DeepseekV2ForCausalLM", "GraniteMoeForCausalLM", "InklingForCausalLM",
                                "InklingForConditionalGeneration", "LongcatFlashNgramForCausalLM", "Qwen2MoeForCausalLM")
V1_ONLY_SPECULATIVE = ("ngram", "ngram_gpu")


def runner_family(cfg):
    """dense, moe, moe_v2_arch (a MoE architecture 0.26 runs on V2 anyway) or hybrid."""
    if cfg.get("linear"):
        return "hybrid"
    if cfg.get("is_moe"):
        return "moe_v2_arch" if cfg.get("architecture") in DEFAULT_V2_MOE_ARCHITECTURES else "moe"
    return "dense"


def model_runner(cfg, vllm_version, speculative_method=None, environment=None):
    """(runner "v1" | "v2", reason) the installed release uses for this model."""
    forced = str((environment or {}).get("VLLM_USE_V2_MODEL_RUNNER", "")).strip().lower()
    if forced in ("0", "false", "1", "true"):
        return ("v2" if forced in ("1", "true") else "v1"), "VLLM_USE_V2_MODEL_RUNNER=%s in the environment" % forced
    version = kv.parse_version(vllm_version)
    since, table, source = R.rule_for(R.RUNNER_RULES, version)
    family = runner_family(cfg)
    if speculative_method in V1_ONLY_SPECULATIVE:
        return "v1", "%s speculative decoding runs on V1 (%s)" % (speculative_method, source)
    return table[family], "%s model on vLLM %s: %s" % (family, ".".join(str(x) for x in version[:3]), source)


# Scheduler defaults per release and GPU class: releases.SCHEDULER_RULES.


def scheduler_defaults(memory_total, gpu_name=None, vllm_version="0.26.0", compute_capability=None):
    """(max_num_batched_tokens, max_num_seqs) vLLM's OpenAI server picks for this GPU (memory_total: the CUDA total)."""
    tiers = R.rule_for(R.SCHEDULER_RULES, vllm_version or "0.26.0")[1]
    name = str(gpu_name or "").lower()
    cc = kv.parse_cc(compute_capability) if compute_capability else None
    for min_gib, names, cc_out, defaults in tiers:
        if (memory_total or 0) >= min_gib * GIB and not any(n in name for n in names) and not (cc_out and cc == cc_out):
            return defaults
    return R.SMALL_GPU_SCHEDULER_DEFAULTS


# Bytes per logit of the sampler warm-up in ``profile_run`` (``_dummy_sampler_run`` over
# min(max_num_seqs, max_num_batched_tokens) dummy requests, the whole vocabulary each):
# V2 (v1/worker/gpu/model_runner.py, "the sampler may skip top_k, top_p"): the model-dtype logits of
# compute_logits + their float32 copy. V1 (v1/worker/gpu_model_runner.py, top_k/top_p set, not all greedy):
# Sampler.forward's ``logits.to(torch.float32)``, TopKTopPSampler's ``logits.softmax(dtype=torch.float32)``
# and random_sample's exponential noise ``empty_like(probs)``: three float32 copies beside the model-dtype one.
SAMPLER_FP32_COPIES = {"v1": 3, "v2": 1}
# CUDA-graph memory the V1 runner subtracts: profile_cudagraph_memory() CAPTURES the two largest graphs of
# each mode and extrapolates (first capture + per-graph x the rest); it is measured at boot, not computable
# from the config. Bound used: 1 GiB per GPU (0.26.0 / H200 measured 0.64 GiB MoE, 0.96 GiB hybrid at the
# default 51 + 51 capture sizes up to 512). calibration_log gives the exact figure.
V1_CUDAGRAPH_BOUND = int(1.0 * GIB)
# CUDA graphs CAPTURED after the KV cache is allocated (both runners; "Graph capturing finished ... took X GiB",
# "CUDA graph pool memory: X GiB (actual)"): measured 1.00 GiB dense Qwen3-8B (V2), 0.80 MoE, 1.14 hybrid (V1) on
# 0.26.0 / H200 at the default capture sizes. Used by the OOM check of kv_cache_memory_bytes plans.
GRAPH_CAPTURE_BOUND = int(1.25 * GIB)
# Non-torch memory growth during profiling (NCCL, cuBLAS workspaces): measured at boot. Bound: 0.25 GiB
# (measured 0.22 / 0.24 / 0.25 GiB at TP1, 0.06 at TP2).
NON_TORCH_BOUND = int(0.25 * GIB)


def capture_sizes(max_num_seqs, batched, num_speculative_tokens=0):
    """vLLM 0.26.0 VllmConfig._set_cudagraph_sizes: the largest size is min(max_num_seqs x (1 + speculative
    tokens) x 2, 512, max_num_batched_tokens); sizes 1, 2, 4, then every 8 below 256, then every 16."""
    top = min(int(max_num_seqs) * (1 + int(num_speculative_tokens or 0)) * 2, 512, int(batched))
    sizes = set(i for i in (1, 2, 4) if i <= top) | set(range(8, min(top + 1, 256), 8)) | set(range(256, top + 1, 16))
    if batched <= top:
        sizes.add(int(batched))
    return len(sizes)


DEFAULT_CAPTURE_SIZES = 51  # 1024 sequences, no speculative tokens: sizes up to 512 (the real logs' "PIECEWISE=51")


def graph_bound(bound, seqs, batched, spec):
    """A graph-memory bound measured at the default 51 capture sizes, scaled to this capture set (fewer graphs, smaller
    largest graph; the real V2 dense engine took 1.00 GiB at the default, 0.17 GiB with --max-num-seqs 32)."""
    return int(bound * min(1.0, capture_sizes(seqs, batched, spec) / float(DEFAULT_CAPTURE_SIZES)))


def forward_peak(text, cfg, tp, batched):
    """Largest activation of the profile forward at max_num_batched_tokens, per GPU: the MLP's gate_up
    output (2 x intermediate) and its activation's output (intermediate) live together; a MoE layer's
    fused_moe intermediate caches instead: tokens x top_k x (2N + N) and tokens x top_k x hidden
    (vllm/model_executor/layers/fused_moe intermediate_cache1/2/3)."""
    dtype = cfg.get("dtype_bytes", 2)
    n_moe = text.get("moe_intermediate_size")
    top_k = text.get("num_experts_per_tok")
    if cfg.get("is_moe") and n_moe and top_k:
        return batched * int(top_k) * (3 * (int(n_moe) // max(tp, 1)) + int(cfg.get("hidden_size") or 0)) * dtype
    inter = text.get("intermediate_size") or 4 * (cfg.get("hidden_size") or 0)
    return batched * 3 * (int(inter) // max(tp, 1)) * dtype


def capture_overhead(memory_total, gpu=None):
    """The CUDA graphs captured after the KV cache is allocated (GRAPH_CAPTURE_BOUND scaled to the capture set)."""
    gpu = gpu or {}
    batched, seqs = scheduler_defaults(memory_total, gpu.get("name"), gpu.get("vllm_version"), gpu.get("compute_capability"))
    batched, seqs = int(gpu.get("max_num_batched_tokens") or batched), int(gpu.get("max_num_seqs") or seqs)
    return graph_bound(GRAPH_CAPTURE_BOUND, seqs, batched, gpu.get("num_speculative_tokens"))


def profile_overhead(text, cfg, tp, memory_total, runner="v2", eager=False, gpu=None):
    """What determine_available_memory subtracts besides the weights, per GPU: non-torch growth (bound),
    the torch peak of profile_run (forward + sampler warm-up, summed: their max is what the engine sees,
    the sum keeps the figure on the low side of the engine's KV), and on V1 with graphs the CUDA-graph
    estimate (bound). V2's profile_cudagraph_memory returns 0: graphs are captured after the KV cache.
    ``gpu``: {name, compute_capability, vllm_version, max_num_batched_tokens, max_num_seqs, num_speculative_tokens} (all optional;
    the last two are the engine's --max-num-batched-tokens / --max-num-seqs when given)."""
    gpu = gpu or {}
    batched, seqs = scheduler_defaults(memory_total, gpu.get("name"), gpu.get("vllm_version"), gpu.get("compute_capability"))
    batched, seqs = int(gpu.get("max_num_batched_tokens") or batched), int(gpu.get("max_num_seqs") or seqs)
    graphs = graph_bound(V1_CUDAGRAPH_BOUND, seqs, batched, gpu.get("num_speculative_tokens")) if runner == "v1" and not eager else 0
    return NON_TORCH_BOUND + activation_peak(text, cfg, tp, memory_total, runner, gpu) + graphs


def activation_peak(text, cfg, tp, memory_total, runner="v2", gpu=None):
    """The torch peak of the profile run per GPU: the forward at max_num_batched_tokens plus the sampler's
    logits copies over min(max_num_seqs, max_num_batched_tokens) requests (summed: the low side of the KV)."""
    gpu = gpu or {}
    batched, seqs = scheduler_defaults(memory_total, gpu.get("name"), gpu.get("vllm_version"), gpu.get("compute_capability"))
    batched, seqs = int(gpu.get("max_num_batched_tokens") or batched), int(gpu.get("max_num_seqs") or seqs)
    logits = min(seqs, batched) * int(cfg.get("vocab_size") or 0) * (cfg.get("dtype_bytes", 2) + 4 * SAMPLER_FP32_COPIES[runner])
    return forward_peak(text, cfg, tp, batched) + logits


# Memory in use on a GPU before vLLM's first snapshot (CUDA context, NCCL at TP > 1): "Free memory on device
# (F/T GiB) on startup" of the real 0.26.0 H200 engines (tests/fixtures/gpu-acceptance, tests/fixtures/startup):
# 139.29/139.8 at TP 1 (0.51 GiB), 138.27/139.8 at TP 2 (1.53 GiB). The extensible KV cache is bounded by it.
STARTUP_USED = {1: int(0.51 * GIB), 2: int(1.53 * GIB)}


def extensible_kv_bytes(rule, memory_total, utilization, weights, non_torch, graphs, peak, tp=1):
    """vLLM 0.34's extensible KV cache per GPU (v1/worker/extensible_kv_cache.py measure_kv_cache_bytes):
    non-KV resident = weights + non-torch + the captured CUDA graphs; available = min(requested - resident,
    free at start - resident - margin) - activation peak, margin = max(floor, fraction x peak). ``rule``: the
    releases.KV_SIZING_RULES value; ``utilization``: the given fraction or the rule's default (1.0)."""
    resident = weights + non_torch + graphs
    init_free = memory_total - STARTUP_USED[1 if tp <= 1 else 2]
    requested = int(math.ceil(utilization * memory_total))  # v1/worker/utils.py request_memory
    margin = max(rule["margin_floor"], int(peak * rule["margin_fraction"]))
    return max(min(requested - resident, init_free - resident - margin) - peak, 0)


_USAGE = re.compile(r"Actual usage is ([\d.]+) GiB for weight, ([\d.]+) GiB for peak activation, ([\d.]+) GiB for "
                    r"non-torch memory, and ([\d.]+) GiB for CUDAGraph memory")
_AVAILABLE = re.compile(r"Available KV cache memory: (-?[\d.]+) GiB")
_ESTIMATED_GRAPHS = re.compile(r"Estimated CUDA graph memory: ([\d.]+) GiB total")
_DEVICE = re.compile(r"Free memory on device \(([\d.]+)/([\d.]+) GiB\) on startup\. Desired GPU memory utilization is \(([\d.]+),")
# Every figure is printed to 2 decimals of a GiB: each term may be up to half a unit off.
ROUNDING = int(0.005 * GIB)


class CalibrationError(UserError, ValueError):
    """A boot log without the lines the calibration needs; the message names them."""


def calibration_from_log(text):
    """The memory terms of one engine's boot log (vLLM 0.26.0 wording), in bytes."""
    usage = _USAGE.search(text or "")
    if not usage:
        raise CalibrationError("calibration_log has no \"Actual usage is W GiB for weight, A GiB for peak activation, N GiB "
                               "for non-torch memory, and G GiB for CUDAGraph memory\" line: give the boot log of an engine "
                               "started with --gpu-memory-utilization (not --kv-cache-memory-bytes), e.g. journalctl -u <unit>")
    weight, activation, non_torch, captured = (int(round(float(v) * GIB)) for v in usage.groups())
    # The graph memory determine_available_memory SUBTRACTED: V1's "Estimated CUDA graph memory" (the
    # "Actual usage" figure is the capture made after sizing); V2 and eager engines subtract none.
    estimated = _ESTIMATED_GRAPHS.search(text)
    if "CUDA graph memory profiling is disabled" in text:  # VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0
        estimated = None
    out = {"weights_bytes": weight, "activation_bytes": activation, "non_torch_bytes": non_torch,
           "cudagraph_captured_bytes": captured,
           "cudagraph_bytes": int(round(float(estimated.group(1)) * GIB)) if estimated else 0,
           "runner": "v2" if "Using V2 Model Runner" in text else "v1"}
    available = _AVAILABLE.search(text)
    device = _DEVICE.search(text)
    out["available_kv_bytes"] = int(round(float(available.group(1)) * GIB)) if available else None
    out["cuda_total_gib"] = float(device.group(2)) if device else None
    out["gpu_memory_utilization"] = float(device.group(3)) if device else None
    return out


def calibrated_overhead(cal):
    """Per-GPU bytes besides the weights, from the log's terms, each taken at the top of its rounding."""
    return cal["activation_bytes"] + cal["non_torch_bytes"] + cal["cudagraph_bytes"] + 3 * ROUNDING


def calibrated_weights(cal):
    return cal["weights_bytes"] + ROUNDING
