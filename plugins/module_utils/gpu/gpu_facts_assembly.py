# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Assemble the ``gpufleet_gpu`` facts from either backend (pure functions, no Ansible import).

Both backends produce the same shape, so the planner and the preflight role never care which one
ran. Fields a backend cannot see are ``None`` and listed in ``unavailable``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError
from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu.gpu_families import mig_capable
from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu.nvml import canonical_pci_bus_id
from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu.topology import (
    format_cpu_list,
    matrix_from_nvml,
    numa_groups,
    nvlink_islands,
    parse_cpu_list,
    render_matrix,
)

MIB = 1024 * 1024
FACTS_KEY = "gpufleet_gpu"
SMI_UNAVAILABLE = ["nvml_version", "nvlinks"]


def _numa(sysfs, bus_id, fallback=None):
    """sysfs numa_node for a GPU (-1 = unknown) with an optional fallback (int or None)."""
    entry = (sysfs or {}).get(canonical_pci_bus_id(bus_id) if bus_id else None)
    if entry is not None and entry.get("numa_node") is not None:
        node = entry["numa_node"]
        return node if node >= 0 else None
    return fallback


def _fabric_word(value):
    if value is None:
        return None
    word = value.strip().lower().replace(" ", "_")
    return None if word in ("not_supported", "n/a") else word


def _finish(facts):
    gpus = facts["gpus"]
    indices = [g["index"] for g in gpus]
    links = facts["topology"]["links"]
    facts["gpu_count"] = len(gpus)
    facts["nvlink_islands"] = nvlink_islands(indices, links)
    groups = numa_groups(gpus)
    facts["numa_groups"] = groups
    facts["numa_nodes"] = [g["gpus"] for g in groups]
    facts["nvswitch"] = any(
        any(l.get("remote") == "nvswitch" for l in (g.get("nvlinks") or [])) or
        (g.get("fabric") or {}).get("state") is not None
        for g in gpus)
    facts["topology"]["matrix"] = render_matrix(len(gpus), links)
    facts["summary"] = summarize(facts)
    return facts


def _gpu_common(gpu):
    total = gpu.get("memory_total_bytes")
    gpu["memory_total_mib"] = total // MIB if total is not None else None
    cpus = gpu.get("cpu_affinity")
    gpu["cpu_affinity_str"] = format_cpu_list(cpus) if cpus is not None else None
    links = gpu.get("nvlinks")
    gpu["nvlink_active_count"] = sum(1 for l in links if l.get("active")) if links is not None else None
    return gpu


def facts_from_nvml(raw, sysfs=None):
    """``raw`` is ``nvml.collect()``'s result; ``sysfs`` maps canonical PCI ids to ``{"numa_node"}``."""
    gpus = []
    for g in raw["gpus"]:
        gpu = dict(g)
        nvml_numa = gpu.pop("nvml_numa_node", None)
        gpu["numa_node"] = nvml_numa if nvml_numa is not None else _numa(sysfs, gpu.get("pci_bus_id"))
        fabric = gpu.get("fabric")
        if fabric is not None and fabric.get("state") == "not_supported":
            gpu["fabric"] = None
        gpu["mig"] = dict(gpu["mig"])
        gpus.append(_gpu_common(gpu))
    facts = {
        "backend": "nvml",
        "driver_version": raw.get("driver_version"),
        "cuda_driver_version": raw.get("cuda_driver_version"),
        "nvml_version": raw.get("nvml_version"),
        "gpus": gpus,
        "topology": {"links": matrix_from_nvml(gpus, raw.get("pairs", {}))},
        "pairs": raw.get("pairs", {}),
        "unavailable": [],
        "errors": raw.get("errors", {}),
        "reason": None,
    }
    return _finish(facts)


def smi_nvlinks(status, remote, bus_ids):
    """NVML-shaped ``nvlinks`` per GPU index from ``parse_nvlink_status``/``parse_nvlink_remote``.

    Remote type: a link whose remote device is a GPU of this host is "gpu"; NVML's NVSwitch id
    FFFFFFFF:FF:FF.0 (seen on the H200 capture) or any other device is "nvswitch" (on x86 an NVLink
    ends at a GPU or an NVSwitch; NVML's CPU type is IBM POWER's NPU); no -R line: None."""
    if status is None:
        return {}
    local = set(canonical_pci_bus_id(b) for b in bus_ids if b)
    out = {}
    for gpu, links in status.items():
        remotes = (remote or {}).get(gpu, {})
        out[gpu] = []
        for link in links:
            bus = canonical_pci_bus_id(remotes.get(link["link"])) if remotes.get(link["link"]) else None
            kind = None if bus is None else ("gpu" if bus in local else "nvswitch")
            out[gpu].append({"link": link["link"], "active": link["active"], "version": None,
                             "remote": kind, "remote_pci_bus_id": bus})
    return out


