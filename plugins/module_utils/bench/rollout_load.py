# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Load during a rollout (``gpufleet_rollout_load``): vLLM's own ``vllm bench serve`` through the front door
at a declared request rate, from before the first change until after the last, and what users saw per phase.

The load runs as back-to-back windows of ``window`` seconds (``rate x window`` requests each) in one process of
the venv's Python (vLLM's import is paid once), until a stop file appears or ``max_seconds`` pass: a whole
rollout's length is not known when it starts, and vLLM's benchmark only writes its result when a run ends.
Every window saves vLLM's result JSON with ``--save-detailed`` (each request's error text, output tokens, TTFT
and start on vLLM's ``perf_counter`` clock) beside the wall clock read at its start, so each request lands in
the phase (``marks``: the rollout's batches, a test's steps) during which it was sent.

Counted per phase from vLLM's own lists: ``failed`` (a non-empty error text: HTTP error, refused or reset
connection, a stream cut before its first token or by an exception), ``truncated`` (succeeded with fewer
output tokens than asked; the load sends ``--ignore-eos``: a stream that ended early without an error), and
the window errors (a window whose run raised: its requests are counted failed, never dropped silently).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import subprocess
import time

from ansible_collections.gpufleet.vllm.plugins.module_utils.bench import failures
from ansible_collections.gpufleet.vllm.plugins.module_utils.bench.mix import percentile
from ansible_collections.gpufleet.vllm.plugins.module_utils.bench.errors import BenchError

VAR = "gpufleet_rollout_load"
# key: (default, smallest, whole number); rate and url have no default
NUMBERS = dict(rate=(None, 0.01, False), input_len=(64, 1, True), output_len=(16, 1, True), window=(10, 2, True),
               max_seconds=(3600, 10, True), burstiness=(1.0, 0.01, False), max_concurrency=(0, 0, True))
KEYS = tuple(sorted(NUMBERS)) + ("url",)

# Runs in the instance venv's Python: vLLM's `vllm bench serve` (parser and main, as its CLI calls them),
# one window after the other until `stop` exists; each window's wall and perf_counter clocks in NAME.clock.
DRIVER = """
import json, os, sys, time
from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser
out, argv, max_seconds = sys.argv[1], json.loads(sys.argv[2]), float(sys.argv[3])
end, n = time.time() + max_seconds, 0
while not os.path.exists(os.path.join(out, "stop")) and time.time() < end:
    n += 1
    name = "window-%05d" % n
    parser = FlexibleArgumentParser(prog="vllm bench serve")
    add_cli_args(parser)
    clock = {"wall": time.time(), "perf": time.perf_counter()}
    try:
        main(parser.parse_args(argv + ["--seed", str(n), "--result-dir", out, "--result-filename", name + ".json"]))
    except BaseException as exc:
        clock["error"] = "%s: %s" % (type(exc).__name__, exc)
    clock["end"] = time.time()
    with open(os.path.join(out, name + ".clock"), "w") as handle:
        json.dump(clock, handle)
open(os.path.join(out, "done"), "w").close()
"""


def _number(key, value, smallest, whole):
    bad = isinstance(value, bool) or not isinstance(value, (int, float)) or (whole and value != int(value))
    if bad or value < smallest:
        raise BenchError("%s.%s is %r: give a %s >= %s (see docs/restarts.md, load during a rollout)."
                         % (VAR, key, value, "whole number" if whole else "number", smallest), key="%s.%s" % (VAR, key))
    return int(value) if whole else float(value)


def check(load, max_failed):
    """The load's settings with their defaults, and max_failed; BenchError naming the variable and the fix."""
    if isinstance(max_failed, str) and max_failed.strip().isdigit():
        max_failed = int(max_failed)  # -e gpufleet_rollout_max_failed=2 arrives as text
    if isinstance(max_failed, bool) or not isinstance(max_failed, int) or max_failed < 0:
        raise BenchError("gpufleet_rollout_max_failed is %r: give a whole number >= 0 (the failed requests a rollout "
                         "may cause before it stops and rolls back; default 0)." % (max_failed,),
                         key="gpufleet_rollout_max_failed")
    if not isinstance(load, dict):
        raise BenchError("%s is %r: give a dict such as {rate: 2} (requests per second through the front door)."
                         % (VAR, load), key=VAR)
    unknown = sorted(set(load) - set(KEYS))
    if unknown:
        raise BenchError("%s has unknown keys %s: use %s." % (VAR, ", ".join(unknown), ", ".join(KEYS)), key=VAR)
    if "rate" not in load:
        raise BenchError("%s.rate is missing: give the requests per second to send through the front door, e.g. "
                         "{rate: 2}." % VAR, key=VAR + ".rate")
    out = dict((k, _number(k, load.get(k, d), low, whole)) for k, (d, low, whole) in NUMBERS.items())
    url = load.get("url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise BenchError("%s.url is %r: give the front door's base URL, e.g. http://127.0.0.1:80 (the playbook "
                         "sets nginx's on the first host when it is not given)." % (VAR, url), key=VAR + ".url")
    out["url"] = url.rstrip("/")
    return out


