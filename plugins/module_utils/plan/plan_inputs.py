# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Validate vllm_plan's options, the ``gpus`` mapping and config.json's figures before planning (pure).

Every refusal is a :class:`UserError` whose message starts with the option (or file and field) it
is about and says the fix: a value vLLM or the hardware would reject fails here, by name, instead
of a traceback or a silently different plan. No Ansible import.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.vllm.plugins.module_utils import releases as R
from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan.instance import DEFAULT_PORT

# vLLM 0.33.0 vllm/config/cache.py CacheDType (the values argparse accepts for --kv-cache-dtype).
# The per-token-head dtypes are sized by model_families.per_token_head_plan (full attention only).
KV_CACHE_DTYPES = ("auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla",
                   "int8_per_token_head", "fp8_per_token_head", "int4_per_token_head")
# Characters that would end a unit-file line or an argv word in surprising ways.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_VERSION = re.compile(r"^[0-9]+(\.[0-9]+){0,2}([.+-]?[A-Za-z0-9.+-]*)?$")
# Counts that describe hardware or a config are far below this; anything above is a typo.
_HUGE = 1 << 62


def as_int(value, option, minimum=None, maximum=None, allow_none=True):
    """``value`` as an int (integral floats and digit strings too; booleans and 1.5 refused)."""
    if value is None and allow_none:
        return None
    out = None
    if isinstance(value, bool):
        out = None
    elif isinstance(value, int):
        out = value
    elif isinstance(value, float) and value.is_integer() and abs(value) < _HUGE:
        out = int(value)
    elif isinstance(value, str) and re.match(r"^\s*-?[0-9]+\s*$", value):
        out = int(value)
    if out is None:
        raise UserError("%s must be an integer, got %r" % (option, value), option=option)
    if minimum is not None and out < minimum:
        raise UserError("%s must be >= %d, got %d" % (option, minimum, out), option=option)
    if maximum is not None and out > maximum:
        raise UserError("%s must be <= %d, got %d" % (option, maximum, out), option=option)
    return out


def numa_memory(value):
    """host_numa_memory_bytes: {node: bytes} (node numbers as ints or digit strings, as YAML and JSON give them)."""
    option = "host_numa_memory_bytes"
    if value in (None, {}):
        return None
    if not isinstance(value, dict):
        raise UserError("%s must map NUMA node numbers to bytes ({0: 270582939648}), got %r" % (option, value),
                        option=option)
    return dict((as_int(node, option + " (a node number)", minimum=0, maximum=1 << 16, allow_none=False),
                 as_int(size, "%s[%s]" % (option, node), minimum=1, maximum=_HUGE, allow_none=False))
                for node, size in value.items())


def _auto_or_int(value, option):
    if value == "auto":
        return value
    return as_int(value, option, minimum=1, maximum=1 << 16, allow_none=False)


def _plain_text(value, option, allow_empty=False):
    if value is None:
        return None
    if not isinstance(value, str) or (not allow_empty and not value) or _CONTROL.search(value):
        raise UserError("%s must be a one-line string without control characters (newline, tab, NUL), got %r"
                        % (option, value), option=option)
    return value


# A host name (RFC 1123 labels) for master_addr / host: never a word vllm serve would read as a flag.
_HOST_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\Z")


def _is_address(value):
    import socket  # pylint: disable=import-outside-toplevel
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, value)
            return True
        except (OSError, ValueError):
            continue
    return False


def refuse_silent_defaults(p):
    """Values validate_options replaced by a default without a word (issue 27): nodes 0, master_port 0 (or
    empty), and a master_addr / host that is not a host name or IP address (``--headless`` would become a flag)."""
    for key, default in (("nodes", 1), ("master_port", 29501)):
        value = p.get(key)
        if value is not None and not isinstance(value, bool) and value in (0, "0", ""):
            raise UserError("%s is %r, which used to become %d without a word: give %s (at least 1) or leave it out "
                            "for %d" % (key, value, default, key, default), option=key)
    for key in ("master_addr", "host"):
        value = p.get(key)
        if isinstance(value, str) and value and not (_HOST_NAME.match(value) or _is_address(value)):
            raise UserError("%s %r is not a host name or an IP address (a value starting with '-' is read by vllm serve "
                            "as a flag): give the address, such as 10.0.0.1" % (key, value), option=key)


