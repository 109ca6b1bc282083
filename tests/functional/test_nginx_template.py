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
    variables = _variables(ansible_managed="Ansible managed: test", **overrides)
    templar = Templar(loader=DataLoader(), variables=variables)
    return templar.template(trust_as_template((ROLE / "templates" / "nginx.conf.j2").read_text()))


def servers(conf, upstream="vllm"):
    """The server lines of one upstream block (the main one by default; `vllm_session` is session affinity's)."""
    block = re.search(r"^\s*upstream %s \{(.*?)^\s*\}" % re.escape(upstream), conf, flags=re.M | re.S)
    return re.findall(r"^\s*server (\S+) (.*);$", block.group(1), flags=re.M) if block else []


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
    # session affinity (nginx_session_header X-Session-Id) on by default: the same servers, hashed on the header
    assert servers(conf, "vllm_session") == servers(conf)
    assert "hash $http_x_session_id consistent;" in conf and "client_body_buffer_size 16k;" in conf
    assert 'map $http_x_session_id $gpufleet_upstream {\n        ""      vllm;\n        default vllm_session;' in conf
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
    for upstream in ("vllm", "vllm_session"):  # drained from both: with and without a session header
        assert [addr for addr, opts in servers(conf, upstream) if opts.endswith(" down")] == down
    assert "proxy_pass http://$gpufleet_upstream/v1/completions$is_args$args;" in conf


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
    variables = _variables(nginx_listen_address=address, nginx_upstream_api_key_set=key_set, nginx_allow_unauthenticated=allow)
    templar = Templar(loader=DataLoader(), variables=variables)
    task = _validate_task("Refuse to publish an unauthenticated API beyond this host")
    results = [templar.template(trust_as_template("{{ (%s) | bool }}" % cond)) for cond in task["ansible.builtin.assert"]["that"]]
    assert all(results) is ok


# ---- issue 27 HIGH 1: the front forwards an allow-list only ----------------------------------------
# vLLM's AuthenticationMiddleware checks the key only when the path starts with /v1
# (vllm/entrypoints/openai/server_utils.py: `if url_path.startswith("/v1") and not self.verify_token(...)`),
# so /invocations, /tokenize, /pause ... answered through `location /` without a key (issue 27).

def _locations(conf):
    return dict(re.findall(r"^\s*location (= \S+|\^~ \S+|/) \{(.*?)\n\s*\}", conf, flags=re.M | re.S))


def test_only_the_allow_list_reaches_the_instances():
    conf = render()
    locations = _locations(conf)
    forwarded = sorted(k[2:] for k, body in locations.items() if "proxy_pass" in body)
    assert forwarded == sorted(["/v1/models", "/v1/completions", "/v1/chat/completions", "/v1/embeddings", "/v1/responses"])
    for path in forwarded:
        # the upstream gets nginx's normalized path, not the client's spelling (/v1/x/../../invocations)
        assert "proxy_pass http://$gpufleet_upstream%s$is_args$args;" % path in locations["= " + path]
    catch_all = locations["/"]
    assert "proxy_pass" not in catch_all and "return 404" in catch_all
    assert "add_header X-Gpufleet-Front denied always;" in catch_all
    assert conf.count("proxy_pass") == len(forwarded)
    assert conf.count("{") == conf.count("}")


def test_drained_host_refuses_every_forwarded_path():
    conf = render(nginx_host_drained=True, nginx_api_paths=["/v1/models", "/v1/completions"])
    locations = _locations(conf)
    for path in ("/v1/models", "/v1/completions"):
        assert "return 503" in locations["= " + path] and "Retry-After 30" in locations["= " + path]
    assert "return 404" in locations["/"]


def test_ipv6_loopback_renders_a_listen_line_nginx_accepts():
    """issue 27 LOW: `listen ::1:80;` is refused by nginx -t; `[::1]:80` is the form it takes."""
    assert "listen [::1]:80;" in render(nginx_listen_address="::1")
    assert "listen [::1]:80;" in render(nginx_listen_address="[::1]")
    assert "listen 80;" in render(nginx_listen_address="")


def _variables(**overrides):
    variables = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    variables.update((k, trust_as_template(v) if isinstance(v, str) else v)
                     for k, v in yaml.safe_load((ROLE / "vars" / "main.yml").read_text()).items())
    variables.update(inventory_hostname="gpu-01", nginx_instances=INSTANCES)
    variables.update(overrides)
    return variables


