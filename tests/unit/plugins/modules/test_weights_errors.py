# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 15 Medium 4 (model_weights part): one error boundary. OSError (ENOTDIR, EACCES, EIO, ENOSPC
while saving the record, leaving no *.tmp), an unknown owner refused before any download, and the
worker-pool CancelledError race, reproduced deterministically. Each fails on the round-1 code."""
from __future__ import annotations

import errno
import os
from concurrent.futures import Future

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.weights import digest, fetch, safefs, snapshot, sources
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.errors import WeightsError
from ansible_collections.gpufleet.vllm.plugins.modules import model_weights
from ansible_collections.gpufleet.vllm.tests.unit.plugins.modules.module_harness import run_module as harness_run_module


def run_module(monkeypatch, args, check_mode=False):
    return harness_run_module(monkeypatch, model_weights.main, args, check_mode=check_mode)


@pytest.fixture
def src(tmp_path):
    root = tmp_path / "src"
    (root / "sub").mkdir(parents=True)
    (root / "config.json").write_bytes(b'{"a": 1}')
    (root / "sub" / "w.safetensors").write_bytes(b"w" * 70000)
    return root


def leftovers(dest):
    return [os.path.join(b, n) for b, _d, names in os.walk(str(dest)) for n in names if n.endswith(".tmp")]


def test_dest_under_a_file_is_enotdir_not_a_traceback(monkeypatch, tmp_path, src):
    (tmp_path / "file").write_bytes(b"x")
    res = run_module(monkeypatch, dict(dest=str(tmp_path / "file" / "m"), source="local", path=str(src)))
    assert res["failed"] and "ENOTDIR" in res["msg"] and str(tmp_path / "file") in res["msg"]


def test_eacces_is_reported_with_the_path(monkeypatch, tmp_path, src):
    def denied(path, create=False, mode=0o755):
        raise OSError(errno.EACCES, "Permission denied", path)
    monkeypatch.setattr(safefs, "open_root", denied)
    res = run_module(monkeypatch, dict(dest=str(tmp_path / "m"), source="local", path=str(src)))
    assert res["failed"] and "EACCES (Permission denied): %s" % (tmp_path / "m") in res["msg"]


def test_eio_while_verifying_names_the_file(monkeypatch, tmp_path, src):
    args = dict(dest=str(tmp_path / "m"), source="local", path=str(src), verify="full")
    run_module(monkeypatch, args)

    def readv(fd, buffers):
        raise OSError(errno.EIO, "Input/output error")
    monkeypatch.setattr(digest.os, "readv", readv)
    res = run_module(monkeypatch, args)
    assert res["failed"] and "EIO (Input/output error)" in res["msg"]
    assert "config.json" in res["msg"] or "w.safetensors" in res["msg"]


def test_enospc_while_saving_the_record_leaves_no_tmp_files(monkeypatch, tmp_path, src):
    dest = tmp_path / "m"
    args = dict(dest=str(dest), source="local", path=str(src))
    run_module(monkeypatch, args)
    os.unlink(str(dest / ".gpufleet-weights" / "record.json"))

    def fsync(fd):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(safefs.os, "fsync", fsync)
    res = run_module(monkeypatch, args)
    assert res["failed"] and "ENOSPC (No space left on device)" in res["msg"] and "record.json" in res["msg"]
    assert leftovers(dest) == []


def test_unknown_owner_is_refused_before_any_download(monkeypatch, tmp_path, src):
    opened = []
    monkeypatch.setattr(sources.LocalSource, "open_stream", lambda self, spec, off: opened.append(spec.path))
    for option in ("owner", "group"):
        res = run_module(monkeypatch, {"dest": str(tmp_path / "m"), "source": "local", "path": str(src),
                                       option: "nosuchuser"})
        assert res["failed"] and "%s 'nosuchuser'" % option in res["msg"] and "no such" in res["msg"]
    assert opened == [] and not (tmp_path / "m").exists()


def test_numeric_owner_is_accepted(monkeypatch, tmp_path, src):
    uid = os.geteuid()
    res = run_module(monkeypatch, dict(dest=str(tmp_path / "m"), source="local", path=str(src), owner=str(uid)))
    assert not res.get("failed") and os.stat(str(tmp_path / "m" / "config.json")).st_uid == uid


class FailFirstSource(sources.Source):
    """First file: the server answers 404; the others must stay queued (never started)."""
    kind = "mem"

    def __init__(self):
        from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.record import FileSpec
        super(FailFirstSource, self).__init__("rev", [FileSpec("a", 3, "0" * 64), FileSpec("b", 3, "1" * 64),
                                                      FileSpec("c", 3, "2" * 64)])

    def open_stream(self, spec, offset):
        raise fetch.HttpError(404, "Not Found", "http://mirror.invalid/%s" % spec.path, spec.path)


class QueuedFuture(Future):
    """A queued task's future: once cancelled, the waiters learn it at once, as the real pool's worker
    tells them when it dequeues a cancelled item (set_running_or_notify_cancel)."""

    def cancel(self):
        cancelled = Future.cancel(self)
        if cancelled:
            self.set_running_or_notify_cancel()
        return cancelled


class OneAtATimeExecutor(object):
    """A stand-in pool that runs the first task at submit and leaves the rest queued: the exact
    interleaving (one failure, others not started) that made the real pool's race end in CancelledError."""

    def __init__(self, max_workers=None):
        self.calls = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def map(self, fn, items):
        return [fn(item) for item in items]

    def submit(self, fn, *args):
        future = QueuedFuture()
        self.calls += 1
        if self.calls == 1:
            try:
                future.set_result(fn(*args))
            except Exception as exc:  # pylint: disable=broad-except
                future.set_exception(exc)
        return future


