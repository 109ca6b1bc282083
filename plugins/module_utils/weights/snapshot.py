# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Bring ``dest`` to a verified snapshot: triage, hash, check space, fetch in parallel, promote, record.

Layout inside ``dest``::

    <snapshot files ...>
    .gpufleet-weights/record.json   verified files: size, sha256, git blob id, mtime_ns, inode
    .gpufleet-weights/SHA256SUMS    sha256sum manifest of the snapshot (what a fleet mirror serves)
    .gpufleet-weights/progress.json progress of the running job (the role prints it while polling)
    .gpufleet-weights/tmp/*.part    downloads in flight (same filesystem), renamed only once verified
    .gpufleet-weights/lock          one run per dest at a time
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time

from concurrent.futures import ThreadPoolExecutor, as_completed

from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.digest import hash_file
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.errors import WeightsError
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.fetch import fetch_to_temp
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.manifest import (
    MANIFEST_NAME, STATE_DIR, render_manifest,
)
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.plan import (
    check_space, space_needed, summarize_diff, throughput, triage,
)
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.record import (
    MISSING, OK, STALE, UNKNOWN, digest_matches, make_entry, new_record, parse_record, render_record,
)

try:
    import fcntl
except ImportError:  # pragma: no cover - Linux targets only
    fcntl = None

RECORD_NAME = "record.json"
PROGRESS_NAME = "progress.json"


def state_paths(dest):
    state = os.path.join(dest, STATE_DIR)
    return {
        "state": state,
        "record": os.path.join(state, RECORD_NAME),
        "manifest": os.path.join(state, MANIFEST_NAME),
        "progress": os.path.join(state, PROGRESS_NAME),
        "tmp": os.path.join(state, "tmp"),
        "lock": os.path.join(state, "lock"),
    }


def temp_name(spec):
    """Partial files are keyed by path and expected digest: a new revision never resumes an old partial."""
    key = "%s\0%s" % (spec.path, spec.expected())
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:40] + ".part"


def atomic_write(path, text, mode=0o644, durable=True):
    """Write via a temp file and rename; ``durable`` also fsyncs (not needed for progress.json)."""
    tmp = "%s.%d.tmp" % (path, os.getpid())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        data = text.encode("utf-8")
        view = memoryview(data)
        while len(view):
            view = view[os.write(fd, view):]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def fsync_dir(path):
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _stat(path):
    try:
        return os.stat(path)
    except OSError:
        return None


def free_bytes(path):
    """Free bytes for an unprivileged writer on the filesystem holding ``path`` (or its nearest parent)."""
    probe = path
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    st = os.statvfs(probe)
    return st.f_bavail * st.f_frsize


class Progress(object):
    """Thread-safe counters, written to progress.json about once a second by a background thread."""

    def __init__(self, path, phase, files_total, bytes_total):
        self.path = path
        self.lock = threading.Lock()
        self.state = {"phase": phase, "files_total": files_total, "files_done": 0,
                      "bytes_total": bytes_total, "bytes_done": 0, "started": time.time()}
        self._stop = threading.Event()
        self._thread = None

    def add(self, nbytes):
        with self.lock:
            self.state["bytes_done"] += nbytes

    def file_done(self):
        with self.lock:
            self.state["files_done"] += 1

    def snapshot(self):
        with self.lock:
            data = dict(self.state)
        elapsed = max(time.time() - data["started"], 1e-6)
        data["elapsed_s"] = round(elapsed, 1)
        data["bytes_per_s"] = int(data["bytes_done"] / elapsed)
        left = max(0, data["bytes_total"] - data["bytes_done"])
        data["eta_s"] = int(left / data["bytes_per_s"]) if data["bytes_per_s"] else None
        return data

    def write(self):
        if self.path:
            try:
                atomic_write(self.path, json.dumps(self.snapshot(), sort_keys=True) + "\n", durable=False)
            except OSError:
                pass

    def _run(self):
        while not self._stop.wait(1.0):
            self.write()

    def __enter__(self):
        if self.path:
            self.write()
            self._thread = threading.Thread(target=self._run, name="weights-progress")
            self._thread.daemon = True
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self.write()
        return False


def _hash_spec(path, spec, progress=None):
    git_size = spec.size if (not spec.sha256 and spec.git_oid) else None
    if git_size is None and spec.git_oid and not spec.sha256:
        git_size = os.stat(path).st_size
    return hash_file(path, git_size=git_size, progress=progress)


def sync(dest, source, verify="cached", workers=4, check_mode=False, apply_attrs=None, file_mode=0o644,
         chunk_bytes=None, clock=time.time):
    """Make ``dest`` hold ``source``'s snapshot, verified. Returns the result dict of the module.

    ``apply_attrs(path, is_dir)`` (optional) sets owner/group/mode and returns True when it changed
    something; it runs on temp files before promotion and on existing files and folders.
    """
    started = clock()
    dest = os.path.abspath(dest)
    paths = state_paths(dest)
    full = verify == "full"
    workers = max(1, int(workers))
    result = {"changed": False, "revision": source.revision, "source": source.kind, "snapshot_dir": dest,
              "fetched": [], "repaired": [], "downloaded_bytes": 0, "hashed_bytes": 0,
              "manifest": paths["manifest"], "record": paths["record"], "warnings": []}

    record_text = None
    if os.path.exists(paths["record"]):
        with open(paths["record"], "r") as handle:
            record_text = handle.read()
    if record_text is not None:
        record, problem = parse_record(record_text)
        if problem:
            result["warnings"].append(problem)
    else:
        record = new_record()
    old_files = record.get("files", {})

    lock_fd = None
    if not check_mode:
        for folder in (dest, paths["state"], paths["tmp"]):
            if not os.path.isdir(folder):
                os.makedirs(folder, 0o755)
                result["changed"] = True
        lock_fd = os.open(paths["lock"], os.O_WRONLY | os.O_CREAT, 0o644)
        if fcntl is not None:
            try:
                fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except (IOError, OSError):
                os.close(lock_fd)
                raise WeightsError("another model_weights run holds %s; wait for it to finish (or remove a "
                                   "stale async job) and rerun" % paths["lock"])
    try:
        return _sync_locked(dest, source, paths, record, old_files, full, workers, check_mode, apply_attrs,
                            file_mode, chunk_bytes, clock, started, result, record_text)
    finally:
        if lock_fd is not None:
            os.close(lock_fd)


def _sync_locked(dest, source, paths, record, old_files, full, workers, check_mode, apply_attrs, file_mode,
                 chunk_bytes, clock, started, result, record_text):
    specs = source.specs
    stats = dict((s.path, _stat(os.path.join(dest, s.path))) for s in specs)
    triaged = triage(specs, old_files, stats, full=full)
    new_files = {}
    for spec in triaged[OK]:
        new_files[spec.path] = old_files[spec.path]

    # 1. hash what cannot be trusted from the record (all of it with verify: full)
    repair = list(triaged[STALE])
    to_hash = triaged[UNKNOWN]
    if to_hash:
        hash_total = sum(stats[s.path].st_size for s in to_hash)
        progress_path = None if check_mode else paths["progress"]
        with Progress(progress_path, "verify", len(to_hash), hash_total) as progress:
            def check(spec):
                path = os.path.join(dest, spec.path)
                digest = _hash_spec(path, spec, progress.add)
                progress.file_done()
                return spec, digest, _stat(path)

            with ThreadPoolExecutor(max_workers=workers) as pool:
                for spec, digest, st in pool.map(check, to_hash):
                    result["hashed_bytes"] += digest.nbytes
                    ok, _expected, _actual = digest_matches(spec, digest)
                    if ok and st is not None:
                        new_files[spec.path] = make_entry(spec, st, digest.sha256_hex(), digest.git_hex())
                    else:
                        repair.append(spec)
    fetch = list(triaged[MISSING])
    todo = fetch + repair

    # 2. sizes, free space
    source.fill_sizes(todo, workers)
    partial = {}
    for spec in todo:
        st = _stat(os.path.join(paths["tmp"], temp_name(spec)))
        if st is not None:
            partial[spec.path] = st.st_size
    needed = space_needed(todo, partial)
    result["needed_bytes"] = needed
    if todo:
        check_space(needed, free_bytes(paths["tmp"] if os.path.isdir(paths["tmp"]) else dest), dest)

    result["fetched"] = sorted(s.path for s in fetch)
    result["repaired"] = sorted(s.path for s in repair)
    result["diff"] = summarize_diff(list(new_files), fetch, repair)
    if check_mode:
        result["changed"] = bool(todo) or record_text is None or _record_changes(record, source, new_files, specs)
        if apply_attrs is not None and os.path.isdir(dest):  # AnsibleModule only reports in check mode
            present = [s for s in specs if stats.get(s.path) is not None]
            if _apply_all(dest, present, apply_attrs):
                result["changed"] = True
        return _finish(result, source, stats, new_files, started, clock, 0.0)

    # 3. fetch in parallel; promote each file as soon as it verifies
    fetch_started = clock()
    kwargs = {"chunk_bytes": chunk_bytes} if chunk_bytes else {}
    record_lock = threading.Lock()
    last_save = [clock()]
    if todo:
        total = sum((s.size or 0) for s in todo)
        with Progress(paths["progress"], "fetch", len(todo), total) as progress:
            def get(spec):
                tmp = os.path.join(paths["tmp"], temp_name(spec))
                digest, moved = fetch_to_temp(lambda off: source.open_stream(spec, off), spec, tmp, spec.path,
                                              progress=progress.add, **kwargs)
                os.chmod(tmp, file_mode)
                if apply_attrs is not None:
                    apply_attrs(tmp, False)
                final = os.path.join(dest, spec.path)
                parent = os.path.dirname(final)
                if not os.path.isdir(parent):
                    os.makedirs(parent, 0o755)
                os.replace(tmp, final)
                fsync_dir(parent)
                entry = make_entry(spec, os.stat(final), digest.sha256_hex(), digest.git_hex())
                progress.file_done()
                with record_lock:
                    new_files[spec.path] = entry
                    result["downloaded_bytes"] += moved
                    if clock() - last_save[0] > 2.0:
                        _save_record(paths, record, source, new_files)
                        last_save[0] = clock()
                return spec

            errors = []
            with ThreadPoolExecutor(max_workers=workers) as pool:
                futures = [pool.submit(get, spec) for spec in todo]
                for future in as_completed(futures):
                    exc = future.exception()
                    if exc is not None:
                        errors.append(exc)
                        for other in futures:
                            other.cancel()
            if errors:
                with record_lock:
                    _save_record(paths, record, source, new_files)
                first = errors[0]
                if isinstance(first, WeightsError):
                    raise first
                raise WeightsError("fetch failed: %s: %s; rerun to resume" % (type(first).__name__, first))
        result["changed"] = True
    fetch_elapsed = clock() - fetch_started

    # 4. ownership/mode on everything, record + manifest, stale partials
    if apply_attrs is not None and _apply_all(dest, specs, apply_attrs):
        result["changed"] = True
        for spec in specs:  # chown/chmod does not touch mtime or inode, but refresh anyway
            st = _stat(os.path.join(dest, spec.path))
            entry = new_files.get(spec.path)
            if st is not None and entry is not None:
                entry["mtime_ns"], entry["inode"] = st.st_mtime_ns, st.st_ino
    if _record_changes(record, source, new_files, specs) or record_text is None:
        _save_record(paths, record, source, new_files)
        result["changed"] = True
    manifest_text = render_manifest([(s.path, new_files[s.path]["sha256"]) for s in specs])
    old_manifest = None
    if os.path.exists(paths["manifest"]):
        with open(paths["manifest"], "r") as handle:
            old_manifest = handle.read()
    if old_manifest != manifest_text:
        atomic_write(paths["manifest"], manifest_text)
        result["changed"] = True
    keep = set(temp_name(s) for s in specs)
    for name in os.listdir(paths["tmp"]):
        if name not in keep:
            try:
                os.unlink(os.path.join(paths["tmp"], name))
            except OSError:
                pass
    return _finish(result, source, stats, new_files, started, clock, fetch_elapsed)


def _apply_all(dest, specs, apply_attrs):
    """Owner/group/mode on every snapshot file and every folder from dest down; True if any changed."""
    changed = False
    folders = set([dest])
    for spec in specs:
        parent = os.path.dirname(os.path.join(dest, spec.path))
        while parent.startswith(dest) and parent not in folders:
            folders.add(parent)
            parent = os.path.dirname(parent)
        if apply_attrs(os.path.join(dest, spec.path), False):
            changed = True
    for folder in sorted(folders):
        if apply_attrs(folder, True):
            changed = True
    return changed


def _record_body(record, source, new_files, specs):
    body = dict(record)
    body["files"] = dict((s.path, new_files[s.path]) for s in specs if s.path in new_files)
    body["source"] = source.kind
    body["revision"] = source.revision
    body.update(source.extra_record)
    return body


def _record_changes(record, source, new_files, specs):
    return render_record(_record_body(record, source, new_files, specs)) != render_record(record)


def _save_record(paths, record, source, new_files):
    specs = [s for s in source.specs if s.path in new_files]
    body = _record_body(record, source, new_files, specs)
    atomic_write(paths["record"], render_record(body))
    record.clear()
    record.update(body)


def _finish(result, source, stats, new_files, started, clock, fetch_elapsed):
    specs = source.specs
    result["warnings"] = result["warnings"] + list(source.warnings)
    total = 0
    for spec in specs:
        if spec.size is not None:
            total += spec.size
        elif spec.path in new_files:
            total += new_files[spec.path]["size"]
        elif stats.get(spec.path) is not None:
            total += stats[spec.path].st_size
    result["file_count"] = len(specs)
    result["total_bytes"] = total
    result["elapsed_s"] = round(clock() - started, 3)
    result["throughput_bytes_per_s"] = throughput(result["downloaded_bytes"], fetch_elapsed)
    return result
