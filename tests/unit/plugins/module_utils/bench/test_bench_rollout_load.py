# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Load during a rollout (bench/rollout_load.py): the settings check names the variable, the argv is vLLM's,
each request lands in the phase it was sent in, failed / truncated / TTFT are counted from vLLM's lists, a window
that raised counts its requests failed, and the driver's start / settle / stop on a real process.

Expected values are written by hand from the planted inputs (a window of 4 requests whose start times, errors,
output lengths and TTFTs are chosen so each phase has a known count)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import sys

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.bench import rollout_load
from ansible_collections.gpufleet.vllm.plugins.module_utils.bench.errors import BenchError

LOAD = dict(rate=2, url="http://127.0.0.1:8080")


@pytest.mark.parametrize("load, max_failed, key", [
    (dict(url="http://x"), 0, "gpufleet_rollout_load.rate"),
    (dict(rate=0, url="http://x"), 0, "gpufleet_rollout_load.rate"),
    (dict(rate="fast", url="http://x"), 0, "gpufleet_rollout_load.rate"),
    (dict(rate=2, url="http://x", window=2.5), 0, "gpufleet_rollout_load.window"),
    (dict(rate=2, url="http://x", output_len=True), 0, "gpufleet_rollout_load.output_len"),
    (dict(rate=2), 0, "gpufleet_rollout_load.url"),
    (dict(rate=2, url="10.0.0.1:80"), 0, "gpufleet_rollout_load.url"),
    (dict(rate=2, url="http://x", speed=3), 0, "gpufleet_rollout_load"),
    ([2], 0, "gpufleet_rollout_load"),
    (LOAD, -1, "gpufleet_rollout_max_failed"),
    (LOAD, "some", "gpufleet_rollout_max_failed"),
    (LOAD, 1.5, "gpufleet_rollout_max_failed"),
])
def test_bad_settings_name_the_variable(load, max_failed, key):
    with pytest.raises(BenchError) as err:
        rollout_load.check(load, max_failed)
    assert err.value.details["key"] == key
    assert key in str(err.value)


def test_defaults_and_text_max_failed():
    assert rollout_load.check(dict(LOAD, url="http://h:80/"), "3") is not None
    got = rollout_load.check(dict(LOAD, url="http://h:80/"), 0)
    assert got == dict(rate=2.0, url="http://h:80", input_len=64, output_len=16, window=10, max_seconds=3600,
                       burstiness=1.0, max_concurrency=0)


def test_window_argv_is_vllm_bench_serve_at_the_rate():
    argv = rollout_load.window_argv(rollout_load.check(dict(LOAD, window=8, max_concurrency=4), 0), "m", "/srv/m")
    pairs = dict(zip(argv, argv[1:]))
    assert pairs["--num-prompts"] == "16" and pairs["--request-rate"] == "2.0"
    assert pairs["--base-url"] == "http://127.0.0.1:8080" and pairs["--model"] == "m" and pairs["--tokenizer"] == "/srv/m"
    assert pairs["--random-output-len"] == "16" and pairs["--max-concurrency"] == "4"
    assert "--ignore-eos" in argv and "--save-detailed" in argv and "--save-result" in argv


def test_percentile_is_numpys_linear():
    # numpy.percentile([1, 2, 3, 4], 50) == 2.5, ([1, 2, 3, 4], 99) == 3.97
    assert rollout_load.percentile([4, 1, 3, 2], 50) == 2.5
    assert abs(rollout_load.percentile([1, 2, 3, 4], 99) - 3.97) < 1e-9
    assert rollout_load.percentile([], 50) is None


def _window(folder, name, wall, perf, result=None, error=None):
    clock = dict(wall=wall, perf=perf, end=wall + 10)
    if error:
        clock["error"] = error
    with open(os.path.join(folder, name + ".clock"), "w") as handle:
        json.dump(clock, handle)
    if result is not None:
        with open(os.path.join(folder, name + ".json"), "w") as handle:
            json.dump(result, handle)


# numpy.percentile([100, 200, 300], 99) == 298.0 (the three TTFTs that succeeded, in ms).
# Four requests sent at wall 1000.5, 1001, 1003, 1004 (perf 50 = wall 1000): ok, refused, cut short (8 of 16
# tokens, no error), ok.
RESULT = dict(completed=3, failed=1, errors=["", "Connection refused", "", ""], output_lens=[16, 0, 8, 16],
              input_lens=[64, 64, 64, 64], ttfts=[0.1, 0.0, 0.3, 0.2], start_times=[50.5, 51, 53, 54])


