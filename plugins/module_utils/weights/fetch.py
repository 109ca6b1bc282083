# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Streaming fetch into a temp file: HTTP range resume, hashed while streaming, fsync, verify.

A download never writes to its final path: bytes go to a ``.part`` file in the temp area (on the
same filesystem as the snapshot); the caller renames it into place only after ``fetch_to_temp``
returned a digest that matches. Each received chunk is written to the temp file before it is
hashed (on a second thread, one chunk behind), so a process killed at any point loses at most the
chunk it was receiving; a rerun hashes the partial file and asks for the rest with ``Range: bytes=N-``.
"""

from __future__ import annotations

import errno
import os
import socket
import ssl
import stat
import threading
from collections import namedtuple

try:  # Python 3
    import queue
except ImportError:  # pragma: no cover
    queue = None

try:  # Python 3
    import http.client as http_client
    from urllib.parse import urljoin, urlsplit, urlunsplit, quote
except ImportError:  # pragma: no cover - Python 2 is not supported, keeps sanity's import test calm
    http_client = None

from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.digest import CHUNK_BYTES, Digest
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.errors import WeightsError
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.record import digest_matches

WRITEBACK_BYTES = 32 * 1024 * 1024
_SFR = {}


def _sync_file_range():
    """libc's sync_file_range (Linux) or None; looked up once, on first use."""
    if "fn" not in _SFR:
        _SFR["fn"] = None
        try:
            import ctypes
            import ctypes.util
            libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
            fn = libc.sync_file_range
            fn.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint]
            fn.restype = ctypes.c_int
            _SFR["fn"] = fn
        except (ImportError, OSError, AttributeError):
            pass
    return _SFR["fn"]


class WriteBehind(object):
    """Start the kernel's writeback of each written window right away (SYNC_FILE_RANGE_WRITE, async),
    so the disk writes while the download goes on and the final fsync has little left to do."""

    WRITE = 2

    def __init__(self, fd, start, window=WRITEBACK_BYTES):
        self.fd = fd
        self.fn = _sync_file_range()
        self.window = window
        self.mark = start
        self.pos = start

    def advance(self, n):
        self.pos += n
        if self.fn is not None and self.pos - self.mark >= self.window:
            self.fn(self.fd, self.mark, self.pos - self.mark, self.WRITE)
            self.mark = self.pos


