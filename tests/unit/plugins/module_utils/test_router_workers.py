# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.vllm.plugins.filter.router_workers import FilterModule, router_workers
from ansible_collections.gpufleet.vllm.plugins.module_utils.router.workers import (
    RouterWorkersError,
    drained_name,
    fleet_workers,
    instance_url,
    live_workers,
    select_model,
    served_model_name,
)


def inst(port, model="m", host=None, name=None, headless=False):
    argv = ["vllm", "serve", "/srv/models/x", "--served-model-name", model, "--port", str(port)]
    if host is not None:
        argv += ["--host", host]
    out = dict(name=name or "%s-%d" % (model, port), port=port, argv=argv)
    if headless:
        out["headless"] = True
    return out


@pytest.mark.parametrize("instance, host, router, address, url", [
    (inst(8000), "a", "a", None, "http://127.0.0.1:8000"),              # own host, bound to all: loopback
    (inst(8000, host="127.0.0.1"), "a", "a", None, "http://127.0.0.1:8000"),
    (inst(8000, host="10.0.0.5"), "a", "a", None, "http://10.0.0.5:8000"),
    (inst(8000, host="::"), "a", "a", None, "http://[::1]:8000"),
    (inst(8001), "b", "a", "10.0.0.12", "http://10.0.0.12:8001"),      # another host: its address
    (inst(8001), "b", "a", None, "http://b:8001"),                      # no address: its inventory name
    (inst(8001, host="10.0.0.12"), "b", "a", None, "http://10.0.0.12:8001"),
    (inst(8001), "b", "a", "fd00::12", "http://[fd00::12]:8001"),
])
def test_instance_url(instance, host, router, address, url):
    assert instance_url(instance, host, router, address) == url


@pytest.mark.parametrize("instance, name", [
    (inst(1, model="qwen"), "qwen"),
    (dict(name="x", port=1, argv=["vllm", "serve", "/m", "--served-model-name=q2"]), "q2"),
    (dict(name="x", port=1, argv=["vllm", "serve", "/srv/m"]), "/srv/m"),
])
def test_served_model_name(instance, name):
    assert served_model_name(instance) == name


def test_fleet_heads_only_every_instance_in_order():
    hosts = [{"name": "a", "instances": [inst(8000), inst(8001)]},
             {"name": "b", "instances": [inst(8000), inst(8002, headless=True)], "address": "10.0.0.2"},
             {"name": "c", "instances": []}]
    assert fleet_workers(hosts, "a") == {"m": ["http://127.0.0.1:8000", "http://127.0.0.1:8001", "http://10.0.0.2:8000"]}


@pytest.mark.parametrize("hosts, router, message", [
    ([{"name": "b", "instances": [inst(8000, host="127.0.0.1")]}], "a", "listens on 127.0.0.1 only"),
    ([{"name": "a", "instances": [inst(8000), inst(8000, name="dup")]}], "a", "worker URL http://127.0.0.1:8000 twice"),
    ([{"name": "a", "instances": [dict(name="x", argv=["vllm", "serve", "/m"])]}], "a", "has no port"),
])
def test_fleet_refusals(hosts, router, message):
    with pytest.raises(RouterWorkersError, match=message):
        fleet_workers(hosts, router)


@pytest.mark.parametrize("workers, model, result, message", [
    ({"m": ["u1"]}, "", ("m", ["u1"]), None),
    ({"m": ["u1"], "n": ["u2"]}, "n", ("n", ["u2"]), None),
    ({"m": ["u1"], "n": ["u2"]}, "", None, "serves several models"),
    ({}, "", None, "no instance to route to"),
    ({"m": ["u1"]}, "q", None, "router_model is 'q', but no host"),
])
def test_select_model(workers, model, result, message):
    if message:
        with pytest.raises(RouterWorkersError, match=message):
            select_model(workers, model, "vllm_hosts")
    else:
        assert select_model(workers, model, "vllm_hosts") == result


def test_drained_set():
    urls = ["http://127.0.0.1:8000", "http://127.0.0.1:8001"]
    assert drained_name(urls[1]) == "http___127.0.0.1_8001"
    assert live_workers(urls, [urls[1]]) == urls[:1]
    assert live_workers(urls, []) == urls


def test_filter_never_raises():
    assert FilterModule().filters()["router_workers"] is router_workers
    good = router_workers([{"name": "a", "instances": [inst(8000)]}], "a")
    assert good == {"model": "m", "urls": ["http://127.0.0.1:8000"], "models": {"m": ["http://127.0.0.1:8000"]}, "error": ""}
    bad = router_workers([{"name": "a", "instances": []}], "a", "", "vllm_hosts")
    assert bad["urls"] == [] and "no instance to route to" in bad["error"]
    several = router_workers([{"name": "a", "instances": [inst(8000), inst(8001, model="n")]}], "a")
    assert several["models"] == {"m": ["http://127.0.0.1:8000"], "n": ["http://127.0.0.1:8001"]}
    assert "several models" in several["error"]
