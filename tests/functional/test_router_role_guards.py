# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The router role refuses bad input before it installs anything, naming the variable and the fix, never a
traceback: ansible-playbook runs the installed role on localhost with a made-up two-host inventory (every case
fails at the input check, so nothing is installed). The real router runs in the Molecule scenario `vllm_serve`."""
import json
import os
import subprocess
import sys

import pytest


def _instance(port, model="tiny-qwen3", host=None):
    argv = ["vllm", "serve", "/srv/models/x", "--served-model-name", model, "--port", str(port)]
    if host:
        argv += ["--host", host]
    return dict(name="%s-%d" % (model, port), port=port, argv=argv)


INVENTORY = """
[vllm_hosts]
localhost ansible_connection=local
gpu2 ansible_host=10.0.0.12
"""
PLAY = """
- hosts: vllm_hosts
  gather_facts: false
  tasks:
    - name: The plan stand-in (what the vllm role would set)
      ansible.builtin.set_fact:
        vllm_served_instances: "{{ served[inventory_hostname] }}"
- hosts: localhost
  gather_facts: false
  roles:
    - gpufleet.vllm.router
"""
GOOD = {"localhost": [_instance(8000), _instance(8001)], "gpu2": [_instance(8000)]}


def run_role(venv_bin, collections, tmp_path, extra, served=None):
    (tmp_path / "play.yml").write_text(PLAY)
    (tmp_path / "hosts.ini").write_text(INVENTORY)
    variables = dict(served=served or GOOD, router_base_dir=str(tmp_path / "opt"), **extra)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections), ANSIBLE_NOCOLOR="1")
    return subprocess.run([str(venv_bin / "ansible-playbook"), "-i", str(tmp_path / "hosts.ini"), str(tmp_path / "play.yml"),
                           "-e", "ansible_python_interpreter=%s" % sys.executable, "-e", json.dumps(variables)],
                          capture_output=True, text=True, env=env, check=False, timeout=300)


@pytest.mark.parametrize("extra, served, message", [
    (dict(router_policy="cache-aware"), None, "router_policy"),
    (dict(router_model="qwen3-8b"), None, "router_model is 'qwen3-8b', but no host of group 'vllm_hosts' serves it"),
    ({}, {"localhost": [], "gpu2": []}, "no instance to route to"),
    ({}, {"localhost": [_instance(8000)], "gpu2": [_instance(8000, model="other")]}, "serves several models"),
    (dict(router_port=8001), None, "router_port is 8001, which instance tiny-qwen3-8001 uses already"),
    (dict(router_metrics_port=8080, nginx_listen_port=8080), None,
     "router_metrics_port is 8080, which nginx (nginx_listen_port) uses already"),
    (dict(router_host="0.0.0.0"), None, "must be loopback or a private address"),
    (dict(router_extra_args=["--api-key=sekrit"]), None, "router_extra_args sets --api-key"),
    # issue 43 class 2: argparse prefixes and vLLM-style underscores name the same flags
    (dict(router_extra_args=["--hos", "0.0.0.0"]), None, "router_extra_args sets --hos (--host)"),
    (dict(router_extra_args=["--prometheus-h=0.0.0.0"]), None, "router_extra_args sets --prometheus-h (--prometheus-host)"),
    (dict(router_extra_args=["--api_k=sekrit"]), None, "router_extra_args sets --api_k (--api-key)"),
    # issue 43 class 6: a newline in a value that lands in the unit adds no line
    (dict(router_user="vllm-router\nExecStartPre=+/bin/sh"), None, "router_user: a newline or another control character"),
    ({}, {"localhost": [_instance(8000)], "gpu2": [_instance(8000, host="127.0.0.1")]},
     "instance tiny-qwen3-8000 on gpu2 listens on 127.0.0.1 only"),
])
def test_bad_input_is_refused_before_install(venv_bin, installed_collection, tmp_path, extra, served, message):
    proc = run_role(venv_bin, installed_collection, tmp_path, extra, served)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert message in out, out[-3000:]
    assert "Traceback" not in out
    assert not (tmp_path / "opt").exists()
