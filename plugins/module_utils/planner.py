# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vllm_plan logic: options + model config + hardware -> instances, capacity, findings (pure)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import shlex
import re

from ansible_collections.gpufleet.vllm.plugins.module_utils import engine_memory as em
from ansible_collections.gpufleet.vllm.plugins.module_utils import gpu_families as F
from ansible_collections.gpufleet.vllm.plugins.module_utils import hardware_profiles as hp
from ansible_collections.gpufleet.vllm.plugins.module_utils import kv_capacity as kv
from ansible_collections.gpufleet.vllm.plugins.module_utils import model_families as fam
from ansible_collections.gpufleet.vllm.plugins.module_utils import multinode as mn
from ansible_collections.gpufleet.vllm.plugins.module_utils import passthrough_flags as ptf
from ansible_collections.gpufleet.vllm.plugins.module_utils import releases as R
from ansible_collections.gpufleet.vllm.plugins.module_utils import vllm_args as va
from ansible_collections.gpufleet.vllm.plugins.module_utils.model_config import model_family, parse_config
from ansible_collections.gpufleet.vllm.plugins.module_utils.placement import normalize_gpus, place

GIB = kv.GIB

# The utilization-only estimate's overhead model lives in engine_memory.profile_overhead (terms read in
# vLLM 0.26.0's determine_available_memory / profile_run; bounds where vLLM measures at boot). Checked on the
# real H200 runs of tests/fixtures/gpu-acceptance (eager) and graphs-0.26.0 (CUDA graphs on):
# tests/unit/plugins/module_utils/test_planner_graphs_calibration.py.
OVERHEAD_NON_TORCH = em.NON_TORCH_BOUND


def _f(level, code, message, fix):
    return va.finding(level, code, message, fix)


def default_overhead(cfg, tp, memory_total, text=None, eager=False, runner="v2", gpu=None):
    """Non-torch growth + torch peak of the profile run + (V1 runner, graphs on) the CUDA-graph estimate,
    per GPU: engine_memory.profile_overhead. ``text``: the model's (text) config.json mapping; ``gpu``: the
    GPU's name, compute capability, the release and the engine's scheduler flags (_engine_gpu)."""
    return em.profile_overhead(text or {}, cfg, tp, memory_total, runner, eager, gpu)


def _int_flag(extra_args, flag):
    """The integer value of ``--flag N`` / ``--flag=N`` in extra_args, or None."""
    args = [str(a) for a in extra_args or []]
    for i, arg in enumerate(args):
        value = arg.split("=", 1)[1] if arg.startswith(flag + "=") else (args[i + 1] if arg == flag and i + 1 < len(args) else None)
        if value is not None and value.isdigit():
            return int(value)
    return None


def _engine_gpu(p, gpu0):
    """What picks vLLM's scheduler defaults (engine_memory.scheduler_defaults) and the flags that override them."""
    extra = p.get("extra_args")
    return {"name": gpu0.get("name"), "compute_capability": gpu0.get("compute_capability"),
            "vllm_version": p.get("vllm_version") or R.DEFAULT_RELEASE,
            "max_num_batched_tokens": _int_flag(extra, "--max-num-batched-tokens"), "max_num_seqs": _int_flag(extra, "--max-num-seqs"),
            "num_speculative_tokens": int(p.get("num_speculative_tokens") or 0)}


def _text_config(raw_config):
    return raw_config.get("text_config") if isinstance(raw_config.get("text_config"), dict) else raw_config


def _oom_overhead(p, cfg, raw_config, tp, mem_total):
    """With kv_cache_memory_bytes vLLM still runs profile_run, allocates exactly that KV, then captures the CUDA
    graphs on top (both runners; the engine's own "--kv-cache-memory=N ... to fit" suggestion counts the capture):
    the runner's profile overhead + the captured graphs, bounded as engine_memory.GRAPH_CAPTURE_BOUND."""
    eager = "--enforce-eager" in (p.get("extra_args") or [])
    runner = em.model_runner(cfg, p.get("vllm_version") or R.DEFAULT_RELEASE, p.get("speculative_method") if p.get("num_speculative_tokens") else None,
                             p.get("environment"))[0]
    base = default_overhead(cfg, tp, mem_total, _text_config(raw_config), True, runner, p.get("_engine_gpu"))
    return base + (0 if eager else em.capture_overhead(mem_total, p.get("_engine_gpu")))


