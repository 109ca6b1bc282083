# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""FAKE Hugging Face Hub: a test double answering the endpoints huggingface_hub and model_weights call.

Not the real hub. It serves, from memory:

- ``GET /api/models/<org>/<name>[/revision/<rev>]?blobs=true``: what ``HfApi.model_info(...,
  files_metadata=True)`` reads: ``sha`` (the commit a branch/tag resolves to) and ``siblings`` with
  ``size``, ``blobId`` (git blob id) and, for files at or above ``lfs_threshold`` bytes, ``lfs``
  (``sha256``, ``size``, ``pointerSize``). Errors carry the ``X-Error-Code`` header the client maps
  (RepoNotFound -> 401, RevisionNotFound -> 404, GatedRepo -> 403).
- ``GET|HEAD /<org>/<name>/resolve/<rev>/<path>``: small files directly; LFS files answer 302 to a
  "CDN" URL on another host name (``cdn_host``), as the real hub does, so tests can check that the
  bearer token is not forwarded there. Both honour ``Range: bytes=N-``.

Every request is logged (method, host, path, whether an Authorization header came, and its value
only as "matches the expected token" or not); bytes sent are counted per file.

Usage (tests)::

    hub = FakeHub()
    commit = hub.add_commit("org/model", {"config.json": b"{}", "model.safetensors": data}, tags=["v1"])
    hub.start()   # hub.endpoint -> http://127.0.0.1:<port>
    ...
    hub.stop()
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit


def git_blob_id(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class FakeHub(object):
    def __init__(self, lfs_threshold=1024, host="127.0.0.1", cdn_host="localhost", token=None, rate=None):
        self.lfs_threshold = lfs_threshold
        self.host = host
        self.cdn_host = cdn_host
        self.token = token          # when set, repos added with private=True need it
        self.rate = rate            # bytes/s per response when set (slow server for kill tests)
        self.repos = {}
        self.log = []
        self.sent = {}
        self.corrupt = {}           # path -> bytes served instead of the real content
        self._lock = threading.Lock()
        self._server = None
        self._thread = None

    # -- content -------------------------------------------------------------------------------
    def add_commit(self, repo_id, files, branch="main", tags=(), private=False, gated=False):
        repo = self.repos.setdefault(repo_id, {"refs": {}, "commits": {}, "private": private, "gated": gated})
        commit = hashlib.sha1(json.dumps(sorted((k, hashlib.sha256(v).hexdigest()) for k, v in files.items()))
                              .encode() + repo_id.encode() + str(len(repo["commits"])).encode()).hexdigest()
        repo["commits"][commit] = dict(files)
        repo["refs"][branch] = commit
        for tag in tags:
            repo["refs"][tag] = commit
        return commit

    def resolve(self, repo_id, rev):
        repo = self.repos[repo_id]
        if rev in repo["commits"]:
            return rev
        return repo["refs"].get(rev)

    def sibling(self, path, data):
        sib = {"rfilename": path, "size": len(data), "blobId": git_blob_id(data)}
        if len(data) >= self.lfs_threshold:
            sib["size"] = len(data)
            sib["lfs"] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
        return sib

    # -- server --------------------------------------------------------------------------------
    @property
    def endpoint(self):
        return "http://%s:%d" % (self.host, self.port)

    def start(self):
        hub = self

        class Handler(_Handler):
            pass
        Handler.hub = hub
        self._server = ThreadingHTTPServer((self.host, 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-hf-hub")
        self._thread.daemon = True
        self._thread.start()
        return self

    def stop(self):
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def record(self, **entry):
        with self._lock:
            self.log.append(entry)

    def count(self, path, n):
        with self._lock:
            self.sent[path] = self.sent.get(path, 0) + n


_API = re.compile(r"^/api/models/([^/]+/[^/]+)(?:/revision/([^/?]+))?$")
_RESOLVE = re.compile(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$")
_CDN = re.compile(r"^/cdn/([0-9a-f]{64})/(.+)$")


class _Handler(BaseHTTPRequestHandler):
    hub = None
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet
        pass

    def _error(self, status, code=None, message=None):
        body = json.dumps({"error": message or code or "error"}).encode()
        self.send_response(status)
        if code:
            self.send_header("X-Error-Code", code)
        if message:
            self.send_header("X-Error-Message", message)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _authorized(self, repo):
        if not (repo["private"] or repo["gated"]):
            return True
        return self.hub.token is not None and self.headers.get("Authorization") == "Bearer " + self.hub.token

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        hub = self.hub
        url = urlsplit(self.path)
        path = unquote(url.path)
        auth = self.headers.get("Authorization")
        hub.record(method=self.command, host=self.headers.get("Host", ""), path=path,
                   auth_sent=auth is not None, auth_ok=(hub.token is not None and auth == "Bearer %s" % hub.token),
                   range=self.headers.get("Range"))
        m = _API.match(path)
        if m:
            return self._api(m.group(1), m.group(2) or "main", url.query)
        m = _CDN.match(path)
        if m:
            sha, name = m.group(1), m.group(2)
            for repo in hub.repos.values():
                for files in repo["commits"].values():
                    for fpath, data in files.items():
                        if fpath == name and hashlib.sha256(data).hexdigest() == sha:
                            return self._send(fpath, hub.corrupt.get(fpath, data))
            return self._error(404, "EntryNotFound")
        m = _RESOLVE.match(path)
        if m:
            return self._resolve(m.group(1), m.group(2), m.group(3))
        return self._error(404, message="Not Found")

    def _api(self, repo_id, rev, query):
        hub = self.hub
        repo = hub.repos.get(repo_id)
        if repo is None or (repo["private"] and not self._authorized(repo)):
            return self._error(401, "RepoNotFound", "Repository not found")
        commit = hub.resolve(repo_id, rev)
        if commit is None:
            return self._error(404, "RevisionNotFound", "Invalid rev id: %s" % rev)
        files = repo["commits"][commit]
        blobs = "blobs=true" in query or "blobs=True" in query
        siblings = [hub.sibling(p, d) if blobs else {"rfilename": p} for p, d in sorted(files.items())]
        body = json.dumps({"_id": "fake", "id": repo_id, "modelId": repo_id, "sha": commit, "private": repo["private"],
                           "gated": "manual" if repo["gated"] else False, "disabled": False,
                           "lastModified": "2026-11-01T00:00:00.000Z", "tags": [], "siblings": siblings}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _resolve(self, repo_id, rev, fpath):
        hub = self.hub
        repo = hub.repos.get(repo_id)
        if repo is None or not self._authorized(repo):
            if repo is not None and repo["gated"]:
                return self._error(403, "GatedRepo", "Access to model %s is restricted" % repo_id)
            return self._error(401, "RepoNotFound", "Repository not found")
        commit = hub.resolve(repo_id, rev)
        if commit is None:
            return self._error(404, "RevisionNotFound", "Invalid rev id: %s" % rev)
        files = repo["commits"][commit]
        if fpath not in files:
            return self._error(404, "EntryNotFound", "Entry not found")
        data = files[fpath]
        if len(data) >= hub.lfs_threshold:
            location = "http://%s:%d/cdn/%s/%s" % (hub.cdn_host, hub.port, hashlib.sha256(data).hexdigest(), fpath)
            self.send_response(302)
            self.send_header("Location", location)
            self.send_header("X-Repo-Commit", commit)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        return self._send(fpath, hub.corrupt.get(fpath, data))

    def _send(self, fpath, data):
        start = 0
        rng = self.headers.get("Range")
        if rng:
            m = re.match(r"bytes=(\d+)-$", rng.strip())
            if m and int(m.group(1)) >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % len(data))
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            start = int(m.group(1)) if m else 0
        body = data[start:]
        self.send_response(206 if start else 200)
        if start:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command == "HEAD":
            return
        send_body(self.wfile, body, self.hub.rate, lambda n: self.hub.count(fpath, n))


def send_body(wfile, body, rate, count):
    """Write ``body`` in 64 KiB pieces, at ``rate`` bytes/s when set; count what reached the socket."""
    piece = 64 * 1024
    view = memoryview(body)
    started = time.time()
    sent = 0
    try:
        while sent < len(body):
            n = min(piece, len(body) - sent)
            wfile.write(view[sent:sent + n])
            sent += n
            count(n)
            if rate:
                ahead = sent / float(rate) - (time.time() - started)
                if ahead > 0:
                    time.sleep(ahead)
    except (BrokenPipeError, ConnectionResetError):
        pass
