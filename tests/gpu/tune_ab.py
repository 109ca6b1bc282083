# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The tuner (issue 25) measured on one machine: vLLM's defaults vs the seeds' hand flags vs the tuner's grid.

    tune_ab.py --vllm /tmp/site/bin/vllm --out DIR [--model-config Qwen__Qwen3-8B] [--max-model-len N]
               [--grid JSON] [--workloads JSON] [--slo JSON] [--repeats N] [--budget-seconds S]
               [--resume DIR ...] [--only id,id] [--cpu --model DIR] [--extra-env JSON] [--score-only]

WHAT IS THE SCRIPT'S AND WHAT IS THE COLLECTION'S. Engine launch is this script's: the GPU host is a container
without systemd (shared/notes/GPU_HOST.md), so it starts `vllm serve` itself as its own child (the plan's own
argv, plus `--load-format dummy` on CUDA and a free port), waits for /health and one completion, and stops it
with SIGTERM to its process group (never pkill). Everything else is the collection's code, imported from this
checkout: the grid (plugins/module_utils/tune/grid.py: default_grid, validate, expand, candidate_profile), the
inputs check and hash (tune/steps.py expand), every candidate planned with the planner (plugins/modules/vllm_plan.py
plan_from_options, exactly what the vllm_plan module runs) and pruned with tune/prune.py through tune/steps.py prune
(each skipped candidate keeps the planner's reason, and is never started), the benchmark argv (bench/session.py
plan_points -> bench/workloads.py bench_argv: vLLM's own `vllm bench serve`, the seeds per point), the scoring
(tune/score.py via tune/steps.py score: goodput under the SLO, median of repeats, the noise band, the winner,
within-noise verdicts, the Pareto set, the launch counts) and the report (tune/report.py, written by
tune/steps.py write_report into OUT/tuner/). playbooks/tune.yml does the same through the vllm role's systemd units.

Candidates: `defaults` (vLLM's own: no tuning flag), `seeds` (the hand flags a seed recommends for a long-context
Qwen3 on one GPU: SEEDS below, with the seed file cited), then the tuner's grid (tune/grid.py default_grid for the
platform, or --grid). Each launched candidate is benchmarked --repeats times; the repeats of one candidate run back
to back on the same engine (an engine start costs 60-270 s on the H200), so candidates are NOT interleaved within a
call; --runs-per-launch 1 with --repeats N and N calls with --resume interleaves them across calls (each call then
measures every candidate once more, on a fresh engine). Repeat r of every candidate sends the same prompts (seed
--seed + r, per point bench/session.py point_seed), different from the other repeats' (no prefix-cache reuse).

--budget-seconds: a candidate is started only if the time left covers its expected start + benchmark (the longest
seen so far, or --min-left), a start or a benchmark still running at the deadline is stopped, and the report of
what was measured is always written; the rest is marked `not measured` (no failure). --resume DIR (repeatable)
reads earlier calls' results.json (the inputs must be the same) and continues with the candidates still short of
--repeats runs; failed and skipped candidates stay as they were. --score-only (with --resume) launches nothing: the
final scoring of several calls, on any machine. Launch count: candidates the planner passed that failed to come up
(and of those, out of memory) are counted and reported; the goal is 0.

Output (--out): results.json (this driver's state: inputs, every candidate's plan, verdict, launches and runs),
report.md (the driver's summary + the tuner's own report), tuner/<host>_tune_inputs-<hash>_<stamp>/ (the tuner's
report.md, results.json, pareto.png), every engine log (engines/), every bench JSON and log (bench/), logs.tgz.
Stand-ins, named as such: the word-level tokenizer with the model's vocabulary (tests/gpu/run_engines.py
write_standin_tokenizer) and, on CUDA, vLLM's dummy weights (random values at real size). --cpu runs vLLM's CPU build
(VLLM_TARGET_DEVICE=cpu) on --model with its real weights: the same script end to end on a machine without a GPU.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CONFIGS = os.path.join(ROOT, "tests", "fixtures", "model-configs")
SAFETY_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
OOM = re.compile(r"(CUDA out of memory|OutOfMemoryError|out of memory|No available memory for the cache blocks|"
                 r"insufficient memory|Insufficient memory)", re.IGNORECASE)
DRIVER_NOTE = ("Engine launch is this script's (tests/gpu/tune_ab.py: `vllm serve` started directly, the GPU host has no "
               "systemd); everything else - grid, planning, pruning, the `vllm bench serve` argv, scoring, the winner, "
               "the report - is the collection's own code (plugins/module_utils/tune, plugins/modules/vllm_plan.py, "
               "plugins/module_utils/bench).")

# The seeds' hand flags. The one seed about a long-context Qwen3 (Qwen 3.6-27B at 128K, 2 x A100, TP2; its "two rounds
# of tuning: 1420 -> 1730 tokens/s at 128K", section 3.2 "the golden parameter combination") recommends, per engine:
#   --max-num-seqs 256 --max-num-batched-tokens 4096 --enforce-eager --enable-chunked-prefill
#   --gpu-memory-utilization 0.92 --block-size 32
# Taken as they are, for ONE GPU: all but --gpu-memory-utilization (every candidate gets the same KV bytes,
# kv_cache_memory_bytes, so it sizes nothing here) and the non-tuning ones of its command line (--tensor-parallel-size
# 2: one GPU here; --dtype bfloat16: the model's own; --rope-theta 1000000: no such flag in vLLM 0.26+ and the
# config's own rope_theta; --seed, --port). --enable-chunked-prefill is vLLM V1's default already (kept: the seed
# sets it). The other seeds are multi-GPU (000: 4 x RTX 4090, 750K, TP4) or generic (004), not taken.
SEEDS = [{
    "id": "seeds",
    "file": "shared/seeds/002_3acbfc31f601fdc6.txt",
    "what": "Qwen 3.6-27B at 128K context, vLLM 0.6.3: '--max-num-seqs 256 --max-num-batched-tokens 4096 --enforce-eager "
            "--enable-chunked-prefill --gpu-memory-utilization 0.92 --block-size 32' (section 3.2; 1420 -> 1730 tokens/s)",
    "quoted": ["--max-num-seqs 256", "--max-num-batched-tokens 4096", "--enforce-eager", "--enable-chunked-prefill",
               "--gpu-memory-utilization 0.92", "--block-size 32"],
    "dropped": {"--gpu-memory-utilization 0.92": "every candidate gets the same kv_cache_memory_bytes: it sizes nothing"},
    "overrides": {"max_num_batched_tokens": 4096, "max_num_seqs": 256,
                  "extra_args": ["--block-size", "32", "--enforce-eager", "--enable-chunked-prefill"]},
}]
# The options that enter the inputs: a --resume must agree on each.
INPUT_KEYS = ("platform", "model_config", "model", "max_model_len", "kv_cache_memory_bytes", "base_profile", "grid",
              "workloads", "slo", "noise_pct", "seed", "gpus", "vllm_version", "max_candidates")


