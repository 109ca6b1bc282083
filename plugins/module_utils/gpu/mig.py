# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure MIG change planning (no Ansible, no NVML import).

MIG mode is a pair (current, pending). Setting it writes *pending*; *current* follows after a GPU
reset or a reboot (on some GPUs at once when nothing holds the GPU). Therefore:

- pending == desired and current == desired: nothing to do;
- pending == desired and current != desired: not a change, but a reset is required;
- pending != desired: a change (refused while compute processes hold the GPU, unless forced).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError

MODES = ("enabled", "disabled")


class MigPlanError(UserError):
    """The request cannot be planned; ``problems`` lists every reason (also a result key)."""

    def __init__(self, problems, gpus=None):
        self.problems = problems
        details = dict(problems=problems)
        if gpus is not None:
            details["gpus"] = gpus
        super(MigPlanError, self).__init__("nvidia_mig: %s" % "; ".join(problems), **details)


def select_gpus(gpus, targets):
    """GPUs named by ``targets`` (indices as int/str, or UUIDs); all GPUs when ``targets`` is empty."""
    if not targets:
        return list(gpus), []
    chosen, unknown = [], []
    by_index = dict((str(g["index"]), g) for g in gpus)
    by_uuid = dict((str(g.get("uuid")).lower(), g) for g in gpus if g.get("uuid"))
    for target in targets:
        key = str(target).strip()
        gpu = by_index.get(key) or by_uuid.get(key.lower())
        if gpu is None:
            unknown.append(key)
        elif gpu not in chosen:
            chosen.append(gpu)
    return sorted(chosen, key=lambda g: g["index"]), unknown


def decide_actions(gpus, desired, targets=None, force=False):
    """Decide per GPU what to do.

    ``gpus``: ``[{"index", "uuid", "name", "current", "pending", "processes": [{"pid", "name"}]}]``
    with ``current``/``pending`` in ("enabled", "disabled", None); None means MIG is not supported.
    Returns ``{"gpus": [...], "changed": bool, "reset_required": bool}``; each GPU entry has
    ``index, uuid, name, current, pending, desired, action ("none"|"set"), changed, reset_required``.
    Raises ``MigPlanError`` listing every problem (unknown targets, MIG unsupported, busy GPUs).
    """
    if desired not in MODES:
        raise MigPlanError(["mode must be one of %s, got %r" % (", ".join(MODES), desired)])
    selected, unknown = select_gpus(gpus, targets or [])
    problems = []
    if unknown:
        problems.append("no GPU matches %s (known: %s)" % (
            ", ".join(unknown), ", ".join("%s/%s" % (g["index"], g.get("uuid")) for g in gpus) or "none"))
    out = []
    for gpu in selected:
        entry = {
            "index": gpu["index"],
            "uuid": gpu.get("uuid"),
            "name": gpu.get("name"),
            "current": gpu.get("current"),
            "pending": gpu.get("pending"),
            "desired": desired,
            "action": "none",
            "changed": False,
            "reset_required": False,
        }
        supported = gpu.get("current") is not None
        if not supported:
            if desired == "enabled":
                problems.append("GPU%d (%s) does not support MIG: it cannot be enabled; leave it out of "
                                "nvidia_mig's gpus or use mode=disabled" % (gpu["index"], gpu.get("name")))
            out.append(entry)
            continue
        if gpu.get("pending") != desired:
            procs = gpu.get("processes") or []
            if procs and not force:
                problems.append("GPU%d (%s) is in use by %s: stop them first (the mig role stops its "
                                "holders) or set force=true" % (
                                    gpu["index"], gpu.get("name"),
                                    ", ".join("pid %s (%s)" % (p.get("pid"), p.get("name") or "?") for p in procs)))
            entry["action"] = "set"
            entry["changed"] = True
            entry["reset_required"] = gpu.get("current") != desired
        else:
            entry["reset_required"] = gpu.get("current") != desired
        out.append(entry)
    if problems:
        raise MigPlanError(problems, gpus)
    return {
        "gpus": out,
        "changed": any(e["changed"] for e in out),
        "reset_required": any(e["reset_required"] for e in out),
    }


def diff(planned):
    """before/after texts for Ansible's diff (one line per GPU)."""
    before, after = [], []
    for e in planned["gpus"]:
        before.append("GPU%d %s: current=%s pending=%s" % (e["index"], e.get("uuid"), e["current"], e["pending"]))
        pending_after = e["desired"] if e["action"] == "set" else e["pending"]
        after.append("GPU%d %s: current=%s pending=%s" % (e["index"], e.get("uuid"), e["current"], pending_after))
    return {"before": "\n".join(before) + "\n", "after": "\n".join(after) + "\n"}


def after_apply(entry, current, pending, activation):
    """Update a planned entry with what NVML reports after setting the mode.

    NVML's nvmlDeviceSetMigMode (nvml.h; NVML API reference "Multi Instance GPU Management"):
    the call sets the pending mode and "may unbind or reset the device to activate" it, so current
    is read again. Its activationStatus is NVML_SUCCESS when activated; NVML_ERROR_IN_USE when the
    device was not idle ("idle the device and retry", i.e. a GPU reset once idle); and
    NVML_ERROR_RESET_REQUIRED "on certain platforms like pass-through virtualization, where reset
    functionality may not be exposed directly, VM reboot is required"."""
    entry = dict(entry)
    entry["current"] = current
    entry["pending"] = pending
    entry["activation_status"] = activation
    entry["reset_required"] = current != entry["desired"]
    return entry


def needs_reboot(entry):
    """Only NVML_ERROR_RESET_REQUIRED as activation status asks for a (VM) reboot (see after_apply);
    in_use means idle the GPU and reset it, which the mig role does."""
    return bool(entry.get("reset_required")) and entry.get("activation_status") == "reset_required"
