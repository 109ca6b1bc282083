# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The model_weights role on this machine (connection local): progress lines while a slow download
runs, check mode writes nothing, and the model_storage free-space contract refuses a snapshot
that does not fit."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from weights_support import ROOT, StaticServer, collections_path, tree, write_files

MIB = 1024 * 1024


def play(tmp_path, extra, check=False, inventory=None, verbose=False):
    playbook = tmp_path / "play.yml"
    playbook.write_text("- hosts: %s\n  gather_facts: false\n  roles:\n    - gpufleet.vllm.model_weights\n"
                        % ("all" if inventory else "localhost"))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_path(), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default", ANSIBLE_CALLBACK_RESULT_FORMAT="yaml")
    base = ["-e", "ansible_python_interpreter=%s" % sys.executable]
    extra_file = tmp_path / "extra.json"
    extra_file.write_text(json.dumps(extra))
    target = ["-i", inventory] if inventory else ["-i", "localhost,", "-c", "local"]
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook")] + target +
                          [str(playbook), "-e", "@%s" % extra_file] + base + (["--check"] if check else []) +
                          (["-vvv"] if verbose else []),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=ROOT, timeout=600, check=False)
    return proc.returncode, proc.stdout.decode()


@pytest.fixture
def served(tmp_path):
    root = tmp_path / "served"
    files = {"config.json": b"{}", "model-00001-of-00002.safetensors": os.urandom(3 * MIB),
             "model-00002-of-00002.safetensors": os.urandom(3 * MIB)}
    (root / "SHA256SUMS").parent.mkdir(parents=True)
    (root / "SHA256SUMS").write_text(write_files(str(root), files))
    return root


def _vars(server, dest, **kw):
    """The role's variables; the controller's check-mode config cache lives in this test's own folder
    (its default is under $HOME: a copy left there by an earlier run made check mode fetch nothing)."""
    user = os.environ.get("USER") or "root"
    base = {"model_weights_source": "http", "model_weights_url": server.url,
            "model_weights_check_config_cache": str(dest.parent / "controller-cache"),
            "model_weights_manifest": server.url + "/SHA256SUMS", "model_weights_dest": str(dest),
            "model_weights_owner": user, "model_weights_group": "root" if user == "root" else user,
            "model_weights_create_owner": False, "model_weights_poll_interval": 1, "model_weights_workers": 2}
    base.update(kw)
    return base


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to the owner needs root")
def test_role_prints_progress_then_is_idempotent(served, tmp_path):
    dest = tmp_path / "dest"
    with StaticServer(str(served), rate=1 * MIB) as server:
        rc, out = play(tmp_path, _vars(server, dest, model_storage_free_bytes=10 * 1024 ** 3))
        assert rc == 0, out[-4000:]
        assert "fetch: " in out and "% ), " not in out, out[-4000:]
        assert "files," in out and "/s, ETA" in out  # at least one progress line
        assert tree(str(dest)) and "changed=0" not in out.split("PLAY RECAP")[1]
        rc, out = play(tmp_path, _vars(server, dest, model_storage_free_bytes=10 * 1024 ** 3))
        assert rc == 0 and "changed=0" in out.split("PLAY RECAP")[1], out[-3000:]


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to the owner needs root")
def test_role_check_mode_and_free_space_refusal(served, tmp_path):
    dest = tmp_path / "dest"
    with StaticServer(str(served)) as server:
        rc, out = play(tmp_path, _vars(server, dest), check=True)
        # the YAML callback wraps long messages; a longer tmp path (xdist's) moves the break
        assert rc == 0 and "would fetch 3 file(s)" in " ".join(out.split()), out[-3000:]
        assert not dest.exists()
        rc, out = play(tmp_path, _vars(server, dest, model_storage_free_bytes=MIB))
        assert rc != 0 and "model_storage_free_bytes" in out and "Grow the model" in out, out[-3000:]
        assert not dest.exists()
        # Check mode copies config.json to this test's controller cache (for the plan); no weight is served.
        assert set(server.sent) == {"SHA256SUMS", "config.json"}, server.sent
        copies = list((tmp_path / "controller-cache" / "localhost").glob("*/config.json"))
        assert [c.read_bytes() for c in copies] == [b"{}"], copies


def test_check_mode_config_cache_is_keyed_by_model(tmp_path):
    """Issue 27: the controller's copy was keyed by host only: after model A (sharded, with an index) the plan of
    model B (one file, no index) read A's stale model.safetensors.index.json from the same folder."""
    model_a = {"config.json": b'{"model": "a"}', "model.safetensors.index.json": b'{"weight_map": {}}',
               "model-00001-of-00002.safetensors": b"a1", "model-00002-of-00002.safetensors": b"a2"}
    model_b = {"config.json": b'{"model": "b"}', "model.safetensors": b"b"}
    dirs = {}
    for name, files in (("a", model_a), ("b", model_b)):
        root = tmp_path / ("served-" + name)
        root.mkdir()
        (root / "SHA256SUMS").write_text(write_files(str(root), files))
        with StaticServer(str(root)) as server:
            rc, out = play(tmp_path, _vars(server, tmp_path / "dest", model_weights_manifest=server.url + "/SHA256SUMS"),
                           check=True)
        assert rc == 0, out[-3000:]
        dirs[name] = set((tmp_path / "controller-cache" / "localhost").iterdir())
    (copy_b,) = dirs["b"] - dirs["a"]
    assert (copy_b / "config.json").read_bytes() == b'{"model": "b"}'
    assert not (copy_b / "model.safetensors.index.json").exists()
    (copy_a,) = dirs["a"]
    assert (copy_a / "model.safetensors.index.json").exists()  # A's copy is A's, untouched by B's run


