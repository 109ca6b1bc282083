# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The correctness canary across KV tiers on one GPU (issue 46): cold vs a CPU-tier hit, and a planted reset that
misses the CPU tier, caught.

One engine with a KV offload tier, started from the collection's own plan (vllm_plan with cpu_offload_bytes: the argv
the vllm role's unit runs; the GPU host has no systemd, so this script starts `vllm serve` as tests/gpu/tune_ab.py
does), on loopback with VLLM_SERVER_DEV_MODE=1 for POST /reset_prefix_cache (a test engine only). The canary is the
collection's (plugins/module_utils/bench/canary.py: prompt_ids, request_body, tier_verdict); each send's hits are the
deltas of vLLM's own counters (vllm:prefix_cache_hits_total: GPU; vllm:external_prefix_cache_hits_total: the
connector, read by plugins/module_utils/bench/engine.py). Three cases, each with its own unique prompt:

  cpu_tier      cold send; POST /reset_prefix_cache (the GPU cache only) evicts it from the GPU; the same send again:
                its prefix must come from the offload tier and its token ids equal the cold send's  -> pass, offload
  planted_reset the prompt sent once (both tiers hold it); the planted reset: GPU only; the canary's "cold" send
                finds the prompt in the offload tier                                                  -> not_cold
  full_reset    the same prompt; POST /reset_prefix_cache?reset_external=true (both tiers); cold, then again
                                                                                                      -> pass, gpu

    tests/gpu/offload_canary.py --vllm /tmp/site/bin/vllm --out OUT [--plan-only]

Output: OUT/results.json (the plan's argv, every send's token ids, seconds and counter deltas, the verdicts), the
engine's log in OUT/engine.log. Stand-ins, named as such: vLLM's dummy weights (random values at real size) and the
word-level stand-in tokenizer (tests/gpu/run_engines.py), as in tune_ab.py.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import random
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tune_ab  # noqa: E402  # pylint: disable=wrong-import-position  # the engine launch and the collection link

RESET_TRIES = 30  # the reset answers success=false while an offload transfer is in flight: retried each 0.5 s


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--vllm", default="/tmp/site/bin/vllm")
    p.add_argument("--out", required=True)
    p.add_argument("--work", default="/tmp/gpufleet-offload-canary")
    p.add_argument("--model-config", default="Qwen__Qwen3-8B")
    p.add_argument("--kv-cache-memory-bytes", type=int, default=2 << 30, help="the GPU tier")
    p.add_argument("--cpu-offload-bytes", type=int, default=8 << 30, help="the host-memory tier")
    p.add_argument("--prompt-tokens", type=int, default=2048)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--plan-only", action="store_true", help="plan and print the argv; start nothing")
    return p.parse_args(argv)


def tune_opts(opts):
    """tune_ab's options for its engine helpers (model folder, argv and environment)."""
    return tune_ab.parse_args(["--vllm", opts.vllm, "--out", opts.out, "--work", opts.work, "--model-config",
                               opts.model_config, "--max-model-len", "4096", "--kv-cache-memory-bytes",
                               str(opts.kv_cache_memory_bytes), "--vllm-version", "0.26.0",
                               "--engine-gpu-memory-utilization", "0.3", "--served-name", "canary",
                               "--extra-env", '{"VLLM_USE_FLASHINFER_SAMPLER": "0"}']
                              + (["--plan-only"] if opts.plan_only else []))


def plan_profile(opts, model):
    return {"model": model, "max_model_len": 4096, "kv_cache_memory_bytes": opts.kv_cache_memory_bytes,
            "cpu_offload_bytes": opts.cpu_offload_bytes, "served_model_name": "canary", "platform": "cuda",
            "vllm_version": "0.26.0", "gpus": {"profile": "h200", "count": 1}}


