#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: metrics_check
short_description: Check that every metric the alert rules and dashboard use exists in live scrapes
version_added: 0.1.0
description:
  - Reads the metric names used by alert rule files and dashboard JSON files (O(files)), scrapes each
    target's C(/metrics) (O(targets)) and fails, listing the missing names per target, when a name the
    rules or the dashboard use is not exposed. A metric renamed or removed by a vLLM upgrade
    (C(vllm:gpu_cache_usage_perc), C(vllm:time_per_output_token_seconds)) fails the play instead of
    leaving an alert that never fires.
  - Names are matched by exporter prefix; a V(vllm) target must expose the C(vllm:*) names, a V(node)
    target the C(node_*) names, a V(dcgm) target the C(DCGM_FI_*) names.
  - For V(vllm) targets with O(targets[].planned_blocks), compares the plan's predicted KV block count
    with the engine's own (C(vllm:cache_config_info), label C(num_gpu_blocks)) and reports the difference.
  - Read-only; runs the same in check mode.
author:
  - gpufleet.vllm maintainers (@gpufleet)
options:
  files:
    description: Rule files (YAML) and dashboards (JSON) whose metric names must exist, on the managed host.
    type: list
    elements: path
    required: true
  targets:
    description: The scrape targets to check.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: A name for the report (for example the vLLM instance name).
        type: str
        required: true
      job:
        description: Which exporter it is; selects the names it must expose.
        type: str
        required: true
        choices: [dcgm, node, router, vllm]
      url:
        description: The C(/metrics) URL, for example V(http://10.0.0.5:8000/metrics).
        type: str
        required: true
      planned_blocks:
        description: The KV blocks gpufleet.vllm.vllm_plan predicted (C(capacity.num_blocks)); V(vllm) only.
        type: int
  timeout:
    description: Seconds each scrape may take in all, however slowly the answer arrives; an answer over 32 MiB is refused.
    type: int
    default: 10
  fail_on_missing:
    description: Fail when a name is missing (V(false) only reports it).
    type: bool
    default: true
attributes:
  check_mode:
    description: Read-only, so check mode runs the full check.
    support: full
  diff_mode:
    description: Changes nothing, so there is nothing to diff.
    support: none
"""

EXAMPLES = r"""
- name: Every metric the rules use exists on every vLLM instance
  gpufleet.vllm.metrics_check:
    files:
      - /etc/prometheus/rules/gpufleet-vllm.rules.yml
    targets:
      - name: qwen3-14b-0
        job: vllm
        url: http://10.0.0.5:8000/metrics
        planned_blocks: 2666
      - name: gpu01-node
        job: node
        url: http://10.0.0.5:9100/metrics
"""

RETURN = r"""
used:
  description: The metric names the files use, per job.
  returned: success
  type: dict
  sample: {vllm: ["vllm:kv_cache_usage_perc"], node: ["node_load1"], dcgm: []}
targets:
  description: One entry per target, with C(missing) (sorted names) and, for vLLM targets, C(blocks).
  returned: success
  type: list
  elements: dict
  sample:
    - name: qwen3-14b-0
      job: vllm
      url: http://10.0.0.5:8000/metrics
      missing: []
      blocks: {planned: 2666, engine: 2650, difference: -16, ratio: 0.994, status: differs}
missing:
  description: Target name -> missing names, only targets that miss any.
  returned: always
  type: dict
  sample: {qwen3-14b-0: ["vllm:gpu_cache_usage_perc"]}
"""

import threading

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_text
from ansible.module_utils.urls import open_url

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError, run_guarded
from ansible_collections.gpufleet.vllm.plugins.module_utils.metric_names import (
    PREFIXES, compare_blocks, engine_blocks, missing_names, names_in_text, required_for,
)


def _used_names(paths):
    used = set()
    for path in paths:
        with open(path, "rb") as handle:
            used |= names_in_text(to_text(handle.read(), errors="surrogate_or_strict"))
    return used


MAX_EXPOSITION = 32 * 1024 * 1024  # vLLM's, node's and DCGM's /metrics are a few hundred KiB


def _fetch(url, timeout, out):
    try:
        response = open_url(url, timeout=timeout, validate_certs=True, follow_redirects="none")
        data = response.read(MAX_EXPOSITION + 1)
        if len(data) > MAX_EXPOSITION:
            out["error"] = "the answer is larger than %d MiB, not a metrics exposition" % (MAX_EXPOSITION >> 20)
        else:
            out["text"] = to_text(data, errors="surrogate_or_replace")
    except Exception as exc:  # urllib/socket errors of every kind: all mean "not scrapable"
        out["error"] = "%s" % (exc,)


def _scrape(target, timeout):
    """The exposition, read within ``timeout`` seconds of wall-clock time however slowly it arrives."""
    out = {}
    worker = threading.Thread(target=_fetch, args=(target["url"], timeout, out))
    worker.daemon = True
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        out["error"] = "no complete answer within %d s (timeout)" % timeout
    if "error" in out:
        raise UserError(
            "Cannot scrape %s (%s) at %s: %s. Check that it runs and that this host may reach it "
            "(targets[].url)." % (target["name"], target["job"], target["url"], out["error"]),
            target=target["name"])
    return out["text"]


def _check_target(target, used, timeout):
    exposition = _scrape(target, timeout)
    report = dict(name=target["name"], job=target["job"], url=target["url"],
                  missing=missing_names(target["job"], used, exposition))
    if target["job"] == "vllm":
        report["blocks"] = compare_blocks(target.get("planned_blocks"), engine_blocks(exposition))
    return report


def _body(module):
    used = _used_names(module.params["files"])
    reports = [_check_target(t, used, module.params["timeout"]) for t in module.params["targets"]]
    missing = dict((r["name"], r["missing"]) for r in reports if r["missing"])
    result = dict(changed=False, used=dict((job, sorted(required_for(job, used))) for job in PREFIXES),
                  targets=reports, missing=missing)
    if missing and module.params["fail_on_missing"]:
        lines = ["%s (%s): %s" % (r["name"], r["url"], ", ".join(r["missing"])) for r in reports if r["missing"]]
        raise UserError(
            "Metric names used by the alert rules or dashboard are not exposed by the running exporters "
            "(renamed or removed by an upgrade?): %s. Update the rules/dashboard for this version "
            "(monitoring_vllm_version) or the exporter." % "; ".join(lines), **result)
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            files=dict(type="list", elements="path", required=True),
            targets=dict(type="list", elements="dict", required=True, options=dict(
                name=dict(type="str", required=True),
                job=dict(type="str", required=True, choices=sorted(PREFIXES)),
                url=dict(type="str", required=True),
                planned_blocks=dict(type="int"),
            )),
            timeout=dict(type="int", default=10),
            fail_on_missing=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    # exit_json stays outside the error boundary (a body that returns; failures raise UserError).
    module.exit_json(**run_guarded(module, _body, "Checking metric names"))


if __name__ == "__main__":
    main()
