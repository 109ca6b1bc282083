# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""source: hf against the FAKE hub (tests/fakes/fake_hf_hub.py) with the real huggingface_hub client:
revision resolution, LFS sha256 and git blob ids, the token kept out of output, logs and -vvv."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest

from weights_support import FakeHub, ROOT, collections_path, run_module, tree

pytest.importorskip("huggingface_hub")

TOKEN = "hf_FAKEtokenDoNotLog0123456789abcdef"
FILES_V1 = {
    "config.json": b'{"architectures": ["Qwen3ForCausalLM"], "num_hidden_layers": 2}\n',
    "tokenizer_config.json": b'{"model_max_length": 40960}\n',
    "model-00001-of-00002.safetensors": os.urandom(3 * 1024 * 1024 + 11),
    "model-00002-of-00002.safetensors": os.urandom(2 * 1024 * 1024),
    "onnx/model.onnx": os.urandom(5000),
}


@pytest.fixture
def hub():
    fake = FakeHub(lfs_threshold=4096, token=TOKEN)
    fake.v1 = fake.add_commit("fake-org/Qwen3-Tiny", FILES_V1, tags=["v1.0"])
    files_v2 = dict(FILES_V1, **{"config.json": b'{"architectures": ["Qwen3ForCausalLM"], "num_hidden_layers": 3}\n'})
    fake.v2 = fake.add_commit("fake-org/Qwen3-Tiny", files_v2)  # main moves on
    fake.add_commit("fake-org/Private", {"config.json": b"{}"}, private=True)
    fake.start()
    yield fake
    fake.stop()


def _args(hub, dest, **kw):
    args = dict(dest=str(dest), source="hf", repo_id="fake-org/Qwen3-Tiny", endpoint=hub.endpoint,
                ignore_patterns=["onnx/"])
    args.update(kw)
    return args


def _digests(files):
    return dict((p, hashlib.sha256(d).hexdigest()) for p, d in files.items() if not p.startswith("onnx/"))


def test_tag_resolves_to_commit_and_files_verify(hub, tmp_path):
    dest = tmp_path / "m"
    result, _out = run_module(_args(hub, dest, revision="v1.0"))
    assert result["revision"] == hub.v1 and result["changed"] and result["file_count"] == 4
    assert tree(str(dest)) == _digests(FILES_V1)
    record = json.loads((dest / ".gpufleet-weights" / "record.json").read_text())
    assert record["revision"] == hub.v1 and record["source"] == "hf"
    # small files outside LFS are verified by git blob id and recorded with their sha256
    assert record["files"]["config.json"]["git_oid"] == hashlib.sha1(
        b"blob %d\0" % len(FILES_V1["config.json"]) + FILES_V1["config.json"]).hexdigest()
    assert record["files"]["config.json"]["sha256"] == hashlib.sha256(FILES_V1["config.json"]).hexdigest()
    api = [e for e in hub.log if e["path"].startswith("/api/models/")]
    assert api and api[0]["path"].endswith("/revision/v1.0")
    # LFS downloads went through the CDN redirect; files were fetched at the pinned commit
    assert any(e["path"].startswith("/cdn/") for e in hub.log)
    assert all(("/resolve/%s/" % hub.v1) in e["path"] for e in hub.log if "/resolve/" in e["path"])
    again, _out = run_module(_args(hub, dest, revision="v1.0"))
    assert not again["changed"] and again["downloaded_bytes"] == 0

    # main has moved on: only the changed small file is fetched again
    newer, _out = run_module(_args(hub, dest, revision="main"))
    assert newer["revision"] == hub.v2 and newer["repaired"] == ["config.json"] and newer["fetched"] == []
    assert newer["downloaded_bytes"] == len(b'{"architectures": ["Qwen3ForCausalLM"], "num_hidden_layers": 3}\n')


def test_unknown_revision_and_repo(hub, tmp_path):
    result, _out = run_module(_args(hub, tmp_path / "m", revision="no-such-branch"))
    assert result["failed"] and "revision not found" in result["msg"] and "set revision" in result["msg"]
    result, _out = run_module(_args(hub, tmp_path / "m", repo_id="fake-org/Nope"))
    assert result["failed"] and "repository not found" in result["msg"] and "set token" in result["msg"]
    assert not (tmp_path / "m" / "config.json").exists()


