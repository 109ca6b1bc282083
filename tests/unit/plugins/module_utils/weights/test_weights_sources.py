# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import hashlib

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.weights import sources
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.errors import WeightsError
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.fetch import HttpError

A = "a" * 64
B = "b" * 64
COMMIT = "c" * 40


@pytest.mark.parametrize("allow, ignore, kept", [
    (None, None, ["config.json", "m-1.safetensors", "m-2.safetensors", "onnx/m.onnx", "README.md"]),
    (["*.safetensors"], None, ["m-1.safetensors", "m-2.safetensors"]),
    (["*.json", "*.safetensors"], ["m-2*"], ["config.json", "m-1.safetensors"]),
    (None, ["onnx/"], ["config.json", "m-1.safetensors", "m-2.safetensors", "README.md"]),
    (["onnx/"], None, ["onnx/m.onnx"]),
    (["*.bin"], None, []),
])
def test_filter_paths(allow, ignore, kept):
    paths = ["config.json", "m-1.safetensors", "m-2.safetensors", "onnx/m.onnx", "README.md"]
    assert sources.filter_paths(paths, allow, ignore) == kept


class Sib(object):
    def __init__(self, rfilename, size=None, blob_id=None, lfs=None):
        self.rfilename, self.size, self.blob_id, self.lfs = rfilename, size, blob_id, lfs


class Info(object):
    def __init__(self, sha, siblings):
        self.sha, self.siblings = sha, siblings


def fake_api(info=None, exc=None, seen=None):
    class Api(object):
        def __init__(self, endpoint, token):
            if seen is not None:
                seen.update(endpoint=endpoint, token=token)

        def model_info(self, repo_id, revision=None, files_metadata=False):
            if seen is not None:
                seen.update(repo_id=repo_id, revision=revision, files_metadata=files_metadata)
            if exc is not None:
                raise exc
            return info
    return Api


def test_hf_source_specs_lfs_and_git_blobs():
    seen = {}
    info = Info(COMMIT, [
        Sib("config.json", size=20, blob_id="1" * 40),
        Sib("model.safetensors", size=134, blob_id="2" * 40, lfs={"sha256": A, "size": 1 << 30, "pointerSize": 134}),
        Sib("README.md", size=5, blob_id="3" * 40),
    ])
    src = sources.HfSource(None, "Org/M", "main", "http://hub.local/", "tok", None, ["*.md"],
                           api_factory=fake_api(info, seen=seen))
    assert seen == {"endpoint": "http://hub.local", "token": "tok", "repo_id": "Org/M", "revision": "main",
                    "files_metadata": True}
    assert src.revision == COMMIT
    by = dict((s.path, s) for s in src.specs)
    assert sorted(by) == ["config.json", "model.safetensors"]
    assert (by["model.safetensors"].sha256, by["model.safetensors"].size) == (A, 1 << 30)
    assert (by["config.json"].sha256, by["config.json"].git_oid, by["config.json"].size) == (None, "1" * 40, 20)


@pytest.mark.parametrize("info, fragment", [
    (Info(None, [Sib("a", 1, "1" * 40)]), "did not return a commit id"),
    (Info(COMMIT, [Sib("a", 1, None)]), "without size/blob id"),
    (Info(COMMIT, [Sib("a", 1, "1" * 40, lfs={"sha256": "nope", "size": 1, "pointerSize": 1})]), "no valid LFS sha256"),
    (Info(COMMIT, [Sib("../a", 1, "1" * 40)]), "leaves the snapshot directory"),
    (Info(COMMIT, []), "no files of Org/M@"),
])
def test_hf_source_rejects_bad_metadata(info, fragment):
    with pytest.raises(WeightsError) as err:
        sources.HfSource(None, "Org/M", "main", None, None, None, None, api_factory=fake_api(info))
    assert fragment in err.value.message


def _named(name):
    return type(name, (Exception,), {})("boom\nsecond line")


@pytest.mark.parametrize("exc_name, fragment", [
    ("RevisionNotFoundError", "set revision to an existing branch"),
    ("GatedRepoError", "accept its terms"),
    ("RepositoryNotFoundError", "check repo_id, and set token"),
    ("OfflineModeIsEnabled", "HF_HUB_OFFLINE"),
    ("ConnectError", "(ConnectError: boom); check endpoint"),
])
def test_hf_errors_are_mapped(exc_name, fragment):
    with pytest.raises(WeightsError) as err:
        sources.HfSource(None, "Org/M", "v1", "http://hub", None, None, None, api_factory=fake_api(exc=_named(exc_name)))
    assert fragment in err.value.message and "Org/M@v1 on http://hub" in err.value.message


