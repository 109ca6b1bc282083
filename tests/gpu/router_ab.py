# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A/B of the front door on one machine: two vLLM engines, then the same workload through each front.

Fronts ("arms"), each started fresh per run, the engines' prefix caches reset before every run
(POST /reset_prefix_cache, which needs VLLM_SERVER_DEV_MODE=1: set on these test engines only, loopback):
  nginx_least_conn   the collection's own nginx template (roles/nginx), least_conn over the two engines
  nginx_default      the same template with the role's defaults: a request with an `X-Session-Id` header goes to
                     the engine the header's value hashes to (`nginx_session_header`, consistent), else least_conn
  nginx_hash         the same template, `hash $prefix_key consistent`: the key is the first --prefix-key-chars
                     characters of the request body (nginx derives it, no tokenizer round-trip)
  round_robin        nginx (router mode, nginx_upstream_router) -> vllm-router --policy round_robin
  cache_aware        nginx -> vllm-router --policy cache_aware (--cache-threshold, --balance-*-threshold)
  consistent_hash    nginx -> vllm-router --policy consistent_hash, nginx sending the same $prefix_key as the
                     X-Session-Id header (vllm-router 0.1.17 hashes that header)
  cache_aware_tight  cache_aware with --tight-abs-threshold / --tight-rel-threshold (load balancing kicks in sooner)
  consistent_hash_header  nginx -> vllm-router --policy consistent_hash on the client's own X-Session-Id header
  power_of_two, random, sticky_least_loaded: nginx -> vllm-router with that policy
  haproxy_bounded    nginx (router mode) -> HAProxy 2.6 (--haproxy-bin): a consistent hash with bounded load
                     (`hash-balance-factor` --haproxy-balance-factor: no engine gets more than that percentage of the
                     average number of requests in flight; the hash's next engine takes the rest). The key: the
                     request's X-Session-Id header when it has one, else the first --prefix-key-chars bytes of its body
Traffic shapes (--shapes; the default `prefix,random` is the original A/B):
  prefix         `vllm bench serve --dataset-name prefix_repetition` (many requests per distinct long prefix) at each
                 --concurrency, arms --arms
  sysprompt      `vllm bench serve --dataset-name random --random-prefix-len P --random-input-len I`: one shared
                 system prompt + distinct documents, --sysprompt-concurrency, arms --sysprompt-arms
  chat_header    multi-turn chat sessions (this script's own streaming client, not vLLM's): --chat-sessions
                 sessions of --chat-turns turns, all starting with the same --chat-system-tokens system prompt; each
                 turn = the previous turns + the previous answer + --chat-user-tokens new words; turns of a session
                 sequential, sessions concurrent (started --chat-stagger seconds apart); every request carries
                 `X-Session-Id: <the session's id>`; arms --chat-arms. --chat-clients N (< sessions): N clients
                 take the sessions' turns (a session's next turn goes to the back of the line; --chat-order
                 round_robin takes the front one, random any waiting one), as vLLM's multi-turn benchmark does
                 with --num-clients below --max-active-conversations: more conversations than requests in flight
  chat_noheader  the same sessions without the header
  random         no reuse (`--dataset-name random`), at the last --concurrency, arms --random-arms
