# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vllm role's health gate (roles/vllm/files/vllm_health_gate.py) run as the role runs it, against
loopback servers standing in for an engine and for the hostile things around one (issue 27 MEDIUM + LOW):
a redirect to another origin, a proxy in the environment, a stranger holding the unit's port while the
engine loads, an answer that trickles one byte at a time, a truncated or garbage answer.

Stand-ins, named as such: the HTTP servers below (threads of this test, not vLLM) and a `systemctl` /
`journalctl` pair on the gate's PATH that report the unit's state from a file this test writes (MainPID is
this test's own process, which holds the stand-in engine's socket, or an unrelated `sleep` child).
Every figure the tests compare with is set here (ports, keys, times), none is computed by the gate."""
import http.server
import json
import os
import pathlib
import socket
import subprocess
import sys
import threading
import time

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
GATE = ROOT / "roles" / "vllm" / "files" / "vllm_health_gate.py"
KEY = "sk-gate-test-1"
SERVED = "tiny"


class Recorder(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, handler, mode="normal", target=None):
        super().__init__(("127.0.0.1", 0), handler)
        self.mode, self.target, self.seen = mode, target, []


class Handler(http.server.BaseHTTPRequestHandler):
    """STAND-IN engine: /health, /v1/models, /v1/completions as vLLM answers them, or one hostile behaviour."""

    def log_message(self, *args):
        pass

    def _json(self, code, obj, extra=None):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _hostile(self, mode):
        if mode == "redirect":
            self._json(302, {}, {"Location": self.server.target + self.path})
        elif mode == "trickle":
            self.send_response(200)
            self.send_header("Content-Length", "100000")
            self.end_headers()
            for _byte in range(120):  # one byte each 0.25 s: every read gets something before a per-read timeout
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(0.25)
        elif mode == "truncated":
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n{\"choi")
        elif mode == "garbage":
            self.wfile.write(b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n")
        elif mode == "not_json":
            self._raw(200, b"\xff\xfe<html>not json")

    def _raw(self, code, data):
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _answer(self):
        self.server.seen.append((self.command, self.path, self.headers.get("Authorization")))
        if self.path == "/health":
            return self._raw(200, b"")
        if self.server.mode != "normal" and not (self.server.mode == "redirect" and self.path != "/v1/models"):
            return self._hostile(self.server.mode)
        if self.headers.get("Authorization") != "Bearer " + KEY:
            return self._json(401, {"error": "Unauthorized"})
        if self.path == "/v1/models":
            return self._json(200, {"object": "list", "data": [{"id": SERVED, "object": "model"}]})
        return self._json(200, {"choices": [{"index": 0, "text": " OK"}]})

    def do_GET(self):
        self._answer()

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self._answer()


def serve(mode="normal", target=None):
    server = Recorder(Handler, mode, target)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def stranger():
    """An unrelated process (it holds no socket): the MainPID of a unit that does not own the port."""
    proc = subprocess.Popen(["sleep", "120"])
    yield proc.pid
    proc.kill()
    proc.wait()


def run_gate(tmp_path, port, main_pid, extra_env=None, timeout=60, request_timeout=5, warmup=1):
    unit = tmp_path / "vllm-gate.service"
    unit.write_text("[Unit]\nX-GpufleetVllmServedModelName=%s\nX-GpufleetVllmURL=http://127.0.0.1:%d\n" % (SERVED, port))
    env_file = tmp_path / "vllm.env"
    env_file.write_text("VLLM_API_KEY=%s\n" % KEY)
    state = tmp_path / "state"
    state.write_text("ActiveState=active\nSubState=running\nNRestarts=0\nResult=success\nMainPID=%d\n" % main_pid)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "systemctl").write_text("#!/bin/sh\n# STAND-IN systemctl: the unit's state from the test's file\ncat %s\n" % state)
    (bin_dir / "journalctl").write_text("#!/bin/sh\necho '(stand-in journal)'\n")
    for name in ("systemctl", "journalctl"):
        (bin_dir / name).chmod(0o755)
    env = dict(os.environ, PATH="%s:%s" % (bin_dir, os.environ["PATH"]), **(extra_env or {}))
    proc = subprocess.run(
        [sys.executable, str(GATE), "--unit-file", str(unit), "--env-file", str(env_file), "--timeout", "10",
         "--interval", "0.2", "--request-timeout", str(request_timeout), "--warmup", str(warmup)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=timeout, check=False)
    return proc.returncode, proc.stdout


def test_a_healthy_engine_passes(tmp_path):
    engine = serve()
    code, out = run_gate(tmp_path, engine.server_address[1], os.getpid())
    assert code == 0, out
    assert "healthy: /health 200" in out and "completion 'OK'" in out
    assert ("POST", "/v1/completions", "Bearer " + KEY) in engine.seen


def test_no_key_to_a_stranger_holding_the_port(tmp_path, stranger):
    """Today's gate sent the key to whatever answered /health on the port (issue 27)."""
    squatter = serve()
    code, out = run_gate(tmp_path, squatter.server_address[1], stranger)
    assert code == 1, out
    assert "is held by PID %d" % os.getpid() in out and "MainPID %d" % stranger in out, out
    assert "Stop what holds the port, or give the instance another port" in out
    assert [auth for _m, _p, auth in squatter.seen if auth] == [], squatter.seen
    assert KEY not in out