USER_AGENT = "gpufleet.vllm-model_weights/1"
RETRIES = 3
_REDIRECTS = (301, 302, 303, 307, 308)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def redact_url(url):
    """Drop user:password@ and the query string (presigned CDN URLs carry credentials there)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable url>"
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def join_url(base, relpath):
    """``base`` + a relative snapshot path, each segment percent-encoded."""
    return base.rstrip("/") + "/" + quote(relpath, safe="/")


def status_hint(status):
    if status == 404:
        return "the source does not have this file: check url/manifest, or the mirror's snapshot"
    if status in (401, 403):
        return "access denied: set token (or HF_TOKEN) for private or gated repositories, or fix the mirror's access rules"
    if status == 416:
        return "the server refused the byte range: the file on the server is shorter than expected"
    if status >= 500:
        return "the server failed: retry later or use another endpoint/mirror"
    return "unexpected HTTP status"


class HttpError(WeightsError):
    def __init__(self, status, reason, url, what):
        super(HttpError, self).__init__(
            "HTTP %s %s for %s (%s): %s" % (status, reason, redact_url(url), what, status_hint(status)),
            status=status, url=redact_url(url),
        )
        self.status = status


def url_origin(url):
    """(scheme, host[:port]) of ``url``, lower-cased, without user:password@ - what a token is bound to."""
    parts = urlsplit(url)
    return parts.scheme.lower(), parts.netloc.rsplit("@", 1)[-1].lower()


class HttpClient(object):
    """http.client with one keep-alive connection per thread and host, manual redirects.

    The bearer token is bound to one origin (``token_url``'s scheme and host: the hub endpoint). It
    is sent only on requests that start at that origin and have not left it: a redirect to another
    host (a CDN) drops it for the rest of the chain, a mirror or manifest host never sees it, and
    plain http never carries it unless ``token_over_http`` says so. It never appears in messages.
    """

    def __init__(self, token=None, token_url=None, token_over_http=False, timeout=60.0, ssl_context=None):
        self._token = token or None
        self._token_origin = url_origin(token_url) if token_url else None
        self._token_over_http = bool(token_over_http)
        self.timeout = timeout
        self._ssl = ssl_context
        self._local = threading.local()

    def token_allowed(self, url):
        """Would a request to ``url`` (first hop) carry the token?"""
        if not self._token or self._token_origin is None:
            return False
        scheme, netloc = url_origin(url)
        if scheme != "https" and not self._token_over_http:
            return False
        return (scheme, netloc) == self._token_origin

    def _connection(self, scheme, netloc, fresh=False):
        conns = getattr(self._local, "conns", None)
        if conns is None:
            conns = self._local.conns = {}
        key = (scheme, netloc)
        conn = conns.get(key)
        if conn is not None and fresh:
            conn.close()
            conn = None
        if conn is None:
            if scheme == "https":
                ctx = self._ssl or ssl.create_default_context()
                conn = http_client.HTTPSConnection(netloc, timeout=self.timeout, context=ctx)
            elif scheme == "http":
                conn = http_client.HTTPConnection(netloc, timeout=self.timeout)
            else:
                raise WeightsError("unsupported URL scheme %r (use http or https)" % scheme)
            conns[key] = conn
        return conn

    def close(self):
        for conn in getattr(self._local, "conns", {}).values():
            conn.close()
        self._local.conns = {}

    def request(self, method, url, headers=None, what="request"):
        """Send a request, follow redirects; returns an open HTTPResponse with status < 300."""
        hdrs = dict(headers or {})
        trusted = self.token_allowed(url)
        for _hop in range(10):
            parts = urlsplit(url)
            netloc = parts.netloc.rsplit("@", 1)[-1]
            send = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
            send.update(hdrs)
            trusted = trusted and self.token_allowed(url)  # once off the token's origin, never again
            if trusted:
                send["Authorization"] = "Bearer " + self._token
            target = urlunsplit(("", "", parts.path or "/", parts.query, ""))
            resp = None
            for attempt in range(2):
                conn = self._connection(parts.scheme, netloc, fresh=attempt > 0)
                try:
                    conn.request(method, target, headers=send)
                    resp = conn.getresponse()
                    break
                except (http_client.HTTPException, socket.error) as exc:
                    conn.close()
                    if attempt:
                        raise WeightsError("cannot reach %s (%s): %s" % (redact_url(url), what, exc), url=redact_url(url))
            if resp.status in _REDIRECTS:
                location = resp.getheader("Location")
                resp.read()
                if not location:
                    raise WeightsError("HTTP %d without Location from %s" % (resp.status, redact_url(url)))
                url = urljoin(url, location)
                continue
            if resp.status >= 300:
                resp.read()
                raise HttpError(resp.status, resp.reason, url, what)
            return resp
        raise WeightsError("too many redirects for %s (%s)" % (redact_url(url), what))

    def get_text(self, url, what="manifest"):
        resp = self.request("GET", url, what=what)
        data = resp.read()
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise WeightsError("%s from %s is not UTF-8 text (byte %d): give the sha256sum output of the snapshot"
                               % (what, redact_url(url), exc.start))

    def head_size(self, url, what):
        resp = self.request("HEAD", url, what=what)
        resp.read()
        length = resp.getheader("Content-Length")
        return int(length) if length is not None and length.isdigit() else None


def parse_content_range(value):
    """``bytes 100-199/1000`` -> (100, 199, 1000); total may be None (``*``)."""
    try:
        unit, rng = value.strip().split(" ", 1)
        span, total = rng.split("/", 1)
        start, end = span.split("-", 1)
        if unit != "bytes":
            return None
        return int(start), int(end), (None if total == "*" else int(total))
    except (ValueError, AttributeError):
        return None


class HttpStream(object):
    """Open ``url`` at ``offset``; ``self.offset`` is where the body really starts (0 if no range support)."""

    def __init__(self, client, url, offset, what):
        headers = {"Range": "bytes=%d-" % offset} if offset else {}
        try:
            self.resp = client.request("GET", url, headers=headers, what=what)
        except HttpError as exc:
            if exc.status == 416 and offset:
                # partial longer than the server's file: start over
                self.resp = client.request("GET", url, what=what)
                offset = -1
            else:
                raise
        if offset > 0 and self.resp.status == 206:
            rng = parse_content_range(self.resp.getheader("Content-Range", ""))
            if rng is None or rng[0] != offset:
                self.resp.close()
                raise WeightsError("server answered Range: bytes=%d- with Content-Range %r for %s (%s)"
                                   % (offset, self.resp.getheader("Content-Range"), redact_url(url), what))
            self.offset = offset
            self.total = rng[2]
        else:
            self.offset = 0  # 200: the whole body
            self.total = self.resp.length  # None for a chunked answer
        self.resp_length = self.resp.length

    def readinto(self, view):
        return self.resp.readinto(view)

    def close(self):
        self.resp.close()


class LocalStream(object):
    """Read a local (or NFS) source file from ``offset``."""

    def __init__(self, path, offset, what, nofollow=True):
        try:
            self.fd = os.open(path, os.O_RDONLY | (_NOFOLLOW if nofollow else 0))
        except OSError as exc:
            raise WeightsError("cannot read %s (%s): %s" % (path, what, exc.strerror))
        size = os.fstat(self.fd).st_size
        self.total = size
        self.offset = offset if 0 < offset <= size else 0
        os.lseek(self.fd, self.offset, os.SEEK_SET)

    def readinto(self, view):
        return os.readv(self.fd, [view])

    def close(self):
        os.close(self.fd)


def _feed_existing(path, digest, length, chunk_bytes, dir_fd=None):
    """Hash the first ``length`` bytes of a partial temp file into ``digest``."""
    buf = bytearray(chunk_bytes)
    view = memoryview(buf)
    fd = os.open(path, os.O_RDONLY | _NOFOLLOW, dir_fd=dir_fd)
    try:
        left = length
        while left > 0:
            n = os.readv(fd, [view[:min(chunk_bytes, left)]])
            if not n:
                break
            digest.update(view[:n])
            left -= n
    finally:
        os.close(fd)


def _pump(stream, fd, digest, limit, chunk_bytes, progress, counter, start=0):
    """Receive a chunk, write it to the temp file, hash it; repeat.

    With more than one CPU the hashing runs on a second thread, one chunk behind the receive + write
    (hashlib releases the GIL), over two buffers used in turn: one worker then runs at about curl's
    speed instead of paying for receive + write + hash on one core. Every chunk is written before
    it is hashed, and a rerun re-hashes the partial file from disk, so a process killed at any
    point still loses at most the one chunk it was receiving.
    """
    if (os.cpu_count() or 1) < 2:
        return _pump_inline(stream, fd, digest, limit, chunk_bytes, progress, counter, start)
    buffers = [memoryview(bytearray(chunk_bytes)), memoryview(bytearray(chunk_bytes))]
    free = queue.Queue()
    work = queue.Queue()
    for index in range(len(buffers)):
        free.put(index)

    def hash_behind():
        while True:
            item = work.get()
            if item is None:
                return
            index, n = item
            digest.update(buffers[index][:n])
            free.put(index)

    hasher = threading.Thread(target=hash_behind, name="model_weights-hash")
    hasher.daemon = True
    hasher.start()
    behind = WriteBehind(fd, start)
    received = 0
    try:
        while True:
            want = chunk_bytes
            if limit is not None:
                want = min(chunk_bytes, limit - received + 1)  # +1 notices a server sending too much
            index = free.get()
            n = stream.readinto(buffers[index][:want])
            if not n:
                free.put(index)
                break
            _write_all(fd, buffers[index][:n])
            received += n
            counter[0] += n
            work.put((index, n))
            behind.advance(n)
            if progress is not None:
                progress(n)
            if limit is not None and received > limit:
                break
    finally:
        work.put(None)
        hasher.join()  # the digest covers exactly the bytes written, also after an error
    return received


def _pump_inline(stream, fd, digest, limit, chunk_bytes, progress, counter, start=0):
    """The single-CPU loop: receive, write and hash one reused buffer (it stays in the CPU cache)."""
    buf = bytearray(chunk_bytes)
    view = memoryview(buf)
    behind = WriteBehind(fd, start)
    received = 0
    while True:
        want = chunk_bytes
        if limit is not None:
            want = min(chunk_bytes, limit - received + 1)  # +1 notices a server sending too much
        n = stream.readinto(view[:want])
        if not n:
            break
        piece = view[:n]
        _write_all(fd, piece)
        received += n
        counter[0] += n
        digest.update(piece)
        behind.advance(n)
        if progress is not None:
            progress(n)
        if limit is not None and received > limit:
            break
    return received


def _write_all(fd, view):
    while len(view):
        n = os.write(fd, view)
        view = view[n:]


def _partial_size(tmp_path, dir_fd, what):
    """Size of the partial temp file (0 when absent); a link or non-file planted there is refused."""
    try:
        st = os.stat(tmp_path, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return 0
    if not stat.S_ISREG(st.st_mode):
        raise WeightsError("the partial download of %s (%s) is a symbolic link or not a regular file; "
                           "model_weights never follows links in a tree another user can change: remove it and "
                           "rerun" % (what, tmp_path), path=what)
    return st.st_size


# What every step of one fetch_to_temp call reads; counter[0] is the bytes transferred over all attempts.
_Fetch = namedtuple("_Fetch", "spec tmp_path what dir_fd chunk_bytes progress counter")


def _no_space(job):
    return WeightsError("no space left on the filesystem of %s while fetching %s: free space or grow the model "
                        "storage, then rerun (the partial file is kept for resume)" % (job.tmp_path, job.what))


def _resume_point(job, open_stream):
    """(offset to write from, stream); the stream is None when the temp file already holds every byte."""
    spec = job.spec
    offset = _partial_size(job.tmp_path, job.dir_fd, job.what)
    if spec.size is not None and offset > spec.size:
        offset = 0
    if spec.size is not None and offset == spec.size and offset > 0:
        return offset, None
    stream = open_stream(offset)
    return stream.offset, stream  # a source without range support starts over at 0


def _pump_rest(job, stream, fd, digest, offset, may_retry):
    """Stream the bytes after ``offset`` into ``fd``; False when the transfer broke and may be resumed."""
    limit = None if job.spec.size is None else job.spec.size - offset
    try:
        _pump(stream, fd, digest, limit, job.chunk_bytes, job.progress, job.counter, offset)
    except (http_client.HTTPException, socket.error) as exc:
        if getattr(exc, "errno", None) == errno.ENOSPC:
            raise _no_space(job)
        if may_retry:
            return False
        raise WeightsError("transfer of %s kept failing (%s); rerun to resume" % (job.what, exc))
    finally:
        stream.close()
    return True


def _write_from(job, stream, digest, offset, may_retry):
    """Cut the temp file at ``offset``, write the rest from ``stream`` (if any), fsync.

    False when the transfer broke and may be resumed (nothing is synced then)."""
    fd = os.open(job.tmp_path, os.O_WRONLY | os.O_CREAT | _NOFOLLOW, 0o600, dir_fd=job.dir_fd)
    try:
        os.ftruncate(fd, offset)
        os.lseek(fd, offset, os.SEEK_SET)
        if stream is not None and not _pump_rest(job, stream, fd, digest, offset, may_retry):
            return False
        os.fsync(fd)
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise _no_space(job)
        raise
    finally:
        os.close(fd)
    return True


def _short_file(job, received, attempts, announced):
    """The source ended the file early on every attempt: keep the partial (a rerun resumes) and say so."""
    spec = job.spec
    if announced is not None and announced < spec.size:
        why = ("it announced the file as %d bytes: its copy is shorter than the manifest's (still being written, "
               "or cut); fix or refresh the mirror" % announced)
    else:
        why = ("it closed the connection cleanly before the end each time (a proxy or the server's own time or "
               "size limit); fix that limit or use another mirror")
    return WeightsError(
        "%s: the source sent %d of its %d bytes and then ended the transfer, on each of %d attempts; %s. The %d bytes "
        "received are kept (%s) and the next run resumes from there. Nothing was placed at the final path, and "
        "the manifest is not at fault: the bytes received so far were not checked against it yet"
        % (job.what, received, spec.size, attempts, why, received, job.tmp_path),
        path=spec.path, expected=spec.size, actual=received)


def _check_digest(job, digest):
    """Remove the temp file and raise when its bytes are not the ones the spec names."""
    ok, expected, actual = digest_matches(job.spec, digest)
    if not ok:
        os.unlink(job.tmp_path, dir_fd=job.dir_fd)
        raise WeightsError(
            "digest mismatch for %s: expected %s, got %s; the download was discarded and nothing was "
            "placed at the final path. The source serves different bytes than its manifest/metadata: "
            "fix the mirror or regenerate its manifest" % (job.what, expected, actual),
            path=job.spec.path, expected=expected, actual=actual,
        )


def fetch_to_temp(open_stream, spec, tmp_path, what, chunk_bytes=CHUNK_BYTES, progress=None, retries=RETRIES,
                  dir_fd=None):
    """Fill ``tmp_path`` with ``spec``'s bytes, resuming what is there; fsync; check the digest.

    With ``dir_fd``, ``tmp_path`` is a name in that folder; it is never opened through a link.

    ``open_stream(offset)`` returns an HttpStream/LocalStream. Returns (digest, bytes_transferred).
    On a digest or size mismatch the temp file is removed and WeightsError says expected vs actual.
    """
    job = _Fetch(spec, tmp_path, what, dir_fd, chunk_bytes, progress, [0])
    git_size = spec.size if (not spec.sha256 and spec.git_oid) else None
    attempt = 0
    while True:
        attempt += 1
        offset, stream = _resume_point(job, open_stream)
        announced = getattr(stream, "total", None)
        digest = Digest(git_size=git_size)
        if offset:
            _feed_existing(tmp_path, digest, offset, chunk_bytes, dir_fd)
        if not _write_from(job, stream, digest, offset, attempt <= retries):
            continue  # resume from what reached the temp file
        if spec.size is not None and digest.nbytes < spec.size:
            if attempt <= retries:
                continue  # connection closed early: resume
            raise _short_file(job, digest.nbytes, attempt, announced)
        _check_digest(job, digest)
        return digest, job.counter[0]
