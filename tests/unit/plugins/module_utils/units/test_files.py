# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The unit life cycle's file operations, in a temporary directory."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat

from ansible_collections.gpufleet.vllm.plugins.module_utils.units import files


def test_read_dir_takes_regular_service_files_only(tmp_path):
    (tmp_path / "vllm-a.service").write_text("A")
    (tmp_path / "vllm-a.timer").write_text("T")
    (tmp_path / "sub.service").mkdir()
    os.symlink(str(tmp_path / "vllm-a.service"), str(tmp_path / "vllm-l.service"))
    assert files.read_dir(str(tmp_path)) == {"vllm-a.service": "A"}
    assert files.read_dir(str(tmp_path / "absent")) == {}


def test_write_atomic_replaces_with_mode_and_leaves_no_temporary(tmp_path):
    path = str(tmp_path / "vllm-a.service")
    files.write_atomic(path, "one")
    os.chmod(path, 0o600)
    files.write_atomic(path, "two\n")
    assert open(path).read() == "two\n"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
    assert os.listdir(str(tmp_path)) == ["vllm-a.service"]


def test_write_dir_holds_exactly_the_files_and_empty_removes(tmp_path):
    path = str(tmp_path / "rollback" / "units")
    os.makedirs(path)
    open(os.path.join(path, "vllm-old.service"), "w").write("old")
    os.makedirs(path + ".swap")  # left by an interrupted run
    files.write_dir(path, {"vllm-a.service": "A"})
    assert files.read_dir(path) == {"vllm-a.service": "A"}
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o700
    assert not os.path.exists(path + ".swap")
    files.write_dir(path, {})
    assert not os.path.exists(path)


def test_switch_link(tmp_path):
    link = str(tmp_path / "current")
    assert files.link_target(link) is None
    assert files.switch_link(link, "/opt/vllm/venvs/a") is True
    assert files.switch_link(link, "/opt/vllm/venvs/a") is False
    assert files.switch_link(link, "/opt/vllm/venvs/b") is True
    assert files.link_target(link) == "/opt/vllm/venvs/b"
    assert sorted(os.listdir(str(tmp_path))) == ["current"]