Each shape runs --repeats times, every arm of a repeat on the same prompts (same seed); the report keeps the WORSE
repeat (lower output tok/s) and pairs ratios per repeat. Runs go repeat by repeat (all shapes and arms of repeat 0,
then repeat 1), so a budget stop loses the last repeat first. Per run: output tok/s, request/s, TTFT p50/p90,
failed/sent, each engine's requests and prefix-cache hit rate from its own /metrics
(vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total, delta over the run), the balance (the busier
engine's share of the requests) and the shape's ceiling hit rate (shape_ceiling). Writes OUT/results.json and
OUT/results.md (ratios against nginx_least_conn), after every run, so --budget-seconds (or a kill) still leaves
what was measured. --keep-engines leaves the engines running (own process sessions); a later call with
--reuse-engines (and the same --engine-log-dir) measures on them when both still answer, else starts its own.

  PYTHONPATH=/path/to/vllm-site python3 tests/gpu/router_ab.py --model /models/qwen3-8b \\
      --router-bin /opt/router/bin/vllm-router --nginx-bin /opt/nginx/sbin/nginx --out /tmp/ab \\
      --engine-args "--load-format dummy --kv-cache-memory-bytes 30000000000" --gpu-memory-utilization 0.44

The tokenizer (--tokenizer, default the model folder) must be one both the engines and the benchmark load.
Standard library plus vLLM (the engines and `vllm bench serve`, from --python) and ansible-core (renders the
nginx template with Ansible's own templating, as the role does).
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import random
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[2]
NGINX_ROLE = ROOT / "roles" / "nginx"
ROUTER_POLICIES = ("round_robin", "cache_aware", "consistent_hash", "power_of_two", "random", "sticky_least_loaded",
                   "kv_aware")
NGINX_ARMS = ("nginx_least_conn", "nginx_hash", "nginx_default")
# Router arms that are a policy with other settings: arm -> vllm-router --policy
ARM_POLICY = {"cache_aware_tight": "cache_aware", "consistent_hash_header": "consistent_hash"}
HAPROXY_ARMS = ("haproxy_bounded",)
ALL_ARMS = NGINX_ARMS + ROUTER_POLICIES + tuple(ARM_POLICY) + HAPROXY_ARMS
SHAPES = ("prefix", "sysprompt", "chat_header", "chat_noheader", "random")
BLOCK = 16  # vLLM's KV block (tokens): prefix-cache hits are whole blocks
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
        nginx_listen_port=port,
        nginx_access_log=str(workdir / "access.log"), nginx_error_log=str(workdir / "error.log"),
        nginx_client_max_body_size="64m")
    if arm != "nginx_default":
        # Every other arm: least_conn alone (no session upstream); nginx_default keeps the role's defaults
        # (nginx_balancing least_conn + nginx_session_header X-Session-Id).
        variables.update(nginx_balancing="least_conn", nginx_session_header="")
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


def render_haproxy(opts, workdir):
    """The haproxy_bounded arm's HAProxy config: on the router's port, in front of the two engines."""
    servers = "".join("    server e%d 127.0.0.1:%d\n" % (i, port) for i, port in enumerate(opts.engine_ports))
    conf = (
        "global\n"
        "    maxconn 4096\n"
        "    pidfile %(pid)s\n"
        "defaults\n"
        "    mode http\n"
        "    timeout connect 5s\n"
        "    timeout client %(timeout)ds\n"
        "    timeout server %(timeout)ds\n"
        "frontend ab\n"
        "    bind 127.0.0.1:%(port)d\n"
        "    monitor-uri /gpufleet/haproxy-health\n"
        # the body's head is only there once HAProxy waited for it (up to its buffer, 16 kB by default)
        "    option http-buffer-request\n"
        "    http-request set-var(txn.key) req.hdr(X-Session-Id) if { req.hdr(X-Session-Id) -m len gt 0 }\n"
        "    http-request set-var(txn.key) req.body,bytes(0,%(chars)d) unless { var(txn.key) -m found }\n"
        "    default_backend engines\n"
        "backend engines\n"
        "    balance hash var(txn.key)\n"
        "    hash-type consistent\n"
        "    hash-balance-factor %(factor)d\n"
        "%(servers)s"
        # the requests each engine holds now (scur), for tests that must send below the bound
        "listen stats\n"
        "    bind 127.0.0.1:%(stats_port)d\n"
        "    stats enable\n"
        "    stats uri /stats\n")
    conf %= dict(pid=workdir / "haproxy.pid", timeout=opts.run_timeout, port=opts.router_port,
                 stats_port=opts.router_port + 1,
                 chars=opts.prefix_key_chars, factor=opts.haproxy_balance_factor, servers=servers)
    path = workdir / "haproxy.cfg"
    path.write_text(conf)
    return path


def router_argv(opts, arm):
    """vllm-router's command line for a router arm (ARM_POLICY maps an arm to its policy)."""
    argv = ([opts.router_bin, "--host", "127.0.0.1", "--port", str(opts.router_port), "--worker-urls"]
            + opts.engine_urls
            + ["--policy", ARM_POLICY.get(arm, arm), "--prometheus-host", "127.0.0.1", "--prometheus-port",
               str(opts.router_port + 1), "--log-level", "warning"])
    if arm == "cache_aware":
        argv += ["--cache-threshold", str(opts.cache_threshold),
                 "--balance-abs-threshold", str(opts.balance_abs_threshold),
                 "--balance-rel-threshold", str(opts.balance_rel_threshold)]
    if arm == "cache_aware_tight":
        argv += ["--cache-threshold", str(opts.cache_threshold),
                 "--balance-abs-threshold", str(opts.tight_abs_threshold),
                 "--balance-rel-threshold", str(opts.tight_rel_threshold)]
    return argv + shlex.split(opts.router_args)


class Front(object):
    """nginx (and, for a router arm, vllm-router behind it) for one run."""

    def __init__(self, opts, arm, workdir):
        self.opts, self.arm, self.workdir = opts, arm, workdir
        self.procs = []

    def start(self):
        opts = self.opts
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.arm in HAPROXY_ARMS:
            cfg = render_haproxy(opts, self.workdir)
            check = subprocess.run([opts.haproxy_bin, "-c", "-q", "-f", str(cfg)], capture_output=True, text=True,
                                   check=False)
            if check.returncode != 0:
                raise RuntimeError("haproxy -c refused %s: %s" % (cfg, (check.stdout + check.stderr).strip()))
            proc = spawn([opts.haproxy_bin, "-db", "-f", str(cfg)], self.workdir / "haproxy.log")
            self.procs.append(proc)
            wait_http("http://127.0.0.1:%d/gpufleet/haproxy-health" % opts.router_port, 30, proc, "haproxy")
        elif self.arm not in NGINX_ARMS:
            argv = router_argv(opts, self.arm)
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


def engines_answer(opts):
    for url in opts.engine_urls:
        try:
            if http(url + "/health", timeout=5)[0] != 200:
                return False
        except (urllib.error.URLError, OSError, ValueError):
            return False
    return True


def logged_kv(opts):
    kv = []
    for i in range(len(opts.engine_ports)):
        path = opts.engine_log_dir / ("engine-%d.log" % i)
        found = re.findall(r"KV cache size: ([0-9,]+) tokens", path.read_text(errors="replace")) if path.exists() else []
        kv.append(int(found[-1].replace(",", "")) if found else None)
    return kv


def start_engines(opts, out, procs):
    """Start both engines into ``procs`` (the caller stops them, also when this fails) and return their KV tokens."""
    opts.engine_log_dir.mkdir(parents=True, exist_ok=True)
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
        procs.append(spawn(argv, opts.engine_log_dir / ("engine-%d.log" % i), env))
        if opts.platform == "cuda" and i == 0:
            # The second engine sizes its KV from what the first left free: start them one after the other.
            wait_http("http://127.0.0.1:%d/health" % port, _engine_wait(opts), procs[0], "engine 0")
    for i, port in enumerate(opts.engine_ports):
        wait_http("http://127.0.0.1:%d/health" % port, _engine_wait(opts), procs[i], "engine %d" % i)
    if opts.keep_engines:
        (opts.engine_log_dir / "engines.pid").write_text("".join("%d\n" % p.pid for p in procs))
    return logged_kv(opts)


def reset_caches(opts):
    for url in opts.engine_urls:
        status = http(url + "/reset_prefix_cache", method="POST", timeout=60)[0]
        if status != 200:
            raise RuntimeError("%s/reset_prefix_cache answered %s (VLLM_SERVER_DEV_MODE=1 is set)" % (url, status))


# --- the shapes' pure parts: ceilings, balance, percentiles, chat conversations ------------------------------------
def whole_blocks(tokens, block=BLOCK):
    """Tokens of a prefix the prefix cache can hold: whole blocks only."""
    return tokens // block * block


def prefix_ceiling(per_prefix, prefix_len, suffix_len, block=BLOCK):
    """prefix_repetition: each prefix computed once, every later request of it a hit (the prefix's whole blocks)."""
    return (per_prefix - 1) * whole_blocks(prefix_len, block) / float(per_prefix * (prefix_len + suffix_len))


def sysprompt_ceiling(num_prompts, prefix_len, input_len, engines=2, block=BLOCK):
    """One shared head + distinct documents, spread over `engines`: the head computed once per engine."""
    return (num_prompts - engines) * whole_blocks(prefix_len, block) / float(num_prompts * (prefix_len + input_len))


def chat_ceiling(sessions, turns, system, user, answer, engines=2, block=BLOCK):
    """Multi-turn chat: turn t's prompt = system + (t-1) x (user + answer) + user. At best a turn finds the previous
    turn's prompt and answer cached (whole blocks) and a session's first turn finds the system prompt, computed once
    per engine (a front that uses both engines computes it twice)."""
    queried = hits = 0
    for turn in range(1, turns + 1):
        queried += sessions * (system + (turn - 1) * (user + answer) + user)
        if turn > 1:
            hits += sessions * whole_blocks(system + (turn - 1) * (user + answer), block)
    hits += (sessions - min(engines, sessions)) * whole_blocks(system, block)
    return hits / float(queried)


def shape_ceiling(opts, shape):
    if shape == "prefix":
        return prefix_ceiling(opts.prompts_per_prefix, opts.prefix_len, opts.suffix_len)
    if shape == "sysprompt":
        return sysprompt_ceiling(opts.sysprompt_num_prompts, opts.sysprompt_prefix_len, opts.sysprompt_input_len)
    if shape.startswith("chat"):
        return chat_ceiling(opts.chat_sessions, opts.chat_turns, opts.chat_system_tokens, opts.chat_user_tokens,
                            opts.chat_answer_tokens)
    return 0.0


def balance(requests):
    """The busier engine's share of the requests (0.5 = an even split, 1.0 = everything on one engine)."""
    total = sum(requests)
    return round(max(requests) / float(total), 4) if total else None


def percentile(values, q):
    """numpy's default (linear) percentile, as `vllm bench serve` reports them."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def words(rng, count, vocab):
    """`count` words of the stand-in word-level tokenizer (w7 ... w<vocab-1>: one token each)."""
    return " ".join("w%d" % rng.randrange(7, vocab) for index in range(count))


def chat_texts(seed, sessions, turns, system_tokens, user_tokens, vocab):
    """(system prompt, [[user text of each turn] per session]): the same for every arm and repeat of a seed."""
    system = words(random.Random("%d-system" % seed), system_tokens, vocab)
    users = [[words(random.Random("%d-%d-%d" % (seed, s, t)), user_tokens, vocab) for t in range(turns)]
             for s in range(sessions)]
    return system, users


def session_ids(seed, repeat, sessions):
    """A session's X-Session-Id: random per repeat (each repeat is another draw of the hash's split)."""
    rng = random.Random("%d-ids-%d" % (seed, repeat))
    return ["%032x" % rng.getrandbits(128) for index in range(sessions)]


def conversation(system, history, user):
    """The prompt of a turn: the system prompt, every earlier turn's user text and answer, then the new user text."""
    parts = [system]
    for said, answered in history:
        parts += [said, answered]
    parts.append(user)
    return " ".join(part.strip() for part in parts if part.strip())


