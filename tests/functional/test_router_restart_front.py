# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""issue 44 case (c): a router restart under load fails nothing. In router mode nginx's upstream is the router with
the host's own instances as `backup` servers; the router role's restart first marks the router `down`
(nginx_router_drained: new requests go to the instances), waits until nginx's workers of the previous configuration
have finished their requests (nothing is in flight through the router then), restarts the router, and admits it
again. Here with a real nginx (the role's rendered nginx.conf) in front of TEST STAND-INs for the router and two
vLLM instances (extensions/molecule/nginx/files/standin_upstream.py), under streaming load from threads: the
drained restart loses no request; the same restart without the drain breaks the streams the router carried (the
check can fail). The Molecule scenario vllm_serve runs the role's own steps against the real vllm-router."""
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import pytest
import yaml

from test_nginx_front import FILES, KEY, NGINX, _conf, _free_port, _wait
from test_nginx_template import render, servers

pytestmark = pytest.mark.skipif(not os.path.exists(NGINX), reason="nginx is not installed")

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROUTER = "127.0.0.1:30000"


def test_router_mode_renders_the_instances_as_backups_and_the_drain():
    instances = [{"name": "m-0", "port": 8000}, {"name": "m-1", "port": 8001}]
    conf = render(nginx_upstream_router=ROUTER, nginx_instances=instances)
    assert servers(conf) == [(ROUTER, "max_fails=3 fail_timeout=30s"),
                             ("127.0.0.1:8000", "max_fails=3 fail_timeout=30s backup"),
                             ("127.0.0.1:8001", "max_fails=3 fail_timeout=30s backup")]
    drained = render(nginx_upstream_router=ROUTER, nginx_instances=instances, nginx_router_drained=True,
                     nginx_drained_instances=["m-1"])
    assert servers(drained) == [(ROUTER, "max_fails=3 fail_timeout=30s down"),
                                ("127.0.0.1:8000", "max_fails=3 fail_timeout=30s backup")]


def _standin(port, name):
    return subprocess.Popen([sys.executable, str(FILES / "standin_upstream.py"), "--port", str(port), "--name", name,
                             "--interval", "0.1", "--api-key", KEY])


class Load(object):
    """Streaming completions through the front from four threads until stopped; each is ok or failed."""

    def __init__(self, url):
        self.url, self.ok, self.failed, self.by, self.stop = url, 0, [], {}, threading.Event()
        self.threads = [threading.Thread(target=self._run) for _thread in range(4)]

    def _one(self):
        body = json.dumps({"model": "m", "prompt": "x", "stream": True, "events": 8}).encode()
        req = urllib.request.Request(self.url + "/v1/completions", data=body, method="POST", headers={
            "Content-Type": "application/json", "Authorization": "Bearer " + KEY})
        with urllib.request.urlopen(req, timeout=30) as answer:
            text = answer.read().decode()
        if "[DONE]" not in text:
            raise IOError("truncated stream")
        return re.search(r'"instance": "([^"]+)"', text).group(1)

    def _run(self):
        while not self.stop.is_set():
            try:
                name = self._one()
                self.ok += 1
                self.by[name] = self.by.get(name, 0) + 1
            except Exception as exc:  # pylint: disable=broad-except  # every failure is counted, whatever it is
                self.failed.append(repr(exc)[:120])

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(60)


def _role_argv(name, tmp_path):
    """The nginx role's own command (roles/nginx/vars/main.yml), pointed at this test's nginx.pid."""
    argv = yaml.safe_load((ROOT / "roles" / "nginx" / "vars" / "main.yml").read_text())[name]
    return [word.replace("/run/nginx.pid", str(tmp_path / "nginx.pid")) for word in argv]


def _workers(tmp_path):
    out = subprocess.run(_role_argv("_nginx_workers_argv", tmp_path), stdout=subprocess.PIPE,
                         universal_newlines=True, check=False)
    return out.stdout.split()


def _still_running(tmp_path, pids):
    out = subprocess.run(_role_argv("_nginx_still_running_argv", tmp_path) + pids, stdout=subprocess.PIPE,
                         universal_newlines=True, check=True)
    return out.stdout.split()


def _reload(tmp_path, conf_path, settle=0.5, **settings):
    conf_path.write_text(_conf(tmp_path, **settings))
    pid = int((tmp_path / "nginx.pid").read_text())
    os.kill(pid, signal.SIGHUP)
    time.sleep(settle)


def _restart_router(router_port, procs):
    procs["router"].kill()
    procs["router"].wait(10)
    time.sleep(1.0)                                          # the router is away a while
    procs["router"] = _standin(router_port, "router")
    _wait(router_port)


@pytest.mark.parametrize("drained", [True, False], ids=["drained-first", "no-drain"])
def test_a_router_restart_under_load(tmp_path, drained):
    router_port, ports, listen = _free_port(), [_free_port(), _free_port()], _free_port()
    procs = {"router": _standin(router_port, "router"), "a": _standin(ports[0], "a"), "b": _standin(ports[1], "b")}
    settings = dict(nginx_upstream_router="127.0.0.1:%d" % router_port, nginx_listen_port=listen,
                    nginx_worker_processes="2", nginx_instances=[{"name": n, "port": p} for n, p in zip("ab", ports)])
    conf_path = tmp_path / "nginx.conf"
    conf_path.write_text(_conf(tmp_path, **settings))
    server = subprocess.Popen([NGINX, "-c", str(conf_path), "-p", str(tmp_path), "-g", "daemon off;"])
    try:
        for port in [router_port, listen] + ports:
            _wait(port)
        with Load("http://127.0.0.1:%d" % listen) as load:
            time.sleep(2.0)
            if drained:
                # as the role's drain: the workers noted before the reload, and no pause after it (`systemctl
                # reload` returns before the master has told its old workers to stop)
                before = _workers(tmp_path)
                assert before
                _reload(tmp_path, conf_path, settle=0, nginx_router_drained=True, **settings)
                deadline = time.time() + 30
                while _still_running(tmp_path, before) and time.time() < deadline:
                    time.sleep(0.2)
                assert not _still_running(tmp_path, before)
            _restart_router(router_port, procs)
            if drained:
                _reload(tmp_path, conf_path, **settings)
            time.sleep(2.0)
        assert load.ok > 20 and load.by.get("router", 0) > 0, (load.ok, load.by)
        if drained:
            assert load.failed == [], load.failed
            assert load.by.get("a", 0) + load.by.get("b", 0) > 0    # the instances served while the router was down
        else:
            assert load.failed, "a router killed with streams on it must break them"
    finally:
        server.terminate()
        server.wait(10)
        for proc in procs.values():
            proc.terminate()
            proc.wait(10)
