# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``sha256sum`` manifests: parse, validate and render ``<sha256>  <relative path>`` lines."""

from __future__ import annotations

import posixpath
import re

from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.digest import is_sha256
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.errors import WeightsError

STATE_DIR = ".gpufleet-weights"
MANIFEST_NAME = "SHA256SUMS"


def _unescape(name):
    """Undo sha256sum's escaping (a line starting with a backslash has ``\\\\``, ``\\n`` and ``\\r`` escaped)."""
    out = []
    i = 0
    while i < len(name):
        ch = name[i]
        if ch == "\\" and i + 1 < len(name):
            nxt = name[i + 1]
            out.append({"\\": "\\", "n": "\n", "r": "\r"}.get(nxt, "\\" + nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _escape(name):
    if "\\" in name or "\n" in name or "\r" in name:
        return True, name.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    return False, name


# Control characters and the line separators str.splitlines() splits on: a name holding one cannot be written
# as one line of SHA256SUMS and read back (sha256sum escapes only \\n and \\r), nor into a unit or a log line.
_BAD_NAME_CHAR = re.compile(u"[\x00-\x1f\x7f\x85\u2028\u2029]")


def decode_manifest(data, where):
    """The manifest's text; a clear error when it is not UTF-8 (sha256sum output is)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WeightsError("%s is not UTF-8 text (byte %d is 0x%02x): give the sha256sum output of the snapshot "
                           "(LC_ALL=C.UTF-8 sha256sum ...)" % (where, exc.start, bytearray(data)[exc.start]))


def check_relpath(path, where="manifest"):
    """Return the normalised relative path, or raise if it escapes the snapshot directory or cannot be a
    line of the snapshot's SHA256SUMS (control characters, line separators, a name that is not UTF-8)."""
    if not path or path.startswith("/") or "\0" in path:
        raise WeightsError("%s: %r is not a relative path inside the snapshot" % (where, path))
    bad = _BAD_NAME_CHAR.search(path)
    if bad:
        raise WeightsError("%s: %r holds the control character or line separator %r: rename the file (a snapshot's "
                           "SHA256SUMS lists one name per line)" % (where, path, bad.group(0)))
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise WeightsError("%s: %r is not a UTF-8 file name: rename the file" % (where, path))
    norm = posixpath.normpath(path)
    parts = norm.split("/")
    if norm in (".", "") or ".." in parts:
        raise WeightsError("%s: %r leaves the snapshot directory (.. is not allowed)" % (where, path))
    if parts[0] == STATE_DIR:
        raise WeightsError("%s: %r is inside %s/, which holds the module's own state" % (where, path, STATE_DIR))
    return norm


def parse_manifest(text, where="manifest"):
    """Parse sha256sum output into a list of (path, sha256), in file order.

    Accepts text mode (two spaces) and binary mode (`` *``) lines, blank lines and ``#`` comments.
    Raises WeightsError naming the line for anything else, a duplicate path, or an empty manifest.
    """
    entries = []
    seen = set()
    for lineno, raw in enumerate(text.split("\n"), 1):  # sha256sum's lines: not splitlines' \x85, \u2028, ...
        line = raw.rstrip("\r")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        escaped = line.startswith("\\")
        if escaped:
            line = line[1:]
        if len(line) < 67 or line[64] != " " or line[65] not in (" ", "*"):
            raise WeightsError(
                "%s line %d is not in sha256sum format (<64 hex digits><two spaces><path>): %r"
                % (where, lineno, raw[:120])
            )
        digest = line[:64].lower()
        if not is_sha256(digest):
            raise WeightsError("%s line %d: %r is not a sha256 hex digest" % (where, lineno, line[:64]))
        name = line[66:]
        if escaped:
            name = _unescape(name)
        path = check_relpath(name, "%s line %d" % (where, lineno))
        if path in seen:
            raise WeightsError("%s line %d: %s is listed twice" % (where, lineno, path))
        seen.add(path)
        entries.append((path, digest))
    if not entries:
        raise WeightsError("%s lists no files: generate it with `sha256sum` over the snapshot files" % where)
    return entries


def render_manifest(entries):
    """Render (path, sha256) pairs as sha256sum text, sorted by path (byte order), one trailing newline."""
    lines = []
    for path, digest in sorted(entries, key=lambda e: e[0].encode("utf-8")):
        escaped, name = _escape(path)
        lines.append("%s%s  %s" % ("\\" if escaped else "", digest, name))
    return "\n".join(lines) + "\n"
