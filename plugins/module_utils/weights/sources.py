# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a snapshot comes from, and what each file's digest must be.

- ``hf``: huggingface_hub's ``HfApi.model_info(files_metadata=True)`` resolves a branch or tag to
  the commit id and lists every file with its size; LFS files carry the sha256 the hub publishes.
  Small files outside LFS have only a git blob id: they are verified against that id (sha1 over
  ``blob <size>\\0<content>``, computed while streaming) and their sha256 is recorded from the
  verified bytes. Files are fetched from ``<endpoint>/<repo_id>/resolve/<commit>/<path>``.
- ``http``: a base URL plus a sha256sum manifest (URL or local path); sizes come from HEAD.
- ``local``: a directory (NFS mount, staging disk); the manifest if given, else sha256 is computed
  once per source file and cached in the record by the source file's size and mtime.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import stat
import traceback

from concurrent.futures import ThreadPoolExecutor

from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.digest import hash_file, is_git_oid, is_sha256
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.errors import WeightsError
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.fetch import (
    HttpStream, LocalStream, join_url, redact_url,
)
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.manifest import (
    MANIFEST_NAME, STATE_DIR, check_relpath, decode_manifest, parse_manifest, render_manifest,
)
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.record import FileSpec

_HF = {}


def load_hf_api():
    """(HfApi, None) or (None, import traceback). huggingface_hub is imported on first use only:
    its import costs ~0.4 s of CPU, which http and local runs do not pay."""
    if "api" not in _HF:
        try:
            from huggingface_hub import HfApi
            _HF["api"], _HF["error"] = HfApi, None
        except ImportError:
            _HF["api"], _HF["error"] = None, traceback.format_exc()
    return _HF["api"], _HF["error"]


DEFAULT_ENDPOINT = "https://huggingface.co"


def _pattern_list(patterns):
    out = []
    for pat in patterns or []:
        out.append(pat + "*" if pat.endswith("/") else pat)
    return out


def filter_paths(paths, allow_patterns=None, ignore_patterns=None):
    """huggingface_hub's rule: keep a path matching any allow pattern (all when none) and no ignore
    pattern; a pattern ending in ``/`` matches everything below that folder."""
    allow = _pattern_list(allow_patterns)
    ignore = _pattern_list(ignore_patterns)
    kept = []
    for path in paths:
        if allow and not any(fnmatch.fnmatchcase(path, p) for p in allow):
            continue
        if any(fnmatch.fnmatchcase(path, p) for p in ignore):
            continue
        kept.append(path)
    return kept


def manifest_revision(text):
    """The pinned identity of an http/local snapshot: the sha256 of its manifest text."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_manifest(client, manifest):
    """Manifest text from an http(s) URL or a local file."""
    if manifest.startswith(("http://", "https://")):
        return client.get_text(manifest, what="manifest " + redact_url(manifest))
    try:
        with open(manifest, "rb") as handle:
            return decode_manifest(handle.read(), "manifest " + manifest)
    except (IOError, OSError) as exc:
        raise WeightsError("cannot read manifest %s: %s; set manifest to a sha256sum file or URL" % (manifest, exc))


class Source(object):
    """A resolved snapshot: revision, the file specs, and how to open one file at an offset."""

    kind = None

    def __init__(self, revision, specs, manifest_text=None):
        self.revision = revision
        self.specs = specs
        self.manifest_text = manifest_text
        self.extra_record = {}
        self.warnings = []

    def fill_sizes(self, specs, workers):
        """Make sure each spec has a size (http asks the server); default: sizes are already known."""
        return None

    def open_stream(self, spec, offset):
        """Return a stream of ``spec``'s bytes from ``offset``: each source (hf, http, local) defines it."""
        raise TypeError("%s is a base class: use HfSource, HttpSource or LocalSource" % type(self).__name__)


def _specs_from_manifest(entries, allow, ignore):
    keep = set(filter_paths([p for p, _d in entries], allow, ignore))
    return [FileSpec(path, sha256=digest) for path, digest in entries if path in keep]


