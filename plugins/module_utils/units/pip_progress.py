# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""pip's progress while the vllm_venv module installs a venv: its output -> a phase line, written to a file.

A venv's install runs 2-13 minutes and pip prints only to its pipe, so the role runs the module as an async job
and prints the line this writes (``progress_file``, one line of text) while it waits. pip's whole output also goes to ``pip_log``
(the file a failure or a timeout names). The lines are pip's own (pip 23 without a terminal; real output in
tests/unit/plugins/module_utils/units/fixtures/, with its provenance there):

- ``Looking in links: ...`` / ``Looking in indexes: ...``: resolving starts;
- ``Collecting NAME`` / ``Processing PATH (from X)`` / ``Requirement already satisfied: NAME``: one requirement
  found; ``Downloading FILE (SIZE)`` / ``Using cached FILE``: a download;
- ``Installing collected packages: a, b, ...``: the install of that many packages, after which pip prints
  nothing until ``Successfully installed ...`` (the longest silent part: torch alone is ~1 GB of files);
- ``ERROR: ...``: a failure, or a dependency conflict pip reports after installing (exit status 0).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import subprocess
import threading
import time

FOUND = re.compile(r"^(?:Collecting|Processing|Obtaining|Requirement already satisfied:)\s+(\S+)")
DOWNLOADING = re.compile(r"^\s*(?:Downloading|Using cached) (\S+)(?: \(([^)]+)\))?")
INSTALLING = re.compile(r"^Installing collected packages: (.*)$")
INSTALLED = re.compile(r"^Successfully installed (.*)$")
ERROR = re.compile(r"^ERROR: (.*)$")
LOOKING = re.compile(r"^Looking in (?:links|indexes): ")


def package_name(word):
    """A requirement's short name: a wheel's path or URL -> NAME-VERSION, a specifier as given."""
    base = word.rstrip("/").rsplit("/", 1)[-1]
    if base.endswith((".whl", ".tar.gz", ".zip")):
        parts = base.split("-")
        return "-".join(parts[:2]) if len(parts) > 1 else base
    return base


def new_state():
    return dict(phase="starting", found=0, current="", size="", total=0, error="")


def advance(state, line):
    """``state`` after one line of pip's output (a new dict; ``state`` is left as it was)."""
    state = dict(state)
    text = line.rstrip("\n")
    for pattern, phase in ((LOOKING, "resolving"), (FOUND, "resolving"), (DOWNLOADING, "downloading"),
                           (INSTALLING, "installing"), (INSTALLED, "installed"), (ERROR, "error")):
        match = pattern.match(text)
        if not match:
            continue
        state["phase"] = phase
        if pattern is FOUND:
            state.update(found=state["found"] + 1, current=package_name(match.group(1)), size="")
        elif pattern is DOWNLOADING:
            state.update(current=package_name(match.group(1)), size=match.group(2) or "")
        elif pattern in (INSTALLING, INSTALLED):
            state["total"] = len([w for w in re.split(r"[,\s]+", match.group(1)) if w])
        elif pattern is ERROR:
            state["error"] = match.group(1)[:200]
        break
    return state


def parse(lines):
    """The state after all of ``lines``."""
    state = new_state()
    for line in lines:
        state = advance(state, line)
    return state


def describe(state):
    """What pip is doing, in words, from a state."""
    phase = state["phase"]
    if phase == "resolving":
        return "resolving requirements: %d found, the latest %s" % (state["found"], state["current"])
    if phase == "downloading":
        size = " (%s)" % state["size"] if state["size"] else ""
        return "downloading %s%s, %d requirements found" % (state["current"], size, state["found"])
    if phase == "installing" and state.get("in_place") is not None:
        return "installing %d package%s: %d in place" % (state["total"], "" if state["total"] == 1 else "s",
                                                         min(state["in_place"], state["total"]))
    if phase == "installing":
        return ("installing %d package%s (pip prints nothing more until all are in place; torch alone is ~1 GB "
                "of files)" % (state["total"], "" if state["total"] == 1 else "s"))
    if phase == "installed":
        return "installed %d package%s" % (state["total"], "" if state["total"] == 1 else "s")
    if phase == "error":  # pip's exit status decides: a dependency conflict is an ERROR line after the install
        return "pip printed ERROR: %s" % state["error"]
    return "starting pip"


