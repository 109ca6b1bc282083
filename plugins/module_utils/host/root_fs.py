# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What root does in trees another account can write, without following a link (the one layer for it).

The pattern of ``weights/safefs.py``, for every other module that runs as root: a path is opened from ``/`` one
component at a time with ``O_NOFOLLOW | O_DIRECTORY``; a link on the way is followed only when root (or the user
running the module) owns it - the operator's own layout, e.g. ``/opt -> /srv/opt`` - and refused when anyone else
does. Below that point every open, create, rename, chown and chmod goes through a folder descriptor (``dir_fd=``),
and owner and mode are set on the open descriptor (``fchown``/``fchmod``), never by path: a link swapped in
between a check and the change is never followed. Packs are built from such a walk (links are left out, never
followed), temporary files get unique names, ``O_EXCL`` and mode 0600, and are removed by their maker.
Plain ``os`` calls, no Ansible import; tests run them in a temporary directory.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import binascii
import errno
import os
import stat
import tarfile

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
DIRECTORY = getattr(os, "O_DIRECTORY", 0)
CLOEXEC = getattr(os, "O_CLOEXEC", 0)
NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO planted at a file's path must not block root
MAX_LINKS = 40  # the kernel's own limit on links followed in one lookup


class UnsafePathError(UserError):
    """A link (or another kind of file) where root was about to act; never followed."""


def refused(where, exc=None):
    """The error for a link or a non-folder/non-file found where root acts (other errors are raised as they are)."""
    if exc is not None and exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK, errno.ENXIO):
        raise exc
    return UnsafePathError("%s is a symbolic link or not a regular file/folder: root never follows a link in a tree "
                           "another account can change (it could point at /etc). Remove it (the task recreates what "
                           "it needs) and run again" % where, path=where)


def lstat_at(dir_fd, name):
    """lstat of ``name`` in ``dir_fd``, or None when absent."""
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        raise


def open_dir_at(parent_fd, name, where):
    """Folder ``name`` under ``parent_fd``, never through a link."""
    try:
        return os.open(name, os.O_RDONLY | DIRECTORY | NOFOLLOW | CLOEXEC, dir_fd=parent_fd)
    except OSError as exc:
        raise refused(where, exc)


def open_file_at(dir_fd, name, where, flags=os.O_RDONLY, mode=0o600, error=None):
    """A regular file under ``dir_fd``, never through a link, never blocking on a FIFO.

    ``error(where, exc=None)`` builds the caller's refusal (default :func:`refused`); weights.safefs passes its own."""
    error = error or refused
    try:
        fd = os.open(name, flags | NOFOLLOW | NONBLOCK | CLOEXEC, mode, dir_fd=dir_fd)
    except OSError as exc:
        raise error(where, exc)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise error(where)
    if NONBLOCK:
        import fcntl
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~NONBLOCK)
    return fd


def _follow(fd, name, where, st, state):
    """A link on the path: its parts (followed when root's or ours), and the fd to go on from."""
    if st.st_uid not in (0, os.geteuid()) or state["links"] >= MAX_LINKS:
        raise UnsafePathError("%s is a symbolic link owned by uid %d: root never follows a link another account can "
                              "change on the path it acts on. Replace it by a real folder, or give the real path"
                              % (where, st.st_uid), path=where)
    state["links"] += 1
    target = os.readlink(name, dir_fd=fd)
    if target.startswith("/"):
        os.close(fd)
        fd, state["done"] = os.open("/", os.O_RDONLY | DIRECTORY | CLOEXEC), []
    return fd, [p for p in target.split("/") if p]


def _step(fd, name, state, create):
    """One component of :func:`open_path`; returns (fd, parts to walk first)."""
    where = "/" + "/".join(state["done"] + [name])
    if name == "..":
        state["done"] = state["done"][:-1]
        os.close(fd)
        return open_path("/" + "/".join(state["done"])), []
    if name == ".":
        return fd, []
    st = lstat_at(fd, name)
    if st is None and create is not None:
        create(fd, name, where)
    elif st is not None and stat.S_ISLNK(st.st_mode):
        return _follow(fd, name, where, st, state)
    child = open_dir_at(fd, name, where)
    os.close(fd)
    state["done"].append(name)
    return child, []


def open_path(path, create=None):
    """A folder fd for the absolute ``path``, walked from ``/`` (see the module docstring). ``create(parent_fd,
    name, where)`` makes a missing component (None: a missing one is an error). The caller closes the fd."""
    if not path.startswith("/"):
        raise UserError("%r is not an absolute path: give the whole path from /" % path, path=path)
    parts, state = [p for p in path.split("/") if p], {"links": 0, "done": []}
    fd = os.open("/", os.O_RDONLY | DIRECTORY | CLOEXEC)
    try:
        while parts:
            fd, more = _step(fd, parts.pop(0), state, create)
            parts = more + parts
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_parent(path, create=None):
    """(fd of the folder holding ``path``, its last name): the base for every *_at call on ``path``."""
    parent, name = os.path.split(path.rstrip("/") or "/")
    if not name or name in (".", ".."):
        raise UserError("%r names no file or folder of its own: give the path without a trailing '.' or '..'" % path,
                        path=path)
    return open_path(parent or "/", create), name


