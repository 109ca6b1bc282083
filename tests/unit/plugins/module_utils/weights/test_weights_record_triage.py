# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import collections

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.digest import Digest, hash_file
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.errors import WeightsError
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.triage import (
    check_space, human_bytes, space_needed, summarize_diff, throughput, triage,
)
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.record import (
    MISSING, OK, STALE, UNKNOWN, FileSpec, classify, digest_matches, make_entry, parse_record, render_record,
)

St = collections.namedtuple("St", "st_size st_mtime_ns st_ino")
A = "a" * 64
B = "b" * 64
G = "1" * 40
ENTRY = {"size": 10, "sha256": A, "mtime_ns": 5, "inode": 7}


@pytest.mark.parametrize("spec, entry, st, full, status", [
    (FileSpec("f", 10, A), None, None, False, MISSING),
    (FileSpec("f", 10, A), ENTRY, None, False, MISSING),
    (FileSpec("f", 10, A), None, St(10, 5, 7), False, UNKNOWN),            # no record: hash
    (FileSpec("f", 10, A), ENTRY, St(10, 5, 7), False, OK),
    (FileSpec("f", 10, A), ENTRY, St(10, 5, 7), True, UNKNOWN),            # verify full: hash
    (FileSpec("f", 10, A), ENTRY, St(10, 6, 7), False, UNKNOWN),           # touched
    (FileSpec("f", 10, A), ENTRY, St(10, 5, 8), False, UNKNOWN),           # replaced (new inode)
    (FileSpec("f", 10, A), ENTRY, St(11, 5, 7), False, UNKNOWN),           # grew
    (FileSpec("f", 10, B), ENTRY, St(10, 5, 7), False, STALE),             # new revision
    (FileSpec("f", 12, A), ENTRY, St(10, 5, 7), False, STALE),             # size differs from spec
    (FileSpec("f", None, A), ENTRY, St(10, 5, 7), False, OK),              # http before HEAD
    (FileSpec("f", 10, None, G), dict(ENTRY, git_oid=G), St(10, 5, 7), False, OK),
    (FileSpec("f", 10, None, G), ENTRY, St(10, 5, 7), False, STALE),       # no git id recorded
])
def test_classify(spec, entry, st, full, status):
    assert classify(spec, entry, st, full=full) == status


def _digest(data, git=False):
    d = Digest(git_size=len(data) if git else None)
    d.update(data)
    return d


def test_digest_git_blob_id_matches_git():
    # `printf 'hello\n' | git hash-object --stdin`
    assert _digest(b"hello\n", git=True).git_hex() == "ce013625030ba8dba906f756967f9e9ca394464a"


@pytest.mark.parametrize("spec, data, ok", [
    (FileSpec("f", 3, _digest(b"abc").sha256_hex()), b"abc", True),
    (FileSpec("f", 3, _digest(b"abd").sha256_hex()), b"abc", False),
    (FileSpec("f", 4, _digest(b"abc").sha256_hex()), b"abc", False),           # size first
    (FileSpec("f", 6, None, "ce013625030ba8dba906f756967f9e9ca394464a"), b"hello\n", True),
    (FileSpec("f", 6, None, "ce013625030ba8dba906f756967f9e9ca394464b"), b"hello\n", False),
    (FileSpec("f", None, None, None), b"anything", True),                        # local, no manifest
])
def test_digest_matches(spec, data, ok):
    assert digest_matches(spec, _digest(data, git=bool(spec.git_oid)))[0] is ok


def test_hash_file_limit_and_chunks(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 1000 + b"y" * 1000)
    assert hash_file(str(path), chunk_bytes=64).sha256_hex() == _digest(b"x" * 1000 + b"y" * 1000).sha256_hex()
    assert hash_file(str(path), chunk_bytes=64, limit=1000).sha256_hex() == _digest(b"x" * 1000).sha256_hex()


@pytest.mark.parametrize("text, problem", [
    ("{not json", "not valid JSON"),
    ('{"format": 99, "files": {}}', "unknown format"),
    ('[]', "unknown format"),
])
def test_parse_record_damaged_is_empty(text, problem):
    record, why = parse_record(text)
    assert record["files"] == {} and problem in why


def test_record_roundtrip_drops_incomplete_entries():
    st = St(10, 5, 7)
    rec = {"format": 1, "source": "http", "revision": "r",
           "files": {"ok": make_entry(FileSpec("ok", 10, A), st, A), "bad": {"size": 1}}}
    back, why = parse_record(render_record(rec))
    assert why is None and list(back["files"]) == ["ok"] and back["files"]["ok"]["inode"] == 7


def test_triage_groups():
    specs = [FileSpec("a", 10, A), FileSpec("b", 10, A), FileSpec("c", 10, A)]
    out = triage(specs, {"a": ENTRY, "b": ENTRY}, {"a": St(10, 5, 7), "b": St(10, 9, 7), "c": None})
    assert [s.path for s in out[OK]] == ["a"]
    assert [s.path for s in out[UNKNOWN]] == ["b"]
    assert [s.path for s in out[MISSING]] == ["c"]


@pytest.mark.parametrize("sizes, partial, need", [
    ({"a": 100, "b": 50}, {}, 150),
    ({"a": 100, "b": 50}, {"a": 40}, 110),
    ({"a": 100}, {"a": 500}, 0),       # oversize partial is restarted but never counts negative
    ({"a": None}, {}, 0),
])
def test_space_needed(sizes, partial, need):
    assert space_needed([FileSpec(p, s, A) for p, s in sizes.items()], partial) == need


def test_check_space_message_names_fix():
    check_space(100, 100, "/m")
    with pytest.raises(WeightsError) as err:
        check_space(3 * 1024 ** 3, 1024 ** 3, "/models/q")
    assert "3.0 GiB to fetch" in err.value.message and "1.0 GiB free" in err.value.message
    assert "model_storage" in err.value.message and err.value.details["needed_bytes"] == 3 * 1024 ** 3


@pytest.mark.parametrize("n, text", [(0, "0 B"), (1023, "1023 B"), (1536, "1.5 KiB"), (5 * 1024 ** 4, "5.0 TiB")])
def test_human_bytes(n, text):
    assert human_bytes(n) == text


def test_diff_and_throughput():
    diff = summarize_diff(["x"], [FileSpec("new", 1, A)], [FileSpec("bad", 1, B)])
    assert "bad  (content differs" in diff["before"] and "new  sha256:" + A in diff["after"]
    assert throughput(100, 0) == 0 and throughput(100, 2.0) == 50
