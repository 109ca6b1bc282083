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
  vocabulary (sorts: several fp32/int64 copies of the logits), V2's skips top-k/top-p in profiling.
* ``calibration_from_log``: the terms one engine printed at boot ("Actual usage is W GiB for weight, A GiB
  for peak activation, N GiB for non-torch memory, and G GiB for CUDAGraph memory", "Available KV cache
  memory", "Free memory on device (F/T GiB)"), so a host already serving (or the GPU acceptance run) gives
  the planner its measured overhead.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.vllm.plugins.module_utils import kv_capacity as kv

GIB = kv.GIB

# (first release the rule was read in, runner per family, the source). Families: dense, moe, moe_v2_arch, hybrid.
RUNNER_RULES = (
    ((0, 0, 0), {"dense": "v1", "moe": "v1", "moe_v2_arch": "v1", "hybrid": "v1"},
     "not read before 0.26.0: assumed V1 (it takes more memory off)"),
    ((0, 26, 0), {"dense": "v2", "moe": "v1", "moe_v2_arch": "v2", "hybrid": "v1"},
     "vLLM 0.26.0 VllmConfig.use_v2_model_runner / _is_default_v2_model_runner_model"),
    ((0, 32, 0), {"dense": "v2", "moe": "v2", "moe_v2_arch": "v2", "hybrid": "v2"},
     "vLLM 0.32.0 VllmConfig.use_v2_model_runner (no per-family default any more)"),
)
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
    since, table, source = [r for r in RUNNER_RULES if version >= r[0]][-1]
    family = runner_family(cfg)
    if speculative_method in V1_ONLY_SPECULATIVE:
        return "v1", "%s speculative decoding runs on V1 (%s)" % (speculative_method, source)
    return table[family], "%s model on vLLM %s: %s" % (family, ".".join(str(x) for x in version[:3]), source)


_USAGE = re.compile(r"Actual usage is ([\d.]+) GiB for weight, ([\d.]+) GiB for peak activation, ([\d.]+) GiB for "
                    r"non-torch memory, and ([\d.]+) GiB for CUDAGraph memory")
_AVAILABLE = re.compile(r"Available KV cache memory: (-?[\d.]+) GiB")
_DEVICE = re.compile(r"Free memory on device \(([\d.]+)/([\d.]+) GiB\) on startup\. Desired GPU memory utilization is \(([\d.]+),")
# Every figure is printed to 2 decimals of a GiB: each term may be up to half a unit off.
ROUNDING = int(0.005 * GIB)


class CalibrationError(ValueError):
    """A boot log without the lines the calibration needs; the message names them."""


def calibration_from_log(text):
    """The memory terms of one engine's boot log (vLLM 0.26.0 wording), in bytes."""
    usage = _USAGE.search(text or "")
    if not usage:
        raise CalibrationError("calibration_log has no \"Actual usage is W GiB for weight, A GiB for peak activation, N GiB "
                               "for non-torch memory, and G GiB for CUDAGraph memory\" line: give the boot log of an engine "
                               "started with --gpu-memory-utilization (not --kv-cache-memory-bytes), e.g. journalctl -u <unit>")
    weight, activation, non_torch, graphs = (int(round(float(v) * GIB)) for v in usage.groups())
    out = {"weights_bytes": weight, "activation_bytes": activation, "non_torch_bytes": non_torch, "cudagraph_bytes": graphs,
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
