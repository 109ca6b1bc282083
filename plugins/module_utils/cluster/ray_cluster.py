# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A Ray cluster under one multi-host vLLM instance (``vllm_cluster_backend: ray``), as the seeds run it.

Rules, read in Ray 2.60.0 (``ray/scripts/scripts.py`` ``ray start``, ``ray/_private/ray_constants.py``,
``ray/_private/authentication/``) and vLLM (``vllm/v1/executor/ray_utils.py``, ``vllm/platforms/cpu.py``):

* the head runs ``ray start --head --port GCS``, every other host ``ray start --address HEAD:GCS``, each with
  ``--node-ip-address`` on the group's fabric address and ``--block`` (without it ``ray start`` forks its
  daemons and exits, and systemd would see a finished service);
* Ray takes its other ports at random unless told: node manager, object manager, runtime-env agent, the
  dashboard agent's two, metrics export, the head's Ray client server and the worker range are planned here,
  so the firewall of the fabric network can name them. Measured with Ray 2.60.0 (the multinode scenario): the
  GCS, the raylet's two ports and the workers listen on every address, not only ``--node-ip-address``, and
  the head's autoscaler monitor takes one more random port: the fabric network must be isolated, and the token
  is what keeps a stranger on it out;
* Ray's control plane has no authentication unless ``RAY_AUTH_MODE=token`` (Ray 2.52+); then the GCS, the
  raylets, the dashboard and every driver (vLLM's API server on the head) need the same token, read from
  ``RAY_AUTH_TOKEN_PATH``. The role sets both on every unit; the token file is the role's secret;
* the object store lives in /dev/shm; a /dev/shm smaller than ``--object-store-memory`` makes Ray fall back
  to disk (slow): the group's cross-host check wants /dev/shm to hold it beside vLLM's own ring buffers;
* vLLM's CPU platform sets no ``ray_device_key``, and ``ray_utils`` refuses it ("current platform cpu does not
  support ray"): the Ray executor runs on CUDA hosts only. The cluster itself runs anywhere.

Pure: the inputs are the role's settings and what ``ray.nodes()`` returned on the head.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError

# Ray's GCS default (ray_constants.DEFAULT_PORT); the rest are this collection's choice, one block above it.
DEFAULT_PORTS = {
    "gcs": 6379,
    "node_manager": 6380,
    "object_manager": 6381,
    "runtime_env_agent": 6382,
    "dashboard_agent_grpc": 6383,
    "dashboard_agent_listen": 6384,
    "metrics_export": 6385,
    "ray_client_server": 10001,
    "min_worker": 10002,
    "max_worker": 10101,
}
# `ray start` flag of each planned port (the worker range is two flags).
PORT_FLAGS = (
    ("node_manager", "--node-manager-port"),
    ("object_manager", "--object-manager-port"),
    ("runtime_env_agent", "--runtime-env-agent-port"),
    ("dashboard_agent_grpc", "--dashboard-agent-grpc-port"),
    ("dashboard_agent_listen", "--dashboard-agent-listen-port"),
    ("metrics_export", "--metrics-export-port"),
    ("min_worker", "--min-worker-port"),
    ("max_worker", "--max-worker-port"),
)


class RayClusterError(UserError):
    """Settings that cannot make a Ray cluster; the message names the variable and the fix."""


def _finding(host, code, message, fix):
    return {"host": host, "code": code, "message": message, "fix": fix}


def planned_ports(overrides=None):
    """DEFAULT_PORTS with ``vllm_ray_ports`` applied, checked: known names, 1024-65535, no two alike."""
    ports = dict(DEFAULT_PORTS)
    for name, value in (overrides or {}).items():
        if name not in DEFAULT_PORTS:
            raise RayClusterError("vllm_ray_ports has an unknown key %r: use %s" % (name, ", ".join(sorted(DEFAULT_PORTS))))
        try:
            ports[name] = int(value)
        except (TypeError, ValueError):
            raise RayClusterError("vllm_ray_ports.%s is %r, not a port number" % (name, value))
    bad = sorted(n for n, p in ports.items() if not 1024 <= p <= 65535)
    if bad:
        raise RayClusterError("vllm_ray_ports %s must be between 1024 and 65535" % ", ".join("%s=%d" % (n, ports[n]) for n in bad))
    if ports["min_worker"] > ports["max_worker"]:
        raise RayClusterError("vllm_ray_ports.min_worker %d is above max_worker %d" % (ports["min_worker"], ports["max_worker"]))
    worker_range = range(ports["min_worker"], ports["max_worker"] + 1)
    singles = [(n, p) for n, p in sorted(ports.items()) if n not in ("min_worker", "max_worker")]
    taken = {}
    for name, port in singles:
        if port in taken or port in worker_range:
            other = taken.get(port, "the worker range %d-%d" % (ports["min_worker"], ports["max_worker"]))
            raise RayClusterError("vllm_ray_ports.%s %d is also %s: give each port its own number" % (name, port, other))
        taken[port] = name
    return ports


def start_argv(ray_bin, is_head, node_address, head_address, ports, num_cpus, num_gpus, object_store_bytes, temp_dir):
    """``ray start --block ...`` for one host of the group (the head, or a worker joining HEAD:GCS)."""
    argv = [ray_bin, "start", "--block", "--disable-usage-stats", "--node-ip-address", node_address]
    if is_head:
        # No dashboard: it listens on HTTP and needs the ray[default] extras vLLM does not install.
        argv += ["--head", "--port", str(ports["gcs"]), "--ray-client-server-port", str(ports["ray_client_server"]),
                 "--include-dashboard", "false"]
    else:
        argv += ["--address", "%s:%d" % (head_address, ports["gcs"])]
    for name, flag in PORT_FLAGS:
        argv += [flag, str(ports[name])]
    argv += ["--num-cpus", str(int(num_cpus)), "--num-gpus", str(int(num_gpus)),
             "--object-store-memory", str(int(object_store_bytes)), "--temp-dir", temp_dir]
    return argv


def node_table(nodes):
    """ray.nodes() entries -> [{address, alive, cpus, gpus}] (Ray reports resources as floats)."""
    out = []
    for node in nodes or []:
        resources = node.get("Resources") or {}
        out.append({"address": node.get("NodeManagerAddress"), "alive": bool(node.get("Alive")),
                    "cpus": int(resources.get("CPU", 0)), "gpus": int(resources.get("GPU", 0))})
    return out


def node_findings(nodes, members, gpus_per_host):
    """Every member (``{host, address}``) must be one live Ray node with its GPUs, before vLLM starts."""
    table = node_table(nodes)
    alive = dict((n["address"], n) for n in table if n["alive"])
    out = []
    for member in members:
        node = alive.get(member["address"])
        if node is None:
            state = "dead" if [n for n in table if n["address"] == member["address"]] else "not a node"
            out.append(_finding(member["host"], "ray_node_missing",
                                "%s (%s) is %s in the Ray cluster" % (member["host"], member["address"], state),
                                "start its Ray worker (systemctl status vllm-ray.service on %s: the head's address and port, "
                                "the token file, the same Ray version)" % member["host"]))
        elif node["gpus"] < int(gpus_per_host):
            out.append(_finding(member["host"], "ray_gpus_missing",
                                "%s offers %d GPU(s) to Ray, the plan needs %d" % (member["host"], node["gpus"], int(gpus_per_host)),
                                "check nvidia-smi on %s and vllm_ray_num_gpus" % member["host"]))
    known = set(m["address"] for m in members)
    for address in sorted(a for a in alive if a not in known):
        out.append(_finding(None, "ray_node_unexpected", "a node at %s joined the Ray cluster but is not in vllm_cluster_hosts" % address,
                            "stop Ray on that host, or add it to the group (vLLM would place ranks on it)"))
    return out
