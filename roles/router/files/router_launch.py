# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Start vllm-router with the role's worker list minus the drained set (gpufleet.vllm.router's unit).

Usage: router_launch.py CONFIG_JSON
CONFIG_JSON (written by the role): {"argv": [...vllm-router and its flags...], "workers": [url, ...],
"drained_dir": "/var/lib/vllm-router/drained"}. Each file in drained_dir holds one worker URL the rollout
took out (playbooks/tasks/rollout_drain.yml): a router restart keeps them out until the rollout adds them
back, so membership changed at runtime (POST /remove_worker) survives a restart. Standard library only.
"""

from __future__ import absolute_import, annotations, division, print_function

import json
import os
import sys


def drained_urls(folder):
    """The URLs in the drained folder (missing folder: none)."""
    urls = set()
    try:
        names = sorted(os.listdir(folder))
    except FileNotFoundError:
        return urls
    for name in names:
        with open(os.path.join(folder, name), encoding="utf-8") as handle:
            url = handle.read().strip()
        if url:
            urls.add(url)
    return urls


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: router_launch.py CONFIG_JSON\n")
        return 2
    with open(argv[1], encoding="utf-8") as handle:
        config = json.load(handle)
    drained = drained_urls(config.get("drained_dir") or "")
    live = [u for u in config["workers"] if u not in drained]
    sys.stdout.write("gpufleet router: %d workers (%s), drained: %s\n"
                     % (len(live), " ".join(live) or "none", " ".join(sorted(drained)) or "none"))
    sys.stdout.flush()
    command = list(config["argv"]) + (["--worker-urls"] + live if live else [])
    os.execv(command[0], command)
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv))
