# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Streaming digests: sha256 for every file, git blob ids for small hub files that are not in LFS.

hashlib releases the GIL for buffers larger than 2 KiB, so several threads hash in parallel.
"""

from __future__ import annotations

import hashlib
import os
import re

CHUNK_BYTES = 1024 * 1024  # read/write/hash unit: small enough to stay in the CPU cache
_HEX64 = re.compile(r"^[0-9a-f]{64}\Z")
_HEX40 = re.compile(r"^[0-9a-f]{40}\Z")


def is_sha256(value):
    return isinstance(value, str) and bool(_HEX64.match(value))


def is_git_oid(value):
    return isinstance(value, str) and bool(_HEX40.match(value))


class Digest(object):
    """sha256 of the content, plus (optionally) the git blob id: sha1 over ``b"blob <size>\\0" + content``."""

    def __init__(self, git_size=None, prefix=None):
        self.sha256 = hashlib.sha256()
        self.git = None
        if git_size is not None:
            self.git = hashlib.sha1()  # nosec - git object ids are sha1 by definition; integrity comes from sha256
            self.git.update(("blob %d\0" % git_size).encode("ascii"))
        self.nbytes = 0
        if prefix:
            self.update(prefix)

    def update(self, data):
        self.sha256.update(data)
        if self.git is not None:
            self.git.update(data)
        self.nbytes += len(data)

    def sha256_hex(self):
        return self.sha256.hexdigest()

    def git_hex(self):
        return self.git.hexdigest() if self.git is not None else None


def hash_file(path, git_size=None, chunk_bytes=CHUNK_BYTES, limit=None, progress=None):
    """Hash a file (or its first ``limit`` bytes) with one reusable buffer; returns a Digest."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return hash_fd(fd, git_size, chunk_bytes, limit, progress)
    finally:
        os.close(fd)


def hash_fd(fd, git_size=None, chunk_bytes=CHUNK_BYTES, limit=None, progress=None):
    """hash_file over an open fd (opened without following links by the caller)."""
    digest = Digest(git_size=git_size)
    buf = bytearray(chunk_bytes)
    view = memoryview(buf)
    remaining = limit
    if hasattr(os, "posix_fadvise"):
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
    while True:
        want = chunk_bytes if remaining is None else min(chunk_bytes, remaining)
        if want <= 0:
            break
        n = os.readv(fd, [view[:want]])
        if not n:
            break
        digest.update(view[:n])
        if progress is not None:
            progress(n)
        if remaining is not None:
            remaining -= n
    return digest
