# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure GPU topology logic: the GPU x GPU matrix in nvidia-smi's words, NVLink islands, NUMA groups.

Words (as ``nvidia-smi topo -m`` prints them): ``NV#`` (a bonded set of # NVLinks), ``PIX`` (at most
one PCIe bridge), ``PXB`` (several PCIe bridges), ``PHB`` (a PCIe host bridge), ``NODE`` (between host
bridges of one NUMA node), ``SYS`` (across the SMP interconnect between NUMA nodes).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

PCIE_WORDS = ("PIX", "PXB", "PHB", "NODE", "SYS")


def parse_cpu_list(text):
    """'0-3,8,10-11' -> [0, 1, 2, 3, 8, 10, 11]; '' or None -> []."""
    cpus = []
    if not text:
        return cpus
    for part in str(text).replace(" ", "").split(","):
        if not part:
            continue
        if "-" in part:
            start, end = part.split("-", 1)
            cpus.extend(range(int(start), int(end) + 1))
        else:
            cpus.append(int(part))
    return sorted(set(cpus))


def format_cpu_list(cpus):
    """[0, 1, 2, 3, 8] -> '0-3,8' (the range string nvidia-smi prints); [] -> ''."""
    cpus = sorted(set(int(c) for c in cpus or []))
    ranges = []
    start = prev = None
    for cpu in cpus:
        if start is None:
            start = prev = cpu
        elif cpu == prev + 1:
            prev = cpu
        else:
            ranges.append((start, prev))
            start = prev = cpu
    if start is not None:
        ranges.append((start, prev))
    return ",".join("%d" % a if a == b else "%d-%d" % (a, b) for a, b in ranges)


def pair_key(i, j):
    i, j = (i, j) if i < j else (j, i)
    return "%d-%d" % (i, j)


def nvlink_label(gpu_a, gpu_b, pair):
    """The nvidia-smi word between two GPUs from NVML data.

    ``gpu_a``/``gpu_b``: dicts with ``pci_bus_id`` and ``nvlinks`` (list of link dicts);
    ``pair``: ``{"p2p_nvlink": bool|None, "common_ancestor": "PHB"|...|None}``.
    Returns ``"NV<n>"`` or a PCIe word, or None when nothing is known.
    """
    links_a = [l for l in (gpu_a.get("nvlinks") or []) if l.get("active")]
    links_b = [l for l in (gpu_b.get("nvlinks") or []) if l.get("active")]
    # 1. Direct GPU-GPU links: count A's links whose remote is B (and vice versa, take the max).
    direct_ab = sum(1 for l in links_a if l.get("remote") == "gpu"
                    and l.get("remote_pci_bus_id") == gpu_b.get("pci_bus_id"))
    direct_ba = sum(1 for l in links_b if l.get("remote") == "gpu"
                    and l.get("remote_pci_bus_id") == gpu_a.get("pci_bus_id"))
    direct = max(direct_ab, direct_ba)
    if direct:
        return "NV%d" % direct
    # 2. Both reach NVSwitches and NVML says NVLink P2P works between them. The remote PCI id of a
    #    switch link is FFFFFFFF:FF:FF.0 on every GPU, so ids cannot be matched here.
    switch_a = sum(1 for l in links_a if l.get("remote") == "nvswitch")
    switch_b = sum(1 for l in links_b if l.get("remote") == "nvswitch")
    if switch_a and switch_b and pair.get("p2p_nvlink"):
        return "NV%d" % min(switch_a, switch_b)
    # 3. PCIe common ancestor.
    return pair.get("common_ancestor")


def matrix_from_nvml(gpus, pairs):
    """{"0-1": "NV18", ...} for every GPU pair i<j (values may be None when unknown)."""
    links = {}
    for a in range(len(gpus)):
        for b in range(a + 1, len(gpus)):
            key = pair_key(a, b)
            links[key] = nvlink_label(gpus[a], gpus[b], pairs.get(key, {}))
    return links


def nvlink_count(word):
    match = re.match(r"^NV(\d+)$", word or "")
    return int(match.group(1)) if match else 0


def nvlink_islands(indices, links):
    """Groups of GPUs connected through NVLink (connected components over NV# pairs), sorted.

    A GPU without NVLink is an island of one.
    """
    parent = dict((i, i) for i in indices)

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for key, word in links.items():
        if nvlink_count(word) <= 0:
            continue
        a, b = (int(x) for x in key.split("-"))
        if a in parent and b in parent:
            ra, rb = find(a), find(b)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
    groups = {}
    for i in indices:
        groups.setdefault(find(i), []).append(i)
    return sorted((sorted(g) for g in groups.values()), key=lambda g: g[0])


def numa_groups(gpus):
    """[{"node": 0, "gpus": [0, 1]}, {"node": None, "gpus": [...]}] sorted by node (unknown last)."""
    groups = {}
    for gpu in gpus:
        groups.setdefault(gpu.get("numa_node"), []).append(gpu["index"])
    known = sorted(k for k in groups if k is not None)
    out = [{"node": k, "gpus": sorted(groups[k])} for k in known]
    if None in groups:
        out.append({"node": None, "gpus": sorted(groups[None])})
    return out


def render_matrix(count, links):
    """A compact text matrix like nvidia-smi's (for the human summary)."""
    if count == 0:
        return ""
    head = "      " + "".join("GPU%-4d" % i for i in range(count))
    rows = [head.rstrip()]
    for i in range(count):
        cells = []
        for j in range(count):
            cells.append("X" if i == j else (links.get(pair_key(i, j)) or "?"))
        rows.append(("GPU%-3d" % i) + "".join("%-7s" % c for c in cells).rstrip())
    return "\n".join(rows)
