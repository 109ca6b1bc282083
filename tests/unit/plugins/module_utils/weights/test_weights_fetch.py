# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import hashlib
import os
import socket

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.weights import fetch
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.errors import WeightsError
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.record import FileSpec

DATA = bytes(bytearray(range(256))) * 1000  # 256000 bytes
SHA = hashlib.sha256(DATA).hexdigest()


class FakeStream(object):
    """Serves DATA (or ``body``) from an offset; can honour or ignore ranges and die after N bytes."""

    def __init__(self, offset, body=DATA, ranges=True, die_after=None):
        self.offset = offset if ranges else 0
        self.body = body[self.offset:]
        self.pos = 0
        self.die_after = die_after

    def readinto(self, view):
        if self.die_after is not None and self.pos >= self.die_after:
            raise socket.error("connection reset by fake peer")
        n = min(len(view), len(self.body) - self.pos)
        if self.die_after is not None:
            n = min(n, self.die_after - self.pos)
        view[:n] = self.body[self.pos:self.pos + n]
        self.pos += n
        return n

    def close(self):
        pass


def opener(calls, **kw):
    def open_stream(offset):
        calls.append(offset)
        return FakeStream(offset, **kw)
    return open_stream


@pytest.mark.parametrize("partial, ranges, want_offsets, want_moved", [
    (0, True, [0], len(DATA)),
    (100000, True, [100000], len(DATA) - 100000),       # resume with Range
    (100000, False, [100000], len(DATA)),              # server ignores Range: start over
    (len(DATA), True, [], 0),                          # complete partial from a killed run: no request
    (len(DATA) + 5, True, [0], len(DATA)),             # oversize partial: start over
])
def test_fetch_resume(tmp_path, partial, ranges, want_offsets, want_moved):
    tmp = tmp_path / "x.part"
    if partial:
        tmp.write_bytes((DATA + b"extra")[:partial])
    calls = []
    digest, moved = fetch.fetch_to_temp(opener(calls, ranges=ranges), FileSpec("x", len(DATA), SHA), str(tmp), "x",
                                        chunk_bytes=64 * 1024 * 4)
    assert calls == want_offsets and moved == want_moved
    assert digest.sha256_hex() == SHA and tmp.read_bytes() == DATA


def test_fetch_retries_a_dropped_connection_from_where_it_stopped(tmp_path):
    calls = []
    state = {"n": 0}

    def open_stream(offset):
        calls.append(offset)
        state["n"] += 1
        return FakeStream(offset, die_after=65536 * 2 if state["n"] == 1 else None)

    digest, moved = fetch.fetch_to_temp(open_stream, FileSpec("x", len(DATA), SHA), str(tmp_path / "p"), "x",
                                        chunk_bytes=65536 * 4)
    assert calls == [0, 131072] and moved == len(DATA) and digest.sha256_hex() == SHA


@pytest.mark.parametrize("body, size, fragment", [
    (DATA[:-1] + b"\0", len(DATA), "digest mismatch for x: expected " + SHA),
    (DATA + b"more", len(DATA), "expected %d bytes, got" % len(DATA)),
])
def test_fetch_bad_bytes_leave_nothing(tmp_path, body, size, fragment):
    tmp = tmp_path / "x.part"
    with pytest.raises(WeightsError) as err:
        fetch.fetch_to_temp(opener([], body=body), FileSpec("x", size, SHA), str(tmp), "x", chunk_bytes=65536 * 4,
                            retries=0)
    assert fragment in err.value.message
    assert "nothing was placed at the final path" in err.value.message
    assert not tmp.exists()


class ShortStream(FakeStream):
    """A mirror whose answer ends cleanly after ``cut`` bytes every time (readinto returns 0, no error)."""

    def __init__(self, offset, cut, total=None):
        super(ShortStream, self).__init__(offset, body=DATA[:cut])
        self.total = total


