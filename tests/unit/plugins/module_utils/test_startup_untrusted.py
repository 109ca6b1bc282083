# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 43 classes 1 and 7: the start report's inputs are untrusted - odd numbers in journal lines are lines
without a figure (never a crash), a record planted in the state folder (which the service account can write)
fails naming the file and never reaches the node exporter textfile root writes, ``../x`` is no instance name."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.startup import boot_log
from ansible_collections.gpufleet.vllm.plugins.modules import vllm_startup_report
from ansible_collections.gpufleet.vllm.tests.unit.plugins.modules.module_harness import run_module

HERE = os.path.dirname(__file__)
FIX = os.path.join(HERE, "..", "..", "..", "fixtures")
J = "2026-12-02T00:41:25.123456+00:00 host vllm-a[812]: "
E = "(EngineCore pid=9) INFO 12-02 00:41:26 [x.py:1] "


@pytest.mark.parametrize("line, fact", [
    (E + "Loading weights took 1.2.3 seconds", "weights_seconds"),
    (E + "Loading weights took . seconds", "weights_seconds"),
    (E + "Model loading took 9" + "9" * 400 + " GiB memory and 3.0 seconds", "weights_gib"),
    (E + "GPU KV cache size: ,,, tokens", "kv_tokens"),
    (E + "GPU KV cache size: 1.2.3 tokens", "kv_tokens"),
    (E + "Initial profiling/warmup run took 1..5 s", "profiling_seconds"),
    (E + "Graph capturing finished in 2.. secs, took 0.5 GiB", "graphs_seconds"),
    (E + "init engine (profile, create kv cache, warmup model) took .. s", "init_engine_seconds"),
    (J + E + "torch.compile took 1.1.1 s in total", "version"),
    ("2026-13-45T99:99:99.1+00:00 host vllm-a[812]: Loading weights took 1.0 seconds", "kv_tokens"),
    ("(EngineCore pid=9) INFO 99-99 99:99:99 [x.py:1] Loading weights took 1.0 seconds", "kv_tokens"),
])
def test_odd_numbers_in_journal_lines_are_no_figures(line, fact):
    text = "\n".join([J + E + "Initializing a V1 LLM engine (v0.32.0) with config", line,
                      J + "INFO:     Application startup complete."])
    parsed = boot_log.parse(text, year=2026)
    assert parsed[fact] in (None, "0.32.0")
    assert parsed["complete"]


@pytest.mark.parametrize("text", ["Wed 2026-13-45 99:99:99.123 UTC", "Wed 2026-12-02 00:37:03.x1 UTC", "a b c", ""])
def test_an_odd_start_time_from_systemd_is_no_time(text):
    from ansible_collections.gpufleet.vllm.plugins.module_utils.startup import store
    assert store.systemd_time(text) is None or isinstance(store.systemd_time(text), float)


def _args(tmp_path, **extra):
    with open(os.path.join(FIX, "startup", "cpu-0.32.0", "cold.log")) as handle:
        log = handle.read()
    args = dict(instance="a", unit="vllm-a.service", unit_file=os.path.join(FIX, "units", "cpu-single.service"),
                vllm_version="0.32.0", state_dir=str(tmp_path / "state"), journal_text=log,
                textfile_dir=str(tmp_path / "textfile"))
    args.update(extra)
    return args


GOOD = {"instance": "b", "total_seconds": 1.0, "budget_seconds": 0, "invocation_id": "i", "inputs": {},
        "phases": [{"name": "weights", "seconds": 1.0}], "cache": {"status": "miss", "expected": True},
        "compile": {"keys": []}}


@pytest.mark.parametrize("name, content", [
    ("a.json", "[1]"),
    ("a.json", '"text"'),
    ("a.json", "null"),
    ("a.json", "{broken"),
    ("a.json", json.dumps(dict(GOOD, instance="a", total_seconds="1\nevil_metric 1"))),
    ("b.json", json.dumps(dict(GOOD, phases=[{"name": 'x"} 1\nevil_metric{a="', "seconds": 1}]))),
    ("b.json", json.dumps(dict(GOOD, total_seconds=float("nan")))),
    ("b.json", json.dumps(dict(GOOD, cache={"status": "hit", "expected": "1\nevil 1"}))),
    ("b.json", json.dumps(dict(GOOD, instance="c"))),
    ("b.json", "[" * 100000 + "]" * 100000),
    ("a.json", json.dumps(dict(GOOD, instance="a", inputs={"argv": 5}))),
    ("a.json", json.dumps(dict(GOOD, instance="a", inputs={"environment": "HF_TOKEN=x"}))),
    ("a.json", json.dumps(dict(GOOD, instance="a", compile={"keys": "0123456789abcdef"}))),
])
def test_a_planted_record_fails_cleanly_naming_the_file(monkeypatch, tmp_path, name, content):
    (tmp_path / "state").mkdir()
    (tmp_path / "textfile").mkdir()
    (tmp_path / "state" / name).write_text(content)
    result = run_module(monkeypatch, vllm_startup_report.main, _args(tmp_path))
    assert result["failed"], result
    assert str(tmp_path / "state" / name) in result["msg"] and "This is a bug" not in result["msg"]
    assert "remove" in result["msg"]
    prom = tmp_path / "textfile" / "gpufleet_vllm_startup.prom"
    assert not prom.exists() or "evil" not in prom.read_text()


@pytest.mark.parametrize("instance", ["../x", "../../etc/cron.d/x", "a/b", "a\nb", ".."])
def test_an_instance_name_that_leaves_the_folder_is_refused(monkeypatch, tmp_path, instance):
    result = run_module(monkeypatch, vllm_startup_report.main, _args(tmp_path, instance=instance))
    assert result["failed"] and "is not an instance name" in result["msg"], result
    assert sorted(os.listdir(str(tmp_path))) in ([], ["state"]) and not (tmp_path / "x.json").exists()
