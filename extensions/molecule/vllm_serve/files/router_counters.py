# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read the router's per-worker counter and each engine's own counters (test helper of vllm_serve).

Usage: router_counters.py snapshot FILE   write the counters to FILE (JSON) and print them
       router_counters.py delta FILE      print the counters now minus those in FILE
Counters, per worker URL (env GPUFLEET_WORKERS, space-separated; the router's metrics at GPUFLEET_ROUTER_METRICS):
routed   vllm_router_processed_requests_total{worker=URL}   (the router's own count of requests it sent there)
requests vllm:request_success_total, all labels              (the engine's own count of finished requests)
hits     vllm:prefix_cache_hits_total                         (tokens served from the engine's prefix cache)
queries  vllm:prefix_cache_queries_total                      (tokens looked up)
Standard library only.
"""
from __future__ import annotations

import json
import os
import re
import sys
import urllib.request

SAMPLE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)')


def scrape(url):
    with urllib.request.urlopen(url, timeout=30) as answer:
        text = answer.read().decode("utf-8")
    out = []
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match and not line.startswith("#"):
            out.append((match.group(1), match.group(2) or "", float(match.group(3))))
    return out


def total(samples, name, label=None):
    return sum(v for n, labels, v in samples if n == name and (label is None or label in labels))


def counters():
    workers = os.environ.get("GPUFLEET_WORKERS", "http://127.0.0.1:8000 http://127.0.0.1:8001").split()
    router = scrape(os.environ.get("GPUFLEET_ROUTER_METRICS", "http://127.0.0.1:29000/metrics"))
    out = {}
    for url in workers:
        engine = scrape(url + "/metrics")
        out[url] = {
            "routed": total(router, "vllm_router_processed_requests_total", 'worker="%s"' % url),
            "requests": total(engine, "vllm:request_success_total"),
            "hits": total(engine, "vllm:prefix_cache_hits_total"),
            "queries": total(engine, "vllm:prefix_cache_queries_total"),
        }
    return out


def main(argv):
    if len(argv) != 3 or argv[1] not in ("snapshot", "delta"):
        sys.stderr.write(__doc__)
        return 2
    now = counters()
    if argv[1] == "snapshot":
        with open(argv[2], "w", encoding="utf-8") as handle:
            json.dump(now, handle)
        print(json.dumps(now))
        return 0
    with open(argv[2], encoding="utf-8") as handle:
        before = json.load(handle)
    print(json.dumps({url: {k: v - before[url][k] for k, v in figures.items()} for url, figures in now.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