@pytest.mark.parametrize("total, why", [
    (1000, "it announced the file as 1000 bytes: its copy is shorter than the manifest's"),
    (None, "it closed the connection cleanly before the end each time"),
])
def test_a_mirror_that_ends_the_file_early_every_time_keeps_the_partial(tmp_path, total, why):
    """Issue 27: the partial was thrown away and the message blamed the manifest (digest mismatch)."""
    tmp = tmp_path / "x.part"
    calls = []

    def open_stream(offset):
        calls.append(offset)
        return ShortStream(offset, 1000, total)

    with pytest.raises(WeightsError) as err:
        fetch.fetch_to_temp(open_stream, FileSpec("x", len(DATA), SHA), str(tmp), "x", chunk_bytes=65536 * 4, retries=2)
    msg = err.value.message
    assert "x: the source sent 1000 of its 256000 bytes and then ended the transfer, on each of 3 attempts" in msg
    assert why in msg and "the next run resumes from there" in msg and "manifest is not at fault" in msg
    assert "digest mismatch" not in msg
    assert calls == [0, 1000, 1000]  # each retry resumes from what was kept
    assert tmp.read_bytes() == DATA[:1000]

    def open_full(offset):  # the mirror is fixed: the next run asks only for the rest
        calls.append(offset)
        return FakeStream(offset)

    digest, moved = fetch.fetch_to_temp(open_full, FileSpec("x", len(DATA), SHA), str(tmp), "x", chunk_bytes=65536 * 4)
    assert calls[-1] == 1000 and moved == len(DATA) - 1000 and digest.sha256_hex() == SHA


@pytest.mark.parametrize("value, parsed", [
    ("bytes 100-199/1000", (100, 199, 1000)),
    ("bytes 0-0/*", (0, 0, None)),
    ("items 1-2/3", None),
    ("garbage", None),
    (None, None),
])
def test_parse_content_range(value, parsed):
    assert fetch.parse_content_range(value) == parsed


@pytest.mark.parametrize("url, shown", [
    ("https://user:secret@mirror/x/y?X-Amz-Signature=abc", "https://mirror/x/y"),
    ("http://h:8080/a", "http://h:8080/a"),
])
def test_redact_url(url, shown):
    assert fetch.redact_url(url) == shown


@pytest.mark.parametrize("base, rel, url", [
    ("http://h/m/", "a b/c#d.json", "http://h/m/a%20b/c%23d.json"),
    ("http://h/m", "x", "http://h/m/x"),
])
def test_join_url(base, rel, url):
    assert fetch.join_url(base, rel) == url


@pytest.mark.parametrize("status, fragment", [
    (404, "does not have this file"), (401, "set token"), (403, "set token"), (416, "shorter"), (502, "retry later"),
])
def test_http_error_hints(status, fragment):
    err = fetch.HttpError(status, "X", "http://u:p@h/f?sig=1", "f")
    assert fragment in err.message and "u:p" not in err.message and "sig=1" not in err.message


def test_local_stream_offset(tmp_path):
    src = tmp_path / "s"
    src.write_bytes(b"0123456789")
    stream = fetch.LocalStream(str(src), 4, "s")
    buf = bytearray(16)
    n = stream.readinto(memoryview(buf))
    stream.close()
    assert stream.offset == 4 and bytes(buf[:n]) == b"456789"
    with pytest.raises(WeightsError):
        fetch.LocalStream(str(tmp_path / "missing"), 0, "m")
    assert os.path.exists(str(src))


@pytest.mark.parametrize("start, writes, calls", [
    (0, [10, 10, 10, 5], [(0, 20)]),                  # 10+10 fills a window; the 15 bytes after do not
    (100, [30, 15, 5], [(100, 30), (130, 20)]),      # resumed file: windows start at the offset
    (0, [5, 5], []),                                  # never a partial window
])
def test_write_behind_windows(start, writes, calls):
    seen = []
    behind = fetch.WriteBehind(7, start, window=20)
    behind.fn = lambda fd, off, n, flags: seen.append((off, n)) or 0
    for n in writes:
        behind.advance(n)
    assert seen == calls


def test_sync_file_range_lookup_is_cached():
    first = fetch._sync_file_range()
    assert fetch._sync_file_range() is first