def _oom_check(kv_bytes, weights_rank, overhead, mem_total):
    """vLLM allocates exactly kv_cache_memory_bytes on top of weights, activation peak, CUDA graphs and
    non-torch memory (vLLM 0.33.0 gpu_worker.determine_available_memory skips profiling for it)."""
    if kv_bytes + weights_rank + overhead <= mem_total:
        return []
    return [_f("error", "kv_memory_exceeds_gpu",
               "kv_cache_memory_bytes %.2f GiB + weights %.2f GiB + overhead %.2f GiB (activation peak, CUDA graphs, "
               "non-torch) per GPU exceed the GPU's %.2f GiB (CUDA's total, after the driver's reservation): vLLM would run out of memory"
               % (kv_bytes / GIB, weights_rank / GIB, overhead / GIB, mem_total / GIB),
               "lower kv_cache_memory_bytes to at most %d, or raise tensor_parallel_size"
               % max(mem_total - weights_rank - overhead, 0))]


def _numa_findings(groups, hw):
    """Per instance: one NUMA node (bound by numactl), several known nodes (vLLM binds each worker to its own
    GPU's node: --numa-bind --numa-bind-nodes, model_families.numa_bind_args), or unknown (runs unbound, never
    numactl --membind=0). The finding says what the rendered argv does."""
    if hw.get("assumed"):
        return []
    out = []
    for i, grp in enumerate(groups):
        if grp["numa_node"] is not None and grp["numa_node"] >= 0:
            continue
        bind = fam.numa_bind_args(grp, hw)
        if bind:
            out.append(_f("info", "numa_bind_per_worker",
                          "GPUs %s of instance %d span NUMA nodes %s: vLLM binds each worker to its GPU's node (%s)"
                          % (grp["gpu_indices"], i, sorted(set(int(n) for n in bind[2:])), " ".join(bind)),
                          "expected; a tensor_parallel_size that fits one NUMA node avoids the cross-socket all-reduce"))
            continue
        out.append(_f("info", "numa_unknown",
                      "the NUMA node of GPUs %s is unknown: instance %d runs without numactl binding" % (grp["gpu_indices"], i),
                      "give gpus.numa_nodes (declared profile) or run gpu_facts on a host that reports NUMA nodes"))
    return out


def cpu_checks(p, tp, pp):
    """Findings for platform cpu (vLLM's CPU build): KV memory per host as VLLM_CPU_KVCACHE_SPACE, which
    vLLM 0.32.0 reads as a whole number of GiB (vllm/envs.py ``int(...)``, then ``x GiB_bytes`` in
    ``CpuPlatform.check_and_update_config``); one instance, no GPU options."""
    out = []
    kv_bytes = p.get("kv_cache_memory_bytes")
    if not kv_bytes or kv_bytes % GIB:
        whole = max(1, int(round((kv_bytes or GIB) / float(GIB))))
        out.append(_f("error", "cpu_kv_space_not_whole_gib",
                      "platform cpu sizes the KV cache with VLLM_CPU_KVCACHE_SPACE, a whole number of GiB per host; "
                      "kv_cache_memory_bytes is %r" % (kv_bytes,),
                      "set kv_cache_memory_bytes to a multiple of 1073741824, e.g. %d (%d GiB)" % (whole * GIB, whole)))
    if p.get("gpu_memory_utilization") is not None:
        out.append(_f("error", "gpu_option_on_cpu", "gpu_memory_utilization is set but platform is cpu",
                      "remove gpu_memory_utilization; size the KV cache with kv_cache_memory_bytes"))
    # One rank per host: TP 1 x PP 1, or over a group of hosts (nodes) TP 1 x PP nodes.
    nodes = int(p.get("nodes") or 1)
    if tp != 1 or pp != nodes or (p.get("instances") or "auto") not in ("auto", 1):
        out.append(_f("error", "cpu_parallelism", "platform cpu serves one instance with TP 1 x PP 1 per host here (PP = nodes over a group)",
                      "set tensor_parallel_size 1, pipeline_parallel_size %d (nodes) and instances auto or 1" % nodes))
    return out


