# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The filter instance_record as roles/monitoring/tasks/targets.yml calls it: the address and port a scrape target
listens on come from the record, so ``--host=ADDR``, a repeated ``--host`` (the last wins) and an abbreviation are
read as vLLM reads them (the template's own ``argv.index('--host')`` read the first and missed the other two)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.vllm.plugins.filter.instance_record import FilterModule, instance_record


@pytest.mark.parametrize("argv, host, port", [
    (["vllm", "serve", "/m", "--host", "10.0.0.5", "--port", "8001"], "10.0.0.5", 8001),
    (["vllm", "serve", "/m", "--host=10.0.0.5", "--port=8002"], "10.0.0.5", 8002),
    (["vllm", "serve", "/m", "--host", "127.0.0.1", "--host", "0.0.0.0"], "0.0.0.0", 8000),
    (["vllm", "serve", "/m", "--hos", "::1"], "::1", 8000),
    (["vllm", "serve", "/m"], None, 8000),
])
def test_the_scrape_target_reads_host_and_port_as_vllm_does(argv, host, port):
    got = instance_record({"name": "m-0", "port": 8000, "argv": argv})
    assert (got["host"], got["port"]) == (host, port)


def test_refuses_what_is_not_one_instance():
    with pytest.raises(AnsibleFilterError, match="must be one instance"):
        instance_record([{"name": "m-0"}])
    assert FilterModule().filters()["instance_record"] is instance_record


@pytest.mark.parametrize("entry, address, port", [
    ({"argv": ["vllm", "serve", "/m"]}, "0.0.0.0", 8000),                        # neither the argv nor a port key
    ({"port": 8005, "argv": ["vllm", "serve", "/m"]}, "0.0.0.0", 8005),          # the entry's key
    ({"port": 8005, "argv": ["vllm", "serve", "/m", "--port", "8009", "--host", "127.0.0.1"]}, "127.0.0.1", 8009),
])
def test_where_the_engine_binds_has_vllms_defaults_filled_in(entry, address, port):
    got = instance_record(dict(entry, name="m-0"))
    assert (got["listen_address"], got["listen_port"]) == (address, port)


def test_the_roles_default_port_is_vllms():
    # roles/vllm/vars/main.yml's _vllm_default_port (the plan check of an entry without a port key) is vLLM's
    # own default, 8000 (vllm/entrypoints/openai/cli_args.py), the one the record fills in.
    import os
    import yaml
    from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import instance
    path = os.path.join(os.path.dirname(__file__), *([os.pardir] * 4), "roles", "vllm", "vars", "main.yml")
    with open(path) as handle:
        assert yaml.safe_load(handle)["_vllm_default_port"] == instance.DEFAULT_PORT == 8000
