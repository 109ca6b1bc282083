# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Render roles/nginx/templates/nginx.conf.j2 with Ansible's own templating for the variable
combinations the role supports, and check the directives that matter (the Molecule scenario
`nginx` then runs the result through a real `nginx -t` and real traffic)."""
import pathlib
import re

import pytest
import yaml

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROLE = pathlib.Path(__file__).resolve().parents[2] / "roles" / "nginx"
INSTANCES = [{"name": "inst-a", "port": 8101}, {"name": "inst-b", "port": 8102, "host": "10.0.0.7", "gpus": [0, 1]}]


def render(**overrides):
    variables = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    variables.update(inventory_hostname="gpu-01", ansible_managed="Ansible managed: test", nginx_instances=INSTANCES)
    variables.update(overrides)
    templar = Templar(loader=DataLoader(), variables=variables)
    return templar.template(trust_as_template((ROLE / "templates" / "nginx.conf.j2").read_text()))


def servers(conf):
    return re.findall(r"^\s*server (\S+) (.*);$", conf, flags=re.M)


def test_defaults_are_streaming_safe():
    conf = render()
    assert conf.startswith("#\n# Ansible managed: test\n#\n")
    assert conf.count("{") == conf.count("}")
    for directive in ("proxy_buffering off;", "proxy_request_buffering off;", "proxy_http_version 1.1;",
                      'proxy_set_header Connection "";', "proxy_read_timeout 3600s;", "proxy_send_timeout 3600s;",
                      "keepalive 32;", "least_conn;", "gzip off;", "listen 127.0.0.1:80;"):
        assert directive in conf, directive
    assert servers(conf) == [("127.0.0.1:8101", "max_fails=3 fail_timeout=30s"),
                             ("10.0.0.7:8102", "max_fails=3 fail_timeout=30s")]
    assert 'return 200 "ok\\n";' in conf
    assert "ssl" not in conf
    assert "worker_shutdown_timeout" not in conf
    assert "sites-enabled" not in conf


@pytest.mark.parametrize("drained, down", [
    (["inst-b"], ["10.0.0.7:8102"]),
    (["8101"], ["127.0.0.1:8101"]),          # by port, as a string
    ([8101, "inst-b"], ["127.0.0.1:8101", "10.0.0.7:8102"]),
    ([], []),
])
def test_drained_instances_are_marked_down(drained, down):
    conf = render(nginx_drained_instances=drained)
    assert [addr for addr, opts in servers(conf) if opts.endswith(" down")] == down
    assert "proxy_pass http://vllm;" in conf


def test_host_drain_refuses_new_requests_and_fails_health():
    conf = render(nginx_host_drained=True)
    assert 'return 503 "draining\\n";' in conf
    assert "add_header Retry-After 30 always;" in conf
    assert "proxy_pass" not in conf
    assert conf.count("{") == conf.count("}")


def test_tls_and_listen_address():
    conf = render(nginx_tls_enabled=True, nginx_listen_port=443, nginx_listen_address="10.0.0.1",
                  nginx_tls_certificate="/etc/ssl/a.crt", nginx_tls_certificate_key="/etc/ssl/a.key")
    assert "listen 10.0.0.1:443 ssl;" in conf
    assert "ssl_certificate /etc/ssl/a.crt;" in conf
    assert "ssl_certificate_key /etc/ssl/a.key;" in conf
    assert "ssl_protocols TLSv1.2 TLSv1.3;" in conf


def test_round_robin_shutdown_timeout_and_system_sites():
    conf = render(nginx_balancing="", nginx_worker_shutdown_timeout="600s", nginx_include_system_sites=True)
    assert "least_conn" not in conf
    assert "worker_shutdown_timeout 600s;" in conf
    assert "include /etc/nginx/sites-enabled/*;" in conf
    assert conf.count("{") == conf.count("}")


def test_metrics_never_published_and_loopback_by_default():
    """Issue 15 item 6: round 1 listened on every address and proxied vLLM's open /metrics."""
    conf = render()
    assert "listen 127.0.0.1:80;" in conf
    block = re.search(r"location \^~ /metrics \{(.*?)\}", conf, flags=re.S)
    assert block and "return 404;" in block.group(1) and "proxy_pass" not in block.group(1)
    assert conf.index("location ^~ /metrics") < conf.index("location / {")


def _validate_task(name):
    tasks = yaml.safe_load((ROLE / "tasks" / "validate.yml").read_text())
    return next(t for t in tasks if t["name"] == name)


@pytest.mark.parametrize("address, key_set, allow, ok", [
    ("127.0.0.1", False, False, True),
    ("", False, False, False),            # all addresses, no API key: refused
    ("10.0.0.5", False, False, False),
    ("10.0.0.5", True, False, True),      # API key required by the instances
    ("", False, True, True),              # explicitly allowed
    ("::1", False, False, True),
])
def test_non_loopback_listen_needs_an_api_key(address, key_set, allow, ok):
    variables = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    variables.update((k, trust_as_template(v)) for k, v in yaml.safe_load((ROLE / "vars" / "main.yml").read_text()).items())
    variables.update(nginx_listen_address=address, nginx_upstream_api_key_set=key_set, nginx_allow_unauthenticated=allow,
                     inventory_hostname="gpu-01")
    templar = Templar(loader=DataLoader(), variables=variables)
    task = _validate_task("Refuse to publish an unauthenticated API beyond this host")
    results = [templar.template(trust_as_template("{{ (%s) | bool }}" % cond)) for cond in task["ansible.builtin.assert"]["that"]]
    assert all(results) is ok
