# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The guarantee docs/restarts.md states (issue 44) is the one the vllm_serve scenario asserts: the same workload
(rate, input and output tokens) as verify.yml gives gpufleet.vllm.vllm_rollout_load, and 0 failed and 0 truncated
asserted for the nginx reload, the rolling change and from 20 s after a kill -9."""

from __future__ import absolute_import, division, print_function

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "restarts.md"
SCENARIO = ROOT / "extensions" / "molecule" / "vllm_serve"


def _load_vars():
    plays = yaml.safe_load((SCENARIO / "verify.yml").read_text())
    # verify.yml's top-level tasks are feature blocks (test_scenario_features.py): look inside them too.
    for task in [t for top in plays[0]["tasks"] for t in [top] + top.get("block", [])]:
        if task.get("ansible.builtin.include_tasks") == "tasks/load.yml":
            return task["vars"]["_ld_load"]
    raise AssertionError("verify.yml does not include tasks/load.yml")


def _sentence():
    found = re.search(r"Measured under load[^\n]*(?:\n[^\n]+)*", DOC.read_text())
    assert found, "docs/restarts.md has no 'Measured under load' sentence"
    return " ".join(found.group(0).split())


def test_the_documented_workload_is_the_tested_one():
    load, text = _load_vars(), _sentence()
    assert "%s requests/s" % load["rate"] in text, text
    assert "%d tokens in, %d out" % (load["input_len"], load["output_len"]) in text, text


def test_the_documented_zeros_are_asserted():
    text, asserts = _sentence(), (SCENARIO / "tasks" / "load.yml").read_text()
    assert "0 failed and 0 truncated" in text
    for phase in ("nginx reload", "roll tiny-qwen3-1", "kill -9 +10 s"):
        assert "_p['%s'].failed == 0 and _p['%s'].truncated == 0" % (phase, phase) in asserts, phase
    assert "from 10 s after the kill nothing failed" in text