def log(msg):
    sys.stdout.write("[tune_ab %s] %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stdout.flush()


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Collection(object):
    """The collection's code, imported from this checkout (an ansible_collections/gpufleet/vllm link to it)."""

    def __init__(self, link_root=None):
        link_root = link_root or tempfile.mkdtemp(prefix="gpufleet-tune-ab-")
        parent = os.path.join(link_root, "ansible_collections", "gpufleet")
        os.makedirs(parent, exist_ok=True)
        link = os.path.join(parent, "vllm")
        if not os.path.exists(link):
            os.symlink(ROOT, link)
        if link_root not in sys.path:
            sys.path.insert(0, link_root)
        base = "ansible_collections.gpufleet.vllm.plugins."
        self.grid = importlib.import_module(base + "module_utils.tune.grid")
        self.steps = importlib.import_module(base + "module_utils.tune.steps")
        self.report = importlib.import_module(base + "module_utils.tune.report")
        self.session = importlib.import_module(base + "module_utils.bench.session")
        self.errors = importlib.import_module(base + "module_utils.error_boundary")
        self._plan_module = None

    def plan(self, profile):
        """The vllm_plan module's own planning (plan_from_options with the module's defaults), as a registered
        result: failed with the error findings' text, as the module's fail_json gives it, when it refuses."""
        if self._plan_module is None:
            self._plan_module = importlib.import_module("ansible_collections.gpufleet.vllm.plugins.modules.vllm_plan")
        params = dict((k, copy.deepcopy(v.get("default"))) for k, v in self._plan_module.ARGUMENT_SPEC.items())
        params.update(copy.deepcopy(profile))
        try:
            result = self._plan_module.plan_from_options(params)
        except self.errors.UserError as exc:
            return {"failed": True, "msg": str(exc), "findings": []}
        errors = [f for f in result["findings"] if f["level"] == "error"]
        if errors:
            result = dict(result, failed=True, msg="vllm_plan found %d error(s): %s" % (len(errors), " | ".join(
                "%s: %s (fix: %s)" % (f["code"], f["message"], f["fix"]) for f in errors)))
        return result


# --- arguments ------------------------------------------------------------------------------------------------
def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.splitlines()[1:]))
    a = p.add_argument
    a("--vllm", default="", help="the vllm command (a path, or e.g. 'python3 -m vllm.entrypoints.cli.main'); "
      "needed unless --score-only")
    a("--out", required=True, help="the folder results.json, report.md, the logs and logs.tgz go in")
    a("--work", default="/tmp/gpufleet-tune-ab", help="model folders and the engines' cache folders (kept between calls)")
    a("--cpu", action="store_true", help="vLLM's CPU build (needs --model with real weights)")
    a("--model", default="", help="a model folder to serve (CPU: required; CUDA: instead of --model-config)")
    a("--model-config", default="Qwen__Qwen3-8B", help="CUDA: a config of tests/fixtures/model-configs, served with "
      "dummy weights and the stand-in tokenizer (run_engines.py's preparation)")
    a("--max-model-len", type=int, default=0, help="default: the model's max_position_embeddings")
    a("--kv-cache-memory-bytes", type=int, default=0, help="the same KV bytes for every candidate (default: 1 GiB on "
      "CPU, 80 GiB on CUDA)")
    a("--base-profile", default="{}", help="JSON: more vllm_plan options for every candidate (e.g. yarn)")
    a("--gpus", default='{"profile": "h200", "count": 1}', help="JSON: vllm_plan's gpus (CUDA)")
    a("--gpu", default="0", help="CUDA_VISIBLE_DEVICES of the engines")
    a("--grid", default="", help="JSON: tune_grid (default: tune/grid.py default_grid for the platform)")
    a("--workloads", default="", help="JSON: the workload mix (gpufleet_workloads form); default: one mix of long and "
      "short prompts at max_model_len, as playbooks/tune.yml")
    a("--slo", default="{}", help="JSON: the SLO (gpufleet_slo form); goodput_*_ms keys make the score goodput")
    a("--repeats", type=int, default=None, help="benchmark runs per candidate, all calls together (default 1, or "
      "what --resume used); raising it on a --resume measures the candidates again")
    a("--runs-per-launch", type=int, default=0, help="runs per engine start (default: --repeats)")
    a("--noise-pct", type=float, default=5.0)
    a("--max-candidates", type=int, default=16)
    a("--seed", type=int, default=1, help="repeat r of every candidate uses seed SEED + r")
    a("--only", default="", help="comma-separated candidate ids to measure in this call (the others stay pending)")
    a("--no-seeds", action="store_true", help="leave the seeds' candidate out")
    a("--allow-lossy", action="store_true", help="tune_allow_lossy: candidates whose answers differ (fp8 KV cache)")
    a("--parallel-starts", action="store_true", help="start every pending candidate's engine at once on the one GPU "
      "(each with its own KV bytes), then benchmark them one at a time, repeat r of all before repeat r+1 of any")
    a("--engine-gpu-memory-utilization", type=float, default=0.0, help="the driver's own --gpu-memory-utilization for "
      "every engine (with --parallel-starts: the share each engine's start-up check asks free; KV is sized by bytes)")
    a("--budget-seconds", type=float, default=540)
    a("--min-left", type=float, default=0, help="start no candidate with less time left (default: 150 CUDA, 90 CPU)")
    a("--engine-timeout", type=float, default=900, help="seconds an engine may take to answer")
    a("--resume", action="append", default=[], help="an earlier call's --out (repeatable)")
    a("--score-only", action="store_true", help="launch nothing: score what --resume holds")
    a("--plan-only", action="store_true", help="launch nothing: plan and prune every candidate and write the report "
      "(a check before a GPU call; needs --vllm-version)")
    a("--extra-env", default="{}", help="JSON object added to every engine's (and benchmark's) environment")
    a("--vllm-version", default="", help="default: asked from --vllm (vllm --version), or taken from --resume")
    a("--served-name", default="tuned")
    a("--host", default="", help="the report's host name (default: this machine's)")
    opts = p.parse_args(argv)
    try:
        check_args(opts)
    except ValueError as exc:
        p.error(str(exc))
    return opts


