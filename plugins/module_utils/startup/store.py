# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The records on the host (``STATE_DIR/INSTANCE.json``, the one before as ``INSTANCE.previous.json``) and the
node exporter textfile, written without following links (root_fs: unique temporary names, no link followed),
and how a start is read from systemd.

The state folder is one the service account can write, so a record read from it is untrusted input: it is read
without following a link, size-capped, and checked field by field (:func:`check_record`: an object, this
instance's name, finite numbers, known phase names, booleans) before anything of it reaches the textfile root
writes or the report; a record that fails is a :class:`StartRecordError` naming the file and the fix. Instance
names are checked before they become file names (``../x`` is refused).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import json
import math
import os
import re
import time

from ansible_collections.gpufleet.vllm.plugins.module_utils.host import root_fs
from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError
from ansible_collections.gpufleet.vllm.plugins.module_utils.startup import boot_log, report

METRICS_FILE = "gpufleet_vllm_startup.prom"
# what the vllm units' writer allows in a name (units/render.py NAME_RE), not starting with '.' or '-'
INSTANCE_RE = re.compile(r"^[A-Za-z0-9_@:][A-Za-z0-9_.@:-]{0,199}\Z")
KEY_RE = re.compile(r"^[0-9a-f]{8,64}$")
TEXT_RE = re.compile(r"^[^\x00-\x1f\x7f]{0,200}$")
PHASE_NAMES = frozenset(name for name, _what in boot_log.PHASES)
MAX_RECORD_BYTES = 4 << 20


class StartRecordError(UserError):
    """A start record (or an instance name) that is not one this collection writes."""


def check_instance(name):
    """``name`` as a file name of the state folder: letters, digits, _ . - (no '/', no '..')."""
    if not isinstance(name, str) or not INSTANCE_RE.match(name) or ".." in name:
        raise StartRecordError("instance %r is not an instance name (letters, digits and _ . @ : -, not starting with "
                               "'.' or '-', no '..'): give the vllm role's instance name" % (name,), option="instance")
    return name


def _finite(value, none_ok=True):
    if value is None:
        return none_ok
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _record_problem(data, instance):
    """What makes ``data`` not a record of ``instance`` (None: it is one)."""
    if not isinstance(data, dict):
        return "not a JSON object"
    if data.get("instance") != instance:
        return "instance %r, not %r" % (str(data.get("instance"))[:80], instance)
    if not _finite(data.get("total_seconds")) or not _finite(data.get("budget_seconds", 0), none_ok=True):
        return "total_seconds / budget_seconds not a finite number"
    phases = data.get("phases")
    if not isinstance(phases, list) or not all(
            isinstance(p, dict) and p.get("name") in PHASE_NAMES and _finite(p.get("seconds")) for p in phases):
        return "phases not a list of known phases with finite seconds"
    cache, comp = data.get("cache"), data.get("compile")
    if not isinstance(cache, dict) or not isinstance(cache.get("expected", True), bool) or not (
            isinstance(cache.get("status"), str) and TEXT_RE.match(cache["status"])):
        return "cache not an object with a status text and an expected flag"
    if not isinstance(comp, dict) or not isinstance(comp.get("keys", []), list) or not all(
            isinstance(k, str) and KEY_RE.match(k) for k in comp.get("keys", [])):
        return "compile.keys not a list of hex key folders"
    inputs = data.get("inputs") or {}
    if not isinstance(inputs, dict) or not isinstance(data.get("invocation_id") or "", str):
        return "inputs not an object or invocation_id not a text"
    if not isinstance(inputs.get("argv") or [], list) or not isinstance(inputs.get("environment") or {}, dict):
        return "inputs.argv not a list or inputs.environment not an object"
    return None


def check_record(data, where, instance):
    """``data`` when it is a record of ``instance``; else a :class:`StartRecordError` naming the file."""
    problem = _record_problem(data, instance)
    if problem:
        raise StartRecordError("%s is not a start record this collection wrote (%s); the folder can be written by the "
                               "service account, so it is not trusted: remove the file (the next report writes a new "
                               "one) and run again" % (where, problem), path=where)
    return data


def systemd_time(text):
    """Epoch seconds of systemd's ``--timestamp=us+utc`` form (``Wed 2026-12-02 00:37:03.123456 UTC``), or None."""
    parts = (text or "").split()
    if len(parts) < 3:
        return None
    day, clock = parts[1], parts[2]
    whole, frac = (clock.split(".", 1) + [""])[:2]
    try:
        stamp = calendar.timegm(time.strptime("%s %s" % (day, whole), "%Y-%m-%d %H:%M:%S"))
        return stamp + (float("0." + frac) if frac.isdigit() else 0.0)
    except (ValueError, OverflowError):
        return None  # a time no calendar has: the start is then timed from its first log line


def read_start(unit, run):
    """``(invocation id, process start epoch, journal text)`` of the unit's current start.

    ``run(argv)`` returns stdout (the module's runner; it raises on failure)."""
    out = run(["systemctl", "show", unit, "--property=InvocationID,ExecMainStartTimestamp,ActiveState",
               "--timestamp=us+utc"])
    props = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    invocation = props.get("InvocationID", "").strip()
    if not invocation:
        raise UserError("%s has no InvocationID (ActiveState=%s): it is not running, so there is no start to report; "
                        "start it (the vllm role does) and run again" % (unit, props.get("ActiveState", "?")))
    text = run(["journalctl", "_SYSTEMD_INVOCATION_ID=" + invocation, "--output", "short-iso-precise",
                "--no-pager", "--quiet"])
    return invocation, systemd_time(props.get("ExecMainStartTimestamp", "").strip()), text


def _read_json(dir_fd, name, where, instance):
    """The checked record in ``name`` (None when absent); anything else is a StartRecordError naming the file."""
    text = root_fs.read_text_at(dir_fd, name, where, limit=MAX_RECORD_BYTES)
    if text is None:
        return None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise StartRecordError("%s is not JSON (%s): remove it (the next report writes a new one) and run again"
                               % (where, str(exc)[:200]), path=where)
    return check_record(data, where, instance)


_OWN = (os.geteuid(), os.getegid(), 0o644)  # records and the textfile: the module's own, readable by all


def _mkdir(parent_fd, name, where):
    os.mkdir(name, 0o755, dir_fd=parent_fd)


class Store(object):
    """The state folder, opened once (``create``: make it when missing; in check mode it is only read)."""

    def __init__(self, state_dir, create):
        self.state_dir = state_dir
        self.fd = root_fs.open_path(state_dir, create=_mkdir) if create else (
            root_fs.open_path(state_dir) if os.path.isdir(state_dir) else None)

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def path(self, instance):
        return os.path.join(self.state_dir, "%s.json" % check_instance(instance))

    def current(self, instance):
        if self.fd is None:
            return None
        return _read_json(self.fd, "%s.json" % check_instance(instance), self.path(instance), instance)

    def save(self, record, replaced):
        instance = check_instance(record["instance"])
        if replaced:
            root_fs.write_at(self.fd, "%s.previous.json" % instance, report.dumps(replaced), self.path(instance), _OWN)
        root_fs.write_at(self.fd, "%s.json" % instance, report.dumps(record), self.path(instance), _OWN)

    def records(self):
        found = []
        for entry in sorted(os.listdir(self.fd)):
            if entry.endswith(".json") and not entry.endswith(".previous.json"):
                instance = entry[:-len(".json")]
                where = os.path.join(self.state_dir, entry)
                if not INSTANCE_RE.match(instance) or ".." in instance:
                    raise StartRecordError("%s is not a start record this collection wrote (its name is not an "
                                           "instance name): remove it and run again" % where, path=where)
                found.append(_read_json(self.fd, entry, where, instance))
        return found

    def write_metrics(self, textfile_dir):
        """The textfile of every instance's last start; only where the collector's folder exists."""
        if not textfile_dir or not os.path.isdir(textfile_dir):
            return False
        text_fd = root_fs.open_path(textfile_dir)
        try:
            root_fs.write_at(text_fd, METRICS_FILE, report.metric_lines(self.records()),
                             os.path.join(textfile_dir, METRICS_FILE), _OWN)
        finally:
            os.close(text_fd)
        return True