def test_requests_land_in_their_phase_with_counts(tmp_path):
    _window(str(tmp_path), "window-00001", 1000.0, 50.0, RESULT)
    load = rollout_load.check(LOAD, 0)
    records, broken = rollout_load.read_windows(str(tmp_path), load)
    marks = [dict(name="roll b", wall=1003.5), dict(name="roll a", wall=1002.0)]
    found = rollout_load.report(records, marks, broken, 0)
    phases = dict((p["name"], p) for p in found["phases"])
    assert [p["name"] for p in found["phases"]] == ["before", "roll a", "roll b"]
    assert (phases["before"]["sent"], phases["before"]["failed"], phases["before"]["truncated"]) == (2, 1, 0)
    assert (phases["roll a"]["sent"], phases["roll a"]["failed"], phases["roll a"]["truncated"]) == (1, 0, 1)
    assert (phases["roll b"]["sent"], phases["roll b"]["failed"]) == (1, 0)
    assert phases["before"]["errors"] == [dict(text="Connection refused", count=1)]
    # the refused request was sent at wall 1000 + (51 - 50) = 1001; each phase starts at its mark
    assert [(p["name"], p["from"], p["failed_sent_at"]) for p in found["phases"]] == [
        ("before", None, [1001.0]), ("roll a", 1002.0, []), ("roll b", 1003.5, [])]
    assert found["total"]["failed_sent_at"] == [1001.0]
    assert found["total"]["ttft_p50_ms"] == 200.0 and found["total"]["ttft_p99_ms"] == 298.0
    assert found["exceeded"] and "1 failed (max 0)" in found["line"]
    assert not rollout_load.report(records, marks, broken, 1)["exceeded"]


def test_a_window_that_raised_counts_its_requests_failed(tmp_path):
    _window(str(tmp_path), "window-00001", 1000.0, 50.0, error="ValueError: boom")
    records, broken = rollout_load.read_windows(str(tmp_path), rollout_load.check(dict(LOAD, window=3), 0))
    assert broken == [dict(window="window-00001", error="ValueError: boom", requests=6)]
    assert rollout_load.summarize(records)["failed"] == 6


def test_a_result_not_vllms_shape_is_refused(tmp_path):
    _window(str(tmp_path), "window-00001", 1000.0, 50.0, dict(RESULT, completed="3"))
    with pytest.raises(BenchError):
        rollout_load.read_windows(str(tmp_path), rollout_load.check(LOAD, 0))


# A stand-in for vLLM's benchmark module on a real process: the driver's loop, stop file and clocks are real.
FAKE_VLLM = {
    "vllm/__init__.py": "",
    "vllm/benchmarks/__init__.py": "",
    "vllm/benchmarks/serve.py": (
        "import json, os, time\n"
        "def add_cli_args(p):\n"
        "    for a in ('--seed', '--result-dir', '--result-filename'):\n"
        "        p.add_argument(a)\n"
        "def main(a):\n"
        "    time.sleep(0.3)\n"
        "    json.dump(dict(completed=1, failed=0, errors=[''], output_lens=[16], input_lens=[64], ttfts=[0.1],\n"
        "                   start_times=[time.perf_counter()]), open(os.path.join(a.result_dir, a.result_filename), 'w'))\n"),
    "vllm/utils/__init__.py": "",
    "vllm/utils/argparse_utils.py": "from argparse import ArgumentParser as FlexibleArgumentParser\n",
}


def test_start_mark_settle_stop_on_a_real_process(tmp_path, monkeypatch):
    for name, text in FAKE_VLLM.items():
        path = tmp_path / "site" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    folder = str(tmp_path / "load")
    rollout_load.start(sys.executable, folder, [], 120)
    with pytest.raises(BenchError):
        rollout_load.start(sys.executable, folder, [], 120)  # one at a time
    rollout_load.mark(folder, "step")
    rollout_load.settle(folder, __import__("time").time(), 30)
    rollout_load.stop(folder, 30)
    records, broken = rollout_load.read_windows(folder, rollout_load.check(LOAD, 0))
    found = rollout_load.report(records, rollout_load.read_marks(folder), broken, 0)
    assert found["total"]["sent"] >= 1 and found["total"]["failed"] == 0 and not found["exceeded"]
    assert os.path.exists(os.path.join(folder, "done"))


def test_failed_send_times_are_capped():
    records = [dict(wall=2000.0 + n, failed=True, truncated=False, ttft=None, error="reset") for n in range(25)]
    summary = rollout_load.summarize(records)
    assert summary["failed"] == 25 and summary["failed_sent_at"] == [2000.0 + n for n in range(20)]
