#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_rollout_load
short_description: Run vLLM's own benchmark through the front door during a rollout and count what users saw
version_added: 0.1.0
description:
  - Load during change (C(gpufleet_rollout_load) of C(playbooks/rollout.yml)) - V(started) runs
    C(vllm bench serve) (vLLM's own benchmark, in the venv of O(python)) in the background against O(load)'s
    C(url) at C(rate) requests per second, as back-to-back windows of C(window) seconds, until V(stopped) or
    C(max_seconds). Every request of every window is kept (vLLM's C(--save-detailed) lists).
  - V(marked) starts a phase (a rollout batch, a test step) at the current time; V(read) and V(stopped) report
    per phase and for the whole run - requests sent, failed (an error text vLLM's client saw), truncated
    (succeeded with fewer output tokens than asked; the load sends C(--ignore-eos)), TTFT p50 and p99 - and
    whether the failed count exceeds O(max_failed). A window whose run raised counts all its requests failed.
  - V(checked) only checks O(load) and O(max_failed) and returns O(load) with its defaults; a bad value fails
    naming the variable.
author:
  - gpufleet.vllm maintainers (@gpufleet)
options:
  state:
    description: What to do.
    type: str
    choices: [checked, started, marked, read, stopped]
    required: true
  load:
    description:
      - C(gpufleet_rollout_load) - C(rate) (requests per second, required), C(url) (the front door's base URL),
        C(input_len) (V(64)) and C(output_len) (V(16)) tokens per request, C(window) (seconds per benchmark run,
        V(10)), C(max_seconds) (the load stops by itself after it, V(3600)), C(burstiness) (vLLM's, V(1.0) is
        Poisson arrivals), C(max_concurrency) (V(0) is none).
    type: raw
  max_failed:
    description: C(gpufleet_rollout_max_failed) - failed requests allowed before RV(exceeded) is true.
    type: raw
    default: 0
  folder:
    description: Where the load keeps its results, marks and log on the host that runs it.
    type: path
    default: /var/lib/vllm/rollout-load
  python:
    description: The Python of a venv with vLLM (V(started)).
    type: path
  model:
    description: The served model name the requests ask for (V(started)).
    type: str
  tokenizer:
    description: The tokenizer (a model folder) vLLM's random dataset builds the prompts with (V(started)).
    type: str
  phase:
    description: The phase V(marked) starts (with V(stopped), started before the load is asked to stop).
    type: str
  timeout:
    description: Seconds V(stopped) and V(read) wait for the running window to end (a window's results are written when it ends).
    type: int
    default: 300
notes:
  - Runs on one host (the playbook delegates it); the load reaches the front door over the network like a client.
"""

EXAMPLES = r"""
- name: Start the load before the first batch
  gpufleet.vllm.vllm_rollout_load:
    state: started
    load: {rate: 2, url: "http://10.0.0.5:80"}
    python: /opt/vllm/current/bin/python
    model: qwen3-8b
    tokenizer: /srv/models/qwen3-8b

- name: Start a phase
  gpufleet.vllm.vllm_rollout_load:
    state: marked
    phase: batch 1

- name: Stop it and report
  gpufleet.vllm.vllm_rollout_load:
    state: stopped
    load: {rate: 2, url: "http://10.0.0.5:80"}
    max_failed: 0
  register: load_report
"""

RETURN = r"""
load:
  description: O(load) with its defaults.
  returned: success
  type: dict
pid:
  description: The load's process (V(started)).
  returned: when state is started
  type: int
report:
  description:
    - C(total) and C(phases) (each C(name), C(sent), C(failed), C(truncated), C(ttft_p50_ms), C(ttft_p99_ms),
      C(errors) - the distinct error texts with counts, C(failed_sent_at) - the wall clock (seconds since the epoch)
      at which the first 20 failed requests were sent; a phase also has C(from), its mark's wall clock, null for
      C(before)), C(broken_windows), C(max_failed), C(exceeded), C(line).
  returned: when state is read or stopped
  type: dict
exceeded:
  description: The failed count is above O(max_failed).
  returned: when state is read or stopped
  type: bool
msg:
  description: The report in one line.
  returned: when state is read or stopped
  type: str
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.vllm.plugins.module_utils.bench import rollout_load
from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError, run_guarded


def _need(p, *names):
    missing = [n for n in names if not p.get(n)]
    if missing:
        raise UserError("state %s needs %s." % (p["state"], ", ".join(missing)))


def _body(module):
    p = module.params
    if p["state"] == "marked":
        _need(p, "phase")
        rollout_load.mark(p["folder"], p["phase"])
        return dict(changed=True)
    load = rollout_load.check(p["load"], p["max_failed"])
    if p["state"] == "checked":
        return dict(changed=False, load=load)
    if p["state"] == "started":
        _need(p, "python", "model", "tokenizer")
        argv = rollout_load.window_argv(load, p["model"], p["tokenizer"])
        pid = rollout_load.start(p["python"], p["folder"], argv, load["max_seconds"])
        return dict(changed=True, load=load, pid=pid)
    if p["state"] == "stopped":
        if p["phase"]:
            rollout_load.mark(p["folder"], p["phase"])
        rollout_load.stop(p["folder"], p["timeout"])
    else:  # the requests sent until now are in the running window: read once it ended
        rollout_load.settle(p["folder"], time.time(), p["timeout"])
    records, broken = rollout_load.read_windows(p["folder"], load)
    found = rollout_load.report(records, rollout_load.read_marks(p["folder"]), broken, p["max_failed"])
    return dict(changed=p["state"] == "stopped", load=load, report=found, exceeded=found["exceeded"], msg=found["line"])


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", required=True, choices=["checked", "started", "marked", "read", "stopped"]),
            load=dict(type="raw"),
            max_failed=dict(type="raw", default=0),
            folder=dict(type="path", default="/var/lib/vllm/rollout-load"),
            python=dict(type="path"),
            model=dict(type="str"),
            tokenizer=dict(type="str", no_log=False),
            phase=dict(type="str"),
            timeout=dict(type="int", default=300),
        ),
        supports_check_mode=False,
    )
    module.exit_json(**run_guarded(module, _body, "the rollout load"))


if __name__ == "__main__":
    main()
