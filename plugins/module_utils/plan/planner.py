# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vllm_plan logic: options + model config + hardware -> instances, capacity, findings (pure)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import shlex
import re

from ansible_collections.gpufleet.vllm.plugins.module_utils import cli_flags
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import engine_memory as em
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import instance as instance_record
from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu import gpu_families as F
from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu import hardware_profiles as hp
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import kv_capacity as kv
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import model_families as fam
from ansible_collections.gpufleet.vllm.plugins.module_utils.cluster import multinode as mn
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import passthrough_flags as ptf
from ansible_collections.gpufleet.vllm.plugins.module_utils import releases as R
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import vllm_args as va
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan.model_config import model_family, parse_config
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan.placement import normalize_gpus, place

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
    """The integer value argparse ends with for ``flag`` in extra_args (the last one given), or None."""
    value = cli_flags.flag_value([str(a) for a in extra_args or []], flag)
    return int(value) if value is not None and str(value).isdigit() else None


def _engine_gpu(c):
    """What picks vLLM's scheduler defaults (engine_memory.scheduler_defaults) and the flags that override them."""
    extra = c.p.get("extra_args")
    return {"name": c.gpu0.get("name"), "compute_capability": c.gpu0.get("compute_capability"),
            "vllm_version": c.version,
            "max_num_batched_tokens": _int_flag(extra, "--max-num-batched-tokens"), "max_num_seqs": _int_flag(extra, "--max-num-seqs"),
            "num_speculative_tokens": int(c.p.get("num_speculative_tokens") or 0)}


def _text_config(raw_config):
    return raw_config.get("text_config") if isinstance(raw_config.get("text_config"), dict) else raw_config


def _oom_overhead(c):
    """With kv_cache_memory_bytes vLLM still runs profile_run, allocates exactly that KV, then captures the CUDA
    graphs on top (both runners; the engine's own "--kv-cache-memory=N ... to fit" suggestion counts the capture):
    the runner's profile overhead + the captured graphs, bounded as engine_memory.GRAPH_CAPTURE_BOUND."""
    base = default_overhead(c.cfg, c.tp, c.mem_total, _text_config(c.raw_config), True, c.runner, c.engine_gpu)
    return base + (0 if c.eager else em.capture_overhead(c.mem_total, c.engine_gpu))


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


class PlanContext(object):
    """What the planner's steps share, worked out once: the options (after the extra_args passthrough), the
    model, the release and the platform, then what each step adds - the layout and hardware, the GPU figures
    and the model runner, the context length, the KV memory. A step reads it, sets its results on it and
    appends its findings to ``findings`` (in the order they are reported)."""

    def __init__(self, p, raw_config, model_path, weights_total=None, weights_source=None):
        self.p = p
        self.raw_config = raw_config
        self.cfg = parse_config(raw_config)
        self.family = model_family(self.cfg)
        self.model_path = model_path
        self.version = p.get("vllm_version") or R.DEFAULT_RELEASE
        self.cpu = (p.get("platform") or "cuda") == "cpu"
        self.weights_total, self.weights_source = weights_total, weights_source
        self.findings = []
        self.mm_argv = []
        self.nodes, self.tp, self.pp, self.per_host, self.hw = 1, 1, 1, None, None       # _layout_and_hardware
        self.gpu0, self.mem_total, self.oom_total, self.cc = {}, 0, 0, None               # _hardware_figures
        self.kv_dtype, self.engine_gpu, self.runner, self.runner_reason = "auto", None, None, None
        self.max_len, self.hf_overrides = None, None                                     # _context_length
        self.weights_rank, self.available, self.estimate = None, None, None              # _kv_memory

    @property
    def ranks(self):
        return self.tp * self.pp

    @property
    def eager(self):
        return "--enforce-eager" in (self.p.get("extra_args") or [])


