# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 15 High 1: the hub token goes only to the hub endpoint's host, never to an http mirror or
manifest host, never over plain http unless token_over_http, never across a redirect to another host.
Servers here are test stand-ins (the FAKE hub, a plain file server) that record the headers they get.
Each test fails on the round-1 code, which sent the token to every host and scheme it was asked to."""
from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from weights_support import FakeHub, StaticServer, collections_path, run_module, write_files

sys.path.insert(0, collections_path())  # the collection's own HttpClient, imported in-process

TOKEN = "hf_FAKEscopeToken0123456789abcdef"


@pytest.mark.parametrize("extra", [{}, {"token_over_http": True}])
def test_token_from_env_and_option_never_reach_an_http_mirror(tmp_path, extra):
    src = tmp_path / "src"
    src.mkdir()
    manifest = write_files(str(src), {"config.json": b"{}", "w.safetensors": b"x" * 5000})
    (src / ".gpufleet-weights").mkdir()
    (src / ".gpufleet-weights" / "SHA256SUMS").write_text(manifest)
    with StaticServer(str(src)) as server:
        result, out = run_module(dict(dest=str(tmp_path / "d"), source="http", url=server.url, token=TOKEN, **extra),
                                 env={"HF_TOKEN": TOKEN})
    assert result.get("changed") and result["file_count"] == 2, result
    assert server.auth and all(auth is None for _path, auth in server.auth), server.auth
    assert TOKEN not in out


def test_token_not_sent_to_a_plain_http_hub_unless_allowed():
    hub = FakeHub(lfs_threshold=4096, token=TOKEN)
    hub.add_commit("fake-org/Private", {"config.json": b"{}"}, private=True)
    hub.start()
    try:
        import tempfile
        dest = tempfile.mkdtemp(prefix="mw-scope-")
        result, out = run_module(dict(dest=dest + "/m", source="hf", repo_id="fake-org/Private",
                                      endpoint=hub.endpoint), env={"HF_TOKEN": TOKEN})
        assert result.get("failed") and "repository not found" in result["msg"], result
        assert "token_over_http" in out  # the warning says why and how
        assert hub.log and not any(e["auth_sent"] for e in hub.log), hub.log
    finally:
        hub.stop()


class _Hops(object):
    """Two stand-in hosts (127.0.0.1 and localhost): /start -> other host /bounce -> back to /final."""

    def __init__(self):
        self.seen = []
        hops = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt, *args):
                pass

            def do_GET(self):
                hops.seen.append((self.headers.get("Host"), self.path, self.headers.get("Authorization")))
                target = {"/start": "http://localhost:%d/bounce" % hops.port,
                          "/bounce": "http://127.0.0.1:%d/final" % hops.port}.get(self.path)
                if target:
                    self.send_response(302)
                    self.send_header("Location", target)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def test_token_dropped_for_the_rest_of_a_chain_that_left_the_hub_host():
    from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.fetch import HttpClient
    hops = _Hops()
    try:
        base = "http://127.0.0.1:%d" % hops.port
        client = HttpClient(token=TOKEN, token_url=base, token_over_http=True)
        assert client.request("GET", base + "/start").read() == b"ok"
        client.close()
    finally:
        hops.server.shutdown()
        hops.server.server_close()
    auth = dict((path, value) for _host, path, value in hops.seen)
    assert auth == {"/start": "Bearer " + TOKEN, "/bounce": None, "/final": None}


@pytest.mark.parametrize("url, sent", [
    ("https://hub.example/api", True), ("https://HUB.example/x", True), ("http://hub.example/api", False),
    ("https://cdn.example/x", False), ("https://hub.example:8443/x", False), ("https://u:p@hub.example/x", True),
])
def test_token_allowed_table(url, sent):
    from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.fetch import HttpClient
    assert HttpClient(token="t", token_url="https://hub.example").token_allowed(url) is sent
