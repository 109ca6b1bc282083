#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_startup_report
short_description: Report the start-up phases of a vLLM unit's current start and whether its compile cache hit
version_added: 0.1.0
description:
  - Reads the journal of the unit's current start (its C(InvocationID)) and the engine's own log lines in it,
    and returns the phases with seconds (API server, weights, torch.compile, profiling, KV cache sizing,
    the KV offload tier's pinned host memory, CUDA-graph capture, engine init, ready), from the process start
    (systemd's C(ExecMainStartTimestamp)).
  - Gives the compile-cache verdict (V(hit), V(miss), V(unloadable), V(partial), V(disabled),
    V(not_applicable), V(unknown)) and, comparing the inputs of this start (vLLM version, argv, the unit's
    environment, venv, cache folder) with the record of the previous start, whether a recompilation was
    expected and its cause.
  - Writes the record to O(state_dir)/INSTANCE.json (the previous one is kept as INSTANCE.previous.json) and,
    with O(textfile_dir), the node exporter textfile metrics C(gpufleet_vllm_startup_*).
  - The same start reported twice changes nothing (the record's C(invocation_id) is this start's).
  - Runs on the host (root), after the role's health gate.
author:
  - gpufleet.vllm maintainers (@gpufleet)
options:
  instance:
    description: The instance name (the record's file name).
    type: str
    required: true
  unit:
    description: The systemd unit, for example C(vllm-a.service).
    type: str
    required: true
  unit_file:
    description: The unit file the vllm role rendered (argv and environment of the start are read from it).
    type: path
    required: true
  vllm_version:
    description: The vLLM version the instance runs (the role's C(vllm_version)).
    type: str
    required: true
  gpu:
    description: The GPU type of the host (kernels are built for it); empty on the CPU platform.
    type: str
    default: ""
  state_dir:
    description: Where the records are kept.
    type: path
    default: /var/lib/vllm/startup
  textfile_dir:
    description: The node exporter textfile collector folder for the metrics (written only where it exists); empty writes none.
    type: path
    default: ""
  budget_seconds:
    description: The restart budget (process start to ready); 0 checks none.
    type: int
    default: 0
  budget_action:
    description: What a start over O(budget_seconds) does.
    type: str
    choices: [warn, fail]
    default: warn
  expect_hit:
    description: A pre-warmed copy of the caches was installed for this start; a recompilation is then a finding.
    type: bool
    default: false
  copied_from:
    description: Where the pre-warmed copy came from (a host name), for the finding.
    type: str
    default: ""
  journal_text:
    description:
      - The start's log instead of the journal (tests, or a log kept elsewhere); O(process_start) then gives
        the start time.
    type: str
  process_start:
    description: Epoch seconds of the process start, with O(journal_text).
    type: float
notes:
  - Check mode reads and reports, and writes nothing. Diff mode shows the record before and after.
  - The phase times come from the journal's clock (microseconds); an engine log without the journal's prefix
    has one-second resolution (vLLM's own timestamps).
"""

EXAMPLES = r"""
- name: Report the start of instance a after the health gate
  gpufleet.vllm.vllm_startup_report:
    instance: a
    unit: vllm-a.service
    unit_file: /etc/systemd/system/vllm-a.service
    vllm_version: "0.32.0"
    budget_seconds: 300
    budget_action: warn
    textfile_dir: /var/lib/prometheus/node-exporter
  register: start_report

- name: Show the phases
  ansible.builtin.debug:
    msg: "{{ start_report.summary }}"
"""

RETURN = r"""
summary:
  description: One line with the total and each phase's seconds, the cache verdict and any finding.
  returned: always
  type: str
  sample: "a: ready 41.2 s (api_server 8.1, weights 8.0, torch_compile 20.4 [miss], ...); cache: first start"
record:
  description: The record of this start (phases, compile evidence, cache verdict, inputs, fingerprint).
  returned: always
  type: dict
reported_before:
  description: True when this start had been reported already (nothing was written).
  returned: always
  type: bool
over_budget:
  description: The start took longer than O(budget_seconds).
  returned: always
  type: bool
finding:
  description: An unexpected recompilation (its text), else empty.
  returned: always
  type: str
path:
  description: The record file.
  returned: always
  type: str
"""

import datetime
import subprocess

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError, run_guarded
from ansible_collections.gpufleet.vllm.plugins.module_utils.startup import cache_key, report, store


def _run(argv):
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                          check=False)
    if proc.returncode != 0:
        raise UserError("%s failed (rc %d): %s" % (" ".join(argv[:3]), proc.returncode, proc.stderr.strip()))
    return proc.stdout


def _outcome(module, record, reported):
    p = module.params
    if record["cache"].get("finding"):
        module.warn("%s: %s (%s)" % (p["instance"], record["cache"]["finding"], record["cache"].get("cause")))
    if not record["over_budget"] or reported:
        return None
    message = "%s: the start took %.1f s, over vllm_restart_budget_seconds %d" % (
        p["instance"], record["total_seconds"], p["budget_seconds"])
    if p["budget_action"] == "fail":
        return message + " (vllm_restart_budget_action: fail): raise the budget or shorten the slow phase named above"
    module.warn(message)
    return None


def _body(module):
    p = module.params
    with open(p["unit_file"]) as handle:
        argv, env, venv, node_rank = cache_key.unit_inputs(handle.read())
    if p["journal_text"] is not None:
        invocation, start, text = None, p["process_start"], p["journal_text"]
    else:
        invocation, start, text = store.read_start(p["unit"], _run)
    start_inputs = cache_key.inputs(p["vllm_version"], argv, env, venv, env.get("XDG_CACHE_HOME"),
                                    gpu=p["gpu"] or None, node_rank=node_rank)
    records = store.Store(p["state_dir"], create=not module.check_mode)
    try:
        current = records.current(p["instance"])
        reported = bool(current and invocation and current.get("invocation_id") == invocation)
        record = current if reported else report.build(
            p["instance"], invocation, text, start, start_inputs, previous=current, budget=p["budget_seconds"],
            expect_hit=p["expect_hit"], copied_from=p["copied_from"] or None, year=datetime.datetime.utcnow().year)
        result = dict(changed=not reported, summary=report.summary(record), record=record, reported_before=reported,
                      over_budget=record["over_budget"], finding=record["cache"].get("finding") or "",
                      path=records.path(p["instance"]))
        if module._diff and not reported:
            result["diff"] = dict(before=report.dumps(current) if current else "", after=report.dumps(record))
        if not reported and not module.check_mode:
            records.save(record, current)
            records.write_metrics(p["textfile_dir"])
    finally:
        records.close()
    failure = _outcome(module, record, reported)
    if failure:
        module.fail_json(msg=failure, **result)
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            instance=dict(type="str", required=True),
            unit=dict(type="str", required=True),
            unit_file=dict(type="path", required=True),
            vllm_version=dict(type="str", required=True),
            gpu=dict(type="str", default=""),
            state_dir=dict(type="path", default="/var/lib/vllm/startup"),
            textfile_dir=dict(type="path", default=""),
            budget_seconds=dict(type="int", default=0),
            budget_action=dict(type="str", choices=["warn", "fail"], default="warn"),
            expect_hit=dict(type="bool", default=False),
            copied_from=dict(type="str", default=""),
            journal_text=dict(type="str"),
            process_start=dict(type="float"),
        ),
        supports_check_mode=True,
    )
    module.exit_json(**run_guarded(module, _body, "Reporting the start of %s" % module.params["unit"]))


if __name__ == "__main__":
    main()