def _hardware_figures(c):
    """The first GPU's CUDA total (what vLLM sizes from) and capability, the KV dtype, and the model runner the
    release uses (engine_memory.model_runner), worked out once for the memory steps."""
    c.gpu0 = c.hw["gpus"][0] if c.hw["gpus"] else {}
    c.mem_total = hp.cuda_total(c.gpu0.get("name"), c.gpu0.get("memory_total_bytes")) or 0
    c.oom_total = hp.cuda_total(c.gpu0.get("name"), c.gpu0.get("memory_total_bytes"), known_only=True) or 0
    c.cc = None if c.hw.get("assumed") else c.gpu0.get("compute_capability")
    c.kv_dtype = c.p.get("kv_cache_dtype") or "auto"
    c.engine_gpu = _engine_gpu(c)
    spec = c.p.get("speculative_method") if c.p.get("num_speculative_tokens") else None
    c.runner, c.runner_reason = em.model_runner(c.cfg, c.version, spec, c.p.get("environment"))


def build_plan(p, raw_config, model_path, weights_total=None, weights_source=None):
    """p: the module's parameters (dict). Returns the module result (without changed).

    Named steps over one PlanContext, in the order their findings are reported: the model and its weights,
    the parallel layout and the hardware, the heads and the KV dtype, the context length (YaRN), the KV
    memory per GPU, vLLM's KV arithmetic, offload and demand, flags and parsers, placement, the instances'
    command lines."""
    c = PlanContext(p, raw_config, model_path, weights_total, weights_source)
    passthrough_findings = _passthrough(c)
    _model_and_weights(c)
    c.findings += passthrough_findings
    _layout_and_hardware(c)
    _hardware_figures(c)
    _head_and_dtype_findings(c)
    _checkpoint_findings(c)
    _context_length(c)
    _kv_memory(c)
    cap = _capacity(c)
    cap.update({"weights_bytes_total": c.weights_total, "weights_source": c.weights_source,
                "weights_bytes_per_rank": c.weights_rank, "estimate": c.estimate})
    c.findings += _fit_findings(cap, c.max_len, c.available)
    kv_transfer, host = _offload_and_demand(c, cap)
    cap["host_memory"] = host
    c.findings += va.check_parsers(c.family, c.p.get("tool_call_parser"), c.p.get("reasoning_parser"), c.version)
    c.findings += va.check_extra_args(c.p.get("extra_args")) + _sleep_mode_findings(c)
    groups = _placement(c)
    # Family rules that need the placement: offload on the whole host, hybrid offload, NUMA binding.
    c.findings += fam.offload_findings(c.cfg, c.p, len(groups))
    c.findings += fam.speculative_findings(c.p) + fam.hybrid_prefix_caching_findings(c.cfg, c.p)
    if host:
        host["instances_on_host"] = len(groups)
        host["pinned_bytes_all_instances"] = host["pinned_bytes_estimate"] * len(groups)
    instances = _instances(c, groups, {"hf_overrides": c.hf_overrides, "kv_transfer_config": kv_transfer})
    if c.nodes > 1 and instances:
        instances[0]["nodes"] = mn.node_commands(instances[0]["argv"], c.nodes, c.p.get("master_addr") or "",
                                                 c.p.get("master_port") or mn.DEFAULT_MASTER_PORT,
                                                 backend=c.p.get("distributed_executor_backend") or "mp")
        instances[0]["argv"] = instances[0]["nodes"][0]["argv"]
    instances = [instance_record.planned(inst) for inst in instances]
    cap["model"] = _model_summary(c.cfg, c.family)
    cap["platform"] = "cpu" if c.cpu else "cuda"
    result = {"instances": instances, "capacity": cap, "findings": c.findings}
    result["summary"] = summary(result, c.tp, c.pp)
    return result


def _render_options(c):
    """The options the argv is rendered from: the plan's layout and KV figures over the user's options; a KV
    size extra_args carries is not rendered a second time."""
    o = dict(c.p)
    if o.pop("_kv_from_extra_args", None):
        o["kv_cache_memory_bytes"] = None
    o.update({"tensor_parallel_size": c.tp, "pipeline_parallel_size": c.pp, "max_model_len": c.max_len,
              "kv_cache_dtype": c.kv_dtype, "host": c.p.get("host") or "127.0.0.1",
              "enable_prefix_caching": c.p.get("enable_prefix_caching", True)})
    if c.cpu:
        o["kv_cache_memory_bytes"] = None  # carried by VLLM_CPU_KVCACHE_SPACE (see _cpu_instance_fields)
    return o


