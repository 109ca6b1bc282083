# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A/B of the front door on one machine: two vLLM engines, then the same workload through each front.

Fronts ("arms"), each started fresh per run, the engines' prefix caches reset before every run
(POST /reset_prefix_cache, which needs VLLM_SERVER_DEV_MODE=1: set on these test engines only, loopback):
  nginx_least_conn   the collection's own nginx template (roles/nginx), least_conn over the two engines
  nginx_hash         the same template, `hash $prefix_key consistent`: the key is the first --prefix-key-chars
                     characters of the request body (nginx derives it, no tokenizer round-trip)
  round_robin        nginx (router mode, nginx_upstream_router) -> vllm-router --policy round_robin
  cache_aware        nginx -> vllm-router --policy cache_aware (--cache-threshold, --balance-*-threshold)
  consistent_hash    nginx -> vllm-router --policy consistent_hash, nginx sending the same $prefix_key as the
                     X-Session-Id header (vllm-router 0.1.17 hashes that header)
  power_of_two, random, sticky_least_loaded: nginx -> vllm-router with that policy
Workloads: `vllm bench serve --dataset-name prefix_repetition` (many requests per prefix) at each
--concurrency, --repeats times (the report keeps the WORSE repeat: lower output tok/s), and a no-reuse one
(`--dataset-name random`) for --random-arms. Per run: output tok/s, request/s, TTFT p50/p90, and each engine's
prefix-cache hit rate from its own /metrics (vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total,
delta over the run). Writes OUT/results.json and OUT/results.md (ratios against nginx_least_conn), after
every run, so --budget-seconds (or a kill) still leaves what was measured.

  PYTHONPATH=/path/to/vllm-site python3 tests/gpu/router_ab.py --model /models/qwen3-8b \\
      --router-bin /opt/router/bin/vllm-router --nginx-bin /opt/nginx/sbin/nginx --out /tmp/ab \\
      --engine-args "--load-format dummy --kv-cache-memory-bytes 30000000000" --gpu-memory-utilization 0.44

The tokenizer (--tokenizer, default the model folder) must be one both the engines and the benchmark load.
Standard library plus vLLM (the engines and `vllm bench serve`, from --python) and ansible-core (renders the
nginx template with Ansible's own templating, as the role does).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import shlex
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[2]
NGINX_ROLE = ROOT / "roles" / "nginx"
ROUTER_POLICIES = ("round_robin", "cache_aware", "consistent_hash", "power_of_two", "random", "sticky_least_loaded",
                   "kv_aware")
NGINX_ARMS = ("nginx_least_conn", "nginx_hash")
SAMPLE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)')


# --- small helpers ------------------------------------------------------------------------------------
def log(msg):
    sys.stderr.write("[router_ab %s] %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


def http(url, method="GET", timeout=10):
    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=timeout) as answer:
        return answer.status, answer.read().decode("utf-8", "replace")


def wait_http(url, timeout, proc=None, what=""):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError("%s exited with %s before %s answered" % (what, proc.returncode, url))
        try:
            if http(url, timeout=5)[0] == 200:
                return
        except (urllib.error.URLError, OSError, ValueError):
            pass
        time.sleep(1)
    raise RuntimeError("%s: %s did not answer 200 within %d s" % (what, url, timeout))


def stop(proc, grace=20):
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def spawn(argv, log_path, env=None):
    handle = open(log_path, "ab")
    return subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=env, start_new_session=True)


def engine_counters(url):
    """Prefix-cache hits/queries and finished requests from an engine's own /metrics."""
    text = http(url + "/metrics", timeout=30)[1]
    out = {"hits": 0.0, "queries": 0.0, "requests": 0.0}
    names = {"vllm:prefix_cache_hits_total": "hits", "vllm:prefix_cache_queries_total": "queries",
             "vllm:request_success_total": "requests"}
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match and match.group(1) in names:
            out[names[match.group(1)]] += float(match.group(3))
    return out


# --- nginx from the collection's own template ------------------------------------------------------------
def render_nginx(opts, arm, port, workdir):
    """roles/nginx/templates/nginx.conf.j2 rendered with Ansible's templating, made runnable unprivileged."""
    try:
        import yaml
        from ansible.parsing.dataloader import DataLoader
        from ansible.template import Templar
        try:
            from ansible.template import trust_as_template
        except ImportError:  # ansible-core < 2.19 trusts every string
            def trust_as_template(value):
                return value
    except ImportError as exc:
        sys.exit("router_ab.py renders the collection's nginx template with ansible-core: %s (install ansible-core "
                 "on this Python, or run with the Python that has it)" % exc)
    variables = yaml.safe_load((NGINX_ROLE / "defaults" / "main.yml").read_text())
    variables.update((k, trust_as_template(v) if isinstance(v, str) else v)
                     for k, v in yaml.safe_load((NGINX_ROLE / "vars" / "main.yml").read_text()).items())
    via_router = arm not in NGINX_ARMS
    variables.update(
        ansible_managed="rendered by tests/gpu/router_ab.py", inventory_hostname="ab",
        # A router arm measures the router alone: no instances as backup servers (the role's router mode adds them).
        nginx_instances=[] if via_router else [{"name": "e%d" % i, "port": p} for i, p in enumerate(opts.engine_ports)],
        nginx_upstream_router="127.0.0.1:%d" % opts.router_port if via_router else "",
        nginx_listen_port=port, nginx_balancing="least_conn", nginx_session_header="",
        nginx_access_log=str(workdir / "access.log"), nginx_error_log=str(workdir / "error.log"),
        nginx_client_max_body_size="64m")
    conf = Templar(loader=DataLoader(), variables=variables).template(
        trust_as_template((NGINX_ROLE / "templates" / "nginx.conf.j2").read_text()))
    # Root: workers as root (they write the temp folders here); otherwise nginx ignores `user` with a warning.
    conf = re.sub(r"(?m)^user \S+;\n", "user root;\n" if os.geteuid() == 0 else "", conf)
    conf = re.sub(r"(?m)^pid \S+;", "pid %s;" % (workdir / "nginx.pid"), conf)
    conf = re.sub(r"(?m)^\s*include /etc/nginx/modules-enabled/\*\.conf;\n", "", conf)
    conf = re.sub(r"(?m)^\s*include /etc/nginx/mime\.types;\n", "", conf)
    temp = "".join("    %s_temp_path %s;\n" % (k, workdir / ("tmp-" + k)) for k in
                   ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    keyed = arm in ("nginx_hash", "consistent_hash")
    if keyed:
        # The key: the first N characters of the body ({"model": ..., "prompt": "<shared prefix>...). nginx has
        # the body only once it read it: request buffering on, the whole body in memory.
        temp += ('    map $request_body $prefix_key {\n        "~^(?<k>.{1,%d})" $k;\n        default "";\n    }\n'
                 % opts.prefix_key_chars)
        conf = conf.replace("proxy_request_buffering off;\n        client_body_buffer_size 16k;",
                            "proxy_request_buffering on;\n        client_body_buffer_size 64m;")
    if arm == "nginx_hash":
        conf = conf.replace("        least_conn;\n", "        hash $prefix_key consistent;\n", 1)
    if arm == "consistent_hash":
        conf = conf.replace("proxy_set_header X-Real-IP $remote_addr;",
                            "proxy_set_header X-Real-IP $remote_addr;\n        proxy_set_header X-Session-Id $prefix_key;")
    conf = conf.replace("http {\n", "http {\n" + temp, 1)
    path = workdir / "nginx.conf"
    path.write_text(conf)
    return path


class Front(object):
    """nginx (and, for a router arm, vllm-router behind it) for one run."""

    def __init__(self, opts, arm, workdir):
        self.opts, self.arm, self.workdir = opts, arm, workdir
        self.procs = []

    def start(self):
        opts = self.opts
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.arm not in NGINX_ARMS:
            argv = ([opts.router_bin, "--host", "127.0.0.1", "--port", str(opts.router_port), "--worker-urls"]
                    + opts.engine_urls
                    + ["--policy", self.arm, "--prometheus-host", "127.0.0.1", "--prometheus-port",
                       str(opts.router_port + 1), "--log-level", "warning"])
            if self.arm == "cache_aware":
                argv += ["--cache-threshold", str(opts.cache_threshold),
                         "--balance-abs-threshold", str(opts.balance_abs_threshold),
                         "--balance-rel-threshold", str(opts.balance_rel_threshold)]
            argv += shlex.split(opts.router_args)
            proc = spawn(argv, self.workdir / "router.log")
            self.procs.append(proc)
            wait_http("http://127.0.0.1:%d/health" % opts.router_port, 60, proc, "vllm-router")
        conf = render_nginx(opts, self.arm, opts.front_port, self.workdir)
        # -e: the error log before the config is read (the binary's built-in path may not exist on this host)
        base = [opts.nginx_bin, "-e", str(self.workdir / "error.log"), "-p", str(self.workdir), "-c", str(conf)]
        check = subprocess.run(base + ["-t", "-q"], capture_output=True, text=True, check=False)
        if check.returncode != 0:
            raise RuntimeError("nginx -t refused %s: %s" % (conf, check.stderr.strip()))
        proc = spawn(base + ["-g", "daemon off;"],
                     self.workdir / "nginx.out")
        self.procs.append(proc)
        wait_http("http://127.0.0.1:%d/gpufleet/health" % opts.front_port, 30, proc, "nginx")
        return "http://127.0.0.1:%d" % opts.front_port

    def stop(self):
        for proc in reversed(self.procs):
            stop(proc)
        self.procs = []


# --- engines -------------------------------------------------------------------------------------------------
def _engine_wait(opts):
    """Seconds the engines may still take to answer: --engine-timeout, within --budget-seconds."""
    return max(5, min(opts.engine_timeout, opts.budget_seconds - (time.time() - opts.t0) - 10))


def start_engines(opts, out, procs):
    """Start both engines into ``procs`` (the caller stops them, also when this fails) and return their KV tokens."""
    for i, port in enumerate(opts.engine_ports):
        argv = [opts.python, "-m", "vllm.entrypoints.cli.main", "serve", opts.model, "--served-model-name",
                opts.served_name, "--host", "127.0.0.1", "--port", str(port), "--max-model-len",
                str(opts.max_model_len), "--tokenizer", opts.tokenizer, "--enable-prefix-caching"]
        env = dict(os.environ, VLLM_SERVER_DEV_MODE="1")  # /reset_prefix_cache; loopback test engines only
        if opts.platform == "cpu":
            env.update(VLLM_TARGET_DEVICE="cpu", VLLM_CPU_KVCACHE_SPACE=str(opts.cpu_kv_gib),
                       VLLM_CPU_OMP_THREADS_BIND=opts.cpu_binds[i % len(opts.cpu_binds)])
        else:
            argv += ["--gpu-memory-utilization", str(opts.gpu_memory_utilization)]
        argv += shlex.split(opts.engine_args)
        log("engine %d: %s" % (i, " ".join(shlex.quote(a) for a in argv)))
        procs.append(spawn(argv, out / ("engine-%d.log" % i), env))
        if opts.platform == "cuda" and i == 0:
            # The second engine sizes its KV from what the first left free: start them one after the other.
            wait_http("http://127.0.0.1:%d/health" % port, _engine_wait(opts), procs[0], "engine 0")
    for i, port in enumerate(opts.engine_ports):
        wait_http("http://127.0.0.1:%d/health" % port, _engine_wait(opts), procs[i], "engine %d" % i)
    kv = []
    for i in range(len(opts.engine_ports)):
        found = re.findall(r"KV cache size: ([0-9,]+) tokens", (out / ("engine-%d.log" % i)).read_text(errors="replace"))
        kv.append(int(found[-1].replace(",", "")) if found else None)
    return kv


def reset_caches(opts):
    for url in opts.engine_urls:
        status = http(url + "/reset_prefix_cache", method="POST", timeout=60)[0]
        if status != 200:
            raise RuntimeError("%s/reset_prefix_cache answered %s (VLLM_SERVER_DEV_MODE=1 is set)" % (url, status))


# --- one run -------------------------------------------------------------------------------------------------
def bench_argv(opts, base_url, workload, concurrency, result_dir, name):
    argv = [opts.python, "-m", "vllm.entrypoints.cli.main", "bench", "serve", "--backend", "vllm",
            "--base-url", base_url, "--endpoint", "/v1/completions", "--model", opts.served_name,
            "--tokenizer", opts.tokenizer, "--max-concurrency", str(concurrency), "--request-rate", "inf",
            "--seed", str(opts.seed), "--ignore-eos", "--disable-tqdm", "--percentile-metrics", "ttft,tpot,e2el",
            "--metric-percentiles", "50,90,99", "--save-result", "--result-dir", str(result_dir),
            "--result-filename", name, "--ready-check-timeout-sec", "0"]
    if workload == "prefix":
        argv += ["--dataset-name", "prefix_repetition", "--num-prompts", str(opts.num_prefixes * opts.prompts_per_prefix),
                 "--prefix-repetition-prefix-len", str(opts.prefix_len),
                 "--prefix-repetition-suffix-len", str(opts.suffix_len),
                 "--prefix-repetition-num-prefixes", str(opts.num_prefixes),
                 "--prefix-repetition-output-len", str(opts.output_len)]
    else:
        argv += ["--dataset-name", "random", "--num-prompts", str(opts.random_num_prompts),
                 "--random-input-len", str(opts.random_input_len), "--random-output-len", str(opts.random_output_len)]
    return argv


def one_run(opts, out, arm, workload, concurrency, repeat):
    name = "%s-%s-c%d-r%d" % (workload, arm, concurrency, repeat)
    workdir = out / "runs" / name
    workdir.mkdir(parents=True, exist_ok=True)
    reset_caches(opts)
    front = Front(opts, arm, workdir)
    started = time.time()
    try:
        base = front.start()
        before = [engine_counters(u) for u in opts.engine_urls]
        proc = subprocess.run(bench_argv(opts, base, workload, concurrency, workdir, name + ".json"),
                              capture_output=True, text=True, check=False,
                              timeout=max(5, min(opts.run_timeout, opts.budget_seconds - (time.time() - opts.t0))))
        (workdir / "bench.log").write_text(proc.stdout + proc.stderr)
        after = [engine_counters(u) for u in opts.engine_urls]
    finally:
        front.stop()
    if proc.returncode != 0:
        raise RuntimeError("vllm bench serve failed (%s), see %s" % (proc.returncode, workdir / "bench.log"))
    result = json.loads((workdir / (name + ".json")).read_text())
    engines = []
    for b, a in zip(before, after):
        d = dict((k, a[k] - b[k]) for k in a)
        d["hit_rate"] = round(d["hits"] / d["queries"], 4) if d["queries"] else None
        engines.append(d)
    total_q = sum(e["queries"] for e in engines)
    return {
        "arm": arm, "workload": workload, "concurrency": concurrency, "repeat": repeat, "seconds": round(time.time() - started, 1),
        "output_throughput": result.get("output_throughput"), "request_throughput": result.get("request_throughput"),
        "completed": result.get("completed"), "failed": result.get("failed", 0),
        "ttft_p50_ms": result.get("p50_ttft_ms", result.get("median_ttft_ms")), "ttft_p90_ms": result.get("p90_ttft_ms"),
        "tpot_p50_ms": result.get("p50_tpot_ms", result.get("median_tpot_ms")),
        "engines": engines,
        "hit_rate": round(sum(e["hits"] for e in engines) / total_q, 4) if total_q else None,
    }


# --- report ---------------------------------------------------------------------------------------------------
def worse(rows):
    """Per (workload, arm, concurrency), the repeat with the lower output throughput."""
    picked = {}
    for row in rows:
        key = (row["workload"], row["arm"], row["concurrency"])
        if key not in picked or (row["output_throughput"] or 0) < (picked[key]["output_throughput"] or 0):
            picked[key] = row
    return picked


def write_report(opts, out, meta, rows, stopped):
    picked = worse(rows)
    (out / "results.json").write_text(json.dumps({"meta": meta, "runs": rows, "stopped_early": stopped,
                                                  "worse_of_repeats": list(picked.values())}, indent=2) + "\n")
    lines = ["# Front-door A/B (tests/gpu/router_ab.py)", "",
             "Two engines (%s, KV tokens logged: %s), model %s; prefix workload: %d prefixes x %d tokens, suffix %d, "
             "output %d, %d prompts; working set %d tokens. Worse of %d repeat(s) per cell; ratios vs nginx_least_conn "
             "at the same concurrency.%s" % (
                 opts.platform, meta.get("kv_tokens"), opts.model, opts.num_prefixes, opts.prefix_len, opts.suffix_len,
                 opts.output_len, opts.num_prefixes * opts.prompts_per_prefix, opts.num_prefixes * opts.prefix_len,
                 opts.repeats, " STOPPED EARLY: %s." % stopped if stopped else ""), "",
             "| workload | front | conc. | output tok/s | x nginx | TTFT p50 ms | TTFT p90 ms | p50 x lower | hit rate | per engine: requests, hit rate |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for key in sorted(picked, key=lambda k: (k[0], k[2], k[1])):
        row = picked[key]
        ref = picked.get((key[0], "nginx_least_conn", key[2]))
        ratio = "%.2f" % (row["output_throughput"] / ref["output_throughput"]) if ref and ref["output_throughput"] else "-"
        lower = ("%.2f" % (ref["ttft_p50_ms"] / row["ttft_p50_ms"])
                 if ref and ref.get("ttft_p50_ms") and row.get("ttft_p50_ms") else "-")
        per = " / ".join("%d req, %s" % (e["requests"], "-" if e["hit_rate"] is None else "%.3f" % e["hit_rate"])
                         for e in row["engines"])
        lines.append("| %s | %s | %d | %.1f | %s | %.1f | %.1f | %s | %s | %s |" % (
            row["workload"], row["arm"], row["concurrency"], row["output_throughput"] or 0, ratio,
            row["ttft_p50_ms"] or 0, row["ttft_p90_ms"] or 0, lower, row["hit_rate"], per))
    (out / "results.md").write_text("\n".join(lines) + "\n")


# --- main -----------------------------------------------------------------------------------------------------
def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.splitlines()[1:]))
    a = p.add_argument
    a("--model", required=True, help="model folder (config.json, weights or --load-format dummy)")
    a("--tokenizer", default="", help="tokenizer folder (default: the model folder)")
    a("--served-name", default="ab-model")
    a("--out", required=True)
    a("--python", default=sys.executable, help="Python with vLLM importable (PYTHONPATH is passed through)")
    a("--router-bin", default="vllm-router")
    a("--nginx-bin", default="nginx")
    a("--platform", choices=["cuda", "cpu"], default="cuda")
    a("--gpu-memory-utilization", type=float, default=0.44, help="cuda: per engine, both on the same GPU")
    a("--cpu-kv-gib", type=int, default=1, help="cpu: VLLM_CPU_KVCACHE_SPACE per engine")
    a("--cpu-binds", default="auto|auto", help="cpu: VLLM_CPU_OMP_THREADS_BIND per engine, |-separated")
    a("--engine-args", default="", help="more `vllm serve` flags for both engines (e.g. the plan's KV size flag)")
    a("--max-model-len", type=int, default=16384)
    a("--engine-timeout", type=int, default=900)
    a("--port-base", type=int, default=8100, help="engines PORT, PORT+1; router PORT+10 (+11 metrics); nginx PORT+20")
    a("--num-prefixes", type=int, default=24)
    a("--prefix-len", type=int, default=12000)
    a("--suffix-len", type=int, default=64)
    a("--output-len", type=int, default=64)
    a("--prompts-per-prefix", type=int, default=10)
    a("--concurrency", default="16,32")
    a("--repeats", type=int, default=2)
    a("--arms", default="nginx_least_conn,round_robin,cache_aware,consistent_hash,nginx_hash")
    a("--cache-threshold", type=float, default=0.3)
    a("--balance-abs-threshold", type=int, default=64)
    a("--balance-rel-threshold", type=float, default=1.5)
    a("--router-args", default="", help="more vllm-router flags for every router arm")
    a("--prefix-key-chars", type=int, default=512, help="characters of the body nginx hashes (nginx_hash, consistent_hash)")
    a("--random-arms", default="nginx_least_conn,cache_aware", help="arms for the no-reuse workload ('' = none)")
    a("--random-input-len", type=int, default=4096)
    a("--random-output-len", type=int, default=64)
    a("--random-num-prompts", type=int, default=240)
    a("--seed", type=int, default=0)
    a("--run-timeout", type=int, default=1800)
    a("--budget-seconds", type=float, default=1e9, help="stop before a run that would end past this budget")
    opts = p.parse_args(argv)
    opts.tokenizer = opts.tokenizer or opts.model
    opts.engine_ports = [opts.port_base, opts.port_base + 1]
    opts.engine_urls = ["http://127.0.0.1:%d" % port for port in opts.engine_ports]
    opts.router_port = opts.port_base + 10
    opts.front_port = opts.port_base + 20
    opts.cpu_binds = opts.cpu_binds.split("|")
    opts.concurrencies = [int(c) for c in opts.concurrency.split(",") if c]
    opts.arm_list = [x for x in opts.arms.split(",") if x]
    opts.random_arm_list = [x for x in opts.random_arms.split(",") if x]
    for arm in opts.arm_list + opts.random_arm_list:
        if arm not in NGINX_ARMS + ROUTER_POLICIES:
            p.error("unknown arm %r: use %s" % (arm, ", ".join(NGINX_ARMS + ROUTER_POLICIES)))
    return opts


def main(argv=None):
    opts = parse(sys.argv[1:] if argv is None else argv)
    t0 = opts.t0 = time.time()
    out = pathlib.Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    plan = [(arm, "prefix", c, r) for c in opts.concurrencies for r in range(opts.repeats) for arm in opts.arm_list]
    plan += [(arm, "random", c, r) for c in opts.concurrencies[-1:] for r in range(opts.repeats) for arm in opts.random_arm_list]
    meta = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "argv": sys.argv, "plan_runs": len(plan)}
    rows, stopped, engines = [], "", []
    try:
        kv = start_engines(opts, out, engines)
        meta.update(kv_tokens=kv, engine_start_seconds=round(time.time() - t0, 1),
                    working_set_tokens=opts.num_prefixes * opts.prefix_len)
        if all(kv) and not (max(kv) < opts.num_prefixes * opts.prefix_len <= sum(kv)):
            log("NOTE: the working set (%d tokens) should exceed one engine's KV (%s) and fit in both: size the KV "
                "(--engine-args / --cpu-kv-gib) so it does" % (opts.num_prefixes * opts.prefix_len, kv))
        longest = 0.0
        for arm, workload, concurrency, repeat in plan:
            left = opts.budget_seconds - (time.time() - t0)
            if left < max(longest * 1.2, 5):
                stopped = "budget: %.0f s left, a run takes up to %.0f s; %d of %d runs done" % (left, longest, len(rows), len(plan))
                log(stopped)
                break
            log("run %d/%d: %s %s concurrency %d repeat %d" % (len(rows) + 1, len(plan), workload, arm, concurrency, repeat))
            row = one_run(opts, out, arm, workload, concurrency, repeat)
            longest = max(longest, row["seconds"])
            rows.append(row)
            log("  %.1f output tok/s, TTFT p50 %.1f ms, hit rate %s, per engine %s" % (
                row["output_throughput"] or 0, row["ttft_p50_ms"] or 0, row["hit_rate"],
                [(e["requests"], e["hit_rate"]) for e in row["engines"]]))
            write_report(opts, out, meta, rows, stopped)
    except (RuntimeError, subprocess.SubprocessError, OSError) as exc:
        stopped = "error: %s" % exc
        log(stopped)
    finally:
        for proc in engines:
            stop(proc, grace=30)
        meta["seconds"] = round(time.time() - t0, 1)
        write_report(opts, out, meta, rows, stopped)
    log("wrote %s and %s (%d runs, %.0f s)" % (out / "results.json", out / "results.md", len(rows), time.time() - t0))
    return 1 if stopped.startswith("error") else 0


if __name__ == "__main__":
    sys.exit(main())
