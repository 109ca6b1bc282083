# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read a Hugging Face model directory without loading it.

``parse_config`` turns a ``config.json`` mapping into the plain figures the KV-cache
planner needs (dense, MoE, VL models with ``text_config``, hybrid linear-attention
models such as Qwen3-Next / Qwen3.5 / Qwen3.6, MLA models). ``weight_bytes`` counts
real tensor bytes from ``model.safetensors.index.json`` or, failing that, from the
safetensors headers (quantized checkpoints included). Pure Python, no Ansible import.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import struct

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError

DTYPE_BYTES = {
    "float32": 4,
    "float": 4,
    "fp32": 4,
    "bfloat16": 2,
    "float16": 2,
    "half": 2,
    "fp16": 2,
    "bf16": 2,
}


class ModelConfigError(UserError, ValueError):
    """The model directory or config.json cannot be used; the message says why and how to fix it."""


def _first(mapping, *keys, **kwargs):
    default = kwargs.get("default")
    for key in keys:
        if key in mapping and mapping[key] is not None:
            return mapping[key]
    return default


def _rope(text, top):
    """Return (rope_theta, rope_scaling dict or None) wherever the checkpoint keeps them."""
    params = _first(text, "rope_parameters") or _first(top, "rope_parameters") or {}
    scaling = _first(text, "rope_scaling") or _first(top, "rope_scaling")
    theta = _first(params, "rope_theta") if isinstance(params, dict) else None
    if theta is None:
        theta = _first(text, "rope_theta", default=_first(top, "rope_theta"))
    if isinstance(params, dict) and params.get("rope_type") not in (None, "default"):
        scaling = params
    if isinstance(scaling, dict) and scaling.get("rope_type", scaling.get("type")) in (None, "default"):
        # mrope descriptions (Qwen3-VL) say "default": no length scaling.
        scaling = None
    return theta, scaling


def _layer_kinds(text, num_layers):
    """List of "full" / "linear" per decoder layer for hybrid models, None for uniform ones."""
    layer_types = text.get("layer_types")
    if isinstance(layer_types, list) and any(t == "linear_attention" for t in layer_types):
        return ["linear" if t == "linear_attention" else "full" for t in layer_types[:num_layers]]
    interval = text.get("full_attention_interval")
    if interval and "linear_num_value_heads" in text:
        # Qwen3-Next: no layer_types; every interval-th layer is full attention.
        return ["full" if (i + 1) % int(interval) == 0 else "linear" for i in range(num_layers)]
    return None


def _require_decoder_keys(text):
    missing = [k for k in ("num_hidden_layers", "num_attention_heads") if k not in text]
    if missing:
        raise ModelConfigError(
            "config.json lacks %s: point `model` at a Hugging Face decoder model directory" % ", ".join(missing)
        )


def _head_dim(text, num_heads, hidden):
    """head_dim as config.json gives it, else hidden_size // num_attention_heads."""
    head_dim = _first(text, "head_dim")
    if head_dim is None:
        if not hidden:
            raise ModelConfigError("config.json has neither head_dim nor hidden_size")
        head_dim = hidden // num_heads
    return head_dim


def _dtype(text, config):
    """The checkpoint dtype's name without "torch." (the text config's, else the top level's, else bfloat16)."""
    dtype = str(_first(text, "dtype", "torch_dtype", default=_first(config, "dtype", "torch_dtype", default="bfloat16")))
    return dtype.replace("torch.", "")


def _hybrid_figures(text, kinds, dtype):
    """Layer counts by kind and the linear-attention (Gated DeltaNet) shapes of a hybrid model."""
    ssm_dtype = str(_first(text, "mamba_ssm_dtype", default=dtype)).replace("torch.", "")
    return {
        "full_attention_layers": kinds.count("full"),
        "linear_attention_layers": kinds.count("linear"),
        "linear": {
            "num_k_heads": int(text["linear_num_key_heads"]),
            "num_v_heads": int(text["linear_num_value_heads"]),
            "k_head_dim": int(text["linear_key_head_dim"]),
            "v_head_dim": int(text["linear_value_head_dim"]),
            "conv_kernel": int(text["linear_conv_kernel_dim"]),
            "ssm_dtype": ssm_dtype,
            "ssm_dtype_bytes": DTYPE_BYTES.get(ssm_dtype, 4),
        },
    }


def _mla_figures(text):
    return {
        "kv_lora_rank": int(text["kv_lora_rank"]),
        "qk_rope_head_dim": int(text["qk_rope_head_dim"]),
    }


