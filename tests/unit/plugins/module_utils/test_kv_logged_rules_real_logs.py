# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``GPU KV cache size`` rules of kv_capacity, checked against lines vLLM itself printed.

Every figure comes from tests/fixtures/vllm-logs/kv-lines.json: startup lines copied verbatim from
public GitHub posts (URL, version evidence and quote per entry; see the README there). None is
produced by this project's planner. The checks use only what a log shows (N, C, L and, where
printed, num_gpu_blocks), so each one can fail:

* >= 0.20.1 (``V_CONCURRENCY_TOKENS``): N = int(c x L) for the exact concurrency c that prints as C.
* older releases (``V_GROUPED_TOKENS`` and the 0.9 V1 engine): N = num_blocks // groups x min block,
  so N is a whole number of blocks (every vLLM block size is a multiple of 16 tokens); with one group
  C is num_blocks / cdiv(L, block) printed with "%.2f", and with several groups C sits well above N / L.

The two rules print the same pair only for a single-group model whose L is a multiple of the block
size; every other log here tells them apart, and the tests below show it.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import json
import os
import re
from fractions import Fraction

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import kv_capacity as kv

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "vllm-logs", "kv-lines.json")

with io.open(FIXTURE, encoding="utf-8") as _fh:
    LOGS = json.load(_fh)

BY_ID = {log["id"]: log for log in LOGS}
KERNEL_ALIGN = 16  # plain and hybrid-aligned block sizes are all multiples of 16 tokens
TOKENS_RE = re.compile(r"GPU KV cache size: ([\d,]+) tokens")
CONCURRENCY_RE = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")
BLOCKS_RE = re.compile(r"num_gpu_blocks is: (\d+)")


def _int(text):
    return int(text.replace(",", ""))


def _printed(value):
    """vLLM prints the concurrency with "%.2fx"."""
    return "%.2f" % value


def _block(log):
    return log.get("block_size") or KERNEL_ALIGN


def fits_concurrency_rule(log):
    """>= 0.20.1: some c with "%.2f" % c == C and int(c x L) == N, i.e. [N/L, (N+1)/L) meets [C - 0.005, C + 0.005]."""
    n, length = log["logged_tokens"], log["max_model_len"]
    c = Fraction(_printed(log["logged_concurrency"]))
    half = Fraction(1, 200)
    return Fraction(n, length) <= c + half and Fraction(n + 1, length) > c - half


