# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench.runner's progress line (the point a workload is at), from a real point's argv.

ARGV: the first point of tests/fixtures/bench/h200-0.26.0/results.json (``points[0].argv``, H200 run), without
``vllm bench serve`` as runner.measure receives it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.bench import runner

ARGV = ["--backend", "openai", "--endpoint", "/v1/completions", "--base-url", "http://127.0.0.1:8100", "--model",
        "bench-dense-qwen3-8b-32k", "--tokenizer", "/tmp/gpu-acc/work-1796163863/run/models/Qwen__Qwen3-8B",
        "--dataset-name", "random", "--random-input-len", "1024", "--random-output-len", "128",
        "--random-range-ratio", "0.0", "--num-prompts", "8", "--max-concurrency", "1", "--seed", "1",
        "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99", "--label", "short-low",
        "--disable-tqdm", "--save-result", "--result-dir", "{result_dir}", "--result-filename", "result.json"]


@pytest.mark.parametrize("option, value", [
    ("--base-url", "http://127.0.0.1:8100"), ("--max-concurrency", "1"), ("--num-prompts", "8"),
    ("--request-rate", ""), ("result.json", ""),
])
def test_argv_value(option, value):
    assert runner.argv_value(ARGV, option) == value


def test_point_line():
    progress = dict(path=None, workload="short-low", total=6, done=2)
    assert runner.point_line(progress, ARGV) == (
        "workload short-low: point 3 of 6, 8 prompts at concurrency 1 via http://127.0.0.1:8100")


@pytest.fixture
def tracked(tmp_path):
    path = str(tmp_path / "progress")
    runner.track(path, "short-low", 6)
    yield path
    runner.track(None, "", 0)


def test_track_says_vllm_is_being_imported(tracked):
    with open(tracked) as handle:
        text = handle.read()
    assert re.match(r"^workload short-low: 6 points, importing vLLM's benchmark \(vllm bench serve\), "
                    r"started \d\d:\d\d:\d\d\n$", text), text


def test_each_point_rewrites_the_file(tracked):
    runner._note_point(ARGV)
    runner.PROGRESS["done"] += 1
    runner._note_point(ARGV)
    with open(tracked) as handle:
        text = handle.read()
    assert re.match(r"^workload short-low: point 2 of 6, 8 prompts at concurrency 1 via http://127.0.0.1:8100, "
                    r"started \d\d:\d\d:\d\d\n$", text), text


def test_no_file_without_track(tmp_path):
    runner.track(None, "", 0)
    runner._note_point(ARGV)
    assert list(tmp_path.iterdir()) == []