def _passthrough(c):
    """extra_args flags the arithmetic depends on (passthrough_flags): fill the unset options they set."""
    overrides, findings = ptf.passthrough(c.p)
    filled = dict((k, v) for k, v in overrides.items() if not c.p.get(k))
    if "kv_cache_memory_bytes" in filled:
        filled["_kv_from_extra_args"] = True  # extra_args already carries it: not rendered a second time
    if filled:
        c.p = dict(c.p, **filled)
    return findings


def _model_and_weights(c):
    """Family checks (model_families): windowed attention refused by name; weights exact, else estimated;
    multimodal weights and argv; a vLLM release older than the verified rules."""
    raw, p = c.raw_config, c.p
    c.findings += fam.windowed_attention_findings(raw)
    c.weights_total, c.weights_source, wf = fam.resolve_weights(raw, p.get("extra_args"), c.weights_total, c.weights_source)
    c.findings += wf
    c.weights_total, c.weights_source, wf, c.mm_argv = fam.multimodal_plan(raw, p, c.weights_total, c.weights_source)
    c.findings += wf
    c.weights_total, c.weights_source, wf = fam.mtp_head_plan(raw, p, c.weights_total, c.weights_source)
    c.findings += wf
    if kv.parse_version(c.version) < kv.OLDEST_VERIFIED:
        c.findings.append(_f("warning", "unverified_version", "vllm_version %s is older than the rules verified here (%s to %s)"
                             % (c.version, R.OLDEST_VERIFIED, R.NEWEST_VERIFIED),
                             "plan with vllm_version %s or check the figures against the boot log" % R.DEFAULT_RELEASE))


def _layout_and_hardware(c):
    """TP, PP and hosts (a group over several hosts, TP auto), and the GPUs: given, none (CPU), or assumed."""
    p = c.p
    tp = p.get("tensor_parallel_size") or 1
    pp = p.get("pipeline_parallel_size") or 1
    hw = normalize_gpus(fam.expand_gpus(p["gpus"])) if p.get("gpus") else None
    c.nodes, tp, pp, c.per_host, nf = _group_over_hosts(c, tp, pp, hw)
    c.findings += nf + mn.ray_findings(p.get("distributed_executor_backend") or "mp", c.nodes, c.cpu)
    if tp == "auto":
        tp = _auto_tp(c.cfg, hw, c.weights_total, pp)
        c.findings.append(_f("info", "auto_tp", "tensor_parallel_size auto -> %d" % tp, "set it explicitly to pin it"))
    c.tp, c.pp = int(tp), int(pp if pp != "auto" else 1)
    if c.cpu:
        hw = {"gpus": [], "count": 0}
        c.findings += cpu_checks(p, c.tp, c.pp)
    if hw is None:
        hw = normalize_gpus({"count": c.ranks, "name": "assumed", "memory_total_bytes": 0, "compute_capability": "9.0"})
        hw["assumed"] = True
        c.findings.append(_f("info", "gpus_assumed", "gpus not given: assuming exactly %d GPU(s) (TP %d x PP %d) with no memory limit"
                             % (c.ranks, c.tp, c.pp),
                             "pass gpus (gpu_facts result or a declared profile) to check memory and placement"))
    c.hw = hw


def _head_and_dtype_findings(c):
    cfg, tp, kv_dtype, cc = c.cfg, c.tp, c.kv_dtype, c.cc
    if cfg["num_attention_heads"] % tp:
        divisors = [d for d in (1, 2, 4, 8, 16) if cfg["num_attention_heads"] % d == 0]
        c.findings.append(_f("error", "tp_not_dividing_heads",
                             "tensor_parallel_size %d does not divide the model's %d attention heads" % (tp, cfg["num_attention_heads"]),
                             "set tensor_parallel_size to one of %s" % divisors))
    if not cfg.get("mla") and tp > cfg["num_kv_heads"]:
        c.findings.append(_f("info", "kv_heads_replicated",
                             "TP %d > %d KV heads: each rank holds a replica of one KV head (KV bytes per token do not shrink past TP %d)"
                             % (tp, cfg["num_kv_heads"], cfg["num_kv_heads"]), "expected; no action needed"))
    if kv_dtype.startswith("fp8") and cc and not F.native_fp8(kv.parse_cc(cc)):
        c.findings.append(_f("warning", "fp8_kv_without_fp8_hardware",
                             "kv_cache_dtype %s on compute capability %s: no native FP8 (A100-class); vLLM converts in software" % (kv_dtype, cc),
                             "use kv_cache_dtype auto on sm80, or accept the slower FP8 path"))


