# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read a streamed completion through nginx and print when each event arrived (JSON).

Usage: stream_probe.py URL [EVENTS [INTERVAL]] (the API key in GPUFLEET_PROBE_KEY). Prints {"status", "headers", "arrivals": [seconds since request, ...],
"instances": [...], "done": bool}. Events that arrive spread out over time show that nothing on
the way buffered the stream.
"""
from __future__ import annotations

import json
import os
import sys
import time
import urllib.request


def main():
    url = sys.argv[1]
    body = {"model": "m", "prompt": "hi", "stream": True}
    if len(sys.argv) > 2:
        body["events"] = int(sys.argv[2])
    if len(sys.argv) > 3:
        body["interval"] = float(sys.argv[3])
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json",
                 "Authorization": "Bearer " + os.environ.get("GPUFLEET_PROBE_KEY", "")}, method="POST")
    start = time.monotonic()
    arrivals, instances, done = [], [], False
    with urllib.request.urlopen(request, timeout=120) as response:
        headers = dict(response.headers.items())
        for raw in response:
            line = raw.decode().strip()
            if not line.startswith("data: "):
                continue
            if line == "data: [DONE]":
                done = True
                continue
            arrivals.append(round(time.monotonic() - start, 3))
            instances.append(json.loads(line[6:])["instance"])
        status = response.status
    print(json.dumps({"status": status, "headers": headers, "arrivals": arrivals,
                      "instances": sorted(set(instances)), "done": done}))


if __name__ == "__main__":
    main()
