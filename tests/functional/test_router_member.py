# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout's router step (router role, tasks_from member) against a REAL vllm-router 0.1.17 started by the
role's own launcher (roles/router/files/router_launch.py), with two TEST DOUBLE workers
(tests/fakes/fake_vllm_server.py): drain marks the worker and removes it, a router restart keeps it out
(the drained set), admit puts it back and clears the mark, a second admit changes nothing. vllm-router is
installed into a throwaway venv from the router wheelhouse (scripts/vllm-cpu-wheelhouse.sh fills it) or PyPI.
The same steps run in the Molecule scenario vllm_serve in front of two real engines."""
import json
import os
import pathlib
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FAKE = ROOT / "tests" / "fakes" / "fake_vllm_server.py"
WHEELS = pathlib.Path(os.environ.get("GPUFLEET_CPU_WHEELHOUSE", pathlib.Path.home() / ".cache" / "gpufleet-vllm"
                                     / "wheelhouse-cpu-0.32.0")) / "router"
PLAY = """
- hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.include_role: {name: gpufleet.vllm.router, tasks_from: member}
      vars: {router_member_state: "{{ state }}", router_member_routers: [localhost]}
"""


def _port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url):
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.loads(answer.read())


def _wait(url, seconds=60):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            return _get(url)
        except OSError:
            time.sleep(0.5)
    raise AssertionError("%s did not answer" % url)


@pytest.fixture(scope="module")
def router_bin(tmp_path_factory):
    venv = tmp_path_factory.mktemp("router-venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    source = ["--no-index", "--find-links", str(WHEELS)] if WHEELS.is_dir() else []
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check"] + source
                   + ["vllm-router==0.1.17"], check=True, capture_output=True, timeout=600)
    return venv / "bin" / "vllm-router"


def test_drain_restart_admit(tmp_path, router_bin, venv_bin, installed_collection):
    ports = [_port(), _port()]
    api, metrics = _port(), _port()
    workers = ["http://127.0.0.1:%d" % p for p in ports]
    procs = [subprocess.Popen([sys.executable, str(FAKE), "serve", "m", "--served-model-name", "tiny", "--port", str(p)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for p in ports]
    state = tmp_path / "state"
    (state / "drained").mkdir(parents=True)
    config = tmp_path / "router.json"
    config.write_text(json.dumps({"argv": [str(router_bin), "--host", "127.0.0.1", "--port", str(api), "--policy",
                                           "round_robin", "--prometheus-host", "127.0.0.1", "--prometheus-port", str(metrics)],
                                  "workers": workers, "drained_dir": str(state / "drained")}))
    launch = [sys.executable, str(ROOT / "roles" / "router" / "files" / "router_launch.py"), str(config)]
    router = subprocess.Popen(launch, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    (tmp_path / "hosts").write_text("localhost ansible_connection=local ansible_python_interpreter=%s router_port=%d "
                                    "router_state_dir=%s\n" % (sys.executable, api, state))
    (tmp_path / "play.yml").write_text(PLAY)
    (tmp_path / "vars.json").write_text(json.dumps({"vllm_served_instances": [
        {"name": "e1", "port": ports[1], "argv": ["vllm", "serve", "/m", "--served-model-name", "tiny", "--port", str(ports[1])]}]}))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(installed_collection), ANSIBLE_NOCOLOR="1")

    def member(what):
        proc = subprocess.run([str(venv_bin / "ansible-playbook"), "-i", str(tmp_path / "hosts"), str(tmp_path / "play.yml"),
                               "-e", "state=" + what, "-e", "@" + str(tmp_path / "vars.json")],
                              capture_output=True, text=True, env=env, check=False, timeout=300)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
        return proc.stdout

    try:
        listed = "http://127.0.0.1:%d/list_workers" % api
        assert sorted(_wait(listed)["urls"]) == sorted(workers)
        member("drained")
        assert _get(listed)["urls"] == workers[:1]
        assert [p.read_text().strip() for p in (state / "drained").iterdir()] == workers[1:]
        router.terminate()
        router.wait(30)
        router = subprocess.Popen(launch, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert _wait(listed)["urls"] == workers[:1]  # the restart kept the drained worker out
        out = member("admitted")
        assert sorted(_get(listed)["urls"]) == sorted(workers)
        assert list((state / "drained").iterdir()) == []
        assert "changed=2" in out
        assert "changed=0" in member("admitted")  # already admitted: nothing to do
    finally:
        router.terminate()
        router.wait(30)
        for proc in procs:
            proc.terminate()
            proc.wait(10)
