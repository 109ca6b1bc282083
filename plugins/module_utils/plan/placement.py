# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Place vLLM instances (TP x PP GPU groups) onto NVLink islands inside NUMA nodes (pure)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError


class PlacementError(UserError, ValueError):
    """The hardware description cannot be used; the message names the variable and the fix."""


def normalize_gpus(gpus):
    """Accept gpu_facts' facts (``gpu_count`` + ``gpus`` list) or a declared profile (``count``, ``name``,
    ``memory_total_bytes``, ``compute_capability``, optional ``nvlink_islands`` / ``numa_nodes``).
    Returns {count, gpus: [{index, name, memory_total_bytes, compute_capability, numa_node, cpu_affinity}],
    nvlink_islands, numa_nodes, declared}."""
    if not isinstance(gpus, dict):
        raise PlacementError("gpus must be a mapping: the gpu_facts result (ansible_facts.gpufleet_gpu) or a declared profile")
    if isinstance(gpus.get("gpus"), list):
        items = []
        for g in gpus["gpus"]:
            items.append({
                "index": int(g["index"]),
                "name": g.get("name"),
                "memory_total_bytes": g.get("memory_total_bytes"),
                "compute_capability": g.get("compute_capability"),
                "numa_node": g.get("numa_node"),
                "cpu_affinity": list(g.get("cpu_affinity") or []),
            })
        count = int(gpus.get("gpu_count", len(items)))
        declared = False
    else:
        missing = [k for k in ("count", "name", "memory_total_bytes", "compute_capability") if gpus.get(k) is None]
        if missing:
            raise PlacementError(
                "declared gpus profile lacks %s: give {count, name, memory_total_bytes, compute_capability}" % ", ".join(missing))
        count = int(gpus["count"])
        items = [{"index": i, "name": gpus["name"], "memory_total_bytes": int(gpus["memory_total_bytes"]),
                  "compute_capability": str(gpus["compute_capability"]), "numa_node": None, "cpu_affinity": []}
                 for i in range(count)]
        declared = True
    numa_nodes = [sorted(int(i) for i in n) for n in (gpus.get("numa_nodes") or []) if n]
    # Declared profiles name NUMA nodes by position. gpu_facts results carry each GPU's own node,
    # and list GPUs of unknown node (sysfs -1) as one group: binding those to "node 0" put
    # numactl --cpunodebind=0 in the unit of a host whose NUMA layout is unknown (seen on the
    # 2 x H200 acceptance host), so facts are read per GPU only.
    if declared and numa_nodes and all(isinstance(n, list) for n in numa_nodes):
        for node_id, members in enumerate(numa_nodes):
            for g in items:
                if g["index"] in members and g["numa_node"] is None:
                    g["numa_node"] = node_id
    else:
        by_node = {}
        for g in items:
            if g["numa_node"] is not None and g["numa_node"] >= 0:
                by_node.setdefault(g["numa_node"], []).append(g["index"])
        numa_nodes = [sorted(by_node[k]) for k in sorted(by_node)]
    islands = [sorted(int(i) for i in isl) for isl in (gpus.get("nvlink_islands") or []) if len(isl) > 1]
    return {"count": count, "gpus": items, "nvlink_islands": islands, "numa_nodes": numa_nodes, "declared": declared}


def _numa_of(hw, indices):
    nodes = set(g["numa_node"] for g in hw["gpus"] if g["index"] in indices)
    return nodes.pop() if len(nodes) == 1 else None


def _carve_groups(hw, size, all_idx):
    """Cut GPUs into groups of ``size``, best locality first: NVLink islands inside a NUMA node, then
    NUMA nodes (or the host), then whatever is left across nodes. Sorted by first GPU."""
    domains = hw["numa_nodes"] or [all_idx]
    used = set()
    groups = []

    def take(free, locality):
        while len(free) >= size:
            chosen = free[:size]
            free = free[size:]
            used.update(chosen)
            groups.append({"gpu_indices": chosen, "locality": locality})

    for dom in domains:
        isl_in_dom = [sorted(set(i) & set(dom)) for i in hw["nvlink_islands"]]
        isl_in_dom = [i for i in isl_in_dom if len(i) >= size and size > 1]
        for isl in sorted(isl_in_dom, key=len, reverse=True):
            take([g for g in isl if g not in used], "nvlink")
    for dom in domains:
        take([g for g in dom if g not in used], "numa" if hw["numa_nodes"] else "host")
    take([g for g in all_idx if g not in used], "cross_numa")
    groups.sort(key=lambda grp: grp["gpu_indices"][0])
    return groups


def _bind(hw, grp):
    """Give a group its NUMA node (None when it spans nodes) and the union of its GPUs' CPUs."""
    idx = grp["gpu_indices"]
    grp["numa_node"] = _numa_of(hw, idx)
    cpus = []
    for g in hw["gpus"]:
        if g["index"] in idx:
            cpus.extend(c for c in g["cpu_affinity"] if c not in cpus)
    grp["cpus"] = sorted(cpus) or None


def _locality_finding(hw, size, grp):
    """A warning when a group's TP traffic leaves its NUMA node or NVLink island, else None."""
    idx = grp["gpu_indices"]
    if grp["locality"] == "cross_numa":
        return {
            "level": "warning", "code": "instance_spans_numa",
            "message": "GPUs %s span NUMA nodes: every all-reduce crosses the socket link" % idx,
            "fix": "use a tensor_parallel_size that fits inside one NUMA node and run one instance per node",
        }
    if size > 1 and hw["nvlink_islands"] and grp["locality"] != "nvlink":
        return {
            "level": "warning", "code": "instance_spans_islands",
            "message": "GPUs %s are not in one NVLink island: TP traffic goes over PCIe" % idx,
            "fix": "choose a tensor_parallel_size that matches the NVLink island size",
        }
    return None


def place(hw, size, instances="auto"):
    """Return (groups, findings). Each group: {gpu_indices, numa_node, cpus, locality}.

    locality: "nvlink" (inside one NVLink island and one NUMA node), "numa" (one NUMA node, PCIe),
    "cross_numa" (spans NUMA nodes: all-reduce crosses the socket interconnect).
    """
    findings = []
    all_idx = sorted(g["index"] for g in hw["gpus"])
    if size > len(all_idx):
        findings.append({
            "level": "error", "code": "too_many_gpus",
            "message": "one instance needs %d GPUs (tensor_parallel_size x pipeline_parallel_size) but the host has %d" % (size, len(all_idx)),
            "fix": "lower tensor_parallel_size / pipeline_parallel_size, or plan for a host with more GPUs",
        })
        return [], findings
    groups = _carve_groups(hw, size, all_idx)
    if instances != "auto":
        want = int(instances)
        if want > len(groups):
            findings.append({
                "level": "error", "code": "too_many_instances",
                "message": "instances: %d asks for %d GPUs; the host has %d GPUs (%d instance(s) of %d GPU(s) fit)"
                           % (want, want * size, len(all_idx), len(groups), size),
                "fix": "set instances to %d or auto, or lower tensor_parallel_size" % len(groups),
            })
        groups = groups[:want]
    for grp in groups:
        _bind(hw, grp)
        finding = _locality_finding(hw, size, grp)
        if finding is not None:
            findings.append(finding)
    unused = [g for g in all_idx if not any(g in grp["gpu_indices"] for grp in groups)]
    if unused and groups:
        findings.append({"level": "info", "code": "unused_gpus", "message": "GPUs %s get no instance" % unused,
                         "fix": "raise instances or tensor_parallel_size to use them, if intended"})
    return groups, findings