class HfSource(Source):
    kind = "hf"

    def __init__(self, client, repo_id, revision, endpoint, token, allow, ignore, api_factory=None):
        factory = api_factory or load_hf_api()[0]
        if factory is None:
            raise WeightsError("source: hf needs the huggingface_hub Python package on the target: "
                               "pip install huggingface_hub (or use source: http against a fleet mirror)")
        self.client = client
        self.endpoint = (endpoint or DEFAULT_ENDPOINT).rstrip("/")
        api = factory(endpoint=self.endpoint, token=token or False)
        try:
            info = api.model_info(repo_id, revision=revision, files_metadata=True)
        except Exception as exc:  # huggingface_hub raises many types; map the well-known ones
            raise WeightsError(hf_error_message(exc, repo_id, revision, self.endpoint))
        commit = getattr(info, "sha", None)
        if not is_git_oid(commit or ""):
            raise WeightsError("the hub did not return a commit id for %s@%s (got %r); check endpoint"
                               % (repo_id, revision, commit))
        specs = []
        siblings = info.siblings or []
        names = filter_paths([s.rfilename for s in siblings], allow, ignore)
        wanted = set(names)
        for sib in siblings:
            if sib.rfilename not in wanted:
                continue
            path = check_relpath(sib.rfilename, "hub file list")
            lfs = sib.lfs
            if lfs is not None:
                sha = lfs["sha256"] if isinstance(lfs, dict) else lfs.sha256
                size = lfs["size"] if isinstance(lfs, dict) else lfs.size
                if not is_sha256(sha):
                    raise WeightsError("the hub published no valid LFS sha256 for %s (%r)" % (path, sha))
                specs.append(FileSpec(path, size=size, sha256=sha))
            else:
                if not is_git_oid(sib.blob_id or "") or sib.size is None:
                    raise WeightsError("the hub listed %s without size/blob id; is files_metadata supported by "
                                       "endpoint %s?" % (path, self.endpoint))
                specs.append(FileSpec(path, size=sib.size, git_oid=sib.blob_id))
        if not specs:
            raise WeightsError("no files of %s@%s match allow_patterns/ignore_patterns" % (repo_id, commit))
        self.repo_id = repo_id
        super(HfSource, self).__init__(commit, specs)

    def open_stream(self, spec, offset):
        url = "%s/%s/resolve/%s/%s" % (self.endpoint, self.repo_id, self.revision, join_url("", spec.path)[1:])
        return HttpStream(self.client, url, offset, spec.path)


def hf_error_message(exc, repo_id, revision, endpoint):
    name = type(exc).__name__
    where = "%s@%s on %s" % (repo_id, revision or "main", endpoint)
    if name == "RevisionNotFoundError":
        return "revision not found: %s; set revision to an existing branch, tag or commit id" % where
    if name == "GatedRepoError":
        return "gated repository %s: accept its terms on the hub, then set token (or HF_TOKEN)" % where
    if name in ("RepositoryNotFoundError",):
        return ("repository not found or not accessible: %s; check repo_id, and set token (or HF_TOKEN) "
                "for private repositories" % where)
    if name in ("OfflineModeIsEnabled",):
        return "HF_HUB_OFFLINE is set on the target, so %s cannot be resolved; unset it or use source: http" % where
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return "hub request for %s failed (%s: %s); check endpoint and network" % (where, name, first)


class HttpSource(Source):
    kind = "http"

    def __init__(self, client, url, manifest, allow, ignore):
        self.client = client
        self.url = url.rstrip("/")
        manifest = manifest or "%s/%s/%s" % (self.url, STATE_DIR, MANIFEST_NAME)
        text = read_manifest(client, manifest)
        entries = parse_manifest(text, where="manifest " + redact_url(manifest))
        specs = _specs_from_manifest(entries, allow, ignore)
        if not specs:
            raise WeightsError("no file of manifest %s matches allow_patterns/ignore_patterns" % redact_url(manifest))
        super(HttpSource, self).__init__(manifest_revision(text), specs, text)

    def file_url(self, spec):
        return join_url(self.url, spec.path)

    def fill_sizes(self, specs, workers):
        todo = [s for s in specs if s.size is None]

        def head(spec):
            spec.size = self.client.head_size(self.file_url(spec), what="%s, named in the manifest" % spec.path)
            return spec

        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            list(pool.map(head, todo))
        unknown = [s.path for s in todo if s.size is None]
        if unknown:
            self.warnings.append("the server sent no Content-Length for %d file(s) (e.g. %s); the free-space check "
                                 "counts them as 0 bytes" % (len(unknown), unknown[0]))

    def open_stream(self, spec, offset):
        return HttpStream(self.client, self.file_url(spec), offset, spec.path)


