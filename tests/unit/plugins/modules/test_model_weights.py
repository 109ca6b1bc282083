# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""model_weights module glue: options, check mode, diff, ownership, errors -> fail_json."""
from __future__ import annotations

import hashlib
import os

import pytest


from ansible_collections.gpufleet.vllm.plugins.module_utils.weights import sources
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.errors import WeightsError
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights import request
from ansible_collections.gpufleet.vllm.plugins.modules import model_weights
from ansible_collections.gpufleet.vllm.tests.unit.plugins.modules.module_harness import run_module as harness_run_module


def run_module(monkeypatch, args, check_mode=False, diff=False):
    return harness_run_module(monkeypatch, model_weights.main, args, check_mode=check_mode, diff=diff)


@pytest.fixture
def src(tmp_path):
    root = tmp_path / "src"
    (root / "sub").mkdir(parents=True)
    (root / "config.json").write_bytes(b'{"a": 1}')
    (root / "sub" / "w.safetensors").write_bytes(os.urandom(70000))
    return root


@pytest.mark.parametrize("value, mode", [("0644", 0o644), ("640", 0o640), ("0600", 0o600), ("0755", 0o755), ("2750", 0o2750)])
def test_parse_mode(value, mode):
    assert request.parse_mode(value) == mode


@pytest.mark.parametrize("value", ["u=rw", "99", "017777", "", "0o644", "-644", " ", "６４４"])
def test_parse_mode_rejects(value):
    with pytest.raises(WeightsError) as err:
        request.parse_mode(value)
    assert "'0644'" in err.value.message


# Fails on main: there an int went through as is, so YAML's unquoted `mode: 644` (the int 644, octal
# 1204: sticky bit, owner -w-) was applied silently. Decision: a number is refused, quoted octal only.
@pytest.mark.parametrize("value", [644, 420, 0o600, True, 6.44, None])
def test_parse_mode_refuses_numbers(value):
    with pytest.raises(WeightsError) as err:
        request.parse_mode(value)
    assert "quoted" in err.value.message and "mode" in err.value.message


def test_unquoted_mode_is_refused_by_the_module(monkeypatch, tmp_path, src):
    res = run_module(monkeypatch, dict(dest=str(tmp_path / "d"), source="local", path=str(src), mode=644))
    assert res["failed"] and "mode 644" in res["msg"] and "quoted" in res["msg"]
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("mode, folder", [(0o644, 0o755), (0o640, 0o750), (0o600, 0o700), (0o200, 0o200)])
def test_dir_mode(mode, folder):
    assert request.dir_mode(mode) == folder


def test_local_source_check_then_apply_then_idempotent(monkeypatch, tmp_path, src):
    dest = tmp_path / "dest"
    args = dict(dest=str(dest), source="local", path=str(src), mode="0640")
    res = run_module(monkeypatch, args, check_mode=True, diff=True)
    assert res["changed"] and res["fetched"] == ["config.json", "sub/w.safetensors"] and not dest.exists()
    assert "sub/w.safetensors  sha256:" in res["diff"]["after"]
    res = run_module(monkeypatch, args)
    assert res["changed"] and res["downloaded_bytes"] == 70008 and res["file_count"] == 2
    assert res["revision"].startswith("sha256:") and "diff" not in res
    assert (dest / "sub" / "w.safetensors").read_bytes() == (src / "sub" / "w.safetensors").read_bytes()
    assert oct(os.stat(str(dest / "config.json")).st_mode & 0o777) == "0o640"
    assert oct(os.stat(str(dest / "sub")).st_mode & 0o777) == "0o750"
    res = run_module(monkeypatch, args)
    assert not res["changed"] and res["downloaded_bytes"] == 0 and res["hashed_bytes"] == 0
    res = run_module(monkeypatch, dict(args, mode="0644"))
    assert res["changed"] and oct(os.stat(str(dest / "config.json")).st_mode & 0o777) == "0o644"