# --- the chat client (standard library, streaming) -------------------------------------------------------------
def stream_completion(base_url, body, headers, timeout):
    """POST a streaming /v1/completions; {ttft_ms, e2el_ms, text, prompt_tokens, completion_tokens, error}."""
    req = urllib.request.Request(base_url + "/v1/completions", data=json.dumps(body).encode(), method="POST",
                                 headers=dict({"Content-Type": "application/json"}, **headers))
    started = time.time()
    out = {"ttft_ms": None, "text": "", "prompt_tokens": None, "completion_tokens": None, "error": None}
    try:
        with urllib.request.urlopen(req, timeout=timeout) as answer:
            for raw in answer:
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                chunk = json.loads(data)
                if chunk.get("error"):
                    out["error"] = str(chunk["error"])[:300]
                for choice in chunk.get("choices") or []:
                    if choice.get("text"):
                        if out["ttft_ms"] is None:
                            out["ttft_ms"] = (time.time() - started) * 1000.0
                        out["text"] += choice["text"]
                usage = chunk.get("usage")
                if usage:
                    out["prompt_tokens"] = usage.get("prompt_tokens")
                    out["completion_tokens"] = usage.get("completion_tokens")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        out["error"] = "%s: %s" % (type(exc).__name__, exc)
    out["e2el_ms"] = (time.time() - started) * 1000.0
    if out["error"] is None and (out["completion_tokens"] is None or out["ttft_ms"] is None):
        out["error"] = "stream ended without text or usage"
    return out


