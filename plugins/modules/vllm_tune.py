#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_tune
short_description: Tune vLLM by measurement - the candidate grid, pruning by the plan, scoring and the winner
version_added: 0.1.0
description:
  - The pure steps of C(playbooks/tune.yml), which launches the candidates through the vllm role and measures them
    with the bench role between these steps. Meant for the controller (C(delegate_to) V(localhost)).
  - O(run=expand) checks O(grid) (or builds the default grid), expands it with the cap O(max_candidates) (an error
    above it) with V(defaults) first, gives each candidate its serving profile, checks the workloads, and computes the
    inputs hash; with O(previous_vars) recording that hash it says the tune is already done.
  - O(run=prune) turns each candidate's plan (the registered results of M(gpufleet.vllm.vllm_plan), in the order of
    the candidates) into a verdict - V(launch), or V(skipped) with the planner's reason (a refusal, or a planned
    concurrency at the workload's longest request below O(concurrency)). Skipped candidates are never started.
  - O(run=score) reads each measured candidate's bench C(results.json) files, scores goodput under O(slo) (median of
    repeats, ranges widened by O(noise_pct)), decides the winner (applied only beyond noise of the defaults), the
    Pareto set (output tokens/s per GPU vs per-request tokens/s), the launch counts (failed and out-of-memory launches
    among the candidates the planner passed), and writes C(report.md), C(results.json) and C(pareto.png) into a new
    folder under O(results_dir). It returns the text of the winner variables file (as data - each text that could
    hold a template is tagged C(!unsafe), so what a host reported is never templated on the controller).
  - O(run=pending_mark) returns the text of the tune's pending mark (RV(text)) - the venv O(current_venv) and its
    release, the checksums of O(live_units) (the saved units) - or, with O(pending), that mark with O(live_units) as
    the units the tune launched last. O(run=pending_check) says whether a pending mark may still be restored
    (RV(restore)) - only while the host serves its release and the tune's own units, otherwise RV(reason) says why
    it is discarded.
author:
  - gpufleet.vllm maintainers (@gpufleet)