def test_local_manifest_mismatch_fails_with_expected_and_actual(monkeypatch, tmp_path, src):
    manifest = tmp_path / "SUMS"
    manifest.write_text("%s  config.json\n" % hashlib.sha256(b"other").hexdigest())
    res = run_module(monkeypatch, dict(dest=str(tmp_path / "d"), source="local", path=str(src),
                                       manifest=str(manifest)))
    assert res["failed"] and "digest mismatch for config.json" in res["msg"]
    assert res["expected"] == hashlib.sha256(b"other").hexdigest() and res["path"] == "config.json"
    assert not (tmp_path / "d" / "config.json").exists()


@pytest.mark.parametrize("args, fragment", [
    (dict(source="http"), "url"),
    (dict(source="local"), "path"),
    (dict(source="hf"), "repo_id"),
    (dict(source="local", path="/nonexistent", workers=0), "workers must be between 1 and 256"),
    (dict(source="local", path="/nonexistent", workers=10 ** 12), "workers must be between 1 and 256"),
    (dict(source="http", url="ftp://x/y"), "url 'ftp://x/y' must start with http"),
    (dict(source="hf", repo_id="o/m\nX"), "repo_id must not contain a newline"),
    (dict(source="local", path="/nonexistent", allow_patterns=[""]), "allow_patterns"),
    (dict(source="local", path="/nonexistent", mode="u+rw"), "not an octal mode"),
    (dict(source="local", path="/nonexistent"), "is not a directory"),
])
def test_bad_arguments(monkeypatch, tmp_path, args, fragment):
    res = run_module(monkeypatch, dict(args, dest=str(tmp_path / "d")))
    assert res["failed"] and fragment in res["msg"]


def test_hf_without_library(monkeypatch, tmp_path):
    monkeypatch.setattr(sources, "load_hf_api", lambda: (None, "Traceback: no module"))
    res = run_module(monkeypatch, dict(dest=str(tmp_path / "d"), source="hf", repo_id="o/m"))
    assert res["failed"] and "huggingface_hub" in res["msg"] and "source: http" in res["msg"]


# Fails on main for the http rows: there the token went to a plain-http endpoint unasked.
@pytest.mark.parametrize("endpoint, extra, sent", [
    ("https://mirror.invalid", {}, "hf_secret_value"),
    ("http://mirror.invalid", {}, False),
    ("http://mirror.invalid", {"token_over_http": True}, "hf_secret_value"),
])
def test_token_from_env_reaches_only_an_https_hub_unless_allowed(monkeypatch, tmp_path, endpoint, extra, sent):
    seen = {}

    class Api(object):
        def __init__(self, endpoint, token):
            seen["token"], seen["endpoint"] = token, endpoint

        def model_info(self, repo_id, revision=None, files_metadata=False):
            raise type("RepositoryNotFoundError", (Exception,), {})("401 hf_secret_value")

    monkeypatch.setattr(sources, "load_hf_api", lambda: (Api, None))
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value")
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    res = run_module(monkeypatch, dict(dest=str(tmp_path / "d"), source="hf", repo_id="o/m", **extra))
    assert seen == {"token": sent, "endpoint": endpoint}
    assert res["failed"] and "repository not found" in res["msg"] and "hf_secret_value" not in repr(res)


def test_check_mode_reports_a_mode_change_without_making_it(monkeypatch, tmp_path, src):
    dest = tmp_path / "dest"
    args = dict(dest=str(dest), source="local", path=str(src), mode="0644")
    run_module(monkeypatch, args)
    res = run_module(monkeypatch, dict(args, mode="0600"), check_mode=True)
    assert res["changed"] and res["fetched"] == [] and res["repaired"] == []
    assert oct(os.stat(str(dest / "config.json")).st_mode & 0o777) == "0o644"
    assert not run_module(monkeypatch, args, check_mode=True)["changed"]
