# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""issue 27 HIGH 1 with a real nginx: the role's rendered nginx.conf in front of the stand-in upstream
(extensions/molecule/nginx/files/standin_upstream.py: vLLM's key rule, only /v1 paths checked, and a route
table shaped like vLLM's), probed by the same script the vllm_serve scenario runs on the real engine.
Before the fix, `location /` forwarded everything: /invocations, /pause and /tokenize answered without a key."""
import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import time

import pytest

from test_nginx_template import render

ROOT = pathlib.Path(__file__).resolve().parents[2]
FILES = ROOT / "extensions" / "molecule" / "nginx" / "files"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
KEY = "front-test-key"

pytestmark = pytest.mark.skipif(not os.path.exists(NGINX), reason="nginx is not installed")


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait(port):
    for _attempt in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError("nothing listens on %d" % port)


def _conf(tmp_path, **overrides):
    conf = render(nginx_error_log=str(tmp_path / "error.log"), nginx_access_log=str(tmp_path / "access.log"),
                  **overrides)
    conf = conf.replace("pid /run/nginx.pid;", "pid %s;" % (tmp_path / "nginx.pid"))
    return "\n".join(line for line in conf.splitlines() if not line.startswith("user "))


@pytest.fixture()
def front(tmp_path):
    yield from serving_front(tmp_path, [sys.executable, str(FILES / "standin_upstream.py")])


def serving_front(tmp_path, standin_argv):
    """nginx (the role's config) in front of one stand-in upstream started from ``standin_argv``: yields both URLs."""
    upstream, listen = _free_port(), _free_port()
    standin = subprocess.Popen(list(standin_argv) + ["--port", str(upstream), "--name", "a", "--api-key", KEY])
    path = tmp_path / "nginx.conf"
    path.write_text(_conf(tmp_path, nginx_instances=[{"name": "a", "port": upstream}], nginx_listen_port=listen))
    server = subprocess.Popen([NGINX, "-c", str(path), "-p", str(tmp_path), "-g", "daemon off;"])
    try:
        _wait(upstream)
        _wait(listen)
        yield "http://127.0.0.1:%d" % upstream, "http://127.0.0.1:%d" % listen
    finally:
        server.terminate()
        standin.terminate()
        server.wait(10)
        standin.wait(10)


def _probe(engine, url, key=KEY, paths=None):
    paths = paths or ["/v1/models", "/v1/completions", "/v1/chat/completions", "/v1/embeddings", "/v1/responses"]
    done = subprocess.run([sys.executable, str(FILES / "front_allowlist_probe.py"), engine, url, json.dumps(paths)],
                          env=dict(os.environ, GPUFLEET_PROBE_KEY=key), capture_output=True, text=True, timeout=120, check=False)
    return done.returncode, json.loads(done.stdout) if done.stdout.startswith("{") else done.stderr


def test_only_the_allow_list_passes_the_front(front):
    rc, report = _probe(*front)
    assert rc == 0, report
    outcomes = report["outcomes"]
    # Expected answers: the stand-in copies vLLM's rule (401 without the key on /v1 paths only); the front's
    # own denial is 404. Every unprotected route of the table is denied both ways.
    for route in ("POST /invocations", "POST /pause", "POST /tokenize", "POST /abort_requests", "POST /update_weights",
                  "POST /v1/load_lora_adapter", "GET /metrics", "GET /openapi.json", "GET /health",
                  "POST /v1/../invocations", "POST /v1/%2e%2e/invocations", "POST //invocations"):
        assert outcomes[route] == [404, 404, "denied"], route
    assert outcomes["GET /v1/models"] == [401, 200, "forwarded"]
    assert outcomes["POST /v1/completions"] == [401, 200, "forwarded"]
    assert report["routes"] == 25 and report["problems"] == []


def test_the_probe_catches_a_front_that_forwards_everything(tmp_path, front):
    """The check can fail: pointed straight at the stand-in (no front), /invocations answers without a key."""
    engine = front[0]
    rc, report = _probe(engine, engine)
    assert rc == 1
    assert any(p.startswith("/invocations reached the engine without the key") for p in report["problems"])


def test_ipv6_loopback_listen_passes_nginx_t(tmp_path):
    path = tmp_path / "nginx.conf"
    path.write_text(_conf(tmp_path, nginx_listen_address="::1", nginx_listen_port=_free_port()))
    done = subprocess.run([NGINX, "-t", "-q", "-c", str(path), "-p", str(tmp_path)], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr
