# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark gpufleet.vllm.model_weights against curl and sha256sum, side by side, in one run.

A private nginx (from apt) serves N random files; every repeat measures, in turn:

  a. curl fetching the files one after another  vs  model_weights (source: http) with 1 worker and
     with W workers (each download hashed while streaming, fsynced, renamed into place);
  b. sha256sum over the downloaded files         vs  model_weights verify: full (parallel re-hash);
  c. model_weights verify: cached on the same snapshot (stat only).

Medians over the repeats and the ratios are printed, and written as JSON with --json.
Targets (issue 5): a >= 0.9x curl's throughput with one worker; b <= 0.6x sha256sum's wall
time; c < 0.5 s. The module's times are its own elapsed_s (what a long-running job costs); the
figures counting the Python interpreter start (~0.2-1 s, constant per run) are printed next to them.

Rerun:  .venv/bin/python benchmarks/weights_bench.py        (4 x 1 GiB, 3 repeats, ~12 GiB of disk)
        .venv/bin/python benchmarks/weights_bench.py --files 2 --size-mib 16 --repeat 1
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))

NGINX_CONF = """
daemon off;
master_process off;
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log;
events {{ worker_connections 256; }}
http {{
  access_log off;
  sendfile on;
  tcp_nopush on;
  client_body_temp_path {prefix}/tmp; proxy_temp_path {prefix}/tmp; fastcgi_temp_path {prefix}/tmp;
  uwsgi_temp_path {prefix}/tmp; scgi_temp_path {prefix}/tmp;
  types {{ application/octet-stream bin; }}
  server {{
    listen 127.0.0.1:{port};
    root {root};
  }}
}}
"""


def free_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def make_data(data_dir, files, size):
    """Random files (reused when present with the right size) and their sha256sum manifest."""
    os.makedirs(data_dir, exist_ok=True)
    lines = []
    block = 16 * 1024 * 1024
    for i in range(files):
        name = "model-%05d-of-%05d.safetensors" % (i + 1, files)
        path = os.path.join(data_dir, name)
        digest = hashlib.sha256()
        if os.path.exists(path) and os.path.getsize(path) == size and os.path.exists(path + ".sha256"):
            with open(path + ".sha256") as handle:
                lines.append("%s  %s" % (handle.read().strip(), name))
            continue
        with open(path, "wb") as handle:
            left = size
            while left:
                chunk = os.urandom(min(block, left))
                digest.update(chunk)
                handle.write(chunk)
                left -= len(chunk)
        with open(path + ".sha256", "w") as handle:
            handle.write(digest.hexdigest())
        lines.append("%s  %s" % (digest.hexdigest(), name))
    with open(os.path.join(data_dir, "SHA256SUMS"), "w") as handle:
        handle.write("\n".join(lines) + "\n")
    return [line.split("  ", 1)[1] for line in lines]


class Nginx(object):
    def __init__(self, root, prefix, nginx="nginx"):
        self.prefix = prefix
        os.makedirs(os.path.join(prefix, "tmp"), exist_ok=True)
        self.port = free_port()
        conf = os.path.join(prefix, "nginx.conf")
        with open(conf, "w") as handle:
            handle.write(NGINX_CONF.format(prefix=prefix, port=self.port, root=root))
        binary = shutil.which(nginx) or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")
        if not binary:
            raise SystemExit("nginx not found: apt-get install nginx (scripts/requirements-apt.txt lists it)")
        self.proc = subprocess.Popen([binary, "-c", conf, "-p", prefix], stderr=subprocess.PIPE)
        self.url = "http://127.0.0.1:%d" % self.port
        for _i in range(100):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise SystemExit("nginx did not start: %s" % self.proc.stderr.read().decode())

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def collections_path(work):
    base = os.path.join(work, "collections")
    link = os.path.join(base, "ansible_collections", "gpufleet", "vllm")
    if not os.path.islink(link):
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink(ROOT, link)
    return base


