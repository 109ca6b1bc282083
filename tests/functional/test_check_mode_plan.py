# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Check mode on a host whose snapshot does not exist yet still plans (issue 15, item 8).

The round-1 roles planned from <dest>/config.json, which check mode never downloads, so
`site.yml --check` on a fresh host failed at the planner. Now the model_weights role says where
config.json can be read (the local source on the host, or a copy the controller fetches for hf/http)
and the vllm role plans from there, while the command lines name the snapshot directory. Here the
"host" is this machine (connection local): the controller copy is real, the host side is `dest`,
which must not exist afterwards. The Molecule fleet scenario runs the same on fresh systemd hosts.
"""
from __future__ import annotations

import base64
import json
import os
import struct
import subprocess
import sys

from weights_support import ROOT, FakeHub, StaticServer, collections_path, write_files

CONFIG = os.path.join(ROOT, "tests", "fixtures", "model-configs", "Qwen__Qwen3-14B.config.json")
H200 = {"count": 1, "name": "NVIDIA H200", "memory_total_bytes": 150109880320, "compute_capability": "9.0"}
PLAY = """
- hosts: localhost
  gather_facts: false
  roles:
    - gpufleet.vllm.model_weights
  post_tasks:
    - name: Plan as site.yml does
      ansible.builtin.include_role:
        name: gpufleet.vllm.vllm
        tasks_from: plan
      vars:
        vllm_plan_on_controller: "{{ model_weights_config_on_controller }}"
        vllm_profile:
          model: "{{ model_weights_config_dir }}"
          serve_path: "{{ model_weights_dest }}"
          gpus: %s
          max_model_len: 32768
          kv_cache_memory_bytes: 6989963018
    - name: Report
      ansible.builtin.debug:
        msg: "RESULT {{ {'argv': vllm_served_instances[0].argv, 'config_dir': model_weights_config_dir,
                        'on_controller': model_weights_config_on_controller} | to_json | b64encode }} END"
""" % json.dumps(H200)


def check_run(tmp_path, extra):
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAY)
    user = os.environ.get("USER") or "root"
    extra = dict({"model_weights_owner": user, "model_weights_group": "root" if user == "root" else user,
                  "model_weights_create_owner": False, "model_weights_dest": str(tmp_path / "host" / "models" / "m"),
                  "model_weights_check_config_cache": str(tmp_path / "controller-cache"),
                  "ansible_python_interpreter": sys.executable}, **extra)
    (tmp_path / "extra.json").write_text(json.dumps(extra))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_path(), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default")
    env.pop("HF_TOKEN", None)
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,",
                           "-c", "local", str(playbook), "-e", "@%s" % (tmp_path / "extra.json"), "--check"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=ROOT, timeout=600, check=False)
    out = proc.stdout.decode()
    assert proc.returncode == 0, out[-4000:]
    result = json.loads(base64.b64decode(out.split("RESULT ", 1)[1].split(" END", 1)[0]))
    dest = extra["model_weights_dest"]
    argv = result["argv"]
    assert argv[argv.index("serve") + 1] == dest, argv  # the host's snapshot, never the copy
    assert not os.path.exists(dest) and not (tmp_path / "host").exists()  # the host is not written to
    return result


def cache_copy(tmp_path):
    """The controller's copy for this run: one folder per host and per model source/revision."""
    folders = list((tmp_path / "controller-cache" / "localhost").iterdir())
    assert len(folders) == 1, folders
    return folders[0]


def _safetensors(name):
    header = json.dumps({name: {"dtype": "BF16", "shape": [16], "data_offsets": [0, 32]}}).encode()
    return struct.pack("<Q", len(header)) + header + b"\0" * 32


def _source_files():
    with open(CONFIG, "rb") as fh:
        return {"config.json": fh.read(), "model-00001-of-00002.safetensors": _safetensors("a"),
                "model-00002-of-00002.safetensors": _safetensors("b")}


def test_http_source_plans_from_a_controller_copy(tmp_path):
    served = tmp_path / "served"
    manifest = write_files(str(served), _source_files())
    (served / "SHA256SUMS").write_text(manifest)
    with StaticServer(str(served)) as server:
        result = check_run(tmp_path, {"model_weights_source": "http", "model_weights_url": server.url,
                                      "model_weights_manifest": server.url + "/SHA256SUMS"})
    copy = cache_copy(tmp_path)
    assert result["on_controller"] is True and result["config_dir"] == str(copy)
    # only config.json (the source has no index) reached the controller, never the weights
    assert sorted(p.name for p in copy.iterdir() if not p.name.startswith(".")) == ["config.json"]


def test_hf_source_plans_from_a_controller_copy_at_the_resolved_commit(tmp_path):
    hub = FakeHub(lfs_threshold=32)
    files = _source_files()
    commit = hub.add_commit("fake-org/Qwen3-14B", files)
    hub.start()
    try:
        result = check_run(tmp_path, {"model_weights_source": "hf", "model_weights_repo_id": "fake-org/Qwen3-14B",
                                      "model_weights_endpoint": hub.endpoint, "model_weights_revision": "main"})
    finally:
        hub.stop()
    copy = cache_copy(tmp_path)
    assert result["on_controller"] is True and result["config_dir"] == str(copy)
    record = json.loads((copy / ".gpufleet-weights" / "record.json").read_text())
    assert record["revision"] == commit


def test_local_source_plans_from_the_source_on_the_host(tmp_path):
    seed = tmp_path / "seed"
    write_files(str(seed), _source_files())
    result = check_run(tmp_path, {"model_weights_source": "local", "model_weights_path": str(seed)})
    assert result["on_controller"] is False and result["config_dir"] == str(seed)
    assert not (tmp_path / "controller-cache").exists()
