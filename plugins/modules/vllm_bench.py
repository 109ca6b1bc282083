#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_bench
short_description: Benchmark running vLLM instances with vLLM's own C(vllm bench serve), with engine figures
version_added: 0.1.0
description:
  - O(run=workload) runs vLLM's own serving benchmark, C(vllm bench serve), from the instance's own venv
    (O(vllm_bin)) once per concurrency of the workload's sweep and per target (the front door and/or each
    instance), and returns vLLM's result JSON unchanged (C(p50/p90/p99_{ttft,tpot,itl,e2el}_ms),
    C(request_throughput), C(request_goodput), C(output_throughput), ...). Around each run it scrapes the
    engines' C(/metrics) before and after, and samples them during the run, for the engine's side of the
    same window - prefix-cache hit rate, preemptions, peak KV usage, peak running requests, queue time and,
    where speculative decoding runs, its acceptance rate.
  - O(run=canary) sends one greedy, seeded request with a per-run unique prefix to each instance directly,
    cold and then again as a prefix-cache hit (proved by C(vllm:prefix_cache_hits_total) rising), and
    compares the generated token ids (C(return_token_ids)).
  - O(run=probe) sends one request of (O(max_model_len) - O(probe_output_tokens)) prompt tokens (token ids,
    so the length is exact) through the front door, streamed, and returns its time to first token with the
    margin to nginx's C(proxy_read_timeout) (O(proxy_read_timeout)).
  - Changes nothing on the host (vLLM's result files go to a temporary folder that is removed); in check mode
    it returns the command lines it would run and sends no request.
  - Works on any host with a vLLM venv and running instances, a GPU host outside the collection too - give
    O(vllm_bin), the URLs, O(model) and O(tokenizer).
author:
  - gpufleet.vllm maintainers (@gpufleet)
options:
  run:
    description: What to run.
    type: str
    choices: [workload, canary, probe]
    default: workload
  vllm_bin:
    description: The C(vllm) executable of the instance's venv.
    type: path
    default: /opt/vllm/current/bin/vllm
  vllm_python:
    description:
      - The venv's Python that runs vLLM's benchmark code (C(vllm.benchmarks.serve), as C(vllm bench serve) does),
        one process per workload; default the C(python) beside O(vllm_bin).
    type: path
  workload:
    description:
      - One workload (O(run=workload)), keys as in C(gpufleet_workloads) - C(name), C(dataset) (V(random) or
        V(prefix_repetition)), C(input_len), C(output_len), C(prefix_len), C(range_ratio), C(num_prefixes),
        C(suffix_len), C(num_prompts), C(concurrency) (list), C(request_rate), C(seed), C(targets)
        (V(front_door), V(instances)), C(warmups), C(mix).
      - "C(mix), a length mix in one run, instead of C(input_len) - a list of classes C({share, input_len,
        output_len, name}) whose shares sum to 1, C(input_len) a number or V(max) (O(max_model_len) minus the
        class's C(output_len)), for example C([{share: 0.8, input_len: 512}, {share: 0.2, input_len: max}]).
        Runs vLLM's V(timed_trace) dataset from a JSONL the module writes (token-id prompts of exact lengths,
        C(--no-self-timed), C(--save-detailed)) and splits vLLM's per-request output per class (C(classes))."
    type: dict
  targets:
    description: Where to send the load.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: The name in the report (V(front_door), or the instance name).
        type: str
        required: true
      kind:
        description: V(front_door) (nginx) or V(instance) (one vLLM instance's own port).
        type: str
        required: true
        choices: [front_door, instance]
      url:
        description: The base URL, without C(/v1), for example V(http://127.0.0.1:8000).
        type: str
        required: true
      metrics_urls:
        description: The C(/metrics) URLs of the engines behind this target (for the front door, every instance).
        type: list
        elements: str
        required: true
  model:
    description: The served model name (C(--served-model-name)).
    type: str
    required: true
  tokenizer:
    description: The tokenizer path on the host (the model folder); C(vllm bench serve) needs it.
    type: path
    required: true
  max_model_len:
    description: The planned C(--max-model-len); workloads and the probe are checked against it.
    type: int
    required: true
  slo:
    description: The SLO (C(gpufleet_slo)); only its C(goodput_*_ms) keys are used here, as vLLM's C(--goodput).
    type: dict
    default: {}
  api_key:
    description: The API key of the instances or the front door, if any (sent as a bearer token; never logged).
    type: str
  run_timeout:
    description: Seconds one C(vllm bench serve) run (or one canary/probe request) may take.
    type: int
    default: 600
  sample_interval:
    description: Seconds between the C(/metrics) samples taken during a run (peak KV usage, peak running).
    type: float
    default: 0.5
  environment:
    description: Extra environment variables for C(vllm bench serve).
    type: dict
    default: {}
  seed:
    description: The seed of the canary's request.
    type: int
    default: 0
  canary_prompt_tokens:
    description: The canary prompt's length; several KV blocks, since vLLM caches full blocks only.
    type: int
    default: 512
  canary_max_tokens:
    description: Tokens the canary generates.
    type: int
    default: 16
  probe_output_tokens:
    description: Tokens the long-context probe generates (its prompt is the rest of O(max_model_len)).
    type: int
    default: 16
  proxy_read_timeout:
    description: nginx's C(proxy_read_timeout) in nginx syntax (V(3600s)); the probe reports its margin to it.
    type: str
  progress_file:
    description:
      - With O(run=workload), write the point about to run to this file (one line - the workload, point n of N,
        its prompts, concurrency and URL, when it started) for a task that polls the module's async job (the
        gpufleet.vllm.bench role prints it). Omit it for no file.
    type: path
attributes:
  check_mode:
    description: Returns the command lines it would run and sends nothing.
    support: full
  diff_mode:
    description: Changes nothing on the host, so there is nothing to diff.
    support: none
notes:
  - Datasets V(random) and V(prefix_repetition) work from the plain vLLM install; V(custom) needs pandas
    (C(vllm[bench])) and is not offered. A length mix uses V(timed_trace), which needs no extra.
"""

EXAMPLES = r"""
- name: Benchmark the short workload through nginx and on the instance
  gpufleet.vllm.vllm_bench:
    workload: {name: short, input_len: 128, output_len: 16, num_prompts: 8, concurrency: [1, 4]}
    targets:
      - {name: front_door, kind: front_door, url: "http://127.0.0.1:8080", metrics_urls: ["http://127.0.0.1:8000/metrics"]}
      - {name: qwen3-0, kind: instance, url: "http://127.0.0.1:8000", metrics_urls: ["http://127.0.0.1:8000/metrics"]}
    model: qwen3-8b
    tokenizer: /srv/models/qwen3-8b
    max_model_len: 32768
  register: bench

- name: A length mix in one run - 80 % short prompts, 20 % at the planned context - TTFT per class
  gpufleet.vllm.vllm_bench:
    workload:
      name: mix
      mix: [{share: 0.8, input_len: 512}, {share: 0.2, input_len: max}]
      output_len: 64
      num_prompts: 20
      concurrency: [4]
    targets:
      - {name: qwen3-0, kind: instance, url: "http://127.0.0.1:8000", metrics_urls: ["http://127.0.0.1:8000/metrics"]}
    model: qwen3-8b
    tokenizer: /srv/models/qwen3-8b
    max_model_len: 32768
  register: bench_mix
- name: The canary on each instance
  gpufleet.vllm.vllm_bench:
    run: canary
    targets: [{name: qwen3-0, kind: instance, url: "http://127.0.0.1:8000", metrics_urls: ["http://127.0.0.1:8000/metrics"]}]
    model: qwen3-8b
    tokenizer: /srv/models/qwen3-8b
    max_model_len: 32768
"""

RETURN = r"""
workload:
  description: The workload as validated (defaults filled in).
  returned: run=workload
  type: dict
  sample: {name: short, dataset: random, input_len: 128, output_len: 16, concurrency: [1, 4]}
points:
  description:
    - One entry per (target, concurrency), with C(argv), C(result) (vLLM's own result JSON, run with
      C(--ignore-eos --save-detailed); its per-request C(errors), C(output_lens), C(input_lens) kept, its
      C(generated_texts), C(itls), C(start_times), C(queue_times) dropped), C(summary) (vLLM's keys for the
      report), C(engine) (the /metrics window, with C(aborted_requests) and C(errored_requests)) and
      C(failures) - C(sent), C(completed), C(failed), C(truncated) (fewer output tokens than asked),
      C(error_rate), C(errors) (vLLM's error texts, counted), C(aborted), C(errored).
    - A result file that is not vLLM's shape fails naming the file.
    - For a length mix also C(classes) - per class C(name), C(input_len), C(output_len), C(share),
      C(requests), C(completed), C(failed), C(mean_ttft_ms) and C(p50/p90/p99_{ttft,tpot,itl,e2el}_ms), from
      vLLM's per-request lists of C(result) (C(input_lens), C(ttfts), C(itls), C(latencies), C(errors)); its
      C(result) lacks vLLM's C(generated_texts) (text of random-token prompts, read by nothing).
  returned: run=workload
  type: list
  elements: dict
  sample:
    - workload: short
      target: front_door
      concurrency: 4
      result: {completed: 8, p90_ttft_ms: 41.2, request_throughput: 9.8}
      engine: {prefix_cache_hit_rate: 0.0, peak_kv_usage: 0.0004, peak_running: 4, preemptions: 0}
    - workload: mix
      target: tiny-qwen3-0
      concurrency: 4
      result: {completed: 20, p90_ttft_ms: 522.0, input_lens: [512, 512, 1984]}
      classes: [{name: short, input_len: 512, requests: 16, p90_ttft_ms: 421.5}, {name: long, input_len: 1984, p90_ttft_ms: 525.0}]
canary:
  description:
    - Per instance - C(status) (V(pass), V(no_hit), V(mismatch), V(not_cold)), C(identical), C(hit_tokens), the ids.
    - C(tier) - where the second send's prefix came from (V(gpu), V(offload) through a KV offload connector, or
      V(gpu+offload)); V(not_cold) when the first send already found cached tokens (the comparison proves nothing).
  returned: run=canary
  type: list
  elements: dict
  sample: [{target: qwen3-0, status: pass, tier: gpu, identical: true, hit_tokens: 384}]
probe:
  description: The long-context request - C(prompt_tokens), C(ttft_s), C(e2e_s), and C(finding) on the proxy timeout.
  returned: run=probe
  type: dict
  sample: {prompt_tokens: 2032, ttft_s: 0.9, e2e_s: 1.3, finding: {level: ok, ratio: 0.0003}}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.vllm.plugins.module_utils.bench import runner, session
from ansible_collections.gpufleet.vllm.plugins.module_utils.bench.session import RUNS
from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError, run_guarded

ARGUMENT_SPEC = dict(
    run=dict(type="str", choices=sorted(RUNS), default="workload"),
    vllm_bin=dict(type="path", default="/opt/vllm/current/bin/vllm"),
    vllm_python=dict(type="path"),
    workload=dict(type="dict"),
    targets=dict(type="list", elements="dict", required=True, options=dict(
        name=dict(type="str", required=True),
        kind=dict(type="str", required=True, choices=["front_door", "instance"]),
        url=dict(type="str", required=True),
        metrics_urls=dict(type="list", elements="str", required=True),
    )),
    model=dict(type="str", required=True),
    tokenizer=dict(type="path", required=True),
    max_model_len=dict(type="int", required=True),
    slo=dict(type="dict", default={}),
    api_key=dict(type="str", no_log=True),
    run_timeout=dict(type="int", default=600),
    sample_interval=dict(type="float", default=0.5),
    environment=dict(type="dict", default={}),
    seed=dict(type="int", default=0),
    canary_prompt_tokens=dict(type="int", default=512, no_log=False),
    canary_max_tokens=dict(type="int", default=16, no_log=False),
    probe_output_tokens=dict(type="int", default=16, no_log=False),
    proxy_read_timeout=dict(type="str"),
    progress_file=dict(type="path"),
)


def _body(module):
    params = module.params
    if params["run"] == "workload" and not params["workload"]:
        raise UserError("run=workload needs workload (one entry of gpufleet_workloads).")
    if params["progress_file"] and params["run"] == "workload" and not module.check_mode:
        runner.track(params["progress_file"], params["workload"].get("name", "?"), len(session.plan_points(params)[1]))
    result = RUNS[params["run"]](params, check_mode=module.check_mode)
    result["changed"] = False
    return result


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    module.exit_json(**run_guarded(module, _body, "Benchmarking vLLM"))


if __name__ == "__main__":
    main()
