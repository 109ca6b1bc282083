# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The records on the host (``STATE_DIR/INSTANCE.json``, the one before as ``INSTANCE.previous.json``) and the
node exporter textfile, written without following links (weights.safefs), and how a start is read from systemd.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import json
import os
import time

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError
from ansible_collections.gpufleet.vllm.plugins.module_utils.startup import report
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights import safefs

METRICS_FILE = "gpufleet_vllm_startup.prom"


def systemd_time(text):
    """Epoch seconds of systemd's ``--timestamp=us+utc`` form (``Wed 2026-12-02 00:37:03.123456 UTC``), or None."""
    parts = (text or "").split()
    if len(parts) < 3:
        return None
    day, clock = parts[1], parts[2]
    whole, frac = (clock.split(".", 1) + [""])[:2]
    stamp = calendar.timegm(time.strptime("%s %s" % (day, whole), "%Y-%m-%d %H:%M:%S"))
    return stamp + (float("0." + frac) if frac else 0.0)


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


def _read_json(dir_fd, name, where):
    text = safefs.read_text(dir_fd, name, where)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None  # a damaged record: the next one replaces it


class Store(object):
    """The state folder, opened once (``create``: make it when missing; in check mode it is only read)."""

    def __init__(self, state_dir, create):
        self.state_dir = state_dir
        self.fd = safefs.open_root(state_dir, create=True) if create else (
            safefs.open_root(state_dir) if os.path.isdir(state_dir) else None)

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def path(self, instance):
        return os.path.join(self.state_dir, "%s.json" % instance)

    def current(self, instance):
        return _read_json(self.fd, "%s.json" % instance, self.path(instance)) if self.fd is not None else None

    def save(self, record, replaced):
        instance = record["instance"]
        if replaced:
            safefs.atomic_write(self.fd, "%s.previous.json" % instance, report.dumps(replaced), self.path(instance))
        safefs.atomic_write(self.fd, "%s.json" % instance, report.dumps(record), self.path(instance))

    def records(self):
        found = []
        for entry in sorted(os.listdir(self.fd)):
            if entry.endswith(".json") and not entry.endswith(".previous.json"):
                data = _read_json(self.fd, entry, os.path.join(self.state_dir, entry))
                if data and "phases" in data:
                    found.append(data)
        return found

    def write_metrics(self, textfile_dir):
        """The textfile of every instance's last start; only where the collector's folder exists."""
        if not textfile_dir or not os.path.isdir(textfile_dir):
            return False
        text_fd = safefs.open_root(textfile_dir)
        try:
            safefs.atomic_write(text_fd, METRICS_FILE, report.metric_lines(self.records()),
                                os.path.join(textfile_dir, METRICS_FILE))
        finally:
            os.close(text_fd)
        return True
