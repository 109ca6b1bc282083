# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The I/O of a benchmark run on the host: vLLM's ``vllm bench serve`` as a subprocess, /metrics
scrapes before and after (and sampled during, on a thread, for the peaks), and the two single requests
of the canary and the probe. Standard library only; the measurement is vLLM's, this file only drives it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import subprocess
import tempfile
import threading
import time

import queue

try:
    import http.client as http_client
    from urllib.parse import urlsplit
except ImportError:  # pragma: no cover - Python 2 is not supported on targets; keeps sanity's import test calm
    http_client = urlsplit = None

from ansible_collections.gpufleet.vllm.plugins.module_utils.bench import engine, failures, report
from ansible_collections.gpufleet.vllm.plugins.module_utils.bench.errors import BenchError


def _headers(api_key):
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = "Bearer %s" % api_key
    return headers


def _open(url, body, api_key, timeout):
    """One request with http.client (no redirects, no proxy): (connection, response)."""
    parts = urlsplit(url)
    kind = http_client.HTTPSConnection if parts.scheme == "https" else http_client.HTTPConnection
    conn = kind(parts.netloc, timeout=timeout)
    path = parts.path + ("?" + parts.query if parts.query else "")
    data = None if body is None else json.dumps(body).encode("utf-8")
    conn.request("GET" if body is None else "POST", path or "/", body=data, headers=_headers(api_key))
    return conn, conn.getresponse()


def http(url, body=None, api_key=None, timeout=60):
    """GET (body None) or POST JSON; returns the decoded text. BenchError names the URL and the status."""
    try:
        conn, response = _open(url, body, api_key, timeout)
        try:
            text = response.read().decode("utf-8", "replace")
        finally:
            conn.close()
    except (OSError, ValueError, http_client.HTTPException) as exc:
        raise BenchError("Cannot reach %s: %s. Check that the instance runs and the URL (bench_* variables)."
                         % (url, exc), url=url)
    if response.status >= 400:
        raise BenchError("%s answered HTTP %d: %s" % (url, response.status, text[:400]), url=url,
                         status=response.status)
    return text


def scrape(urls, timeout=10):
    """One engine reading summed over the /metrics URLs."""
    return engine.snapshot([http(url, timeout=timeout) for url in urls])


class Sampler(object):
    """Scrapes the gauges every ``interval`` seconds on a thread while a benchmark point runs."""

    def __init__(self, urls, interval):
        self.urls, self.interval, self.samples, self.errors = urls, interval, [], []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop)
        self._thread.daemon = True

    def _loop(self):
        while not self._stop.wait(self.interval):
            try:
                self.samples.append(scrape(self.urls, timeout=max(1, self.interval * 4)))
            except BenchError as exc:
                self.errors.append(exc.message)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        return False


def _tail(text, lines=30):
    return "\n".join((text or "").strip().splitlines()[-lines:])


# Runs in the instance's venv: vLLM's own `vllm bench serve` (its parser, add_cli_args, and its main, as
# vllm/entrypoints/cli/benchmark/serve.py calls them), once per point read from stdin, in one process so
# the ~10 s import of vLLM is paid once per workload instead of once per point.
DRIVER = """
import json, sys
from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser
print("@@gpufleet@@ " + json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    if not line.strip():
        break
    parser = FlexibleArgumentParser(prog="vllm bench serve")
    add_cli_args(parser)
    try:
        main(parser.parse_args(json.loads(line)))
        reply = {"ok": True}
    except BaseException as exc:
        reply = {"ok": False, "error": "%s: %s" % (type(exc).__name__, exc)}
    print("@@gpufleet@@ " + json.dumps(reply), flush=True)
"""
MARK = "@@gpufleet@@ "


def read_result(path):
    """vLLM's result JSON from ``path``; BenchError naming the file when it is not JSON or not vLLM's shape."""
    try:
        with open(path) as handle:
            result = json.load(handle)
    except (OSError, IOError, ValueError) as exc:
        raise BenchError("Cannot read vLLM's result file %s: %s. Rerun the benchmark; if it repeats, the vllm "
                         "in bench_vllm_bin wrote a broken file." % (path, exc), file=path)
    return failures.check_result(result, path, report.SUMMARY_KEYS[2:])