def _cc_tuple(cc):
    match = re.match(r"^(\d+)\.(\d+)$", cc or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def _smi_affinity(topo, idx, errors):
    """GPU ``idx``'s CPU list from ``topo -m`` (None, with the reason in ``errors``, when absent)."""
    aff = topo.get("affinity", {}).get(str(idx))
    if aff is None:
        errors["cpu_affinity"] = "not in nvidia-smi topo -m output"
        return None
    cpus = parse_cpu_list(aff.get("cpu_affinity"))
    if not cpus:  # as the NVML backend: an empty cell is "unknown", never "no CPU"
        errors["cpu_affinity"] = "empty: nvidia-smi topo -m prints no CPU Affinity for this GPU"
        return None
    return cpus


def _smi_numa_affinity(topo, idx):
    """The NUMA Affinity cell of ``topo -m`` as an int (None when absent or N/A): sysfs wins over it."""
    value = (topo.get("affinity", {}).get(str(idx)) or {}).get("numa_affinity")
    return int(value) if value is not None and str(value).isdigit() else None


def _smi_mig(g, cc):
    """NVML-shaped ``mig`` from one parsed ``<gpu>``: modes, whether the card can do MIG, its instances."""
    return {
        "current": g["mig"]["current"],
        "pending": g["mig"]["pending"],
        "supported": mig_capable(g.get("product_name"), _cc_tuple(cc), g["mig"]["current"] is not None),
        "devices": [{
            "index": d.get("index"),
            "gpu_instance_id": d.get("gpu_instance_id"),
            "compute_instance_id": d.get("compute_instance_id"),
            "memory_bytes": d["memory_total_mib"] * MIB if d.get("memory_total_mib") is not None else None,
            "uuid": d.get("uuid"),
        } for d in g.get("mig_devices", [])],
    }


def _smi_fabric(g):
    state = _fabric_word(g.get("fabric_state"))
    return {"state": state, "status": _fabric_word(g.get("fabric_status"))} if state else None


def _smi_gpu(idx, g, topo, compute_caps, sysfs, nvlinks):
    """One GPU's facts, NVML-shaped, from its parsed ``<gpu>`` and the other nvidia-smi readings."""
    bus = canonical_pci_bus_id(g.get("pci_bus_id"))
    errors = {}
    cpus = _smi_affinity(topo, idx, errors)
    cc = compute_caps.get(bus)
    if cc is None:
        errors["compute_capability"] = "not reported by nvidia-smi --query-gpu=compute_cap"
    mib = g.get("memory_total_mib")
    gpu = {
        "index": idx,
        "name": g.get("product_name"),
        "uuid": g.get("uuid"),
        "minor_number": g.get("minor_number"),
        "pci_bus_id": bus,
        "memory_total_bytes": mib * MIB if mib is not None else None,
        "compute_capability": cc,
        "persistence_mode": g.get("persistence_mode"),
        "ecc_mode": ({"current": g.get("ecc_current"), "pending": g.get("ecc_pending")}
                     if g.get("ecc_current") is not None else None),
        "power_limit_watts": g.get("power_limit_watts"),
        "mig": _smi_mig(g, cc),
        "numa_node": _numa(sysfs, bus, _smi_numa_affinity(topo, idx)),
        "cpu_affinity": cpus,
        "nvlinks": nvlinks.get(idx, []) if nvlinks is not None else None,
        "fabric": _smi_fabric(g),
        "errors": errors,
    }
    return _gpu_common(gpu)


def facts_from_smi(query, topo=None, compute_caps=None, sysfs=None, nvlinks=None):
    """Facts from ``parse_query_xml``, ``parse_topology`` and ``parse_compute_cap_csv`` results;
    ``nvlinks`` is ``smi_nvlinks``' result (None: ``nvidia-smi nvlink`` could not be read)."""
    compute_caps = dict((canonical_pci_bus_id(k), v) for k, v in (compute_caps or {}).items())
    topo = topo or {"links": {}, "affinity": {}}
    gpus = [_smi_gpu(idx, g, topo, compute_caps, sysfs, nvlinks) for idx, g in enumerate(query["gpus"])]
    facts = {
        "backend": "nvidia-smi",
        "driver_version": query.get("driver_version"),
        "cuda_driver_version": query.get("cuda_version"),
        "nvml_version": None,
        "gpus": gpus,
        "topology": {"links": dict(topo.get("links", {}))},
        "pairs": {},
        "unavailable": [u for u in SMI_UNAVAILABLE if u != "nvlinks" or nvlinks is None],
        "errors": {},
        "reason": None,
    }
    if query.get("attached_gpus") is not None and query["attached_gpus"] != len(gpus):
        facts["errors"]["gpus"] = ("nvidia-smi reports %s attached GPUs but lists %d"
                                   % (query["attached_gpus"], len(gpus)))
    return _finish(facts)


def empty_facts(backend, reason):
    """No driver / no GPU: gpu_count 0 and the reason."""
    facts = {
        "backend": backend,
        "driver_version": None,
        "cuda_driver_version": None,
        "nvml_version": None,
        "gpus": [],
        "topology": {"links": {}},
        "pairs": {},
        "unavailable": [],
        "errors": {},
        "reason": reason,
    }
    return _finish(facts)


# Fields compared between backends (per GPU); nested dicts are compared as a whole.
COMPARED_GPU_FIELDS = (
    "index", "name", "uuid", "minor_number", "pci_bus_id", "memory_total_mib", "compute_capability",
    "persistence_mode", "ecc_mode", "power_limit_watts", "numa_node", "cpu_affinity", "cpu_affinity_str",
    "fabric",
)


def compare_backends(a, b):
    """Differences between two facts dicts on every field both backends can see ([] = agree)."""
    diffs = []
    for key in ("driver_version", "cuda_driver_version", "gpu_count", "nvlink_islands", "numa_nodes", "nvswitch"):
        if a.get(key) != b.get(key):
            diffs.append("%s: %r != %r" % (key, a.get(key), b.get(key)))
    if a["topology"]["links"] != b["topology"]["links"]:
        diffs.append("topology.links: %r != %r" % (a["topology"]["links"], b["topology"]["links"]))
    for ga, gb in zip(a["gpus"], b["gpus"]):
        for key in COMPARED_GPU_FIELDS:
            if ga.get(key) is None or gb.get(key) is None:
                if key in ga.get("errors", {}) or key in gb.get("errors", {}):
                    continue  # one side could not read it: recorded as an error there
            if ga.get(key) != gb.get(key):
                diffs.append("gpu %s %s: %r != %r" % (ga.get("index"), key, ga.get(key), gb.get(key)))
        for key in ("current", "pending"):
            if ga["mig"][key] != gb["mig"][key]:
                diffs.append("gpu %s mig.%s: %r != %r" % (ga.get("index"), key, ga["mig"][key], gb["mig"][key]))
        mig_a = [(d["gpu_instance_id"], d["compute_instance_id"], d["memory_bytes"] // MIB if d["memory_bytes"] else None)
                 for d in ga["mig"]["devices"]]
        mig_b = [(d["gpu_instance_id"], d["compute_instance_id"], d["memory_bytes"] // MIB if d["memory_bytes"] else None)
                 for d in gb["mig"]["devices"]]
        if sorted(mig_a, key=repr) != sorted(mig_b, key=repr):
            diffs.append("gpu %s mig.devices: %r != %r" % (ga.get("index"), mig_a, mig_b))
    return diffs


def _gib(value):
    return "%.1f GiB" % (value / float(1024 ** 3)) if value is not None else "? GiB"


def summarize(facts):
    """A compact human-readable summary (list of lines)."""
    if not facts["gpus"]:
        return ["No NVIDIA GPU on this host (%s)." % (facts.get("reason") or "none detected")]
    lines = ["%d GPU(s), driver %s, CUDA %s, backend %s" % (
        facts["gpu_count"], facts.get("driver_version"), facts.get("cuda_driver_version"), facts["backend"])]
    for g in facts["gpus"]:
        mig = g["mig"]
        lines.append("GPU%d %s %s cc %s %s MIG %s/%s persistence %s NUMA %s CPUs %s%s" % (
            g["index"], g.get("name"), _gib(g.get("memory_total_bytes")), g.get("compute_capability"),
            g.get("pci_bus_id"), mig.get("current") or "n/a", mig.get("pending") or "n/a",
            {True: "on", False: "off"}.get(g.get("persistence_mode"), "?"),
            g["numa_node"] if g.get("numa_node") is not None else "unknown",
            g.get("cpu_affinity_str") or "?",
            (" NVLink %d active" % g["nvlink_active_count"]) if g.get("nvlink_active_count") else ""))
    lines.extend(facts["topology"]["matrix"].split("\n"))
    lines.append("NVLink islands: %s%s; NUMA groups: %s" % (
        facts["nvlink_islands"], " (NVSwitch)" if facts.get("nvswitch") else "",
        ", ".join("%s: %s" % ("unknown" if grp["node"] is None else grp["node"], grp["gpus"])
                  for grp in facts["numa_groups"])))
    return lines


EXPECTED_KEYS = ("count", "name_pattern", "min_memory_mib", "nvlink", "nvlinks_per_gpu", "mig_disabled",
                 "persistence", "min_driver")


_INT_KEYS = ("count", "min_memory_mib", "nvlinks_per_gpu")


def validate_expected(expected):
    """Refuse expectations the checks cannot use, naming the key (the gpu_preflight role passes
    gpu_preflight_expected as gpu_facts' ``expected``): non-integer counts, bad regexes."""
    if not isinstance(expected, dict):
        raise UserError("expected (gpu_preflight_expected) must be a mapping, got %s" % type(expected).__name__)
    for key in _INT_KEYS:
        value = expected.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not _is_int(value) or int(value) < 0:
            raise UserError("expected.%s (gpu_preflight_expected.%s) must be a whole number >= 0, got %r" % (
                key, key, value), option="expected.%s" % key)
    pattern = expected.get("name_pattern")
    if pattern is not None:
        try:
            re.compile(str(pattern))
        except (re.error, RecursionError, OverflowError) as exc:
            raise UserError("expected.name_pattern (gpu_preflight_expected.name_pattern) is not a valid regular "
                            "expression: %s (%r)" % (exc, pattern), option="expected.name_pattern")
    if expected.get("min_driver") is not None and not _version_tuple(expected["min_driver"]):
        raise UserError("expected.min_driver (gpu_preflight_expected.min_driver) must be a version such as "
                        "'550.54', got %r" % (expected["min_driver"],), option="expected.min_driver")


def _is_int(value):
    if isinstance(value, int):
        return True
    if isinstance(value, float):
        return value.is_integer()
    try:
        int(str(value).strip())
    except (ValueError, TypeError):
        return False
    return True


def _version_tuple(text):
    """'550.54.15' -> (550, 54, 15); () when it is no version (a part of 10+ digits is a typo, not a driver)."""
    parts = re.findall(r"\d+", str(text or ""))
    if any(len(p) > 9 for p in parts):
        return ()
    return tuple(int(p) for p in parts)


def check_expected(facts, expected):
    """Every mismatch between detected ``facts`` and ``expected`` (a dict with EXPECTED_KEYS), as text.

    Also reports NVLinks that are down: inactive links on a GPU that has them, and GPUs with fewer
    active links than their peers (the failure that looks healthy until TP traffic crawls over PCIe).
    """
    expected = expected or {}
    validate_expected(expected)
    problems = []
    unknown = sorted(set(expected) - set(EXPECTED_KEYS))
    if unknown:
        problems.append("unknown key(s) in expected: %s (known: %s)" % (", ".join(unknown), ", ".join(EXPECTED_KEYS)))
    gpus = facts["gpus"]
    if expected.get("count") is not None and facts["gpu_count"] != int(expected["count"]):
        problems.append("GPU count: expected %s, found %d%s" % (
            expected["count"], facts["gpu_count"], " (%s)" % facts["reason"] if facts.get("reason") else ""))
    if expected.get("name_pattern"):
        for g in gpus:
            if not re.search(expected["name_pattern"], g.get("name") or ""):
                problems.append("GPU%d name %r does not match %r" % (g["index"], g.get("name"), expected["name_pattern"]))
    if expected.get("min_memory_mib") is not None:
        for g in gpus:
            if g.get("memory_total_mib") is None or g["memory_total_mib"] < int(expected["min_memory_mib"]):
                problems.append("GPU%d memory %s MiB is below the expected minimum %s MiB" % (
                    g["index"], g.get("memory_total_mib"), expected["min_memory_mib"]))
    nvlink = expected.get("nvlink")
    if nvlink == "required" and len(gpus) > 1 and len(facts["nvlink_islands"]) != 1:
        problems.append("NVLink required between all GPUs, but the NVLink islands are %s (matrix: %s)" % (
            facts["nvlink_islands"], facts["topology"]["links"]))
    if nvlink == "forbidden" and any(len(i) > 1 for i in facts["nvlink_islands"]):
        problems.append("NVLink forbidden, but GPUs %s are NVLink-connected" % [i for i in facts["nvlink_islands"] if len(i) > 1])
    if nvlink not in (None, "required", "forbidden", "any"):
        problems.append("expected.nvlink must be required, forbidden or any, got %r" % nvlink)
    if expected.get("mig_disabled"):
        for g in gpus:
            mig = g["mig"]
            if mig.get("current") == "enabled" or mig.get("pending") == "enabled":
                problems.append("GPU%d MIG is %s (pending %s): expected disabled; run the gpufleet.vllm.mig role" % (
                    g["index"], mig.get("current"), mig.get("pending")))
    if expected.get("persistence"):
        for g in gpus:
            if g.get("persistence_mode") is not True:
                problems.append("GPU%d persistence mode is %s: expected on (enable nvidia-persistenced)" % (
                    g["index"], {False: "off", None: "unknown"}[g.get("persistence_mode")]))
    if expected.get("min_driver") and facts.get("driver_version"):
        if _version_tuple(facts["driver_version"]) < _version_tuple(expected["min_driver"]):
            problems.append("driver %s is older than the expected minimum %s" % (
                facts["driver_version"], expected["min_driver"]))
    elif expected.get("min_driver") and gpus:
        problems.append("driver version unknown: cannot check min_driver %s" % expected["min_driver"])
    problems.extend(nvlink_problems(gpus, expected.get("nvlinks_per_gpu"), nvlink == "required", facts.get("nvlink_islands")))
    return problems


def nvlink_problems(gpus, per_gpu=None, nvlink_expected=False, islands=None):
    """Down NVLinks and GPUs with fewer active links than the peers of their NVLink island.

    An inactive link number is "down" only where NVLink is expected (``nvlink: required`` or
    ``nvlinks_per_gpu``) or where a peer GPU of the same island has that link number active: NVML may answer
    for link numbers a card does not wire (NVIDIA's mock NVML answers links 0-17 inactive on an A100
    with 12), and a PCIe-only host has every link inactive. ``islands`` (the facts' ``nvlink_islands``):
    bridges of different widths (GPUs 0-1 with 4 links, 2-3 with 2) are wired that way, not drift; without
    it all GPUs are one island."""
    problems = []
    counts = dict((g["index"], g.get("nvlink_active_count")) for g in gpus if g.get("nvlinks") is not None)
    island_of = _island_of(gpus, islands)
    for g in gpus:
        links = g.get("nvlinks")
        if links is None:
            continue
        # A GPU with every link down is in no island: its links are compared with every GPU's.
        peers = [p for p in gpus if island_of[g["index"]] == -1 or island_of[p["index"]] == island_of[g["index"]]]
        active_in_island = set(l["link"] for p in peers for l in (p.get("nvlinks") or []) if l.get("active"))
        down = [l["link"] for l in links if not l.get("active") and
                (nvlink_expected or per_gpu is not None or l["link"] in active_in_island)]
        if down:
            problems.append("GPU%d has %d NVLink(s) down: %s" % (g["index"], len(down), down))
        if per_gpu is not None and counts[g["index"]] != int(per_gpu):
            problems.append("GPU%d has %d active NVLinks, expected %s" % (g["index"], counts[g["index"]], per_gpu))
    if per_gpu is None:
        for idx, count in sorted(counts.items()):
            best = max([c for i, c in counts.items() if c and island_of[i] == island_of[idx]] or [0])
            if count is not None and 0 < count < best:
                problems.append("GPU%d has %d active NVLinks while its peers have %d (NVLink island %s)" % (
                    idx, count, best, sorted(i for i in counts if island_of[i] == island_of[idx])))
    return problems


def _island_of(gpus, islands):
    """{GPU index: island number}; GPUs in no listed island (or no islands given) share island -1."""
    out = dict((g["index"], -1) for g in gpus)
    for number, island in enumerate(islands or []):
        for idx in island:
            if idx in out and len(island) > 1:
                out[idx] = number
    return out