def _checkpoint_findings(c):
    """What the release refuses in the checkpoint's own quantization_config, before vLLM would at start-up."""
    raw = c.raw_config if isinstance(c.raw_config, dict) else {}
    text = raw.get("text_config") if isinstance(raw.get("text_config"), dict) else {}
    quant = raw.get("quantization_config") or text.get("quantization_config")
    rule = R.rule_for(R.GPTQ_DESC_ACT_REFUSED, c.version)
    if not (rule and rule[1] and isinstance(quant, dict)):
        return
    if str(quant.get("quant_method") or "").lower() == "gptq" and quant.get("desc_act") is True \
            and quant.get("group_size", 128) != -1:
        c.findings.append(_f("error", "gptq_desc_act_refused",
                             "the checkpoint is GPTQ with desc_act true (group activation ordering, group_size %s): vLLM %s "
                             "refuses to load it (%s)" % (quant.get("group_size", 128), c.version, rule[2]),
                             "use a checkpoint quantized with desc_act false or static activation ordering "
                             "(or compressed-tensors), or a vLLM release before %s" % R.version_text(rule[0])))


def _context_length(c):
    """max_model_len against the model's limit, extended by YaRN (hf_overrides keeping rope_theta)."""
    cfg = c.cfg
    limit = cfg.get("max_position_embeddings")
    max_len = c.p.get("max_model_len") or limit
    yarn = c.p.get("yarn")
    if yarn:
        if cfg.get("rope_theta") is None:
            c.findings.append(_f("error", "yarn_without_rope_theta",
                                 "yarn is set but the model config has no rope_theta to keep: overriding rope_parameters "
                                 "without it drops the checkpoint's theta",
                                 "use a config.json that carries rope_theta (rope_parameters.rope_theta or rope_theta)"))
        orig = int(yarn.get("original_max_position_embeddings") or limit)
        new_limit = int(float(yarn["factor"]) * orig)
        if cfg.get("rope_theta") is not None:
            c.hf_overrides = va.yarn_overrides(cfg, c.raw_config, yarn["factor"], orig, new_limit)
        limit = new_limit
    if limit and max_len > limit:
        c.findings.append(_f("error", "max_model_len_above_limit",
                             "max_model_len %d is above the model's limit %d (max_position_embeddings%s)" % (max_len, limit, " x YaRN" if yarn else ""),
                             "lower max_model_len to %d or set yarn {factor, original_max_position_embeddings} (a factor of %.2f or more)"
                             % (limit, max_len / float(cfg.get("max_position_embeddings") or limit))))
    c.max_len = max_len


def _kv_memory(c):
    """Weights per rank and the KV memory per GPU: given (kv_cache_memory_bytes, OOM-checked), estimated from
    gpu_memory_utilization, or unknown. Sets weights_rank, available and estimate."""
    p, mem_total = c.p, c.mem_total
    c.weights_rank = weights_rank = kv.cdiv(int(c.weights_total), c.ranks) if c.weights_total is not None else None
    kv_bytes = p.get("kv_cache_memory_bytes")
    if kv_bytes:
        if mem_total and weights_rank is not None:
            overhead = p.get("memory_overhead_bytes") or _oom_overhead(c)
            c.findings += _oom_check(int(kv_bytes), weights_rank, overhead, c.oom_total or mem_total)
        c.available = int(kv_bytes)
        return
    if not (mem_total and weights_rank is not None):
        c.findings.append(_f("warning", "no_kv_figures",
                             "no kv_cache_memory_bytes and no GPU memory/weights figures: KV tokens and concurrency are not computed",
                             "set kv_cache_memory_bytes (per GPU) or give gpus plus a model directory with safetensors"))
        return
    rule = _kv_sizing_rule(c)
    util = p.get("gpu_memory_utilization")
    u = util if util is not None else rule["utilization"]
    if rule["extensible"]:
        available = _extensible_kv_memory(c, rule, u)
    else:
        overhead, weights_kv, estimate, cf = _overhead(c)
        c.findings += cf
        requested = int(math.ceil(u * mem_total))
        available = requested - weights_kv - overhead
        estimate.update({"requested_bytes": requested, "weights_bytes_per_rank": weights_kv, "overhead_bytes": overhead})
        c.findings.append(_f("info", "kv_estimate",
                             "KV memory is an estimate: %.2f GiB = %.2f x %.2f GiB - weights %.2f GiB - overhead %.2f GiB"
                             " (activation peak, CUDA graphs, non-torch)"
                             % (available / GIB, u, mem_total / GIB, weights_rank / GIB, overhead / GIB),
                             "set kv_cache_memory_bytes for exact figures, or calibrate memory_overhead_bytes from the boot log"))
        c.estimate = estimate
    if available <= 0:
        c.findings.append(_f("error", "no_kv_memory", "weights and overhead leave no KV memory on each GPU",
                             "raise tensor_parallel_size or gpu_memory_utilization, or use a smaller/quantized checkpoint"))
        available = None
    c.available = available


