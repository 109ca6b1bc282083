#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_bench_report
short_description: Write a benchmark report (Markdown, raw JSON, PNG), check SLOs and compare with a baseline
version_added: 0.1.0
description:
  - Takes what M(gpufleet.vllm.vllm_bench) measured on one host and writes, into a new folder under
    O(results_dir) named after the host, instance, vLLM version, plan hash and UTC time, C(report.md) (one
    table, client figures from vLLM's result JSON next to the engine's from C(/metrics), the plan's predicted
    concurrency next to the measured peak, the canary and the long-context probe), C(results.json) (every raw
    vLLM result, vLLM's own keys) and C(latency-throughput.png) (latency against throughput over the
    concurrency sweep; needs matplotlib, reported and skipped when it is missing).
  - Checks O(slo) against the figures and returns every violation with the SLO, the measured figure and the
    workload (the bench role fails on them after the report is written). C(slo.max_error_rate) (default V(0),
    also when O(slo) is empty) holds at every point over failed requests (vLLM's C(failed) and error texts);
    outputs shorter than asked are reported, not counted; the table has C(failed/sent), C(truncated) and C(aborted (engine)) per row.
    A figure that is NaN or infinite never meets a bound. Malformed O(points) or O(baseline) fail naming where. For a length mix (points with
    C(classes)) the latency bounds hold for each class, C(slo.classes) gives a class its own; throughput
    bounds hold for the whole run. The table then has one row per class below the run's row.
  - With O(baseline), compares each point with the same point of an earlier report's C(results.json) and
    returns the verdict (O(regression_threshold_pct)).
  - Meant for the controller (C(delegate_to) V(localhost)). Every run writes a new folder; nothing else changes.
author:
  - gpufleet.vllm maintainers (@gpufleet)
options:
  results_dir:
    description: The folder the report folders go in (created when missing).
    type: path
    required: true
  host:
    description: The benchmarked host's name.
    type: str
    required: true
  instance:
    description: The instance name (or a name for several).
    type: str
    required: true
  vllm_version:
    description: The vLLM version that served (C(GET /version)).
    type: str
    required: true
  plan_hash:
    description: A short hash of the plan (the instances' argv) the engine runs.
    type: str
    required: true
  stamp:
    description: The UTC time for the folder name (C(YYYYmmddTHHMMSSZ)); default now.
    type: str
  points:
    description:
      - The C(points) of every M(gpufleet.vllm.vllm_bench) O(gpufleet.vllm.vllm_bench#module:run=workload) run
        (with C(classes) for a length mix).
    type: list
    elements: dict
    required: true
  canary:
    description: The C(canary) list of the canary run, if any.
    type: list
    elements: dict
    default: []
  probe:
    description: The C(probe) of the probe run, if any.
    type: dict
    default: {}
  slo:
    description: The SLO (C(gpufleet_slo)).
    type: dict
    default: {}
  planned_concurrency:
    description: The plan's C(Maximum concurrency) figure (requests of max_model_len that fit the KV cache).
    type: float
  baseline:
    description: An earlier report's C(results.json) to compare with (regression verdict).
    type: path
  regression_threshold_pct:
    description: A figure worse than the baseline's by more than this many percent is a regression.
    type: float
    default: 20.0
  plot:
    description: Draw the PNG (needs matplotlib on the controller).
    type: bool
    default: true
attributes:
  check_mode:
    description: Computes the verdicts and writes nothing.
    support: full
  diff_mode:
    description: Each run writes a new folder; there is nothing to diff.
    support: none
"""

EXAMPLES = r"""
- name: Write the report on the controller
  gpufleet.vllm.vllm_bench_report:
    results_dir: "{{ lookup('ansible.builtin.env', 'HOME') }}/.cache/gpufleet-vllm/bench-results"
    host: "{{ inventory_hostname }}"
    instance: qwen3-8b-0
    vllm_version: 0.26.0
    plan_hash: 3f2a9c1d7e4b
    points: "{{ bench_runs.results | map(attribute='points') | flatten }}"
    slo: {ttft_p90_ms: 500, concurrency: 4}
  delegate_to: localhost
"""

RETURN = r"""
dir:
  description: The report folder.
  returned: success
  type: str
  sample: /root/.cache/gpufleet-vllm/bench-results/gpu01_qwen3-8b-0_vllm-0.26.0_plan-3f2a9c1d7e4b_20261201T120000Z
files:
  description: The files written (absent in check mode).
  returned: success
  type: list
  elements: str
  sample: [report.md, results.json, latency-throughput.png]
table:
  description: The Markdown table of the report.
  returned: success
  type: str
plot:
  description: V(written), or why the PNG was not drawn.
  returned: success
  type: str
slo_violations:
  description:
    - Every SLO missed - C(slo), C(limit), C(measured), C(workload), C(class), C(target), C(concurrency), C(message).
    - For C(slo=max_error_rate) also C(failed), C(truncated) and C(errors) (vLLM's error texts with their counts).
  returned: success
  type: list
  elements: dict
slo_message:
  description: The violations in one line (empty when every SLO holds).
  returned: success
  type: str
verdict:
  description: The comparison with O(baseline) - C(regressed), C(compared), C(findings); C(regressed) false without one.
  returned: success
  type: dict
"""

import datetime
import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.vllm.plugins.module_utils.bench import plot, report, slo as slo_rules
from ansible_collections.gpufleet.vllm.plugins.module_utils.bench.document import render
from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError, run_guarded


def _baseline_points(path):
    if not path:
        return None
    try:
        with open(path) as handle:
            doc = json.load(handle)
        points = doc["points"]
    except (OSError, IOError, ValueError, KeyError, TypeError) as exc:
        raise UserError("bench baseline %s is not a report's results.json (%s): give the results.json of an "
                        "earlier run of the same workloads." % (path, exc))
    return report.check_points(points, "bench baseline %s" % path)


def _write(folder, name, content):
    with open(os.path.join(folder, name), "w") as handle:
        handle.write(content)


def _body(module):
    p = module.params
    report.check_points(p["points"], "points")
    names = sorted(set(point["workload"] for point in p["points"]))
    classes = sorted(set(c["name"] for point in p["points"] for c in point.get("classes") or []))
    slo = slo_rules.validate_slo(p["slo"], names, classes)
    violations = slo_rules.check(slo, p["points"])  # max_error_rate holds without an SLO too
    baseline = _baseline_points(p["baseline"])
    verdict = report.regression(baseline, p["points"], p["regression_threshold_pct"]) if baseline is not None \
        else dict(regressed=False, compared=0, findings=[])
    stamp = p["stamp"] or datetime.datetime.utcnow().strftime("%Y%m%dT%H%M%SZ")
    folder = os.path.join(p["results_dir"], report.run_dir_name(p["host"], p["instance"], p["vllm_version"],
                                                                p["plan_hash"], stamp))
    doc = dict(host=p["host"], instance=p["instance"], vllm_version=p["vllm_version"], plan_hash=p["plan_hash"],
               stamp=stamp, planned_concurrency=p["planned_concurrency"], points=p["points"], canary=p["canary"],
               probe=p["probe"], slo=slo, slo_violations=violations, verdict=verdict)
    result = dict(changed=False, dir=folder, files=[], table=report.markdown_table(p["points"]),
                  plot="not drawn (check mode)", slo_violations=violations,
                  slo_message="; ".join(v["message"] for v in violations), verdict=verdict)
    if module.check_mode:
        return result
    os.makedirs(folder)
    result["plot"] = plot.write_png(p["points"], os.path.join(folder, "latency-throughput.png"),
                                    "%s %s vLLM %s plan %s" % (p["host"], p["instance"], p["vllm_version"],
                                                               p["plan_hash"])) if p["plot"] else "not drawn (plot: false)"
    doc["plot"] = result["plot"]
    _write(folder, "results.json", json.dumps(doc, indent=1, sort_keys=True) + "\n")
    _write(folder, "report.md", render(doc))
    result.update(changed=True, files=sorted(os.listdir(folder)))
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            results_dir=dict(type="path", required=True),
            host=dict(type="str", required=True),
            instance=dict(type="str", required=True),
            vllm_version=dict(type="str", required=True),
            plan_hash=dict(type="str", required=True),
            stamp=dict(type="str"),
            points=dict(type="list", elements="dict", required=True),
            canary=dict(type="list", elements="dict", default=[]),
            probe=dict(type="dict", default={}),
            slo=dict(type="dict", default={}),
            planned_concurrency=dict(type="float"),
            baseline=dict(type="path"),
            regression_threshold_pct=dict(type="float", default=20.0),
            plot=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    module.exit_json(**run_guarded(module, _body, "Writing the benchmark report"))


if __name__ == "__main__":
    main()
