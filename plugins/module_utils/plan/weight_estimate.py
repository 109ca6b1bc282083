# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checkpoint weight bytes from config.json alone (plan before download).

``count_params`` counts the parameters of the families the planner supports from the
shapes in config.json, split into what quantization touches (``linear``: the decoder's
projection and expert matrices) and what it leaves at the checkpoint dtype (embeddings,
lm_head, norms, biases, convolutions, vision encoder). The tensor list follows the Hugging
Face modeling files of each family (qwen2/qwen3/qwen3_moe/llama/mistral/mixtral,
qwen3_next, qwen3_5, qwen3_vl). ``estimate_weight_bytes`` turns the count into bytes for
the checkpoint dtype or quantization. The result is an estimate and is labelled as one;
an index's ``metadata.total_size`` or the safetensors headers stay the exact source.
Pure Python, no Ansible import.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError

DENSE_TYPES = ("llama", "mistral", "qwen2", "qwen3")
MOE_TYPES = ("qwen3_moe", "mixtral", "qwen2_moe")
HYBRID_TYPES = ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text")
VL_TEXT_TYPES = ("qwen3_vl_text", "qwen3_vl_moe_text")
QK_NORM_TYPES = ("qwen3", "qwen3_moe", "qwen3_next", "qwen3_5_text", "qwen3_5_moe_text") + VL_TEXT_TYPES
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


class EstimateUnavailable(UserError, ValueError):
    """The family or quantization is one this module does not count; the message says what to give instead."""


def _text(config):
    return config["text_config"] if isinstance(config.get("text_config"), dict) else config


def _attention(t, mt):
    """(linear, other) parameters of one softmax-attention block incl. its q/k norms and biases."""
    h, nh, nkv = t["hidden_size"], t["num_attention_heads"], t.get("num_key_value_heads") or t["num_attention_heads"]
    hd = t.get("head_dim") or h // nh
    q_out = nh * hd * (2 if t.get("attn_output_gate") else 1)
    linear = h * q_out + 2 * h * nkv * hd + nh * hd * h
    other = 0
    if mt == "qwen2" or t.get("attention_bias"):
        other += q_out + 2 * nkv * hd + (h if t.get("attention_bias") and mt != "qwen2" else 0)
    if mt in QK_NORM_TYPES:
        other += 2 * hd
    return linear, other


def _gated_deltanet(t):
    """(linear, other) of one Gated DeltaNet block (Qwen3NextGatedDeltaNet / Qwen3_5GatedDeltaNet)."""
    h = t["hidden_size"]
    nk, nv = t["linear_num_key_heads"], t["linear_num_value_heads"]
    key_dim, value_dim = nk * t["linear_key_head_dim"], nv * t["linear_value_head_dim"]
    # in_proj_qkvz (or in_proj_qkv + in_proj_z) + in_proj_ba (or in_proj_b + in_proj_a) + out_proj
    linear = h * (2 * key_dim + 2 * value_dim) + h * 2 * nv + value_dim * h
    conv = (2 * key_dim + value_dim) * t["linear_conv_kernel_dim"]
    other = conv + 2 * nv + t["linear_value_head_dim"]  # conv1d, dt_bias + A_log, gated RMSNorm
    return linear, other


def _mlp(t, mt, layer):
    """(linear, other) of one layer's MLP: dense, or routed experts + router (+ shared expert)."""
    h = t["hidden_size"]
    experts = t.get("num_experts") or t.get("num_local_experts") or 0
    sparse = experts and layer not in (t.get("mlp_only_layers") or []) and (layer + 1) % (t.get("decoder_sparse_step") or 1) == 0
    if not sparse:
        return 3 * h * t["intermediate_size"], 0
    inter = t.get("moe_intermediate_size") or t["intermediate_size"]
    linear = experts * 3 * h * inter
    other = h * experts  # router (kept unquantized by vLLM's FP8/INT4 methods: ReplicatedLinear gate)
    shared = t.get("shared_expert_intermediate_size") or 0
    if shared:
        linear += 3 * h * shared
        other += h  # shared_expert_gate
    return linear, other


def _layer_is_linear(t, i):
    kinds = t.get("layer_types")
    if isinstance(kinds, list) and i < len(kinds):
        return kinds[i] == "linear_attention"
    interval = t.get("full_attention_interval")
    return bool(interval and "linear_num_value_heads" in t and (i + 1) % int(interval))


def _decoder(t, mt):
    linear = other = 0
    for i in range(t["num_hidden_layers"]):
        a = _gated_deltanet(t) if _layer_is_linear(t, i) else _attention(t, mt)
        m = _mlp(t, mt, i)
        linear += a[0] + m[0]
        other += a[1] + m[1] + 2 * t["hidden_size"]  # input + post-attention norms
    return linear, other + t["hidden_size"]  # final norm


def _mtp(t, mt):
    """Qwen3-Next / Qwen3.5 MTP head: fc (2h -> h), two pre-fc norms, its decoder layers, a norm."""
    n = int(t.get("mtp_num_hidden_layers") or 0)
    if not n or mt not in HYBRID_TYPES:
        return 0, 0
    h = t["hidden_size"]
    a, m = _attention(t, mt), _mlp(t, mt, 0)
    linear = 2 * h * h + n * (a[0] + m[0])
    other = 3 * h + n * (a[1] + m[1] + 2 * h)
    return linear, other


