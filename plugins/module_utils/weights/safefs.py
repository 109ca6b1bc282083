# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""File operations that never follow a symbolic link inside a tree another user owns.

The module runs as root while ``dest`` belongs to the serving user, who can replace any folder or
file in it with a link between two of our calls. So below ``dest`` every open, create, rename,
chown/chmod and delete goes through a folder file descriptor (``dir_fd=``) opened with
``O_NOFOLLOW | O_DIRECTORY`` component by component (openat-style): a link anywhere below ``dest``
is refused with a clear error instead of being followed (ELOOP/ENOTDIR become a
:class:`WeightsError` naming the path). ``dest`` itself and its parents are walked the same way from
``/``: a link on that path is followed only when root (or the user running the module) owns it - the
operator's own layout, e.g. ``/models -> /srv/models`` - and refused when anyone else does (the
service account owns the store and could swap ``dest`` for a link to ``/etc/systemd/system``).
"""

from __future__ import annotations

import errno
import os
import stat

from ansible_collections.gpufleet.vllm.plugins.module_utils.host import root_fs
from ansible_collections.gpufleet.vllm.plugins.module_utils.host.root_fs import lstat_at  # noqa: F401 (re-exported)
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.errors import WeightsError

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
DIRECTORY = getattr(os, "O_DIRECTORY", 0)
CLOEXEC = getattr(os, "O_CLOEXEC", 0)
NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO planted at a file's path must not block root


# Folders a model store or snapshot may never be (nor, for the trees, be inside): the role would give them to
# the service account (chown), mount a filesystem over them (model_storage), or remove files there that a new
# manifest does not list (model_weights). roles/model_storage/vars and roles/model_weights/vars hold the same
# lists for the roles' own checks (tests/unit/.../test_weights_links.py keeps them in sync).
SYSTEM_TREES = ("/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot", "/dev", "/proc",
                "/sys", "/run")
SYSTEM_DIRS = ("/", "/home", "/root", "/var", "/var/lib", "/var/log", "/var/cache", "/var/tmp", "/var/spool",
               "/var/mail", "/var/opt", "/var/local", "/opt", "/srv", "/mnt", "/media", "/tmp", "/snap", "/lost+found")


def system_dir(path):
    """The system folder ``path`` is or lies in (SYSTEM_DIRS / SYSTEM_TREES), else None. ``path`` is read as
    written: repeated and trailing slashes dropped; a '.' or '..' component counts as a system folder ('/')."""
    parts = [p for p in path.split("/") if p]
    if not path.startswith("/") or any(p in (".", "..") for p in parts):
        return "/"
    clean = "/" + "/".join(parts)
    if clean in SYSTEM_DIRS:
        return clean
    for tree in SYSTEM_TREES:
        if clean == tree or clean.startswith(tree + "/"):
            return tree
    return None


def link_refused(where, exc=None):
    """The error for a link (or a non-folder where a folder belongs) found below dest/source."""
    why = "is a symbolic link or not a regular file/folder"
    if exc is not None and exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
        raise exc
    return WeightsError("%s %s; model_weights runs as root and never follows links in a tree another user can "
                        "change: remove it (the module recreates what it needs) and rerun" % (where, why), path=where)


MAX_LINKS = 40  # as the kernel's own limit on links followed in one lookup


def trusted_link(st):
    """A link on dest's path that may be followed: root's or the running user's own."""
    return st.st_uid in (0, os.geteuid())


