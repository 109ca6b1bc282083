# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 43 class 1: root acting in trees the service account can write - no link followed (root_fs), the
pre-warm pack built from a walk that leaves links out (unique 0600 file), host_layout's owner and mode set on
descriptors (a link swapped in after the plan is refused), untrusted start records."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import stat
import tarfile

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.host import host_layout as layout
from ansible_collections.gpufleet.vllm.plugins.module_utils.host import root_fs
from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError
from ansible_collections.gpufleet.vllm.plugins.module_utils.startup import prewarm

UID, GID = os.getuid(), os.getgid()
KEY = "0123456789abcdef"


def _record(instance, keys=(KEY,)):
    return {"instance": instance, "total_seconds": 10.0, "budget_seconds": 0, "invocation_id": "x", "inputs": {},
            "phases": [{"name": "weights", "seconds": 4.0}], "cache": {"status": "miss", "expected": True},
            "compile": {"keys": list(keys)}}


def _cache_tree(tmp_path, secret):
    """A cache folder with one real key folder, and the service account's links to root-only data."""
    cache = tmp_path / "cache"
    real = cache / "vllm" / "torch_compile_cache" / KEY
    real.mkdir(parents=True)
    (real / "graph.bin").write_bytes(b"graph")
    (real / "leak").symlink_to(secret / "shadow")          # a file link inside a key folder
    (cache / "triton").symlink_to(secret)                  # a whole member replaced by a link
    aot = cache / "vllm" / "torch_compile_cache" / "torch_aot_compile"
    aot.mkdir()
    (aot / KEY).symlink_to(secret)                         # a key folder replaced by a link
    state = tmp_path / "state"
    state.mkdir()
    (state / "a.json").write_text(json.dumps(_record("a")))
    return cache, state


@pytest.fixture
def secret(tmp_path):
    folder = tmp_path / "root-only"
    folder.mkdir()
    (folder / "shadow").write_text("root:secret\n")
    return folder


def test_the_pack_holds_no_linked_file_and_is_private(tmp_path, secret):
    cache, state = _cache_tree(tmp_path, secret)
    dest = tmp_path / "dest"
    dest.mkdir()
    result = prewarm.pack_caches(str(cache), str(state), ["a"], str(dest))
    assert result["keys"] == [KEY] and result["files"] == 1
    assert os.path.basename(result["path"]).startswith("gpufleet-prewarm-") and result["path"].endswith(".tar.gz")
    assert stat.S_IMODE(os.stat(result["path"]).st_mode) == 0o600
    with tarfile.open(result["path"]) as tar:
        names = sorted(tar.getnames())
        assert all(m.isdir() or m.isfile() for m in tar.getmembers())
    assert names == ["vllm/torch_compile_cache/" + KEY, "vllm/torch_compile_cache/%s/graph.bin" % KEY]
    assert sorted(os.path.basename(p) for p in result["left_out"]) == sorted([KEY, "leak", "triton"])
    second = prewarm.pack_caches(str(cache), str(state), ["a"], str(dest))
    assert second["path"] != result["path"]  # unique names, never a fixed path a link could take


@pytest.mark.parametrize("content, why", [
    ("[1, 2]", "not a JSON object"),
    ('"x"', "not a JSON object"),
    ("{not json", "not JSON"),
    (json.dumps(dict(_record("a"), compile={"keys": ["../../etc"]})), "compile.keys"),
    (json.dumps(dict(_record("a"), instance="b")), "instance"),
])
def test_a_planted_record_fails_naming_the_file(tmp_path, content, why):
    state = tmp_path / "state"
    state.mkdir()
    (state / "a.json").write_text(content)
    with pytest.raises(UserError, match=r"%s.*%s" % (str(state / "a.json"), why)):
        prewarm.keys_of(str(state), ["a"])


@pytest.mark.parametrize("instance", ["../x", "a/b", "..", ".hidden", "-x", "a\nb", "a\n", "", "a b"])
def test_an_instance_name_that_is_not_one_is_refused(tmp_path, instance):
    with pytest.raises(UserError, match="is not an instance name"):
        prewarm.keys_of(str(tmp_path), [instance])


def test_temp_files_are_unique_and_private(tmp_path):
    fd = os.open(str(tmp_path), os.O_RDONLY)
    try:
        made = [root_fs.temp_file_at(fd, "t-", ".x") for _index in range(3)]
        for tmp_fd, _name in made:
            os.close(tmp_fd)
        names = [name for _fd, name in made]
        assert len(set(names)) == 3
        assert all(stat.S_IMODE(os.stat(str(tmp_path / n)).st_mode) == 0o600 for n in names)
    finally:
        os.close(fd)


def _entry(path, mode=0o750):
    return {"path": str(path), "owner": "o", "group": "g", "mode": mode, "uid": UID, "gid": GID}


@pytest.mark.parametrize("kind, content", [("directory", None), ("file", "old\n"), ("file", "new\n")])
def test_a_link_swapped_in_after_the_plan_is_never_followed(tmp_path, kind, content):
    """chown/chmod of a folder or file (and a rewrite): the victim a link points at keeps its mode and text."""
    victim = tmp_path / "victim"
    victim.mkdir(mode=0o700)
    (victim / "f").write_text("root's\n")
    os.chmod(str(victim), 0o700)
    os.chmod(str(victim / "f"), 0o600)
    target = tmp_path / "home" / "ray-tmp"
    target.parent.mkdir()
    entry = _entry(target, 0o770)
    if kind == "directory":
        target.mkdir(mode=0o700)
        actions, _before = layout.plan([entry], [])
        swap_to = victim
    else:
        entry["content"] = content
        target.write_text("old\n")
        os.chmod(str(target), 0o600)
        actions, _before = layout.plan([], [entry])
        swap_to = victim / "f"
    assert actions
    target.rename(tmp_path / "moved")   # the race: the account swaps a link in after the check
    target.symlink_to(swap_to)
    if content == "new\n":  # a rewrite renames a new file over the link: the link itself goes, nothing followed
        layout.apply(actions, {entry["path"]: entry})
        assert not target.is_symlink() and target.read_text() == "new\n"
    else:
        with pytest.raises(UserError, match="symbolic link"):
            layout.apply(actions, {entry["path"]: entry})
    assert stat.S_IMODE(os.stat(str(victim)).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(str(victim / "f")).st_mode) == 0o600
    assert (victim / "f").read_text() == "root's\n"


def test_open_path_refuses_a_link_another_account_owns(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("lchown to another account needs root")
    (tmp_path / "real").mkdir()
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "real")
    os.lchown(str(link), 65534, 65534)
    with pytest.raises(UserError, match="owned by uid 65534"):
        root_fs.open_path(str(link))
    os.close(root_fs.open_path(str(tmp_path / "real")))
