# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""File operations of the unit life cycle: read a unit directory, write atomically, swap links and
directories by rename. Plain ``os`` calls (no Ansible import); tests run them in a temporary directory."""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import os
import shutil
import tempfile


def read_dir(path, suffix=".service"):
    """{file name: text} of the regular files in ``path`` ending in ``suffix`` ({} when ``path`` is absent)."""
    if not os.path.isdir(path):
        return {}
    out = {}
    for name in sorted(os.listdir(path)):
        full = os.path.join(path, name)
        if name.endswith(suffix) and os.path.isfile(full) and not os.path.islink(full):
            with open(full, encoding="utf-8", errors="surrogateescape") as handle:
                out[name] = handle.read()
    return out


def write_atomic(path, text, mode=0o644):
    """Write ``text`` to ``path`` through a temporary file in the same directory and a rename."""
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.rename(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_dir(path, files, mode=0o700):
    """Make ``path`` hold exactly ``files`` ({name: text}): built beside it, then renamed into place.
    An empty ``files`` removes ``path``."""
    new = path + ".swap"
    shutil.rmtree(new, ignore_errors=True)  # left by an interrupted run
    if files:
        os.makedirs(new, mode)
        os.chmod(new, mode)
        for name, text in files.items():
            write_atomic(os.path.join(new, name), text)
    shutil.rmtree(path, ignore_errors=True)
    if files:
        os.rename(new, path)


def link_target(path):
    return os.readlink(path) if os.path.islink(path) else None


def switch_link(path, target):
    """Point the symlink ``path`` at ``target`` through a new link and a rename; False when it already does."""
    if link_target(path) == target:
        return False
    tmp = "%s.tmp-%d" % (path, os.getpid())
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink(target, tmp)
    os.rename(tmp, path)
    return True


def remove(path):
    if os.path.lexists(path):
        os.unlink(path)


def stage_and_check(staging, units, check_all):
    """Write ``units`` ({name: text}) into ``staging`` (mode 0700, nothing else left there) and run
    ``check_all([(name, path), ...])`` once over the staged files, in order (vllm_units checks them all in one
    process); its reports. A check raises to refuse: the live units are not touched before every changed one passed
    (vllm_units and service_unit alike)."""
    write_dir(staging, units)
    staged = [(name, os.path.join(staging, name)) for name in units]
    return list(check_all(staged)) if staged else []