def read_text_at(dir_fd, name, where, limit=64 << 20):
    """Text of the regular file ``name`` (None when absent); a link is refused; more than ``limit`` bytes too."""
    if lstat_at(dir_fd, name) is None:
        return None
    fd = open_file_at(dir_fd, name, where)
    try:
        data = b""
        while len(data) <= limit:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return data.decode("utf-8", "surrogateescape")
            data += chunk
    finally:
        os.close(fd)
    raise UserError("%s is larger than %d bytes: not a file this collection wrote; move it away" % (where, limit),
                    path=where)


def set_owner_mode(fd, uid, gid, mode):
    """Owner, group and mode of an open file or folder (chown first: it clears set-id bits)."""
    st = os.fstat(fd)
    if (st.st_uid, st.st_gid) != (uid, gid):
        os.fchown(fd, uid, gid)
    os.fchmod(fd, mode)


def unique_name(prefix, suffix=""):
    return "%s%s%s" % (prefix, binascii.hexlify(os.urandom(8)).decode("ascii"), suffix)


def temp_file_at(dir_fd, prefix, suffix=""):
    """(fd, name) of a new file only its maker can read (0600, O_EXCL, a unique name)."""
    for _attempt in range(16):
        name = unique_name(prefix, suffix)
        try:
            return os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | NOFOLLOW | CLOEXEC, 0o600, dir_fd=dir_fd), name
        except OSError as exc:
            if exc.errno != errno.EEXIST:
                raise
    raise OSError(errno.EEXIST, "no unique temporary name", prefix)


def unlink_quiet(dir_fd, name):
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass


def write_at(dir_fd, name, text, where, owner_mode):
    """Replace ``name`` by ``text`` through a unique 0600 temporary file and a rename in ``dir_fd``; ``owner_mode``
    (uid, gid, mode) is set on the temporary file's descriptor before the rename."""
    fd, tmp = temp_file_at(dir_fd, ".%s." % name[:64])
    try:
        try:
            view = memoryview(text.encode("utf-8", "surrogateescape"))
            while len(view):
                view = view[os.write(fd, view):]
            os.fsync(fd)
            set_owner_mode(fd, *owner_mode)
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        unlink_quiet(dir_fd, tmp)
        raise


def _add_file(tar, dir_fd, name, arcname, where):
    fd = open_file_at(dir_fd, name, where)
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(fd)
        info = tarfile.TarInfo(arcname)
        info.size, info.mode, info.mtime = st.st_size, stat.S_IMODE(st.st_mode) & 0o755, int(st.st_mtime)
        tar.addfile(info, handle)


def _add_tree(tar, dir_fd, arcname, where, out):
    """The folder ``dir_fd`` into ``tar`` as ``arcname``: folders and regular files; links and the rest left out."""
    info = tarfile.TarInfo(arcname)
    info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, int(os.fstat(dir_fd).st_mtime)
    tar.addfile(info)
    for name in sorted(os.listdir(dir_fd)):
        st, child_where, child_arc = lstat_at(dir_fd, name), where + "/" + name, arcname + "/" + name
        if st is not None and stat.S_ISDIR(st.st_mode):
            fd = open_dir_at(dir_fd, name, child_where)
            try:
                _add_tree(tar, fd, child_arc, child_where, out)
            finally:
                os.close(fd)
        elif st is not None and stat.S_ISREG(st.st_mode):
            _add_file(tar, dir_fd, name, child_arc, child_where)
            out["files"] += 1
        elif st is not None:
            out["left_out"].append(child_where)


def _open_member(root_fd, member, where):
    """fd of the folder ``member`` (relative, no '..') under ``root_fd``, None when absent; a link on the way is
    left out (recorded by the caller), never followed."""
    fd = os.dup(root_fd)
    try:
        for name in member.split("/"):
            st = lstat_at(fd, name)
            if st is None or not stat.S_ISDIR(st.st_mode):
                os.close(fd)
                return None if st is None else False
            child = open_dir_at(fd, name, where)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def pack(root_fd, root_where, members, out_fd):
    """A gzip tar of the folders ``members`` (relative to ``root_fd``) written to ``out_fd``, from a walk that
    never follows a link: {files: count, members: packed, left_out: paths of links and other kinds left out}."""
    out = {"files": 0, "members": [], "left_out": []}
    with os.fdopen(os.dup(out_fd), "wb") as raw:
        with tarfile.open(fileobj=raw, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
            for member in members:
                parts = [p for p in member.split("/") if p]
                if not parts or any(p in (".", "..") for p in parts):
                    raise UserError("pack member %r must be a relative path without '.' or '..'" % member)
                where = root_where.rstrip("/") + "/" + "/".join(parts)
                fd = _open_member(root_fd, "/".join(parts), where)
                if fd is False:
                    out["left_out"].append(where)
                if fd in (None, False):
                    continue
                try:
                    _add_tree(tar, fd, "/".join(parts), where, out)
                finally:
                    os.close(fd)
                out["members"].append("/".join(parts))
    return out
