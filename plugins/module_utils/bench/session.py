# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the vllm_bench module does for each ``run``: a workload's sweep against its targets, the
canary on each instance, the long-context probe through the front door. Plain dicts in and out (the
module's parameters), the I/O in runner.py, the judgement in the pure files beside it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os
import uuid

from ansible_collections.gpufleet.vllm.plugins.module_utils.bench import canary, failures, mix, probe, report, runner, workloads
from ansible_collections.gpufleet.vllm.plugins.module_utils.bench.errors import BenchError


def bench_env(params):
    """The benchmark's environment: offline tokenizer loading, the API key as vLLM's client reads it."""
    env = dict(os.environ)
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"})
    env.update(dict((str(k), str(v)) for k, v in (params.get("environment") or {}).items()))
    if params.get("api_key"):
        env["OPENAI_API_KEY"] = params["api_key"]  # vllm/benchmarks/lib/endpoint_request_func.py
    return env


def venv_python(params):
    """The Python beside the vllm executable (the instance's venv), unless vllm_python is given."""
    return params.get("vllm_python") or os.path.join(os.path.dirname(params["vllm_bin"]), "python")


def _targets_for(params, workload):
    kinds = ["front_door" if k == "front_door" else "instance" for k in workload["targets"]]
    chosen = [t for t in params["targets"] if t["kind"] in kinds]
    if not chosen:
        raise BenchError("Workload %s wants targets %s but none was given (targets[].kind front_door / instance): "
                         "check bench_front_door_url and bench_instances." % (workload["name"], workload["targets"]))
    return chosen


def point_seed(workload_name, base_seed, index):
    """The seed of one point of a sweep: stable for a declared seed, distinct across points AND workloads.

    Why: with one seed for the whole sweep, every point after the first re-sent the prompts the first one
    left in the prefix cache (real H200, vLLM 0.26.0: 98.4 % prefix hits at a sweep's second concurrency);
    with "base seed + point index", two workloads declared with seeds 1 and 2 of the same input length
    shared a seed and re-sent 8 of 256 prompts (3.1 % hits, tests/fixtures/bench/h200-0.26.0-20261202).
    """
    digest = hashlib.sha256(("%s\0%d\0%d" % (workload_name, base_seed, index)).encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "big") % (2 ** 31)


def plan_points(params):
    """The (target, concurrency, argv) of every point of the workload, in run order."""
    w = workloads.validate_workloads([params["workload"]], params["max_model_len"], has_front_door=True)[0]
    base_seed = workloads.run_seed(w, uuid.uuid4().int)
    points = []
    for target in _targets_for(params, w):
        for level in w["concurrency"]:
            seed = point_seed(w["name"], base_seed, len(points))
            argv = workloads.bench_argv(params["vllm_bin"], w, level, target["url"], params["model"],
                                        params["tokenizer"], "{result_dir}", "result.json", params.get("slo"), seed)
            points.append(dict(workload=w["name"], target=target["name"], kind=target["kind"], seed=seed,
                               target_url=target["url"], concurrency=level, argv=argv,
                               metrics_urls=target["metrics_urls"]))
    return w, points


def run_workload(params, check_mode=False):
    """Every point of one workload: vLLM's raw result, its summary and the engine window."""
    w, points = plan_points(params)
    if check_mode:
        return dict(workload=w, points=points)
    driver = runner.Driver(venv_python(params), bench_env(params), params["run_timeout"])
    try:
        for point in points:
            dataset = mix.jsonl(w["mix"], point["seed"]) if w["mix"] else None
            result, figures, log = runner.measure(driver, point["argv"][3:], point["metrics_urls"],
                                                  params["sample_interval"], dataset)
            if not result.get("completed"):
                found = failures.summarize(result)
                raise BenchError("vllm bench serve completed no request of workload %s via %s (concurrency %d): "
                                 "%s. %s" % (w["name"], point["target"], point["concurrency"],
                                             failures.describe(found), log[-800:]), result=result)
            record(point, w, result, figures)
    finally:
        driver.close()
    return dict(workload=w, points=points)


# Per-request lists of --save-detailed that nothing reads once the failures are counted (a mix's split reads
# them first); they would swell results.json (the texts of random-token prompts, every token's ITL).
_DROPPED = ("generated_texts", "itls", "start_times", "queue_times")


def record(point, w, result, figures):
    """Fill one point: vLLM's result, the summary, the engine window, the failures (and a mix's classes)."""
    if w["mix"]:
        point["classes"] = mix.split(result, w["mix"])
    point["failures"] = failures.summarize(result, failures.asked_output(w), figures)
    for key in _DROPPED if not w["mix"] else ("generated_texts",):
        result.pop(key, None)
    point.update(result=result, summary=report.summary(result), engine=figures)
    return point


def _tier_hits(before, after):
    """{"gpu": prefix-cache hit tokens, "offload": tokens the offload connector found} between two readings."""
    return dict((tier, None if before.get(key) is None or after.get(key) is None else after[key] - before[key])
                for tier, key in (("gpu", "prefix_hits"), ("offload", "offload_hits")))


def _canary_one(params, target):
    metrics = target["metrics_urls"]
    base = target["url"]
    unique = runner.tokenize(base, params["model"], "gpufleet canary %s:" % uuid.uuid4().hex, params.get("api_key"))
    filler = runner.tokenize(base, params["model"], " The quick brown fox jumps over the lazy dog.",
                             params.get("api_key"))
    ids = canary.prompt_ids(unique, filler, params["canary_prompt_tokens"])
    body = canary.request_body(params["model"], ids, params["canary_max_tokens"], params["seed"])
    sends, readings = [], []
    while len(sends) < 2:  # cold, then the same request again (a prefix-cache hit)
        readings.append(runner.scrape(metrics))
        hits = readings[-1]["prefix_hits"]
        answer, seconds = runner.complete(base, body, params.get("api_key"), params["run_timeout"])
        choice = (answer.get("choices") or [{}])[0]
        token_ids = choice.get("token_ids")
        logprobs = (choice.get("logprobs") or {}).get("token_logprobs")
        if token_ids is None:
            raise BenchError("%s returned no token_ids for return_token_ids=true (vLLM >= 0.10.2 has it): this "
                             "engine cannot run the canary; set bench_canary: false." % base)
        sends.append(dict(hits_before=hits, token_ids=token_ids, logprobs=logprobs, seconds=round(seconds, 4)))
    readings.append(runner.scrape(metrics))
    verdict = canary.compare(sends[0]["token_ids"], sends[1]["token_ids"], sends[1]["hits_before"],
                             readings[2]["prefix_hits"])
    # Both tiers: a cold send that found cached tokens proves nothing; a hit through the offload tier is a hit.
    tiers = canary.tier_verdict(sends[0]["token_ids"], sends[1]["token_ids"], _tier_hits(readings[0], readings[1]),
                                _tier_hits(readings[1], readings[2]))
    if tiers["status"] == "not_cold" or (verdict["status"] == "no_hit" and tiers["status"] == "pass"):
        verdict.update(status=tiers["status"], message=tiers["message"], cache_hit=tiers["status"] == "pass")
    verdict["tier"] = tiers["tier"]
    delta = canary.logprob_delta(sends[0]["logprobs"], sends[1]["logprobs"])
    return dict(verdict, target=target["name"], prompt_tokens=len(ids), logprob_delta=delta, cold=sends[0],
                warm=sends[1])


def run_canary(params, check_mode=False):
    """The canary on each instance directly (through nginx the two sends could reach two engines)."""
    instances = [t for t in params["targets"] if t["kind"] == "instance"]
    if not instances:
        raise BenchError("The canary needs the instances' own URLs (targets[].kind instance).")
    if check_mode:
        return dict(canary=[dict(target=t["name"], status="not run (check mode)") for t in instances])
    return dict(canary=[_canary_one(params, t) for t in instances])


def run_probe(params, check_mode=False):
    """One request of (max_model_len - output) prompt tokens through the front door, streamed: TTFT."""
    front = [t for t in params["targets"] if t["kind"] == "front_door"] or \
        [t for t in params["targets"] if t["kind"] == "instance"]
    length = probe.probe_length(params["max_model_len"], params["probe_output_tokens"])
    target = front[0]
    if check_mode:
        return dict(probe=dict(target=target["name"], prompt_tokens=length, status="not run (check mode)"))
    instance = [t for t in params["targets"] if t["kind"] == "instance"][0]
    filler = runner.tokenize(instance["url"], params["model"], " The quick brown fox jumps over the lazy dog.",
                             params.get("api_key"))
    ids = canary.prompt_ids(runner.tokenize(instance["url"], params["model"], "probe %s:" % uuid.uuid4().hex,
                                            params.get("api_key")), filler, length)
    body = dict(model=params["model"], prompt=ids, max_tokens=params["probe_output_tokens"], temperature=0,
                ignore_eos=True)
    ttft, total, chunks = runner.stream_ttft(target["url"], body, params.get("api_key"), params["run_timeout"])
    if ttft is None or chunks < 1:
        raise BenchError("The long-context request (%d prompt tokens) through %s returned no token." % (
            length, target["url"]))
    out = dict(target=target["name"], url=target["url"], prompt_tokens=length,
               output_tokens=params["probe_output_tokens"], ttft_s=round(ttft, 4), e2e_s=round(total, 4),
               chunks=chunks, status="ok")
    if params.get("proxy_read_timeout") and target["kind"] == "front_door":
        out["finding"] = probe.margin(ttft, total, params["proxy_read_timeout"], streaming=True)
    return dict(probe=out)


RUNS = {"workload": run_workload, "canary": run_canary, "probe": run_probe}
