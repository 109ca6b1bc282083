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

import errno
import hashlib
import json
import os
import stat
import threading
import time

from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

from ansible_collections.gpufleet.vllm.plugins.module_utils.weights import safefs
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.digest import hash_fd
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.errors import WeightsError
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.fetch import fetch_to_temp
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.manifest import (
    MANIFEST_NAME, STATE_DIR, render_manifest,
)
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.triage import (
    check_space, space_needed, summarize_diff, throughput, triage,
)
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.record import (
    OK, STALE, UNKNOWN, digest_matches, make_entry, new_record, parse_record, render_record,
)

try:
    import fcntl
except ImportError:  # pragma: no cover - Linux targets only
    fcntl = None

RECORD_NAME = "record.json"
PROGRESS_NAME = "progress.json"


def state_paths(dest):  # for messages and results: every access goes through Tree's fds
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


class Tree(object):
    """Folder fds of dest, its state folder and temp area, opened without following links.

    In check mode nothing is created: a missing folder is None. Everything below dest is reached
    through these fds (see safefs), so a link planted by the owner of dest is refused, not followed."""

    def __init__(self, dest, create):
        self.dest = dest
        self.root = self.state = self.tmp = None
        self.created = False
        if not create and not os.path.isdir(dest):
            return
        self.created = create and not os.path.isdir(dest)
        self.root = safefs.open_root(dest, create)
        self.state = self._sub(self.root, STATE_DIR, os.path.join(dest, STATE_DIR), create)
        if self.state is not None:
            self.tmp = self._sub(self.state, "tmp", os.path.join(dest, STATE_DIR, "tmp"), create)

    def _sub(self, parent, name, where, create):
        if create and safefs.lstat_at(parent, name) is None:
            self.created = True
        elif not create and safefs.lstat_at(parent, name) is None:
            return None
        return safefs.open_dir(parent, name, where, create)

    def close(self):
        for fd in (self.tmp, self.state, self.root):
            if fd is not None:
                os.close(fd)

    def where(self, rel):
        return os.path.join(self.dest, rel)

    def parent_fd(self, rel, create=False):
        """(fd of rel's folder, leaf name), or (None, leaf) when the folder is missing (no create)."""
        parts = rel.split("/")
        try:
            return safefs.open_dirs(self.root, parts[:-1], self.dest, create=create), parts[-1]
        except OSError as exc:
            if exc.errno in (errno.ENOENT,):
                return None, parts[-1]
            raise

    def lstat(self, rel):
        """lstat of a snapshot file; None when absent; a link or non-file there is refused."""
        if self.root is None:
            return None
        fd, leaf = self.parent_fd(rel)
        if fd is None:
            return None
        try:
            st = safefs.lstat_at(fd, leaf)
        finally:
            os.close(fd)
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise safefs.link_refused(self.where(rel))
        return st

    def open_file(self, rel):
        fd, leaf = self.parent_fd(rel)
        if fd is None:
            raise OSError(errno.ENOENT, "No such file or directory", self.where(rel))
        try:
            return safefs.open_file(fd, leaf, self.where(rel))
        finally:
            os.close(fd)


class Progress(object):
    """Thread-safe counters, written to progress.json about once a second by a background thread."""

    def __init__(self, path, phase, files_total, bytes_total, dir_fd=None):
        self.path = path
        self.dir_fd = dir_fd
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
                safefs.atomic_write(self.dir_fd, PROGRESS_NAME if self.dir_fd is not None else self.path,
                                    json.dumps(self.snapshot(), sort_keys=True) + "\n", self.path, durable=False)
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


class SyncOptions(object):
    """How to sync: verification depth, parallelism, check mode, owner/group/mode, test knobs."""

    def __init__(self, verify="cached", workers=4, check_mode=False, attrs=None, chunk_bytes=None, clock=time.time):
        self.full = verify == "full"
        self.workers = max(1, int(workers))
        self.check_mode = check_mode
        self.attrs = attrs
        self.chunk_bytes = chunk_bytes
        self.clock = clock


class Run(object):
    """The state of one sync: the tree's fds, the old record, the files verified so far, the result."""

    def __init__(self, dest, source, opts, tree):
        self.dest, self.source, self.opts, self.tree = dest, source, opts, tree
        self.paths = state_paths(dest)
        self.started = opts.clock()
        self.record_lock = threading.Lock()
        self.new_files = {}
        self.record_text = None
        self.record = new_record()
        self.result = {"changed": tree.created, "revision": source.revision, "source": source.kind,
                       "snapshot_dir": dest, "fetched": [], "repaired": [], "removed": [], "downloaded_bytes": 0,
                       "hashed_bytes": 0, "manifest": self.paths["manifest"], "record": self.paths["record"],
                       "warnings": []}


