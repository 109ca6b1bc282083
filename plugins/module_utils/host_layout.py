# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A role's directories and files in one pass (one module call instead of one file/copy task per item).

``plan`` compares what is wanted with what ``lstat`` sees and returns the actions, ``apply`` carries them out.
A symlink where a directory or file is wanted is refused, never followed: these paths are root's, and a link
there points root's writes somewhere it does not own. Files are written through a temporary file and a rename."""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import os
import stat

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError
from ansible_collections.gpufleet.vllm.plugins.module_utils.units.files import write_atomic


def parse_mode(text, where):
    """'0755' -> 0o755; anything else is an error naming the entry."""
    value = str(text)
    if not value or any(c not in "01234567" for c in value) or len(value) > 4:
        raise UserError("%s: mode %r is not an octal mode such as '0755'." % (where, text))
    return int(value, 8)


def _kind_error(path, st, wanted):
    if stat.S_ISLNK(st.st_mode):
        return UserError("%s is a symlink; a %s is wanted there. Refusing to follow it as root: remove the link "
                         "(and check who made it), then run again." % (path, wanted))
    return UserError("%s exists and is not a %s: move it away, then run again." % (path, wanted))


def _ownership_actions(path, st, entry):
    """chown/chmod actions for an existing path (uid/gid None: the account is not there yet, check mode)."""
    actions = []
    if (entry["uid"] is None or entry["gid"] is None
            or (st.st_uid, st.st_gid) != (entry["uid"], entry["gid"])):
        actions.append(("chown", path, "owner %s:%s" % (entry["owner"], entry["group"])))
    if stat.S_IMODE(st.st_mode) != entry["mode"]:
        actions.append(("chmod", path, "mode %04o -> %04o" % (stat.S_IMODE(st.st_mode), entry["mode"])))
    return actions


def dir_actions(entry, st):
    """Actions for one wanted directory, given its lstat result (None: absent)."""
    path = entry["path"]
    if st is None:
        return [("mkdir", path, "create directory (mode %04o)" % entry["mode"])]
    if not stat.S_ISDIR(st.st_mode):
        raise _kind_error(path, st, "directory")
    return _ownership_actions(path, st, entry)


def file_actions(entry, st, current):
    """Actions for one wanted file, given its lstat result and its current text (None: absent)."""
    path = entry["path"]
    if st is None:
        return [("write", path, "create file")]
    if not stat.S_ISREG(st.st_mode):
        raise _kind_error(path, st, "regular file")
    if current != entry["content"]:
        return [("write", path, "replace file (content changed)")]
    return _ownership_actions(path, st, entry)


def _lstat(path):
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def _read(path):
    with open(path, encoding="utf-8", errors="surrogateescape") as handle:
        return handle.read()


def plan(directories, files):
    """(actions, {file path: current text}): directories first in the order given (parents before
    children), then files."""
    actions, before = [], {}
    for entry in directories:
        actions.extend(dir_actions(entry, _lstat(entry["path"])))
    for entry in files:
        st = _lstat(entry["path"])
        current = _read(entry["path"]) if st is not None and stat.S_ISREG(st.st_mode) else None
        before[entry["path"]] = current
        actions.extend(file_actions(entry, st, current))
    return actions, before


def _missing_components(path):
    """The path and its missing parents, outermost first (as ``ansible.builtin.file`` state=directory makes them)."""
    out = []
    while path and not os.path.lexists(path):
        out.insert(0, path)
        path = os.path.dirname(path)
    return out


def _mkdirs(path, entry):
    for component in _missing_components(path):
        os.mkdir(component, entry["mode"])
        os.chown(component, entry["uid"], entry["gid"])
        os.chmod(component, entry["mode"])


def apply(actions, entries):
    """Carry out ``plan``'s actions; ``entries`` maps each path to its wanted entry."""
    for verb, path, _why in actions:
        entry = entries[path]
        if verb == "mkdir":
            _mkdirs(path, entry)
        elif verb == "write":
            write_atomic(path, entry["content"], entry["mode"])
        if verb in ("mkdir", "write", "chown"):
            os.chown(path, entry["uid"], entry["gid"])
        # mkdir's mode is masked by the umask, and chown clears set-id bits: set the mode last.
        os.chmod(path, entry["mode"])


def diff(actions, entries, before_text):
    """Ansible's diff: one before/after pair per written file, and the list of other changes."""
    out = []
    for verb, path, why in actions:
        if verb == "write":
            out.append({"before_header": path, "after_header": path,
                        "before": before_text.get(path) or "", "after": entries[path]["content"]})
        else:
            out.append({"before_header": path, "after_header": path, "before": "", "after": why + "\n"})
    return out
