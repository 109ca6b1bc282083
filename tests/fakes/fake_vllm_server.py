# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""TEST DOUBLE: a stand-in for vLLM's OpenAI-compatible HTTP server. Not vLLM.

It serves just enough of vLLM's API for the vllm role's health gate to be tested on a host
without a GPU: ``GET /health``, ``GET /v1/models``, ``POST /v1/completions`` (and
``/v1/chat/completions``). Standard library only, Python 3.8+.

It can pose as the ``vllm`` entry point (``fake_vllm_server.py serve MODEL --port N ...``):
the Molecule scenario ``vllm_lifecycle`` packs it into a small wheel that stands in for the
vLLM distribution, so the role's systemd unit runs it exactly like the real server.

Behaviour is chosen with environment variables (the role's ``vllm_environment``):

``FAKE_VLLM_MODE``
    ``normal`` (default); ``slow`` (listen only after ``FAKE_VLLM_STARTUP_DELAY`` seconds,
    default 30, like a large model loading); ``error500`` (``/health`` answers 500, like an
    engine that died after start); ``wrong_model`` (``/v1/models`` lists another name than
    ``--served-model-name``).
``VLLM_API_KEY``
    as in vLLM: when set, every ``/v1`` request needs ``Authorization: Bearer <key>``
    (401 otherwise). The key is never printed.

The parser is strict (unknown flags exit 2 like vLLM's) so the role's argv validation can be
tested with it; ``make_arg_parser`` mirrors the shape of vLLM's own function.
"""

from __future__ import absolute_import, annotations, division, print_function

import argparse
import json
import os
import signal
import sys
import threading
import time

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODES = ("normal", "slow", "error500", "wrong_model")


def make_arg_parser(parser):
    """Add the ``vllm serve`` flags this test double understands to ``parser``."""
    parser.add_argument("model_tag", nargs="?", help="model directory or name")
    parser.add_argument("--model", dest="model_flag", default=None)
    parser.add_argument("--served-model-name", nargs="+", default=None)
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--max-model-len", default=None)
    parser.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    parser.add_argument("--pipeline-parallel-size", "-pp", type=int, default=1)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.92)
    parser.add_argument("--kv-cache-dtype", default="auto")
    parser.add_argument("--kv-cache-memory-bytes", type=int, default=None)  # vLLM 0.33 flag the planner renders
    parser.add_argument("--shutdown-timeout", type=int, default=0)
    parser.add_argument("--disable-log-requests", action="store_true")
    parser.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction, default=None)
    parser.add_argument("--generation-config", default="auto")
    return parser


def validate_parsed_serve_args(args):
    """Checks after parsing, like vLLM's function of the same name."""
    if args.port <= 0 or args.port > 65535:
        raise ValueError("--port must be between 1 and 65535, got %d" % args.port)
    if args.model_tag is None and args.model_flag is None:
        raise ValueError("give the model as the first argument after 'serve'")


class _State(object):
    def __init__(self, args, mode, api_key):
        self.model = args.model_tag or args.model_flag
        self.served = (args.served_model_name or [self.model])[0]
        self.mode = mode
        self.api_key = api_key
        self.requests = 0
        self.lock = threading.Lock()


def _log(message):
    sys.stderr.write("fake-vllm: %s\n" % message)
    sys.stderr.flush()


class _Handler(BaseHTTPRequestHandler):
    server_version = "fake-vllm/1"
    state = None  # set on the subclass per server

    def log_message(self, fmt, *args):  # access log without headers, like uvicorn's
        _log("%s %s" % (self.address_string(), fmt % args))

    def _send(self, status, body):
        data = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorized(self):
        key = self.state.api_key
        if not key:
            return True
        if self.headers.get("Authorization", "") == "Bearer " + key:
            return True
        self._send(401, {"error": "Unauthorized"})
        return False

    def do_GET(self):  # noqa: N802 (http.server naming)
        path = self.path.split("?", 1)[0]
        if path == "/health":
            if self.state.mode == "error500":
                self._send(500, {"error": "EngineDeadError: engine core died (fake-vllm error500 mode)"})
            else:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()
            return
        if path == "/v1/models":
            if not self._authorized():
                return
            name = self.state.served
            if self.state.mode == "wrong_model":
                name = "not-" + name
            self._send(200, {"object": "list", "data": [
                {"id": name, "object": "model", "owned_by": "vllm", "root": self.state.model}]})
            return
        self._send(404, {"error": "Not Found"})

    def do_POST(self):  # noqa: N802
        path = self.path.split("?", 1)[0]
        if path not in ("/v1/completions", "/v1/chat/completions"):
            self._send(404, {"error": "Not Found"})
            return
        if not self._authorized():
            return
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length).decode("utf-8") or "{}")
        except ValueError:
            self._send(400, {"error": "request body is not JSON"})
            return
        served = self.state.served if self.state.mode != "wrong_model" else "not-" + self.state.served
        if body.get("model") != served:
            self._send(404, {"object": "error", "type": "NotFoundError", "code": 404,
                             "message": "The model `%s` does not exist." % body.get("model")})
            return
        with self.state.lock:
            self.state.requests += 1
            number = self.state.requests
        max_tokens = int(body.get("max_tokens") or 16)
        text = " ok" * max(1, min(max_tokens, 8))
        usage = {"prompt_tokens": 3, "completion_tokens": max(1, min(max_tokens, 8))}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        if path == "/v1/completions":
            choice = {"index": 0, "text": text, "finish_reason": "length"}
            obj = "text_completion"
        else:
            choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}
            obj = "chat.completion"
        self._send(200, {"id": "cmpl-fake-%d" % number, "object": obj, "created": int(time.time()),
                         "model": served, "choices": [choice], "usage": usage})


def serve(args):
    mode = os.environ.get("FAKE_VLLM_MODE", "normal")
    if mode not in MODES:
        _log("unknown FAKE_VLLM_MODE=%r (choose one of %s)" % (mode, ", ".join(MODES)))
        return 2
    state = _State(args, mode, os.environ.get("VLLM_API_KEY") or None)
    _log("TEST DOUBLE, not vLLM: serving %r as %r on %s:%d (mode %s, API key %s)" % (
        state.model, state.served, args.host, args.port, mode, "required" if state.api_key else "not set"))
    stop = threading.Event()

    def _on_term(signum, frame):
        _log("received signal %d, draining for up to %d s" % (signum, args.shutdown_timeout))
        stop.set()

    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGINT, _on_term)
    if mode == "slow":
        delay = float(os.environ.get("FAKE_VLLM_STARTUP_DELAY", "30"))
        _log("slow mode: loading the model for %.0f s before listening" % delay)
        if stop.wait(delay):
            return 0
    handler = type("Handler", (_Handler,), {"state": state})
    server = ThreadingHTTPServer((args.host, args.port), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="http")
    thread.daemon = True
    thread.start()
    _log("Application startup complete.")
    stop.wait()
    server.shutdown()
    server.server_close()
    _log("shut down")
    return 0


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="vllm", description="TEST DOUBLE standing in for vLLM")
    parser.add_argument("--version", action="store_true")
    sub = parser.add_subparsers(dest="subparser")
    make_arg_parser(sub.add_parser("serve"))
    args = parser.parse_args(argv)
    if args.version:
        print(os.environ.get("FAKE_VLLM_VERSION", "0.0.0+fake"))
        return 0
    if args.subparser != "serve":
        parser.error("only 'serve' is implemented by this test double")
    try:
        validate_parsed_serve_args(args)
    except ValueError as exc:
        parser.error(str(exc))
    return serve(args)


if __name__ == "__main__":
    sys.exit(main())