def local_file(root, rel, follow_links):
    """The path to read for ``rel`` under ``root``: no link is followed unless ``follow_links``, and
    then only to a regular file inside ``root`` (the realpath is returned and read)."""
    full = os.path.join(root, rel)
    where = "path %s: %s" % (root, rel)
    probe = root
    linked = False
    for part in rel.split("/"):
        probe = os.path.join(probe, part)
        try:
            linked = stat.S_ISLNK(os.lstat(probe).st_mode) or linked
        except OSError:
            raise WeightsError("the manifest names %s, which is missing under path %s: fix the source directory or "
                               "the manifest" % (rel, root), path=rel)
    if linked and not follow_links:
        raise WeightsError("%s is (or lies below) a symbolic link; model_weights does not follow links in a local "
                           "source (a link to a root-only file would be copied into dest): replace it with the "
                           "file, or set follow_links: true to follow links that stay inside path" % where, path=rel)
    real = os.path.realpath(full)
    top = os.path.realpath(root)
    if linked and not real.startswith(top.rstrip("/") + "/"):
        raise WeightsError("%s is a symbolic link leading outside path (to %s); follow_links only follows links "
                           "that stay inside path: replace it with the file" % (where, real), path=rel)
    if not stat.S_ISREG(os.stat(real).st_mode):
        raise WeightsError("%s is not a regular file" % where, path=rel)
    return real if linked else full


class LocalSource(Source):
    kind = "local"

    def __init__(self, client, path, manifest, allow, ignore, workers, source_cache=None, follow_links=False):
        if not os.path.isdir(path):
            raise WeightsError("path %s is not a directory; set path to the snapshot directory (e.g. an NFS mount)"
                               % path)
        self.root = path
        self.follow_links = follow_links
        if manifest:
            text = read_manifest(client, manifest)
            specs = _specs_from_manifest(parse_manifest(text, where="manifest " + manifest), allow, ignore)
            for spec in specs:
                spec.size = os.stat(local_file(path, spec.path, follow_links)).st_size
            cache = {}
        else:
            specs, cache = self._compute(path, allow, ignore, workers, source_cache or {}, follow_links)
            text = render_manifest([(s.path, s.sha256) for s in specs])
        if not specs:
            raise WeightsError("no file under %s matches allow_patterns/ignore_patterns" % path)
        super(LocalSource, self).__init__(manifest_revision(text), specs, text)
        self.extra_record = {"source_files": cache} if cache else {}

    @staticmethod
    def _compute(root, allow, ignore, workers, old_cache, follow_links=False):
        found = []
        for base, dirs, files in os.walk(root, followlinks=follow_links):
            rel_base = os.path.relpath(base, root)
            if rel_base == ".":
                dirs[:] = [d for d in dirs if d != STATE_DIR]
            for name in dirs:
                rel = name if rel_base == "." else os.path.join(rel_base, name)
                local_file_dir_check(root, rel.replace(os.sep, "/"), follow_links)
            for name in files:
                rel = name if rel_base == "." else os.path.join(rel_base, name)
                found.append(check_relpath(rel.replace(os.sep, "/"), "source %s" % root))
        paths = sorted(filter_paths(found, allow, ignore))
        cache = {}

        def one(rel):
            real = local_file(root, rel, follow_links)
            st = os.stat(real)
            old = old_cache.get(rel)
            if old and old.get("size") == st.st_size and old.get("mtime_ns") == st.st_mtime_ns:
                sha = old["sha256"]
            else:
                sha = hash_file(real).sha256_hex()
            cache[rel] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha}
            return FileSpec(rel, size=st.st_size, sha256=sha)

        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            specs = list(pool.map(one, paths))
        return specs, cache

    def open_stream(self, spec, offset):
        return LocalStream(local_file(self.root, spec.path, self.follow_links), offset, spec.path,
                           nofollow=not self.follow_links)


def local_file_dir_check(root, rel, follow_links):
    """A folder link under a local source: refused, or (follow_links) only when it stays inside root."""
    full = os.path.join(root, rel)
    if not os.path.islink(full):
        return
    real = os.path.realpath(full)
    if not follow_links:
        raise WeightsError("path %s: %s is a symbolic link; model_weights does not follow links in a local source: "
                           "replace it, or set follow_links: true to follow links that stay inside path"
                           % (root, rel), path=rel)
    if not real.startswith(os.path.realpath(root).rstrip("/") + "/"):
        raise WeightsError("path %s: %s is a symbolic link leading outside path (to %s); follow_links only follows "
                           "links that stay inside path" % (root, rel, real), path=rel)
