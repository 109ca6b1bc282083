# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""vllm_rollout_load: what the rollout's check step gets (its defaults, or a failure naming the variable), and a
report read from planted window files (a window of 2 requests, one refused) with max_failed."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible_collections.gpufleet.vllm.plugins.modules import vllm_rollout_load
from ansible_collections.gpufleet.vllm.tests.unit.plugins.modules.module_harness import run_module


@pytest.mark.parametrize("load, max_failed, named", [
    ({"url": "http://h"}, 0, "gpufleet_rollout_load.rate"),
    ({"rate": 2, "url": "h:80"}, 0, "gpufleet_rollout_load.url"),
    ({"rate": 2, "url": "http://h"}, -3, "gpufleet_rollout_max_failed"),
])
def test_checked_fails_naming_the_variable(monkeypatch, load, max_failed, named):
    result = run_module(monkeypatch, vllm_rollout_load.main, dict(state="checked", load=load, max_failed=max_failed))
    assert result["failed"] and named in result["msg"]


def test_checked_returns_the_defaults(monkeypatch):
    result = run_module(monkeypatch, vllm_rollout_load.main, dict(state="checked", load={"rate": 1, "url": "http://h"}))
    assert not result.get("failed") and result["load"]["window"] == 10 and result["load"]["output_len"] == 16


def test_read_reports_and_compares_with_max_failed(monkeypatch, tmp_path):
    (tmp_path / "pid").write_text("1\n")
    (tmp_path / "done").write_text("")
    (tmp_path / "window-00001.clock").write_text(json.dumps(dict(wall=100.0, perf=10.0, end=120.0)))
    (tmp_path / "window-00001.json").write_text(json.dumps(dict(
        completed=1, failed=1, errors=["", "Connection refused"], output_lens=[16, 0], input_lens=[64, 64],
        ttfts=[0.25, 0.0], start_times=[10.5, 11.0])))
    args = dict(state="read", load={"rate": 1, "url": "http://h"}, folder=str(tmp_path))
    result = run_module(monkeypatch, vllm_rollout_load.main, dict(args, max_failed=0))
    assert result["exceeded"] and result["report"]["total"]["sent"] == 2 and result["report"]["total"]["failed"] == 1
    assert result["report"]["total"]["ttft_p50_ms"] == 250.0
    assert not run_module(monkeypatch, vllm_rollout_load.main, dict(args, max_failed=1))["exceeded"]
