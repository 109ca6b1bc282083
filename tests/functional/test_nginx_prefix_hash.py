# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""nginx_balancing=prefix_hash with a real nginx in front of two stand-in upstreams (TEST STAND-INs,
extensions/molecule/nginx/files/standin_upstream.py, answering with their name): requests whose bodies share
their first nginx_prefix_key_chars characters reach ONE instance whatever follows; different prefixes use both.
The same rendering was measured on an H200 with two real engines (tests/fixtures/router/h200-0.26.0)."""
import json
import os
import subprocess
import sys
import urllib.request

import pytest

from test_nginx_front import FILES, KEY, NGINX, _conf, _free_port, _wait

pytestmark = pytest.mark.skipif(not os.path.exists(NGINX), reason="nginx is not installed")


@pytest.fixture()
def hashed_front(tmp_path):
    ports = [_free_port(), _free_port()]
    listen = _free_port()
    standins = [subprocess.Popen([sys.executable, str(FILES / "standin_upstream.py"), "--port", str(port),
                                  "--name", name, "--api-key", KEY]) for name, port in zip("ab", ports)]
    path = tmp_path / "nginx.conf"
    path.write_text(_conf(tmp_path, nginx_instances=[{"name": n, "port": p} for n, p in zip("ab", ports)],
                          nginx_listen_port=listen, nginx_balancing="prefix_hash", nginx_prefix_key_chars=64))
    server = subprocess.Popen([NGINX, "-c", str(path), "-p", str(tmp_path), "-g", "daemon off;"])
    try:
        for port in ports + [listen]:
            _wait(port)
        yield "http://127.0.0.1:%d" % listen, path.read_text()
    finally:
        server.terminate()
        for proc in standins:
            proc.terminate()
        server.wait(10)
        for proc in standins:
            proc.wait(10)


def _served_by(url, prompt):
    body = json.dumps({"model": "m", "prompt": prompt, "max_tokens": 1}).encode()
    req = urllib.request.Request(url + "/v1/completions", data=body, method="POST",
                                 headers={"Content-Type": "application/json", "Authorization": "Bearer " + KEY})
    with urllib.request.urlopen(req, timeout=10) as answer:
        return json.loads(answer.read())["instance"]


def test_a_shared_prefix_stays_on_one_instance(hashed_front):
    url, conf = hashed_front
    assert "hash $gpufleet_prefix_key consistent;" in conf and "proxy_request_buffering on;" in conf
    shared = "You are a helpful assistant. Read the contract below and answer. " * 2
    assert len({_served_by(url, shared + " question %d" % i) for i in range(12)}) == 1
    spread = {_served_by(url, "document %03d " % i + "x" * 80) for i in range(24)}
    assert spread == {"a", "b"}  # 24 different prefixes: consistent hashing uses both instances


def test_least_conn_stays_the_default_and_streams_unbuffered():
    from test_nginx_template import render
    conf = render(nginx_instances=[{"name": "a", "port": 8000}])
    assert "least_conn;" in conf and "proxy_request_buffering off;" in conf and "gpufleet_prefix_key" not in conf