class Canary(object):
    """The sends of one engine, with the collection's runner (HTTP, /metrics) and canary (prompt, verdict)."""

    def __init__(self, url, max_tokens):
        base = "ansible_collections.gpufleet.vllm.plugins.module_utils.bench."
        self.runner = importlib.import_module(base + "runner")
        self.canary = importlib.import_module(base + "canary")
        self.session = importlib.import_module(base + "session")
        self.url, self.max_tokens, self.sends = url, max_tokens, []

    def prompt(self, length):
        # Token ids drawn at random, not tokenized text: the stand-in tokenizer maps unknown words to one id, so a
        # "unique" text gave every case the same prompt in the run of 2026-12-05 (tests/fixtures/offload-canary).
        rng = random.Random(uuid.uuid4().int)
        unique = [rng.randrange(1000, 100000) for _i in range(32)]
        filler = [rng.randrange(1000, 100000) for _i in range(64)]
        return self.canary.prompt_ids(unique, filler, length)

    def reading(self):
        return self.runner.scrape([self.url + "/metrics"])

    def send(self, case, what, ids):
        before = self.reading()
        answer, seconds = self.runner.complete(self.url, self.canary.request_body("canary", ids, self.max_tokens, 7))
        time.sleep(1.0)  # the counters are updated by the engine's stats loop after the response
        delta = self.session._tier_hits(before, self.reading())  # pylint: disable=protected-access  # the canary's own
        choice = (answer.get("choices") or [{}])[0]
        ids_out = choice.get("token_ids")
        self.sends.append({"case": case, "send": what, "seconds": round(seconds, 4), "hits": delta,
                           "token_ids": ids_out, "logprobs": (choice.get("logprobs") or {}).get("token_logprobs")})
        return ids_out, delta

    def last_delta(self):
        """The largest logprob difference of the last two sends: random weights generate repetitive ids, and the
        logprobs, which depend on every KV value, are the finer check."""
        return self.canary.logprob_delta(self.sends[-2]["logprobs"], self.sends[-1]["logprobs"])

    def reset(self, external):
        path = "/reset_prefix_cache" + ("?reset_external=true" if external else "")
        for _attempt in range(RESET_TRIES):
            status, body = tune_ab.http(self.url + path, body={}, timeout=30)
            if status == 200 and json.loads(body).get("success"):
                return True
            time.sleep(0.5)
        return False


def run_cases(c, length):
    cases = {}
    p = c.prompt(length)
    cold, cold_hits = c.send("cpu_tier", "cold", p)
    evicted = c.reset(external=False)
    warm, warm_hits = c.send("cpu_tier", "after the GPU reset", p)
    verdict = c.canary.tier_verdict(cold, warm, cold_hits, warm_hits)
    cases["cpu_tier"] = dict(verdict, logprob_delta=c.last_delta(), reset_ok=evicted)
    q = c.prompt(length)
    c.send("planted_reset", "prime", q)
    planted = c.reset(external=False)
    cold, cold_hits = c.send("planted_reset", "cold after the planted reset", q)
    warm, warm_hits = c.send("planted_reset", "again", q)
    verdict = c.canary.tier_verdict(cold, warm, cold_hits, warm_hits)
    cases["planted_reset"] = dict(verdict, logprob_delta=c.last_delta(), reset_ok=planted)
    full = c.reset(external=True)
    cold, cold_hits = c.send("full_reset", "cold after reset_external=true", q)
    warm, warm_hits = c.send("full_reset", "again", q)
    verdict = c.canary.tier_verdict(cold, warm, cold_hits, warm_hits)
    cases["full_reset"] = dict(verdict, logprob_delta=c.last_delta(), reset_ok=full)
    return cases


def main(argv=None):
    opts = parse_args(argv)
    os.makedirs(opts.out, exist_ok=True)
    collection = tune_ab.Collection()
    topts = tune_opts(opts)
    model = tune_ab.model_folder(topts)
    plan = collection.plan(plan_profile(opts, model))
    if plan.get("failed"):
        raise SystemExit("the plan failed: %s" % plan["msg"])
    argv, env = tune_ab.engine_argv_env(topts, plan, [opts.vllm], tune_ab.free_port(), os.path.join(opts.work, "cache"))
    env["VLLM_SERVER_DEV_MODE"] = "1"  # POST /reset_prefix_cache; this loopback test engine only
    doc = {"argv": argv, "plan_capacity": plan.get("capacity"), "prompt_tokens": opts.prompt_tokens,
           "max_tokens": opts.max_tokens, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    tune_ab.log("argv: %s" % " ".join(argv))
    if opts.plan_only:
        print(json.dumps(doc, indent=1, sort_keys=True))
        return 0
    engine = tune_ab.Engine(argv, env, os.path.join(opts.out, "engine.log"))
    began = time.time()
    engine.start()
    try:
        outcome, detail = engine.wait_ready("canary", began + 600)
        doc["ready"] = {"outcome": outcome, "detail": detail}
        tune_ab.log("engine: %s %s" % (outcome, detail))
        if outcome == "healthy":
            c = Canary(engine.url, opts.max_tokens)
            doc["cases"] = run_cases(c, opts.prompt_tokens)
            doc["sends"] = c.sends
            for name, verdict in doc["cases"].items():
                tune_ab.log("%s: %s (reset ok: %s, logprob delta: %s) - %s" % (
                    name, verdict["status"], verdict["reset_ok"], verdict.get("logprob_delta"), verdict["message"]))
    finally:
        engine.stop()
        with open(os.path.join(opts.out, "results.json"), "w") as handle:
            json.dump(doc, handle, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
