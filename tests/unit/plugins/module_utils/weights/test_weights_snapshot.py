# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import hashlib
import json
import os

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.weights import safefs, snapshot
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.errors import WeightsError
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.record import FileSpec
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.sources import Source

FILES = {"config.json": b'{"x": 1}', "model-1.safetensors": os.urandom(300000),
         "sub/model-2.safetensors": os.urandom(200000)}


class MemStream(object):
    def __init__(self, body, offset):
        self.offset = offset
        self.body = body[offset:]
        self.pos = 0

    def readinto(self, view):
        n = min(len(view), len(self.body) - self.pos)
        view[:n] = self.body[self.pos:self.pos + n]
        self.pos += n
        return n

    def close(self):
        pass


class MemSource(Source):
    """Test double of a source: files in memory, optional wrong bytes, counts opens per path."""
    kind = "mem"

    def __init__(self, files=None, serve=None, sizes=True):
        files = files or FILES
        specs = [FileSpec(p, len(b) if sizes else None, hashlib.sha256(b).hexdigest()) for p, b in sorted(files.items())]
        super(MemSource, self).__init__("rev-1", specs)
        self.serve = dict(files, **(serve or {}))
        self.opens = []

    def fill_sizes(self, specs, workers):
        for spec in specs:
            spec.size = len(self.serve[spec.path]) if spec.size is None else spec.size

    def open_stream(self, spec, offset):
        self.opens.append((spec.path, offset))
        return MemStream(self.serve[spec.path], offset)


def tree(dest):
    out = {}
    for base, dirs, files in os.walk(dest):
        dirs[:] = [d for d in dirs if d != ".gpufleet-weights"]
        for name in files:
            full = os.path.join(base, name)
            out[os.path.relpath(full, dest)] = open(full, "rb").read()
    return out


def test_fetch_then_idempotent_then_full_repairs_only_the_flipped_file(tmp_path):
    dest = str(tmp_path / "m")
    src = MemSource()
    first = snapshot.sync(dest, src, workers=2)
    assert first["changed"] and first["fetched"] == sorted(FILES) and first["downloaded_bytes"] == 500008
    assert tree(dest) == FILES and first["file_count"] == 3 and first["total_bytes"] == 500008
    sums = open(os.path.join(dest, ".gpufleet-weights", "SHA256SUMS")).read()
    assert "%s  sub/model-2.safetensors" % hashlib.sha256(FILES["sub/model-2.safetensors"]).hexdigest() in sums

    again = snapshot.sync(dest, MemSource())
    assert not again["changed"] and again["downloaded_bytes"] == 0 and again["hashed_bytes"] == 0

    path = os.path.join(dest, "model-1.safetensors")
    st = os.stat(path)
    with open(path, "r+b") as handle:
        handle.seek(1234)
        byte = handle.read(1)
        handle.seek(1234)
        handle.write(bytes(bytearray([byte[0] ^ 0xFF])))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # a silent flip: stat still equals the record
    inode = os.stat(path).st_ino
    cached = snapshot.sync(dest, MemSource())
    assert not cached["changed"]  # cached trusts stat: by design only full finds a silent flip
    src = MemSource()
    full = snapshot.sync(dest, src, verify="full")
    assert full["changed"] and full["repaired"] == ["model-1.safetensors"] and full["fetched"] == []
    assert src.opens == [("model-1.safetensors", 0)] and full["hashed_bytes"] == 500008
    assert tree(dest) == FILES and os.stat(path).st_ino != inode  # replaced by rename


def test_cached_rehashes_a_touched_file_without_fetching(tmp_path):
    dest = str(tmp_path / "m")
    snapshot.sync(dest, MemSource())
    os.utime(os.path.join(dest, "config.json"), (1, 1))
    src = MemSource()
    res = snapshot.sync(dest, src)
    assert res["hashed_bytes"] == len(FILES["config.json"]) and src.opens == [] and res["repaired"] == []
    assert res["changed"]  # the record was refreshed
    assert not snapshot.sync(dest, MemSource())["changed"]


def test_adopts_an_existing_tree_without_record(tmp_path):
    dest = tmp_path / "m"
    for rel, body in FILES.items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_bytes(body)
    src = MemSource()
    res = snapshot.sync(str(dest), src)
    assert src.opens == [] and res["hashed_bytes"] == 500008 and res["changed"]


