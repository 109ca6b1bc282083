# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""TEST DOUBLE standing in for a vLLM instance behind nginx (Molecule scenario `nginx`). Not vLLM.

GET  /v1/models         -> JSON: which instance answered, the HTTP version and Connection header
                           nginx sent, and how many requests this TCP connection has carried
                           (more than one proves upstream keepalive).
POST /v1/completions    -> with {"stream": true}: server-sent events ("events" of them, default 5),
                           one every "interval" seconds (default --interval); a stream that a
                           proxy buffers arrives all at once at the end.
GET  /openapi.json      -> a route table shaped like vLLM's (ROUTES: its /v1 API routes beside routes
                           it leaves without a key, /invocations, /tokenize, /pause ...).
With --api-key, every path that starts with /v1 needs `Authorization: Bearer <key>` (401 otherwise),
exactly vLLM's rule (AuthenticationMiddleware in vllm/entrypoints/openai/server_utils.py: the key is
checked only when the path starts with /v1); every other path answers without it, as vLLM's do.
Standard library only.
"""
from __future__ import annotations

import argparse
import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# Routes of vLLM's server (a subset, methods as vLLM registers them), the unprotected ones included.
ROUTES = {
    "/v1/models": ["get"], "/v1/completions": ["post"], "/v1/chat/completions": ["post"],
    "/v1/embeddings": ["post"], "/v1/load_lora_adapter": ["post"], "/v1/responses/{response_id}": ["get"],
    "/health": ["get"], "/version": ["get"], "/invocations": ["post"], "/tokenize": ["post"],
    "/detokenize": ["post"], "/pause": ["post"], "/resume": ["post"], "/abort_requests": ["post"],
    "/update_weights": ["post"], "/pooling": ["post"], "/classify": ["post"], "/score": ["post"],
    "/rerank": ["post"], "/sleep": ["post"], "/reset_prefix_cache": ["post"],
}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep connections open, like uvicorn
    name = "?"
    interval = 0.5
    events = 5
    api_key = ""

    def setup(self):
        super().setup()
        self.served_on_connection = 0

    def log_message(self, fmt, *args):
        pass

    def _json(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _refused(self):
        """vLLM's rule: a key is wanted on /v1 paths only."""
        wanted = self.api_key and self.path.startswith("/v1")
        if wanted and self.headers.get("Authorization") != "Bearer " + self.api_key:
            self._json(401, {"error": "Unauthorized"})
            return True
        return False

    def do_GET(self):  # noqa: N802
        self.served_on_connection += 1
        if self._refused():
            return
        path = self.path.split("?")[0]
        if path == "/openapi.json":
            self._json(200, {"openapi": "3.1.0", "paths": {p: {m: {} for m in ms} for p, ms in ROUTES.items()}})
        elif path in ("/v1/models", "/health"):
            self._json(200, {
                "instance": self.name,
                "request_version": self.request_version,
                "connection_header": self.headers.get("Connection"),
                "requests_on_connection": self.served_on_connection,
            })
        else:
            self._json(404, {"error": "not found"})

    def do_POST(self):  # noqa: N802
        self.served_on_connection += 1
        # Read the body first: a keepalive connection must not keep it for the next request.
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        if self._refused():
            return
        if not body.get("stream"):
            self._json(200, {"instance": self.name, "choices": [{"text": " ok"}]})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        interval = float(body.get("interval", self.interval))
        for number in range(int(body.get("events", self.events))):
            event = "data: %s\n\n" % json.dumps({"instance": self.name, "n": number, "t": time.time()})
            self._chunk(event.encode())
            time.sleep(interval)
        self._chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--interval", type=float, default=0.5)
    parser.add_argument("--api-key", default="")
    args = parser.parse_args()
    handler = type("H", (Handler,), {"name": args.name, "interval": args.interval, "api_key": args.api_key})
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
