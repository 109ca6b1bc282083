# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The candidate grid (``tune_grid``): validation, defaults, expansion with a cap, each candidate's profile.

A grid maps a knob to the list of values to try; ``null`` in a list means "leave it to vLLM" (the flag is not
rendered). The candidates are the cartesian product, in the grid's key order, plus ``defaults`` (every knob
left to vLLM: the base profile as the operator declared it) first. Knobs:

- ``max_num_batched_tokens``, ``max_num_seqs``: ``--max-num-batched-tokens N`` / ``--max-num-seqs N`` in
  extra_args (vLLM 0.26.0-0.33.0 ``EngineArgs.add_cli_args``; the planner reads them there for its scheduler
  and CUDA-graph figures). A base profile's own value for the knob is replaced, never doubled.
- ``enable_prefix_caching`` (bool), ``kv_cache_dtype`` (str), ``num_speculative_tokens`` (int, only where
  the model has MTP layers: ``num_nextn_predict_layers`` / ``mtp_num_hidden_layers`` in config.json),
  ``cpu_offload_bytes`` (int, host memory for the KV offload tier, all ranks together): options of
  gpufleet.vllm.vllm_plan (the planner renders the release's own offload spelling).
- Lossy knobs change what the model answers: an fp8 KV cache (``kv_cache_dtype: fp8*``, also as
  ``--kv-cache-dtype`` in extra_args) is refused unless ``tune_allow_lossy`` is true, and such a candidate is
  marked lossy in the report.
- ``layout``: ``{tensor_parallel_size, instances}`` (multi-GPU hosts: one TP-N instance vs N/k replicas
  behind the front door).
- ``extra_args``: lists of pass-through flags (``[]``, ``[--block-size, "32"]``, ``[--enforce-eager]``); the
  installed vLLM's own parser checks them when the vllm role installs the unit.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import itertools

from ansible_collections.gpufleet.vllm.plugins.module_utils import cli_flags
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import vllm_args
from ansible_collections.gpufleet.vllm.plugins.module_utils.tune.errors import TuneError

FLAG_KNOBS = {"max_num_batched_tokens": "--max-num-batched-tokens", "max_num_seqs": "--max-num-seqs"}
OPTION_KNOBS = ("enable_prefix_caching", "kv_cache_dtype", "num_speculative_tokens", "cpu_offload_bytes")
KNOBS = ("max_num_batched_tokens", "max_num_seqs", "enable_prefix_caching", "kv_cache_dtype",
         "num_speculative_tokens", "cpu_offload_bytes", "layout", "extra_args")
_KIND = {"max_num_batched_tokens": int, "max_num_seqs": int, "enable_prefix_caching": bool,
         "kv_cache_dtype": str, "num_speculative_tokens": int, "cpu_offload_bytes": int, "layout": dict, "extra_args": list}
KV_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2", "bfloat16", "float16")
# vLLM quantizes K and V to 8 bits for these (without calibrated scales in the checkpoint it warns and uses 1.0)
LOSSY_KV_DTYPES = ("fp8", "fp8_e4m3", "fp8_e5m2")
GIB = 1024 ** 3
DEFAULT_MAX_CANDIDATES = 16


def has_mtp(config):
    """The model has MTP layers (speculative tokens are a knob only then)."""
    text = config.get("text_config") if isinstance((config or {}).get("text_config"), dict) else (config or {})
    return any(int(text.get(k) or 0) > 0 for k in ("num_nextn_predict_layers", "mtp_num_hidden_layers"))


def gpu_count(gpus):
    """GPUs of the host from a gpu_facts result or a declared profile ({count}); 0 when unknown (CPU)."""
    gpus = gpus or {}
    return int(gpus.get("gpu_count") or gpus.get("count") or len(gpus.get("gpus") or []) or 0)


def working_set_tokens(workloads):
    """Tokens of shared prefixes a workload cycles through (prefix_repetition: num_prefixes x prefix_len), the most
    of the workloads; 0 when no workload reuses prefixes."""
    sizes = [int(w.get("num_prefixes") or 0) * int(w.get("prefix_len") or 0)
             for w in workloads or [] if w.get("dataset") == "prefix_repetition"]
    return max(sizes or [0])


def kv_pressure(capacity, workloads):
    """What the base plan's GPU KV cache meets: {gpu_tokens, demand_tokens, working_set_tokens}; demand is the
    longest request times the highest concurrency (prune.workload_demand's figures)."""
    longest, most = 0, 0
    for w in workloads or []:
        body = int(w.get("prefix_len") or 0) + int(w.get("suffix_len") or 0) if w.get("dataset") == "prefix_repetition" \
            else int(int(w["input_len"]) * (1 + float(w.get("range_ratio") or 0.0)))
        longest = max(longest, body + int(w.get("output_len") or 16))
        most = max([most] + [int(c) for c in w.get("concurrency") or [1]])
    return dict(gpu_tokens=int((capacity or {}).get("kv_cache_tokens") or 0), demand_tokens=longest * most,
                working_set_tokens=working_set_tokens(workloads))


def _kv_knobs(capacity, workloads, allow_lossy):
    """KV knobs for a workload the GPU cache cannot hold, with why: offload when prefixes are reused beyond the GPU
    cache (sized to hold the working set 1.5 times, whole GiB), fp8 KV when a lossy knob is allowed."""
    press = kv_pressure(capacity, workloads)
    gpu, knobs, why = press["gpu_tokens"], {}, []
    if not gpu:
        return knobs, ["the base plan gives no GPU KV cache size: the scheduler budgets only"]
    per_token = int((capacity or {}).get("kv_bytes_per_token_tp1") or 0)
    if press["working_set_tokens"] > gpu and per_token:
        size = -(-int(press["working_set_tokens"] * per_token * 1.5) // GIB) * GIB
        knobs["cpu_offload_bytes"] = [None, size]
        why.append("the reused prefixes (%d tokens) exceed the GPU KV cache (%d tokens): a host-memory tier of %d GiB"
                   % (press["working_set_tokens"], gpu, size // GIB))
    if max(press["demand_tokens"], press["working_set_tokens"]) > gpu:
        if allow_lossy:
            knobs["kv_cache_dtype"] = [None, "fp8"]
            why.append("the workload needs %d KV tokens at once, the GPU cache holds %d: an fp8 KV cache doubles it "
                       "(lossy, allowed by tune_allow_lossy)" % (max(press["demand_tokens"], press["working_set_tokens"]), gpu))
        else:
            why.append("an fp8 KV cache would double the GPU cache (%d tokens) but changes the outputs: set "
                       "tune_allow_lossy: true to try it" % gpu)
    return knobs, why


def default_grid(gpus, config, platform="cuda", capacity=None, workloads=None, allow_lossy=False):
    """The grid used when ``tune_grid`` is empty, and why: ({knob: values}, [reasons]). A workload the base plan's
    GPU KV cache cannot hold gets the KV knobs (offload, fp8 KV) instead of the scheduler budgets; MTP where the
    model has it, the layout on a multi-GPU host."""
    if platform == "cpu":
        return {"max_num_batched_tokens": [None, 1024]}, ["the CPU build: the scheduler budget"]
    grid, why = _kv_knobs(capacity, workloads, allow_lossy)
    if not grid:
        grid = {"max_num_batched_tokens": [None, 4096, 16384]}
        why.append("the scheduler budgets (no KV knob applies)")
    if has_mtp(config):
        grid["num_speculative_tokens"] = [None, 2]
        why.append("the model has MTP layers: speculative tokens")
    count = gpu_count(gpus)
    if count > 1:
        grid["layout"] = [{"tensor_parallel_size": count, "instances": 1}, {"tensor_parallel_size": 1, "instances": count}]
        why.append("%d GPUs: one TP-%d instance vs %d replicas" % (count, count, count))
    return grid, why


def _check_value(knob, index, value):
    where = "tune_grid.%s[%d]" % (knob, index)
    kind = _KIND[knob]
    if value is None:
        return None
    if kind is int and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise TuneError("%s is %r: give a whole number >= 0, or null to leave it to vLLM." % (where, value))
    if kind is bool and not isinstance(value, bool):
        raise TuneError("%s is %r: give true or false, or null to leave it to vLLM." % (where, value))
    if knob == "kv_cache_dtype" and value not in KV_DTYPES:
        raise TuneError("%s is %r: use one of %s." % (where, value, ", ".join(KV_DTYPES)))
    if knob == "layout":
        if not isinstance(value, dict) or set(value) - {"tensor_parallel_size", "instances"} or not value:
            raise TuneError("%s is %r: give {tensor_parallel_size: N, instances: M}." % (where, value))
        for key, number in value.items():
            if isinstance(number, bool) or not isinstance(number, int) or number < 1:
                raise TuneError("%s.%s is %r: give a whole number >= 1." % (where, key, number))
    if knob == "extra_args":
        if not isinstance(value, list) or not all(isinstance(a, (str, int, float)) and not isinstance(a, bool) for a in value):
            raise TuneError("%s is %r: give a list of flags, e.g. [--block-size, \"32\"] or [--enforce-eager]." % (where, value))
        _refuse_guarded(where, value)
        return [str(a) for a in value]
    return value


def _refuse_guarded(where, args):
    """A candidate's flags never set what the plan owns (the bind address, the port) nor a secret: matched as
    vLLM's argparse reads them (``--hos``, ``--api_k=KEY``: cli_flags)."""
    guarded = vllm_args.SECRET_FLAGS + tuple(vllm_args.HARMFUL_FLAGS) + vllm_args.OWNED_FLAGS
    for index, word, flag in cli_flags.guarded_words(args, guarded):
        raise TuneError("%s[%d] is %s, which vLLM reads as %s: a candidate may not set it (the plan renders the "
                        "address, port and the other planned flags from vllm_profile; secrets go in the 0600 "
                        "environment file). Use the grid's own knobs or drop the flag."
                        % (where, index, word.split("=", 1)[0], flag))


def lossy_reason(overrides):
    """Why a candidate's outputs differ from the model's (an fp8 KV cache), or ''."""
    dtypes = [overrides.get("kv_cache_dtype")] + cli_flags.flag_values(overrides.get("extra_args") or [], "--kv-cache-dtype")
    lossy = [d for d in dtypes if d in LOSSY_KV_DTYPES]
    return "KV cache in %s (K and V quantized to 8 bits)" % lossy[0] if lossy else ""


def _refuse_lossy(grid):
    for knob in ("kv_cache_dtype", "extra_args"):
        for index, value in enumerate(grid.get(knob) or []):
            why = lossy_reason({knob: value})
            if why:
                raise TuneError("tune_grid.%s[%d] asks for a %s, which changes what the model answers: set "
                                "tune_allow_lossy: true to try it (and check accuracy before serving the winner), or "
                                "drop the value." % (knob, index, why))


def validate_grid(grid, config=None, allow_lossy=False):
    """``tune_grid`` checked: known knobs, lists of typed values (null = vLLM's default), MTP for speculation,
    lossy values only with ``allow_lossy``."""
    if grid in (None, ""):
        return {}
    if not isinstance(grid, dict):
        raise TuneError("tune_grid must be a mapping of knob -> list of values, e.g. {max_num_seqs: [null, 64]}, not %r." % (grid,))
    unknown = sorted(set(grid) - set(KNOBS))
    if unknown:
        raise TuneError("tune_grid has unknown knob(s) %s: use %s (other flags go in tune_grid.extra_args)." % (
            ", ".join(unknown), ", ".join(KNOBS)))
    out = {}
    for knob in KNOBS:
        if knob not in grid:
            continue
        values = grid[knob]
        if not isinstance(values, list) or not values:
            raise TuneError("tune_grid.%s must be a non-empty list of values, not %r." % (knob, values))
        out[knob] = [_check_value(knob, i, v) for i, v in enumerate(values)]
    if any(out.get("num_speculative_tokens") or []) and config is not None and not has_mtp(config):
        raise TuneError("tune_grid.num_speculative_tokens: the model has no MTP layers (config.json has neither "
                        "num_nextn_predict_layers nor mtp_num_hidden_layers): drop the knob.")
    if not allow_lossy:
        _refuse_lossy(out)
    return out


def _label(overrides):
    if not overrides:
        return "defaults"
    parts = []
    for knob in KNOBS:
        if knob not in overrides:
            continue
        value = overrides[knob]
        if knob == "layout":
            parts.append("tp%d-x%d" % (value.get("tensor_parallel_size", 1), value.get("instances", 1)))
        elif knob == "extra_args":
            parts.append(" ".join(value) or "no-extra")
        elif knob == "cpu_offload_bytes":
            parts.append("cpu_offload=%s" % ("%d GiB" % (value // GIB) if value % GIB == 0 else "%d B" % value))
        else:
            parts.append("%s=%s" % (knob, value))
    return ", ".join(parts)


def expand(grid, max_candidates=DEFAULT_MAX_CANDIDATES):
    """[{id, label, overrides}], ``defaults`` first; a product over ``max_candidates`` is an error."""
    knobs = [k for k in KNOBS if k in grid]
    size = 1
    for knob in knobs:
        size *= len(grid[knob])
    if size + 1 > max_candidates:
        raise TuneError("tune_grid expands to %d candidates (%s) plus defaults, over tune_max_candidates %d: drop "
                        "values, or raise tune_max_candidates (each candidate is one engine start and its benchmark)."
                        % (size, " x ".join("%d %s" % (len(grid[k]), k) for k in knobs), max_candidates))
    out, seen = [{"id": "defaults", "label": "defaults", "overrides": {}}], set([()])
    for values in itertools.product(*[grid[k] for k in knobs]):
        overrides = dict((k, v) for k, v in zip(knobs, values) if v is not None and v != [])
        key = tuple((k, repr(overrides[k])) for k in sorted(overrides))
        if key in seen:
            continue
        seen.add(key)
        candidate = {"id": "c%d" % len(out), "label": _label(overrides), "overrides": overrides}
        if lossy_reason(overrides):
            candidate.update(label=candidate["label"] + " (lossy)", lossy=lossy_reason(overrides))
        out.append(candidate)
    return out


def _strip_flag(args, flag):
    out, skip = [], False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg == flag:
            skip = True
            continue
        if arg.startswith(flag + "="):
            continue
        out.append(arg)
    return out


def candidate_profile(base, overrides):
    """The base serving profile (options of gpufleet.vllm.vllm_plan) with one candidate's overrides."""
    profile = dict(base)
    args = [str(a) for a in base.get("extra_args") or []]
    for knob, flag in sorted(FLAG_KNOBS.items()):
        if knob in overrides:
            args = _strip_flag(args, flag) + [flag, str(overrides[knob])]
    for knob in OPTION_KNOBS:
        if knob in overrides:
            profile[knob] = overrides[knob]
    layout = overrides.get("layout") or {}
    profile.update(layout)
    for arg in overrides.get("extra_args") or []:
        args.append(arg)
    if args or "extra_args" in base:
        profile["extra_args"] = args
    return profile


def gpus_used(plan):
    """GPUs a plan's instances use (the CPU build: 1, for per-GPU figures)."""
    used = sum(len(i.get("gpu_indices") or []) for i in plan.get("instances") or [])
    return used or 1