def validate_failures(**overrides):
    """The names of the validate.yml asserts that fail for these variables (Ansible's own templating)."""
    templar = Templar(loader=DataLoader(), variables=_variables(**overrides))
    failed = []
    for task in yaml.safe_load((ROLE / "tasks" / "validate.yml").read_text()):
        check = task.get("ansible.builtin.assert")
        if not check or task.get("when") == "nginx_tls_enabled | bool" and not overrides.get("nginx_tls_enabled"):
            continue
        task_vars = {k: trust_as_template(v) for k, v in (task.get("vars") or {}).items()}
        local = Templar(loader=DataLoader(), variables=dict(templar.available_variables, **task_vars))
        conditions = check["that"] if isinstance(check["that"], list) else [check["that"]]
        if not all(local.template(trust_as_template("{{ (%s) | bool }}" % c)) for c in conditions):
            failed.append(task["name"])
    return failed


def test_defaults_pass_validation():
    assert validate_failures() == []


VALUES = "Check every value that is written into nginx.conf (no line breaks, `;` or braces)"
PATHS = "Check the forwarded API paths (nginx_api_paths)"
NAMES = "Check the instance names and addresses (they are written into nginx.conf)"


@pytest.mark.parametrize("overrides, failing", [
    # the forwarded paths: only exact /v1/ paths, never vLLM's unauthenticated routes or admin ones
    ({"nginx_api_paths": ["/v1/models", "/invocations"]}, PATHS),
    ({"nginx_api_paths": ["/tokenize"]}, PATHS),
    ({"nginx_api_paths": ["/"]}, PATHS),
    ({"nginx_api_paths": ["/v1"]}, PATHS),
    ({"nginx_api_paths": ["/v1/../invocations"]}, PATHS),
    ({"nginx_api_paths": ["/v1/models\n"]}, PATHS),
    ({"nginx_api_paths": ["/v1/models { return 200; } location /"]}, PATHS),
    ({"nginx_api_paths": ["/v1/load_lora_adapter"]}, PATHS),
    ({"nginx_api_paths": []}, PATHS),
    # listen values were checked by prefix (`is match('^127\.')`) and injected directives
    ({"nginx_listen_address": "127.0.0.1:80; include /etc/nginx/evil.conf; listen 0.0.0.0"}, VALUES),
    ({"nginx_listen_address": "127.0.0.1\n"}, VALUES),
    ({"nginx_listen_address": "gpu-01.example"}, VALUES),
    ({"nginx_server_name": "_;\n include /tmp/x.conf"}, VALUES),
    ({"nginx_server_name": "_\n"}, VALUES),
    ({"nginx_health_path": "/gpufleet/health { } location /invocations"}, VALUES),
    ({"nginx_proxy_read_timeout": "3600s;\nproxy_pass http://evil"}, VALUES),
    ({"nginx_proxy_read_timeout": "3600s\n"}, VALUES),
    ({"nginx_access_log": "/var/log/a.log;\ninclude /tmp/x"}, VALUES),
    ({"nginx_instances": [{"name": "a\n        server 10.9.9.9:80", "port": 8101}]}, NAMES),
    ({"nginx_instances": [{"name": "a", "port": 8101, "host": "10.0.0.7:9 backup; server 1.2.3.4"}]}, NAMES),
])
def test_values_that_would_inject_directives_are_refused(overrides, failing):
    assert failing in validate_failures(**overrides)


@pytest.mark.parametrize("overrides", [
    {"nginx_listen_address": "::1"},
    {"nginx_listen_address": "[::1]"},
    {"nginx_listen_address": "10.0.0.5", "nginx_upstream_api_key_set": True},
    {"nginx_listen_address": "", "nginx_upstream_api_key_set": True},
    {"nginx_listen_address": "fd00::5", "nginx_upstream_api_key_set": True},
    {"nginx_api_paths": ["/v1/models", "/v1/audio/transcriptions", "/v1/rerank"]},
    {"nginx_server_name": "api.example.com www.example.com"},
    {"nginx_instances": [{"name": "inst-a", "port": 8101, "host": "[fd00::7]"}]},
])
def test_good_values_pass(overrides):
    assert validate_failures(**overrides) == []


@pytest.mark.parametrize("address, loopback", [
    ("127.0.0.1", True), ("127.0.1.1", True), ("::1", True), ("localhost", True),
    ("127.0.0.1:80; include /x", False), ("127.evil", False), ("10.0.0.5", False), ("", False),
])
def test_loopback_is_a_whole_address(address, loopback):
    templar = Templar(loader=DataLoader(), variables=_variables(nginx_listen_address=address))
    assert templar.template(trust_as_template("{{ _nginx_loopback | bool }}")) is loopback