def _json(opts, name, kinds):
    text = getattr(opts, name.replace("-", "_"))
    if text in ("", None):
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ValueError("--%s is not JSON (%s): give e.g. %s" % (name, exc, {"dict": "'{}'", "list": "'[]'"}[kinds[0]]))
    if not isinstance(value, {"dict": dict, "list": list}[kinds[0]]):
        raise ValueError("--%s must be a JSON %s, not %r" % (name, {"dict": "object", "list": "list"}[kinds[0]], value))
    return value


def check_args(opts):
    """Options checked and parsed in place (JSON -> values); ValueError names the option and the fix."""
    opts.base_profile_v = _json(opts, "base-profile", ["dict"]) or {}
    opts.gpus_v = _json(opts, "gpus", ["dict"]) or {}
    opts.grid_v = _json(opts, "grid", ["dict"])
    opts.workloads_v = _json(opts, "workloads", ["list"])
    opts.slo_v = _json(opts, "slo", ["dict"]) or {}
    opts.extra_env_v = dict((str(k), str(v)) for k, v in (_json(opts, "extra-env", ["dict"]) or {}).items())
    if opts.repeats is not None and opts.repeats < 1:
        raise ValueError("--repeats is %d: give 1 or more" % opts.repeats)
    if opts.runs_per_launch < 0:
        raise ValueError("--runs-per-launch is %d: give 1 or more (0: --repeats)" % opts.runs_per_launch)
    if opts.budget_seconds <= 0:
        raise ValueError("--budget-seconds is %s: give the seconds this call may take (540 inside a 600-s call)"
                         % opts.budget_seconds)
    if opts.score_only and not opts.resume:
        raise ValueError("--score-only scores what earlier calls measured: give their folders with --resume DIR")
    if opts.plan_only and not opts.vllm_version:
        raise ValueError("--plan-only launches nothing and asks no vllm: give --vllm-version (e.g. 0.26.0)")
    if not (opts.score_only or opts.plan_only) and not opts.vllm:
        raise ValueError("--vllm is required to launch engines (e.g. --vllm /tmp/site/bin/vllm), or use --score-only")
    if opts.cpu and not opts.model and not opts.resume:
        raise ValueError("--cpu serves real weights: give --model DIR (e.g. tests/fixtures/tiny-qwen3/model)")
    for folder in opts.resume:
        if not os.path.isfile(os.path.join(folder, "results.json")):
            raise ValueError("--resume %s has no results.json: give the --out folder of an earlier call" % folder)
    opts.only_v = [x for x in opts.only.split(",") if x]
    opts.min_left = opts.min_left or (90.0 if opts.cpu else 150.0)
    return opts


# --- inputs and candidates --------------------------------------------------------------------------------------------
def model_folder(opts, engines_module=None):
    """The folder served: --model, or (CUDA) a config of tests/fixtures/model-configs + the stand-in tokenizer,
    prepared as tests/gpu/run_engines.py prepare does (--plan-only: the config alone, the planner reads no more)."""
    if opts.model:
        return os.path.abspath(opts.model)
    folder = os.path.join(opts.work, "models", opts.model_config)
    if not os.path.exists(os.path.join(folder, "config.json")):
        os.makedirs(folder, exist_ok=True)
        shutil.copy(os.path.join(CONFIGS, opts.model_config + ".config.json"), os.path.join(folder, "config.json"))
    if not opts.plan_only and not os.path.exists(os.path.join(folder, "tokenizer.json")):
        engines = engines_module or load("gpufleet_run_engines", os.path.join(HERE, "run_engines.py"))
        engines.write_standin_tokenizer(folder, int(engines.text_config(read_config(folder))["vocab_size"]))
    return folder


def read_config(folder):
    with open(os.path.join(folder, "config.json")) as handle:
        return json.load(handle)


def default_workloads(max_len):
    """playbooks/tune.yml's default: one mix, prompts from 0.1x to 1.9x its input_len, the longest at max_model_len."""
    return [{"name": "mix", "input_len": int((max_len - 80) / 1.9), "range_ratio": 0.9, "output_len": 64,
             "num_prompts": 16, "concurrency": [4]}]


def inputs_from(opts, model, config, vllm_version):
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    max_len = opts.max_model_len or int(text.get("max_position_embeddings") or 4096)
    kv = opts.kv_cache_memory_bytes or (2 ** 30 if opts.cpu else 80 * 2 ** 30)
    return {"platform": "cpu" if opts.cpu else "cuda", "model": model, "model_config": None if opts.model else opts.model_config,
            "max_model_len": max_len, "kv_cache_memory_bytes": kv, "base_profile": opts.base_profile_v,
            "grid": opts.grid_v, "workloads": opts.workloads_v or default_workloads(max_len), "slo": opts.slo_v,
            "repeats": opts.repeats or 1, "noise_pct": opts.noise_pct, "seed": opts.seed,
            "gpus": None if opts.cpu else opts.gpus_v, "vllm_version": vllm_version, "max_candidates": opts.max_candidates,
            "allow_lossy": bool(opts.allow_lossy)}


def base_profile(inputs, served_name):
    base = {"model": inputs["model"], "max_model_len": inputs["max_model_len"],
            "kv_cache_memory_bytes": inputs["kv_cache_memory_bytes"], "served_model_name": served_name,
            "platform": inputs["platform"], "vllm_version": inputs["vllm_version"]}
    if inputs["gpus"]:
        base["gpus"] = inputs["gpus"]
    base.update(inputs["base_profile"] or {})
    return base


def tuner_params(inputs, config, served_name, gpu_type, base_capacity=None):
    """The parameters of vllm_tune run=expand (tune/steps.py expand); base_capacity: the base plan's (default grid)."""
    return {"base_profile": base_profile(inputs, served_name), "grid": inputs["grid"] or {},
            "allow_lossy": bool(inputs.get("allow_lossy")), "base_capacity": base_capacity or {},
            "model_config": config, "workloads": inputs["workloads"], "concurrency": 0, "slo": inputs["slo"],
            "repeats": inputs["repeats"], "noise_pct": inputs["noise_pct"], "max_candidates": inputs["max_candidates"],
            "vllm_version": inputs["vllm_version"], "gpu_type": gpu_type, "previous_vars": {}, "vars_name": "vllm_tuned"}


