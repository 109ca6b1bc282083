# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The tune's pending mark: what it belongs to, and whether a later run may still restore from it.

``playbooks/tasks/tune_save.yml`` saves the serving units and marks them pending; an interrupted tune (Ctrl-C) leaves
the mark, and the next tune restores the saved units first. A mark that outlives its context would roll a host back
(a rollout to 0.33.0 since, and the next tune puts 0.32.0 back). So the mark records what it belongs to - the release
and venv the saved units use, each saved unit's checksum, and the checksums of the units the tune launched last - and
:func:`check` restores only while the host still serves the tune's release and the tune's own units; otherwise the
mark is discarded with the reason (nothing restored). A mark without these fields (written before) is discarded too.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import json
import os

from ansible_collections.gpufleet.vllm.plugins.module_utils.tune.errors import TuneError

MARK_VERSION = 2


def release_of(venv):
    """The vLLM release of a venv path the vllm role made (``/opt/vllm/venvs/0.32.0-0123456789ab`` -> 0.32.0)."""
    return os.path.basename((venv or "").rstrip("/")).split("-")[0] or "unknown"


def checksums(files):
    """{unit file name: sha1} of ``ansible.builtin.find``'s files (``get_checksum: true``)."""
    return dict((os.path.basename(f["path"]), f.get("checksum") or "") for f in files or [])


def mark(venv, live_files, previous_text=""):
    """The mark's text: a new one (the saved units, before the first launch), or with ``previous_text`` the same
    mark updated with the units the tune launched last."""
    if previous_text:
        doc = _read(previous_text)
        if doc is None:
            raise TuneError("The tune's pending mark is not one tune_save.yml wrote: remove it (%s/pending under "
                            "vllm_base_dir) and run the tune again" % "tune", option="pending")
        doc["launched"] = checksums(live_files)
    else:
        doc = {"version": MARK_VERSION, "venv": venv, "release": release_of(venv), "saved": checksums(live_files),
               "launched": None}
    return json.dumps(doc, sort_keys=True) + "\n"


def _read(text):
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    ok = isinstance(doc, dict) and doc.get("version") == MARK_VERSION and isinstance(doc.get("saved"), dict)
    return doc if ok and isinstance(doc.get("venv"), str) and isinstance(doc.get("launched") or {}, dict) else None


def check(text, current_venv, live_files):
    """{restore, reason, venv}: restore the saved units only while the host serves the tune's release and units."""
    doc, live = _read(text), checksums(live_files)
    if doc is None:
        return dict(restore=False, venv="", reason="the pending mark records no release or unit checksums (written "
                    "by an older gpufleet.vllm, or damaged): discarded, nothing restored; check the host serves what "
                    "you want (site.yml or rollout.yml)")
    out = dict(restore=False, venv=doc["venv"])
    now = release_of(current_venv)
    if live == doc["saved"]:
        out["reason"] = "the host serves the saved units already: the pending mark is cleared"
    elif now != doc["release"]:
        out["reason"] = ("the host moved on since the interrupted tune (it serves vLLM %s, the saved units %s): the "
                         "pending mark is discarded, nothing rolled back" % (now, doc["release"]))
    elif doc.get("launched") is not None and live != doc["launched"]:
        out["reason"] = ("the host's units changed since the interrupted tune launched its last candidate (a later "
                         "deployment): the pending mark is discarded, nothing rolled back")
    else:
        out.update(restore=True, reason="the units of an interrupted tune are still live: the saved units are restored")
    return out
