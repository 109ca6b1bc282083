# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Health gate for one vLLM unit (installed by the gpufleet.vllm.vllm role). Standard library only.

    vllm_health_gate.py --unit-file /etc/systemd/system/vllm-a.service --env-file /etc/vllm/vllm.env ...

The URL and the served model name come from the unit's X-GpufleetVllm* keys, the API key from the
0600 environment file (so it never appears in a command line). Steps, within --timeout seconds:

1. poll GET /health until 200, watching the unit: a failed unit or a restart (crash loop) ends
   the wait at once;
2. GET /v1/models must list the served model name;
3. POST /v1/completions must return a completion;
4. --warmup more completions.

A headless member of a multi-host group (X-GpufleetVllmHeadless=yes) has no HTTP endpoint: its unit
must be active with its engine processes started (holding GPU memory where nvidia-smi exists) and stay
so for --settle seconds; the head's completion proves the group.

Success: one line on stdout, exit 0. Failure: the reason and the unit's last --journal-lines
journal lines on stdout, exit 1.
"""

from __future__ import absolute_import, annotations, division, print_function

import argparse
import json
import os
import subprocess
import sys
import time

from urllib.error import HTTPError, URLError
from urllib.request import Request, urlopen


class GateError(Exception):
    pass


def unit_keys(path):
    keys = {}
    with open(path) as handle:
        for line in handle:
            if line.startswith("X-GpufleetVllm") and "=" in line:
                key, value = line.rstrip("\n").split("=", 1)
                keys[key] = value
    return keys


def read_unit(path):
    keys = unit_keys(path)
    for key in ("X-GpufleetVllmURL", "X-GpufleetVllmServedModelName"):
        if key not in keys:
            raise GateError("%s has no %s= line: it was not rendered by the vllm role" % (path, key))
    return keys["X-GpufleetVllmURL"], keys["X-GpufleetVllmServedModelName"]


def read_api_key(path):
    if not path or not os.path.exists(path):
        return None
    with open(path) as handle:
        for line in handle:
            line = line.strip()
            if line.startswith("VLLM_API_KEY="):
                value = line.split("=", 1)[1]
                if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                    value = value[1:-1]
                return value or None
    return None


def unit_state(unit):
    proc = subprocess.run(
        ["systemctl", "show", unit, "--property=ActiveState,SubState,NRestarts,Result"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False,
    )
    state = {}
    for line in proc.stdout.splitlines():
        if "=" in line:
            key, value = line.split("=", 1)
            state[key] = value
    return state


def journal_tail(unit, lines):
    proc = subprocess.run(
        ["journalctl", "--unit", unit, "--lines", str(lines), "--no-pager", "--output", "short-iso"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False,
    )
    return proc.stdout.rstrip() or "(the journal holds no lines for %s)" % unit


def request(url, api_key, timeout, body=None):
    headers = {"Accept": "application/json"}
    data = None
    if body is not None:
        data = json.dumps(body).encode("utf-8")
        headers["Content-Type"] = "application/json"
    if api_key:
        headers["Authorization"] = "Bearer " + api_key
    req = Request(url, data=data, headers=headers, method="POST" if data is not None else "GET")
    try:
        with urlopen(req, timeout=timeout) as resp:  # nosec - local service URL from our own unit
            return resp.status, resp.read().decode("utf-8", "replace")
    except HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")


def wait_healthy(unit, base, opts):
    start = time.monotonic()
    deadline = start + opts.timeout
    first = unit_state(unit)
    restarts = int(first.get("NRestarts", "0") or 0)
    last = "no answer yet"
    while True:
        state = unit_state(unit)
        if state.get("ActiveState") == "failed":
            raise GateError("%s failed while loading (result: %s) before /health answered 200 (last: %s)"
                            % (unit, state.get("Result", "?"), last))
        if state.get("ActiveState") in ("inactive", "deactivating") and time.monotonic() - start > 2:
            raise GateError("%s is %s: it is not running (last /health: %s)" % (unit, state.get("ActiveState"), last))
        now_restarts = int(state.get("NRestarts", "0") or 0)
        if now_restarts > restarts:
            raise GateError("%s restarted %d time(s) during the health gate (crash loop?); last /health: %s"
                            % (unit, now_restarts - restarts, last))
        try:
            status, text = request(base + "/health", None, min(opts.request_timeout, 30))
            if status == 200:
                return time.monotonic() - start
            last = "HTTP %d %s" % (status, text.strip()[:200])
        except (URLError, OSError) as exc:
            last = "no answer (%s)" % getattr(exc, "reason", exc)
        if time.monotonic() + opts.interval > deadline:
            raise GateError(
                "%s: /health did not answer 200 within %d s (last: %s). A model still loading needs a larger "
                "vllm_health_timeout; an HTTP 500 means the engine is dead." % (unit, opts.timeout, last))
        time.sleep(opts.interval)


def unit_pids(unit):
    """The PIDs in the unit's cgroup (cgroup v2 or the v1 systemd hierarchy)."""
    proc = subprocess.run(["systemctl", "show", unit, "--property=ControlGroup", "--value"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
    group = proc.stdout.strip()
    for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/systemd", "/sys/fs/cgroup/unified"):
        path = root + group + "/cgroup.procs"
        if group and os.path.exists(path):
            with open(path) as handle:
                return [int(line) for line in handle if line.strip()]
    return []


def gpu_mib_of(pids):
    """GPU memory (MiB) the given processes hold, from nvidia-smi; None without nvidia-smi."""
    try:
        proc = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
    except OSError:
        return None
    used = 0
    for line in proc.stdout.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 2 and fields[0].isdigit() and int(fields[0]) in pids and fields[1].isdigit():
            used += int(fields[1])
    return used


def check_headless(opts):
    """A headless member of a multi-host group serves no HTTP: its unit must run and stay running, with its
    engine processes started (and holding GPU memory where there is a GPU). A member started before the
    head's master port is up exits and is restarted by systemd until the group forms: restarts only reset
    the steady time here; a failed unit (start limit hit) or the timeout fails. The head's completion,
    which passes through every pipeline stage, is what proves the group."""
    unit = os.path.basename(opts.unit_file)
    start = time.monotonic()
    first_restarts = restarts = int(unit_state(unit).get("NRestarts", "0") or 0)
    steady_since = None
    while True:
        state = unit_state(unit)
        if state.get("ActiveState") == "failed" or (state.get("ActiveState") == "inactive" and time.monotonic() - start > 2):
            raise GateError("%s is %s (result: %s): the headless member is not running" % (unit, state.get("ActiveState"), state.get("Result", "?")))
        now_restarts = int(state.get("NRestarts", "0") or 0)
        pids = unit_pids(unit) if state.get("ActiveState") == "active" else []
        gpu = gpu_mib_of(pids)
        ready = now_restarts == restarts and len(pids) >= 2 and (gpu is None or gpu > 0)  # launcher + engine
        restarts = now_restarts
        steady_since = (steady_since or time.monotonic()) if ready else None
        if steady_since and time.monotonic() - steady_since >= opts.settle:
            return ("%s healthy (headless): active with %d process(es)%s, steady for %d s%s"
                    % (unit, len(pids), "" if gpu is None else ", %d MiB of GPU memory" % gpu, opts.settle,
                       (", after %d restart(s) while the group formed" % (restarts - first_restarts)) if restarts > first_restarts else ""))
        if time.monotonic() + opts.interval > start + opts.timeout:
            raise GateError("%s: the headless member did not run steadily within %d s (%d process(es)%s, %d restart(s))"
                            % (unit, opts.timeout, len(pids), "" if gpu is None else ", %d MiB of GPU memory" % gpu,
                               restarts - first_restarts))
        time.sleep(opts.interval)


def check(opts):
    unit = os.path.basename(opts.unit_file)
    if unit_keys(opts.unit_file).get("X-GpufleetVllmHeadless") == "yes":
        return check_headless(opts)
    base, served = read_unit(opts.unit_file)
    api_key = read_api_key(opts.env_file)
    waited = wait_healthy(unit, base, opts)
    status, text = request(base + "/v1/models", api_key, opts.request_timeout)
    if status != 200:
        raise GateError("%s: GET /v1/models answered HTTP %d: %s" % (unit, status, text.strip()[:300]))
    try:
        names = [m.get("id") for m in json.loads(text).get("data", [])]
    except (ValueError, AttributeError):
        raise GateError("%s: GET /v1/models did not return a model list: %s" % (unit, text.strip()[:300]))
    if served not in names:
        raise GateError("%s: /v1/models lists %s, not the served model name %r (--served-model-name)"
                        % (unit, names, served))
    body = {"model": served, "prompt": opts.prompt, "max_tokens": opts.max_tokens, "temperature": 0}
    timings = []
    for number in range(1 + opts.warmup):
        began = time.monotonic()
        try:
            status, text = request(base + "/v1/completions", api_key, opts.request_timeout, body)
        except (URLError, OSError) as exc:
            raise GateError("%s: POST /v1/completions got no answer within %d s (%s)"
                            % (unit, opts.request_timeout, getattr(exc, "reason", exc)))
        if status != 200:
            raise GateError("%s: POST /v1/completions answered HTTP %d: %s" % (unit, status, text.strip()[:300]))
        try:
            choices = json.loads(text)["choices"]
            completed = bool(choices) and isinstance(choices[0].get("text"), str)
        except (ValueError, KeyError, TypeError, AttributeError):
            completed = False
        if not completed:
            raise GateError("%s: POST /v1/completions returned no completion text: %s" % (unit, text.strip()[:300]))
        timings.append(time.monotonic() - began)
        if number == 0:
            sample = choices[0]["text"].strip()[:40]
    return ("%s healthy: /health 200 after %.1f s, /v1/models lists %r, completion %r in %.2f s, %d warm-up request(s)%s"
            % (unit, waited, served, sample, timings[0], opts.warmup,
               (" (%.2f s max)" % max(timings[1:])) if opts.warmup else ""))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unit-file", required=True)
    parser.add_argument("--env-file", default="")
    parser.add_argument("--timeout", type=int, default=1800)
    parser.add_argument("--interval", type=float, default=5)
    parser.add_argument("--request-timeout", type=int, default=300)
    parser.add_argument("--prompt", default="Say OK.")
    parser.add_argument("--max-tokens", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--journal-lines", type=int, default=40)
    parser.add_argument("--settle", type=int, default=10, help="headless members: seconds the engine must stay up")
    opts = parser.parse_args()
    unit = os.path.basename(opts.unit_file)
    try:
        print(check(opts))
    except GateError as exc:
        print("HEALTH GATE FAILED: %s\n--- last %d journal lines of %s ---\n%s"
              % (exc, opts.journal_lines, unit, journal_tail(unit, opts.journal_lines)))
        sys.exit(1)


if __name__ == "__main__":
    main()
