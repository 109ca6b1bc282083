# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Print the Ray cluster's nodes as JSON, connecting as vLLM's API server will (a driver on the head).

Run by the vllm role on the group's head with the venv's python, as the service user, with RAY_AUTH_MODE and
RAY_AUTH_TOKEN_PATH set as in the units: if this driver cannot connect, vLLM's Ray executor cannot either.
Usage: vllm_ray_nodes.py HEAD_ADDRESS:GCS_PORT NODE_ADDRESS
Output: {"ray_version": "...", "nodes": ray.nodes()}; exit 2 with the error on stderr when it cannot connect.
"""

from __future__ import absolute_import, division, print_function

import json
import sys


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: vllm_ray_nodes.py HEAD_ADDRESS:GCS_PORT NODE_ADDRESS\n")
        return 2
    import ray  # the venv's Ray: only the group's venv has it

    try:
        ray.init(address=argv[1], _node_ip_address=argv[2], logging_level="ERROR", log_to_driver=False)
    except Exception as exc:  # ConnectionError, an auth failure, a version mismatch: all reported as text
        sys.stderr.write("cannot connect to the Ray cluster at %s: %s: %s\n" % (argv[1], type(exc).__name__, exc))
        return 2
    try:
        nodes = ray.nodes()
    finally:
        ray.shutdown()
    sys.stdout.write(json.dumps({"ray_version": ray.__version__, "nodes": nodes}, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
