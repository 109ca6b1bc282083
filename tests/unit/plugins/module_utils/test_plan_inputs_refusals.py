# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 27 LOW: values vllm_plan replaced by a default without a word (``nodes: 0`` planned one host,
``master_port: 0`` became 29501) or passed on as a flag (``master_addr: --headless``)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan.plan_inputs import refuse_silent_defaults, validate_options


@pytest.mark.parametrize("options, option, says", [
    ({"nodes": 0}, "nodes", "nodes is 0, which used to become 1 without a word"),
    ({"master_port": 0}, "master_port", "master_port is 0, which used to become 29501 without a word"),
    ({"master_port": ""}, "master_port", "master_port is ''"),
    ({"master_addr": "--headless"}, "master_addr", "master_addr '--headless' is not a host name or an IP address"),
    ({"master_addr": "-x"}, "master_addr", "is read by vllm serve as a flag"),
    ({"master_addr": "10.0.0.1 --headless"}, "master_addr", "is not a host name"),
    ({"host": "--api-key=x"}, "host", "host '--api-key=x' is not a host name"),
])
def test_refused_by_name(options, option, says):
    with pytest.raises(UserError) as err:
        validate_options(dict(options))
    assert err.value.details.get("option") == option and says in err.value.message


@pytest.mark.parametrize("options", [
    {}, {"nodes": 2}, {"nodes": None}, {"master_port": 29501}, {"master_addr": "10.0.0.1"},
    {"master_addr": "head-01.fabric.example"}, {"master_addr": "fd00::1"}, {"host": "127.0.0.1"}, {"host": "::"},
    {"host": "localhost"}, {"host": "0.0.0.0"},
])
def test_accepted(options):
    refuse_silent_defaults(options)


@pytest.mark.parametrize("value, expected", [
    ({0: 256, 1: 128}, {0: 256, 1: 128}),
    ({"0": "274877906944"}, {0: 274877906944}),      # as YAML, JSON and the facts give them
    ({}, None),
    (None, None),
])
def test_numa_memory_is_read(value, expected):
    assert validate_options({"host_numa_memory_bytes": value})["host_numa_memory_bytes"] == expected


@pytest.mark.parametrize("value, says", [
    ([256], "host_numa_memory_bytes must map NUMA node numbers to bytes"),
    ({"node0": 256}, "host_numa_memory_bytes (a node number) must be an integer"),
    ({0: 0}, "host_numa_memory_bytes[0] must be >= 1"),
    ({0: "lots"}, "host_numa_memory_bytes[0] must be an integer"),
])
def test_numa_memory_refused(value, says):
    with pytest.raises(UserError) as err:
        validate_options({"host_numa_memory_bytes": value})
    assert says in err.value.message