def _kv_sizing_rule(c):
    """releases.KV_SIZING_RULES for the release, with the extensible KV cache off where vLLM turns it off:
    --kv-cache-memory-bytes (handled before), --num-gpu-blocks-override or --no-enable-extensible-kv-cache."""
    rule = dict(R.rule_for(R.KV_SIZING_RULES, c.version)[1])
    extra = c.p.get("extra_args") or []
    if rule["extensible"] and (c.cpu or any(cli_flags.flag_name(a) in R.EXTENSIBLE_OFF_FLAGS for a in extra)):
        rule.update(extensible=False, utilization=R.KV_SIZING_RULES[0][1]["utilization"])
    return rule


def _extensible_terms(c):
    """(weights, non-torch, captured CUDA graphs, activation peak) per GPU: from calibration_log, or modelled."""
    if c.p.get("calibration_log"):
        try:
            cal = em.calibration_from_log(c.p["calibration_log"])
            return (em.calibrated_weights(cal), cal["non_torch_bytes"] + em.ROUNDING,
                    cal["cudagraph_captured_bytes"] + em.ROUNDING, cal["activation_bytes"] + em.ROUNDING)
        except em.CalibrationError as exc:
            c.findings.append(_f("error", "calibration_log_unusable", str(exc), "give the whole boot log of one engine"))
    peak = em.activation_peak(_text_config(c.raw_config), c.cfg, c.tp, c.mem_total, c.runner, c.engine_gpu)
    graphs = 0 if c.eager else em.capture_overhead(c.mem_total, c.engine_gpu)
    return c.weights_rank, em.NON_TORCH_BOUND, graphs, peak


def _extensible_kv_memory(c, rule, u):
    """vLLM >= 0.34 without kv_cache_memory_bytes: the extensible KV cache (engine_memory.extensible_kv_bytes)."""
    weights, non_torch, graphs, peak = _extensible_terms(c)
    available = em.extensible_kv_bytes(rule, c.mem_total, u, weights, non_torch, graphs, peak, c.tp)
    c.estimate = {"model_runner": c.runner, "model_runner_reason": c.runner_reason, "sizing": "extensible",
                  "requested_bytes": int(math.ceil(u * c.mem_total)), "weights_bytes_per_rank": weights,
                  "overhead_bytes": non_torch + graphs + peak}
    figures = (c.version, u, available / GIB, c.mem_total / GIB, weights / GIB, non_torch / GIB, graphs / GIB, peak / GIB)
    c.findings.append(_f("info", "kv_estimate_extensible",
                         "KV memory is an estimate of vLLM %s's extensible KV cache (sized after CUDA-graph capture, "
                         "gpu_memory_utilization %g): %.2f GiB = %.2f GiB - weights %.2f - non-torch %.2f - CUDA graphs %.2f "
                         "- activation peak %.2f and its margin" % figures,
                         "set kv_cache_memory_bytes for exact figures (it also switches the extensible KV cache off)"))
    util = c.p.get("gpu_memory_utilization")
    if util is not None and rule["utilization_warned_above"] < util < 1.0:
        c.findings.append(_f("warning", "utilization_caps_extensible_kv",
                             "gpu_memory_utilization %g caps vLLM %s's extensible KV cache, which already keeps its own "
                             "headroom (vLLM warns when this withholds 1 GiB or more)" % (util, c.version),
                             "leave gpu_memory_utilization unset unless other processes share the GPU"))
    return available