def open_root(path, create=False, mode=0o755):
    """A folder fd for ``dest``, walked from ``/`` one component at a time (missing ones created
    when asked): links owned by someone else are refused, never followed (see the module docstring)."""
    parts, followed, fd = [p for p in path.split("/") if p], 0, os.open("/", os.O_RDONLY | DIRECTORY | CLOEXEC)
    done = []
    try:
        while parts:
            name = parts.pop(0)
            where = "/" + "/".join(done + [name])
            if name in (".", ".."):  # from a link's target (dest itself is made absolute and normal first)
                done = done[:-1] if name == ".." else done
                os.close(fd)
                fd = open_dirs(os.open("/", os.O_RDONLY | DIRECTORY | CLOEXEC), done, "")
                continue
            st = lstat_at(fd, name)
            if st is None and create:
                os.mkdir(name, mode, dir_fd=fd)
            elif st is not None and stat.S_ISLNK(st.st_mode):
                if not trusted_link(st) or followed >= MAX_LINKS:
                    raise WeightsError("%s is a symbolic link owned by uid %d, not root: model_weights runs as root and "
                                       "never follows a link another user can change on the path of dest (it could "
                                       "point at /etc). Replace it by a real folder, or set dest to the real path"
                                       % (where, st.st_uid), path=where)
                followed += 1
                target = os.readlink(name, dir_fd=fd)
                parts = [p for p in target.split("/") if p] + parts
                if target.startswith("/"):
                    os.close(fd)
                    fd, done = os.open("/", os.O_RDONLY | DIRECTORY | CLOEXEC), []
                continue
            if st is not None and not stat.S_ISDIR(st.st_mode):  # a file where dest's path needs a folder
                raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), where)
            child = open_dir(fd, name, where)
            os.close(fd)
            fd = child
            done.append(name)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_dir(parent_fd, name, where, create=False, mode=0o755):
    """Open folder ``name`` under ``parent_fd`` without following a link; mkdir it first when asked."""
    if create:
        try:
            os.mkdir(name, mode, dir_fd=parent_fd)
        except OSError as exc:
            if exc.errno != errno.EEXIST:
                raise
    try:
        return os.open(name, os.O_RDONLY | DIRECTORY | NOFOLLOW | CLOEXEC, dir_fd=parent_fd)
    except OSError as exc:
        raise link_refused(where, exc)


def open_dirs(root_fd, parts, where, create=False, mode=0o755):
    """Walk ``parts`` (folder names) down from ``root_fd``; returns a new fd (the caller closes it)."""
    fd = os.dup(root_fd)
    try:
        for depth, name in enumerate(parts):
            child = open_dir(fd, name, "%s/%s" % (where, "/".join(parts[:depth + 1])), create, mode)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_file(dir_fd, name, where, flags=os.O_RDONLY, mode=0o600):
    """Open a regular file without following a link (and without blocking on a FIFO): root_fs's, with this
    package's message."""
    return root_fs.open_file_at(dir_fd, name, where, flags, mode, error=link_refused)


def read_text(dir_fd, name, where):
    """Text of a regular file in ``dir_fd``, or None when absent; a link is refused."""
    if lstat_at(dir_fd, name) is None:
        return None
    fd = open_file(dir_fd, name, where)
    chunks = []
    try:
        while True:
            data = os.read(fd, 1 << 20)
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", "replace")


def unlink_quiet(dir_fd, name):
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass


def atomic_write(dir_fd, name, text, where, mode=0o644, durable=True):
    """Write ``name`` via an exclusive temp file and rename; never leaves the temp file behind.

    ``O_EXCL | O_NOFOLLOW``: a link planted at the temp name is never opened. An error (ENOSPC, EIO)
    removes the temp file and is raised with the final path named."""
    tmp = "%s.%d.tmp" % (name, os.getpid())
    unlink_quiet(dir_fd, tmp)  # a leftover of a killed run with our pid: ours to remove (unlink never follows)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | CLOEXEC, mode, dir_fd=dir_fd)
    try:
        try:
            view = memoryview(text.encode("utf-8"))
            while len(view):
                view = view[os.write(fd, view):]
            if durable:
                os.fsync(fd)
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except OSError as exc:
        unlink_quiet(dir_fd, tmp)
        raise OSError(exc.errno, exc.strerror, where)


def fsync_fd(fd):
    try:
        os.fsync(fd)
    except OSError:
        pass


class Attrs(object):
    """Owner uid, group gid (None: leave as is) and file mode; folders get x where r is set."""

    def __init__(self, uid=None, gid=None, mode=0o644):
        self.uid = uid
        self.gid = gid
        self.mode = mode

    def wanted(self, is_dir):
        return self.mode | ((self.mode & 0o444) >> 2) if is_dir else self.mode

    def differs(self, st, is_dir):
        return (stat.S_IMODE(st.st_mode) != self.wanted(is_dir)
                or (self.uid is not None and st.st_uid != self.uid)
                or (self.gid is not None and st.st_gid != self.gid))

    def apply_fd(self, fd, is_dir, check_mode=False):
        """Set owner/group/mode on an open fd; True when something differed."""
        st = os.fstat(fd)
        if not self.differs(st, is_dir):
            return False
        if not check_mode:
            if (self.uid is not None and st.st_uid != self.uid) or (self.gid is not None and st.st_gid != self.gid):
                os.fchown(fd, -1 if self.uid is None else self.uid, -1 if self.gid is None else self.gid)
            os.fchmod(fd, self.wanted(is_dir))
        return True
