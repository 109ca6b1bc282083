# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vllm role's polling rounds (roles/vllm/tasks/progress.yml) as health_gate.yml and venv_progress.yml run them:
background jobs of different lengths, on this machine (connection local). Stand-ins, named as such: the jobs are
`sleep` commands in place of the gates and pip, and the progress line is an `echo` in place of vllm_start_phase.py.

A regression seen in CI: with two gates side by side, the round that followed the first job's end failed on its
own condition (the block's `when` read the loop's registered result while the next round's loop re-registered it).

And a job whose progress line stops changing (CI, 2026-12-05: a full disk left pip's job unable to write its result,
and the rounds went on for 75 minutes) fails the play once _vllm_progress_stall seconds have passed."""
import os
import pathlib
import subprocess
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROGRESS = ROOT / "roles" / "vllm" / "tasks" / "progress.yml"

PLAY = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Start the stand-in jobs
      ansible.builtin.command: "sleep {{{{ item }}}}"
      loop: {lengths}
      async: 60
      poll: 0
      register: jobs
      changed_when: false
    - name: Start the progress clock
      ansible.builtin.set_fact:
        _vllm_progress_t0: "{{{{ now(utc=true).timestamp() }}}}"
        _vllm_progress_round: 0
        _vllm_progress_seen: ""
        _vllm_progress_seen_at: "{{{{ now(utc=true).timestamp() }}}}"
    - name: Poll
      ansible.builtin.include_tasks: {progress}
      vars:
        _vllm_progress_what: the stand-in jobs
        _vllm_progress_jobs: >-
          {{%- set out = [] -%}}
          {{%- for r in jobs.results -%}}
          {{%-   set _ = out.append({{'name': 'job-' ~ r.item, 'jid': r.ansible_job_id, 'file': r.results_file}}) -%}}
          {{%- endfor -%}}
          {{{{ out }}}}
        _vllm_progress_argv: {argv}
        _vllm_progress_interval: {interval}
        _vllm_progress_stall: {stall}
        _vllm_progress_stall_hint: the stand-in hint
    - name: Every job has ended when the rounds stop
      ansible.builtin.async_status:
        jid: "{{{{ item.ansible_job_id }}}}"
      loop: "{{{{ jobs.results }}}}"
      register: ended
      failed_when: not ended.finished
"""


def run_play(tmp_path, venv_bin, lengths, argv="[echo, stand-in progress line]", interval=20, stall=0):
    play = tmp_path / "play.yml"
    play.write_text(PLAY.format(lengths=lengths, progress=PROGRESS, argv=argv, interval=interval, stall=stall))
    env = dict(os.environ, ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
               ANSIBLE_PYTHON_INTERPRETER=sys.executable, ANSIBLE_NOCOLOR="1")
    t0 = time.time()
    proc = subprocess.run([str(venv_bin / "ansible-playbook"), "-i", "localhost,", str(play)], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=120,
                          check=False)
    return proc, time.time() - t0


@pytest.mark.parametrize("lengths", [[2, 5], [3]], ids=["two-gates", "one-job"])
def test_polling_rounds_end_when_every_job_ended(tmp_path, venv_bin, lengths):
    proc, took = run_play(tmp_path, venv_bin, lengths)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "failed=0" in proc.stdout
    assert "stand-in progress line" in proc.stdout      # a round that saw a running job printed its line
    # A job's end is seen when its result file says so, not at the 20-s interval (rounds wait 8, 16 s, then 20).
    assert took < max(lengths) + 20, took


def test_a_progress_line_that_stops_changing_fails_the_play(tmp_path, venv_bin):
    proc, took = run_play(tmp_path, venv_bin, [50], interval=2, stall=5)
    assert proc.returncode != 0, proc.stdout[-4000:]
    assert "so the job is taken as stuck" in proc.stdout and "the stand-in hint" in proc.stdout
    assert "stand-in progress line" in proc.stdout
    assert took < 40, took                                # not the job's 50 s


def test_a_progress_line_that_changes_is_not_a_stall(tmp_path, venv_bin):
    # The line changes every round (nanoseconds), the job runs longer than the stall limit, and the play passes.
    proc, took = run_play(tmp_path, venv_bin, [9], argv="[date, '+%s%N']", interval=2, stall=4)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "taken as stuck" not in proc.stdout
