# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Check the nginx front against the engine's own route table (issue 27 HIGH 1). Standard library only.

Usage: front_allowlist_probe.py ENGINE_URL FRONT_URL ALLOWED_JSON
       (the API key in the environment variable GPUFLEET_PROBE_KEY, never in argv; an engine that
       answers /v1/models without a key is probed with a made-up key as the "with" request).

Reads ENGINE_URL/openapi.json (the route table of the server that runs, read directly on its loopback
port), adds the routes FastAPI leaves out of it (/metrics, /openapi.json, /docs, /redoc), and sends every
method of every route through FRONT_URL twice, without and with the key, plus spellings of one unprotected
route that try to get past nginx's matching (/v1/../X, %2e%2e, //X). Expected:
- a path in ALLOWED_JSON: 401 without the key (vLLM's own refusal: it was forwarded and checked), and with
  the key an answer from the engine (not 401, not the front's denial); on an engine without a key, an
  answer from the engine both times;
- every other path: the front's own 404 (header X-Gpufleet-Front: denied) both times: it never reached
  the engine.
Prints JSON {routes, checked, allowed_served, problems, outcomes}; exits 1 when there is a problem.
"""
from __future__ import annotations

import json
import os
import re
import sys
import urllib.error
import urllib.request

EXTRA_ROUTES = {"/metrics": ["get"], "/openapi.json": ["get"], "/docs": ["get"], "/redoc": ["get"]}
TIMEOUT = 30


def call(url, method, key):
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    data = b"{}" if method in ("POST", "PUT", "PATCH") else None
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            response.read(65536)
            return response.status, response.headers.get("X-Gpufleet-Front")
    except urllib.error.HTTPError as error:
        error.read(65536)
        return error.code, error.headers.get("X-Gpufleet-Front")


def route_table(engine):
    with urllib.request.urlopen(engine.rstrip("/") + "/openapi.json", timeout=TIMEOUT) as response:
        table = json.loads(response.read().decode("utf-8"))
    routes = {path: sorted(m for m in spec if m in ("get", "post", "put", "delete", "patch"))
              for path, spec in table["paths"].items()}
    for path, methods in EXTRA_ROUTES.items():
        routes.setdefault(path, methods)
    return routes


def judge(path, allowed, without, with_key, keyed):
    """The problem with these two answers, or None."""
    if allowed and not keyed:
        if without[1] == "denied" or with_key[1] == "denied":
            return "%s is in nginx_api_paths but the front denied it: %s %s" % (path, without, with_key)
        return None
    if allowed:
        if without[0] != 401:
            return "%s answered %s without the key (expected vLLM's 401)" % (path, without[0])
        if with_key[1] == "denied" or with_key[0] == 401:
            return "%s with the key: %s %s (expected the engine's answer)" % (path, with_key[0], with_key[1])
        return None
    for label, answer in (("without", without), ("with", with_key)):
        if answer != (404, "denied"):
            return "%s reached the engine %s the key: %s (expected the front's 404 denial)" % (path, label, answer[0])
    return None


def spellings(routes):
    """Other spellings of one unprotected route (outside /v1) that must be denied too."""
    candidates = sorted(p for p in routes if not p.startswith("/v1") and "{" not in p and p != "/")
    target = "/invocations" if "/invocations" in candidates else next(iter(candidates), None)
    if target is None:
        return []
    return [("/v1/.." + target, "post"), ("/v1/%2e%2e" + target, "post"), ("/" + target, "post"),
            ("/v1/models/../.." + target, "post")]


def main():
    engine, front, allowed = sys.argv[1], sys.argv[2].rstrip("/"), set(json.loads(sys.argv[3]))
    key = os.environ.get("GPUFLEET_PROBE_KEY", "")
    keyed = call(engine.rstrip("/") + "/v1/models", "GET", "")[0] == 401
    if keyed and not key:
        sys.exit("the engine wants an API key (401 on /v1/models) but GPUFLEET_PROBE_KEY is empty")
    key = key or "gpufleet-probe-made-up-key"
    routes = route_table(engine)
    problems, outcomes = [], {}
    checks = [(p, m) for p in sorted(routes) for m in routes[p]] + spellings(routes)
    for path, method in checks:
        url = front + re.sub(r"\{[^}/]+\}", "gpufleet-probe", path)
        without, with_key = call(url, method.upper(), ""), call(url, method.upper(), key)
        is_allowed = path in allowed
        outcomes["%s %s" % (method.upper(), path)] = [without[0], with_key[0], "forwarded" if is_allowed else "denied"]
        problem = judge(path, is_allowed, without, with_key, keyed)
        if problem:
            problems.append(problem)
    served = sorted(p for p in allowed if p in routes)
    if not served or "/v1/models" not in served:
        problems.append("the engine's table has none of nginx_api_paths' /v1/models: %s" % sorted(allowed))
    print(json.dumps({"engine_wants_key": keyed, "routes": len(routes), "checked": len(checks), "allowed_served": served,
                      "allowed_not_in_table": sorted(allowed - set(routes)), "problems": problems,
                      "outcomes": outcomes}))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