def candidate_list(C, expanded, base, with_seeds=True):
    """The tuner's candidates (defaults first) with the seeds' after defaults; a grid candidate equal to the seeds'
    flags is the seeds' (listed once)."""
    out = list(expanded["candidates"])
    if not with_seeds:
        return out
    for seed in SEEDS:
        overrides = copy.deepcopy(seed["overrides"])
        same = [c for c in out if c["overrides"] == overrides]
        if same:
            same[0]["seed_file"] = seed["file"]
            continue
        label = "seeds' hand flags (%s): %s" % (os.path.basename(seed["file"]), " ".join(
            ["--max-num-batched-tokens %d" % overrides["max_num_batched_tokens"], "--max-num-seqs %d" % overrides["max_num_seqs"]]
            + overrides["extra_args"]))
        out.insert(1, {"id": seed["id"], "label": label, "overrides": overrides, "seed_file": seed["file"],
                       "profile": C.grid.candidate_profile(base, overrides)})
    return out


def plan_and_prune(C, candidates, expanded):
    """Each candidate planned (vllm_plan), then tune/steps.py prune: {verdicts, launch, skipped, plan_hash}, plans."""
    plans = [C.plan(c["profile"]) for c in candidates]
    pruned = C.steps.prune({"candidates": candidates, "plans": plans, "workloads": expanded["workloads"],
                            "concurrency": expanded["concurrency"], "concurrency_given": expanded["concurrency_given"]})
    return pruned, plans


# --- resume -----------------------------------------------------------------------------------------------------------
def input_differences(a, b):
    return [k for k in INPUT_KEYS if json.dumps(a.get(k), sort_keys=True) != json.dumps(b.get(k), sort_keys=True)]


def merge_resumed(docs, inputs=None):
    """Earlier calls' results.json documents -> {id: record}, runs united (deduplicated by run id), launches united;
    a candidate is `failed` only when it has no run. Inputs must agree with ``inputs`` (or the first document's)."""
    ref = inputs or (docs[0]["inputs"] if docs else {})
    merged = {}
    for doc in docs:
        diff = input_differences(ref, doc["inputs"])
        if diff:
            raise ValueError("--resume %s was measured with other inputs (%s): resume with the same options, or start "
                             "afresh without --resume" % (doc.get("out", "?"), ", ".join(diff)))
        for rec in doc["candidates"]:
            cur = merged.setdefault(rec["id"], dict(rec, runs=[], launches=[], source_dirs=[]))
            seen = set(r["run_id"] for r in cur["runs"])
            cur["runs"] += [dict(r, dir=doc.get("_dir")) for r in rec.get("runs") or [] if r["run_id"] not in seen]
            seen_l = set(x.get("launch_id") for x in cur["launches"])
            cur["launches"] += [dict(x, dir=doc.get("_dir")) for x in rec.get("launches") or [] if x.get("launch_id") not in seen_l]
            if doc.get("_dir"):
                cur["source_dirs"].append(doc["_dir"])
    for rec in merged.values():
        rec["status"] = status_of(rec)
    return merged


def status_of(rec):
    if rec.get("verdict", {}).get("status") == "skipped":
        return "skipped"
    if rec.get("runs"):
        return "measured"
    if any(x.get("outcome") == "failed" for x in rec.get("launches") or []):
        return "failed"
    return "not measured"


def pending(records, repeats, only=None):
    """Ids to measure now: launchable, not failed, fewer runs than ``repeats``; fewest runs first, then list order."""
    rows = [(len(r.get("runs") or []), i, r["id"]) for i, r in enumerate(records)
            if r.get("verdict", {}).get("status") == "launch" and r["status"] != "failed"
            and len(r.get("runs") or []) < repeats and (not only or r["id"] in only)]
    return [rid for _n, _i, rid in sorted(rows)]


# --- engine ------------------------------------------------------------------------------------------------------------
def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def http(url, body=None, timeout=5.0):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"} if data else {})
    with urllib.request.urlopen(req, timeout=timeout) as resp:  # nosec - the engine this script started, loopback
        return resp.status, resp.read().decode("utf-8", "replace")


def set_flag(argv, flag, value):
    out = list(argv)
    if flag in out:
        out[out.index(flag) + 1] = value
    else:
        out += [flag, value]
    return out


def engine_argv_env(opts, plan, vllm_cmd, port, cache):
    """The plan's own argv (what the vllm role's unit runs), on a free port, + --load-format dummy on CUDA."""
    inst = plan["instances"][0]
    argv = list(vllm_cmd) + [str(a) for a in inst["argv"][1:]]
    argv = set_flag(set_flag(argv, "--port", str(port)), "--host", "127.0.0.1")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "HOME": os.path.join(cache, "home"),
           "HF_HOME": os.path.join(cache, "huggingface"), "VLLM_CACHE_ROOT": os.path.join(cache, "vllm"),
           "XDG_CACHE_HOME": cache, "TRITON_CACHE_DIR": os.path.join(cache, "triton"), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "PYTHONUNBUFFERED": "1"}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    env.update(dict((str(k), str(v)) for k, v in (inst.get("environment") or {}).items()))
    if opts.cpu:
        env.update({"VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_OMP_THREADS_BIND": "auto"})
    else:
        argv += ["--load-format", "dummy"]
        if opts.engine_gpu_memory_utilization:
            argv = set_flag(argv, "--gpu-memory-utilization", str(opts.engine_gpu_memory_utilization))
        env["CUDA_VISIBLE_DEVICES"] = opts.gpu
        env.update(SAFETY_ENV)
    env.update(opts.extra_env_v)
    if not opts.cpu:
        env.update(SAFETY_ENV)  # forced: NVLink multicast stays off on the shared host
    os.makedirs(env["HOME"], exist_ok=True)
    return argv, env