def window_argv(load, model, tokenizer):
    """vLLM bench serve's argv of one window (the driver adds --seed and where the result goes)."""
    argv = ["--backend", "openai", "--endpoint", "/v1/completions", "--base-url", load["url"], "--model", model,
            "--tokenizer", tokenizer, "--dataset-name", "random", "--random-input-len", str(load["input_len"]),
            "--random-output-len", str(load["output_len"]), "--random-range-ratio", "0",
            "--num-prompts", str(max(1, int(round(load["rate"] * load["window"])))),
            "--request-rate", repr(load["rate"]), "--burstiness", repr(load["burstiness"]),
            "--ignore-eos", "--save-detailed", "--save-result", "--disable-tqdm",
            "--ready-check-timeout-sec", "0", "--percentile-metrics", "ttft", "--metric-percentiles", "50,99"]
    if load["max_concurrency"]:
        argv += ["--max-concurrency", str(load["max_concurrency"])]
    return argv


def requests(result, clock, asked):
    """One record per request of a window: {wall, failed, truncated, ttft, error}; wall = when it was sent."""
    failures.check_result(result, "the window result")
    errors = result.get("errors") or []
    lens = result.get("output_lens") or [0] * len(errors)
    ttfts = result.get("ttfts") or [None] * len(errors)
    starts = result.get("start_times") or [clock["perf"]] * len(errors)
    out = []
    for error, n, ttft, start in zip(errors, lens, ttfts, starts):
        out.append(dict(wall=clock["wall"] + (start - clock["perf"]), failed=bool(error), error=error or "",
                        truncated=not error and (n or 0) < asked, ttft=None if error else ttft))
    return out


def read_windows(folder, load):
    """(every request's record, the windows that raised) from a load's folder, in the order they ran."""
    records, broken = [], []
    names = sorted(n[:-len(".clock")] for n in os.listdir(folder) if n.endswith(".clock"))
    for name in names:
        with open(os.path.join(folder, name + ".clock")) as handle:
            clock = json.load(handle)
        path = os.path.join(folder, name + ".json")
        if clock.get("error") or not os.path.exists(path):
            # Its requests' outcomes are lost: count them all as failed (never silent).
            sent = max(1, int(round(load["rate"] * load["window"])))
            broken.append(dict(window=name, error=clock.get("error") or "no result file", requests=sent))
            records += [dict(wall=clock["wall"], failed=True, truncated=False, ttft=None,
                             error="window %s: %s" % (name, clock.get("error") or "no result file"))] * sent
            continue
        with open(path) as handle:
            records += requests(json.load(handle), clock, load["output_len"])
    return records, broken


def phase_of(wall, marks):
    """The name of the last mark at or before ``wall`` (marks sorted by wall), else 'before'."""
    name = "before"
    for mark in marks:
        if mark["wall"] <= wall:
            name = mark["name"]
    return name


FAILED_SENT_AT_MAX = 20  # send times kept per summary: enough to place a failure beside an event, never a flood


def summarize(records):
    """{sent, failed, truncated, ttft_p50_ms, ttft_p99_ms, errors, failed_sent_at} of some requests; failed_sent_at:
    the wall clock at which the first FAILED_SENT_AT_MAX failed requests were sent (to read beside an event's time)."""
    ttfts = [r["ttft"] * 1000.0 for r in records if r["ttft"] is not None and not r["failed"]]
    p50, p99 = percentile(ttfts, 50), percentile(ttfts, 99)
    failed_at = sorted(round(r["wall"], 2) for r in records if r["failed"])
    return dict(sent=len(records), failed=len(failed_at),
                truncated=sum(1 for r in records if r["truncated"]),
                ttft_p50_ms=None if p50 is None else round(p50, 1), ttft_p99_ms=None if p99 is None else round(p99, 1),
                errors=failures.error_texts(r["error"] for r in records), failed_sent_at=failed_at[:FAILED_SENT_AT_MAX])


