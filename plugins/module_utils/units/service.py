# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The life cycle of one unit of a kind (the Ray node, the router, the DCGM exporter, nvidia-persistenced): the
service_unit module's core.

The same steps as the vllm_units module, with the same helpers: render (kinds.py over writer.py), compare with
the live file, check a changed unit on its staged copy before the live one is touched
(``files.stage_and_check``; here ``systemd-analyze verify``, with vllm_check_unit.py's rule: a non-zero exit or
any line about the unit fails), keep the live unit as the rollback copy (``files.write_dir``), write atomically,
daemon-reload. ``state=rollback`` swaps the copy and the live unit. A kind has one unit per host, so there is no
stale unit and no shrink to guard. Commands go through an injected runner (``run(argv)``, ``which(name)``).
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import os
import re
import shutil
import tempfile

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError
from ansible_collections.gpufleet.vllm.plugins.module_utils.units import files, kinds

UNIT_NAME_RE = r"[A-Za-z0-9_.@-]+\Z"


class ServiceUnitError(UserError):
    """The unit is refused by its check, or there is nothing to roll back to."""


def unit_file_name(settings):
    name = str((settings or {}).get("unit_name", ""))
    if not re.match(UNIT_NAME_RE, name):
        raise ServiceUnitError("settings.unit_name is %r: a unit name is made of letters, digits, '_', '.', '@', '-' "
                               "(fix the role's *_unit_name variable)" % name, option="settings.unit_name")
    return name + ".service"


def verify_argv(path):
    return ["systemd-analyze", "verify", path]


def verify_verdict(name, path, rc, out, err):
    """vllm_check_unit.py's rule: any error, or any line about the unit file itself, refuses it."""
    text = ((out or "") + (err or "")).strip()
    about = [line for line in text.splitlines() if path in line or name in line]
    if rc != 0 or about:
        raise ServiceUnitError("%s was not installed, the live unit is unchanged: systemd-analyze verify (exit %d): %s. "
                               "Fix the role variables behind it." % (name, rc, text), option="settings", unit=name)
    return "%s: systemd-analyze verify - ok" % name


# The setting that names the program each kind's unit starts (the Ray node's is its argv's first word).
PROGRAM_SETTING = {"router": "python", "dcgm": "exporter", "persistenced": "program"}


def _executable(kind, settings):
    """The program the unit starts (systemd-analyze verify refuses a unit whose program is missing)."""
    if kind == "ray":
        return str(settings["argv"][0])
    return str(settings[PROGRAM_SETTING[kind]])


def check(req, runner, name, text):
    """The staged check of a changed unit (a temporary folder in check mode), or why it was not checked."""
    if not req["verify"]:
        return ["not checked: verify=false"]
    if not runner.which("systemd-analyze"):
        return ["not checked: systemd-analyze is not installed"]
    exe = _executable(req["kind"], req["settings"])
    if req["check_mode"] and not os.path.exists(exe):
        return ["not checked (check mode): %s is not installed yet" % exe]
    staging = tempfile.mkdtemp(prefix="gpufleet-unit-") if req["check_mode"] else req["staging_dir"]
    try:
        def verify_each(staged):
            return [verify_verdict(unit, path, *runner.run(verify_argv(path))) for unit, path in staged]
        return files.stage_and_check(staging, {name: text}, verify_each)
    finally:
        if req["check_mode"]:
            shutil.rmtree(staging, ignore_errors=True)


def _live(unit_dir, name):
    return files.read_dir(unit_dir).get(name)


def present(req, runner):
    """Render, compare, check, keep the rollback copy, write, reload. ``restart`` is whether the unit changed."""
    name = unit_file_name(req["settings"])
    text = kinds.render_kind(req["kind"], req["settings"])
    live = _live(req["unit_dir"], name)
    changed = live != text
    result = dict(changed=changed, unit=name, text=text, restart=changed, units_replaced=False, validation=[])
    if req["diff"] and changed:
        path = os.path.join(req["unit_dir"], name)
        result["diff"] = [dict(before_header=path, after_header=path, before=live or "", after=text)]
    if not changed:
        return result
    result["validation"] = check(req, runner, name, text)
    if req["check_mode"]:
        return result
    if live is not None:
        files.write_dir(req["rollback_dir"], {name: live})
        result["units_replaced"] = True
    files.write_atomic(os.path.join(req["unit_dir"], name), text)
    _reload(req, runner)
    return result


def rollback(req, runner):
    """Put the rollback copy back; the unit it replaces becomes the copy (a second rollback rolls forward)."""
    name = unit_file_name(req["settings"])
    restore = files.read_dir(req["rollback_dir"]).get(name)
    if restore is None:
        raise ServiceUnitError("Nothing to roll back to: %s has no copy of %s (one is kept when a run replaces the "
                               "unit)." % (req["rollback_dir"], name), option="state")
    live = _live(req["unit_dir"], name)
    result = dict(changed=restore != live, unit=name, restored=[name])
    if req["check_mode"] or not result["changed"]:
        return result
    files.write_atomic(os.path.join(req["unit_dir"], name), restore)
    files.write_dir(req["rollback_dir"], {name: live} if live is not None else {})
    _reload(req, runner)
    return result


def _reload(req, runner):
    if not req.get("daemon_reload", True):
        return
    rc, out, err = runner.run(["systemctl", "daemon-reload"])
    if rc != 0:
        raise ServiceUnitError("systemctl daemon-reload failed (exit %d): %s" % (rc, (err or out).strip()), option="unit_dir")


def run(req, runner):
    """The module's one call: ``req`` holds its parameters plus ``check_mode`` and ``diff``."""
    return rollback(req, runner) if req["state"] == "rollback" else present(req, runner)