class Engine(object):
    """One `vllm serve` as this script's child, in its own process group; its output in a log file."""

    def __init__(self, argv, env, log_path):
        self.argv, self.env, self.log_path = argv, env, log_path
        self.port = int(argv[argv.index("--port") + 1])
        self.url = "http://127.0.0.1:%d" % self.port
        self.proc = None

    def start(self):
        self.handle = open(self.log_path, "wb")
        self.handle.write(("# %s\n" % " ".join(shlex.quote(a) for a in self.argv)).encode())
        self.handle.flush()
        self.proc = subprocess.Popen(self.argv, env=self.env, stdout=self.handle, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True, cwd=self.env["HOME"])

    def wait_ready(self, model, deadline):
        """(outcome, seconds): healthy (health 200 and one completion), failed (exited), or deadline."""
        began = time.time()
        while time.time() < deadline:
            if self.proc.poll() is not None:
                return "failed", "engine exited rc=%s" % self.proc.returncode
            try:
                if http(self.url + "/health", timeout=2)[0] == 200:
                    answer = http(self.url + "/v1/completions", {"model": model, "prompt": "Say OK.", "max_tokens": 4},
                                  timeout=max(5.0, deadline - time.time()))
                    if answer[0] == 200:
                        return "healthy", round(time.time() - began, 1)
            except (OSError, ValueError):
                pass
            time.sleep(1)
        return "deadline", "still starting at the deadline"

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(40)
            except (OSError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except OSError:
                    pass
                self.proc.wait(20)
        self.handle.close()

    def log_text(self):
        with open(self.log_path, errors="replace") as handle:
            return handle.read()


def failure_reason(text, why):
    """'did not come up: <why>: <the log's error line>'; the OOM line first when there is one."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    oom = [ln for ln in lines if OOM.search(ln)]
    err = [ln for ln in lines if re.search(r"(Error|error:|Exception|Traceback)", ln)]
    line = (oom or err or lines[-1:] or [""])[-1]
    return "did not come up: %s: %s" % (why, line[-400:])


# --- benchmark ----------------------------------------------------------------------------------------------------------
def scalar_result(result):
    """vLLM's result JSON without its per-request lists (kept whole in the bench file)."""
    return dict((k, v) for k, v in result.items() if not isinstance(v, (list, dict)))


def bench_run(C, opts, inputs, vllm_cmd, engine, env, folder, repeat, deadline, tokenizer):
    """One repeat: every workload's points (bench/session.py plan_points), vLLM's own `vllm bench serve` each."""
    os.makedirs(folder, exist_ok=True)
    points, files = [], []
    for w in inputs["workloads_checked"]:
        w = dict(w, seed=opts.seed + repeat)
        params = {"workload": w, "max_model_len": inputs["max_model_len"], "vllm_bin": "VLLM", "model": opts.served_name,
                  "tokenizer": tokenizer, "slo": inputs["slo"],
                  "targets": [{"name": "engine", "kind": "instance", "url": engine.url, "metrics_urls": [engine.url + "/metrics"]}]}
        _w, planned = C.session.plan_points(params)
        for point in planned:
            name = "%s-c%d" % (point["workload"], point["concurrency"])
            argv = list(vllm_cmd) + [a.replace("{result_dir}", folder).replace("result.json", name + ".json")
                                     for a in point["argv"][1:]]
            left = deadline - time.time()
            if left < 10:
                return None, files, "budget: %.0f s left before %s" % (left, name)
            try:
                proc = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      universal_newlines=True, timeout=left - 5, check=False)
                output, rc = proc.stdout, proc.returncode
            except subprocess.TimeoutExpired as exc:
                output, rc = (exc.stdout or "") if isinstance(exc.stdout, str) else "", "timeout"
            with open(os.path.join(folder, name + ".log"), "w") as handle:
                handle.write(" ".join(shlex.quote(a) for a in argv) + "\n" + (output or ""))
            files.append(os.path.join(folder, name + ".log"))
            if rc != 0:
                return None, files, ("budget: the benchmark was stopped at the deadline (%s)" % name if rc == "timeout"
                                     else "benchmark failed: `vllm bench serve` rc=%s (%s)" % (rc, name))
            with open(os.path.join(folder, name + ".json")) as handle:
                result = json.load(handle)
            files.append(os.path.join(folder, name + ".json"))
            points.append({"workload": point["workload"], "target": point["target"], "concurrency": point["concurrency"],
                           "seed": point["seed"], "result": scalar_result(result)})
    return points, files, ""


# --- report --------------------------------------------------------------------------------------------------------------
def measured_for_tuner(records):
    """The vllm_tune run=score `measured` list (runs already read: tune/steps.py read_runs' output)."""
    out = []
    for r in records:
        status = status_of(r)
        reason = r.get("reason") or ""
        if status == "skipped":
            reason = r["verdict"]["reason"]
        elif status == "failed":
            reason = next((x["reason"] for x in r["launches"] if x.get("outcome") == "failed"), "did not come up")
        elif status == "not measured":
            reason = reason or next((x["reason"] for x in reversed(r.get("launches") or []) if x.get("reason")), "") or \
                "not measured: no call reached it (budget or --only); resume to measure it"
        elif len(r["runs"]) < r.get("repeats_wanted", 1):
            reason = "%d of %d repeat(s) measured" % (len(r["runs"]), r["repeats_wanted"])
        else:
            reason = ""
        ready = [x["ready_seconds"] for x in r.get("launches") or [] if x.get("outcome") == "healthy" and x.get("ready_seconds")]
        out.append({"id": r["id"], "label": r["label"], "status": status, "reason": reason, "ready_seconds": max(ready) if ready else None,
                    "planned": (r.get("verdict") or {}).get("planned") or {}, "gpus": r.get("gpus", 1),
                    "overrides": r.get("overrides") or {}, "runs": [x["points"] for x in r.get("runs") or []]})
    return out


def _ratio(a, b):
    return "-" if a is None or not b else "%+.1f %%" % (100.0 * (a / b - 1))