def dist_infos(python):
    """How many distributions the venv of ``python`` (VENV/bin/python) holds: pip writes a package's
    ``.dist-info`` folder once its files are in place, so this counts the install while pip prints nothing."""
    lib = os.path.join(os.path.dirname(os.path.dirname(python)), "lib")
    try:
        folders = [os.path.join(lib, d, "site-packages") for d in os.listdir(lib) if d.startswith("python")]
    except OSError:
        return 0
    count = 0
    for folder in folders:
        try:
            count += len([n for n in os.listdir(folder) if n.endswith(".dist-info")])
        except OSError:
            continue
    return count


def is_pip(argv):
    return list(argv[1:3]) == ["-m", "pip"]


def progress_text(line, log):
    """The progress file's one line: what pip does, and where its whole output is."""
    return "%s (pip's output: %s)\n" % (line, log)


def write_progress(path, line, log):
    """The progress file (progress_text), replaced whole so a reader never sees half of it."""
    tmp = "%s.tmp%d" % (path, threading.current_thread().ident or 0)  # the line reader and InstallCounter write
    with open(tmp, "w") as handle:
        handle.write(progress_text(line, log))
    os.chmod(tmp, 0o644)
    os.rename(tmp, path)


class StreamingRun(object):
    """``run(argv) -> (rc, out, err)`` for units.venv: pip streams to ``log`` and its phase to ``progress``.

    Other commands go to ``run`` (the module's run_command) as before, announced in the progress file."""

    def __init__(self, run, log, progress, pip_steps):
        self.run, self.log, self.progress, self.pip_steps = run, log, progress, pip_steps
        self.step, self.mode = 0, "w"  # the log starts afresh with each install
        self.interval = 3.0  # seconds between two counts of the packages in place

    def __call__(self, argv):
        if not is_pip(argv):
            what = "creating the venv" if list(argv[1:3]) == ["-m", "venv"] else "listing the requirements"
            write_progress(self.progress, what, self.log)
            return self.run(argv)
        self.step += 1
        return self._stream(argv)

    def _stream(self, argv):
        prefix = "pip run %d of %d: " % (self.step, self.pip_steps)
        state, out, written = new_state(), [], 0
        write_progress(self.progress, prefix + describe(state), self.log)
        with open(self.log, self.mode) as log:
            self.mode = "a"
            log.write("# %s\n" % prefix.rstrip(": "))  # not the argv: an index URL may hold a password
            try:
                proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        universal_newlines=True, bufsize=1)
            except OSError as exc:
                return 127, "", str(exc)
            counter = InstallCounter(self, prefix, argv[0], self.interval)
            for line in proc.stdout:
                log.write(line)
                log.flush()
                out.append(line)
                state = counter.state = advance(state, line)
                if time.time() - written >= 1:  # at most a write a second: pip prints hundreds of lines
                    write_progress(self.progress, prefix + describe(state), self.log)
                    written = time.time()
            rc = proc.wait()
            counter.stop()
        write_progress(self.progress, prefix + describe(state), self.log)
        return rc, "".join(out), ""


class InstallCounter(object):
    """While pip is silent installing, every ``interval`` s: the packages in place so far (dist_infos)."""

    def __init__(self, run, prefix, python, interval=3.0):
        self.run, self.prefix, self.python, self.interval = run, prefix, python, interval
        self.state, self.before, self._stop = new_state(), dist_infos(python), threading.Event()
        self._thread = threading.Thread(target=self._loop)
        self._thread.daemon = True
        self._thread.start()

    def _loop(self):
        while not self._stop.wait(self.interval):
            state = self.state
            if state["phase"] == "installing":
                state = dict(state, in_place=max(0, dist_infos(self.python) - self.before))
                write_progress(self.run.progress, self.prefix + describe(state), self.run.log)

    def stop(self):
        self._stop.set()
        self._thread.join()