def test_no_redirect_is_followed_with_the_key(tmp_path):
    elsewhere = serve()
    engine = serve("redirect", target="http://127.0.0.1:%d" % elsewhere.server_address[1])  # another origin
    code, out = run_gate(tmp_path, engine.server_address[1], os.getpid())
    assert code == 1, out
    assert "GET /v1/models answered HTTP 302" in out and "not followed" in out
    assert "http://127.0.0.1:%d/v1/models" % elsewhere.server_address[1] in out
    assert elsewhere.seen == []


def test_no_proxy_from_the_environment(tmp_path):
    """urllib sends every request through http_proxy unless no_proxy lists the host: the key went there."""
    proxy = serve()
    engine = serve()
    url = "http://127.0.0.1:%d" % proxy.server_address[1]
    code, out = run_gate(tmp_path, engine.server_address[1], os.getpid(),
                         extra_env={"http_proxy": url, "HTTP_PROXY": url, "no_proxy": "", "NO_PROXY": ""})
    assert code == 0, out
    assert proxy.seen == []


def test_a_trickling_answer_cannot_stretch_the_deadline(tmp_path):
    """One byte every 0.25 s resets a per-read timeout forever; the gate's request deadline holds."""
    engine = serve("trickle")
    began = time.monotonic()
    code, out = run_gate(tmp_path, engine.server_address[1], os.getpid(), request_timeout=3, timeout=40)
    took = time.monotonic() - began
    assert code == 1, out
    assert "no complete answer within 3 s" in out, out
    assert took < 15, took


@pytest.mark.parametrize("mode, says", [
    ("truncated", "IncompleteRead"),
    ("garbage", "BadStatusLine"),
    ("not_json", "did not answer JSON"),
])
def test_garbage_answers_are_findings_not_tracebacks(tmp_path, mode, says):
    engine = serve(mode)
    code, out = run_gate(tmp_path, engine.server_address[1], os.getpid())
    assert code == 1, out
    assert "HEALTH GATE FAILED" in out and says in out, out
    assert "Traceback" not in out


def test_a_unit_url_that_is_not_http_host_port_is_a_finding(tmp_path):
    unit = tmp_path / "vllm-x.service"
    unit.write_text("X-GpufleetVllmServedModelName=m\nX-GpufleetVllmURL=http://127.0.0.1:99999\n")
    proc = subprocess.run([sys.executable, str(GATE), "--unit-file", str(unit), "--timeout", "1"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False, timeout=30)
    assert proc.returncode == 1 and "is not http://HOST:PORT" in proc.stdout and "Traceback" not in proc.stdout


def test_the_gate_finds_the_listener_and_its_holder():
    """listening_sockets / socket_holders against a real socket of this process (inode from fstat)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("vllm_health_gate", str(GATE))
    gate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gate)
    for family, addr in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.bind((addr, 0))
        sock.listen(1)
        port, inode = sock.getsockname()[1], os.fstat(sock.fileno()).st_ino
        try:
            assert (addr, port, inode) in gate.listening_sockets()
            assert gate.socket_holders([inode]) == {os.getpid(): inode}
        finally:
            sock.close()
    assert gate.takes_connection("0.0.0.0", {"127.0.0.1"}) and gate.takes_connection("::", {"127.0.0.1"})
    assert not gate.takes_connection("10.0.0.5", {"127.0.0.1"}) and not gate.takes_connection("0.0.0.0", {"::1"})


def test_the_gate_task_has_an_ansible_timeout_above_the_gate_s_own_bound():
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    tasks = yaml.safe_load((ROOT / "roles" / "vllm" / "tasks" / "health_gate.yml").read_text())
    gate_task = next(t for t in tasks if "vllm_health_gate.py" in json.dumps(t))
    variables = {"vllm_health_timeout": 1800, "vllm_warmup_requests": 2, "vllm_health_request_timeout": 300}
    timeout = int(Templar(loader=DataLoader(), variables=variables).template(trust_as_template(gate_task["timeout"])))
    # The gate's documented bound with the role's defaults: 1800 + (2 + 2) x 300 = 3000 s.
    assert 3000 < timeout <= 3600, timeout