def test_check_mode_writes_nothing(tmp_path):
    dest = tmp_path / "m"
    res = snapshot.sync(str(dest), MemSource(), check_mode=True)
    assert res["changed"] and res["fetched"] == sorted(FILES) and res["needed_bytes"] == 500008
    assert not dest.exists()
    assert "config.json  sha256:" in res["diff"]["after"]
    snapshot.sync(str(dest), MemSource())
    before = sorted(os.listdir(str(dest / ".gpufleet-weights")))
    (dest / "config.json").write_bytes(b"{}")
    res = snapshot.sync(str(dest), MemSource(), check_mode=True)
    assert res["repaired"] == ["config.json"] and (dest / "config.json").read_bytes() == b"{}"
    assert sorted(os.listdir(str(dest / ".gpufleet-weights"))) == before


def test_not_enough_space_fails_before_writing(tmp_path, monkeypatch):
    monkeypatch.setattr(snapshot, "free_bytes", lambda path: 1000)
    src = MemSource()
    with pytest.raises(WeightsError) as err:
        snapshot.sync(str(tmp_path / "m"), src)
    assert "not enough space" in err.value.message and src.opens == []
    assert tree(str(tmp_path / "m")) == {}


def test_mismatch_leaves_no_final_file_and_keeps_good_ones(tmp_path):
    dest = str(tmp_path / "m")
    src = MemSource(serve={"sub/model-2.safetensors": os.urandom(200000)})
    with pytest.raises(WeightsError) as err:
        snapshot.sync(dest, src, workers=1)
    assert "digest mismatch for sub/model-2.safetensors" in err.value.message
    assert "sub/model-2.safetensors" not in tree(dest)
    assert os.listdir(os.path.join(dest, ".gpufleet-weights", "tmp")) == []
    record = json.load(open(os.path.join(dest, ".gpufleet-weights", "record.json")))
    assert sorted(record["files"]) == ["config.json", "model-1.safetensors"]  # the good ones are kept
    src = MemSource()
    res = snapshot.sync(dest, src)
    assert res["fetched"] == ["sub/model-2.safetensors"] and src.opens == [("sub/model-2.safetensors", 0)]


def test_resumes_a_partial_and_cleans_foreign_partials(tmp_path):
    dest = str(tmp_path / "m")
    src = MemSource()
    spec = [s for s in src.specs if s.path == "model-1.safetensors"][0]
    tmpdir = os.path.join(dest, ".gpufleet-weights", "tmp")
    os.makedirs(tmpdir)
    with open(os.path.join(tmpdir, snapshot.temp_name(spec)), "wb") as handle:
        handle.write(FILES["model-1.safetensors"][:100000])
    with open(os.path.join(tmpdir, "old-revision.part"), "wb") as handle:
        handle.write(b"junk")
    res = snapshot.sync(dest, src)
    assert ("model-1.safetensors", 100000) in src.opens and res["downloaded_bytes"] == 500008 - 100000
    assert res["needed_bytes"] == 500008 - 100000
    assert tree(dest) == FILES and os.listdir(tmpdir) == []


def test_damaged_record_warns_and_rehashes(tmp_path):
    dest = str(tmp_path / "m")
    snapshot.sync(dest, MemSource())
    with open(os.path.join(dest, ".gpufleet-weights", "record.json"), "w") as handle:
        handle.write("{oops")
    src = MemSource()
    res = snapshot.sync(dest, src)
    assert "not valid JSON" in res["warnings"][0] and src.opens == [] and res["hashed_bytes"] == 500008


def test_attrs_on_files_and_folders_and_check_mode_reports_only(tmp_path):
    dest = str(tmp_path / "m")
    snapshot.sync(dest, MemSource(), attrs=safefs.Attrs(mode=0o640))
    assert oct(os.stat(os.path.join(dest, "config.json")).st_mode & 0o777) == "0o640"
    assert oct(os.stat(os.path.join(dest, "sub")).st_mode & 0o777) == "0o750"
    assert oct(os.stat(dest).st_mode & 0o777) == "0o750"
    assert not snapshot.sync(dest, MemSource(), attrs=safefs.Attrs(mode=0o640))["changed"]
    assert snapshot.sync(dest, MemSource(), attrs=safefs.Attrs(mode=0o644), check_mode=True)["changed"]
    assert oct(os.stat(os.path.join(dest, "config.json")).st_mode & 0o777) == "0o640"
    assert snapshot.sync(dest, MemSource(), attrs=safefs.Attrs(mode=0o644))["changed"]
    assert oct(os.stat(os.path.join(dest, "sub", "model-2.safetensors")).st_mode & 0o777) == "0o644"