def test_hf_missing_library_names_the_fix(monkeypatch):
    monkeypatch.setattr(sources, "load_hf_api", lambda: (None, "Traceback: no module"))
    with pytest.raises(WeightsError) as err:
        sources.HfSource(None, "Org/M", "main", None, None, None, None)
    assert "pip install huggingface_hub" in err.value.message


class FakeClient(object):
    def __init__(self, texts, sizes):
        self.texts, self.sizes, self.heads = texts, sizes, []

    def get_text(self, url, what):
        if url not in self.texts:
            raise HttpError(404, "Not Found", url, what)
        return self.texts[url]

    def head_size(self, url, what):
        self.heads.append(url)
        if url not in self.sizes:
            raise HttpError(404, "Not Found", url, what)
        return self.sizes[url]


def test_http_source_default_manifest_and_sizes():
    text = "%s  a.bin\n%s  d/b c.json\n" % (A, B)
    client = FakeClient({"http://m/snap/.gpufleet-weights/SHA256SUMS": text},
                        {"http://m/snap/a.bin": 10, "http://m/snap/d/b%20c.json": None})
    src = sources.HttpSource(client, "http://m/snap/", None, None, None)
    assert src.revision == "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    src.fill_sizes(src.specs, 2)
    assert [(s.path, s.size) for s in src.specs] == [("a.bin", 10), ("d/b c.json", None)]
    assert "no Content-Length" in src.warnings[0]


def test_http_source_missing_file_fails_at_head():
    client = FakeClient({"http://m/SUMS": "%s  gone.bin\n" % A}, {})
    src = sources.HttpSource(client, "http://m", "http://m/SUMS", None, None)
    with pytest.raises(WeightsError) as err:
        src.fill_sizes(src.specs, 1)
    assert "HTTP 404" in err.value.message and "gone.bin, named in the manifest" in err.value.message


def test_http_source_manifest_404_and_filter():
    with pytest.raises(WeightsError) as err:
        sources.HttpSource(FakeClient({}, {}), "http://m", None, None, None)
    assert "http://m/.gpufleet-weights/SHA256SUMS" in err.value.message
    with pytest.raises(WeightsError):
        sources.HttpSource(FakeClient({"http://m/S": "%s  a\n" % A}, {}), "http://m", "http://m/S", ["*.x"], None)


def test_local_source_computes_and_caches(tmp_path):
    root = tmp_path / "src"
    (root / "d").mkdir(parents=True)
    (root / "a.bin").write_bytes(b"abc")
    (root / "d" / "c.json").write_bytes(b"{}")
    (root / ".gpufleet-weights").mkdir()
    (root / ".gpufleet-weights" / "record.json").write_text("{}")
    src = sources.LocalSource(None, str(root), None, None, None, 2)
    assert [(s.path, s.sha256, s.size) for s in src.specs] == [
        ("a.bin", hashlib.sha256(b"abc").hexdigest(), 3), ("d/c.json", hashlib.sha256(b"{}").hexdigest(), 2)]
    cache = src.extra_record["source_files"]
    cache["a.bin"]["sha256"] = B  # a cached digest is trusted while size and mtime are unchanged
    again = sources.LocalSource(None, str(root), None, None, None, 2, source_cache=cache)
    assert again.specs[0].sha256 == B


def test_local_source_with_manifest(tmp_path):
    root = tmp_path / "src"
    root.mkdir()
    (root / "a.bin").write_bytes(b"abc")
    manifest = tmp_path / "SUMS"
    manifest.write_text("%s  a.bin\n" % A)
    src = sources.LocalSource(None, str(root), str(manifest), None, None, 1)
    assert [(s.path, s.sha256, s.size) for s in src.specs] == [("a.bin", A, 3)]
    manifest.write_text("%s  a.bin\n%s  missing.bin\n" % (A, B))
    with pytest.raises(WeightsError) as err:
        sources.LocalSource(None, str(root), str(manifest), None, None, 1)
    assert "missing.bin, which is missing under path" in err.value.message
    with pytest.raises(WeightsError) as err:
        sources.LocalSource(None, str(tmp_path / "nope"), None, None, None, 1)
    assert "is not a directory" in err.value.message
    with pytest.raises(WeightsError) as err:
        sources.LocalSource(None, str(root), str(tmp_path / "nope.sums"), None, None, 1)
    assert "cannot read manifest" in err.value.message
