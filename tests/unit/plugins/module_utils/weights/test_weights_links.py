# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 15 High 2: root never follows a link inside a tree another user owns.

Each attack is the one the review carried out: dest belongs to another uid (65534 here, when the
tests run as root), which plants a link; the module, as root, must refuse it and leave the link's
target untouched. Every test fails on the round-1 code (it followed each of these links)."""
from __future__ import annotations

import hashlib
import os

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.weights import snapshot, sources
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.errors import WeightsError
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.record import FileSpec
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.sources import Source

OTHER_UID = 65534
FILES = {"config.json": b'{"x": 1}', "sub/w.safetensors": b"w" * 70000}


class MemStream(object):
    def __init__(self, body, offset):
        self.offset, self.body = offset, body[offset:]

    def readinto(self, view):
        n = min(len(view), len(self.body))
        view[:n], self.body = self.body[:n], self.body[n:]
        return n

    def close(self):
        pass


class MemSource(Source):
    kind = "mem"

    def __init__(self):
        specs = [FileSpec(p, len(b), hashlib.sha256(b).hexdigest()) for p, b in sorted(FILES.items())]
        super(MemSource, self).__init__("rev-1", specs)

    def open_stream(self, spec, offset):
        return MemStream(FILES[spec.path], offset)


def give_away(path):
    """chown -R to another uid, as the serving user owns dest (only possible as root)."""
    if os.geteuid() != 0:
        return
    for base, dirs, files in os.walk(path):
        for name in [base] + [os.path.join(base, n) for n in dirs + files]:
            os.lchown(name, OTHER_UID, OTHER_UID)


@pytest.fixture
def victim(tmp_path):
    """A root-only folder with a file the attacker wants deleted, overwritten or read."""
    root_only = tmp_path / "root-only"
    (root_only / "tmp").mkdir(parents=True)
    (root_only / "tmp" / "precious").write_bytes(b"keep me")
    (root_only / "secret").write_bytes(b"root secret")
    os.chmod(str(root_only / "secret"), 0o600)
    os.chmod(str(root_only), 0o700)
    return root_only


def synced_dest(tmp_path):
    dest = tmp_path / "m"
    snapshot.sync(str(dest), MemSource())
    give_away(str(dest))
    return dest


def test_state_folder_replaced_by_a_link_is_refused_and_nothing_is_deleted(tmp_path, victim):
    dest = synced_dest(tmp_path)
    state = dest / ".gpufleet-weights"
    for name in os.listdir(str(state / "tmp")):
        os.unlink(str(state / "tmp" / name))
    os.rmdir(str(state / "tmp"))
    for name in os.listdir(str(state)):
        os.unlink(str(state / name))
    os.rmdir(str(state))
    os.symlink(str(victim), str(state))
    with pytest.raises(WeightsError) as err:
        snapshot.sync(str(dest), MemSource())
    assert ".gpufleet-weights" in err.value.message and "symbolic link" in err.value.message
    assert (victim / "tmp" / "precious").read_bytes() == b"keep me"
    assert sorted(os.listdir(str(victim))) == ["secret", "tmp"]


def test_symlinked_sub_folder_is_refused_and_root_only_folder_untouched(tmp_path, victim):
    dest = synced_dest(tmp_path)
    os.unlink(str(dest / "sub" / "w.safetensors"))
    os.rmdir(str(dest / "sub"))
    os.symlink(str(victim), str(dest / "sub"))
    with pytest.raises(WeightsError) as err:
        snapshot.sync(str(dest), MemSource())
    assert "m/sub" in err.value.message and "symbolic link" in err.value.message
    assert not (victim / "w.safetensors").exists()


def test_a_link_at_a_file_path_is_refused_not_hashed_or_chmodded(tmp_path, victim):
    dest = synced_dest(tmp_path)
    os.unlink(str(dest / "config.json"))
    os.symlink(str(victim / "secret"), str(dest / "config.json"))
    with pytest.raises(WeightsError) as err:
        snapshot.sync(str(dest), MemSource(), verify="full")
    assert "config.json" in err.value.message
    assert oct(os.stat(str(victim / "secret")).st_mode & 0o777) == "0o600"


def test_a_link_planted_as_a_partial_download_is_refused(tmp_path, victim):
    dest = synced_dest(tmp_path)
    os.unlink(str(dest / "sub" / "w.safetensors"))
    spec = [s for s in MemSource().specs if s.path == "sub/w.safetensors"][0]
    os.symlink(str(victim / "secret"), str(dest / ".gpufleet-weights" / "tmp" / snapshot.temp_name(spec)))
    with pytest.raises(WeightsError) as err:
        snapshot.sync(str(dest), MemSource())
    assert "sub/w.safetensors" in err.value.message and "symbolic link" in err.value.message
    assert (victim / "secret").read_bytes() == b"root secret"
    assert oct(os.stat(str(victim / "secret")).st_mode & 0o777) == "0o600"


def test_a_link_planted_at_the_record_temp_name_is_never_written_through(tmp_path, victim):
    dest = synced_dest(tmp_path)
    state = dest / ".gpufleet-weights"
    os.unlink(str(state / "record.json"))
    os.symlink(str(victim / "secret"), str(state / ("record.json.%d.tmp" % os.getpid())))
    snapshot.sync(str(dest), MemSource())
    assert (victim / "secret").read_bytes() == b"root secret"
    assert (state / "record.json").is_file() and not (state / "record.json").is_symlink()


@pytest.fixture
def local_src(tmp_path, victim):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "config.json").write_bytes(b"{}")
    (src / "sub" / "w.bin").write_bytes(b"w" * 1000)
    give_away(str(src))
    return src


def test_local_source_link_to_a_root_only_file_is_refused(tmp_path, victim, local_src):
    os.symlink(str(victim / "secret"), str(local_src / "tokenizer.json"))
    for follow in (False, True):  # even with follow_links: the link leaves the source tree
        with pytest.raises(WeightsError) as err:
            sources.LocalSource(None, str(local_src), None, None, None, 1, follow_links=follow)
        assert "tokenizer.json" in err.value.message and "symbolic link" in err.value.message


def test_local_source_folder_link_outside_is_refused(tmp_path, victim, local_src):
    os.symlink(str(victim), str(local_src / "more"))
    for follow in (False, True):
        with pytest.raises(WeightsError) as err:
            sources.LocalSource(None, str(local_src), None, None, None, 1, follow_links=follow)
        assert "more" in err.value.message


def test_local_source_link_inside_the_tree_only_with_follow_links(tmp_path, local_src):
    os.symlink("sub/w.bin", str(local_src / "alias.bin"))
    with pytest.raises(WeightsError) as err:
        sources.LocalSource(None, str(local_src), None, None, None, 1)
    assert "alias.bin" in err.value.message and "follow_links: true" in err.value.message
    src = sources.LocalSource(None, str(local_src), None, None, None, 1, follow_links=True)
    assert [s.path for s in src.specs] == ["alias.bin", "config.json", "sub/w.bin"]
    res = snapshot.sync(str(tmp_path / "d"), src)
    assert res["file_count"] == 3 and (tmp_path / "d" / "alias.bin").read_bytes() == b"w" * 1000
    assert not (tmp_path / "d" / "alias.bin").is_symlink()


def test_local_source_link_named_in_a_manifest_is_refused(tmp_path, victim, local_src):
    os.symlink(str(victim / "secret"), str(local_src / "tokenizer.json"))
    manifest = tmp_path / "SUMS"
    manifest.write_text("%s  tokenizer.json\n" % hashlib.sha256(b"root secret").hexdigest())
    with pytest.raises(WeightsError) as err:
        sources.LocalSource(None, str(local_src), str(manifest), None, None, 1)
    assert "tokenizer.json" in err.value.message


# ---- issue 27 HIGH 3: dest (or a parent below the store root) swapped for a link by the store's owner ----
# The layout model_storage makes (roles/model_storage/defaults/main.yml): model_storage_path (/srv/models)
# owned by the service account, mode 0755; model_weights' dest is a folder in it, root runs the module
# with owner=<the account>. The account can replace dest (or a folder on its path) with a link of its own.
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the attack is a link owned by another uid")


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "srv-models"
    path.mkdir(mode=0o755)
    if os.geteuid() == 0:
        os.lchown(str(path), OTHER_UID, OTHER_UID)
    return path


def planted_link(target, at):
    os.symlink(str(target), str(at))
    os.lchown(str(at), OTHER_UID, OTHER_UID)


@root_only
def test_dest_swapped_for_the_accounts_link_to_a_root_folder_is_refused_and_not_chowned(store, victim):
    planted_link(victim, store / "Qwen3-32B")
    with pytest.raises(WeightsError) as err:
        snapshot.sync(str(store / "Qwen3-32B"), MemSource(), attrs=snapshot.safefs.Attrs(OTHER_UID, OTHER_UID, 0o644))
    assert "Qwen3-32B is a symbolic link owned by uid 65534" in err.value.message
    assert os.stat(str(victim)).st_uid == 0 and os.stat(str(victim / "secret")).st_uid == 0
    assert sorted(os.listdir(str(victim))) == ["secret", "tmp"]


@root_only
def test_a_parent_below_the_store_root_swapped_for_a_link_is_refused(store, victim):
    planted_link(victim, store / "Qwen")
    with pytest.raises(WeightsError) as err:
        snapshot.sync(str(store / "Qwen" / "Qwen3-32B"), MemSource(), attrs=snapshot.safefs.Attrs(OTHER_UID, OTHER_UID))
    assert "srv-models/Qwen is a symbolic link owned by uid 65534" in err.value.message
    assert sorted(os.listdir(str(victim))) == ["secret", "tmp"] and os.stat(str(victim)).st_uid == 0


@root_only
def test_the_operators_own_link_on_the_path_is_followed(tmp_path, store):
    """A root-owned link (the operator's layout, /models -> /srv/models) is still followed, relative ones too."""
    os.symlink("srv-models", str(tmp_path / "models"))
    result = snapshot.sync(str(tmp_path / "models" / "m"), MemSource())
    assert (store / "m" / "config.json").read_bytes() == FILES["config.json"]
    assert result["changed"]
