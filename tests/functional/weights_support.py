# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers for the model_weights functional tests: run the module, serve a folder over HTTP."""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "fakes"))

from fake_hf_hub import FakeHub, send_body  # noqa: E402  (re-exported for the tests)

__all__ = ["FakeHub", "StaticServer", "collections_path", "run_module", "start_module", "sha256_file", "tree",
           "write_files", "ROOT"]

_COLL = {}


def collections_path():
    """A folder holding ansible_collections/gpufleet/vllm -> this checkout (for imports and ansible)."""
    if "path" not in _COLL:
        base = tempfile.mkdtemp(prefix="gpufleet-coll-")
        os.makedirs(os.path.join(base, "ansible_collections", "gpufleet"))
        os.symlink(ROOT, os.path.join(base, "ansible_collections", "gpufleet", "vllm"))
        _COLL["path"] = base
        atexit.register(shutil.rmtree, base, True)
    return _COLL["path"]


def _module_cmd(args, check_mode=False, diff=False, workdir=None):
    payload = dict(args, _ansible_check_mode=check_mode, _ansible_diff=diff)
    fd, path = tempfile.mkstemp(prefix="mw-args-", suffix=".json", dir=workdir)
    with os.fdopen(fd, "w") as handle:
        json.dump({"ANSIBLE_MODULE_ARGS": payload}, handle)
    return [sys.executable, "-m", "ansible_collections.gpufleet.vllm.plugins.modules.model_weights", path], path


def _env(extra=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = collections_path()
    env.pop("HF_TOKEN", None)
    env.update(extra or {})
    return env


def run_module(args, check_mode=False, diff=False, env=None, timeout=300):
    """Run the module the way Ansible does on a target (args file); returns (result dict, raw output)."""
    cmd, path = _module_cmd(args, check_mode, diff)
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(env), timeout=timeout,
                              check=False)
    finally:
        os.unlink(path)
    out = proc.stdout.decode()
    try:
        result = json.loads(out[out.index("{"):])
    except ValueError:
        raise AssertionError("module printed no JSON (rc %d): %s %s" % (proc.returncode, out, proc.stderr.decode()))
    return result, out + proc.stderr.decode()


def start_module(args, env=None):
    """Start the module in the background (for SIGKILL tests); returns the Popen."""
    cmd, _path = _module_cmd(args)
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(env))


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def tree(dest):
    """relative path -> sha256 of every file outside the state folder."""
    out = {}
    for base, dirs, files in os.walk(dest):
        dirs[:] = [d for d in dirs if d != ".gpufleet-weights"]
        for name in files:
            full = os.path.join(base, name)
            out[os.path.relpath(full, dest)] = sha256_file(full)
    return out


def write_files(root, files):
    """Write {relpath: bytes} under root and return the sha256sum manifest text."""
    lines = []
    for rel, data in sorted(files.items()):
        full = os.path.join(root, rel)
        if not os.path.isdir(os.path.dirname(full)):
            os.makedirs(os.path.dirname(full))
        with open(full, "wb") as handle:
            handle.write(data)
        lines.append("%s  %s" % (hashlib.sha256(data).hexdigest(), rel))
    return "\n".join(lines) + "\n"


class StaticServer(object):
    """A plain file server for tests: Range support, optional rate limit, bytes counted per file,
    optional replacement bodies (a server whose bytes disagree with its manifest)."""

    def __init__(self, root, rate=None):
        self.root = root
        self.rate = rate
        self.sent = {}
        self.requests = []
        self.auth = []              # (path, Authorization header or None) per request: token scope tests
        self.override = {}
        self.cut = {}               # path -> bytes after which the server ends the body (and the connection) cleanly
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt, *args):
                pass

            def do_HEAD(self):
                self.do_GET()

            def do_GET(self):
                rel = unquote(urlsplit(self.path).path).lstrip("/")
                with server._lock:
                    server.requests.append((self.command, rel, self.headers.get("Range")))
                    server.auth.append((rel, self.headers.get("Authorization")))
                full = os.path.join(server.root, rel)
                if rel in server.override:
                    data = server.override[rel]
                elif os.path.isfile(full):
                    with open(full, "rb") as handle:
                        data = handle.read()
                else:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                start = 0
                m = re.match(r"bytes=(\d+)-$", (self.headers.get("Range") or "").strip())
                if m:
                    start = int(m.group(1))
                body = data[start:]
                self.send_response(206 if start else 200)
                if start:
                    self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command == "GET" and rel in server.cut:
                    body = body[:max(0, server.cut[rel] - start)]
                    self.close_connection = True  # Content-Length promised more: the client sees a clean EOF
                if self.command == "GET":
                    send_body(self.wfile, body, server.rate, lambda n: server._count(rel, n))

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever)
        self._thread.daemon = True

    def _count(self, rel, n):
        with self._lock:
            self.sent[rel] = self.sent.get(rel, 0) + n

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()


NGINX_SNAPSHOT_CONF = """
daemon off;
master_process off;
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log;
events {{ worker_connections 64; }}
http {{
  access_log {prefix}/access.log;
  sendfile on;
  client_body_temp_path {prefix}/tmp; proxy_temp_path {prefix}/tmp; fastcgi_temp_path {prefix}/tmp;
  uwsgi_temp_path {prefix}/tmp; scgi_temp_path {prefix}/tmp;
  server {{
    listen 127.0.0.1:{port};
{locations}
  }}
}}
"""


class Nginx(object):
    """nginx from apt with a private prefix; ``locations`` is the server-block body (docs/fleet-weights.md)."""

    def __init__(self, prefix, locations):
        import socket
        import time
        binary = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")
        if not binary:
            raise RuntimeError("nginx is not installed (scripts/requirements-apt.txt)")
        os.makedirs(os.path.join(prefix, "tmp"), exist_ok=True)
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        sock.close()
        conf = os.path.join(prefix, "nginx.conf")
        with open(conf, "w") as handle:
            handle.write(NGINX_SNAPSHOT_CONF.format(prefix=prefix, port=self.port, locations=locations))
        self.prefix = prefix
        self.proc = subprocess.Popen([binary, "-c", conf, "-p", prefix], stderr=subprocess.PIPE)
        for _i in range(100):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        else:
            raise RuntimeError("nginx did not start: %s" % self.proc.stderr.read().decode())
        self.url = "http://127.0.0.1:%d" % self.port

    def access_log(self):
        with open(os.path.join(self.prefix, "access.log")) as handle:
            return handle.read()

    def stop(self):
        self.proc.terminate()
        self.proc.wait()