def write_outputs(C, opts, doc, tuner_p, out):
    """The tuner's own report (tune/steps.py score -> write_report) into OUT/tuner/, then OUT/report.md + results.json."""
    records = doc["candidates"]
    for r in records:
        r["status"] = status_of(r)
        r["repeats_wanted"] = doc["inputs"]["repeats"]
    measured = measured_for_tuner(records)
    p = dict(tuner_p, slo=doc["slo"], plan_hash=doc["plan_hash"], inputs_hash=doc["inputs_hash"], host=doc["host"],
             results_dir=os.path.join(out, "tuner"))
    os.makedirs(p["results_dir"], exist_ok=True)
    for old in os.listdir(p["results_dir"]):
        shutil.rmtree(os.path.join(p["results_dir"], old), ignore_errors=True)
    scored = C.steps.score(p, measured, write=True, stamp=time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))
    doc["tuner"] = {k: scored[k] for k in ("candidates", "decision", "pareto", "counts", "overrides", "vars_text")}
    doc["tuner"]["dir"] = os.path.relpath(scored["dir"], out)
    by = dict((s["id"], s) for s in scored["candidates"])
    defaults = by.get("defaults") or {}
    decision = scored["decision"]
    best = by.get(decision.get("best") or "") or {}
    seeds = by.get("seeds") or {}
    lines = ["# Tune A/B: vLLM defaults vs the seeds' hand flags vs the tuner's grid (tests/gpu/tune_ab.py)", "",
             DRIVER_NOTE, "",
             "- Machine: %s; vLLM %s; model %s, max_model_len %d, %d KV bytes per candidate (kv_cache_memory_bytes)."
             % (doc["machine"], doc["inputs"]["vllm_version"], doc["model_name"], doc["inputs"]["max_model_len"],
                doc["inputs"]["kv_cache_memory_bytes"]),
             "- Workloads: `%s`; SLO `%s`; %d repeat(s) per candidate (%s)." % (
                 json.dumps(doc["inputs"]["workloads"], sort_keys=True), json.dumps(doc["slo"], sort_keys=True),
                 doc["inputs"]["repeats"], doc["repeat_order"]),
             "- Seeds' candidate: %s." % "; ".join("`%s` from %s (%s; dropped: %s)" % (
                 s["id"], s["file"], s["what"], "; ".join("%s - %s" % kv for kv in s["dropped"].items()))
                 for s in SEEDS) if not doc.get("no_seeds") else "- Seeds' candidate left out (--no-seeds).",
             "- Calls: %s." % "; ".join("%s (%s, %s s)" % (c["started"], c["mode"], c.get("seconds")) for c in doc["calls"]),
             "",
             "| candidate | flags | planner | launches (outcome, s to ready) | runs | score | vs defaults |",
             "|---|---|---|---|---|---|---|"]
    for r in records:
        s = by.get(r["id"], {})
        lines.append("| %s | %s | %s | %s | %d | %s | %s |" % (
            r["id"], r["label"].replace("|", "/"), (r.get("verdict") or {}).get("reason", "").replace("|", "/"),
            ", ".join("%s %s" % (x.get("outcome"), x.get("ready_seconds") or "") for x in r.get("launches") or []) or "-",
            len(r.get("runs") or []), "-" if s.get("score") is None else "%.4g" % s["score"],
            _ratio(s.get("score"), defaults.get("score")) if r["id"] != "defaults" else "1"))
    counts = scored["counts"]
    lines += ["", "**Winner: %s** - %s." % (decision["winner"], decision["reason"]),
              "Best measured: %s (%s vs defaults); the seeds' flags: %s vs defaults%s." % (
                  decision.get("best"), _ratio(best.get("score"), defaults.get("score")),
                  _ratio(seeds.get("score"), defaults.get("score")),
                  ", within noise of the best" if "seeds" in decision.get("within_noise_of_best", []) else ""),
              "Launches: %d candidate(s) passed the planner, %d failed to come up (%d out of memory), %d skipped by the "
              "planner (each with its reason above), %d not measured yet." % (
                  counts["planner_passed"], counts["failed_launches"], counts["oom_launches"], counts["skipped"],
                  len([r for r in records if r["status"] == "not measured"])),
              "", "## The tuner's own report (%s)" % doc["tuner"]["dir"], ""]
    with open(os.path.join(scored["dir"], "report.md")) as handle:
        lines.append(handle.read())
    lines += ["", "## The winner file the tuner would write", "", "```yaml", scored["vars_text"].rstrip("\n"), "```", ""]
    with open(os.path.join(out, "report.md"), "w") as handle:
        handle.write("\n".join(lines))
    tmp = os.path.join(out, "results.json.tmp")
    with open(tmp, "w") as handle:
        json.dump(doc, handle, indent=1, sort_keys=True, default=str)
    os.replace(tmp, os.path.join(out, "results.json"))
    with tarfile.open(os.path.join(out, "logs.tgz.tmp"), "w:gz") as tar:
        for sub in ("engines", "bench"):
            if os.path.isdir(os.path.join(out, sub)):
                tar.add(os.path.join(out, sub), arcname=sub)
    os.replace(os.path.join(out, "logs.tgz.tmp"), os.path.join(out, "logs.tgz"))
    return scored


# --- main ------------------------------------------------------------------------------------------------------------------
def vllm_version_of(vllm_cmd):
    try:
        out = subprocess.run(list(vllm_cmd) + ["--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             universal_newlines=True, timeout=300, check=False).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SystemExit("tune_ab.py: cannot run %s --version (%s): give --vllm-version" % (" ".join(vllm_cmd), exc))
    found = re.findall(r"^(\d+\.\d+\.\d+)", out, re.MULTILINE)
    if not found:
        raise SystemExit("tune_ab.py: %s --version printed no version: give --vllm-version\n%s" % (" ".join(vllm_cmd), out[-800:]))
    return found[-1]


def machine_words(opts):
    if opts.cpu:
        return "cpu (vLLM's CPU build), %d cores" % (os.cpu_count() or 0), "cpu"
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader",
                              "-i", opts.gpu], stdout=subprocess.PIPE, universal_newlines=True, timeout=60, check=False).stdout
        name = out.strip().split(",")[0].strip() or "unknown GPU"
        return "GPU %s: %s" % (opts.gpu, out.strip()), name
    except (OSError, subprocess.TimeoutExpired):
        return "GPU %s (nvidia-smi not found)" % opts.gpu, "unknown"


def model_words(model):
    """The served folder as the report names it: relative to the checkout when inside it."""
    path = os.path.abspath(model)
    return os.path.relpath(path, ROOT) if path.startswith(ROOT + os.sep) else path


def copy_resumed(records, out):
    """Files of resumed runs and launches copied into OUT (OUT is then complete by itself)."""
    for r in records:
        for item in (r.get("runs") or []) + (r.get("launches") or []):
            src_dir = item.pop("dir", None)
            for rel in item.get("files") or []:
                src, dst = os.path.join(src_dir or out, rel), os.path.join(out, rel)
                if src_dir and os.path.abspath(src) != os.path.abspath(dst) and os.path.exists(src):
                    os.makedirs(os.path.dirname(dst), exist_ok=True)
                    shutil.copy2(src, dst)
        r.pop("source_dirs", None)


