# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""site.yml checks every input before it changes a host, and a bad input leaves the host as it was.

Each case copies a shipped example inventory, makes one input wrong (or leaves the one the user must fill in
empty) and runs the real site.yml against this machine (connection local, as root, the way CI runs). The run
must stop in the input check, name the variable and the fix, report changed=0, and leave the paths the roles
write (sysctl.d, limits.d, systemd units, /srv/models, /opt/vllm, the accounts) byte for byte as before.
The hub is tests/fakes/fake_hf_hub.py (a FAKE hub) serving the example model's real config.json.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from weights_support import ROOT, FakeHub, collections_path

EXAMPLES = os.path.join(ROOT, "inventories", "examples")
CONFIGS = os.path.join(ROOT, "tests", "fixtures", "model-configs")
WATCHED = ["/etc/sysctl.d", "/etc/security/limits.d", "/etc/systemd/system", "/srv/models", "/opt/vllm",
           "/etc/nginx/conf.d", "/etc/passwd", "/etc/group"]
NOT_ROOT = os.geteuid() != 0


def host_state():
    """A digest of every path the site roles write: names, modes, owners, sizes and contents."""
    digest = hashlib.sha256()
    for top in WATCHED:
        if os.path.isfile(top):
            with open(top, "rb") as handle:
                digest.update(top.encode() + handle.read())
            continue
        for base, dirs, files in os.walk(top):
            dirs.sort()
            for name in sorted(files):
                path = os.path.join(base, name)
                info = os.lstat(path)
                digest.update(("%s %o %d %d %d" % (path, info.st_mode, info.st_uid, info.st_gid, info.st_size)).encode())
    return digest.hexdigest()


def copy_example(tmp_path, name, **changes):
    """The user's copy of an example inventory, with `changes` laid over its group_vars/all.yml."""
    inventory = tmp_path / "inventory"
    shutil.copytree(os.path.join(EXAMPLES, name), str(inventory))
    all_yml = inventory / "group_vars" / "all.yml"
    data = yaml.safe_load(all_yml.read_text())
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = dict(data[key], **value)
        else:
            data[key] = value
    all_yml.write_text(yaml.safe_dump(data))
    return inventory


def run_site(tmp_path, inventory, *extra):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_path(), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), HOME=str(tmp_path))
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(inventory),
           os.path.join(ROOT, "site.yml"), "-e", "ansible_connection=local",
           "-e", "ansible_python_interpreter=" + sys.executable,
           "-e", "model_weights_check_config_cache=" + str(tmp_path / "controller-cache")] + list(extra)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=False)


def assert_stopped_unchanged(result, before, *words):
    out = result.stdout + result.stderr
    assert result.returncode != 0, out[-3000:]
    assert "changed=0" in out and "failed=1" in out, out[-3000:]
    for word in words:
        assert word in out, "%r not in the failure:\n%s" % (word, out[-3000:])
    assert "Traceback" not in out
    # The run stopped in the input check: the chain's first role (gpu_preflight) never started.
    assert "Check the fleet-wide inventory variables" in out
    assert "TASK [gpufleet.vllm.gpu_preflight" not in out, out[-3000:]
    assert host_state() == before


@pytest.fixture(scope="module")
def hub():
    fake = FakeHub()
    with open(os.path.join(CONFIGS, "Qwen__Qwen3-32B.config.json"), "rb") as handle:
        config = handle.read()
    fake.commit = fake.add_commit("Qwen/Qwen3-32B", {"config.json": config})
    fake.start()
    yield fake
    fake.stop()


@pytest.mark.skipif(NOT_ROOT, reason="runs site.yml as root against this machine, as CI does")
@pytest.mark.parametrize("example", sorted(os.listdir(EXAMPLES)))
def test_example_as_shipped_asks_for_the_commit_before_any_change(tmp_path, example):
    before = host_state()
    result = run_site(tmp_path, copy_example(tmp_path, example))
    assert_stopped_unchanged(result, before, "gpufleet_model_revision is \"\"", "nothing was changed",
                             "40-character commit id")


@pytest.mark.skipif(NOT_ROOT, reason="runs site.yml as root against this machine, as CI does")
@pytest.mark.parametrize("changes, words", [
    ({"gpufleet_model_id": ""}, ["gpufleet_model_id is not set"]),
    ({"gpufleet_model_revision": "main"}, ["gpufleet_model_revision is \"main\""]),
    ({"gpufleet_serving": {"vllm_version": "0.32.0"}}, ["gpufleet_serving.vllm_version (0.32.0) differs from vllm_version"]),
    ({"model_weights_dest": "/srv/models/elsewhere"}, ["model_weights_dest (/srv/models/elsewhere) differs"]),
    ({"gpufleet_model_dir": "srv/models/relative"}, ["gpufleet_model_dir must be the model's absolute folder"]),
], ids=["no-model", "branch-not-commit", "two-versions", "dest-not-model-dir", "relative-dir"])
def test_wrong_fleet_input_stops_before_any_change(tmp_path, changes, words):
    changes = dict({"gpufleet_model_revision": "0" * 40}, **changes)
    before = host_state()
    result = run_site(tmp_path, copy_example(tmp_path, "h100x4", **changes))
    assert_stopped_unchanged(result, before, *words)


@pytest.mark.skipif(NOT_ROOT, reason="runs site.yml as root against this machine, as CI does")
def test_plan_that_does_not_fit_the_gpus_stops_before_any_change(tmp_path, hub):
    """A pinned commit the hub knows, but GPUs too small for Qwen3-32B: the plan fails in the check, not after
    host_tuning, mig and model_storage have run."""
    small = {"count": 4, "name": "NVIDIA H100 80GB HBM3", "memory_total_bytes": 8 * 1024 ** 3,
             "compute_capability": "9.0"}
    inventory = copy_example(tmp_path, "h100x4", gpufleet_model_revision=hub.commit, gpufleet_hardware=small,
                             model_weights_endpoint=hub.endpoint)
    before = host_state()
    result = run_site(tmp_path, inventory)
    assert_stopped_unchanged(result, before, "vllm_plan")
    out = result.stdout + result.stderr
    # The snapshot was resolved on the hub (check mode) before the plan refused the GPUs.
    assert "Resolve the snapshot at its source" in out
    assert not os.path.exists("/srv/models/Qwen3-32B")


@pytest.mark.skipif(NOT_ROOT, reason="runs site.yml as root against this machine, as CI does")
def test_a_release_pypi_cannot_install_stops_before_any_change(tmp_path, hub):
    """vllm_version 0.34.0 (its wheel pins flashinfer-python==0.7.3, which PyPI never had): the input check names the
    pin and the ways out before any role changed the host, not pip after host_tuning, mig and model_storage ran."""
    inventory = copy_example(tmp_path, "h100x4", gpufleet_model_revision=hub.commit, model_weights_endpoint=hub.endpoint,
                             vllm_version="0.34.0")
    before = host_state()
    result = run_site(tmp_path, inventory)
    assert_stopped_unchanged(result, before, "vllm_version 0.34.0 cannot be installed from PyPI",
                             "flashinfer-python==0.7.3", "vllm_requirements_exclude")