def test_queued_downloads_cancelled_after_a_failure_report_the_http_error(monkeypatch, tmp_path):
    monkeypatch.setattr(snapshot, "ThreadPoolExecutor", OneAtATimeExecutor)
    with pytest.raises(WeightsError) as err:
        snapshot.sync(str(tmp_path / "m"), FailFirstSource(), workers=4)
    assert "HTTP 404 Not Found" in err.value.message and "Cancelled" not in err.value.message


def test_first_error_skips_cancelled_futures():
    failed, queued = Future(), QueuedFuture()
    failed.set_exception(ValueError("boom"))
    assert str(snapshot.first_error([failed, queued])) == "boom" and queued.cancelled()
    done = Future()
    done.set_result(1)
    assert snapshot.first_error([done]) is None


@pytest.mark.parametrize("dest, says", [
    ("/etc", "dest /etc is a system folder"),
    ("/etc/systemd/system", "dest /etc/systemd/system is inside the system folder /etc"),
    ("/", "dest / is a system folder"),
    ("/home/", "dest /home/ is a system folder"),
    ("/var/lib", "dest /var/lib is a system folder"),
    ("/srv/models/../../usr", "dest /srv/models/../../usr is a system folder"),
])
def test_a_system_folder_as_dest_is_refused_before_anything(monkeypatch, tmp_path, src, dest, says):
    """Issue 27: the module would chown it to the owner and remove unlisted files there."""
    res = run_module(monkeypatch, dict(dest=dest, source="local", path=str(src)), check_mode=True)
    assert res["failed"] and res["msg"].startswith(says), res["msg"]
    assert "Use a folder of its own" in res["msg"]


@pytest.mark.parametrize("path, hit", [
    ("/etc", "/etc"), ("/etc/x", "/etc"), ("//usr//", "/usr"), ("/var", "/var"), ("/var/lib/vllm", None),
    ("/srv", "/srv"), ("/srv/models", None), ("/a/./b", "/"), ("relative", "/"), ("/etcetera", None),
])
def test_system_dir_table(path, hit):
    assert safefs.system_dir(path) == hit


@pytest.mark.parametrize("args, option", [
    ({"source": "http", "url": "https://alice:s3cret@mirror.example/m"}, "url"),
    ({"source": "http", "url": "https://mirror.example/m", "manifest": "https://alice:s3cret@mirror.example/SUMS"},
     "manifest"),
    ({"source": "hf", "repo_id": "org/m", "endpoint": "https://alice:s3cret@hub.example"}, "endpoint"),
])
def test_user_and_password_in_a_url_are_refused_and_never_echoed(monkeypatch, tmp_path, args, option):
    """Issue 27 LOW: user:pass@ was dropped silently (the mirror answered 401) and echoed in the output."""
    res = run_module(monkeypatch, dict(args, dest=str(tmp_path / "m")), check_mode=True)
    assert res["failed"] and res["msg"].startswith(option + " https://") and "carries user:password@" in res["msg"]
    assert "s3cret" not in str(res) and "alice" not in res["msg"]
