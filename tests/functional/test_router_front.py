# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""nginx in router mode (nginx_upstream_router): the router is the only primary upstream (the host's instances are
its backups: test_router_restart_front.py), the allow-list is unchanged
(the router's admin routes and metrics are answered by nginx itself), and a public router address is refused.
Rendered and checked with Ansible's own templating (test_nginx_template's helpers); the Molecule scenario
vllm_serve sends the admin routes through a real nginx in front of a real router."""

import pytest

from test_nginx_template import _locations, render, servers, validate_failures

ROUTER = "127.0.0.1:30000"


def test_router_is_the_only_primary_upstream_and_the_allow_list_is_unchanged():
    conf = render(nginx_upstream_router=ROUTER)
    assert servers(conf)[0] == (ROUTER, "max_fails=3 fail_timeout=30s")
    assert servers(conf)[1:] and all(options.endswith(" backup") for _address, options in servers(conf)[1:])
    assert "least_conn" not in conf
    locations = _locations(conf)
    assert sorted(k for k in locations if k.startswith("= /v1")) == sorted(
        "= " + p for p in ["/v1/models", "/v1/completions", "/v1/chat/completions", "/v1/embeddings", "/v1/responses"])
    for admin in ("/add_worker", "/remove_worker", "/list_workers", "/workers", "/get_loads", "/flush_cache"):
        assert admin not in conf
    assert "return 404" in locations["/"] and "proxy_pass" not in locations["/"]


def test_router_mode_needs_no_instances():
    assert validate_failures(nginx_upstream_router=ROUTER, nginx_instances=[]) == []


@pytest.mark.parametrize("value, ok", [
    ("127.0.0.1:30000", True), ("10.1.2.3:30000", True), ("192.168.0.9:8", True), ("172.20.0.1:30000", True),
    ("[::1]:30000", True), ("[fd00::5]:30000", True),
    ("0.0.0.0:30000", False), ("8.8.8.8:30000", False), ("172.32.0.1:30000", False), ("router:30000", False),
    ("127.0.0.1", False), ("127.0.0.1:30000; include /x", False),
])
def test_router_address_must_be_private(value, ok):
    failed = validate_failures(nginx_upstream_router=value)
    assert ("Check the router upstream (nginx_upstream_router) is not public" not in failed) is ok, failed