def validate_options(p):
    """Return a copy of the module's parameters with every value checked (UserError otherwise)."""
    o = dict(p)
    for key in ("tensor_parallel_size", "pipeline_parallel_size", "instances"):
        o[key] = _auto_or_int(o.get(key, 1 if key != "instances" else "auto"), key)
    o["max_model_len"] = as_int(o.get("max_model_len"), "max_model_len", minimum=1, maximum=_HUGE)
    o["kv_cache_memory_bytes"] = as_int(o.get("kv_cache_memory_bytes"), "kv_cache_memory_bytes", minimum=1, maximum=_HUGE)
    o["memory_overhead_bytes"] = as_int(o.get("memory_overhead_bytes"), "memory_overhead_bytes", minimum=0, maximum=_HUGE)
    # vLLM's CacheConfig.block_size is a positive int (vllm/config/cache.py, 0.33.0).
    o["block_size"] = as_int(o.get("block_size"), "block_size", minimum=1, maximum=1 << 20)
    o["num_speculative_tokens"] = as_int(o.get("num_speculative_tokens") or 0, "num_speculative_tokens", minimum=0, maximum=64)
    o["cpu_offload_bytes"] = as_int(o.get("cpu_offload_bytes"), "cpu_offload_bytes", minimum=0, maximum=_HUGE)
    o["host_memory_bytes"] = as_int(o.get("host_memory_bytes"), "host_memory_bytes", minimum=1, maximum=_HUGE)
    o["host_numa_memory_bytes"] = numa_memory(o.get("host_numa_memory_bytes"))
    o["expected_prompt_tokens"] = as_int(o.get("expected_prompt_tokens"), "expected_prompt_tokens", minimum=1, maximum=_HUGE)
    o["expected_concurrency"] = as_int(o.get("expected_concurrency"), "expected_concurrency", minimum=1, maximum=1 << 24)
    o["port_base"] = as_int(o.get("port_base", DEFAULT_PORT), "port_base", minimum=1, maximum=65535, allow_none=False)
    o["nodes"] = as_int(o.get("nodes") or 1, "nodes", minimum=1, maximum=1024, allow_none=False)
    o["master_port"] = as_int(o.get("master_port") or 29501, "master_port", minimum=1, maximum=65535, allow_none=False)
    util = o.get("gpu_memory_utilization")
    if util is not None:
        # vLLM 0.33.0 CacheConfig: gpu_memory_utilization = Field(gt=0, le=1).
        if isinstance(util, bool) or not isinstance(util, (int, float)) or not 0 < util <= 1:
            raise UserError("gpu_memory_utilization must be in (0, 1] (a fraction of GPU memory), got %r" % (util,),
                            option="gpu_memory_utilization")
    if (o.get("kv_cache_dtype") or "auto") not in KV_CACHE_DTYPES:
        raise UserError("kv_cache_dtype must be one of %s, got %r" % (", ".join(KV_CACHE_DTYPES), o.get("kv_cache_dtype")),
                        option="kv_cache_dtype")
    version = o.get("vllm_version") or R.DEFAULT_RELEASE
    if not isinstance(version, str) or not _VERSION.match(version):
        raise UserError("vllm_version must be a version such as %s, got %r" % (R.DEFAULT_RELEASE, version),
                        option="vllm_version")
    o["serve_path"] = o.get("serve_path") or None  # empty: the command lines name `model`
    for key in ("served_model_name", "host", "speculative_method", "tool_call_parser", "reasoning_parser", "serve_path", "master_addr"):
        _plain_text(o.get(key), key)
    if o.get("serve_path") and not o["serve_path"].startswith("/"):
        raise UserError("serve_path must be an absolute path on the host (the directory vllm serve is given), got %r"
                        % (o["serve_path"],), option="serve_path")
    for i, arg in enumerate(o.get("extra_args") or []):
        _plain_text(arg, "extra_args[%d]" % i, allow_empty=True)
    if isinstance(o.get("yarn"), dict):
        o["yarn"] = dict(o["yarn"])  # normalized in place below; the caller's copy stays as given
    _validate_yarn(o.get("yarn"))
    o["yarn"] = o.get("yarn") or None
    refuse_silent_defaults(p)  # the values as given (o holds the defaults already)
    return o


def _validate_yarn(yarn):
    if yarn is None or yarn == {}:
        return
    if not isinstance(yarn, dict):
        raise UserError("yarn must be a mapping {factor, original_max_position_embeddings}, got %r" % (yarn,), option="yarn")
    unknown = sorted(str(k) for k in yarn if k not in ("factor", "original_max_position_embeddings"))
    if unknown:
        raise UserError("yarn has unknown key(s) %s: only factor and original_max_position_embeddings" % ", ".join(unknown),
                        option="yarn")
    factor = yarn.get("factor")
    if isinstance(factor, str):
        try:
            factor = yarn["factor"] = float(factor)
        except ValueError:
            pass
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 < factor < 1e6:
        raise UserError("yarn.factor must be a number > 0 (the context multiplier, e.g. 4.0), got %r" % (factor,),
                        option="yarn.factor")
    yarn["original_max_position_embeddings"] = as_int(yarn.get("original_max_position_embeddings"),
                                                      "yarn.original_max_position_embeddings", minimum=1, maximum=_HUGE)


