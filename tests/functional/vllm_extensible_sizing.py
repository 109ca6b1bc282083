# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run INSIDE a vLLM >= 0.34 venv (VLLM_TARGET_DEVICE=cpu): vLLM's own measure_kv_cache_bytes (the extensible
KV cache's sizing, v1/worker/extensible_kv_cache.py) on the memory terms of real engine boot logs.

stdin: {"cases": [{"id", "log"}]} (the log text: "Free memory on device (F/T GiB)" and "Actual usage is W GiB for
weight, A GiB for peak activation, N GiB for non-torch memory, and G GiB for CUDAGraph memory").
stdout (last line): JSON {"version", "results": [{"id", "utilization", "kv_bytes", "terms"}]}. The cache is
measured after warmup and capture: resident = W + N + G, committed 0, the transient peak A, utilization 1.0 (the
0.34 default) and 0.9.
"""
from __future__ import absolute_import, division, print_function

import json
import math
import re
import sys

GIB = 1 << 30
_DEVICE = re.compile(r"Free memory on device \(([\d.]+)/([\d.]+) GiB\)")
_USAGE = re.compile(r"Actual usage is ([\d.]+) GiB for weight, ([\d.]+) GiB for peak activation, ([\d.]+) GiB for "
                    r"non-torch memory, and ([\d.]+) GiB for CUDAGraph memory")


def main():
    import vllm
    from vllm.v1.worker.extensible_kv_cache import measure_kv_cache_bytes
    results = []
    for case in json.loads(sys.stdin.read())["cases"]:
        free, total = (int(round(float(x) * GIB)) for x in _DEVICE.search(case["log"]).groups())
        weights, peak, non_torch, graphs = (int(round(float(x) * GIB)) for x in _USAGE.search(case["log"]).groups())
        resident = weights + non_torch + graphs
        for util in (1.0, 0.9):
            kv = measure_kv_cache_bytes(init_free_memory=free, free_memory=free - resident, committed_bytes=0,
                                        requested_memory=int(math.ceil(util * total)), transient_peak_bytes=peak)
            results.append({"id": case["id"], "utilization": util, "kv_bytes": kv,
                            "terms": {"free": free, "total": total, "weights": weights, "peak": peak,
                                      "non_torch": non_torch, "graphs": graphs}})
    sys.stdout.write("\n" + json.dumps({"version": vllm.__version__, "results": results}) + "\n")


if __name__ == "__main__":
    main()