def sync(dest, source, verify="cached", workers=4, check_mode=False, attrs=None, chunk_bytes=None, clock=time.time):
    """Make ``dest`` hold ``source``'s snapshot, verified. Returns the result dict of the module.

    ``attrs`` (safefs.Attrs, optional) is the owner/group/mode of files and folders; it is set through
    fds on temp files before promotion and on existing files and folders."""
    opts = SyncOptions(verify, workers, check_mode, attrs, chunk_bytes, clock)
    dest = os.path.abspath(dest)
    tree = Tree(dest, create=not check_mode)
    try:
        run = Run(dest, source, opts, tree)
        _load_record(run)
        lock_fd = None if check_mode else _lock(tree, run.paths["lock"])
        try:
            return _sync_locked(run)
        finally:
            if lock_fd is not None:
                os.close(lock_fd)
    finally:
        tree.close()


def _lock(tree, where):
    lock_fd = os.open("lock", os.O_WRONLY | os.O_CREAT | safefs.NOFOLLOW | safefs.CLOEXEC, 0o644, dir_fd=tree.state)
    if fcntl is not None:
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except (IOError, OSError):
            os.close(lock_fd)
            raise WeightsError("another model_weights run holds %s; wait for it to finish (or remove a "
                               "stale async job) and rerun" % where)
    return lock_fd


def _load_record(run):
    if run.tree.state is not None:
        run.record_text = safefs.read_text(run.tree.state, RECORD_NAME, run.paths["record"])
    if run.record_text is not None:
        run.record, problem = parse_record(run.record_text)
        if problem:
            run.result["warnings"].append("%s: %s" % (run.paths["record"], problem))


def _sync_locked(run):
    """The named steps of a sync; check mode stops after the plan."""
    stats, repair = _verify_existing(run)
    todo = _plan(run, stats, repair)
    if run.opts.check_mode:
        return _finish_check(run, stats, todo)
    if run.result["removed"]:  # first: the record saved by a failed fetch no longer lists them
        remove_strays(run.tree, run.result["removed"])
        run.result["changed"] = True
    fetch_started = run.opts.clock()
    if todo:
        _fetch_all(run, todo)
        run.result["changed"] = True
    fetch_elapsed = run.opts.clock() - fetch_started
    _settle(run)
    return _finish(run.result, run.source, stats, run.new_files, run.started, run.opts.clock, fetch_elapsed)


def _verify_existing(run):
    """Triage every file against the record; hash what cannot be trusted (all with verify: full)."""
    specs, tree = run.source.specs, run.tree
    old_files = run.record.get("files", {})
    stats = dict((s.path, tree.lstat(s.path)) for s in specs)
    triaged = triage(specs, old_files, stats, full=run.opts.full)
    for spec in triaged[OK]:
        run.new_files[spec.path] = old_files[spec.path]
    repair = list(triaged[STALE])
    to_hash = triaged[UNKNOWN]
    if not to_hash:
        return stats, repair
    hash_total = sum(stats[s.path].st_size for s in to_hash)
    progress_path = None if run.opts.check_mode else run.paths["progress"]
    with Progress(progress_path, "verify", len(to_hash), hash_total, tree.state) as progress:
        def check(spec):
            fd = tree.open_file(spec.path)
            try:
                digest = _hash_spec(fd, spec, progress.add)
                st = os.fstat(fd)
            except OSError as exc:  # EIO on a failing disk: name the file
                raise OSError(exc.errno, exc.strerror, tree.where(spec.path))
            finally:
                os.close(fd)
            progress.file_done()
            return spec, digest, st

        with ThreadPoolExecutor(max_workers=run.opts.workers) as pool:
            for spec, digest, st in pool.map(check, to_hash):
                run.result["hashed_bytes"] += digest.nbytes
                ok, _expected, _actual = digest_matches(spec, digest)
                if ok:
                    run.new_files[spec.path] = make_entry(spec, st, digest.sha256_hex(), digest.git_hex())
                else:
                    repair.append(spec)
    return stats, repair


def _hash_spec(fd, spec, progress=None):
    git_size = spec.size if (not spec.sha256 and spec.git_oid) else None
    if git_size is None and spec.git_oid and not spec.sha256:
        git_size = os.fstat(fd).st_size
    return hash_fd(fd, git_size=git_size, progress=progress)