def test_fleet_with_different_resolved_revisions_warns_then_fails_when_asked(served, tmp_path):
    """Issue 15 item 11: two hosts resolving different snapshots are reported (fails on round 1: silent)."""
    other = tmp_path / "other"
    (other / "SHA256SUMS").parent.mkdir(parents=True)
    (other / "SHA256SUMS").write_text(write_files(str(other), {"config.json": b'{"v": 2}'}))
    with StaticServer(str(served)) as one, StaticServer(str(other)) as two:
        inventory = tmp_path / "hosts.yml"
        inventory.write_text(json.dumps({"all": {"hosts": {
            "h1": {"model_weights_url": one.url, "model_weights_manifest": one.url + "/SHA256SUMS",
                   "model_weights_dest": str(tmp_path / "d1")},
            "h2": {"model_weights_url": two.url, "model_weights_manifest": two.url + "/SHA256SUMS",
                   "model_weights_dest": str(tmp_path / "d2")}},
            "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}))
        base = _vars(one, tmp_path / "unused")
        for key in ("model_weights_url", "model_weights_manifest", "model_weights_dest"):
            base.pop(key)
        for strict in (False, True):
            rc, out = play(tmp_path, dict(base, model_weights_require_same_revision=strict), check=True,
                           inventory=str(inventory))
            assert "resolved 2 different revisions" in out or strict, out[-4000:]
            assert (rc != 0) is strict, out[-4000:]
            if strict:
                assert "model_weights_require_same_revision is true" in out
    assert not (tmp_path / "d1").exists() and not (tmp_path / "d2").exists()


def test_unquoted_mode_is_refused_by_the_role(served, tmp_path):
    with StaticServer(str(served)) as server:
        rc, out = play(tmp_path, _vars(server, tmp_path / "d", model_weights_mode=644), check=True)
    assert rc != 0 and "quoted octal string" in out and "644" in out, out[-3000:]


def test_role_token_masked_in_vvv(served, tmp_path):
    """The role's argument validation echoes the role's variables with -vvv; the token must be masked there."""
    token = "hf_ROLEtokenDoNotLog0123456789"
    with StaticServer(str(served)) as server:
        rc, out = play(tmp_path, _vars(server, tmp_path / "d", model_weights_token=token), check=True,
                       verbose=True)
    assert rc == 0 and token not in out, out[-3000:]


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to the owner needs root")
def test_check_mode_plans_from_the_source_when_only_the_index_would_change(tmp_path):
    """Issue 27: a host holding model A (sharded, with an index) and the same config.json as model B (one file): the
    check-mode plan read A's stale index from dest, which the real run removes."""
    config = b'{"architectures": ["Qwen3ForCausalLM"]}'
    model_a = {"config.json": config, "model.safetensors.index.json": b'{"weight_map": {}}',
               "model-00001-of-00002.safetensors": b"a1", "model-00002-of-00002.safetensors": b"a2"}
    model_b = {"config.json": config, "model.safetensors": b"b"}
    dest = tmp_path / "dest"
    roots = {}
    for name, files in (("a", model_a), ("b", model_b)):
        roots[name] = tmp_path / ("served-" + name)
        roots[name].mkdir()
        (roots[name] / "SHA256SUMS").write_text(write_files(str(roots[name]), files))
    with StaticServer(str(roots["a"])) as server:
        rc, out = play(tmp_path, _vars(server, dest, model_weights_manifest=server.url + "/SHA256SUMS"))
        assert rc == 0 and (dest / "model.safetensors.index.json").exists(), out[-3000:]
    playbook = tmp_path / "report.yml"
    playbook.write_text("- hosts: localhost\n  gather_facts: false\n  roles:\n    - gpufleet.vllm.model_weights\n"
                        "  post_tasks:\n    - ansible.builtin.debug:\n        msg: \"CONFIG_DIR={{ model_weights_config_dir }}\"\n")
    with StaticServer(str(roots["b"])) as server:
        extra = tmp_path / "extra-b.json"
        extra.write_text(json.dumps(_vars(server, dest, model_weights_manifest=server.url + "/SHA256SUMS")))
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_path(), ANSIBLE_NOCOLOR="1",
                   ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0")
        proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,",
                               "-c", "local", str(playbook), "-e", "@%s" % extra, "-e",
                               "ansible_python_interpreter=%s" % sys.executable, "--check"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=ROOT, timeout=600,
                              check=False, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:]
    config_dir = proc.stdout.split("CONFIG_DIR=", 1)[1].split('"', 1)[0]
    assert config_dir.startswith(str(tmp_path / "controller-cache" / "localhost")), config_dir
    assert not os.path.exists(os.path.join(config_dir, "model.safetensors.index.json"))
    assert (dest / "model.safetensors.index.json").exists()  # check mode removed nothing on the host
