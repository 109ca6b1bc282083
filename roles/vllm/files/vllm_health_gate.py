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

Safety of the API key (issue 27). The key goes only to the unit's own engine:
- no proxy (http_proxy and friends are ignored) and no redirect is followed, with or without the key: a
  3xx answer is a failure that names where it pointed;
- once /health answers 200, every listening socket that takes a connection to the unit's address and port
  must belong to a process of the unit (its MainPID, a descendant of it, or a process in its cgroup), read
  from /proc/net/tcp{,6} and /proc/PID/fd. Anything else holding the port (a process that bound it while the
  engine was loading) fails the gate before the key is sent. This check runs with or without a key: a
  stranger answering on the port is not the unit being healthy. The engine keeps its listening socket until
  it exits, and a port cannot be bound twice, so the owner checked is the owner connected to.
- every request has a wall-clock deadline (a slowly trickling answer cannot stretch it) and a bounded body;
  the whole gate ends by --timeout + (2 + --warmup) x --request-timeout (the role's task has an Ansible
  timeout above that).
An answer that is garbage, truncated or not UTF-8 is a gate failure with the reason, never a traceback.

Success: one line on stdout, exit 0. Failure: the reason and the unit's last --journal-lines
journal lines on stdout, exit 1.
"""

from __future__ import absolute_import, annotations, division, print_function

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time

from urllib.error import HTTPError, URLError
from urllib.parse import urlsplit
from urllib.request import HTTPRedirectHandler, ProxyHandler, Request, build_opener

MAX_BODY = 1 << 20  # vLLM's answers to the gate's requests are a few KiB


class GateError(Exception):
    pass


class NoAnswer(Exception):
    """No complete HTTP answer: refused, reset, timed out, truncated or malformed."""


class NoRedirect(HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # urllib then raises HTTPError with the 3xx code: the caller reports it


# No proxy from the environment and no redirect: the key goes to the unit's URL only.
OPENER = build_opener(ProxyHandler({}), NoRedirect())


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
    url = keys["X-GpufleetVllmURL"]
    try:
        parts = urlsplit(url)
        usable = parts.scheme == "http" and bool(parts.hostname) and parts.port is not None and parts.path in ("", "/")
    except ValueError:
        usable = False
    if not usable:
        raise GateError("%s: X-GpufleetVllmURL=%r is not http://HOST:PORT (render the unit with the vllm role)" % (path, url))
    return url.rstrip("/"), keys["X-GpufleetVllmServedModelName"]


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


def unit_state(unit, properties="ActiveState,SubState,NRestarts,Result"):
    proc = subprocess.run(
        ["systemctl", "show", unit, "--property=" + properties],
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


def _read(resp):
    data = resp.read(MAX_BODY + 1)
    missing = getattr(resp, "length", None)  # what Content-Length still promises after the read
    if missing and len(data) <= MAX_BODY:
        raise http.client.IncompleteRead(data, missing)  # read(n) returns a cut body without raising
    text = data[:MAX_BODY].decode("utf-8", "replace")
    return text + (" [answer cut at %d bytes]" % MAX_BODY if len(data) > MAX_BODY else "")


def _fetch(req, timeout, out):
    try:
        with OPENER.open(req, timeout=timeout) as resp:  # nosec - the unit's own loopback URL
            out["answer"] = (resp.status, _read(resp))
    except HTTPError as exc:
        location = exc.headers.get("Location") if exc.headers is not None else None
        text = _read(exc) if exc.fp is not None else ""
        if 300 <= exc.code < 400:
            text = "a redirect to %s, not followed (the gate follows no redirect) %s" % (location or "(no Location)", text)
        out["answer"] = (exc.code, text)
    except (URLError, OSError, http.client.HTTPException, ValueError) as exc:
        out["error"] = "%s: %s" % (type(exc).__name__, getattr(exc, "reason", exc))


def request(url, api_key, timeout, body=None):
    """(status, text) of one request that ends within `timeout` seconds of wall-clock time, however slowly the
    answer arrives; NoAnswer when there is no complete answer."""
    headers = {"Accept": "application/json"}
    data = None
    if body is not None:
        data = json.dumps(body).encode("utf-8")
        headers["Content-Type"] = "application/json"
    if api_key:
        headers["Authorization"] = "Bearer " + api_key
    req = Request(url, data=data, headers=headers, method="POST" if data is not None else "GET")
    out = {}
    worker = threading.Thread(target=_fetch, args=(req, max(timeout, 0.1), out), daemon=True)
    worker.start()
    worker.join(max(timeout, 0.1))
    if worker.is_alive():
        raise NoAnswer("no complete answer within %.0f s (it did not start or arrived too slowly)" % timeout)
    if "error" in out:
        raise NoAnswer(out["error"])
    return out["answer"]


def _tcp_address(hexaddr):
    """An address of /proc/net/tcp{,6} (hex, each 32-bit word in host byte order) as text."""
    raw = bytes.fromhex(hexaddr)
    raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4)) if sys.byteorder == "little" else raw
    return socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6, raw)


def listening_sockets(proc="/proc"):
    """[(address, port, inode)] of the TCP sockets in LISTEN state (st 0A) in this network namespace."""
    found = []
    for name in ("tcp", "tcp6"):
        try:
            with open(os.path.join(proc, "net", name)) as handle:
                rows = handle.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 9 and fields[3] == "0A":
                addr, port = fields[1].rsplit(":", 1)
                found.append((_tcp_address(addr), int(port, 16), int(fields[9])))
    return found


def takes_connection(listen_addr, targets):
    """True when a socket listening on listen_addr accepts a connection to one of the target addresses."""
    mapped = set("::ffff:" + t for t in targets if ":" not in t)
    return listen_addr in targets or listen_addr in mapped or listen_addr == "::" or (
        listen_addr == "0.0.0.0" and any(":" not in t for t in targets))


def socket_holders(inodes, proc="/proc"):
    """{pid: inode} of the processes holding one of these socket inodes open."""
    wanted = dict(("socket:[%d]" % i, i) for i in inodes)
    holders = {}
    for pid in (p for p in os.listdir(proc) if p.isdigit()):
        fd_dir = os.path.join(proc, pid, "fd")
        try:
            for fd in os.listdir(fd_dir):
                link = os.readlink(os.path.join(fd_dir, fd))
                if link in wanted:
                    holders[int(pid)] = wanted[link]
        except OSError:
            continue  # the process exited, or a kernel thread
    return holders


def children_of(proc="/proc"):
    """{ppid: [pid, ...]} from /proc/PID/stat (the fields after the command's closing parenthesis)."""
    tree = {}
    for pid in (p for p in os.listdir(proc) if p.isdigit()):
        try:
            with open(os.path.join(proc, pid, "stat")) as handle:
                ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        tree.setdefault(ppid, []).append(int(pid))
    return tree


def unit_processes(unit, proc="/proc"):
    """The unit's MainPID, its descendants, and the processes of the unit's cgroup."""
    state = unit_state(unit, "MainPID")
    main = int(state.get("MainPID", "0") or 0) if state.get("MainPID", "0").isdigit() else 0
    pids = set(unit_pids(unit))
    if main > 0:
        tree, todo = children_of(proc), [main]
        while todo:
            pid = todo.pop()
            if pid not in pids:
                pids.add(pid)
                todo.extend(tree.get(pid, []))
    return main, pids


def command_of(pid, proc="/proc"):
    try:
        with open(os.path.join(proc, str(pid), "cmdline"), "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()[:120] or "?"
    except OSError:
        return "?"


def check_listener(unit, base, proc="/proc"):
    """Fail unless every socket that takes connections to the unit's address and port is the unit's."""
    parts = urlsplit(base)
    host, port = parts.hostname, parts.port
    try:
        targets = set(info[4][0] for info in socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM))
    except (socket.gaierror, UnicodeError) as exc:
        raise GateError("%s: cannot resolve %s from X-GpufleetVllmURL (%s)" % (unit, host, exc))
    inodes = [i for addr, p, i in listening_sockets(proc) if p == port and takes_connection(addr, targets)]
    holders = socket_holders(inodes, proc)
    if not holders:
        raise GateError("%s: /health answered on %s, but no process here holds a socket listening there "
                        "(read from %s/net/tcp, tcp6 and %s/*/fd; the gate must run as root): no API key was sent"
                        % (unit, base, proc, proc))
    main, own = unit_processes(unit, proc)
    strangers = sorted(pid for pid in holders if pid not in own)
    if strangers:
        raise GateError(
            "%s: port %d on %s is held by PID %s (%s), which is not a process of %s (MainPID %s): the gate sends "
            "the API key only to the unit's own engine and stopped here. Stop what holds the port, or give the "
            "instance another port." % (unit, port, host, ", ".join(map(str, strangers)), command_of(strangers[0], proc),
                                        unit, main or "none"))
    return main


def wait_healthy(unit, base, opts, deadline):
    start = time.monotonic()
    restarts = int(unit_state(unit).get("NRestarts", "0") or 0)
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
            status, text = request(base + "/health", None, max(0.1, min(opts.request_timeout, 30, deadline - time.monotonic())))
            if status == 200:
                return time.monotonic() - start
            last = "HTTP %d %s" % (status, text.strip()[:200])
        except NoAnswer as exc:
            last = "no answer (%s)" % exc
        if time.monotonic() + opts.interval > deadline:
            raise GateError(
                "%s: /health did not answer 200 within %d s (last: %s). A model still loading needs a larger "
                "vllm_health_timeout; an HTTP 500 means the engine is dead." % (unit, opts.timeout, last))
        time.sleep(opts.interval)


def unit_pids(unit):
    """The PIDs in the unit's cgroup and its sub-cgroups (cgroup v2 or the v1 systemd hierarchy)."""
    group = unit_state(unit, "ControlGroup").get("ControlGroup", "")
    for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/systemd", "/sys/fs/cgroup/unified"):
        top = root + group
        if group.startswith("/") and os.path.exists(os.path.join(top, "cgroup.procs")):
            pids = []
            for folder, _dirs, files in os.walk(top):
                if "cgroup.procs" in files:
                    with open(os.path.join(folder, "cgroup.procs")) as handle:
                        pids.extend(int(line) for line in handle if line.strip().isdigit())
            return pids
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


def keyed_request(unit, what, url, api_key, opts, deadline, body=None):
    """One request with the key, bounded by --request-timeout and by the gate's overall deadline."""
    limit = min(opts.request_timeout, deadline - time.monotonic())
    if limit <= 0:
        raise GateError("%s: the gate's overall deadline passed before %s" % (unit, what))
    try:
        status, text = request(url, api_key, limit, body)
    except NoAnswer as exc:
        raise GateError("%s: %s got no complete answer (%s)" % (unit, what, exc))
    if status != 200:
        raise GateError("%s: %s answered HTTP %d: %s" % (unit, what, status, text.strip()[:300]))
    try:
        return json.loads(text)
    except ValueError:
        raise GateError("%s: %s did not answer JSON: %r" % (unit, what, text.strip()[:300]))


def check_models(unit, base, served, api_key, opts, deadline):
    answer = keyed_request(unit, "GET /v1/models", base + "/v1/models", api_key, opts, deadline)
    try:
        names = [m.get("id") for m in answer.get("data", [])]
    except (AttributeError, TypeError):
        raise GateError("%s: GET /v1/models did not return a model list: %r" % (unit, json.dumps(answer)[:300]))
    if served not in names:
        raise GateError("%s: /v1/models lists %s, not the served model name %r (--served-model-name)"
                        % (unit, names, served))


def completion_text(unit, answer):
    try:
        text = answer["choices"][0]["text"]
    except (KeyError, IndexError, TypeError):
        text = None
    if not isinstance(text, str):
        raise GateError("%s: POST /v1/completions returned no completion text: %r" % (unit, json.dumps(answer)[:300]))
    return text


def check(opts):
    unit = os.path.basename(opts.unit_file)
    if unit_keys(opts.unit_file).get("X-GpufleetVllmHeadless") == "yes":
        return check_headless(opts)
    base, served = read_unit(opts.unit_file)
    api_key = read_api_key(opts.env_file)
    start = time.monotonic()
    waited = wait_healthy(unit, base, opts, start + opts.timeout)
    deadline = start + opts.timeout + (2 + opts.warmup) * opts.request_timeout
    check_listener(unit, base)  # before the key leaves this host's gate: the listener is the unit's
    check_models(unit, base, served, api_key, opts, deadline)
    body = {"model": served, "prompt": opts.prompt, "max_tokens": opts.max_tokens, "temperature": 0}
    timings = []
    for number in range(1 + opts.warmup):
        began = time.monotonic()
        answer = keyed_request(unit, "POST /v1/completions", base + "/v1/completions", api_key, opts, deadline, body)
        text = completion_text(unit, answer)
        timings.append(time.monotonic() - began)
        if number == 0:
            sample = text.strip()[:40]
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
        try:
            print(check(opts))
        except (OSError, UnicodeDecodeError) as exc:  # the unit or env file unreadable, systemctl missing
            raise GateError("%s: %s" % (unit, exc))
    except GateError as exc:
        print("HEALTH GATE FAILED: %s\n--- last %d journal lines of %s ---\n%s"
              % (exc, opts.journal_lines, unit, journal_tail(unit, opts.journal_lines)))
        sys.exit(1)


if __name__ == "__main__":
    main()