options:
  run:
    description: The step.
    type: str
    required: true
    choices: [expand, prune, score, pending_mark, pending_check]
  base_profile:
    description: The serving profile the candidates vary (options of M(gpufleet.vllm.vllm_plan)).
    type: dict
    default: {}
  grid:
    description:
      - C(tune_grid) - knob to list of values, V(null) meaning vLLM's default. Knobs C(max_num_batched_tokens),
        C(max_num_seqs), C(enable_prefix_caching), C(kv_cache_dtype), C(num_speculative_tokens) (models with MTP
        layers), C(cpu_offload_bytes) (the KV offload tier in host memory), C(layout)
        (C({tensor_parallel_size, instances})), C(extra_args) (lists of pass-through flags).
      - Empty - the default grid, derived from O(base_capacity) and the workloads. A workload the GPU KV cache cannot
        hold gets the KV knobs - a host-memory offload tier when its reused prefixes exceed the GPU cache, an fp8 KV
        cache with O(allow_lossy) - otherwise the scheduler budgets; MTP tokens where the model has them; on
        multi-GPU hosts the layouts. RV(grid_why) says why.
    type: dict
    default: {}
  allow_lossy:
    description:
      - Allow candidates that change what the model answers (an fp8 KV cache, as C(kv_cache_dtype) or as
        C(--kv-cache-dtype) in C(extra_args)); without it such a grid value is an error. The report marks them lossy.
    type: bool
    default: false
  base_capacity:
    description:
      - The C(capacity) of the base profile's plan (M(gpufleet.vllm.vllm_plan)); O(run=expand) sizes the default grid's
        KV knobs from its C(kv_cache_tokens) and C(kv_bytes_per_token_tp1). Empty - the scheduler budgets.
    type: dict
    default: {}
  grid_why:
    description: O(run=score) - RV(grid_why) of O(run=expand), for the report.
    type: list
    elements: str
    default: []
  max_candidates:
    description: The most candidates (defaults included) an expansion may give.
    type: int
    default: 16
  model_config:
    description: The model's C(config.json) (for MTP); O(run=expand).
    type: dict
    default: {}
  workloads:
    description: The tune workloads (C(gpufleet_workloads) entries, usually one mix of long and short prompts).
    type: list
    elements: dict
    default: []
  concurrency:
    description: The concurrency the winner must hold; 0 - the highest of the workloads' sweeps.
    type: int
    default: 0
  concurrency_given:
    description:
      - O(run=prune) - O(concurrency) is the operator's (C(tune_concurrency)). V(false) - it is the workloads' highest,
        and when vLLM's defaults (the first candidate) cannot hold that many requests of the longest length (a
        KV-bound workload, which queues), candidates must hold what the defaults hold instead; RV(concurrency) says
        which.
    type: bool
    default: true
  slo:
    description: The SLO (C(gpufleet_slo)); C(goodput_*_ms) keys make the score vLLM's C(request_goodput).
    type: dict
    default: {}
  repeats:
    description: Benchmark runs per candidate (hashed with the inputs; the playbook runs them).
    type: int
    default: 3
  noise_pct:
    description: Each candidate's score range is widened by this much on each side before ranges are compared.
    type: float
    default: 5.0
  vllm_version:
    description: The vLLM version that serves (recorded with the winner).
    type: str
    default: unknown
  gpu_type:
    description: The GPU type (name) the candidates run on, or V(cpu).
    type: str
    default: unknown
  vars_name:
    description: The variable the winner file defines.
    type: str
    default: vllm_tuned
  previous_vars:
    description: The winner file already on the controller, parsed (O(run=expand) skips a tune of the same inputs).
    type: dict
    default: {}
  candidates:
    description: O(run=prune) - the candidates O(run=expand) returned.
    type: list
    elements: dict
    default: []
  plans:
    description: O(run=prune) - one registered M(gpufleet.vllm.vllm_plan) result per candidate, same order.
    type: list
    elements: dict
    default: []
  measured:
    description:
      - O(run=score) - every candidate's outcome - C(id), C(label), C(status) (V(measured), V(failed), V(skipped)),
        C(reason), C(planned), C(gpus), C(results_json) (the bench reports' C(results.json) paths, one per repeat).
    type: list
    elements: dict
    default: []
  results_dir:
    description: O(run=score) - where the report folder goes.
    type: path
  host:
    description: O(run=score) - the tuned host (or group) name.
    type: str
    default: host
  plan_hash:
    description: O(run=score) - the plan hash of the base profile (recorded with the winner).
    type: str
    default: unknown
  inputs_hash:
    description: O(run=score) - the inputs hash O(run=expand) returned (recorded with the winner).
    type: str
    default: unknown
  pending:
    description: O(run=pending_mark) / O(run=pending_check) - the text of the host's pending mark (empty for a new one).
    type: str
    default: ""
  current_venv:
    description: O(run=pending_mark) / O(run=pending_check) - the venv the host's C(current) link points at.
    type: str
    default: ""
  live_units:
    description: O(run=pending_mark) / O(run=pending_check) - the host's live units, C(ansible.builtin.find)'s
      C(files) with C(get_checksum=true).
    type: list
    elements: dict
    default: []
attributes:
  check_mode:
    description: Every step computes; in check mode O(run=score) writes no report.
    support: full
  diff_mode:
    description: Nothing on a host changes; the playbook's copy of the winner file shows its diff.
    support: none
"""

EXAMPLES = r"""
- name: Expand the grid
  gpufleet.vllm.vllm_tune:
    run: expand
    base_profile: {model: /srv/models/Qwen3-8B, max_model_len: 131072}
    grid: {max_num_batched_tokens: [null, 4096, 16384], extra_args: [[], [--block-size, "32"]]}
    workloads: [{name: mix, input_len: 65536, range_ratio: 0.5, output_len: 256, num_prompts: 32, concurrency: [8]}]
  delegate_to: localhost
  register: tune

- name: Score the measured candidates and write the report
  gpufleet.vllm.vllm_tune:
    run: score
    measured: "{{ tune_measured }}"
    slo: {goodput_ttft_ms: 10000, goodput_tpot_ms: 100}
    results_dir: "{{ lookup('ansible.builtin.env', 'HOME') }}/.cache/gpufleet-vllm/tune-results"
  delegate_to: localhost
"""

RETURN = r"""
candidates:
  description: O(run=expand) - C({id, label, overrides, profile}), V(defaults) first; O(run=score) - the scored candidates.
  returned: success
  type: list
  elements: dict
grid_why:
  description: O(run=expand) - why the grid is what it is (the default grid's reasons, or that O(grid) was given).
  returned: run=expand
  type: list
  elements: str
workloads:
  description: O(run=expand) - the workloads, checked and with their defaults filled.
  returned: run=expand
  type: list
  elements: dict
concurrency:
  description:
    - O(run=expand) - the requested concurrency; C(request_tokens) the longest request of the workloads,
      C(concurrency_given) whether O(concurrency) gave it.
    - O(run=prune) - the concurrency the candidates were held to.
  returned: run=expand, run=prune
  type: int
inputs_hash:
  description: O(run=expand) - 12 hex digits over the inputs; C(already_tuned) is true when O(previous_vars) has it.
  returned: run=expand
  type: str
verdicts:
  description:
    - O(run=prune) - C({id, label, status, reason, planned}) per candidate; C(launch) lists those to start, C(skipped)
      the others, C(plan_hash) the plan hash of the defaults candidate (the base profile).
  returned: run=prune
  type: list
  elements: dict
decision:
  description: O(run=score) - C(winner), C(apply) (beats defaults beyond noise), C(reason), C(best), C(within_noise_of_best).
  returned: run=score
  type: dict
counts:
  description: O(run=score) - C(planner_passed), C(failed_launches), C(oom_launches), C(skipped).
  returned: run=score
  type: dict
vars_text:
  description: O(run=score) - the winner variables file (stable text); C(overrides) the winner's profile overrides.
  returned: run=score
  type: str
text:
  description: O(run=pending_mark) - the pending mark's text (JSON).
  returned: run=pending_mark
  type: str
restore:
  description: O(run=pending_check) - the saved units may be restored.
  returned: run=pending_check
  type: bool
reason:
  description: O(run=pending_check) - why the mark is restored or discarded (a warning when discarded).
  returned: run=pending_check
  type: str
venv:
  description: O(run=pending_check) - the venv the saved units use (the rollback's C(previous)).
  returned: run=pending_check
  type: str
dir:
  description: O(run=score) - the report folder (C(report.md), C(results.json), C(pareto.png)); C(table) its table.
  returned: run=score
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import run_guarded
from ansible_collections.gpufleet.vllm.plugins.module_utils.tune import pending, steps

SPEC = dict(
    run=dict(type="str", required=True, choices=["expand", "prune", "score", "pending_mark", "pending_check"]),
    base_profile=dict(type="dict", default={}),
    grid=dict(type="dict", default={}),
    allow_lossy=dict(type="bool", default=False),
    base_capacity=dict(type="dict", default={}),
    grid_why=dict(type="list", elements="str", default=[]),
    max_candidates=dict(type="int", default=16),
    model_config=dict(type="dict", default={}),
    workloads=dict(type="list", elements="dict", default=[]),
    concurrency=dict(type="int", default=0),
    concurrency_given=dict(type="bool", default=True),
    slo=dict(type="dict", default={}),
    repeats=dict(type="int", default=3),
    noise_pct=dict(type="float", default=5.0),
    vllm_version=dict(type="str", default="unknown"),
    gpu_type=dict(type="str", default="unknown"),
    vars_name=dict(type="str", default="vllm_tuned"),
    previous_vars=dict(type="dict", default={}),
    candidates=dict(type="list", elements="dict", default=[]),
    plans=dict(type="list", elements="dict", default=[]),
    measured=dict(type="list", elements="dict", default=[]),
    results_dir=dict(type="path"),
    host=dict(type="str", default="host"),
    plan_hash=dict(type="str", default="unknown"),
    inputs_hash=dict(type="str", default="unknown"),
    pending=dict(type="str", default=""),
    current_venv=dict(type="str", default=""),
    live_units=dict(type="list", elements="dict", default=[]),
)


def _body(module):
    p = module.params
    if p["run"] == "expand":
        return steps.expand(p)
    if p["run"] == "prune":
        return steps.prune(p)
    if p["run"] == "pending_mark":
        return dict(text=pending.mark(p["current_venv"], p["live_units"], p["pending"]))
    if p["run"] == "pending_check":
        result = pending.check(p["pending"], p["current_venv"], p["live_units"])
        if not result["restore"]:
            module.warn(result["reason"])
        return result
    return steps.score(p, steps.read_runs(p["measured"]), write=not module.check_mode)


def main():
    module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True)
    result = run_guarded(module, _body, "vllm_tune run=%s" % module.params["run"])
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