class Driver(object):
    """vLLM's benchmark in one long-lived process of the venv's Python; one point per call."""

    def __init__(self, python, env, timeout):
        self.timeout, self.lines = timeout, queue.Queue()
        try:
            self.proc = subprocess.Popen([python, "-c", DRIVER], env=env, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                         universal_newlines=True, bufsize=1)
        except OSError as exc:
            raise BenchError("Cannot run %s: %s. Set bench_vllm_bin to the instance venv's vllm." % (python, exc))
        reader = threading.Thread(target=self._read)
        reader.daemon = True
        reader.start()
        self.log = []
        self._wait("start-up")

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _wait(self, what):
        deadline = time.time() + self.timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.time()))
            except queue.Empty:
                raise BenchError("vllm bench serve took longer than %d s (%s; bench_run_timeout): %s" % (
                    self.timeout, what, _tail("".join(self.log))))
            if line is None:
                raise BenchError("vllm bench serve exited during %s: %s" % (what, _tail("".join(self.log))))
            if line.startswith(MARK):
                return json.loads(line[len(MARK):])
            self.log.append(line)

    def point(self, argv, dataset=None):
        """Run one point (``argv`` without ``vllm bench serve``, with --result-dir); vLLM's result dict.

        ``dataset``: the text of a dataset file (a mix's timed_trace JSONL), written beside the result as
        ``{dataset_path}`` of the argv and removed with it.
        """
        result_dir = tempfile.mkdtemp(prefix="gpufleet-bench-")
        try:
            dataset_path = os.path.join(result_dir, "dataset.jsonl")
            if dataset is not None:
                with open(dataset_path, "w") as handle:
                    handle.write(dataset)
            argv = [result_dir if a == "{result_dir}" else dataset_path if a == "{dataset_path}" else a for a in argv]
            del self.log[:]
            self.proc.stdin.write(json.dumps(argv) + "\n")
            self.proc.stdin.flush()
            reply = self._wait("a run")
            names = sorted(n for n in os.listdir(result_dir) if n.endswith(".json"))
            if not reply.get("ok") or not names:
                raise BenchError("vllm bench serve failed: %s: %s" % (reply.get("error"), _tail("".join(self.log))),
                                 argv=argv)
            return read_result(os.path.join(result_dir, names[0])), "".join(self.log)
        finally:
            shutil.rmtree(result_dir, ignore_errors=True)

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


# Where a workload's sweep is, for the role's polling task: set by the vllm_bench module (progress_file).
PROGRESS = dict(path=None, workload="", total=0, done=0)


def track(path, workload, total):
    """Write each point's start to ``path`` (None: no file) for a workload of ``total`` points; first, that
    vLLM's benchmark is being imported (tens of seconds on a loaded host, before the first point)."""
    PROGRESS.update(path=path, workload=workload, total=total, done=0)
    _write("workload %s: %d points, importing vLLM's benchmark (vllm bench serve)" % (workload, total))


def _write(line):
    if PROGRESS["path"]:
        # rewritten in place, no temporary name beside it: the role makes the file with tempfile (in /tmp)
        with open(PROGRESS["path"], "w") as handle:
            handle.write(line + ", started %s\n" % time.strftime("%H:%M:%S"))


def argv_value(argv, option):
    """The value after ``option`` in a ``vllm bench serve`` argv ('' when absent)."""
    return argv[argv.index(option) + 1] if option in argv[:-1] else ""


def point_line(progress, argv):
    """The progress line of the point about to run: workload, n of N, prompts, concurrency, where to."""
    return "workload %s: point %d of %d, %s prompts at concurrency %s via %s" % (
        progress["workload"], progress["done"] + 1, progress["total"], argv_value(argv, "--num-prompts") or "?",
        argv_value(argv, "--max-concurrency") or "?", argv_value(argv, "--base-url") or "?")


def _note_point(argv):
    _write(point_line(PROGRESS, argv))


def measure(driver, argv, metrics_urls, interval, dataset=None):
    """One benchmark point with its engine window: (result, engine figures, log)."""
    _note_point(argv)
    before = scrape(metrics_urls)
    with Sampler(metrics_urls, interval) as sampler:
        result, log = driver.point(argv, dataset)
    PROGRESS["done"] += 1
    after = scrape(metrics_urls)
    figures = engine.window(before, after, sampler.samples)
    figures["sample_errors"] = sampler.errors[:3]
    return result, figures, log


def tokenize(base_url, model, text, api_key=None):
    """vLLM's ``POST /tokenize`` on an instance: the token ids of ``text`` (no special tokens)."""
    body = dict(model=model, prompt=text, add_special_tokens=False)
    return json.loads(http(base_url.rstrip("/") + "/tokenize", body, api_key))["tokens"]


def complete(base_url, body, api_key=None, timeout=600):
    """A non-streamed completion: (response dict, seconds)."""
    start = time.time()
    answer = json.loads(http(base_url.rstrip("/") + "/v1/completions", body, api_key, timeout))
    return answer, time.time() - start


def _read_stream(response, start):
    first, chunks = None, 0
    for raw in iter(response.readline, b""):
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        choice = (json.loads(line[6:]).get("choices") or [{}])[0]
        if choice.get("text") or choice.get("token_ids"):
            chunks += 1
            first = first or time.time() - start
    return first, chunks


def stream_ttft(base_url, body, api_key=None, timeout=600):
    """A streamed completion: (seconds to the first token chunk, seconds to [DONE], chunks with text)."""
    url = base_url.rstrip("/") + "/v1/completions"
    start = time.time()
    try:
        conn, response = _open(url, dict(body, stream=True), api_key, timeout)
        try:
            if response.status >= 400:
                raise BenchError("The long-context request through %s answered HTTP %d: %s" % (
                    base_url, response.status, response.read().decode("utf-8", "replace")[:400]),
                    status=response.status)
            first, chunks = _read_stream(response, start)
        finally:
            conn.close()
    except (OSError, ValueError, http_client.HTTPException) as exc:
        raise BenchError("The long-context request through %s failed after %.1f s: %s" % (
            base_url, time.time() - start, exc))
    return first, time.time() - start, chunks
