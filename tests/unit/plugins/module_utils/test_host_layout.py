# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The role's directories and libexec files in one pass, in a temporary directory."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError
from ansible_collections.gpufleet.vllm.plugins.module_utils.host import host_layout as layout

UID, GID = os.getuid(), os.getgid()


def _dir(path, mode=0o755, uid=UID, gid=GID):
    return {"path": str(path), "owner": "o", "group": "g", "mode": mode, "uid": uid, "gid": gid}


def _file(path, content, mode=0o644):
    return dict(_dir(path, mode), content=content)


@pytest.mark.parametrize("text, expected", [("0755", 0o755), ("750", 0o750), ("0600", 0o600), ("1777", 0o1777)])
def test_parse_mode_reads_octal(text, expected):
    assert layout.parse_mode(text, "directories[0]") == expected


@pytest.mark.parametrize("text", ["", "0855", "rwx", "07555", "0o755"])
def test_parse_mode_names_the_entry(text):
    with pytest.raises(UserError, match=r"directories\[2\] \(/x\): mode .* is not an octal mode"):
        layout.parse_mode(text, "directories[2] (/x)")


def test_first_run_creates_then_second_run_has_nothing_to_do(tmp_path):
    dirs = [_dir(tmp_path / "base"), _dir(tmp_path / "base" / "libexec" / "a" / "b", 0o700)]
    files = [_file(tmp_path / "base" / "libexec" / "a" / "b" / "gate.py", "print(1)\n")]
    entries = dict((e["path"], e) for e in dirs + files)
    actions, before = layout.plan(dirs, files)
    assert [a[0] for a in actions] == ["mkdir", "mkdir", "write"]
    assert before == {files[0]["path"]: None}
    layout.apply(actions, entries)
    assert stat.S_IMODE(os.stat(dirs[1]["path"]).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(str(tmp_path / "base" / "libexec")).st_mode) == 0o700  # missing parents too
    assert open(files[0]["path"]).read() == "print(1)\n"
    assert stat.S_IMODE(os.stat(files[0]["path"]).st_mode) == 0o644
    assert layout.plan(dirs, files) == ([], {files[0]["path"]: "print(1)\n"})


@pytest.mark.parametrize("drift, verbs", [
    (lambda p: os.chmod(p, 0o777), ["chmod"]),
    (lambda p: open(p, "w").write("print(2)\n"), ["write"]),
])
def test_a_drifted_file_is_put_back(tmp_path, drift, verbs):
    entry = _file(tmp_path / "gate.py", "print(1)\n")
    layout.apply(layout.plan([], [entry])[0], {entry["path"]: entry})
    drift(entry["path"])
    actions = layout.plan([], [entry])[0]
    assert [a[0] for a in actions] == verbs
    layout.apply(actions, {entry["path"]: entry})
    assert layout.plan([], [entry])[0] == []


def test_an_account_not_there_yet_counts_as_a_change(tmp_path):
    os.mkdir(str(tmp_path / "cache"))
    os.chmod(str(tmp_path / "cache"), 0o750)
    actions = layout.plan([_dir(tmp_path / "cache", 0o750, uid=None)], [])[0]
    assert [a[0] for a in actions] == ["chown"]


@pytest.mark.parametrize("kind", ["directory", "file"])
def test_a_symlink_is_refused_not_followed(tmp_path, kind):
    elsewhere = tmp_path / "not-root-s"
    elsewhere.mkdir()
    link = tmp_path / "libexec"
    os.symlink(str(elsewhere), str(link))
    dirs, files = ([_dir(link)], []) if kind == "directory" else ([], [_file(link, "x")])
    with pytest.raises(UserError, match="is a symlink.*Refusing to follow it"):
        layout.plan(dirs, files)
    assert os.listdir(str(elsewhere)) == []


def test_a_file_where_a_directory_is_wanted_is_named(tmp_path):
    (tmp_path / "base").write_text("x")
    with pytest.raises(UserError, match="base exists and is not a directory"):
        layout.plan([_dir(tmp_path / "base")], [])


def test_diff_shows_files_before_and_after_and_other_changes_as_lines(tmp_path):
    entry = _file(tmp_path / "gate.py", "new\n")
    (tmp_path / "gate.py").write_text("old\n")
    d = _dir(tmp_path / "sub")
    actions, before = layout.plan([d], [entry])
    out = layout.diff(actions, {entry["path"]: entry, d["path"]: d}, before)
    assert out[0]["after"].startswith("create directory")
    assert (out[1]["before"], out[1]["after"]) == ("old\n", "new\n")
