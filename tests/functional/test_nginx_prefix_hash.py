# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Why `nginx_balancing: prefix_hash` is gone, with the role's own validation and a real nginx (TEST STAND-INs for
vLLM behind it, extensions/molecule/nginx/files/standin_upstream.py).

It hashed the first 512 characters of the body: a shared system prompt sent every request to one engine (96 of 96
on an H200, issue 47; the shared-system-prompt shape of test_nginx_balance.py now splits 50/50), the documented
value was refused by the role's own validate.yml (issue 43 class 5), and it made nginx keep each whole body in
memory before vLLM checked the key (`proxy_request_buffering on` + `client_body_buffer_size 256m`)."""
import json
import os
import re
import subprocess
import sys
import time

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from test_nginx_balance import _send, _start, _stop
from test_nginx_front import NGINX
from test_nginx_template import _variables, validate_failures

pytestmark = pytest.mark.skipif(not os.path.exists(NGINX), reason="nginx is not installed")


@pytest.mark.parametrize("method", ["prefix_hash", "hash $request_body", "least_conn; include /x", "round_robin"])
def test_removed_or_unknown_methods_are_refused_by_the_role(method):
    assert "Check the balancing method (nginx_balancing)" in validate_failures(nginx_balancing=method)


def test_the_refusal_says_why_prefix_hash_is_gone():
    templar = Templar(loader=DataLoader(), variables=_variables(nginx_balancing="prefix_hash"))
    message = templar.template(trust_as_template("{{ _nginx_balancing_refusal }}"))
    assert message.startswith("nginx_balancing: prefix_hash was removed: it hashed the first 512 characters")
    assert "nginx_session_header" in message and '["", "least_conn", "ip_hash", "random", "random two least_conn"]' in message
    other = Templar(loader=DataLoader(), variables=_variables(nginx_balancing="round_robin"))
    assert other.template(trust_as_template("{{ _nginx_balancing_refusal }}")).startswith(
        'nginx_balancing is "round_robin": use one of')


def _read(path):
    with open(path) as handle:
        return handle.read()


def _worker_peak_rss_kib(master):
    """The peak resident memory (VmHWM) of nginx's worker processes, summed."""
    children = _read("/proc/%d/task/%d/children" % (master.pid, master.pid)).split()
    return sum(int(re.search(r"VmHWM:\s+(\d+) kB", _read("/proc/%s/status" % pid)).group(1)) for pid in children)


def _send_big(url, size_mib):
    prompt = "x" * (size_mib * 1024 * 1024)
    return _send(url, prompt)


@pytest.mark.parametrize("planted, bound_mib", [
    # measured here (nginx 1.22.1, one worker): +0.5 MiB with the role's config, +40.3 MiB with the planted one
    (None, 8),  # the role's config: the body streams through, nginx's peak RSS barely moves
    # planted: what prefix_hash rendered (the whole body kept in memory before proxying): the check catches it
    (lambda text: text.replace("proxy_request_buffering off;\n        client_body_buffer_size 16k;",
                               "proxy_request_buffering on;\n        client_body_buffer_size 256m;"), None),
])
def test_a_40_mib_body_is_not_held_in_nginx_memory(tmp_path, planted, bound_mib):
    url, conf, procs = _start(tmp_path, conf_text=planted, nginx_worker_processes="1")
    try:
        time.sleep(0.2)
        before = _worker_peak_rss_kib(procs[0])
        assert _send_big(url, 40) in ("a", "b")
        grown_mib = (_worker_peak_rss_kib(procs[0]) - before) / 1024.0
    finally:
        _stop(procs)
    if bound_mib is None:
        assert "proxy_request_buffering on;" in conf and grown_mib > 35, grown_mib
    else:
        assert "proxy_request_buffering off;" in conf and grown_mib < bound_mib, grown_mib


ROLE_CHECK = """
- hosts: localhost
  connection: local
  gather_facts: false
  vars:
    nginx_instances: [{name: a, port: 8101}, {name: b, port: 8102}]
  tasks:
    - name: The role's own argument spec check (what Ansible runs before the role's main entry point)
      ansible.builtin.validate_argument_spec:
        argument_spec: "{{ (lookup('ansible.builtin.file', spec) | from_yaml).argument_specs.main.options }}"
        provided_arguments: {nginx_balancing: "{{ nginx_balancing }}"}
      vars:
        spec: "%(spec)s"
    - name: The role's own validation (tasks/validate.yml, the first step of its main and drain entry points)
      ansible.builtin.include_role:
        name: gpufleet.vllm.nginx
        tasks_from: validate
"""


def _role_check(venv_bin, collections, tmp_path, methods):
    """ansible-playbook: the installed role's argument spec and validate.yml, one play per method."""
    spec = collections / "ansible_collections" / "gpufleet" / "vllm" / "roles" / "nginx" / "meta" / "argument_specs.yml"
    play = ROLE_CHECK % dict(spec=spec)
    text = "".join(play.replace("  vars:\n", "  vars:\n    nginx_balancing: %s\n" % json.dumps(m), 1) for m in methods)
    (tmp_path / "check.yml").write_text(text)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections), ANSIBLE_NOCOLOR="1")
    return subprocess.run([str(venv_bin / "ansible-playbook"), "-i", "localhost,", str(tmp_path / "check.yml"),
                           "-e", "ansible_python_interpreter=%s" % sys.executable], capture_output=True, text=True,
                          env=env, check=False, timeout=300)


def test_every_documented_method_passes_the_installed_roles_checks(venv_bin, installed_collection, tmp_path):
    proc = _role_check(venv_bin, installed_collection, tmp_path, ["", "least_conn", "ip_hash", "random",
                                                                  "random two least_conn"])
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert out.count("Check the balancing method (nginx_balancing)") == 5 and "failed=0" in out


def test_prefix_hash_is_refused_by_the_installed_role_saying_why(venv_bin, installed_collection, tmp_path):
    proc = _role_check(venv_bin, installed_collection, tmp_path, ["prefix_hash"])
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Traceback" not in out, out[-3000:]
    assert "nginx_balancing: prefix_hash was removed: it hashed the first 512 characters" in out, out[-3000:]