def test_lock_refuses_a_second_run(tmp_path):
    import fcntl
    dest = str(tmp_path / "m")
    snapshot.sync(dest, MemSource())
    fd = os.open(os.path.join(dest, ".gpufleet-weights", "lock"), os.O_WRONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        with pytest.raises(WeightsError) as err:
            snapshot.sync(dest, MemSource())
        assert "another model_weights run" in err.value.message
    finally:
        os.close(fd)


def test_progress_snapshot_eta():
    prog = snapshot.Progress(None, "fetch", 2, 1000)
    prog.add(500)
    prog.file_done()
    data = prog.snapshot()
    assert data["bytes_done"] == 500 and data["files_done"] == 1 and data["eta_s"] is not None


# Issue 27: a snapshot of model B over model A's. A's index named A's shards; vLLM and the planner read the
# index when it exists, so a stale one (and stale shards) must not survive the switch. Files this module did
# not place are reported, never removed.
MODEL_A = {"config.json": b'{"a": 1}', "model.safetensors.index.json": b'{"weight_map": {"x": "model-00001-of-00002.safetensors"}}',
           "model-00001-of-00002.safetensors": b"A1" * 5000, "model-00002-of-00002.safetensors": b"A2" * 5000,
           "extra/old.bin": b"old"}
MODEL_B = {"config.json": b'{"b": 2}', "model.safetensors": b"B" * 7000}
A_ONLY = ["extra/old.bin", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
          "model.safetensors.index.json"]


def test_files_of_an_earlier_snapshot_the_new_manifest_does_not_list_are_removed(tmp_path):
    dest = tmp_path / "m"
    snapshot.sync(str(dest), MemSource(MODEL_A))
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"root's file")
    os.symlink(str(outside), str(dest / "planted-link"))
    (dest / "notes.txt").write_bytes(b"someone else's")

    check = snapshot.sync(str(dest), MemSource(MODEL_B), check_mode=True)
    assert check["changed"] and check["removed"] == A_ONLY
    assert "model.safetensors.index.json  (not in the manifest: removed)" in check["diff"]["before"]
    assert (dest / "model.safetensors.index.json").exists()  # check mode removes nothing

    res = snapshot.sync(str(dest), MemSource(MODEL_B))
    assert res["changed"] and res["removed"] == A_ONLY
    assert tree(str(dest)) == dict(MODEL_B, **{"notes.txt": b"someone else's", "planted-link": b"root's file"})
    assert not (dest / "extra").exists()  # the folder it left empty went with it
    assert (dest / "planted-link").is_symlink() and outside.read_bytes() == b"root's file"
    assert any("2 file(s) that the snapshot does not list and model_weights did not place" in w
               and "notes.txt, planted-link" in w for w in res["warnings"]), res["warnings"]
    sums = (dest / ".gpufleet-weights" / "SHA256SUMS").read_text()
    assert "index" not in sums and "model.safetensors" in sums

    again = snapshot.sync(str(dest), MemSource(MODEL_B))
    assert not again["changed"] and again["removed"] == []


def test_stale_files_go_even_when_the_first_fetch_of_the_new_snapshot_failed(tmp_path):
    dest = tmp_path / "m"
    snapshot.sync(str(dest), MemSource(MODEL_A))
    with pytest.raises(WeightsError):
        snapshot.sync(str(dest), MemSource(MODEL_B, serve={"model.safetensors": b"X" * 7000}))
    assert not (dest / "model.safetensors.index.json").exists()
    res = snapshot.sync(str(dest), MemSource(MODEL_B))
    assert tree(str(dest)) == MODEL_B and res["removed"] == []


def test_a_recorded_link_is_unlinked_never_followed(tmp_path):
    dest = tmp_path / "m"
    files = {"config.json": b"{}", "sub/keep.bin": b"k", "sub/old.bin": b"o"}
    snapshot.sync(str(dest), MemSource(files))
    outside = tmp_path / "precious"
    outside.write_bytes(b"p")
    os.unlink(str(dest / "sub" / "old.bin"))
    os.symlink(str(outside), str(dest / "sub" / "old.bin"))  # the store's account swapped a recorded file
    res = snapshot.sync(str(dest), MemSource({"config.json": b"{}", "sub/keep.bin": b"k"}))
    assert res["removed"] == ["sub/old.bin"] and not os.path.lexists(str(dest / "sub" / "old.bin"))
    assert outside.read_bytes() == b"p" and (dest / "sub" / "keep.bin").exists()