def report(records, marks, broken, max_failed):
    """The load's report: the whole run, each phase in the order of its mark (from: the mark's wall clock), and
    whether failed > max_failed."""
    marks = sorted(marks, key=lambda m: m["wall"])
    names = ["before"] + [m["name"] for m in marks]
    starts = dict([("before", None)] + [(m["name"], round(m["wall"], 2)) for m in marks])
    by_phase = dict((n, []) for n in names)
    for record in records:
        by_phase[phase_of(record["wall"], marks)].append(record)
    phases = [dict(summarize(by_phase[n]), name=n, **{"from": starts[n]}) for n in names if by_phase[n] or n != "before"]
    total = summarize(records)
    return dict(total=total, phases=phases, broken_windows=broken, max_failed=max_failed,
                exceeded=total["failed"] > max_failed, line=describe(total, max_failed))


def describe(total, max_failed):
    """One line: 'load: 120 sent, 0 failed (max 0), 0 truncated, TTFT p50 41.0 ms p99 180.2 ms'."""
    return "load: %d sent, %d failed (max %d), %d truncated, TTFT p50 %s ms p99 %s ms%s" % (
        total["sent"], total["failed"], max_failed, total["truncated"], total["ttft_p50_ms"], total["ttft_p99_ms"],
        "".join('; "%s" x%d' % (e["text"][:120], e["count"]) for e in total["errors"][:3]))


def read_marks(folder):
    """The marks written so far (marks.jsonl): [{name, wall}]."""
    path = os.path.join(folder, "marks.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as handle:
        return [json.loads(line) for line in handle if line.strip()]


def start(python, folder, argv, max_seconds):
    """Start the load in its own session (it outlives the module); its pid. An earlier load's files go first."""
    if os.path.exists(os.path.join(folder, "pid")) and not os.path.exists(os.path.join(folder, "done")):
        raise BenchError("A load is already running from %s (no `done` file): stop it first (state stopped) or "
                         "remove the folder." % folder, file=folder)
    # The venv behind a `current` link, resolved now: a rollout that switches `current` keeps this one.
    python = os.path.join(os.path.realpath(os.path.dirname(os.path.dirname(python))), "bin", os.path.basename(python))
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    log = open(os.path.join(folder, "driver.log"), "w")
    try:
        proc = subprocess.Popen([python, "-c", DRIVER, folder, json.dumps(argv), str(max_seconds)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, close_fds=True,
                                start_new_session=True)
    except OSError as exc:
        raise BenchError("Cannot run %s: %s. Set %s.python to a venv with vLLM (default: the host's current "
                         "venv)." % (python, exc, VAR), key=VAR + ".python")
    finally:
        log.close()
    with open(os.path.join(folder, "pid"), "w") as handle:
        handle.write("%d\n" % proc.pid)
    return proc.pid


def mark(folder, name, wall=None):
    """Append a phase mark (the rollout's batch, a test's step) with the wall clock now."""
    with open(os.path.join(folder, "marks.jsonl"), "a") as handle:
        handle.write(json.dumps(dict(name=name, wall=time.time() if wall is None else wall)) + "\n")


def _tail(folder, lines=15):
    try:
        with open(os.path.join(folder, "driver.log")) as handle:
            return "".join(handle.readlines()[-lines:])
    except (OSError, IOError):
        return "(no driver.log)"


def stop(folder, timeout, sleep=time.sleep):
    """Ask the load to stop after its running window and wait for it (at most ``timeout`` s)."""
    if not os.path.exists(os.path.join(folder, "pid")):
        raise BenchError("No load was started in %s: start it first (state started)." % folder, file=folder)
    open(os.path.join(folder, "stop"), "w").close()
    deadline = time.time() + timeout
    while not os.path.exists(os.path.join(folder, "done")):
        if not _alive(folder) or time.time() > deadline:
            raise BenchError("The load in %s %s: %s" % (
                folder, "ended without finishing its last window" if not _alive(folder) else
                "did not stop within %d s (a window's requests still running)" % timeout, _tail(folder)), file=folder)
        sleep(0.5)


def _alive(folder):
    with open(os.path.join(folder, "pid")) as handle:
        pid = int(handle.read().strip())
    try:
        os.kill(pid, 0)
    except OSError:
        return os.path.exists(os.path.join(folder, "done"))
    return True


def settle(folder, since, timeout, sleep=time.sleep):
    """Wait until the window running at ``since`` has ended (results exist only per window): at most ``timeout`` s."""
    deadline = time.time() + timeout
    while not os.path.exists(os.path.join(folder, "done")):
        for name in os.listdir(folder):
            if name.endswith(".clock"):
                with open(os.path.join(folder, name)) as handle:
                    if json.load(handle)["end"] >= since:
                        return
        if not _alive(folder) or time.time() > deadline:
            raise BenchError("The load in %s %s: %s" % (
                folder, "ended without finishing its window" if not _alive(folder) else
                "ran no window to its end within %d s" % timeout, _tail(folder)), file=folder)
        sleep(0.5)
