# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The suite's own deadline (scripts/lib.sh: suite_deadline, bounded, verdict; used by scripts/test.sh): a step still
running at the deadline is stopped with its children and reported TIMED OUT, one that would start with too little time
left is NOT RUN, and the summary names both. CI stops the whole job at 5,400 s and then shows none of the summary (the
stop before this test: "the project's CI did not finish within its 5400 s", and nothing said where it was)."""
import pathlib
import subprocess
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _bash(script, timeout=60):
    start = time.monotonic()
    out = subprocess.run(["bash", "-c", "source scripts/lib.sh; set +e; " + script], cwd=str(ROOT),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=timeout,
                         check=False)
    return out, time.monotonic() - start


def test_a_step_inside_the_budget_keeps_its_own_exit_code():
    out, took = _bash('suite_deadline 60 "$(date +%s)"; bounded 5 sh -c "exit 3"; echo "rc=$?"')
    assert out.stdout.strip().endswith("rc=3") and took < 10, out.stdout


def test_a_step_running_at_the_deadline_is_stopped_with_its_children(tmp_path):
    marker = tmp_path / "child-still-ran"
    # the step's child (a grandchild of bounded) would write the marker after 6 s unless the group is stopped
    script = ('suite_deadline 3 "$(date +%%s)"; bounded 1 sh -c "(sleep 6; touch %s) & sleep 30"; rc=$?; '
              'echo "rc=$rc"; verdict $rc' % marker)
    out, took = _bash(script)
    assert "rc=124" in out.stdout and "TIMED OUT" in out.stdout and "GPUFLEET_SUITE_BUDGET=3 s" in out.stdout, out.stdout
    assert took < 10, took
    time.sleep(4)
    assert not marker.exists(), "the step's child outlived the deadline"


def test_a_step_with_too_little_time_left_is_not_started(tmp_path):
    marker = tmp_path / "started"
    out, took = _bash('suite_deadline 10 "$(date +%%s)"; bounded 60 touch %s; rc=$?; echo "rc=$rc"; verdict $rc' % marker)
    assert "rc=125" in out.stdout and "NOT RUN" in out.stdout, out.stdout
    assert not marker.exists() and took < 5


def test_verdicts_name_each_outcome():
    out = _bash('suite_deadline 5000 0; for rc in 0 2 124 125 137; do verdict $rc; done')[0]
    assert out.stdout.splitlines() == [
        "ok", "FAILED (exit 2)",
        "TIMED OUT (stopped at the suite's deadline, GPUFLEET_SUITE_BUDGET=5000 s)",
        "NOT RUN (too little of the suite's 5000 s left)",
        "TIMED OUT (stopped at the suite's deadline, GPUFLEET_SUITE_BUDGET=5000 s)"], out.stdout


def test_the_suite_uses_the_deadline_for_every_step():
    text = (ROOT / "scripts" / "test.sh").read_text()
    assert 'suite_deadline "${GPUFLEET_SUITE_BUDGET:-5000}" "$start"' in text
    for step in ('step sanity bounded', 'step units bounded', 'bounded 60 "$VENV/bin/pytest"',
                 'bounded 60 "$ROOT/scripts/lint.sh"', 'bounded 120 "$ROOT/scripts/molecule.sh" test'):
        assert step in text, step
