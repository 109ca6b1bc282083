# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Family checks the planner runs before its KV arithmetic (pure functions, no Ansible import).

* Windowed attention: sliding-window layers (Gemma 2/3, gpt-oss, Mistral with
  ``sliding_window``) and chunked-local attention (Llama 4 ``attention_chunk_size``) get
  their own KV-cache groups in vLLM (``SlidingWindowSpec`` / ``ChunkedLocalAttentionSpec``,
  v1/kv_cache_interface.py) with other per-request block counts. The planner does not model
  them yet, so it refuses them by name instead of sizing them as full attention.
* Weight bytes: exact from the index or headers when present; otherwise an estimate from
  config.json (weight_estimate), labelled as one; ``--quantization fp8`` in extra_args shrinks
  an unquantized checkpoint's linear weights to 1 byte each.
* GPU profiles: ``gpus: {profile: h100, count: 4}`` expands to the declared profile.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.vllm.plugins.module_utils import weight_estimate as we
from ansible_collections.gpufleet.vllm.plugins.module_utils.hardware_profiles import ProfileError, hardware_profile
from ansible_collections.gpufleet.vllm.plugins.module_utils.placement import PlacementError


def _finding(level, code, message, fix):
    return {"level": level, "code": code, "message": message, "fix": fix}


def _text(config):
    return config["text_config"] if isinstance(config.get("text_config"), dict) else config


def windowed_attention(config):
    """A description of the model's sliding-window / chunked-local attention, or None when it has none.

    A ``sliding_window`` value counts only when ``use_sliding_window`` is not false: Qwen2/Qwen2.5 configs
    carry a window they do not use (vLLM 0.33 ModelConfig.get_sliding_window ignores it in that case).
    """
    t = _text(config)
    kinds = t.get("layer_types")
    if isinstance(kinds, list):
        windowed = [k for k in kinds if k in ("sliding_attention", "chunked_attention")]
        if windowed:
            window = t.get("sliding_window") or t.get("attention_chunk_size")
            return "%d of %d layers use %s (window %s)" % (len(windowed), len(kinds), windowed[0], window)
    if t.get("attention_chunk_size"):
        return "chunked-local attention (attention_chunk_size %s)" % t["attention_chunk_size"]
    if t.get("sliding_window") and t.get("use_sliding_window", True) is not False:
        return "sliding-window attention (sliding_window %s)" % t["sliding_window"]
    if t.get("sliding_window_pattern") or t.get("interleaved_sliding_window"):
        return "interleaved sliding-window attention"
    return None


def windowed_attention_findings(config):
    desc = windowed_attention(config)
    if not desc:
        return []
    return [_finding("error", "windowed_attention_not_modelled",
                     "the model uses %s; vLLM gives those layers their own KV-cache groups (SlidingWindowSpec / "
                     "ChunkedLocalAttentionSpec) with different page sizes and blocks per request, which this planner "
                     "does not model: treating them as full attention would understate the tokens that fit" % desc,
                     "read the KV figures from vLLM's boot log for this model (gpufleet.vllm.vllm_plan does not size it)")]


def online_quantization(extra_args):
    """The value of --quantization / -q in extra_args, or None."""
    args = [str(a) for a in (extra_args or [])]
    for i, arg in enumerate(args):
        if arg.startswith("--quantization="):
            return arg.split("=", 1)[1]
        if arg in ("--quantization", "-q") and i + 1 < len(args):
            return args[i + 1]
    return None


def resolve_weights(raw_config, extra_args, total, source):
    """(total, source, findings): the weight bytes vLLM loads, exact where files give them, else estimated."""
    findings = []
    online = online_quantization(extra_args)
    checkpoint_quant = we._checkpoint_quant(raw_config)
    if total is None:
        try:
            total, source = we.estimate_weight_bytes(raw_config, None if checkpoint_quant else online)
        except we.EstimateUnavailable as exc:
            findings.append(_finding("warning", "weights_not_estimated", str(exc),
                                     "place model.safetensors.index.json beside config.json (plan.yml fetches it)"))
            return None, "no weights and no estimate: %s" % exc, findings
        findings.append(_finding("info", "weights_estimated", "weight bytes are an %s" % source,
                                 "download the index (model.safetensors.index.json) for the exact total"))
        return total, source, findings
    if online == "fp8" and not checkpoint_quant:
        try:
            saving = we.online_fp8_saving(raw_config)
        except we.EstimateUnavailable as exc:
            findings.append(_finding("warning", "fp8_weights_not_resized",
                                     "--quantization fp8 stores linear weights in 1 byte, but %s" % exc,
                                     "the weight figure stays at the checkpoint's size (an overestimate)"))
            return total, source, findings
        total, source = total - saving, "%s, linear weights at 1 byte (--quantization fp8)" % source
        findings.append(_finding("info", "fp8_online_weights",
                                 "--quantization fp8: %.2f GiB of linear weights drop to 1 byte per parameter" % (saving / 1024.0 ** 3),
                                 "none needed"))
    return total, source, findings


def expand_gpus(gpus):
    """gpus with a ``profile`` key become a declared profile; anything else is returned unchanged."""
    if isinstance(gpus, dict) and gpus.get("profile"):
        try:
            return hardware_profile(gpus["profile"], gpus.get("count", 1), gpus.get("numa_nodes"), gpus.get("nvlink_islands"))
        except (ProfileError, TypeError, ValueError) as exc:
            raise PlacementError("gpus.profile: %s" % exc)
    return gpus
