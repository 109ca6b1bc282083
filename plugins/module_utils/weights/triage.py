# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What to hash, fetch and repair, and whether it fits: pure functions over specs, record and stats."""

from __future__ import annotations

from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.errors import WeightsError
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.record import (
    MISSING, OK, STALE, UNKNOWN, classify,
)


def triage(specs, record_files, stats, full=False):
    """Split specs by status. ``stats`` maps path -> os.stat_result or None (absent).

    Returns a dict with lists of specs under ``ok``, ``missing``, ``stale`` and ``unknown``
    (``unknown`` files must be hashed before deciding between ok and repair).
    """
    out = {OK: [], MISSING: [], STALE: [], UNKNOWN: []}
    for spec in specs:
        status = classify(spec, record_files.get(spec.path), stats.get(spec.path), full=full)
        out[status].append(spec)
    return out


def space_needed(to_fetch, partial_bytes):
    """Bytes the fetch still needs on the filesystem: sizes minus what partial temp files already hold.

    A repaired file is replaced by rename only after its new copy is verified, so its old bytes are
    not counted as free. Unknown sizes (no Content-Length) count as 0.
    """
    need = 0
    for spec in to_fetch:
        size = spec.size or 0
        need += max(0, size - min(size, partial_bytes.get(spec.path, 0)))
    return need


def human_bytes(n):
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return ("%d %s" % (value, unit)) if unit == "B" else ("%.1f %s" % (value, unit))
        value /= 1024.0
    return "%d B" % n  # pragma: no cover


def check_space(needed, free, dest, reserve=0):
    """Raise before any download when ``needed`` (+ reserve) exceeds the free bytes of dest's filesystem."""
    if needed + reserve > free:
        raise WeightsError(
            "not enough space for the snapshot in %s: %s to fetch%s but only %s free on its filesystem; grow the "
            "model storage (model_storage role) or choose another dest, then rerun"
            % (dest, human_bytes(needed), (" + %s reserve" % human_bytes(reserve)) if reserve else "",
               human_bytes(free)),
            needed_bytes=needed, free_bytes=free,
        )


def summarize_diff(ok_paths, fetch_specs, repair_specs, removed=()):
    """Before/after text for diff mode: one line per file that changes."""
    before = ["%s  (not in the manifest: removed)" % rel for rel in sorted(removed)]
    after = []
    for spec in sorted(repair_specs, key=lambda s: s.path):
        before.append("%s  (content differs from %s)" % (spec.path, spec.expected()))
        after.append("%s  %s" % (spec.path, spec.expected()))
    for spec in sorted(fetch_specs, key=lambda s: s.path):
        after.append("%s  %s" % (spec.path, spec.expected()))
    return {"before": "\n".join(before) + ("\n" if before else ""),
            "after": "\n".join(after) + ("\n" if after else ""),
            "before_header": "snapshot (%d files verified)" % len(ok_paths),
            "after_header": "snapshot after fetch/repair"}


def throughput(nbytes, seconds):
    return int(nbytes / seconds) if seconds > 0 else 0
