# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the benchmark sends its load: each planned instance's own port, and the front door (nginx),
read from the rendered nginx.conf (its ``listen`` and ``proxy_read_timeout``), with the /metrics of
the engines behind each. What the benchmark needs of an instance comes from its record (plan/instance.py):
the served model name, the model folder (the tokenizer), the port and ``max_model_len``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import re

from ansible_collections.gpufleet.vllm.plugins.module_utils.bench import slo, workloads
from ansible_collections.gpufleet.vllm.plugins.module_utils.bench.errors import BenchError
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import instance as instance_record

_LISTEN = re.compile(r"^\s*listen\s+([^;]+);", re.M)
_READ_TIMEOUT = re.compile(r"^\s*proxy_read_timeout\s+([^;]+);", re.M)


def instance_facts(instance):
    """{name, port, model, tokenizer, max_model_len} of one planned instance (vllm_served_instances entry)."""
    rec = instance_record.record(instance)
    if rec["model"] is None:
        raise BenchError("bench_instances entry %r has no `vllm serve <model> ...` argv: pass the vllm role's "
                         "vllm_served_instances (or the plan's instances)." % (instance.get("name"),))
    if rec["max_model_len"] is None or rec["max_model_len"] <= 0:
        raise BenchError("Instance %s has no numeric --max-model-len in its argv: the benchmark derives its "
                         "workloads from it; set it in the serving profile." % (instance.get("name"),))
    port = instance_record.DEFAULT_PORT if rec["port"] is None else rec["port"]
    return dict(name=instance["name"], port=int(port), tokenizer=rec["model"], model=rec["served_model_name"],
                max_model_len=rec["max_model_len"])


def front_door(conf_text):
    """The front door from a rendered nginx.conf: {url, proxy_read_timeout}; {} when there is none."""
    listens = _LISTEN.findall(conf_text or "")
    if not listens:
        return {}
    words = listens[0].split()
    where, ssl = words[0], "ssl" in words[1:]
    host, port = where.rpartition(":")[::2]
    if not port.isdigit():
        host, port = where, "443" if ssl else "80"
    host = host.strip("[]")
    if host in ("", "*", "0.0.0.0", "::"):
        host = "127.0.0.1"
    if ":" in host:
        host = "[%s]" % host
    timeouts = _READ_TIMEOUT.findall(conf_text)
    return dict(url="%s://%s:%s" % ("https" if ssl else "http", host, port),
                proxy_read_timeout=timeouts[0].strip() if timeouts else "60s")


def targets(instances, address, front_door_url):
    """The module's targets: one per instance (kind instance) and the front door over all of them."""
    facts = [instance_facts(i) for i in instances]
    if not facts:
        raise BenchError("No instance to benchmark on this host: bench_instances is empty (run the vllm role "
                         "first, or plan with playbooks/bench.yml).")
    out = []
    for f in facts:
        url = "http://%s:%d" % (address, f["port"])
        out.append(dict(name=f["name"], kind="instance", url=url, metrics_urls=[url + "/metrics"]))
    if front_door_url:
        out.insert(0, dict(name="front_door", kind="front_door", url=front_door_url.rstrip("/"),
                           metrics_urls=[t["metrics_urls"][0] for t in out]))
    return out


def plan_hash(instances):
    """12 hex digits of sha256 over the instances' argv (the plan the engines run)."""
    text = json.dumps([[str(a) for a in i.get("argv") or []] for i in instances], sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def setup(instances, nginx_conf="", raw_workloads=None, raw_slo=None, address="127.0.0.1", front_door_url=None):
    """Everything the bench role needs before it sends a request, checked: targets, the instance's
    model/tokenizer/max_model_len, workloads, SLO, front door, plan hash."""
    facts = [instance_facts(i) for i in instances or []]
    if not facts:
        raise BenchError("No instance to benchmark on this host: bench_instances is empty (run the vllm role "
                         "first, or plan with playbooks/bench.yml).")
    shared = set((f["model"], f["tokenizer"], f["max_model_len"]) for f in facts)
    if len(shared) > 1:
        raise BenchError("The instances of this host serve different models or lengths %s: benchmark them one at "
                         "a time (bench_instances: [one entry])." % sorted(shared))
    door = front_door(nginx_conf) if front_door_url is None else (
        dict(url=front_door_url, proxy_read_timeout=None) if front_door_url else {})
    work = workloads.validate_workloads(raw_workloads, facts[0]["max_model_len"], bool(door))
    return dict(targets=targets(instances, address, door.get("url", "")), instance=facts[0], front_door=door,
                workloads=work, slo=slo.validate_slo(raw_slo, [w["name"] for w in work],
                                                     [c["name"] for w in work for c in w["mix"] or []]),
                plan_hash=plan_hash(instances), instance_names=[f["name"] for f in facts])
