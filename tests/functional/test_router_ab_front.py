# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""tests/gpu/router_ab.py's fronts: the collection's nginx template rendered for each arm, accepted by a real
`nginx -t` (Debian's nginx on this machine), with the balancing the arm says; the haproxy_bounded arm's HAProxy
(Debian's, scripts/requirements-apt.txt) in front of the nginx scenario's two stand-in upstreams: a shared body head spread within the
bound, a session kept on one engine. The whole A/B runs end to end on the CPU engine (command in tests/gpu/README.md)."""
import collections
import concurrent.futures
import importlib.util
import json
import pathlib
import re
import shutil
import subprocess
import sys
import time
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"
STANDIN = ROOT / "extensions" / "molecule" / "nginx" / "files" / "standin_upstream.py"
SPEC = importlib.util.spec_from_file_location("router_ab", ROOT / "tests" / "gpu" / "router_ab.py")
router_ab = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(router_ab)


def _opts(tmp_path):
    return router_ab.parse(["--model", str(tmp_path), "--out", str(tmp_path / "out"), "--port-base", "18700"])


@pytest.mark.skipif(not pathlib.Path(NGINX).exists(), reason="no nginx binary")
@pytest.mark.parametrize("arm, upstream, balancing, header", [
    ("nginx_least_conn", ["127.0.0.1:18700", "127.0.0.1:18701"], "least_conn;", False),
    ("nginx_hash", ["127.0.0.1:18700", "127.0.0.1:18701"], "hash $prefix_key consistent;", False),
    ("cache_aware", ["127.0.0.1:18710"], None, False),
    ("consistent_hash", ["127.0.0.1:18710"], None, True),
])
def test_front_of_each_arm_passes_nginx_t(tmp_path, arm, upstream, balancing, header):
    opts = _opts(tmp_path)
    conf = router_ab.render_nginx(opts, arm, opts.front_port, tmp_path).read_text()
    assert re.findall(r"^\s*server (\S+) ", conf, flags=re.M) == upstream
    if balancing:
        assert balancing in conf
    else:
        assert "least_conn" not in conf and "hash $prefix_key" not in conf
    assert ("proxy_set_header X-Session-Id $prefix_key;" in conf) is header
    assert ("map $request_body $prefix_key" in conf) is (arm in ("nginx_hash", "consistent_hash"))
    assert "location = /v1/completions" in conf and "/list_workers" not in conf
    proc = subprocess.run([NGINX, "-e", str(tmp_path / "error.log"), "-t", "-p", str(tmp_path), "-c",
                           str(tmp_path / "nginx.conf")], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_worse_of_repeats_is_the_lower_throughput():
    rows = [dict(workload="prefix", arm="a", concurrency=4, output_throughput=10.0),
            dict(workload="prefix", arm="a", concurrency=4, output_throughput=8.0),
            dict(workload="prefix", arm="a", concurrency=8, output_throughput=12.0)]
    picked = router_ab.worse(rows)
    assert picked[("prefix", "a", 4)]["output_throughput"] == 8.0
    assert picked[("prefix", "a", 8)]["output_throughput"] == 12.0


def test_unknown_arm_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        router_ab.parse(["--model", str(tmp_path), "--out", str(tmp_path), "--arms", "nginx_least_conn,cache-aware"])
    assert "unknown arm 'cache-aware'" in capsys.readouterr().err


@pytest.mark.skipif(not pathlib.Path(NGINX).exists(), reason="no nginx binary")
def test_nginx_default_is_the_roles_default_front(tmp_path):
    """nginx_default: the role's defaults as they are (session affinity on X-Session-Id, else least_conn)."""
    opts = _opts(tmp_path)
    conf = router_ab.render_nginx(opts, "nginx_default", opts.front_port, tmp_path).read_text()
    engines = ["127.0.0.1:18700", "127.0.0.1:18701"]
    assert re.findall(r"^\s*server (\S+) ", conf, flags=re.M) == engines + engines  # two upstreams, same engines
    assert "least_conn;" in conf and "hash $http_x_session_id consistent;" in conf
    assert "map $http_x_session_id $gpufleet_upstream" in conf
    assert "proxy_pass http://$gpufleet_upstream/v1/completions$is_args$args;" in conf
    assert "$prefix_key" not in conf and "proxy_request_buffering off;" in conf
    proc = subprocess.run([NGINX, "-e", str(tmp_path / "error.log"), "-t", "-p", str(tmp_path), "-c",
                           str(tmp_path / "nginx.conf")], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.skipif(not pathlib.Path(NGINX).exists(), reason="no nginx binary")
@pytest.mark.parametrize("arm", ["cache_aware_tight", "consistent_hash_header"])
def test_router_arms_pass_the_clients_header_through(tmp_path, arm):
    opts = _opts(tmp_path)
    conf = router_ab.render_nginx(opts, arm, opts.front_port, tmp_path).read_text()
    assert re.findall(r"^\s*server (\S+) ", conf, flags=re.M) == ["127.0.0.1:18710"]
    assert "X-Session-Id" not in conf and "$prefix_key" not in conf and "hash " not in conf


@pytest.mark.skipif(not pathlib.Path(HAPROXY).exists(), reason="no haproxy binary (scripts/setup.sh installs it)")
def test_haproxy_bounded_config_passes_haproxy_c(tmp_path):
    opts = _opts(tmp_path)
    conf = router_ab.render_haproxy(opts, tmp_path).read_text()
    assert re.findall(r"^\s*server \S+ (\S+)", conf, flags=re.M) == ["127.0.0.1:18700", "127.0.0.1:18701"]
    assert "bind 127.0.0.1:18710" in conf  # the router's port: nginx's router mode forwards there
    assert "balance hash var(txn.key)" in conf and "hash-type consistent" in conf
    assert "hash-balance-factor 125" in conf and "req.body,bytes(0,512)" in conf
    proc = subprocess.run([HAPROXY, "-c", "-f", str(tmp_path / "haproxy.cfg")], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_haproxy_balance_factor_must_exceed_100(tmp_path, capsys):
    with pytest.raises(SystemExit):
        router_ab.parse(["--model", str(tmp_path), "--out", str(tmp_path), "--haproxy-balance-factor", "100"])
    assert "--haproxy-balance-factor 100: use a percentage above 100" in capsys.readouterr().err


@pytest.fixture()
def haproxy_front(tmp_path, worker_id):
    """start(factor): HAProxy of the haproxy_bounded arm (that balance factor) before two TEST STAND-INs for vLLM
    (the nginx scenario's extensions/molecule/nginx/files/standin_upstream.py, named a and b)."""
    # Ports of this pytest-xdist worker's own: two of these tests at once on one set of ports shared HAProxy's port
    # (it binds with SO_REUSEPORT) and the stand-ins, so one test's requests counted in the other's load (ci41).
    base = 18760 + 100 * (int(worker_id[2:]) if worker_id.startswith("gw") else 0)
    opts = router_ab.parse(["--model", str(tmp_path), "--out", str(tmp_path), "--port-base", str(base)])
    procs = []

    def start(factor):
        for name, port in zip("ab", opts.engine_ports):
            proc = router_ab.spawn([sys.executable, str(STANDIN), "--port", str(port), "--name", name],
                                   tmp_path / ("standin-%s.log" % name))
            procs.append(proc)
            router_ab.wait_http("http://127.0.0.1:%d/health" % port, 20, proc, "stand-in " + name)
        opts.haproxy_balance_factor = factor  # 0 turns the bound off: the control below
        cfg = router_ab.render_haproxy(opts, tmp_path)
        proc = router_ab.spawn([HAPROXY, "-db", "-f", str(cfg)], tmp_path / "haproxy.log")
        procs.append(proc)
        router_ab.wait_http("http://127.0.0.1:%d/gpufleet/haproxy-health" % opts.router_port, 20, proc, "haproxy")
        return "http://127.0.0.1:%d/v1/completions" % opts.router_port

    yield start
    for proc in reversed(procs):
        router_ab.stop(proc)


def _send(url, prompt, hold, session=None):
    """The stand-in that answered; `hold` seconds in flight (a stream of two events) when above 0."""
    body = {"model": "m", "prompt": prompt}
    if hold:
        body.update(stream=True, events=2, interval=hold / 2.0)
    headers = {"Content-Type": "application/json"}
    if session:
        headers["X-Session-Id"] = session
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
    with urllib.request.urlopen(request, timeout=30) as response:
        return re.search(r'"instance": "(\w+)"', response.read().decode()).group(1)


def _wait_idle(url):
    """Until HAProxy holds no request on either engine (its stats page, scur): the engine that answered may still
    count the finished request for a moment, and its bound (hash-balance-factor) counts requests in flight."""
    stats = re.sub(r":(\d+)/.*", lambda m: ":%d/stats;csv" % (int(m.group(1)) + 1), url)
    deadline = time.time() + 10
    while True:
        with urllib.request.urlopen(stats, timeout=5) as response:
            rows = [line.split(",") for line in response.read().decode().splitlines() if line.startswith("engines,e")]
        if rows and all(row[4] == "0" for row in rows):
            return
        assert time.time() < deadline, ("HAProxy still holds requests after 10 s (or its stats page lists no "
                                        "engine)", rows)
        time.sleep(0.02)


def _shared_head_split(url):
    """96 requests with the same first 600 characters (a shared system prompt), 32 in flight: requests per upstream."""
    head = "system " * 100
    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        served = list(pool.map(lambda i: _send(url, head + "document %d" % i, 0.2), range(96)))
    return sorted(collections.Counter(served).values())


@pytest.mark.skipif(not pathlib.Path(HAPROXY).exists(), reason="no haproxy binary (scripts/setup.sh installs it)")
def test_haproxy_bounded_spreads_a_shared_head_within_the_bound(haproxy_front):
    counts = _shared_head_split(haproxy_front(125))
    # 32 in flight, 16 on average: at most 1.25 x 16 = 20 on one upstream, 62.5 % of the requests.
    assert sum(counts) == 96 and counts[-1] / 96.0 <= 0.65, counts


@pytest.mark.skipif(not pathlib.Path(HAPROXY).exists(), reason="no haproxy binary (scripts/setup.sh installs it)")
def test_without_the_bound_a_shared_head_goes_to_one_upstream(haproxy_front):
    """The control: the same hash without hash-balance-factor sends every request to one upstream."""
    assert _shared_head_split(haproxy_front(0)) == [96]


@pytest.mark.skipif(not pathlib.Path(HAPROXY).exists(), reason="no haproxy binary (scripts/setup.sh installs it)")
def test_haproxy_bounded_keeps_each_session_on_one_upstream(haproxy_front):
    """Below the bound the header decides: every turn of a session on one upstream, the sessions on both."""
    url = haproxy_front(125)
    head = "system " * 100
    by_session = {}
    for n in range(16):
        for turn in range(4):
            _wait_idle(url)  # one request at a time, each below the bound: the header alone decides
            by_session.setdefault("s%d" % n, set()).add(_send(url, head + "turn %d" % turn, 0, "s%d" % n))
    assert all(len(served) == 1 for served in by_session.values()), by_session
    assert len(set().union(*by_session.values())) == 2, by_session
