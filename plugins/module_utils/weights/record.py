# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The on-disk record of verified files and the cached/full verification built on it.

The record (``<dest>/.gpufleet-weights/record.json``) maps each verified path to its size, sha256,
git blob id (hub files outside LFS), mtime_ns and inode. ``verify: cached`` trusts a file whose
stat still equals the record (cost grows with the file count, not the bytes); anything else is
re-hashed, and only a file whose content differs from the expected digest is fetched again.
"""

from __future__ import annotations

import json

RECORD_FORMAT = 1

OK = "ok"            # on disk, stat equals the record, record equals the expected digest
MISSING = "missing"  # not on disk: fetch
STALE = "stale"      # stat equals the record, but the record holds another digest (new revision): fetch
UNKNOWN = "unknown"  # on disk but not provably verified (no record, stat changed, verify full): hash it


class FileSpec(object):
    """One file the snapshot must hold: relative path, expected size and digest, where to get it."""

    __slots__ = ("path", "size", "sha256", "git_oid", "src")

    def __init__(self, path, size=None, sha256=None, git_oid=None, src=None):
        self.path = path
        self.size = size
        self.sha256 = sha256
        self.git_oid = git_oid
        self.src = src

    def expected(self):
        """A printable expected digest (sha256 when known, else the git blob id)."""
        if self.sha256:
            return "sha256:" + self.sha256
        if self.git_oid:
            return "git-blob:" + self.git_oid
        return "unpinned"

    def __repr__(self):
        return "FileSpec(%r, size=%r, %s)" % (self.path, self.size, self.expected())


def new_record(source="", revision=""):
    return {"format": RECORD_FORMAT, "source": source, "revision": revision, "files": {}}


def parse_record(text):
    """Parse record JSON. Returns (record, problem); a damaged or foreign record becomes an empty one
    (every file is then re-hashed, nothing is trusted) and ``problem`` says why."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        return new_record(), "record is not valid JSON (%s); every file will be re-hashed" % exc
    if not isinstance(data, dict) or data.get("format") != RECORD_FORMAT or not isinstance(data.get("files"), dict):
        return new_record(), "record has an unknown format; every file will be re-hashed"
    files = {}
    for path, entry in data["files"].items():
        if isinstance(entry, dict) and all(k in entry for k in ("size", "sha256", "mtime_ns", "inode")):
            files[path] = entry
    data["files"] = files
    return data, None


def render_record(record):
    return json.dumps(record, sort_keys=True, indent=1) + "\n"


def make_entry(spec, st, sha256, git_oid=None):
    entry = {"size": st.st_size, "sha256": sha256, "mtime_ns": st.st_mtime_ns, "inode": st.st_ino}
    if git_oid or spec.git_oid:
        entry["git_oid"] = git_oid or spec.git_oid
    return entry


def stat_matches(entry, st):
    return (
        entry.get("size") == st.st_size
        and entry.get("mtime_ns") == st.st_mtime_ns
        and entry.get("inode") == st.st_ino
    )


def record_matches_spec(entry, spec):
    """Does a record entry describe the content the spec expects?"""
    if spec.size is not None and entry.get("size") != spec.size:
        return False
    if spec.sha256:
        return entry.get("sha256") == spec.sha256
    if spec.git_oid:
        return entry.get("git_oid") == spec.git_oid
    return True


def classify(spec, entry, st, full=False):
    """Status of one file from its record entry (or None) and its stat result (or None when absent)."""
    if st is None:
        return MISSING
    if entry is None or not stat_matches(entry, st):
        return UNKNOWN
    if not record_matches_spec(entry, spec):
        return STALE
    return UNKNOWN if full else OK


def digest_matches(spec, digest):
    """Does a computed Digest satisfy the spec? Returns (ok, expected, actual) for messages."""
    if spec.size is not None and digest.nbytes != spec.size:
        return False, "%d bytes" % spec.size, "%d bytes" % digest.nbytes
    if spec.sha256:
        actual = digest.sha256_hex()
        return actual == spec.sha256, spec.sha256, actual
    if spec.git_oid:
        actual = digest.git_hex()
        return actual == spec.git_oid, "git blob " + spec.git_oid, "git blob %s" % actual
    return True, None, digest.sha256_hex()
