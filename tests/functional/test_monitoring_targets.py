# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The monitoring role's scrape targets from an inventory and the vllm role's plan (vllm_served_instances),
computed by the role's own tasks (targets.yml) on localhost."""
import json
import os
import pathlib
import subprocess
import sys

import yaml

from weights_support import collections_path

ROOT = pathlib.Path(__file__).resolve().parents[2]
PLAY = ROOT / "tests" / "functional" / "monitoring" / "targets.yml"


def _instance(name, port, host=None):
    argv = ["vllm", "serve", "/srv/models/m", "--port", str(port)] + (["--host", host] if host else [])
    return {"name": name, "port": port, "argv": argv}


def run(tmp_path, gpu02_host):
    inventory = {"all": {"children": {
        "vllm_hosts": {"hosts": {
            "gpu01": {"ansible_host": "10.0.0.11",
                      "vllm_served_instances": [_instance("m-0", 8000, "0.0.0.0"), _instance("m-1", 8001)],
                      "__vllm_plan": {"capacity": {"num_blocks": 2666}}},
            "gpu02": {"ansible_host": "10.0.0.12", "monitoring_scrape_address": "192.168.0.12",
                      "vllm_served_instances": [dict(_instance("m-0", 8000, gpu02_host), planned_blocks=100)],
                      "_monitoring_dcgm_running": True}}},
        "monitoring": {"hosts": {"mon": {"ansible_host": "10.0.0.2"}}}}}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_path(), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(tmp_path / "hosts.yml"),
         str(PLAY), "-e", "dump=%s" % (tmp_path / "dump.json"), "-e", "ansible_python_interpreter=%s" % sys.executable],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=ROOT, timeout=300, check=False, text=True)
    return proc.returncode, proc.stdout, tmp_path / "dump.json"


def test_targets_from_inventory_and_plan(tmp_path):
    code, out, dump = run(tmp_path, "192.168.0.12")
    assert code == 0, out
    got = json.loads(dump.read_text())
    assert got["vllm"] == [
        {"targets": ["10.0.0.11:8000"], "labels": {"host": "gpu01", "vllm_instance": "m-0"}},
        {"targets": ["10.0.0.11:8001"], "labels": {"host": "gpu01", "vllm_instance": "m-1"}},  # no --host: all
        {"targets": ["192.168.0.12:8000"], "labels": {"host": "gpu02", "vllm_instance": "m-0"}},
    ]
    # (the role takes the hosts as a set: order is not meaningful)
    assert sorted(got["node"], key=lambda t: t["labels"]["host"]) == [
        {"targets": ["10.0.0.11:9100"], "labels": {"host": "gpu01"}},
        {"targets": ["192.168.0.12:9100"], "labels": {"host": "gpu02"}},
        {"targets": ["127.0.0.1:9100"], "labels": {"host": "mon"}},
    ]
    assert got["dcgm"] == [{"targets": ["192.168.0.12:9400"], "labels": {"host": "gpu02"}}]
    vllm_checks = [t for t in got["check"] if t["job"] == "vllm"]
    assert vllm_checks == [
        {"name": "gpu01/m-0", "job": "vllm", "url": "http://10.0.0.11:8000/metrics", "planned_blocks": 2666},
        {"name": "gpu01/m-1", "job": "vllm", "url": "http://10.0.0.11:8001/metrics", "planned_blocks": 2666},
        {"name": "gpu02/m-0", "job": "vllm", "url": "http://192.168.0.12:8000/metrics", "planned_blocks": 100},
    ]
    assert {t["name"] for t in got["check"] if t["job"] != "vllm"} == {"gpu01/node", "gpu02/node", "gpu02/dcgm", "mon/node"}


def test_loopback_instances_on_another_host_are_refused(tmp_path):
    code, out = run(tmp_path, "127.0.0.1")[:2]
    assert code != 0
    assert "listen on loopback only" in out and "gpu02/m-0" in out and "monitoring_server_group" in out
    assert "gpu01/m-0" not in out.split("listen on loopback only")[1].split("Run Prometheus")[0]
    # Issue 27: the fix offered is never a bare non-loopback bind (vLLM's key guards /v1 only).
    flat = " ".join(out.split())
    assert "Bind them to an address" not in flat
    assert "Do not simply bind vLLM to another address" in flat and "vllm_allow_unauthenticated=true" in flat