def _index_list(lists, option, count):
    """nvlink_islands / numa_nodes: lists of GPU indices that exist on the host."""
    if lists is None:
        return
    if not isinstance(lists, list) or not all(isinstance(x, list) for x in lists):
        raise UserError("gpus.%s must be a list of lists of GPU indices, got %r" % (option, lists), option="gpus." + option)
    for members in lists:
        for idx in members:
            as_int(idx, "gpus.%s entry" % option, allow_none=False)
            if not 0 <= int(idx) < count:
                raise UserError("gpus.%s names GPU %s, but the host has GPUs 0-%d" % (option, idx, count - 1),
                                option="gpus." + option)


def _memory(value, option):
    return as_int(value, option, minimum=1, maximum=_HUGE, allow_none=False)


def _compute_capability(value, option):
    if not re.match(r"^[0-9]+\.[0-9]+$", str(value)) or isinstance(value, bool):
        raise UserError("%s must be a compute capability such as \"9.0\", got %r" % (option, value), option=option)


def _validate_fact_gpus(gpus):
    items = gpus["gpus"]
    count = as_int(gpus.get("gpu_count", len(items)), "gpus.gpu_count", minimum=0, maximum=4096, allow_none=False)
    seen = set()
    for i, g in enumerate(items):
        where = "gpus.gpus[%d]" % i
        if not isinstance(g, dict):
            raise UserError("%s must be a mapping (the gpu_facts entry of one GPU), got %r" % (where, g), option=where)
        idx = as_int(g.get("index"), where + ".index", minimum=0, maximum=4095, allow_none=False)
        if idx in seen:
            raise UserError("%s.index %d appears twice" % (where, idx), option=where + ".index")
        seen.add(idx)
        if g.get("memory_total_bytes") is not None:
            _memory(g["memory_total_bytes"], where + ".memory_total_bytes")
        if g.get("compute_capability") is not None:
            _compute_capability(g["compute_capability"], where + ".compute_capability")
        as_int(g.get("numa_node"), where + ".numa_node", minimum=-1, maximum=4096)
        affinity = g.get("cpu_affinity") or []
        if not isinstance(affinity, list):
            raise UserError("%s.cpu_affinity must be a list of CPU numbers, got %r" % (where, affinity), option=where + ".cpu_affinity")
        for cpu in affinity:
            as_int(cpu, where + ".cpu_affinity entry", minimum=0, allow_none=False)
    return max([count] + [i + 1 for i in seen])


def validate_gpus(gpus):
    """Check the ``gpus`` option (gpu_facts result or declared profile); UserError names the key."""
    if gpus is None:
        return
    if not isinstance(gpus, dict):
        raise UserError("gpus must be a mapping (the gpu_facts result or a declared profile), got %r" % (gpus,), option="gpus")
    if "gpus" in gpus:
        if not isinstance(gpus["gpus"], list):
            raise UserError("gpus.gpus must be a list (the gpu_facts result), got %r" % (gpus["gpus"],), option="gpus.gpus")
        count = _validate_fact_gpus(gpus)
    else:
        missing = [k for k in ("count", "name", "memory_total_bytes", "compute_capability") if gpus.get(k) is None]
        if missing:
            raise UserError("gpus (declared profile) lacks %s: give {count, name, memory_total_bytes, compute_capability}"
                            % ", ".join(missing), option="gpus")
        count = as_int(gpus["count"], "gpus.count", minimum=1, maximum=4096, allow_none=False)
        _memory(gpus["memory_total_bytes"], "gpus.memory_total_bytes")
        _compute_capability(gpus["compute_capability"], "gpus.compute_capability")
        _plain_text(gpus["name"] if isinstance(gpus["name"], str) else None, "gpus.name")
        if not isinstance(gpus["name"], str):
            raise UserError("gpus.name must be a string, got %r" % (gpus["name"],), option="gpus.name")
    _index_list(gpus.get("nvlink_islands"), "nvlink_islands", count)
    _index_list(gpus.get("numa_nodes"), "numa_nodes", count)


