# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a deployment or a rollback of the vllm role's units changes, computed before anything is done.

Units are named ``<prefix>-<instance>.service``; the role's own carry the marker line
(``X-GpufleetVllmInstance=<instance>``), which is how stale and restored units are told from others.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import fnmatch

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError


class UnitLifecycleError(UserError):
    """The requested change of units is refused (a shrink not asked for, nothing to roll back to)."""


def is_ours(text, marker):
    """True when a unit carries the role's marker at the start of a line."""
    return any(line.startswith(marker) for line in text.splitlines())


def ours(listing, prefix, marker=None):
    """The {file name: text} of ``listing`` named like the role's units (and marked, when ``marker`` is given)."""
    pattern = "%s-*.service" % prefix
    return dict((name, text) for name, text in listing.items()
                if fnmatch.fnmatchcase(name, pattern) and (marker is None or is_ours(text, marker)))


def instance_name(file_name, prefix):
    """vllm-a.service -> a."""
    return file_name[len(prefix) + 1:-len(".service")]


def shrink_guard(live, planned, allow_removal):
    """Refuse to stop instances a smaller plan drops, unless allow_removal. Returns the stale unit names."""
    stale = sorted(name for name in live if name not in planned)
    if len(live) > len(planned) and not allow_removal:
        raise UnitLifecycleError(
            "The new plan has %d instance(s) but this host runs %d: this run would stop and remove %s. Nothing was "
            "changed. If the smaller plan is intended, run again with vllm_allow_instance_removal=true; otherwise "
            "check the GPU facts and gpufleet_hardware the plan was made from."
            % (len(planned), len(live), ", ".join(stale)), option="allow_removal", stale=stale)
    return stale


def change_set(rendered, live):
    """The unit names (in plan order) whose rendered text differs from the live file (or that have none)."""
    return [name for name in rendered if live.get(name) != rendered[name]]


def restart_set(planned_names, changed_names):
    """This host's instances to restart for their units: those whose unit changed, in plan order. (The role
    restarts all when the secrets file changed, and every member of a multi-host group when one changed.)"""
    return [name for name in planned_names if name in changed_names]


def keeps_rollback_copy(changing, stale, live):
    """A rollback copy is kept only when this run replaces or removes live units."""
    return bool(live) and bool(changing or stale)


def rollback_moves(restore, live):
    """A rollback: which live units go (not in the copy), which are written back, which become the new copy."""
    return dict(remove=sorted(name for name in live if name not in restore), restore=sorted(restore),
                keep=dict(live))


def rollback_source(previous_target, restore, previous_link, rollback_dir):
    """Refuse a rollback with no `previous` venv link or no kept units."""
    if not previous_target or not restore:
        raise UnitLifecycleError(
            "Nothing to roll back to on this host: %s or the units in %s are missing (the vllm role keeps them "
            "from the second deployment on)." % (previous_link, rollback_dir), option="state")


def venv_version(venv):
    """/opt/vllm/venvs/0.32.0-0123456789ab -> 0.32.0 (the venv names the vLLM version first)."""
    return venv.rstrip("/").rsplit("/", 1)[-1].split("-")[0]