def _plan(run, stats, repair):
    """Files to fetch (missing) and repair, sizes, the free-space check, the diff."""
    fetch = [s for s in run.source.specs if stats[s.path] is None]
    todo = fetch + repair
    run.source.fill_sizes(todo, run.opts.workers)
    partial = {}
    for spec in todo:
        st = safefs.lstat_at(run.tree.tmp, temp_name(spec)) if run.tree.tmp is not None else None
        if st is not None:
            partial[spec.path] = st.st_size
    needed = space_needed(todo, partial)
    run.result["needed_bytes"] = needed
    if todo:
        check_space(needed, free_bytes(run.paths["tmp"] if run.tree.tmp is not None else run.dest), run.dest)
    run.result["fetched"] = sorted(s.path for s in fetch)
    run.result["repaired"] = sorted(s.path for s in repair)
    if run.tree.root is not None:
        remove, foreign = strays(run.tree, [s.path for s in run.source.specs], run.record.get("files", {}))
        run.result["removed"] = remove
        if foreign:
            run.result["warnings"].append(_foreign_warning(run.dest, foreign))
    run.result["diff"] = summarize_diff(list(run.new_files), fetch, repair, run.result["removed"])
    return todo


def _finish_check(run, stats, todo):
    result = run.result
    result["changed"] = (bool(todo) or run.record_text is None or bool(result["removed"])
                         or _record_changes(run.record, run.source, run.new_files, run.source.specs))
    if run.opts.attrs is not None and run.tree.root is not None:
        present = [s for s in run.source.specs if stats.get(s.path) is not None]
        if _apply_all(run.tree, present, run.opts.attrs, check_mode=True):
            result["changed"] = True
    return _finish(result, run.source, stats, run.new_files, run.started, run.opts.clock, 0.0)


def _fetch_one(run, spec, progress):
    """Fetch one file into the temp area, set its attributes, rename it into place, record it."""
    tree, name = run.tree, temp_name(spec)
    kwargs = {"chunk_bytes": run.opts.chunk_bytes} if run.opts.chunk_bytes else {}
    digest, moved = fetch_to_temp(lambda off: run.source.open_stream(spec, off), spec, name, spec.path,
                                  progress=progress.add, dir_fd=tree.tmp, **kwargs)
    fd = safefs.open_file(tree.tmp, name, os.path.join(run.paths["tmp"], name))
    try:
        (run.opts.attrs or safefs.Attrs()).apply_fd(fd, False)
    finally:
        os.close(fd)
    parent, leaf = tree.parent_fd(spec.path, create=True)
    try:
        if safefs.lstat_at(parent, leaf) is not None:
            tree.lstat(spec.path)  # refuses a link or folder sitting at the final path
        os.replace(name, leaf, src_dir_fd=tree.tmp, dst_dir_fd=parent)
        safefs.fsync_fd(parent)
        st = os.stat(leaf, dir_fd=parent, follow_symlinks=False)
    finally:
        os.close(parent)
    progress.file_done()
    with run.record_lock:
        run.new_files[spec.path] = make_entry(spec, st, digest.sha256_hex(), digest.git_hex())
        run.result["downloaded_bytes"] += moved
        if run.opts.clock() - run.last_save > 2.0:
            _save_record(run)
            run.last_save = run.opts.clock()
    return spec


def first_error(futures):
    """Wait for ``futures``; on the first failure cancel the queued ones. Returns the first exception.

    A cancelled future is dropped from the wait (``future.exception()`` on it would raise
    CancelledError, and a future cancelled before a worker saw it is never "done"): the error
    reported is the HTTP/IO error that started the cancellation; running ones are still awaited."""
    pending = set(futures)
    first = None
    while pending:
        done, pending = wait(pending, return_when=FIRST_EXCEPTION)
        for future in done:
            if first is None and not future.cancelled() and future.exception() is not None:
                first = future.exception()
        if first is not None:
            pending = set(f for f in pending if not f.cancel())
    return first


def _fetch_all(run, todo):
    run.last_save = run.opts.clock()
    total = sum((s.size or 0) for s in todo)
    with Progress(run.paths["progress"], "fetch", len(todo), total, run.tree.state) as progress:
        with ThreadPoolExecutor(max_workers=run.opts.workers) as pool:
            first = first_error([pool.submit(_fetch_one, run, spec, progress) for spec in todo])
    if first is None:
        return
    with run.record_lock:
        _save_record(run)
    if isinstance(first, (WeightsError, OSError)):
        raise first
    raise WeightsError("fetch failed: %s: %s; rerun to resume" % (type(first).__name__, first))