def _vision(config):
    """Qwen3-VL / Qwen3.5 vision tower (patch embed, position embedding, blocks, merger, deepstack mergers)."""
    v = config.get("vision_config")
    if not isinstance(v, dict):
        return 0
    h, inter, depth = v["hidden_size"], v["intermediate_size"], v["depth"]
    merged = h * v.get("spatial_merge_size", 2) ** 2
    patch = v.get("in_channels", 3) * v.get("temporal_patch_size", 2) * v["patch_size"] ** 2 * h + h
    pos = v.get("num_position_embeddings", 0) * h
    block = 2 * 2 * h + (h * 3 * h + 3 * h) + (h * h + h) + (h * inter + inter) + (inter * h + h)
    fc = (merged * merged + merged) + (merged * v["out_hidden_size"] + v["out_hidden_size"])
    merger = 2 * h + fc
    deepstack = len(v.get("deepstack_visual_indexes") or []) * (2 * merged + fc)
    return patch + pos + depth * block + merger + deepstack


def count_params(config):
    """Parameter counts {linear, embedding, other, vision, total} of a supported family; raises EstimateUnavailable."""
    t = _text(config)
    mt = (t.get("model_type") or config.get("model_type") or "").lower()
    if mt not in DENSE_TYPES + MOE_TYPES + HYBRID_TYPES + VL_TEXT_TYPES:
        raise EstimateUnavailable(
            "no parameter count for model_type %r (counted: %s): give the model's model.safetensors.index.json"
            % (mt, ", ".join(DENSE_TYPES + MOE_TYPES + HYBRID_TYPES + VL_TEXT_TYPES)))
    try:
        linear, other = _decoder(t, mt)
        mtp = _mtp(t, mt)
        vision = _vision(config)
        emb = t["vocab_size"] * t["hidden_size"]
    except (KeyError, TypeError) as exc:  # a missing or null field (vocab_size: null)
        raise EstimateUnavailable("config.json lacks a usable field needed to count parameters (%s): give the index" % exc)
    tied = t.get("tie_word_embeddings", config.get("tie_word_embeddings", False))
    out = {"linear": linear + mtp[0], "embedding": emb * (1 if tied else 2), "other": other + mtp[1], "vision": vision}
    out["total"] = sum(out.values())
    return out


def _checkpoint_quant(config):
    q = config.get("quantization_config") or _text(config).get("quantization_config")
    return q if isinstance(q, dict) else None


def _linear_bytes_per_param(quant):
    """Bytes per decoder linear parameter for a uniform quantization scheme, or raise EstimateUnavailable.

    fp8: 1 byte + one float32 scale per 128x128 block when ``weight_block_size`` is set.
    4/8-bit integer (GPTQ, AWQ, compressed-tensors pack-quantized): bits/8 + a 16-bit scale per group
    (+ a zero point per group when asymmetric).
    """
    method = (quant.get("quant_method") or "").lower()
    if method == "fp8":
        block = quant.get("weight_block_size")
        return 1.0 + (4.0 / (block[0] * block[1]) if block else 0.0)
    if method in ("gptq", "awq"):
        bits, group = int(quant.get("bits", 4)), int(quant.get("group_size", 128))
        return bits / 8.0 + 2.0 / group + (bits / 8.0 / group)
    if method == "compressed-tensors":
        groups = list((quant.get("config_groups") or {}).values())
        weights = [g.get("weights") or {} for g in groups]
        if len(weights) == 1 and weights[0].get("type") == "int":
            w = weights[0]
            group = int(w.get("group_size") or 128)
            return w["num_bits"] / 8.0 + 2.0 / group + (0.0 if w.get("symmetric", True) else w["num_bits"] / 8.0 / group)
    raise EstimateUnavailable(
        "the checkpoint's quantization_config (quant_method %r) is not one uniform scheme this estimate sizes: "
        "give the model's model.safetensors.index.json (its metadata.total_size is exact)" % method)


def estimate_weight_bytes(config, online_quantization=None):
    """(bytes, description) of the weights vLLM loads, estimated from config.json.

    online_quantization: vLLM's --quantization for an unquantized checkpoint; "fp8" stores the decoder's
    linear and expert weights in 1 byte (per-tensor scale; vLLM 0.33 Fp8LinearMethod / Fp8MoEMethod with
    is_checkpoint_fp8_serialized False), embeddings, lm_head, norms and the vision tower stay at the
    checkpoint dtype.
    """
    counts = count_params(config)
    t = _text(config)
    dtype = str(t.get("dtype") or t.get("torch_dtype") or config.get("dtype") or config.get("torch_dtype") or "bfloat16")
    base = DTYPE_BYTES.get(dtype.replace("torch.", ""), 2)
    quant = _checkpoint_quant(config)
    rest = (counts["embedding"] + counts["other"] + counts["vision"]) * base
    if quant:
        per = _linear_bytes_per_param(quant)
        label = "checkpoint quantization %s" % quant.get("quant_method")
    elif online_quantization == "fp8":
        per, label = 1.0, "online fp8 (--quantization fp8)"
    elif online_quantization:
        raise EstimateUnavailable("--quantization %s is not one this estimate sizes (fp8 is)" % online_quantization)
    else:
        per, label = float(base), dtype
    total = int(rest + counts["linear"] * per)
    return total, "estimate from config.json: %.3fB parameters, %s" % (counts["total"] / 1e9, label)


def online_fp8_saving(config):
    """Bytes vLLM's online fp8 saves on an unquantized checkpoint: the linear weights drop to 1 byte each."""
    counts = count_params(config)
    t = _text(config)
    dtype = str(t.get("dtype") or t.get("torch_dtype") or config.get("dtype") or config.get("torch_dtype") or "bfloat16")
    return counts["linear"] * (DTYPE_BYTES.get(dtype.replace("torch.", ""), 2) - 1)
