# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The measurement is the tool's, not the wrapper's: gpufleet.vllm.vllm_bench against `vllm bench serve`
run by hand, on the same workload against the same running engine, median of N each, interleaved.

Each repeat runs, one after the other: the hand-typed CLI (`vllm bench serve ... --save-result`) and the
module as Ansible runs it on a target (a fresh interpreter with an args file). Every run draws its own
seed (a repeated seed would find its prompts in the prefix cache), so both sides measure cold prefill.
Prints the medians side by side with the spread (max - min) of each side, and writes JSON with --json.

Rerun (one engine running, e.g. the demo host's, or a local one):
  .venv/bin/python benchmarks/bench_vs_vllm.py --vllm /opt/vllm/current/bin/vllm --url http://127.0.0.1:8000 \
      --model tiny-qwen3 --tokenizer /srv/models/tiny-qwen3 --max-model-len 2048
"""

from __future__ import absolute_import, division, print_function

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from weights_bench import collections_path  # the same collection link, one copy (benchmarks/ is on sys.path)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIGURES = ("request_throughput", "output_throughput", "p50_ttft_ms", "p90_ttft_ms", "p50_itl_ms", "p90_itl_ms",
           "p50_e2el_ms")


def by_hand(opts, workload, seed, work):
    """`vllm bench serve` typed by hand, the issue's way; vLLM's result JSON."""
    out = os.path.join(work, "hand")
    argv = [opts.vllm, "bench", "serve", "--backend", "openai", "--base-url", opts.url, "--model", opts.model,
            "--tokenizer", opts.tokenizer, "--dataset-name", "random", "--random-input-len", str(workload["input_len"]),
            "--random-output-len", str(workload["output_len"]), "--num-prompts", str(workload["num_prompts"]),
            "--max-concurrency", str(workload["concurrency"][0]), "--seed", str(seed),
            "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99",
            "--save-result", "--result-dir", out, "--result-filename", "r.json"]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=dict(os.environ, HF_HUB_OFFLINE="1"))
    with open(os.path.join(out, "r.json")) as handle:
        return json.load(handle)


def by_module(opts, workload, seed, work):
    """gpufleet.vllm.vllm_bench as Ansible runs it; vLLM's result JSON of its one point."""
    args = dict(run="workload", vllm_bin=opts.vllm, workload=dict(workload, seed=seed), model=opts.model,
                tokenizer=opts.tokenizer, max_model_len=opts.max_model_len,
                targets=[dict(name="instance", kind="instance", url=opts.url, metrics_urls=[opts.url + "/metrics"])])
    path = os.path.join(work, "args.json")
    with open(path, "w") as handle:
        json.dump({"ANSIBLE_MODULE_ARGS": args}, handle)
    proc = subprocess.run([sys.executable, "-m", "ansible_collections.gpufleet.vllm.plugins.modules.vllm_bench", path],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False,
                          env=dict(os.environ, PYTHONPATH=collections_path(work)))
    out = proc.stdout.decode()
    result = json.loads(out[out.index("{"):])
    if result.get("failed"):
        raise SystemExit("vllm_bench failed: %s" % result.get("msg"))
    return result["points"][0]["result"]


def summarise(runs):
    return dict((f, dict(median=round(statistics.median(r[f] for r in runs), 3),
                         spread=round(max(r[f] for r in runs) - min(r[f] for r in runs), 3))) for f in FIGURES)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--vllm", required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--max-model-len", type=int, required=True)
    parser.add_argument("--input-len", type=int, default=128)
    parser.add_argument("--output-len", type=int, default=16)
    parser.add_argument("--num-prompts", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json")
    opts = parser.parse_args(argv)
    workload = dict(name="acceptance", input_len=opts.input_len, output_len=opts.output_len,
                    num_prompts=opts.num_prompts, concurrency=[opts.concurrency], targets=["instances"])
    hand, module = [], []
    with tempfile.TemporaryDirectory(prefix="gpufleet-bench-vs-") as work:
        for index in range(opts.repeat):
            hand.append(by_hand(opts, workload, 1000 + 2 * index, work))
            module.append(by_module(opts, workload, 1001 + 2 * index, work))
            print("repeat %d: hand p50 TTFT %.1f ms, module p50 TTFT %.1f ms" % (
                index + 1, hand[-1]["p50_ttft_ms"], module[-1]["p50_ttft_ms"]), flush=True)
    figures = dict(workload=workload, repeat=opts.repeat, hand=summarise(hand), module=summarise(module),
                   raw=dict(hand=hand, module=module))
    print("| figure | vllm bench serve by hand (median, spread) | gpufleet.vllm.vllm_bench (median, spread) |")
    print("|---|---|---|")
    for f in FIGURES:
        hand_f, module_f = figures["hand"][f], figures["module"][f]
        cells = (f, hand_f["median"], hand_f["spread"], module_f["median"], module_f["spread"])
        print("| %s | %s (%s) | %s (%s) |" % cells)
    if opts.json:
        with open(opts.json, "w") as handle:
            json.dump(figures, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