def main(argv=None):
    opts = parse_args(argv)
    t0 = time.time()
    deadline = t0 + opts.budget_seconds
    out = os.path.abspath(opts.out)
    os.makedirs(out, exist_ok=True)
    os.makedirs(opts.work, exist_ok=True)
    C = Collection(os.path.join(opts.work, "collection"))
    docs = []
    for folder in opts.resume:
        with open(os.path.join(folder, "results.json")) as handle:
            docs.append(dict(json.load(handle), _dir=os.path.abspath(folder)))
    opts.repeats = opts.repeats or (max(d["inputs"]["repeats"] for d in docs) if docs else 1)
    opts.runs_per_launch = opts.runs_per_launch or opts.repeats
    vllm_cmd = shlex.split(opts.vllm) if opts.vllm else []
    version = opts.vllm_version or (docs[0]["inputs"]["vllm_version"] if docs else "") or vllm_version_of(vllm_cmd)
    version = version.split("+")[0]
    if docs:
        inputs = docs[0]["inputs"]
        model = inputs["model"] if (opts.score_only or not inputs.get("model_config")) else model_folder(opts)
        inputs = dict(inputs, model=model, repeats=opts.repeats)
        for d in docs:
            d["inputs"] = dict(d["inputs"], model=model)
        mine = inputs_from(opts, model, read_config(model) if os.path.exists(os.path.join(model, "config.json")) else {}, version)
        if not opts.score_only:
            diff = input_differences(inputs, mine)
            if diff:
                raise SystemExit("tune_ab.py: --resume was measured with other inputs than these options (%s): give the "
                                 "same --grid/--workloads/--slo/--repeats/... as the earlier call" % ", ".join(diff))
    else:
        model = model_folder(opts)
        inputs = inputs_from(opts, model, read_config(model), version)
    config = read_config(model) if os.path.exists(os.path.join(model, "config.json")) else docs[0]["model_config_json"]
    machine, gpu_type = (docs[-1]["machine"], docs[-1]["gpu_type"]) if opts.score_only else machine_words(opts)
    if opts.plan_only and not opts.cpu:
        machine, gpu_type = "plan only (declared gpus %s)" % json.dumps(opts.gpus_v, sort_keys=True), "plan only"
    base_capacity = None
    if not inputs["grid"] and not opts.score_only:  # the default grid reads the base plan's KV cache, as tune.yml
        base_capacity = C.plan(base_profile(inputs, opts.served_name)).get("capacity")
    elif docs:
        base_capacity = docs[-1].get("base_capacity")
    tuner_p = tuner_params(inputs, config, opts.served_name, gpu_type, base_capacity)
    expanded = C.steps.expand(tuner_p)
    tuner_p["grid_why"] = expanded["grid_why"]
    log("grid: %s (%s)" % (json.dumps(expanded["grid"], sort_keys=True), "; ".join(expanded["grid_why"])))
    candidates = candidate_list(C, expanded, tuner_p["base_profile"], with_seeds=not opts.no_seeds)
    merged = merge_resumed(docs, inputs) if docs else {}
    if opts.score_only:
        # Nothing is launched: the verdicts and plans are those the measuring calls made (the model folder they
        # planned from may not exist here).
        missing = [c["id"] for c in candidates if c["id"] not in merged]
        if missing:
            raise SystemExit("tune_ab.py --score-only: the resumed calls have no record of %s" % ", ".join(missing))
        pruned = {"verdicts": [merged[c["id"]]["verdict"] for c in candidates], "plan_hash": docs[-1]["plan_hash"]}
        plans = [None] * len(candidates)
    else:
        pruned, plans = plan_and_prune(C, candidates, expanded)
    verdicts = dict((v["id"], v) for v in pruned["verdicts"])
    records = []
    for c, plan in zip(candidates, plans):
        rec = merged.get(c["id"]) or {"id": c["id"], "runs": [], "launches": []}
        rec.update(label=c["label"], overrides=c["overrides"], profile=c["profile"], verdict=verdicts[c["id"]],
                   seed_file=c.get("seed_file"))
        rec.pop("reason", None)  # this call's own (a budget stop) is set by measure()
        if plan is not None:
            rec.update(gpus=1 if not plan.get("instances") else C.grid.gpus_used(plan),
                       plan={"failed": bool(plan.get("failed")), "msg": plan.get("msg"),
                             "log_line": (plan.get("capacity") or {}).get("log_line"),
                             "argv": ((plan.get("instances") or [{}])[0]).get("argv"),
                             "findings": [f for f in plan.get("findings") or [] if f["level"] != "info"]})
        rec["status"] = status_of(rec)
        records.append(rec)
    copy_resumed(records, out)
    host = opts.host or (docs[-1]["host"] if docs else socket.gethostname().split(".")[0])
    doc = {"driver": "tests/gpu/tune_ab.py", "note": DRIVER_NOTE, "inputs": inputs, "inputs_hash": expanded["inputs_hash"],
           "plan_hash": pruned["plan_hash"], "slo": expanded["slo"], "host": host, "machine": machine, "gpu_type": gpu_type,
           "model_name": opts.model_config if inputs.get("model_config") else model_words(model),
           "model_config_json": config, "workloads_checked": expanded["workloads"], "base_capacity": base_capacity,
           "grid": expanded["grid"], "grid_why": expanded["grid_why"], "no_seeds": opts.no_seeds, "seeds": SEEDS, "candidates": records,
           "calls": [c for d in docs for c in d.get("calls") or []],
           "repeat_order": ("repeats back to back on one engine per candidate, candidates one after the other (not "
                            "interleaved within a call)" if opts.runs_per_launch >= opts.repeats else
                            "%d run(s) per engine start: the repeats interleaved across calls" % opts.runs_per_launch)}
    call = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0)), "argv": sys.argv[1:] if argv is None else argv,
            "mode": "score only" if opts.score_only else "plan only" if opts.plan_only else ("cpu" if opts.cpu else "cuda"),
            "budget_seconds": opts.budget_seconds}
    doc["calls"].append(call)
    for v in pruned["verdicts"]:
        log("%s (%s): %s - %s" % (v["id"], v["label"], v["status"], v["reason"]))
    try:
        if not (opts.score_only or opts.plan_only):
            (measure_parallel if opts.parallel_starts else measure)(C, opts, doc, records, vllm_cmd, model, out, deadline, t0)
    finally:
        call["seconds"] = round(time.time() - t0, 1)
        scored = write_outputs(C, opts, doc, tuner_p, out)
    log("winner: %s - %s" % (scored["decision"]["winner"], scored["decision"]["reason"]))
    log("launches: %s" % json.dumps(scored["counts"], sort_keys=True))
    log(DRIVER_NOTE)
    log("wrote %s, %s, %s (%.0f s)" % (os.path.join(out, "report.md"), os.path.join(out, "results.json"),
                                       os.path.join(out, "logs.tgz"), time.time() - t0))
    return 0


def expected_seconds(rec, seen, opts):
    """Seconds a candidate is expected to take: its engine start (the longest seen in this call for engines with
    the same --enforce-eager, else --min-left) + its runs (the longest benchmark seen) + 20 s to stop and write."""
    eager = "--enforce-eager" in (rec.get("profile") or {}).get("extra_args", [])
    runs = min(opts.runs_per_launch, opts.repeats - len(rec.get("runs") or []))
    start = seen["ready"].get(eager)
    if start is None:
        return opts.min_left
    return start + runs * seen["bench"] + 20