def _settle(run):
    """Owner/group/mode on everything, record + manifest, stale partials."""
    specs, tree = run.source.specs, run.tree
    if run.opts.attrs is not None and _apply_all(tree, specs, run.opts.attrs):
        run.result["changed"] = True
        for spec in specs:  # chown/chmod does not touch mtime or inode, but refresh anyway
            st = tree.lstat(spec.path)
            entry = run.new_files.get(spec.path)
            if st is not None and entry is not None:
                entry["mtime_ns"], entry["inode"] = st.st_mtime_ns, st.st_ino
    if _record_changes(run.record, run.source, run.new_files, specs) or run.record_text is None:
        _save_record(run)
        run.result["changed"] = True
    manifest_text = render_manifest([(s.path, run.new_files[s.path]["sha256"]) for s in specs])
    if safefs.read_text(tree.state, MANIFEST_NAME, run.paths["manifest"]) != manifest_text:
        safefs.atomic_write(tree.state, MANIFEST_NAME, manifest_text, run.paths["manifest"])
        run.result["changed"] = True
    keep = set(temp_name(s) for s in specs)
    for name in os.listdir(tree.tmp):
        if name not in keep:
            safefs.unlink_quiet(tree.tmp, name)  # unlink removes a link itself, never its target


def strays(tree, keep, recorded):
    """(remove, foreign) below dest, the state folder aside, walked through fds without following links.

    ``remove``: files an earlier run of this module placed and recorded (an earlier model's or revision's)
    that the new manifest does not list - a stale model.safetensors.index.json would make the plan, and
    vLLM's loader, use the old shards. ``foreign``: unlisted files this module did not place; they are
    reported, never removed (dest may be a folder someone else also uses)."""
    keep, recorded = set(keep), set(recorded)
    remove, foreign = [], []

    def walk(fd, prefix):
        for name in sorted(os.listdir(fd)):
            rel = prefix + name
            if rel == STATE_DIR:
                continue
            st = safefs.lstat_at(fd, name)
            if st is not None and stat.S_ISDIR(st.st_mode):
                sub = safefs.open_dir(fd, name, tree.where(rel))
                try:
                    walk(sub, rel + "/")
                finally:
                    os.close(sub)
            elif st is not None and rel not in keep:
                (remove if rel in recorded else foreign).append(rel)

    walk(tree.root, "")
    return remove, foreign


def remove_strays(tree, files):
    """Unlink ``files`` (a link is removed, never its target), then the folders they leave empty."""
    folders = set()
    for rel in files:
        fd, leaf = tree.parent_fd(rel)
        if fd is None:
            continue
        try:
            os.unlink(leaf, dir_fd=fd)
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                raise OSError(exc.errno, "cannot remove %s, which the new manifest does not list: %s"
                              % (tree.where(rel), exc.strerror), tree.where(rel))
        finally:
            os.close(fd)
        parts = rel.split("/")
        folders.update("/".join(parts[:depth]) for depth in range(1, len(parts)))
    for rel in sorted(folders, key=lambda f: -f.count("/")):  # deepest first
        fd, leaf = tree.parent_fd(rel)
        if fd is None:
            continue
        try:
            os.rmdir(leaf, dir_fd=fd)
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.ENOTEMPTY, errno.EEXIST):
                raise
        finally:
            os.close(fd)


def _foreign_warning(dest, foreign):
    shown = ", ".join(foreign[:10]) + (", ..." if len(foreign) > 10 else "")
    return ("%s holds %d file(s) that the snapshot does not list and model_weights did not place, left as they are: "
            "%s. vLLM reads every *.safetensors and a model.safetensors.index.json in the model folder: remove "
            "them, or give the snapshot a folder of its own" % (dest, len(foreign), shown))


def _apply_all(tree, specs, attrs, check_mode=False):
    """Owner/group/mode on every snapshot file and every folder from dest down; True if any changed."""
    changed = False
    folders = set([()])
    for spec in specs:
        parts = tuple(spec.path.split("/"))
        for depth in range(1, len(parts)):
            folders.add(parts[:depth])
        fd = tree.open_file(spec.path)
        try:
            changed = attrs.apply_fd(fd, False, check_mode) or changed
        finally:
            os.close(fd)
    for folder in sorted(folders):
        fd = safefs.open_dirs(tree.root, list(folder), tree.dest)
        try:
            changed = attrs.apply_fd(fd, True, check_mode) or changed
        finally:
            os.close(fd)
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


def _save_record(run):
    specs = [s for s in run.source.specs if s.path in run.new_files]
    body = _record_body(run.record, run.source, run.new_files, specs)
    safefs.atomic_write(run.tree.state, RECORD_NAME, render_record(body), run.paths["record"])
    run.record.clear()
    run.record.update(body)


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
