# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""tests/gpu/router_ab.py's fronts: the collection's nginx template rendered for each arm, accepted by a real
`nginx -t` (Debian's nginx on this machine), with the balancing the arm says. The whole A/B runs end to end
on the CPU engine (command in tests/gpu/README.md)."""
import importlib.util
import pathlib
import re
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
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
