# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run the FAKE hub (fake_hf_hub.FakeHub, a test double, not the real hub) as a process, for Molecule.

    python3 serve_fake_hub.py --host 10.88.0.1 --state STATE.json REPO=CONFIG_JSON [REPO=CONFIG_JSON ...]

Each repository gets one commit on main with the given real config.json and a small STAND-IN weights file
(``STANDIN-not-weights.bin``: a few hundred bytes saying what it is; the test hosts have no GPU to load weights
on, and a stand-in keeps the files model_weights fetches and verifies small). The endpoint and each repository's
commit id go to STATE as JSON; the process serves until it is killed (SIGTERM).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fake_hf_hub import FakeHub  # noqa: E402

STANDIN = b"STAND-IN for the weights of %s (gpufleet.vllm tests/fakes/serve_fake_hub.py): not a model file.\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--state", required=True)
    parser.add_argument("repos", nargs="+", metavar="REPO=CONFIG_JSON")
    args = parser.parse_args(argv)
    hub = FakeHub(host=args.host, cdn_host=args.host, lfs_threshold=1 << 20)
    commits = {}
    for spec in args.repos:
        repo, config = spec.split("=", 1)
        with open(config, "rb") as handle:
            files = {"config.json": handle.read(), "STANDIN-not-weights.bin": STANDIN % repo.encode()}
        commits[repo] = hub.add_commit(repo, files)
    hub.start()
    with open(args.state + ".tmp", "w") as handle:
        json.dump({"endpoint": hub.endpoint, "commits": commits, "pid": os.getpid()}, handle)
    os.rename(args.state + ".tmp", args.state)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    try:
        while True:
            time.sleep(3600)
    finally:
        hub.stop()


if __name__ == "__main__":
    main()
