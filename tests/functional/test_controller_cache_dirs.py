# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller folders the roles and playbooks write by default follow XDG_CACHE_HOME, as the scripts do
(scripts/lib.sh), and fall back to ~/.cache when it is unset or empty: the demo's benchmark report went to
~/.cache/gpufleet-vllm/bench-results even with XDG_CACHE_HOME set (seen 2026-12-04)."""
import json
import os
import pathlib
import subprocess

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
# (file, how to reach the variable in it, variable, the folder under gpufleet-vllm/)
DEFAULTS = [
    ("roles/bench/defaults/main.yml", None, "bench_results_dir", "bench-results"),
    ("roles/model_weights/defaults/main.yml", None, "model_weights_check_config_cache", "check-config"),
    ("playbooks/tune.yml", 0, "tune_results_dir", "tune-results"),
    ("playbooks/plan.yml", 0, "plan_cache_dir", "plan/"),
]


def _expression(path, play, name):
    doc = yaml.safe_load((ROOT / path).read_text())
    return doc[name] if play is None else doc[play]["vars"][name]


def _rendered(venv_bin, expression, env):
    # plan_cache_dir names the model: give it one.
    out = subprocess.run([os.path.join(venv_bin, "ansible"), "localhost", "-c", "local", "-m", "ansible.builtin.debug",
                          "-a", json.dumps({"msg": expression}), "-e", "plan_model=Qwen/Qwen3-8B", "-o"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, env=env, timeout=120, check=False)
    assert out.returncode == 0, out.stdout
    return out.stdout.split('"msg": "', 1)[1].split('"', 1)[0]


@pytest.mark.parametrize("path,play,name,folder", DEFAULTS, ids=[d[2] for d in DEFAULTS])
def test_default_folder_follows_xdg_cache_home(venv_bin, tmp_path, path, play, name, folder):
    expression = _expression(path, play, name)
    home = tmp_path / "home"
    base = dict(os.environ, HOME=str(home), ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"))
    with_xdg = _rendered(venv_bin, expression, dict(base, XDG_CACHE_HOME=str(tmp_path / "xdg")))
    assert with_xdg.startswith(str(tmp_path / "xdg" / "gpufleet-vllm" / folder)), with_xdg
    unset = dict(base)
    unset.pop("XDG_CACHE_HOME", None)
    for env in (unset, dict(base, XDG_CACHE_HOME="")):
        got = _rendered(venv_bin, expression, env)
        assert got.startswith(str(home / ".cache" / "gpufleet-vllm" / folder)), got