def validate_against_model(o, cfg):
    """Checks that need the parsed config.json: PP within the layers, YaRN's base length."""
    pp = o.get("pipeline_parallel_size")
    if pp != "auto" and pp > cfg["num_layers"]:
        # vLLM 0.33.0 vllm/distributed/utils.py get_pp_indices: every stage needs at least one layer.
        raise UserError("pipeline_parallel_size %d is larger than the model's %d layers (num_hidden_layers): "
                        "each pipeline stage needs at least one layer" % (pp, cfg["num_layers"]),
                        option="pipeline_parallel_size")
    yarn = o.get("yarn")
    if yarn and not yarn.get("original_max_position_embeddings") and not cfg.get("max_position_embeddings"):
        raise UserError("yarn needs original_max_position_embeddings: config.json has no max_position_embeddings to scale",
                        option="yarn.original_max_position_embeddings")


def check_ports(o, count):
    """The instances take port_base .. port_base + count - 1; all must be valid TCP ports."""
    last = o["port_base"] + max(count, 1) - 1
    if last > 65535:
        raise UserError("port_base %d with %d instance(s) needs ports up to %d, above 65535: lower port_base"
                        % (o["port_base"], count, last), option="port_base")


# config.json keys the planner reads, with the smallest value vLLM's model code accepts.
_CONFIG_INTS = (
    ("num_hidden_layers", 1), ("num_attention_heads", 1), ("num_key_value_heads", 1), ("hidden_size", 0),
    ("head_dim", 1), ("max_position_embeddings", 1), ("vocab_size", 1), ("full_attention_interval", 1),
    ("linear_num_key_heads", 1), ("linear_num_value_heads", 1), ("linear_key_head_dim", 1),
    ("linear_value_head_dim", 1), ("linear_conv_kernel_dim", 1), ("kv_lora_rank", 0), ("qk_rope_head_dim", 0),
    ("mtp_num_hidden_layers", 0), ("num_nextn_predict_layers", 0), ("num_experts", 0), ("n_routed_experts", 0),
    ("num_local_experts", 0),
)
_CONFIG_DICTS = ("rope_parameters", "rope_scaling", "quantization_config", "vision_config")
_CONFIG_STRS = ("model_type", "dtype", "torch_dtype", "mamba_ssm_dtype")


def _config_section(section, where):
    for key, minimum in _CONFIG_INTS:
        if section.get(key) is not None:
            as_int(section[key], "%s field %s" % (where, key), minimum=minimum, maximum=1 << 40, allow_none=False)
    for key in _CONFIG_DICTS:
        if section.get(key) is not None and not isinstance(section[key], dict):
            raise UserError("%s field %s must be a JSON object, got %r" % (where, key, section[key]), option=where)
    for key in _CONFIG_STRS:
        if section.get(key) is not None and not isinstance(section[key], str):
            raise UserError("%s field %s must be a string, got %r" % (where, key, section[key]), option=where)
    theta = section.get("rope_theta")
    if theta is not None and (isinstance(theta, bool) or not isinstance(theta, (int, float)) or theta <= 0):
        raise UserError("%s field rope_theta must be a positive number, got %r" % (where, theta), option=where)
    params = section.get("rope_parameters") or {}
    theta = params.get("rope_theta")
    if theta is not None and (isinstance(theta, bool) or not isinstance(theta, (int, float)) or theta <= 0):
        raise UserError("%s field rope_parameters.rope_theta must be a positive number, got %r" % (where, theta), option=where)
    for key in ("architectures", "layer_types"):
        value = section.get(key)
        if value is not None and (not isinstance(value, list) or not all(isinstance(x, str) for x in value)):
            raise UserError("%s field %s must be a list of strings, got %r" % (where, key, value), option=where)


def validate_config(raw, path):
    """Check the types and ranges of the config.json fields the planner reads (``path`` names the file)."""
    where = "%s:" % path
    if not isinstance(raw, dict):
        raise UserError("%s must hold a JSON object, got %s" % (path, type(raw).__name__), option="model")
    text = raw.get("text_config")
    if text is not None and not isinstance(text, dict):
        raise UserError("%s field text_config must be a JSON object, got %r" % (where, text), option="model")
    _config_section(raw, where)
    if isinstance(text, dict):
        _config_section(text, where + " text_config")
    section = text if isinstance(text, dict) else raw
    for key in ("num_hidden_layers", "num_attention_heads"):
        if section.get(key) is None:
            raise UserError("%s lacks %s: point `model` at a Hugging Face decoder model directory" % (path, key), option="model")
