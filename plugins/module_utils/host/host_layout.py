# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A role's directories and files in one pass (one module call instead of one file/copy task per item).

``plan`` compares what is wanted with what ``lstat`` sees and returns the actions, ``apply`` carries them out.
A symlink where a directory or file is wanted is refused, never followed: these paths are root's, and a link
there points root's writes somewhere it does not own. ``apply`` acts through ``root_fs``: each path's folder is
opened from ``/`` without following a link another account owns, the entry itself with ``O_NOFOLLOW``, and owner
and mode are set on that descriptor (``fchown``/``fchmod``), so a link swapped in after ``plan`` looked is refused,
never followed (the Ray temp folder lies in the service account's home). Files are written through a unique 0600
temporary file in the same folder and a rename."""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import os
import stat

from ansible_collections.gpufleet.vllm.plugins.module_utils.host import root_fs
from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError


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
    parent_fd, name = root_fs.open_parent(path)
    try:
        return root_fs.read_text_at(parent_fd, name, path)
    finally:
        os.close(parent_fd)


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


def _maker(entry):
    """``root_fs.open_path``'s ``create``: a missing folder made 0700, then given the entry's owner and mode on its
    descriptor (as ``ansible.builtin.file`` state=directory makes missing parents)."""
    def create(parent_fd, name, where):
        os.mkdir(name, 0o700, dir_fd=parent_fd)
        fd = root_fs.open_dir_at(parent_fd, name, where)
        try:
            root_fs.set_owner_mode(fd, entry["uid"], entry["gid"], entry["mode"])
        finally:
            os.close(fd)
    return create


def _apply_one(path, entry, write):
    """Make or write ``path`` and set its owner and mode, all through descriptors (no link followed)."""
    is_file = "content" in entry
    parent_fd, name = root_fs.open_parent(path, create=None if is_file else _maker(entry))
    owner_mode = (entry["uid"], entry["gid"], entry["mode"])
    try:
        if is_file and write:
            root_fs.write_at(parent_fd, name, entry["content"], path, owner_mode)
            return
        if not is_file and root_fs.lstat_at(parent_fd, name) is None:
            os.mkdir(name, 0o700, dir_fd=parent_fd)
        fd = root_fs.open_file_at(parent_fd, name, path) if is_file else root_fs.open_dir_at(parent_fd, name, path)
        try:
            root_fs.set_owner_mode(fd, *owner_mode)
        finally:
            os.close(fd)
    finally:
        os.close(parent_fd)


def apply(actions, entries):
    """Carry out ``plan``'s actions; ``entries`` maps each path to its wanted entry. Each path once, in order."""
    done = []
    for _verb, path, _why in actions:
        if path not in done:
            done.append(path)
            _apply_one(path, entries[path], any(v == "write" and p == path for v, p, _w in actions))


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