class TurnLine:
    """The sessions' turns in the order clients take them: each client takes the session at the front of the line,
    sends its next turn, and puts the session at the back while turns are left (round robin, as vLLM's multi-turn
    benchmark samples its active conversations), or with `rng` a random waiting session (its `random` sampling: a
    round robin's fixed order can bring a session back just as the engine it last used frees a slot). Thread-safe.
    take() returns None when no session waits in line: that client stops, and every session still in flight is put
    back by the client that sent its turn, which then takes from the line again, so no turn is left unsent."""

    def __init__(self, sessions, turns, rng=None):
        self._line = collections.deque(range(sessions))
        self._next_turn = [0] * sessions
        self._turns = turns
        self._rng = rng  # a random.Random: take a random waiting session instead of the front one
        self._lock = threading.Lock()

    def take(self):
        with self._lock:
            if not self._line:
                return None
            if self._rng is not None:
                self._line.rotate(-self._rng.randrange(len(self._line)))
            session = self._line.popleft()
            turn = self._next_turn[session]
            self._next_turn[session] += 1
            return session, turn

    def done(self, session):
        """The session's turn was answered: back in line if it has turns left."""
        with self._lock:
            if self._next_turn[session] < self._turns:
                self._line.append(session)


def run_chat(opts, base_url, header, repeat, timeout):
    """--chat-clients clients (one per session by default) taking the sessions' turns from one TurnLine; a session's
    turns in order, each with the previous answers; vLLM-like result figures + per-request records."""
    system, users = chat_texts(opts.seed, opts.chat_sessions, opts.chat_turns, opts.chat_system_tokens,
                               opts.chat_user_tokens, opts.chat_vocab)
    ids = session_ids(opts.seed, repeat, opts.chat_sessions)
    histories = [[] for index in range(opts.chat_sessions)]
    line = TurnLine(opts.chat_sessions, opts.chat_turns,
                    random.Random("%d-order-%d" % (opts.seed, repeat)) if opts.chat_order == "random" else None)
    records = []
    lock = threading.Lock()

    def send(session, turn):
        user = users[session][turn]
        body = {"model": opts.served_name, "prompt": conversation(system, histories[session], user),
                "max_tokens": opts.chat_answer_tokens, "temperature": 0.0, "ignore_eos": True, "stream": True,
                "stream_options": {"include_usage": True}}
        got = stream_completion(base_url, body, {"X-Session-Id": ids[session]} if header else {}, timeout)
        got.update(session=session, turn=turn, session_id=ids[session] if header else "")
        histories[session].append((user, got.pop("text") if got["error"] is None else ""))
        with lock:
            records.append(got)

    def own_session(index):  # one client per session (the default): its turns back to back
        time.sleep(index * opts.chat_stagger)
        for turn in range(opts.chat_turns):
            send(index, turn)

    def from_line(index):  # --chat-clients: the session the line gives (--chat-order)
        time.sleep(index * opts.chat_stagger)
        for session, turn in iter(line.take, None):
            send(session, turn)
            line.done(session)

    client = from_line if opts.chat_clients else own_session
    started = time.time()
    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(opts.chat_concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    duration = time.time() - started
    return chat_result(records, duration), sorted(records, key=lambda r: (r["session"], r["turn"]))


def chat_result(records, duration):
    """The run's figures from the per-request records, under `vllm bench serve`'s result keys."""
    done = [r for r in records if r["error"] is None]
    ttft = [r["ttft_ms"] for r in done]
    tpot = [(r["e2el_ms"] - r["ttft_ms"]) / (r["completion_tokens"] - 1) for r in done if r["completion_tokens"] > 1]
    output = sum(r["completion_tokens"] for r in done)
    return {"duration": duration, "completed": len(done), "failed": len(records) - len(done),
            "errors": sorted(set(r["error"] for r in records if r["error"]))[:5],
            "total_input_tokens": sum(r["prompt_tokens"] for r in done), "total_output_tokens": output,
            "output_throughput": output / duration if duration else None,
            "request_throughput": len(done) / duration if duration else None,
            "p50_ttft_ms": percentile(ttft, 50), "p90_ttft_ms": percentile(ttft, 90),
            "p99_ttft_ms": percentile(ttft, 99), "p50_tpot_ms": percentile(tpot, 50)}


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
    elif workload == "sysprompt":
        argv += ["--dataset-name", "random", "--num-prompts", str(opts.sysprompt_num_prompts),
                 "--random-prefix-len", str(opts.sysprompt_prefix_len),
                 "--random-input-len", str(opts.sysprompt_input_len), "--random-output-len", str(opts.output_len)]
    else:
        argv += ["--dataset-name", "random", "--num-prompts", str(opts.random_num_prompts),
                 "--random-input-len", str(opts.random_input_len), "--random-output-len", str(opts.random_output_len)]
    return argv


def bench_in_process(argv, workdir):
    """`vllm bench serve` in this process: vLLM's own function behind the command (vllm.benchmarks.serve.main, the
    same arguments), without importing vLLM again for every run; its printout goes to workdir/bench.log."""
    import contextlib
    from vllm.benchmarks.serve import add_cli_args, main as bench_main
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:  # older vLLM
        from vllm.utils import FlexibleArgumentParser
    parser = FlexibleArgumentParser()
    add_cli_args(parser)
    args = parser.parse_args(argv[argv.index("serve") + 1:])
    with open(workdir / "bench.log", "w") as handle, contextlib.redirect_stdout(handle):
        try:
            bench_main(args)
        except Exception as exc:  # pylint: disable=broad-except  # vLLM's own errors: the run failed, say so
            raise RuntimeError("vllm bench serve (in process) failed: %s: %s, see %s" % (
                type(exc).__name__, exc, workdir / "bench.log"))


def _left(opts):
    return max(5, min(opts.run_timeout, opts.budget_seconds - (time.time() - opts.t0)))


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
        if workload.startswith("chat"):
            result, records = run_chat(opts, base, workload == "chat_header", repeat, _left(opts))
            result["date"] = time.strftime("%Y%m%d-%H%M%S")
            (workdir / (name + ".json")).write_text(json.dumps(dict(result, requests=records), indent=1) + "\n")
        elif opts.bench_in_process:
            bench_in_process(bench_argv(opts, base, workload, concurrency, workdir, name + ".json"), workdir)
            result = json.loads((workdir / (name + ".json")).read_text())
        else:
            proc = subprocess.run(bench_argv(opts, base, workload, concurrency, workdir, name + ".json"),
                                  capture_output=True, text=True, check=False, timeout=_left(opts))
            (workdir / "bench.log").write_text(proc.stdout + proc.stderr)
            if proc.returncode != 0:
                raise RuntimeError("vllm bench serve failed (%s), see %s" % (proc.returncode, workdir / "bench.log"))
            result = json.loads((workdir / (name + ".json")).read_text())
        after = [engine_counters(u) for u in opts.engine_urls]
    finally:
        front.stop()
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
        "errors": (result.get("errors") or [])[:5] if workload.startswith("chat") else
        sorted(set(e for e in result.get("errors") or [] if e))[:5],
        "total_input_tokens": result.get("total_input_tokens"), "total_output_tokens": result.get("total_output_tokens"),
        "ttft_p50_ms": result.get("p50_ttft_ms", result.get("median_ttft_ms")), "ttft_p90_ms": result.get("p90_ttft_ms"),
        "tpot_p50_ms": result.get("p50_tpot_ms", result.get("median_tpot_ms")),
        "engines": engines,
        "balance": balance([e["requests"] for e in engines]),
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


def paired_ratios(rows, key, reference="nginx_least_conn"):
    """[row's output tok/s / the reference arm's of the same repeat] for the cell `key` (workload, arm, concurrency)."""
    by = dict(((r["workload"], r["arm"], r["concurrency"], r["repeat"]), r) for r in rows)
    out = []
    for (workload, arm, concurrency, repeat), row in sorted(by.items()):
        ref = by.get((workload, reference, concurrency, repeat))
        if (workload, arm, concurrency) == key and ref and ref["output_throughput"] and row["output_throughput"]:
            out.append(row["output_throughput"] / ref["output_throughput"])
    return out


def write_report(opts, out, meta, rows, stopped):
    picked = worse(rows)
    (out / "results.json").write_text(json.dumps({"meta": meta, "runs": rows, "stopped_early": stopped,
                                                  "worse_of_repeats": list(picked.values())}, indent=2) + "\n")
    lines = ["# Front-door A/B (tests/gpu/router_ab.py)", "",
             "Two engines (%s, KV tokens logged: %s), model %s; shapes %s. prefix: %d prefixes x %d tokens, suffix %d, "
             "output %d, %d prompts, working set %d tokens. Worse of %d repeat(s) per cell; `x least_conn` paired per "
             "repeat (the lower ratio); balance = the busier engine's share of the requests (on ONE GPU an arm that "
             "sends everything to one engine looks fast); ceiling = the shape's best hit rate (shape_ceiling).%s" % (
                 opts.platform, meta.get("kv_tokens"), opts.model, ",".join(opts.shape_list), opts.num_prefixes,
                 opts.prefix_len, opts.suffix_len, opts.output_len, opts.num_prefixes * opts.prompts_per_prefix,
                 opts.num_prefixes * opts.prefix_len, opts.repeats, " STOPPED EARLY: %s." % stopped if stopped else ""),
             "",
             "| shape | front | conc. | failed/sent | output tok/s | x least_conn | TTFT p50 ms | TTFT p90 ms | "
             "p50 x lower | per engine: requests, hit rate | balance | hit rate | x ceiling |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    order = dict((shape, i) for i, shape in enumerate(SHAPES))
    for key in sorted(picked, key=lambda k: (order.get(k[0], 9), k[2], k[1])):
        row = picked[key]
        ref = picked.get((key[0], "nginx_least_conn", key[2]))
        ratios = paired_ratios(rows, key)
        lower = ("%.2f" % (ref["ttft_p50_ms"] / row["ttft_p50_ms"])
                 if ref and ref.get("ttft_p50_ms") and row.get("ttft_p50_ms") else "-")
        per = " / ".join("%d req, %s" % (e["requests"], "-" if e["hit_rate"] is None else "%.3f" % e["hit_rate"])
                         for e in row["engines"])
        ceiling = meta.get("ceilings", {}).get(key[0])
        sent = sum(r["completed"] + r["failed"] for r in rows if (r["workload"], r["arm"], r["concurrency"]) == key)
        failed = sum(r["failed"] for r in rows if (r["workload"], r["arm"], r["concurrency"]) == key)
        lines.append("| %s | %s | %d | %d/%d | %.1f | %s | %.1f | %.1f | %s | %s | %s | %s | %s |" % (
            row["workload"], row["arm"], row["concurrency"], failed, sent, row["output_throughput"] or 0,
            "%.2f" % min(ratios) if ratios else "-", row["ttft_p50_ms"] or 0, row["ttft_p90_ms"] or 0, lower, per,
            row.get("balance"), row["hit_rate"],
            "%.2f" % (row["hit_rate"] / ceiling) if ceiling and row["hit_rate"] is not None else "-"))
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
    a("--haproxy-bin", default="haproxy", help="HAProxy 2.6 or later (haproxy_bounded)")
    a("--haproxy-balance-factor", type=int, default=125,
      help="haproxy_bounded: the most requests in flight an engine gets, in %% of the average (above 100)")
    a("--platform", choices=["cuda", "cpu"], default="cuda")
    a("--gpu-memory-utilization", type=float, default=0.44, help="cuda: per engine, both on the same GPU")
    a("--cpu-kv-gib", type=int, default=1, help="cpu: VLLM_CPU_KVCACHE_SPACE per engine")
    a("--cpu-binds", default="auto|auto", help="cpu: VLLM_CPU_OMP_THREADS_BIND per engine, |-separated")
    a("--engine-args", default="", help="more `vllm serve` flags for both engines (e.g. the plan's KV size flag)")
    a("--max-model-len", type=int, default=16384)
    a("--engine-timeout", type=int, default=900)
    a("--engine-log-dir", default="", help="the engines' logs (default: --out)")
    a("--keep-engines", action="store_true", help="leave the engines running at the end (for --reuse-engines)")
    a("--reuse-engines", action="store_true", help="measure on engines already answering on the ports, if any")
    a("--port-base", type=int, default=8100, help="engines PORT, PORT+1; router PORT+10 (+11 metrics); nginx PORT+20")
    a("--shapes", default="prefix,random", help="traffic shapes, of: %s" % ", ".join(SHAPES))
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
    a("--tight-abs-threshold", type=int, default=4, help="cache_aware_tight's --balance-abs-threshold")
    a("--tight-rel-threshold", type=float, default=1.2, help="cache_aware_tight's --balance-rel-threshold")
    a("--router-args", default="", help="more vllm-router flags for every router arm")
    a("--prefix-key-chars", type=int, default=512,
      help="characters of the body the front hashes (nginx_hash, consistent_hash, haproxy_bounded)")
    a("--random-arms", default="nginx_least_conn,cache_aware", help="arms for the no-reuse workload ('' = none)")
    a("--random-input-len", type=int, default=4096)
    a("--random-output-len", type=int, default=64)
    a("--random-num-prompts", type=int, default=240)
    a("--sysprompt-arms", default="", help="arms for the sysprompt shape (default: --arms)")
    a("--sysprompt-concurrency", type=int, default=32)
    a("--sysprompt-num-prompts", type=int, default=96)
    a("--sysprompt-prefix-len", type=int, default=1000, help="the shared head (vLLM's --random-prefix-len)")
    a("--sysprompt-input-len", type=int, default=3000, help="each request's own document (--random-input-len)")
    a("--chat-arms", default="", help="arms for the chat shapes (default: --arms)")
    a("--chat-header-arms", default="", help="arms for chat_header only (default: --chat-arms)")
    a("--chat-sessions", type=int, default=16)
    a("--chat-turns", type=int, default=6)
    a("--chat-system-tokens", type=int, default=2000)
    a("--chat-user-tokens", type=int, default=192)
    a("--chat-answer-tokens", type=int, default=64)
    a("--chat-stagger", type=float, default=0.25, help="seconds between two sessions' first turns")
    a("--chat-clients", type=int, default=0,
      help="clients that take the sessions' turns (0 = one per session, its turns back to back)")
    a("--chat-order", choices=["round_robin", "random"], default="round_robin",
      help="--chat-clients: which waiting session a free client takes (vLLM's multi-turn --conversation-sampling)")
    a("--chat-vocab", type=int, default=151936, help="the stand-in tokenizer's vocabulary (words w7 .. w<N-1>)")
    a("--bench-in-process", action="store_true",
      help="call vLLM's bench serve function in this process (this Python must import vLLM) instead of one "
           "`vllm bench serve` process per run (each imports vLLM again: seconds per run)")
    a("--seed", type=int, default=0)
    a("--run-timeout", type=int, default=1800)
    a("--budget-seconds", type=float, default=1e9, help="stop before a run that would end past this budget")
    opts = p.parse_args(argv)
    opts.tokenizer = opts.tokenizer or opts.model
    opts.engine_ports = [opts.port_base, opts.port_base + 1]
    opts.engine_urls = ["http://127.0.0.1:%d" % port for port in opts.engine_ports]
    opts.engine_log_dir = pathlib.Path(opts.engine_log_dir or opts.out)
    opts.router_port = opts.port_base + 10
    opts.front_port = opts.port_base + 20
    opts.cpu_binds = opts.cpu_binds.split("|")
    opts.concurrencies = [int(c) for c in opts.concurrency.split(",") if c]
    opts.shape_list = [x for x in opts.shapes.split(",") if x]
    opts.arm_list = [x for x in opts.arms.split(",") if x]
    opts.random_arm_list = [x for x in opts.random_arms.split(",") if x]
    opts.sysprompt_arm_list = [x for x in opts.sysprompt_arms.split(",") if x] or opts.arm_list
    opts.chat_arm_list = [x for x in opts.chat_arms.split(",") if x] or opts.arm_list
    opts.chat_header_arm_list = [x for x in opts.chat_header_arms.split(",") if x] or opts.chat_arm_list
    if opts.chat_clients < 0 or opts.chat_clients > opts.chat_sessions:
        p.error("--chat-clients %d: use 0 (one per session) up to --chat-sessions (%d)" % (opts.chat_clients, opts.chat_sessions))
    opts.chat_concurrency = opts.chat_clients or opts.chat_sessions
    if opts.haproxy_balance_factor <= 100:
        p.error("--haproxy-balance-factor %d: use a percentage above 100 (125: no engine gets more than 1.25 times "
                "the average number of requests in flight)" % opts.haproxy_balance_factor)
    for shape in opts.shape_list:
        if shape not in SHAPES:
            p.error("unknown shape %r: use %s" % (shape, ", ".join(SHAPES)))
    for arm in (opts.arm_list + opts.random_arm_list + opts.sysprompt_arm_list + opts.chat_arm_list
                + opts.chat_header_arm_list):
        if arm not in ALL_ARMS:
            p.error("unknown arm %r: use %s" % (arm, ", ".join(ALL_ARMS)))
    return opts


def run_plan(opts):
    """[(arm, shape, concurrency, repeat)] repeat by repeat: every shape and arm of repeat 0, then repeat 1, ..."""
    cells = []
    for shape in opts.shape_list:
        if shape == "prefix":
            cells += [(arm, shape, c) for c in opts.concurrencies for arm in opts.arm_list]
        elif shape == "random":
            cells += [(arm, shape, c) for c in opts.concurrencies[-1:] for arm in opts.random_arm_list]
        elif shape == "sysprompt":
            cells += [(arm, shape, opts.sysprompt_concurrency) for arm in opts.sysprompt_arm_list]
        else:
            arms = opts.chat_header_arm_list if shape == "chat_header" else opts.chat_arm_list
            cells += [(arm, shape, opts.chat_concurrency) for arm in arms]
    return [(arm, shape, c, r) for r in range(opts.repeats) for arm, shape, c in cells]


def main(argv=None):
    opts = parse(sys.argv[1:] if argv is None else argv)
    t0 = opts.t0 = time.time()
    out = pathlib.Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    plan = run_plan(opts)
    meta = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "argv": sys.argv if argv is None else
            ["tests/gpu/router_ab.py"] + list(argv), "plan_runs": len(plan), "shapes": opts.shape_list,
            "ceilings": dict((shape, round(shape_ceiling(opts, shape), 4)) for shape in opts.shape_list)}
    rows, stopped, engines = [], "", []
    if opts.bench_in_process:
        # vLLM (torch) before ansible-core: ansible patches sys.intern, which torch._dynamo refuses at its import
        import vllm.benchmarks.serve  # noqa: F401  pylint: disable=unused-import,import-outside-toplevel
    try:
        if opts.reuse_engines and engines_answer(opts):
            kv = logged_kv(opts)
            meta["engines_reused"] = True
            log("engines already answer on %s: measuring on them (KV tokens logged: %s)" % (opts.engine_ports, kv))
        else:
            kv = start_engines(opts, out, engines)
        meta.update(kv_tokens=kv, engine_start_seconds=round(time.time() - t0, 1),
                    working_set_tokens=opts.num_prefixes * opts.prefix_len)
        if "prefix" in opts.shape_list and all(kv) and not (max(kv) < opts.num_prefixes * opts.prefix_len <= sum(kv)):
            log("NOTE: the working set (%d tokens) should exceed one engine's KV (%s) and fit in both: size the KV "
                "(--engine-args / --cpu-kv-gib) so it does" % (opts.num_prefixes * opts.prefix_len, kv))
        longest = {}
        for arm, workload, concurrency, repeat in plan:
            left = opts.budget_seconds - (time.time() - t0)
            need = max(longest.values()) if longest else 0.0
            if left < max(need * 1.2, 5):
                stopped = "budget: %.0f s left, a run takes up to %.0f s; %d of %d runs done" % (left, need, len(rows), len(plan))
                log(stopped)
                break
            log("run %d/%d: %s %s concurrency %d repeat %d" % (len(rows) + 1, len(plan), workload, arm, concurrency, repeat))
            row = one_run(opts, out, arm, workload, concurrency, repeat)
            longest[workload] = max(longest.get(workload, 0.0), row["seconds"])
            rows.append(row)
            log("  %.1f output tok/s, TTFT p50 %.1f ms, failed %s, hit rate %s, per engine %s" % (
                row["output_throughput"] or 0, row["ttft_p50_ms"] or 0, row["failed"], row["hit_rate"],
                [(e["requests"], e["hit_rate"]) for e in row["engines"]]))
            write_report(opts, out, meta, rows, stopped)
    except (RuntimeError, subprocess.SubprocessError, OSError) as exc:
        stopped = "error: %s" % exc
        log(stopped)
    finally:
        if not opts.keep_engines:
            for proc in engines:
                stop(proc, grace=30)
        meta["seconds"] = round(time.time() - t0, 1)
        write_report(opts, out, meta, rows, stopped)
    log("wrote %s and %s (%d runs, %.0f s)" % (out / "results.json", out / "results.md", len(rows), time.time() - t0))
    return 1 if stopped.startswith("error") else 0


if __name__ == "__main__":
    sys.exit(main())