@pytest.mark.parametrize("path, fragment", [
    ("model-00002-of-00002.safetensors", "expected %s"),   # LFS: the hub's sha256
    ("tokenizer_config.json", "expected git blob %s"),     # small file: git blob id
])
def test_hub_serving_wrong_bytes_is_refused(hub, tmp_path, path, fragment):
    hub.corrupt[path] = bytes(reversed(FILES_V1[path]))
    result, _out = run_module(_args(hub, tmp_path / "m", revision="v1.0", workers=1))
    data = FILES_V1[path]
    want = hashlib.sha256(data).hexdigest() if path.endswith("safetensors") else hashlib.sha1(
        b"blob %d\0" % len(data) + data).hexdigest()
    assert result["failed"] and ("digest mismatch for %s" % path) in result["msg"] and (fragment % want) in result["msg"]
    assert not (tmp_path / "m" / path).exists()


def test_private_repo_token_from_env_not_sent_to_cdn_not_in_output(hub, tmp_path):
    dest = tmp_path / "m"
    # the fake hub listens on plain http: the token goes there only because token_over_http says so
    result, out = run_module(_args(hub, dest, repo_id="fake-org/Private", token_over_http=True), env={"HF_TOKEN": TOKEN})
    assert result["changed"] and result["file_count"] == 1, result
    assert TOKEN not in out
    assert all(e["auth_ok"] for e in hub.log if e["host"].startswith("127.0.0.1"))
    big, out = run_module(_args(hub, tmp_path / "m2", revision="v1.0", token_over_http=True), env={"HF_TOKEN": TOKEN})
    assert big["changed"] and TOKEN not in out
    cdn = [e for e in hub.log if e["path"].startswith("/cdn/")]
    assert cdn and not any(e["auth_sent"] for e in cdn), "the token was forwarded to the CDN host"
    for base, _dirs, names in os.walk(str(tmp_path)):
        for name in names:
            with open(os.path.join(base, name), "rb") as handle:
                assert TOKEN.encode() not in handle.read(), "token written to %s" % name


def test_token_never_in_ansible_vvv(hub, tmp_path):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_path(), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
               ANSIBLE_LOG_PATH=str(tmp_path / "ansible.log"), ANSIBLE_KEEP_REMOTE_FILES="0")
    env.pop("HF_TOKEN", None)
    ansible = os.path.join(os.path.dirname(sys.executable), "ansible")
    outputs = []
    for repo, token in (("fake-org/Private", TOKEN), ("fake-org/Private", TOKEN[:-1] + "X")):
        args = _args(hub, tmp_path / "m", repo_id=repo, token=token, token_over_http=True)
        proc = subprocess.run(
            [ansible, "localhost", "-i", "localhost,", "-c", "local", "-vvv", "-m", "gpufleet.vllm.model_weights",
             "-a", json.dumps(args), "-e", "ansible_python_interpreter=%s" % sys.executable],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=ROOT, timeout=300, check=False)
        outputs.append(proc.stdout.decode())
    ok, failed = outputs
    assert "CHANGED" in ok and '"file_count": 1' in ok, ok[-3000:]
    assert "FAILED" in failed and "repository not found" in failed, failed[-3000:]
    log = (tmp_path / "ansible.log").read_text()
    for text in (ok, failed, log):
        assert TOKEN not in text and TOKEN[:-1] + "X" not in text
    assert "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER" in ok  # the invocation shows the token masked


def test_unpinned_revision_is_resolved_recorded_and_warned(hub, tmp_path):
    """Issue 15 item 11: revision main/v1.0 -> the commit, in the result and the record, with a warning."""
    result, _out = run_module(_args(hub, tmp_path / "m", revision="v1.0"))
    assert result["revision"] == hub.v1 and result["requested_revision"] == "v1.0"
    warnings = json.dumps(result.get("warnings", []))  # ansible-core 2.19: structured WarningSummary entries
    assert "pin revision to that commit" in warnings and hub.v1 in warnings, result
    record = json.loads((tmp_path / "m" / ".gpufleet-weights" / "record.json").read_text())
    assert record["revision"] == hub.v1
    pinned, _out = run_module(_args(hub, tmp_path / "m", revision=hub.v1))
    assert not pinned.get("warnings") and not pinned["changed"]