def run_module(work, args):
    """One module run as Ansible runs it on a target (args file, fresh interpreter); returns (wall_s, result)."""
    path = os.path.join(work, "args.json")
    with open(path, "w") as handle:
        json.dump({"ANSIBLE_MODULE_ARGS": args}, handle)
    env = dict(os.environ, PYTHONPATH=collections_path(work))
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "ansible_collections.gpufleet.vllm.plugins.modules.model_weights",
                           path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, check=False)
    wall = time.perf_counter() - start
    out = proc.stdout.decode()
    result = json.loads(out[out.index("{"):])
    if result.get("failed"):
        raise SystemExit("model_weights failed: %s" % result.get("msg"))
    return wall, result


def timed(cmd):
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def settle():
    """Write back dirty pages so one measurement does not pay for the previous one's writes."""
    subprocess.run(["sync"], check=False)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=4, help="parallel workers for the second download figure")
    parser.add_argument("--verify-workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "gpufleet-weights-bench"),
                        help="data and downloads (needs about 3 x files x size free); data is reused")
    parser.add_argument("--json", help="write the figures here as JSON")
    parser.add_argument("--keep", action="store_true", help="keep the random data for the next run")
    opts = parser.parse_args(argv)

    work = os.path.abspath(opts.workdir)
    data = os.path.join(work, "data")
    size = opts.size_mib * 1024 * 1024
    names = make_data(data, opts.files, size)
    total = opts.files * size
    nginx = Nginx(data, os.path.join(work, "nginx"))
    runs = {"curl_s": [], "curl_sync_s": [], "mw_1_s": [], "mw_n_s": [], "sha256sum_s": [], "full_s": [], "cached_s": [],
            "mw_1_process_s": [], "mw_n_process_s": [], "full_process_s": [], "cached_process_s": []}
    try:
        for rep in range(opts.repeat):
            out = os.path.join(work, "curl")
            shutil.rmtree(out, ignore_errors=True)
            os.makedirs(out)
            settle()
            start = time.perf_counter()
            for name in names:
                subprocess.run(["curl", "-sSf", "-o", os.path.join(out, name), "%s/%s" % (nginx.url, name)], check=True)
            runs["curl_s"].append(time.perf_counter() - start)
            subprocess.run(["sync"], check=False)  # curl does not fsync; this is when its bytes are durable
            runs["curl_sync_s"].append(time.perf_counter() - start)
            shutil.rmtree(out)

            for key, workers in (("mw_1_s", 1), ("mw_n_s", opts.workers)):
                dest = os.path.join(work, "dest")
                shutil.rmtree(dest, ignore_errors=True)
                settle()
                wall, result = run_module(work, {"dest": dest, "source": "http", "url": nginx.url,
                                                 "manifest": nginx.url + "/SHA256SUMS", "workers": workers})
                assert result["downloaded_bytes"] == total, result
                runs[key].append(result["elapsed_s"])
                runs[key.replace("_s", "_process_s")].append(wall)

            files = [os.path.join(dest, n) for n in names]
            settle()
            runs["sha256sum_s"].append(timed(["sha256sum"] + files))
            wall, result = run_module(work, {"dest": dest, "source": "http", "url": nginx.url,
                                             "manifest": nginx.url + "/SHA256SUMS", "verify": "full",
                                             "workers": opts.verify_workers})
            assert result["hashed_bytes"] == total and not result["changed"], result
            runs["full_s"].append(result["elapsed_s"])
            runs["full_process_s"].append(wall)
            wall, result = run_module(work, {"dest": dest, "source": "http", "url": nginx.url,
                                             "manifest": nginx.url + "/SHA256SUMS"})
            assert result["hashed_bytes"] == 0 and not result["changed"], result
            runs["cached_s"].append(result["elapsed_s"])
            runs["cached_process_s"].append(wall)
            print("repeat %d/%d: %s" % (rep + 1, opts.repeat,
                                        ", ".join("%s %.2f" % (k, v[-1]) for k, v in runs.items())), flush=True)
    finally:
        nginx.stop()
        shutil.rmtree(os.path.join(work, "dest"), ignore_errors=True)
        if not opts.keep:
            shutil.rmtree(data, ignore_errors=True)

    med = dict((k, statistics.median(v)) for k, v in runs.items())
    mib = total / 1048576.0
    figures = {
        "files": opts.files, "size_mib": opts.size_mib, "repeat": opts.repeat, "cpus": os.cpu_count(),
        "workers": opts.workers, "verify_workers": opts.verify_workers, "median_s": med, "runs_s": runs,
        "curl_mib_s": mib / med["curl_s"], "mw_1_mib_s": mib / med["mw_1_s"], "mw_n_mib_s": mib / med["mw_n_s"],
        "a_download_1_worker_vs_curl": med["curl_s"] / med["mw_1_s"],
        "a_download_n_workers_vs_curl": med["curl_s"] / med["mw_n_s"],
        "a_parallel_gain": med["mw_1_s"] / med["mw_n_s"],
        "a_download_1_worker_vs_curl_then_sync": med["curl_sync_s"] / med["mw_1_s"],
        "a_download_1_worker_vs_curl_with_process_start": med["curl_s"] / med["mw_1_process_s"],
        "b_verify_full_vs_sha256sum_time_with_process_start": med["full_process_s"] / med["sha256sum_s"],
        "b_verify_full_vs_sha256sum_time": med["full_s"] / med["sha256sum_s"],
        "c_verify_cached_s": med["cached_s"],
        "c_verify_cached_process_s": med["cached_process_s"],
    }
    figures["pass"] = {
        "a (>= 0.9x curl, 1 worker)": figures["a_download_1_worker_vs_curl"] >= 0.9,
        "b (<= 0.6x sha256sum time)": figures["b_verify_full_vs_sha256sum_time"] <= 0.6,
        "c (verify cached < 0.5 s)": figures["c_verify_cached_s"] < 0.5,
    }
    print("")
    print("%d files x %d MiB, %d repeat(s), %d CPUs; medians" % (opts.files, opts.size_mib, opts.repeat,
                                                                 os.cpu_count() or 0))
    print("  a. curl one after another   %7.2f s  %7.1f MiB/s" % (med["curl_s"], figures["curl_mib_s"]))
    print("     curl, then sync          %7.2f s  (bytes on disk, as model_weights guarantees; info only)" % (
        med["curl_sync_s"]))
    print("     model_weights 1 worker   %7.2f s  %7.1f MiB/s  = %.2fx curl (%.2fx counting interpreter start)" % (
        med["mw_1_s"], figures["mw_1_mib_s"], figures["a_download_1_worker_vs_curl"],
        figures["a_download_1_worker_vs_curl_with_process_start"]))
    print("     model_weights %d workers  %7.2f s  %7.1f MiB/s  = %.2fx curl, %.2fx one worker" % (
        opts.workers, med["mw_n_s"], figures["mw_n_mib_s"], figures["a_download_n_workers_vs_curl"],
        figures["a_parallel_gain"]))
    print("  b. sha256sum                %7.2f s" % med["sha256sum_s"])
    print("     verify: full (%d workers) %7.2f s  = %.2fx sha256sum's time (%.2fx counting interpreter start)" % (
        opts.verify_workers, med["full_s"], figures["b_verify_full_vs_sha256sum_time"],
        figures["b_verify_full_vs_sha256sum_time_with_process_start"]))
    print("  c. verify: cached           %7.3f s in the module (%.3f s with interpreter start)" % (
        med["cached_s"], med["cached_process_s"]))
    for name, ok in figures["pass"].items():
        print("  %-30s %s" % (name, "PASS" if ok else "FAIL"))
    if opts.json:
        with open(opts.json, "w") as handle:
            json.dump(figures, handle, indent=1, sort_keys=True)
    return 0 if all(figures["pass"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