def _cpu_instance_fields(p):
    """What a CPU instance carries instead of GPU indices: the KV space for VLLM_CPU_KVCACHE_SPACE."""
    return {"platform": "cpu", "gpu_indices": [], "numa_node": None, "cpus": [], "locality": "cpu",
            "environment": {"VLLM_CPU_KVCACHE_SPACE": str(int(p.get("kv_cache_memory_bytes") or 0) // GIB)}}


def _instance_name(base, i):
    slug = re.sub(r"[^a-z0-9]+", "-", (base or "vllm").lower()).strip("-") or "vllm"
    return "%s-%d" % (slug, i)


def build_plan(p, raw_config, model_path, weights_total=None, weights_source=None):
    """p: the module's parameters (dict). Returns the module result (without changed).

    Named steps, in the order their findings are reported: the model and its weights, the parallel layout
    and the hardware, the heads and the KV dtype, the context length (YaRN), the KV memory per GPU, vLLM's
    KV arithmetic, offload and demand, flags and parsers, placement, the instances' command lines."""
    cfg = parse_config(raw_config)
    family = model_family(cfg)
    p, passthrough_findings = _passthrough(p)
    weights_total, weights_source, mm_argv, findings = _model_and_weights(p, raw_config, weights_total, weights_source)
    findings += passthrough_findings
    version = p.get("vllm_version") or R.DEFAULT_RELEASE
    nodes, tp, pp, per_host, hw, cpu, hf = _layout_and_hardware(p, cfg, weights_total)
    findings += hf
    gpu0 = hw["gpus"][0] if hw["gpus"] else {}
    mem_total = hp.cuda_total(gpu0.get("name"), gpu0.get("memory_total_bytes")) or 0  # the CUDA total vLLM sizes from
    cc = None if hw.get("assumed") else gpu0.get("compute_capability")
    kv_dtype = p.get("kv_cache_dtype") or "auto"
    findings += _head_and_dtype_findings(cfg, tp, kv_dtype, cc)
    max_len, hf_overrides, lf = _context_length(p, cfg, raw_config)
    findings += lf
    p = dict(p, _oom_total=hp.cuda_total(gpu0.get("name"), gpu0.get("memory_total_bytes"), known_only=True) or 0,
             _engine_gpu=_engine_gpu(p, gpu0))
    weights_rank, available, estimate, mf = _kv_memory(p, cfg, raw_config, tp, pp, weights_total, mem_total)
    findings += mf
    cap, cf = _capacity(p, cfg, tp, pp, kv_dtype, available, max_len, cc, version, cpu, findings)
    findings += cf
    cap.update({"weights_bytes_total": weights_total, "weights_source": weights_source,
                "weights_bytes_per_rank": weights_rank, "estimate": estimate})
    findings += _fit_findings(cap, max_len, available)
    kv_transfer, host, of = _offload_and_demand(p, cap, tp * pp)
    findings += of
    cap["host_memory"] = host
    findings += va.check_parsers(family, p.get("tool_call_parser"), p.get("reasoning_parser"))
    findings += va.check_extra_args(p.get("extra_args"))
    groups, pf = _placement(p, hw, cpu, nodes, tp * pp, per_host)
    findings += pf
    # Family rules that need the placement: offload on the whole host, hybrid offload, NUMA binding.
    findings += fam.offload_findings(cfg, p, len(groups))
    findings += fam.speculative_findings(p) + fam.hybrid_prefix_caching_findings(cfg, p)
    if host:
        host["instances_on_host"] = len(groups)
        host["pinned_bytes_all_instances"] = host["pinned_bytes_estimate"] * len(groups)
    o = _render_options(p)
    o.update({"tensor_parallel_size": tp, "pipeline_parallel_size": pp, "max_model_len": max_len,
              "kv_cache_dtype": kv_dtype, "host": p.get("host") or "127.0.0.1",
              "enable_prefix_caching": p.get("enable_prefix_caching", True)})
    if cpu:
        o["kv_cache_memory_bytes"] = None  # carried by VLLM_CPU_KVCACHE_SPACE (see _cpu_instance_fields)
    argv_extras = {"hf_overrides": hf_overrides, "kv_transfer_config": kv_transfer}
    instances = _instances(p, o, groups, hw, model_path, argv_extras, mm_argv)
    if nodes > 1 and instances:
        instances[0]["nodes"] = mn.node_commands(instances[0]["argv"], nodes, p.get("master_addr") or "",
                                                 p.get("master_port") or mn.DEFAULT_MASTER_PORT)
        instances[0]["argv"] = instances[0]["nodes"][0]["argv"]
    cap["model"] = _model_summary(cfg, family)
    cap["platform"] = "cpu" if cpu else "cuda"
    result = {"instances": instances, "capacity": cap, "findings": findings}
    result["summary"] = summary(result, tp, pp)
    return result


def _render_options(p):
    """The options the argv is rendered from: without the plan's own keys; a KV size extra_args carries is not
    rendered a second time."""
    o = dict(p)
    o.pop("_oom_total", None)
    if o.pop("_kv_from_extra_args", None):
        o["kv_cache_memory_bytes"] = None
    return o


def _passthrough(p):
    """extra_args flags the arithmetic depends on (passthrough_flags): fill the unset options they set."""
    overrides, findings = ptf.passthrough(p)
    filled = dict((k, v) for k, v in overrides.items() if not p.get(k))
    if "kv_cache_memory_bytes" in filled:
        filled["_kv_from_extra_args"] = True  # extra_args already carries it: not rendered a second time
    return (dict(p, **filled) if filled else p), findings


def _model_and_weights(p, raw_config, weights_total, weights_source):
    """Family checks (model_families): windowed attention refused by name; weights exact, else estimated;
    multimodal weights and argv; a vLLM release older than the verified rules."""
    findings = fam.windowed_attention_findings(raw_config)
    weights_total, weights_source, wf = fam.resolve_weights(raw_config, p.get("extra_args"), weights_total, weights_source)
    findings += wf
    weights_total, weights_source, wf, mm_argv = fam.multimodal_plan(raw_config, p, weights_total, weights_source)
    findings += wf
    weights_total, weights_source, wf = fam.mtp_head_plan(raw_config, p, weights_total, weights_source)
    findings += wf
    version = p.get("vllm_version") or R.DEFAULT_RELEASE
    if kv.parse_version(version) < kv.OLDEST_VERIFIED:
        findings.append(_f("warning", "unverified_version", "vllm_version %s is older than the rules verified here (%s to %s)"
                           % (version, R.OLDEST_VERIFIED, R.NEWEST_VERIFIED),
                           "plan with vllm_version %s or check the figures against the boot log" % R.DEFAULT_RELEASE))
    return weights_total, weights_source, mm_argv, findings


def _layout_and_hardware(p, cfg, weights_total):
    """TP, PP and hosts (a group over several hosts, TP auto), and the GPUs: given, none (CPU), or assumed."""
    findings = []
    tp = p.get("tensor_parallel_size") or 1
    pp = p.get("pipeline_parallel_size") or 1
    hw = normalize_gpus(fam.expand_gpus(p["gpus"])) if p.get("gpus") else None
    nodes, tp, pp, per_host, nf = _group_over_hosts(p, tp, pp, hw, cfg["num_layers"])
    findings += nf
    if tp == "auto":
        tp = _auto_tp(cfg, hw, weights_total, pp)
        findings.append(_f("info", "auto_tp", "tensor_parallel_size auto -> %d" % tp, "set it explicitly to pin it"))
    tp, pp = int(tp), int(pp if pp != "auto" else 1)
    cpu = (p.get("platform") or "cuda") == "cpu"
    if cpu:
        hw = {"gpus": [], "count": 0}
        findings += cpu_checks(p, tp, pp)
    if hw is None:
        hw = normalize_gpus({"count": tp * pp, "name": "assumed", "memory_total_bytes": 0, "compute_capability": "9.0"})
        hw["assumed"] = True
        findings.append(_f("info", "gpus_assumed", "gpus not given: assuming exactly %d GPU(s) (TP %d x PP %d) with no memory limit" % (tp * pp, tp, pp),
                           "pass gpus (gpu_facts result or a declared profile) to check memory and placement"))
    return nodes, tp, pp, per_host, hw, cpu, findings


def _head_and_dtype_findings(cfg, tp, kv_dtype, cc):
    findings = []
    if cfg["num_attention_heads"] % tp:
        divisors = [d for d in (1, 2, 4, 8, 16) if cfg["num_attention_heads"] % d == 0]
        findings.append(_f("error", "tp_not_dividing_heads",
                           "tensor_parallel_size %d does not divide the model's %d attention heads" % (tp, cfg["num_attention_heads"]),
                           "set tensor_parallel_size to one of %s" % divisors))
    if not cfg.get("mla") and tp > cfg["num_kv_heads"]:
        findings.append(_f("info", "kv_heads_replicated",
                           "TP %d > %d KV heads: each rank holds a replica of one KV head (KV bytes per token do not shrink past TP %d)"
                           % (tp, cfg["num_kv_heads"], cfg["num_kv_heads"]), "expected; no action needed"))
    if kv_dtype.startswith("fp8") and cc and not F.native_fp8(kv.parse_cc(cc)):
        findings.append(_f("warning", "fp8_kv_without_fp8_hardware",
                           "kv_cache_dtype %s on compute capability %s: no native FP8 (A100-class); vLLM converts in software" % (kv_dtype, cc),
                           "use kv_cache_dtype auto on sm80, or accept the slower FP8 path"))
    return findings


def _context_length(p, cfg, raw_config):
    """max_model_len against the model's limit, extended by YaRN (hf_overrides keeping rope_theta)."""
    findings = []
    limit = cfg.get("max_position_embeddings")
    max_len = p.get("max_model_len") or limit
    hf_overrides = None
    yarn = p.get("yarn")
    if yarn:
        if cfg.get("rope_theta") is None:
            findings.append(_f("error", "yarn_without_rope_theta",
                               "yarn is set but the model config has no rope_theta to keep: overriding rope_parameters without it drops the checkpoint's theta",
                               "use a config.json that carries rope_theta (rope_parameters.rope_theta or rope_theta)"))
        orig = int(yarn.get("original_max_position_embeddings") or limit)
        new_limit = int(float(yarn["factor"]) * orig)
        if cfg.get("rope_theta") is not None:
            hf_overrides = va.yarn_overrides(cfg, raw_config, yarn["factor"], orig, new_limit)
        limit = new_limit
    if limit and max_len > limit:
        findings.append(_f("error", "max_model_len_above_limit",
                           "max_model_len %d is above the model's limit %d (max_position_embeddings%s)" % (max_len, limit, " x YaRN" if yarn else ""),
                           "lower max_model_len to %d or set yarn {factor, original_max_position_embeddings} (a factor of %.2f or more)"
                           % (limit, max_len / float(cfg.get("max_position_embeddings") or limit))))
    return max_len, hf_overrides, findings


def _kv_memory(p, cfg, raw_config, tp, pp, weights_total, mem_total):
    """Weights per rank and the KV memory per GPU: given (kv_cache_memory_bytes, OOM-checked), estimated from
    gpu_memory_utilization, or unknown. Returns (weights_rank, available, estimate, findings)."""
    findings = []
    weights_rank = kv.cdiv(int(weights_total), tp * pp) if weights_total is not None else None
    kv_bytes = p.get("kv_cache_memory_bytes")
    if kv_bytes:
        if mem_total and weights_rank is not None:
            overhead = p.get("memory_overhead_bytes") or _oom_overhead(p, cfg, raw_config, tp, mem_total)
            findings += _oom_check(int(kv_bytes), weights_rank, overhead, p.get("_oom_total") or mem_total)
        return weights_rank, int(kv_bytes), None, findings
    if not (mem_total and weights_rank is not None):
        findings.append(_f("warning", "no_kv_figures",
                           "no kv_cache_memory_bytes and no GPU memory/weights figures: KV tokens and concurrency are not computed",
                           "set kv_cache_memory_bytes (per GPU) or give gpus plus a model directory with safetensors"))
        return weights_rank, None, None, findings
    util = p.get("gpu_memory_utilization")
    u = util if util is not None else 0.92
    overhead, weights_kv, estimate, cf = _overhead(p, cfg, raw_config, tp, mem_total, weights_rank)
    findings += cf
    requested = int(math.ceil(u * mem_total))
    available = requested - weights_kv - overhead
    estimate.update({"requested_bytes": requested, "weights_bytes_per_rank": weights_kv, "overhead_bytes": overhead})
    findings.append(_f("info", "kv_estimate",
                       "KV memory is an estimate: %.2f GiB = %.2f x %.2f GiB - weights %.2f GiB - overhead %.2f GiB"
                       " (activation peak, CUDA graphs, non-torch)"
                       % (available / GIB, u, mem_total / GIB, weights_rank / GIB, overhead / GIB),
                       "set kv_cache_memory_bytes for exact figures, or calibrate memory_overhead_bytes from the boot log"))
    if available <= 0:
        findings.append(_f("error", "no_kv_memory", "weights and overhead leave no KV memory on each GPU",
                           "raise tensor_parallel_size or gpu_memory_utilization, or use a smaller/quantized checkpoint"))
        available = None
    return weights_rank, available, estimate, findings


def _overhead(p, cfg, raw_config, tp, mem_total, weights_rank):
    """(overhead, weights as the engine counts them, estimate fields, findings): from an engine's boot log
    (calibration_log), memory_overhead_bytes, or the model of the runner the release uses."""
    runner, reason = em.model_runner(cfg, p.get("vllm_version") or R.DEFAULT_RELEASE, p.get("speculative_method") if p.get("num_speculative_tokens") else None,
                                     p.get("environment"))
    est = {"model_runner": runner, "model_runner_reason": reason}
    if p.get("calibration_log"):
        try:
            cal = em.calibration_from_log(p["calibration_log"])
        except em.CalibrationError as exc:
            return 0, weights_rank, est, [_f("error", "calibration_log_unusable", str(exc), "give the whole boot log of one engine")]
        est.update(calibrated=True, calibration=cal)
        terms = tuple(cal[k] / GIB for k in ("weights_bytes", "activation_bytes", "non_torch_bytes", "cudagraph_bytes"))
        found = _f("info", "kv_calibrated",
                   "KV memory from the engine's own boot log: weights %.2f, activation %.2f, non-torch %.2f, CUDA graphs %.2f GiB"
                   % terms + " (%s runner)" % cal["runner"],
                   "re-calibrate after changing the model, TP, max_num_seqs, max_num_batched_tokens or the vLLM release")
        return em.calibrated_overhead(cal), em.calibrated_weights(cal), est, [found]
    eager = "--enforce-eager" in (p.get("extra_args") or [])
    overhead = p.get("memory_overhead_bytes") or default_overhead(cfg, tp, mem_total, _text_config(raw_config), eager, runner,
                                                                  p.get("_engine_gpu"))
    return overhead, weights_rank, est, []


def _capacity(p, cfg, tp, pp, kv_dtype, available, max_len, cc, version, cpu, earlier_findings):
    """vLLM's KV arithmetic (kv_capacity.size_kv_cache) for this layout; empty figures when it cannot run."""
    findings = []
    try:
        plan_cfg, plan_dtype, ptf = fam.per_token_head_plan(cfg, kv_dtype)
        findings += ptf
        cap = kv.size_kv_cache(plan_cfg, tp=tp, pp=pp, kv_cache_dtype=plan_dtype, available_bytes=available, max_model_len=max_len,
                               enable_prefix_caching=p.get("enable_prefix_caching", True),
                               num_speculative_tokens=p.get("num_speculative_tokens") or 0,
                               speculative_method=p.get("speculative_method"), compute_capability=cc, vllm_version=version,
                               block_size=p.get("block_size"), platform="cpu" if cpu else "cuda")
    except kv.CapacityError as exc:
        if not any(f["code"] == "tp_not_dividing_heads" for f in earlier_findings + findings):
            findings.append(_f("error", "capacity_not_computed", str(exc), "fix the option the message names"))
        cap = dict((k, None) for k in ("block_size", "num_blocks", "kv_cache_tokens", "kv_pool_tokens", "max_concurrency",
                                       "fits", "max_model_len_that_fits", "log_line", "available_kv_bytes",
                                       "kv_bytes_per_token_per_rank", "kv_bytes_needed_per_request"))
        cap["rules"] = []
    return cap, findings


def _fit_findings(cap, max_len, available):
    if cap["fits"] is not False:
        return []
    return [_f("error", "kv_too_small_for_one_request",
               "one request of max_model_len %d needs %.2f GiB KV per GPU, more than the %.2f GiB available: vLLM refuses to start "
               "(\"To serve at least one request with the model's max seq len\"); the largest length that fits is %d"
               % (max_len, cap["kv_bytes_needed_per_request"] / GIB, available / GIB, cap["max_model_len_that_fits"]),
               "set max_model_len <= %d, raise kv_cache_memory_bytes, or raise tensor_parallel_size" % cap["max_model_len_that_fits"])]


def _placement(p, hw, cpu, nodes, ranks, per_host):
    """The GPU groups of the instances (one host's share of a multi-host group), NUMA unknown as None."""
    if cpu:
        return [None], []
    groups, pf = place(hw, min(per_host or ranks, hw["count"]), 1) if nodes > 1 else place(hw, ranks, p.get("instances") or "auto")
    for grp in groups:
        if grp["numa_node"] is not None and grp["numa_node"] < 0:
            grp["numa_node"] = None  # sysfs reports -1 for "no NUMA information"
    return groups, pf + _numa_findings(groups, hw)


def _instances(p, o, groups, hw, model_path, argv_extras, mm_argv):
    """One instance per group: its GPUs (or the CPU fields), port and the rendered argv."""
    instances = []
    base_port = p.get("port_base") or 8000
    for i, grp in enumerate(groups):
        port = base_port + i
        name = _instance_name(p.get("served_model_name"), i)
        argv = va.render_argv(model_path, o, port=port, **argv_extras)
        if grp is None:  # the CPU build
            instances.append(dict(_cpu_instance_fields(p), name=name, port=port, argv=argv))
            continue
        instances.append({
            "name": name,
            "gpu_indices": grp["gpu_indices"],
            "cuda_visible_devices": ",".join(str(x) for x in grp["gpu_indices"]),
            "numa_node": grp["numa_node"],
            "cpus": grp["cpus"],
            "locality": grp["locality"],
            "port": port,
            "argv": fam.merge_speculative_config(argv + mm_argv + fam.numa_bind_args(grp, hw), p.get("speculative_config")),
        })
    return instances


def _model_summary(cfg, family):
    return {"architecture": cfg["architecture"], "family": family, "attention": cfg["attention"],
            "full_attention_layers": cfg["full_attention_layers"],
            "linear_attention_layers": cfg["linear_attention_layers"], "num_kv_heads": cfg["num_kv_heads"],
            "head_dim": cfg["head_dim"], "max_position_embeddings": cfg["max_position_embeddings"]}


def _offload_and_demand(p, cap, ranks):
    """KV offload to CPU (its transfer config, host memory) and whether the expected demand fits the GPU pool."""
    findings = []
    kv_transfer = None
    host = None
    off = p.get("cpu_offload_bytes")
    findings += offload_option_findings(p)
    if off:
        kv_transfer = va.offload_transfer_config(off, p.get("cpu_offload_eviction_policy") or "lru")
        if p.get("cpu_offload_prompt_only") is not None:
            kv_transfer["kv_connector_extra_config"]["offload_prompt_only"] = bool(p["cpu_offload_prompt_only"])
        host = {"cpu_offload_bytes": int(off), "pinned_bytes_estimate": int(off * 1.9),
                "dev_shm_bytes": int(off * 1.9), "memlock_bytes": int(off * 1.9)}
        findings.append(_f("info", "offload_host_memory",
                           "KV offload pins host memory: about %.1f GiB (1.9 x %.1f GiB) as shared memory" % (off * 1.9 / GIB, off / GIB),
                           "size /dev/shm and the memlock limit for it (host_tuning role)"))
    prompt = p.get("expected_prompt_tokens")
    conc = p.get("expected_concurrency") or 1
    if prompt and cap["kv_pool_tokens"] is not None:
        holds = kv.pool_tokens_for(cap, prompt)
        need = kv.offload_needs(cap["kv_bytes_per_token_per_rank"], ranks, holds, prompt, conc)
        cap["offload"] = need
        state = kv.demand_blocks(cap, prompt)[1]
        if need["tokens_beyond_gpu"] and (not off or off < need["cpu_bytes_to_use"]):
            findings.append(_f("warning", "demand_exceeds_gpu_kv",
                               "%d concurrent prompts of %d tokens need %d tokens of KV; the GPU pool holds %d%s"
                               % (conc, prompt, prompt * conc, holds, " of them (each request also takes %d state blocks of "
                                  "its linear-attention layers: %d requests fit)" % (state, holds // prompt) if state else ""),
                               "set cpu_offload_bytes >= %d (%.1f GiB, all ranks) or lower expected_concurrency"
                               % (need["cpu_bytes_to_use"], need["cpu_bytes_to_use"] / GIB)))
    return kv_transfer, host, findings


# OffloadingConnector options per release: releases.OFFLOAD_OPTIONS.
OFFLOAD_OPTIONS = R.OFFLOAD_OPTIONS


def offload_option_findings(p):
    """eviction_policy / offload_prompt_only: rendered where the installed release accepts them, else refused."""
    policy, prompt_only = p.get("cpu_offload_eviction_policy") or "lru", p.get("cpu_offload_prompt_only")
    if policy == "lru" and prompt_only is None:
        return []
    if not p.get("cpu_offload_bytes"):
        return [_f("error", "offload_option_without_offload", "cpu_offload_eviction_policy / cpu_offload_prompt_only are set without cpu_offload_bytes",
                   "set cpu_offload_bytes, or drop the offload options")]
    rule = R.rule_for(OFFLOAD_OPTIONS, p.get("vllm_version"))
    first = R.version_text(OFFLOAD_OPTIONS[0][0])
    if not rule:
        return [_f("error", "offload_option_unverified", "cpu_offload_eviction_policy %s / cpu_offload_prompt_only %s: the OffloadingConnector "
                   "of vLLM %s was not read here (its options are known from %s)" % (policy, prompt_only, p.get("vllm_version"), first),
                   "leave cpu_offload_eviction_policy lru and cpu_offload_prompt_only unset, or plan for vLLM %s or later" % first)]
    if policy not in rule[1]:
        return [_f("error", "offload_eviction_policy_unknown", "cpu_offload_eviction_policy %r is not one of vLLM's %s" % (policy, list(rule[1])),
                   "use one of %s" % ", ".join(rule[1]))]
    return []


def _group_over_hosts(p, tp, pp, hw, num_layers):
    """nodes > 1: one instance over several identical hosts (gpus describes one of them); multinode.py."""
    nodes = int(p.get("nodes") or 1)
    if nodes <= 1:
        return nodes, tp, pp, None, []
    # The CPU build runs one rank per host here (gpus_per_host 1): TP 1 x PP nodes by default.
    cpu = (p.get("platform") or "cuda") == "cpu"
    # Unset sizes mean vLLM's documented layout (TP = GPUs per host, PP = hosts), not the single-host 1 x 1.
    tp, pp = p.get("tensor_parallel_size"), p.get("pipeline_parallel_size")
    tp, pp, per_host, findings = mn.group_shape(nodes, tp, pp, 1 if cpu else (hw["count"] if hw else 0), num_layers)
    return nodes, tp, pp, per_host, findings + mn.mig_findings(hw["gpus"] if hw else []) + _multinode_option_findings(p)


def _multinode_option_findings(p):
    findings = []
    if not p.get("master_addr"):
        findings.append(_f("error", "master_addr_required", "nodes %d needs master_addr: the head host's address the others connect to"
                           % int(p["nodes"]), "set master_addr to the head host's address on the group's network"))
    if p.get("instances") not in (None, "auto", 1):
        findings.append(_f("error", "instances_with_nodes", "instances %r with nodes %d: a multi-host group is one instance"
                           % (p.get("instances"), int(p["nodes"])), "leave instances at auto (or 1) when nodes > 1"))
    return findings


def _auto_tp(cfg, hw, weights_total, pp):
    count = hw["count"] if hw else 1
    mem = hw["gpus"][0]["memory_total_bytes"] if hw and hw["gpus"] else 0
    for d in (1, 2, 4, 8, 16):
        if d * pp > count or cfg["num_attention_heads"] % d:
            continue
        if not weights_total or not mem or weights_total / float(d * pp) <= 0.6 * mem:
            return d
    return max(d for d in (1, 2, 4, 8, 16) if d * pp <= max(count, 1) and cfg["num_attention_heads"] % d == 0)


def _gib(v):
    return "-" if v is None else "%.2f GiB" % (v / GIB)


def _over_hosts(result):
    nodes = [len(i["nodes"]) for i in result["instances"] if i.get("nodes")]
    return ", over %d hosts (vLLM multi-node, one `vllm serve` per host)" % nodes[0] if nodes else ""


def _numa_words(inst):
    """The summary's NUMA cell: the node, the nodes --numa-bind binds the workers to, or unknown."""
    if inst.get("numa_node") is not None:
        return str(inst["numa_node"])
    argv = inst.get("argv") or []
    if "--numa-bind-nodes" in argv:
        nodes = []
        for arg in argv[argv.index("--numa-bind-nodes") + 1:]:
            if not arg.isdigit():
                break
            nodes.append(arg)
        return "%s (--numa-bind, one node per worker)" % "+".join(sorted(set(nodes), key=int))
    return "unknown"


def summary(result, tp, pp):
    cap = result["capacity"]
    rows = [
        ("model", "%s (%s, %s attention)" % (cap["model"]["architecture"], cap["model"]["family"], cap["model"]["attention"])),
        ("parallelism", "TP %d x PP %d, %d instance(s)%s" % (tp, pp, len(result["instances"]), _over_hosts(result))),
        ("weights per GPU", _gib(cap["weights_bytes_per_rank"])
         + (" (estimate from config.json)" if str(cap.get("weights_source") or "").startswith("estimate") else "")),
        ("KV memory per GPU", _gib(cap["available_kv_bytes"]) + (" (estimate)" if cap.get("estimate") else "")),
        ("KV bytes/token/GPU", "{0:,}".format(cap["kv_bytes_per_token_per_rank"] or 0)),
        ("block size", "%s tokens, %s blocks" % (cap["block_size"], cap["num_blocks"])),
        ("vLLM will log", (cap["log_line"] or "-").replace("\n", "\n" + " " * 27)),
        ("KV offload (host)", "-" if not cap.get("host_memory") else "%s to CPU, ~%s pinned in /dev/shm and memlock"
         % (_gib(cap["host_memory"]["cpu_offload_bytes"]), _gib(cap["host_memory"]["pinned_bytes_estimate"]))),
        ("one max_model_len request", {True: "fits", False: "DOES NOT FIT (max %s)" % cap["max_model_len_that_fits"], None: "-"}[cap["fits"]]),
    ]
    lines = ["%-26s %s" % r for r in rows]
    for inst in result["instances"]:
        numa = _numa_words(inst)
        where = "GPUs %s" % inst["cuda_visible_devices"] if inst.get("platform") != "cpu" else "CPU, VLLM_CPU_KVCACHE_SPACE=%s" % (
            inst["environment"]["VLLM_CPU_KVCACHE_SPACE"])
        lines.append("%-26s %s, NUMA %s, port %d" % ("instance " + inst["name"], where, numa, inst["port"]))
        # Shell-quoted for reading and copy-paste; the argv itself stays a list.
        for node in inst.get("nodes") or [{"argv": inst["argv"]}]:
            if "node_rank" in node:
                lines.append("  node %d (%s):" % (node["node_rank"], "headless" if node["headless"] else "head, serves the API"))
            lines.append("  " + " ".join(shlex.quote(arg) for arg in node["argv"]))
    for f in result["findings"]:
        lines.append("%-7s %s: %s -> %s" % (f["level"].upper(), f["code"], f["message"], f["fix"]))
    return "\n".join(lines)