def launch(C, opts, rec, vllm_cmd, out, left):
    """Start one candidate's engine from its plan's argv (not waiting): (engine, launch record, start time)."""
    began = time.time()
    launch_id = "%s-%s" % (time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(began)), rec["id"])
    argv, env = engine_argv_env(opts, C.plan(rec["profile"]), vllm_cmd, free_port(), os.path.join(opts.work, "cache"))
    log_rel = os.path.join("engines", launch_id + ".log")
    os.makedirs(os.path.join(out, "engines"), exist_ok=True)
    engine = Engine(argv, env, os.path.join(out, log_rel))
    record = {"launch_id": launch_id, "argv": argv, "env": dict((k, v) for k, v in env.items() if k not in ("PATH",)),
              "files": [log_rel]}
    rec.setdefault("launches", []).append(record)
    log("%s: launching (%.0f s left): %s" % (rec["id"], left, " ".join(shlex.quote(a) for a in argv)))
    engine.start()
    return engine, record, began


def await_ready(opts, rec, engine, record, began, deadline, seen):
    """Wait for one engine: True when healthy (its record says in how many seconds), else the record says why."""
    outcome, detail = engine.wait_ready(opts.served_name, min(deadline, began + opts.engine_timeout))
    if outcome == "failed" or (outcome == "deadline" and time.time() - began >= opts.engine_timeout):
        engine.stop()
        record.update(outcome="failed", reason=failure_reason(engine.log_text(), detail))
        log("%s: FAILED %s" % (rec["id"], record["reason"]))
        return False
    if outcome == "deadline":
        record.update(outcome="stopped", reason="not measured: budget (the engine was still starting at the "
                      "deadline, %.0f s after its start); resume to measure it" % (time.time() - began))
        log("%s: %s" % (rec["id"], record["reason"]))
        return False
    record.update(outcome="healthy", ready_seconds=detail)
    eager = "--enforce-eager" in engine.argv
    seen["ready"][eager] = max(seen["ready"].get(eager, 0.0), detail)
    log("%s: ready in %s s" % (rec["id"], detail))
    return True


def run_once(C, opts, doc, rec, engine, record, model, out, deadline, seen):
    """One benchmark repeat of a healthy engine; False when it could not run (budget, or the benchmark failed)."""
    repeat = len(rec["runs"])
    run_id = "%s-r%d" % (record["launch_id"], repeat)
    folder = os.path.join(out, "bench", run_id)
    run_began = time.time()
    inputs = dict(doc["inputs"], workloads_checked=doc["workloads_checked"])
    points, files, why = bench_run(C, opts, inputs, shlex.split(opts.vllm), engine, engine.env, folder, repeat, deadline, model)
    record["files"] += [os.path.relpath(f, out) for f in files]
    if points is None:
        record["reason"] = ("not measured: " + why) if why.startswith("budget") else why
        log("%s: repeat %d: %s" % (rec["id"], repeat, why))
        if not why.startswith("budget"):
            record["outcome"] = "benchmark failed"
        return False
    seen["bench"] = max(seen["bench"], time.time() - run_began)
    rec["runs"].append({"run_id": run_id, "launch_id": record["launch_id"], "repeat": repeat, "points": points,
                        "files": [os.path.relpath(f, out) for f in files], "seconds": round(time.time() - run_began, 1)})
    log("%s: repeat %d: %s" % (rec["id"], repeat, ", ".join("%s c%d: %.1f out tok/s, goodput %s req/s, p90 TTFT %.0f ms, "
        "failed %s" % (p["workload"], p["concurrency"], p["result"].get("output_throughput") or 0, p["result"].get("request_goodput"),
                       p["result"].get("p90_ttft_ms") or 0, p["result"].get("failed")) for p in points)))
    return True


def measure(C, opts, doc, records, vllm_cmd, model, out, deadline, t0):
    """One candidate after the other: start, its repeats, stop."""
    by = dict((r["id"], r) for r in records)
    seen = {"ready": {}, "bench": 0.0}
    todo = pending(records, opts.repeats, opts.only_v)
    log("to measure in this call: %s" % (", ".join(todo) or "nothing"))
    for rid in todo:
        rec = by[rid]
        left = deadline - time.time()
        need = expected_seconds(rec, seen, opts)
        if left < need:
            rec["reason"] = "not measured: budget (%.0f s left of --budget-seconds %.0f, this candidate takes about %.0f s); " \
                "resume to measure it" % (left, opts.budget_seconds, need)
            log("budget: %.0f s left, %s takes about %.0f s: not started" % (left, rid, need))
            continue
        engine, record, began = launch(C, opts, rec, vllm_cmd, out, left)
        try:
            if not await_ready(opts, rec, engine, record, began, deadline, seen):
                if record.get("outcome") == "stopped":
                    break
                continue
            for _run in range(min(opts.runs_per_launch, opts.repeats - len(rec["runs"]))):
                if not run_once(C, opts, doc, rec, engine, record, model, out, deadline, seen):
                    break
        finally:
            engine.stop()
            record["seconds"] = round(time.time() - began, 1)
            rec["status"] = status_of(rec)


def measure_parallel(C, opts, doc, records, vllm_cmd, model, out, deadline, t0):
    """--parallel-starts: every pending candidate started at once on the one GPU (engine starts dominate a GPU call),
    then benchmarked one at a time while the others idle, repeat r of every candidate before repeat r+1 of any
    (every arm of a repeat gets the same prompts: seed --seed + r)."""
    by = dict((r["id"], r) for r in records)
    seen = {"ready": {}, "bench": 0.0}
    todo = pending(records, opts.repeats, opts.only_v)
    log("to measure in this call (parallel starts): %s" % (", ".join(todo) or "nothing"))
    started = []
    try:
        for rid in todo:
            started.append((by[rid],) + launch(C, opts, by[rid], vllm_cmd, out, deadline - time.time()))
        healthy = [(rec, engine, record) for rec, engine, record, began in started
                   if await_ready(opts, rec, engine, record, began, deadline, seen)]
        for _round in range(opts.runs_per_launch):
            for rec, engine, record in healthy:
                if len(rec["runs"]) < opts.repeats and record.get("outcome") == "healthy":
                    run_once(C, opts, doc, rec, engine, record, model, out, deadline, seen)
    finally:
        for rec, engine, record, began in started:
            engine.stop()
            record["seconds"] = round(time.time() - began, 1)
            rec["status"] = status_of(rec)


if __name__ == "__main__":
    sys.exit(main())
