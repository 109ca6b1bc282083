# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The three steps of gpufleet.vllm.vllm_tune over the pure parts (grid, prune, score, winner, report).

``expand``, ``prune`` and the scoring in ``score`` are pure; ``read_runs`` (the bench reports' results.json)
and ``write_report`` (the report folder) are the only file I/O, on the controller.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import json
import os

from ansible_collections.gpufleet.vllm.plugins.module_utils.bench import slo as slo_rules
from ansible_collections.gpufleet.vllm.plugins.module_utils.bench import targets
from ansible_collections.gpufleet.vllm.plugins.module_utils.bench import workloads as bench_workloads
from ansible_collections.gpufleet.vllm.plugins.module_utils.tune import grid as G
from ansible_collections.gpufleet.vllm.plugins.module_utils.tune import prune as P
from ansible_collections.gpufleet.vllm.plugins.module_utils.tune import report as R
from ansible_collections.gpufleet.vllm.plugins.module_utils.tune import score as S
from ansible_collections.gpufleet.vllm.plugins.module_utils.tune import winner as W
from ansible_collections.gpufleet.vllm.plugins.module_utils.tune.errors import TuneError


def _check_numbers(p):
    if p["repeats"] < 1:
        raise TuneError("tune_repeats is %d: give 1 or more (3 separates a winner from noise; 1 in CI)." % p["repeats"])
    if p["noise_pct"] < 0:
        raise TuneError("tune_noise_pct is %s: give a percentage >= 0." % p["noise_pct"])
    if p["max_candidates"] < 1:
        raise TuneError("tune_max_candidates is %d: give 1 or more." % p["max_candidates"])


def expand(p):
    """Candidates with their profiles, the checked workloads, the demand, the inputs hash."""
    _check_numbers(p)
    base = p["base_profile"] or {}
    if not base.get("model"):
        raise TuneError("The base serving profile has no model: set gpufleet_serving (or vllm_profile) as site.yml serves it.")
    platform = base.get("platform") or "cuda"
    if not p["workloads"]:
        raise TuneError("tune_workloads is empty: declare the workload mix to tune for, e.g. [{name: mix, input_len: 1024, "
                        "range_ratio: 0.9, output_len: 64, num_prompts: 16, concurrency: [4]}] (long and short prompts together).")
    max_len = base.get("max_model_len")
    work = bench_workloads.validate_workloads(p["workloads"], int(max_len) if max_len else 10 ** 9, False)
    allow_lossy = bool(p.get("allow_lossy"))
    if p["grid"]:
        raw, grid_why = p["grid"], ["tune_grid as given"]
    else:
        raw, grid_why = G.default_grid(base.get("gpus"), p["model_config"], platform, p.get("base_capacity"), work, allow_lossy)
    grid = G.validate_grid(raw, p["model_config"] or None, allow_lossy)
    tokens, most = P.workload_demand(work)
    concurrency = p["concurrency"] or most
    slo = slo_rules.validate_slo(p["slo"], [w["name"] for w in work])
    candidates = G.expand(grid, p["max_candidates"])
    for c in candidates:
        c["profile"] = G.candidate_profile(base, c["overrides"])
    digest = W.inputs_hash(base, grid, work, slo, concurrency, p["repeats"], p["noise_pct"], p["vllm_version"], p["gpu_type"])
    return dict(candidates=candidates, grid=grid, grid_why=grid_why, workloads=work, slo=slo, concurrency=concurrency,
                concurrency_given=bool(p["concurrency"]), request_tokens=tokens,
                inputs_hash=digest, already_tuned=W.already_tuned(p["previous_vars"], p["vars_name"], digest))


def prune(p):
    """A verdict per candidate from its plan; ``launch``: the candidates to start, with their profiles."""
    if len(p["plans"]) != len(p["candidates"]):
        raise TuneError("vllm_tune run=prune got %d plans for %d candidates: register one vllm_plan result per candidate, "
                        "in order." % (len(p["plans"]), len(p["candidates"])))
    tokens, most = P.workload_demand(p["workloads"]) if p["workloads"] else (None, 0)
    concurrency = p["concurrency"] or most
    if not p.get("concurrency_given", True) and p["candidates"] and p["plans"]:
        concurrency = P.defaults_hold(p["candidates"][0], p["plans"][0], tokens or 0, concurrency)
    verdicts, launch = [], []
    for c, plan in zip(p["candidates"], p["plans"]):
        v = P.verdict(c, plan, tokens or (c["profile"].get("max_model_len") or 0), concurrency)
        verdicts.append(v)
        if v["status"] == "launch":
            launch.append(dict(c, planned=v["planned"], gpus=G.gpus_used(plan), instances=plan["instances"]))
    base_plan = p["plans"][0] if p["plans"] else {}
    return dict(verdicts=verdicts, launch=launch, skipped=[v for v in verdicts if v["status"] == "skipped"], concurrency=concurrency,
                plan_hash=targets.plan_hash(base_plan.get("instances") or []) if base_plan.get("instances") else "unplanned")


def read_runs(measured):
    """Each measured candidate with ``runs``: the ``points`` of its results.json files (controller I/O)."""
    out = []
    for m in measured:
        runs = []
        for path in m.get("results_json") or []:
            try:
                with open(path) as handle:
                    runs.append(json.load(handle)["points"])
            except (OSError, IOError, ValueError, KeyError) as exc:
                raise TuneError("Candidate %s: %s is not a bench report's results.json (%s)." % (m.get("id"), path, exc))
        out.append(dict(m, runs=runs))
    return out


def score(p, measured, write=True, stamp=None):
    """Scores, decision, Pareto set, counts, report (written unless ``write`` is false), winner file text."""
    slo = p["slo"] or {}
    scored = S.mark_workload_losses([S.score_candidate(m, slo, p["noise_pct"]) for m in measured])
    decision = S.decide(scored)
    front = S.pareto(scored)
    winner = next((m for m in measured if m["id"] == decision["winner"]), {})
    overrides = (winner.get("overrides") or {}) if decision["apply"] else {}
    base = p["base_profile"] or {}
    digest = p.get("inputs_hash") or "unknown"
    measured_on = dict(vllm_version=p["vllm_version"], model=base.get("served_model_name") or base.get("model"),
                       gpu_type=p["gpu_type"], plan_hash=p["plan_hash"], inputs_hash=digest)
    doc = dict(host=p["host"], vllm_version=p["vllm_version"], model=measured_on["model"], gpu_type=p["gpu_type"],
               plan_hash=p["plan_hash"], inputs_hash=digest, metric=S.metric(slo)[1], repeats=p["repeats"],
               noise_pct=p["noise_pct"], candidates=scored, pareto=front, decision=decision, counts=R.launch_counts(scored),
               grid_why=p.get("grid_why") or [])
    result = dict(candidates=scored, decision=decision, pareto=front, counts=doc["counts"], overrides=overrides,
                  table=R.table(scored, front), vars_text=W.vars_text(p["vars_name"], decision, overrides, measured_on),
                  dir="", plot="not drawn (check mode)")
    if write:
        result.update(write_report(p["results_dir"], doc, stamp))
    return result


def write_report(results_dir, doc, stamp=None):
    """The report folder on the controller: report.md, results.json, pareto.png."""
    if not results_dir:
        raise TuneError("tune_results_dir is empty: give the controller folder the tune reports go in.")
    stamp = stamp or datetime.datetime.utcnow().strftime("%Y%m%dT%H%M%SZ")
    folder = os.path.join(results_dir, "%s_tune_inputs-%s_%s" % (doc["host"], doc["inputs_hash"], stamp))
    os.makedirs(folder)
    doc["plot"] = R.write_png(doc["candidates"], doc["pareto"], os.path.join(folder, "pareto.png"),
                              "%s vLLM %s inputs %s" % (doc["host"], doc["vllm_version"], doc["inputs_hash"]))
    with open(os.path.join(folder, "results.json"), "w") as handle:
        handle.write(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    with open(os.path.join(folder, "report.md"), "w") as handle:
        handle.write(R.markdown(doc))
    return dict(dir=folder, plot=doc["plot"])
