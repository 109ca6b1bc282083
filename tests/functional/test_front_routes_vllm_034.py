# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""issue 45: the front door against vLLM 0.34.0's OWN route table with sleep mode on. The nginx role's rendered
config in front of the stand-in upstream of test_nginx_front.py, its table replaced by the one 0.34.0's build_app
registers for `vllm serve --enable-sleep-mode` (tests/fixtures/vllm-0.34.0/routes-sleep-mode.json; regenerated and
compared by test_vllm_034_real_parser.py), probed by the same front_allowlist_probe.py: /checkpoint/prepare,
/checkpoint/restore and /checkpoint/status (no API key in vLLM: GUARDED_PREFIX is /v1, /v2, /inference, /cohere)
must be the front's own 404, never the engine."""
import json
import os
import sys

import pytest

from test_nginx_front import FILES, NGINX, _probe, serving_front

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TABLE = os.path.join(ROOT, "tests", "fixtures", "vllm-0.34.0", "routes-sleep-mode.json")
# The stand-in, its route table swapped for vLLM 0.34.0's (the module reads ROUTES when /openapi.json is asked).
STANDIN = ("import json, sys; sys.path.insert(0, sys.argv[1]); import standin_upstream as s; "
           "s.ROUTES = json.load(open(sys.argv[2]))['routes']; sys.argv = [sys.argv[0]] + sys.argv[3:]; s.main()")

pytestmark = pytest.mark.skipif(not os.path.exists(NGINX), reason="nginx is not installed")


@pytest.fixture()
def front_034(tmp_path):
    yield from serving_front(tmp_path, [sys.executable, "-c", STANDIN, str(FILES), TABLE])


def test_checkpoint_routes_of_034_never_pass_the_front(front_034):
    with open(TABLE) as fh:
        table = json.load(fh)
    assert table["version"] == "0.34.0" and table["enable_sleep_mode"] is True
    rc, report = _probe(*front_034)
    assert rc == 0, report
    outcomes = report["outcomes"]
    for route in ("POST /checkpoint/prepare", "POST /checkpoint/restore", "GET /checkpoint/status",
                  "POST /inference/v1/generate", "POST /scale_elastic_ep", "GET /kv_event_sources"):
        assert outcomes[route] == [404, 404, "denied"], route
    assert outcomes["POST /v1/completions"] == [401, 200, "forwarded"]
    # every route of 0.34.0's table was sent through the front (plus the four FastAPI leaves out of openapi)
    assert report["routes"] == len(set(table["routes"]) | {"/metrics", "/openapi.json", "/docs", "/redoc"})
    assert report["problems"] == []


def test_the_probe_sees_the_checkpoint_routes_without_a_front(front_034):
    """The check can fail: straight at the stand-in, 0.34.0's /checkpoint/prepare answers without the key."""
    engine = front_034[0]
    rc, report = _probe(engine, engine)
    assert rc == 1
    assert any(p.startswith("/checkpoint/prepare reached the engine without the key") for p in report["problems"])