def _overhead(c):
    """(overhead, weights as the engine counts them, estimate fields, findings): from an engine's boot log
    (calibration_log), memory_overhead_bytes, or the model of the runner the release uses."""
    p = c.p
    est = {"model_runner": c.runner, "model_runner_reason": c.runner_reason}
    if p.get("calibration_log"):
        try:
            cal = em.calibration_from_log(p["calibration_log"])
        except em.CalibrationError as exc:
            return 0, c.weights_rank, est, [_f("error", "calibration_log_unusable", str(exc), "give the whole boot log of one engine")]
        est.update(calibrated=True, calibration=cal)
        terms = tuple(cal[k] / GIB for k in ("weights_bytes", "activation_bytes", "non_torch_bytes", "cudagraph_bytes"))
        found = _f("info", "kv_calibrated",
                   "KV memory from the engine's own boot log: weights %.2f, activation %.2f, non-torch %.2f, CUDA graphs %.2f GiB"
                   % terms + " (%s runner)" % cal["runner"],
                   "re-calibrate after changing the model, TP, max_num_seqs, max_num_batched_tokens or the vLLM release")
        return em.calibrated_overhead(cal), em.calibrated_weights(cal), est, [found]
    overhead = p.get("memory_overhead_bytes") or default_overhead(c.cfg, c.tp, c.mem_total, _text_config(c.raw_config), c.eager,
                                                                  c.runner, c.engine_gpu)
    return overhead, c.weights_rank, est, []


def _capacity(c):
    """vLLM's KV arithmetic (kv_capacity.size_kv_cache) for this layout; empty figures when it cannot run."""
    p = c.p
    try:
        plan_cfg, plan_dtype, ptf_findings = fam.per_token_head_plan(c.cfg, c.kv_dtype)
        c.findings += ptf_findings
        return kv.size_kv_cache(plan_cfg, tp=c.tp, pp=c.pp, kv_cache_dtype=plan_dtype, available_bytes=c.available,
                                max_model_len=c.max_len, enable_prefix_caching=p.get("enable_prefix_caching", True),
                                num_speculative_tokens=p.get("num_speculative_tokens") or 0,
                                speculative_method=p.get("speculative_method"), compute_capability=c.cc, vllm_version=c.version,
                                block_size=p.get("block_size"), platform="cpu" if c.cpu else "cuda")
    except kv.CapacityError as exc:
        if not any(f["code"] == "tp_not_dividing_heads" for f in c.findings):
            c.findings.append(_f("error", "capacity_not_computed", str(exc), "fix the option the message names"))
        cap = dict((k, None) for k in ("block_size", "num_blocks", "kv_cache_tokens", "kv_pool_tokens", "max_concurrency",
                                       "fits", "max_model_len_that_fits", "log_line", "available_kv_bytes",
                                       "kv_bytes_per_token_per_rank", "kv_bytes_needed_per_request"))
        cap["rules"] = []
        return cap


def _fit_findings(cap, max_len, available):
    if cap["fits"] is not False:
        return []
    return [_f("error", "kv_too_small_for_one_request",
               "one request of max_model_len %d needs %.2f GiB KV per GPU, more than the %.2f GiB available: vLLM refuses to start "
               "(\"To serve at least one request with the model's max seq len\"); the largest length that fits is %d"
               % (max_len, cap["kv_bytes_needed_per_request"] / GIB, available / GIB, cap["max_model_len_that_fits"]),
               "set max_model_len <= %d, raise kv_cache_memory_bytes, or raise tensor_parallel_size" % cap["max_model_len_that_fits"])]


def _placement(c):
    """The GPU groups of the instances (one host's share of a multi-host group), NUMA unknown as None."""
    if c.cpu:
        return [None]
    hw = c.hw
    if c.nodes > 1:
        groups, pf = place(hw, min(c.per_host or c.ranks, hw["count"]), 1)
    else:
        groups, pf = place(hw, c.ranks, c.p.get("instances") or "auto")
    for grp in groups:
        if grp["numa_node"] is not None and grp["numa_node"] < 0:
            grp["numa_node"] = None  # sysfs reports -1 for "no NUMA information"
    c.findings += pf + _numa_findings(groups, hw)
    c.findings += fam.numa_memory_findings(groups, c.p.get("cpu_offload_bytes"), c.p.get("host_numa_memory_bytes"), hw)
    return groups


