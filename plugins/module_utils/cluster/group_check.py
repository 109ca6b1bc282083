# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cross-host checks of a multi-host vLLM instance, the ones vLLM itself does not make.

vLLM starts a group whose hosts run different vLLM builds, different weights or cannot reach the head,
and then hangs at the first collective (or serves wrong tokens). Every host is probed
(``vllm_group_probe``); ``group_findings`` compares the probes and returns every mismatch, per host,
so one message lists them all. Pure: the inputs are the probes and what the group expects.

A probe (one per host) is a dict; missing keys mean "not probed" and are not compared:
``host``, ``node_rank``, ``vllm_version``, ``ray_version``, ``venv_digest`` (the venv's distributions), ``model_digest``
(the served files' names and sizes), ``manifest_digest`` (the verified sha256 manifest), ``driver_version``, ``fabric_manager_version``, ``gpu_count``,
``gpu_name``, ``mig_enabled`` (GPU indices), ``interface`` ({name, up, address}), ``reach``
({port: "ok" (this run's probe proved its token), "open" (something else answered) or the error} from
this host to the head), ``shm_bytes``, ``hcas`` ([{name, port, state}]),
``peermem`` (bool).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

# Values every host must share with the head (rank 0): (probe key, what it is, how to fix it).
SAME_AS_HEAD = (
    ("vllm_version", "vLLM version", "install the same vllm_version on every host of the group"),
    ("ray_version", "Ray version", "install the same vllm_ray_version on every host of the group (Ray refuses a node of another version)"),
    ("venv_digest", "venv contents (installed distributions)",
     "install the venv from the same wheelhouse/requirements on every host (rerun the vllm role on the group)"),
    ("model_digest", "model files (names and sizes)",
     "sync the same model revision to every host (model_weights with the same revision and manifest)"),
    ("manifest_digest", "model manifest (the sha256 list model_weights verified against)",
     "sync the same model revision to every host (model_weights with the same revision and manifest)"),
    ("driver_version", "NVIDIA driver version", "install the same driver on every host"),
    ("fabric_manager_version", "NVIDIA fabric manager version", "install the fabric manager matching the driver on every host"),
    ("gpu_count", "GPU count", "a group needs the same GPUs on every host (vLLM places the same ranks on each)"),
    ("gpu_name", "GPU model", "a group needs the same GPU model on every host"),
)


def _finding(host, code, message, fix):
    return {"host": host, "code": code, "message": message, "fix": fix}


def _head(probes):
    heads = [p for p in probes if int(p.get("node_rank", -1)) == 0]
    return heads[0] if heads else None


def _short(key, value):
    """Digests are compared whole and shown by their first 12 hex digits, as git shows commits."""
    return value[:12] if key.endswith("_digest") and isinstance(value, str) else value


def mismatch_findings(probes):
    """Each host whose value differs from the head's, for every key both probed."""
    head = _head(probes)
    out = []
    if head is None:
        return out
    for probe in probes:
        if probe is head:
            continue
        for key, what, fix in SAME_AS_HEAD:
            if key in probe and key in head and probe[key] != head[key]:
                out.append(_finding(probe["host"], "different_" + key, "%s %r differs from the head %s's %r"
                                    % (what, _short(key, probe[key]), head["host"], _short(key, head[key])), fix))
    return out


def _interface_findings(probe):
    iface = probe.get("interface")
    if not iface:
        return []
    if not iface.get("up"):
        return [_finding(probe["host"], "interface_down", "fabric interface %s is not up" % iface.get("name"),
                         "bring %s up, or set vllm_fabric_interface to the interface of the group's network" % iface.get("name"))]
    if not iface.get("address"):
        return [_finding(probe["host"], "interface_without_address", "fabric interface %s has no IPv4 address" % iface.get("name"),
                         "give %s an address on the group's network" % iface.get("name"))]
    return []


def _reach_findings(probe, head):
    """Per port: "ok" (the head's probe proved this run's token), "open" (something else answered: fine only
    while the group's engine runs on the head and holds the port), or the connection error."""
    out = []
    for port, result in sorted((probe.get("reach") or {}).items(), key=lambda kv: int(kv[0])):
        if result == "ok" or (result == "open" and head.get("unit_active")):
            continue
        if result == "open":
            out.append(_finding(probe["host"], "head_port_not_probe",
                                "port %s on the head %s answered, but not as this run's group probe (no token proof): "
                                "another process listens there, or the head's probe listens on another address"
                                % (port, head["host"]),
                                "free port %s on the head or set vllm_profile.master_port to a free one; "
                                "vllm_profile.master_addr must be the head's vllm_fabric_interface address" % port))
        else:
            out.append(_finding(probe["host"], "head_port_unreachable",
                                "cannot open TCP port %s on the head %s: %s" % (port, head["host"], result),
                                "open port %s from this host to the head (firewall, routing, vllm_fabric_interface)" % port))
    return out


def _head_port_findings(head):
    """A master port the head cannot hold while its engine is not running: another process has it."""
    if head.get("unit_active"):
        return []
    return [_finding(head["host"], "head_port_taken", "port %s on the head is %s, and the group's unit is not running" % (port, state["state"]),
                     "free port %s on the head (ss -ltnp sport = :%s) or set vllm_profile.master_port to a free one" % (port, port))
            for port, state in sorted((head.get("listened") or {}).items()) if state.get("state") != "listening"]


def _mig_findings(probe):
    if not probe.get("mig_enabled"):
        return []
    return [_finding(probe["host"], "mig_enabled", "MIG is enabled on GPU(s) %s" % probe["mig_enabled"],
                     "disable MIG on the group's hosts (mig role, mig_mode: disabled): ranks are whole GPUs")]


def _shm_findings(probe, shm_min_bytes):
    if not shm_min_bytes or probe.get("shm_bytes") is None or probe["shm_bytes"] >= shm_min_bytes:
        return []
    return [_finding(probe["host"], "shm_too_small", "/dev/shm is %d bytes, the group needs at least %d" % (probe["shm_bytes"], shm_min_bytes),
                     "let host_tuning size /dev/shm (host_tuning_shm_size) or enlarge it")]


def _rdma_findings(probe, memlock):
    out = []
    if not [h for h in probe.get("hcas") or [] if str(h.get("state", "")).upper().endswith("ACTIVE")]:
        out.append(_finding(probe["host"], "no_active_hca", "no InfiniBand/RoCE port is ACTIVE (%s)" % (probe.get("hcas") or "no HCA found"),
                            "bring the HCA's port up (cabling, subnet manager), or set vllm_rdma: false to use TCP"))
    if not probe.get("peermem"):
        out.append(_finding(probe["host"], "peermem_not_loaded", "the nvidia_peermem kernel module is not loaded (GPUDirect RDMA)",
                            "modprobe nvidia_peermem (and list it in /etc/modules-load.d)"))
    if str(memlock).lower() not in ("infinity", "unlimited"):
        out.append(_finding(probe["host"], "memlock_limited", "LimitMEMLOCK is %s; RDMA registers GPU and host memory" % memlock,
                            "set vllm_limit_memlock: infinity for an RDMA group"))
    return out


def group_findings(probes, expected_hosts, rdma=False, memlock="infinity", shm_min_bytes=0):
    """Every problem of the group, per host: missing members, mismatches with the head, host checks."""
    seen = [p.get("host") for p in probes]
    out = [_finding(h, "not_probed", "host %s of the group was not probed (unreachable or not in this play)" % h,
                    "run the play on every host of vllm_cluster_hosts together (same batch)")
           for h in expected_hosts if h not in seen]
    head = _head(probes)
    if head is None:
        out.append(_finding(None, "no_head", "no probed host has node rank 0", "list the head first in vllm_cluster_hosts"))
    else:
        out += _head_port_findings(head)
    out += mismatch_findings(probes)
    for probe in probes:
        out += _interface_findings(probe) + _mig_findings(probe) + _shm_findings(probe, shm_min_bytes)
        if head is not None and probe is not head:
            out += _reach_findings(probe, head)
        if rdma:
            out += _rdma_findings(probe, memlock)
    return out