def parse_config(config):
    """Return a dict of the figures the planner uses from a config.json mapping.

    Raises ModelConfigError when a required key is missing.
    """
    if not isinstance(config, dict):
        raise ModelConfigError("config.json must hold a JSON object")
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    architectures = config.get("architectures") or text.get("architectures") or []
    model_type = text.get("model_type") or config.get("model_type") or ""
    _require_decoder_keys(text)
    num_layers = int(text["num_hidden_layers"])
    num_heads = int(text["num_attention_heads"])
    num_kv_heads = int(_first(text, "num_key_value_heads", default=num_heads))
    hidden = int(_first(text, "hidden_size", default=0))
    head_dim = _head_dim(text, num_heads, hidden)
    dtype = _dtype(text, config)
    theta, scaling = _rope(text, config)
    quant = config.get("quantization_config") or text.get("quantization_config") or None
    kinds = _layer_kinds(text, num_layers)
    use_mla = bool(text.get("kv_lora_rank")) and "qk_rope_head_dim" in text
    mtp_layers = int(_first(text, "mtp_num_hidden_layers", "num_nextn_predict_layers", default=0) or 0)
    out = {
        "architecture": architectures[0] if architectures else None,
        "model_type": model_type,
        "top_model_type": config.get("model_type") or model_type,
        "dtype": dtype,
        "dtype_bytes": DTYPE_BYTES.get(dtype, 2),
        "num_layers": num_layers,
        "num_attention_heads": num_heads,
        "num_kv_heads": num_kv_heads,
        "head_dim": int(head_dim),
        "hidden_size": hidden,
        "vocab_size": _first(text, "vocab_size"),
        "max_position_embeddings": _first(text, "max_position_embeddings", default=_first(config, "max_position_embeddings")),
        "rope_theta": theta,
        "rope_scaling": scaling,
        "attention": "mla" if use_mla else ("hybrid" if kinds else "full"),
        "is_moe": bool(_first(text, "num_experts", "n_routed_experts", "num_local_experts", default=0)),
        "is_multimodal": "vision_config" in config,
        "mtp_layers": mtp_layers,
        "quantization": (quant or {}).get("quant_method") if isinstance(quant, dict) else None,
        "full_attention_layers": num_layers,
        "linear_attention_layers": 0,
        "linear": None,
        "mla": None,
    }
    if kinds:
        out.update(_hybrid_figures(text, kinds, dtype))
    if use_mla:
        out["mla"] = _mla_figures(text)
    return out


def model_family(cfg):
    """A short family name used for parser advice: qwen3, qwen3_moe, qwen3_vl, qwen3_next, qwen3_5, deepseek, llama, other."""
    mt = (cfg.get("model_type") or "").lower()
    top = (cfg.get("top_model_type") or "").lower()
    for key in ("qwen3_5", "qwen3_next", "qwen3_vl", "qwen3_moe", "qwen3"):
        if mt.startswith(key) or top.startswith(key):
            return key
    if mt.startswith("deepseek") or top.startswith("deepseek"):
        return "deepseek"
    if mt.startswith("llama"):
        return "llama"
    return "other"


def read_config(path):
    """Load config.json from a model directory or a config.json path. Returns (model_dir, mapping)."""
    if os.path.isdir(path):
        model_dir, cfg_path = path, os.path.join(path, "config.json")
    else:
        model_dir, cfg_path = os.path.dirname(path) or ".", path
    if not os.path.isfile(cfg_path):
        raise ModelConfigError(
            "no config.json at %s: set `model` to a downloaded model directory (model_weights role) or its config.json" % cfg_path
        )
    try:
        with open(cfg_path, "rb") as fh:
            return model_dir, json.loads(fh.read().decode("utf-8"))
    except ValueError as exc:
        raise ModelConfigError("%s is not valid JSON (%s): re-download the snapshot" % (cfg_path, exc))


def safetensors_header_bytes(path):
    """Sum of tensor data bytes declared in one .safetensors file header (no tensor is read)."""
    with open(path, "rb") as fh:
        raw = fh.read(8)
        if len(raw) != 8:
            raise ModelConfigError("%s is truncated (no safetensors header)" % path)
        (length,) = struct.unpack("<Q", raw)
        if length > 100 * 1024 * 1024:
            raise ModelConfigError("%s has an implausible header length %d" % (path, length))
        header = _json_or_error(fh.read(length), path, "safetensors header")
    if not isinstance(header, dict):
        raise ModelConfigError("%s has a safetensors header that is not a JSON object: re-download the file" % path)
    total = 0
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        offsets = meta.get("data_offsets") if isinstance(meta, dict) else None
        if (not isinstance(offsets, list) or len(offsets) != 2 or not all(_is_int(x) for x in offsets)
                or not 0 <= offsets[0] <= offsets[1]):
            raise ModelConfigError("%s: tensor %r has no valid data_offsets [start, end] in its safetensors header: "
                                   "re-download the file" % (path, name))
        total += offsets[1] - offsets[0]
    return total


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _json_or_error(data, path, what):
    """json.loads for a file the planner reads; a malformed one names the file (never a traceback)."""
    try:
        return json.loads(data.decode("utf-8"))
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are both ValueErrors
        raise ModelConfigError("%s: the %s is not valid UTF-8 JSON (%s): re-download the file" % (path, what, exc))


def weight_bytes(model_dir):
    """Return (bytes, source) of the checkpoint's tensor data, or (None, reason) when there are no weights."""
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.isfile(index):
        with open(index, "rb") as fh:
            data = _json_or_error(fh.read(), index, "index")
        metadata = data.get("metadata") if isinstance(data, dict) else None
        weight_map = data.get("weight_map") if isinstance(data, dict) else None
        if not isinstance(metadata or {}, dict) or not isinstance(weight_map or {}, dict) \
                or not all(isinstance(v, str) for v in (weight_map or {}).values()):
            raise ModelConfigError("%s: expected {metadata: {total_size}, weight_map: {tensor: file}}: re-download the index" % index)
        total = (metadata or {}).get("total_size")
        if total is not None:
            if not _is_int(total) or total < 0:
                raise ModelConfigError("%s: metadata.total_size must be a non-negative integer, got %r" % (index, total))
            return total, "model.safetensors.index.json metadata.total_size"
        shards = sorted(set(v for v in (weight_map or {}).values() if os.path.basename(v) == v))
        if shards and all(os.path.isfile(os.path.join(model_dir, s)) for s in shards):
            return sum(safetensors_header_bytes(os.path.join(model_dir, s)) for s in shards), "safetensors headers (index lists shards)"
    files = sorted(f for f in os.listdir(model_dir) if f.endswith(".safetensors"))
    if files:
        return sum(safetensors_header_bytes(os.path.join(model_dir, f)) for f in files), "safetensors headers"
    return None, "no safetensors files (config-only directory)"
