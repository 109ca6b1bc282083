# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The router's worker list, from the fleet's planned instances (pure logic, no Ansible import).

A worker is one vLLM API server: every instance of ``vllm_served_instances`` on every host of the
router's ``router_workers_from`` group, heads only (a headless member of a multi-host group serves no
API; the vllm role leaves it out of ``vllm_served_instances`` already, and an entry marked
``headless: true`` is skipped here too). The URL is the one the router host can reach:

- the instance runs on the router's own host: loopback (``127.0.0.1``, or the address it binds);
- another host: ``router_worker_address`` of that host, else its ``ansible_host``, else its name. An
  instance bound to loopback on another host cannot be reached: refused with the fix.

The drained set (``drained``): worker URLs the rollout took out; ``live_workers`` leaves them out, so a
router that restarts comes back with the membership the rollout set, not the full list.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import instance as instance_record

POLICIES = ("random", "round_robin", "cache_aware", "kv_aware", "power_of_two", "consistent_hash",
            "sticky_least_loaded")
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
_ANY = ("0.0.0.0", "", "::")


class RouterWorkersError(UserError, ValueError):
    """Bad input, with the variable to fix in the message."""


def served_model_name(instance):
    """The name clients send as ``model`` (vLLM: the first --served-model-name, else the model tag)."""
    return instance_record.record(instance)["served_model_name"]


def _url_host(address):
    return "[%s]" % address if ":" in address and not address.startswith("[") else address


def instance_url(instance, host, router_host, address=None):
    """The URL the router on ``router_host`` uses for ``instance`` of ``host``."""
    rec = instance_record.record(instance)
    port = rec["port"]
    if port is None or not re.match(r"^[0-9]{1,5}\Z", str(port)) or not 1 <= int(port) <= 65535:
        raise RouterWorkersError("vllm_served_instances of %s: instance %r has no port 1-65535 (got %r)"
                                 % (host, instance.get("name"), port))
    listen = instance_record.listen_address(rec)
    if host == router_host:
        connect = "127.0.0.1" if listen in _ANY or listen == "localhost" else listen
        if listen == "::":
            connect = "::1"
    else:
        if listen in _LOOPBACK or listen.startswith("127."):
            raise RouterWorkersError(
                "instance %s on %s listens on %s only, so the router on %s cannot reach it: bind the instance to "
                "an address the router host reaches (vllm_profile host / --host), or run the router on %s"
                % (instance.get("name"), host, listen, router_host, host))
        connect = address or (listen if listen not in _ANY else host)
    return "http://%s:%d" % (_url_host(connect), int(port))


def fleet_workers(hosts, router_host):
    """{model: [url, ...]} over ``hosts``: a list of {name, instances, address} (address may be None).

    Order: the group's host order, then the plan's instance order (stable, so a re-render is identical).
    """
    out = {}
    seen = {}
    for entry in hosts:
        host = entry["name"]
        for inst in entry.get("instances") or []:
            if inst.get("headless"):
                continue
            url = instance_url(inst, host, router_host, entry.get("address"))
            if url in seen:
                raise RouterWorkersError("worker URL %s twice (instances %s and %s of %s): give each instance its own "
                                         "port, or each host its own router_worker_address"
                                         % (url, seen[url], inst.get("name"), host))
            seen[url] = inst.get("name")
            out.setdefault(served_model_name(inst), []).append(url)
    return out


def select_model(workers, model, group):
    """The worker list of ``model`` ("" = the only model served in ``group``), or an error naming the fix."""
    if model:
        urls = workers.get(model) or []
        if not urls:
            raise RouterWorkersError(
                "router_model is %r, but no host of group %r serves it (models there: %s): the router would have no "
                "worker. Fix router_model or router_workers_from." % (model, group, ", ".join(sorted(workers)) or "none"))
        return model, urls
    if not workers:
        raise RouterWorkersError(
            "no instance to route to: the hosts of router_workers_from (%r) serve nothing (vllm_served_instances is "
            "empty or missing there; run the vllm role on them in the same play, before the router role)" % group)
    if len(workers) > 1:
        raise RouterWorkersError(
            "group %r serves several models (%s): one router serves one model here, set router_model"
            % (group, ", ".join(sorted(workers))))
    name = next(iter(workers))
    return name, workers[name]


def drained_name(url):
    """The file name of a worker in the drained folder (one file per worker: no read-modify-write races)."""
    return re.sub(r"[^A-Za-z0-9.-]", "_", url)


def live_workers(urls, drained):
    """``urls`` without the drained ones (order kept)."""
    drained = set(drained)
    return [u for u in urls if u not in drained]