def fits_grouped_rule(log):
    """<= 0.20.0: N is whole blocks; one group: C = num_blocks / cdiv(L, block); several groups: C well above N / L."""
    n, length, c = log["logged_tokens"], log["max_model_len"], log["logged_concurrency"]
    block = _block(log)
    if n % block:
        return False
    if log["hybrid"]:
        return c - n / length > 0.01
    return _printed((n // block) / kv.cdiv(length, block)) == _printed(c)


RULES = {"concurrency": fits_concurrency_rule, "grouped": fits_grouped_rule}


def selected_rule(version_text):
    """The rule kv_capacity.logged_tokens applies to this version (below 0.10 it prints the grouped figures for one group)."""
    if kv.parse_version(version_text) >= kv.V_CONCURRENCY_TOKENS:
        return "concurrency"
    return "grouped"


def _other(rule):
    return "grouped" if rule == "concurrency" else "concurrency"


def _params(logs):
    out = []
    for log in logs:
        marks = ()
        if log.get("known_disagreement"):
            marks = (pytest.mark.xfail(strict=True, reason=log["known_disagreement"]),)
        out.append(pytest.param(log, id=log["id"], marks=marks))
    return out


@pytest.mark.parametrize("log", LOGS, ids=[log["id"] for log in LOGS])
def test_fixture_fields_are_the_quoted_figures(log):
    """The numbers the tests use are the ones in the copied lines, and each entry carries its provenance."""
    assert log["url"].startswith("https://github.com/")
    assert log["retrieved"] == "2026-12-01"
    text = "\n".join(log["quote"])
    tokens = [_int(m) for m in TOKENS_RE.findall(text)]
    pairs = [(_int(length), float(c)) for length, c in CONCURRENCY_RE.findall(text)]
    assert tokens == [log["logged_tokens"]]
    assert pairs == [(log["max_model_len"], log["logged_concurrency"])]
    blocks = [int(m) for m in BLOCKS_RE.findall(text)]
    assert blocks == ([log["num_gpu_blocks"]] if log["num_gpu_blocks"] is not None else [])
    assert log["vllm_version"] in text + "\n" + log["version_evidence"]


@pytest.mark.parametrize("log", _params(LOGS))
def test_logged_pair_fits_the_rule_kv_capacity_selects(log):
    rule = selected_rule(log["vllm_version"])
    assert RULES[rule](log), "%s (vLLM %s) does not fit the %s rule kv_capacity applies" % (log["id"], log["vllm_version"], rule)


@pytest.mark.parametrize("log", LOGS, ids=[log["id"] for log in LOGS])
def test_the_other_rule_fails_unless_both_provably_coincide(log):
    """The wrong release family's rule must reject the log, except a one-group log with L a whole number of blocks."""
    rule = selected_rule(log["vllm_version"])
    if log.get("known_disagreement"):
        rule = _other(rule)  # the figures follow the other rule: see test_prerelease_of_0_20_1_still_prints_grouped_figures
    wrong = _other(rule)
    coincide = not log["hybrid"] and log["max_model_len"] % _block(log) == 0
    if coincide:
        assert RULES[wrong](log)
    else:
        assert not RULES[wrong](log), "%s cannot tell the rules apart" % log["id"]


def test_version_selection_matters_in_both_directions():
    """At least one real log per family is rejected by the other family's rule."""
    rejected = {"concurrency": [], "grouped": []}
    for log in LOGS:
        if log.get("known_disagreement"):
            continue
        rule = selected_rule(log["vllm_version"])
        if not RULES[_other(rule)](log):
            rejected[rule].append(log["id"])
    assert rejected["concurrency"], "no >= 0.20.1 log rejects the grouped rule"
    assert rejected["grouped"], "no <= 0.20.0 log rejects the int(C x L) rule"


@pytest.mark.parametrize("log", [log for log in LOGS if log["num_gpu_blocks"] is not None],
                         ids=[log["id"] for log in LOGS if log["num_gpu_blocks"] is not None])
def test_logged_tokens_reproduces_a_printed_block_count(log):
    """Where the log prints num_gpu_blocks, kv_capacity.logged_tokens gives N exactly and the block count gives C."""
    assert not log["hybrid"]
    blocks, length, block = log["num_gpu_blocks"], log["max_model_len"], _block(log)
    concurrency = blocks / kv.cdiv(length, block)
    assert _printed(concurrency) == _printed(log["logged_concurrency"])
    version = kv.parse_version(log["vllm_version"])
    assert kv.logged_tokens(version, blocks, concurrency, length, 1, block) == log["logged_tokens"]


def test_logged_tokens_on_a_length_that_is_not_whole_blocks():
    """vLLM 0.9.2, L = 5,000 (312.5 blocks): only the block-count rule gives both printed figures; int(C x L) does not."""
    log = BY_ID["vllm-19954-v0.9.2-dp2"]
    length, n = log["max_model_len"], log["logged_tokens"]
    assert length % 16
    blocks = n // 16
    per_request = kv.cdiv(length, 16)
    concurrency = blocks / per_request
    assert _printed(concurrency) == _printed(log["logged_concurrency"])
    assert _printed(n / length) != _printed(log["logged_concurrency"])  # 93.50 against the printed 93.35
    version = kv.parse_version(log["vllm_version"])
    assert version < kv.V_GROUPED_TOKENS
    assert kv.logged_tokens(version, blocks, concurrency, length, 1, 16) == n
    assert kv.logged_tokens(kv.V_GROUPED_TOKENS, blocks, concurrency, length, 1, 16) == n
    assert kv.logged_tokens(kv.V_CONCURRENCY_TOKENS, blocks, concurrency, length, 1, 16) != n


def test_hybrid_0_19_cross_check_with_inferred_geometry():
    """Qwen3.5-27B on 0.19.0: with the geometry this project infers (4 groups, 784-token blocks, one block per
    linear group), exactly one block count gives both printed figures under the grouped rule, and the
    0.20.1 rule applied to that count is far from the printed N. The geometry is not in the log: see "inferred"."""
    log = BY_ID["vllm-40691-v0.19.0-qwen3.5-27b-hybrid"]
    geo = log["inferred"]
    groups, block = geo["kv_cache_groups"], geo["attention_block_size"]
    length, n = log["max_model_len"], log["logged_tokens"]
    per_request = kv.cdiv(length, block) + (groups - 1) * geo["linear_blocks_per_request_per_group"]
    version = kv.parse_version(log["vllm_version"])
    matches = []
    for blocks in range(n // block * groups, (n // block + 1) * groups):
        concurrency = blocks / per_request
        same_tokens = kv.logged_tokens(version, blocks, concurrency, length, groups, block) == n
        if same_tokens and _printed(concurrency) == _printed(log["logged_concurrency"]):
            matches.append(blocks)
    assert len(matches) == 1
    blocks = matches[0]
    wrong = kv.logged_tokens(kv.V_CONCURRENCY_TOKENS, blocks, blocks / per_request, length, groups, block)
    assert wrong > 3 * n


def test_prerelease_of_0_20_1_still_prints_grouped_figures():
    """club-3090#46: a 0.20.1rc1.dev16 nightly prints N = 67,728 (whole blocks) beside C = 1.06 at L = 180,000,
    the pre-0.20.1 hybrid pattern; kv_capacity sorts pre-releases before their release, so it applies that rule."""
    log = BY_ID["club3090-46-v0.20.1rc1.dev16-qwen3.6-27b-dual"]
    assert fits_grouped_rule(log)
    assert not fits_concurrency_rule(log)
    assert selected_rule(log["vllm_version"]) == "grouped"


# PEP 440 order against the rule versions: pre-releases and dev builds before the release, local labels
# and post-releases are the release.
VERSION_ORDER = [
    ("0.20.1rc1.dev16+g7a1eb8ac2", "<", kv.V_CONCURRENCY_TOKENS),
    ("0.20.1rc1", "<", kv.V_CONCURRENCY_TOKENS),
    ("0.20.1.dev3", "<", kv.V_CONCURRENCY_TOKENS),
    ("0.20.1a1", "<", kv.V_CONCURRENCY_TOKENS),
    ("0.20.1rc1", ">=", (0, 20, 0)),
    ("0.20.1", ">=", kv.V_CONCURRENCY_TOKENS),
    ("0.20.1+cu130", ">=", kv.V_CONCURRENCY_TOKENS),
    ("0.20.1.post1", ">=", kv.V_CONCURRENCY_TOKENS),
    ("0.20.2rc1.dev9+g01d4d1ad3", ">=", kv.V_CONCURRENCY_TOKENS),  # club-3090#75/#76: prints the int(C x L) pair
    ("0.33.0rc2", "<", kv.V_FIT_NULL_BLOCK),
    ("0.33.0rc2", ">=", (0, 32, 9)),
    ("0.32.0+cpu", "<", kv.V_FIT_NULL_BLOCK),
    ("0.11.0+582e4e37.nv25.11", ">=", kv.V_GROUPED_TOKENS),
    ("1.0.0rc1", "<", (1, 0, 0)),
    ("1.0.0rc1", ">=", (0, 99, 99)),
    ("v0.26.0", ">=", (0, 26, 0)),
]


@pytest.mark.parametrize("text,op,bound", VERSION_ORDER, ids=["%s %s %s" % c for c in VERSION_ORDER])
def test_parse_version_orders_like_pep440(text, op, bound):
    version = kv.parse_version(text)
    assert (version < bound) if op == "<" else (version >= bound), version


def test_every_logged_release_family_is_represented():
    families = {selected_rule(log["vllm_version"]) for log in LOGS if not log.get("known_disagreement")}
    assert families == {"concurrency", "grouped"}
