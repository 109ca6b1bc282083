# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""TEST DOUBLE standing in for a vLLM instance behind nginx (Molecule scenario `nginx`). Not vLLM.

GET  /whoami            -> JSON: which instance answered, the HTTP version and Connection header
                           nginx sent, and how many requests this TCP connection has carried
                           (more than one proves upstream keepalive).
POST /v1/completions    -> with {"stream": true}: server-sent events ("events" of them, default 5),
                           one every "interval" seconds (default --interval); a stream that a
                           proxy buffers arrives all at once at the end.
Standard library only.
"""
from __future__ import annotations

import argparse
import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep connections open, like uvicorn
    name = "?"
    interval = 0.5
    events = 5

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

    def do_GET(self):  # noqa: N802
        self.served_on_connection += 1
        if self.path.split("?")[0] in ("/whoami", "/health"):
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
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
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
    args = parser.parse_args()
    handler = type("H", (Handler,), {"name": args.name, "interval": args.interval})
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