def _instances(c, groups, argv_extras):
    """One instance per group: its GPUs (or the CPU fields), port and the rendered argv."""
    p, o = c.p, _render_options(c)
    instances = []
    base_port = p.get("port_base") or instance_record.DEFAULT_PORT
    for i, grp in enumerate(groups):
        port = base_port + i
        name = _instance_name(p.get("served_model_name"), i)
        argv = va.render_argv(c.model_path, o, port=port, **argv_extras)
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
            "argv": fam.merge_speculative_config(argv + c.mm_argv + fam.numa_bind_args(grp, c.hw), p.get("speculative_config")),
        })
    return instances


def _model_summary(cfg, family):
    return {"architecture": cfg["architecture"], "family": family, "attention": cfg["attention"],
            "full_attention_layers": cfg["full_attention_layers"],
            "linear_attention_layers": cfg["linear_attention_layers"], "num_kv_heads": cfg["num_kv_heads"],
            "head_dim": cfg["head_dim"], "max_position_embeddings": cfg["max_position_embeddings"]}


def _offload_and_demand(c, cap):
    """KV offload to CPU (its transfer config, host memory) and whether the expected demand fits the GPU pool."""
    p = c.p
    kv_transfer = None
    host = None
    off = p.get("cpu_offload_bytes")
    c.findings += offload_option_findings(p)
    if off:
        kv_transfer = _offload_rendering(c, off)
        pinned = kv.pinned_host_bytes(off)
        host = {"cpu_offload_bytes": int(off), "pinned_bytes_estimate": pinned, "dev_shm_bytes": pinned,
                "memlock_bytes": pinned}
        c.findings.append(_f("info", "offload_host_memory",
                             "KV offload pins host memory: about %.1f GiB (%s x %.1f GiB) as shared memory"
                             % (pinned / GIB, kv.PINNED_HOST_FACTOR, off / GIB),
                             "size /dev/shm and the memlock limit for it (host_tuning role)"))
    prompt = p.get("expected_prompt_tokens")
    conc = p.get("expected_concurrency") or 1
    if prompt and cap["kv_pool_tokens"] is not None:
        holds = kv.pool_tokens_for(cap, prompt)
        need = kv.offload_needs(cap["kv_bytes_per_token_per_rank"], c.ranks, holds, prompt, conc)
        cap["offload"] = need
        state = kv.demand_blocks(cap, prompt)[1]
        if need["tokens_beyond_gpu"] and (not off or off < need["cpu_bytes_to_use"]):
            c.findings.append(_f("warning", "demand_exceeds_gpu_kv",
                                 "%d concurrent prompts of %d tokens need %d tokens of KV; the GPU pool holds %d%s"
                                 % (conc, prompt, prompt * conc, holds, " of them (each request also takes %d state blocks of "
                                    "its linear-attention layers: %d requests fit)" % (state, holds // prompt) if state else ""),
                                 "set cpu_offload_bytes >= %d (%.1f GiB, all ranks) or lower expected_concurrency"
                                 % (need["cpu_bytes_to_use"], need["cpu_bytes_to_use"] / GIB)))
    return kv_transfer, host


def _sleep_mode_findings(c):
    """enable_sleep_mode: never on the CPU build; from vLLM 0.34 the engine then serves /checkpoint/* without
    the API key (releases.SLEEP_MODE_ROUTES), so only on a loopback host, behind the front door."""
    if not c.p.get("enable_sleep_mode"):
        return []
    if c.cpu:
        return [_f("error", "sleep_mode_on_cpu", "enable_sleep_mode is set but platform is cpu: vLLM has no sleep mode there",
                   "remove enable_sleep_mode")]
    routes = R.rule_for(R.SLEEP_MODE_ROUTES, c.version)[1]
    if not routes:
        return []
    where = "vLLM %s serves %s without the API key while sleep mode is on" % (c.version, ", ".join(routes))
    if not _is_loopback(c.p.get("host") or "127.0.0.1"):
        return [_f("error", "sleep_mode_routes_exposed", "enable_sleep_mode with host %s: %s" % (c.p.get("host"), where),
                   "set host 127.0.0.1 (the front door forwards only nginx_api_paths), or remove enable_sleep_mode")]
    return [_f("warning", "sleep_mode_unguarded_routes", where + "; the instance listens on loopback only",
               "keep every client on the front door (nginx forwards only nginx_api_paths), or remove enable_sleep_mode")]


def _is_loopback(host):
    return host in ("localhost", "::1", "[::1]") or host.startswith("127.")


def _offload_rendering(c, off):
    """cpu_offload_bytes as the release spells it (releases.OFFLOAD_SPELLING): vLLM >= 0.34's own flags, or the
    OffloadingConnector JSON (0.26-0.33, and wherever an eviction policy or offload_prompt_only is given)."""
    p = c.p
    policy, prompt_only = p.get("cpu_offload_eviction_policy") or "lru", p.get("cpu_offload_prompt_only")
    spelling = R.rule_for(R.OFFLOAD_SPELLING, c.version)
    if spelling and spelling[1] == "native" and policy == "lru" and prompt_only is None:
        return {"native_gib": off / float(GIB)}
    kv_transfer = va.offload_transfer_config(off, policy)
    if prompt_only is not None:
        kv_transfer["kv_connector_extra_config"]["offload_prompt_only"] = bool(prompt_only)
    return kv_transfer


def offload_option_findings(p):
    """eviction_policy / offload_prompt_only: rendered where the installed release accepts them, else refused."""
    policy, prompt_only = p.get("cpu_offload_eviction_policy") or "lru", p.get("cpu_offload_prompt_only")
    if policy == "lru" and prompt_only is None:
        return []
    if not p.get("cpu_offload_bytes"):
        return [_f("error", "offload_option_without_offload", "cpu_offload_eviction_policy / cpu_offload_prompt_only are set without cpu_offload_bytes",
                   "set cpu_offload_bytes, or drop the offload options")]
    rule = R.rule_for(R.OFFLOAD_OPTIONS, p.get("vllm_version"))
    first = R.version_text(R.OFFLOAD_OPTIONS[0][0])
    if not rule:
        return [_f("error", "offload_option_unverified", "cpu_offload_eviction_policy %s / cpu_offload_prompt_only %s: the OffloadingConnector "
                   "of vLLM %s was not read here (its options are known from %s)" % (policy, prompt_only, p.get("vllm_version"), first),
                   "leave cpu_offload_eviction_policy lru and cpu_offload_prompt_only unset, or plan for vLLM %s or later" % first)]
    if policy not in rule[1]:
        return [_f("error", "offload_eviction_policy_unknown", "cpu_offload_eviction_policy %r is not one of vLLM's %s" % (policy, list(rule[1])),
                   "use one of %s" % ", ".join(rule[1]))]
    return []


def _group_over_hosts(c, tp, pp, hw):
    """nodes > 1: one instance over several identical hosts (gpus describes one of them); multinode.py."""
    p = c.p
    nodes = int(p.get("nodes") or 1)
    if nodes <= 1:
        return nodes, tp, pp, None, []
    # The CPU build runs one rank per host here (gpus_per_host 1): TP 1 x PP nodes by default.
    # Unset sizes mean vLLM's documented layout (TP = GPUs per host, PP = hosts), not the single-host 1 x 1.
    tp, pp = p.get("tensor_parallel_size"), p.get("pipeline_parallel_size")
    tp, pp, per_host, findings = mn.group_shape(nodes, tp, pp, 1 if c.cpu else (hw["count"] if hw else 0), c.cfg["num_layers"])
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
    groups = [i["nodes"] for i in result["instances"] if i.get("nodes")]
    if not groups:
        return ""
    if any(n.get("ray_worker") for n in groups[0]):
        return ", over %d hosts (Ray: one `vllm serve` on the head, a Ray worker on each other host)" % len(groups[0])
    return ", over %d hosts (vLLM multi-node, one `vllm serve` per host)" % len(groups[0])


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
            if node.get("ray_worker"):
                lines.append("  node %d (Ray worker: the vllm role's Ray unit, no vllm serve)" % node["node_rank"])
                continue
            if "node_rank" in node:
                lines.append("  node %d (%s):" % (node["node_rank"], "headless" if node["headless"] else "head, serves the API"))
            lines.append("  " + " ".join(shlex.quote(arg) for arg in node["argv"]))
    for f in result["findings"]:
        lines.append("%-7s %s: %s -> %s" % (f["level"].upper(), f["code"], f["message"], f["fix"]))
    return "\n".join(lines)
