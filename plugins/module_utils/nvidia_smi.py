# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.vllm maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure parsers for ``nvidia-smi`` output (no Ansible import, usable on its own).

Entry points other code relies on (shapes are part of the contract):

``parse_query_xml(text) -> dict``
    ``nvidia-smi -q -x``; any schema in use (DTD v7 to v13, with or without DOCTYPE, Windows output,
    files listing fewer ``<gpu>`` elements than ``attached_gpus``).

``parse_topology(text) -> dict``
    ``nvidia-smi topo -m``; tab- or space-separated, ANSI escapes, NIC rows/columns (``NICn``,
    ``mlx5_n``), old labels (``SOC``), empty CPU affinity cells, with or without the legend.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import xml.etree.ElementTree as ET

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_NA = ("", "n/a", "[n/a]", "not supported", "[not supported]", "none", "unknown error",
       "requested functionality has been deprecated", "insufficient permissions")
_MIG_WORDS = {"enabled": "enabled", "disabled": "disabled"}


class NvidiaSmiParseError(ValueError):
    """The text is not nvidia-smi output of the expected kind."""


def _text(elem, path):
    if elem is None:
        return None
    found = elem.find(path)
    if found is None or found.text is None:
        return None
    value = found.text.strip()
    if value.lower() in _NA:
        return None
    return value


def _int(value):
    if value is None:
        return None
    try:
        return int(value.strip(), 0) if value.strip().lower().startswith("0x") else int(value.strip())
    except ValueError:
        return None


def _mib(value):
    """'143771 MiB' -> 143771; N/A or garbage -> None."""
    if value is None:
        return None
    match = re.match(r"^\s*(\d+)\s*MiB\s*$", value, re.IGNORECASE)
    return int(match.group(1)) if match else None


def _watts(value):
    if value is None:
        return None
    match = re.match(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*W\s*$", value)
    return float(match.group(1)) if match else None


def _enabled(value):
    if value is None:
        return None
    low = value.lower()
    if low == "enabled":
        return True
    if low == "disabled":
        return False
    return None


def _mig_word(value):
    if value is None:
        return None
    return _MIG_WORDS.get(value.lower())


def _mig_devices(gpu):
    devices = []
    container = gpu.find("mig_devices")
    if container is None:
        return devices
    for dev in container.findall("mig_device"):
        devices.append({
            "index": _int(_text(dev, "index")),
            "gpu_instance_id": _int(_text(dev, "gpu_instance_id")),
            "compute_instance_id": _int(_text(dev, "compute_instance_id")),
            "memory_total_mib": _mib(_text(dev, "fb_memory_usage/total")),
            "uuid": _text(dev, "uuid"),
        })
    return devices


def parse_query_xml(text):
    """Parse ``nvidia-smi -q -x``.

    Returns ``{"driver_version", "cuda_version", "attached_gpus", "gpus": [...]}``; each GPU holds
    ``product_name``, ``pci_bus_id`` (as printed), ``uuid``, ``minor_number`` (int|None),
    ``memory_total_mib`` (int|None), ``persistence_mode`` (bool|None),
    ``mig`` ``{"current", "pending"}`` ("enabled"|"disabled"|None), ``mig_devices``
    ``[{"gpu_instance_id", "compute_instance_id", "memory_total_mib", ...}]`` and a few extra keys
    (``ecc_current``, ``ecc_pending``, ``power_limit_watts``, ``architecture``,
    ``fabric_state``, ``fabric_status``, ``processes``).
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    # Drop the DOCTYPE: expat would not fetch the DTD anyway, but some outputs carry odd ones.
    text = re.sub(r"<!DOCTYPE[^>]*>", "", text, count=1)
    try:
        root = ET.fromstring(text.strip().encode("utf-8"))
    except ET.ParseError as exc:
        raise NvidiaSmiParseError("nvidia-smi -q -x output is not valid XML: %s" % exc)
    if root.tag != "nvidia_smi_log":
        raise NvidiaSmiParseError("expected <nvidia_smi_log>, found <%s>" % root.tag)

    gpus = []
    for gpu in root.findall("gpu"):
        pci_bus_id = gpu.get("id") or _text(gpu, "pci/pci_bus_id")
        processes = []
        procs = gpu.find("processes")
        if procs is not None:
            for proc in procs.findall("process_info"):
                processes.append({
                    "pid": _int(_text(proc, "pid")),
                    "type": _text(proc, "type"),
                    "name": _text(proc, "process_name"),
                    "used_memory_mib": _mib(_text(proc, "used_memory")),
                })
        power = _text(gpu, "gpu_power_readings/current_power_limit")
        if power is None:  # DTD <= v11 name
            power = _text(gpu, "power_readings/power_limit") or _text(gpu, "power_readings/current_power_limit")
        gpus.append({
            "product_name": _text(gpu, "product_name"),
            "architecture": _text(gpu, "product_architecture"),
            "pci_bus_id": pci_bus_id,
            "uuid": _text(gpu, "uuid"),
            "minor_number": _int(_text(gpu, "minor_number")),
            "memory_total_mib": _mib(_text(gpu, "fb_memory_usage/total")),
            "persistence_mode": _enabled(_text(gpu, "persistence_mode")),
            "mig": {
                "current": _mig_word(_text(gpu, "mig_mode/current_mig")),
                "pending": _mig_word(_text(gpu, "mig_mode/pending_mig")),
            },
            "mig_devices": _mig_devices(gpu),
            "ecc_current": _enabled(_text(gpu, "ecc_mode/current_ecc")),
            "ecc_pending": _enabled(_text(gpu, "ecc_mode/pending_ecc")),
            "power_limit_watts": _watts(power),
            "fabric_state": _text(gpu, "fabric/state"),
            "fabric_status": _text(gpu, "fabric/status"),
            "processes": processes,
        })
    return {
        "driver_version": _text(root, "driver_version"),
        "cuda_version": _text(root, "cuda_version"),
        "attached_gpus": _int(_text(root, "attached_gpus")),
        "gpus": gpus,
    }


_GPU_LABEL = re.compile(r"^GPU(\d+)$")
_NIC_LABEL = re.compile(r"^(NIC\d+|mlx\d+_\d+|[a-z]+\d*_\d+)$")
_LEGEND_START = re.compile(r"^\s*Legend\s*:?\s*$")
_LINK_WORDS = re.compile(r"^(X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|NVB|NVLINK\d*|C2C)$")


def _split_cells(line):
    """Split a matrix line into cells; tabs keep empty cells, runs of spaces separate otherwise."""
    if "\t" in line:
        cells = [c.strip() for c in line.split("\t")]
        # A leading tab (header row) leaves an empty first cell.
        return cells
    return line.split()


def parse_topology(text):
    """Parse ``nvidia-smi topo -m``.

    Returns ``{"gpus": ["GPU0", ...], "nics": ["NIC0", ...], "links": {"0-1": "NV12", ...},
    "affinity": {"0": {"cpu_affinity": str, "numa_affinity": str|None, "gpu_numa_id": str|None}},
    "nic_links": {"0": {"NIC0": "PIX"}}, "nic_names": {"NIC0": "mlx5_0"}}``.
    ``links`` holds GPU pairs i<j only; ``SOC`` (old drivers) is reported as ``SYS``.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = _ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")

    header = None
    header_idx = None
    for idx, line in enumerate(lines):
        tokens = line.split()
        # The header starts with GPU0; matrix rows start with GPUn followed by a link word ('X', ...).
        if tokens and _GPU_LABEL.match(tokens[0]) and (len(tokens) == 1 or not _LINK_WORDS.match(tokens[1])):
            header = line
            header_idx = idx
            break
    if header is None:
        raise NvidiaSmiParseError("no 'GPU0 ...' header found in nvidia-smi topo -m output")

    columns = _header_columns(header)
    device_cols = [c for c in columns if c not in ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")]
    gpus = [c for c in device_cols if _GPU_LABEL.match(c)]
    nics = [c for c in device_cols if not _GPU_LABEL.match(c)]

    links = {}
    nic_links = {}
    affinity = {}
    nic_names = {}
    for line in lines[header_idx + 1:]:
        if _LEGEND_START.match(line):
            break
        stripped = line.strip()
        if not stripped:
            continue
        cells = _split_cells(line)
        while cells and cells[0] == "":
            cells.pop(0)
        if not cells:
            continue
        row = cells[0]
        values = cells[1:]
        if row not in device_cols:
            continue
        row_gpu = _GPU_LABEL.match(row)
        for col_idx, col in enumerate(device_cols):
            if col_idx >= len(values):
                break
            value = values[col_idx].strip()
            if value == "SOC":
                value = "SYS"
            if row_gpu and _GPU_LABEL.match(col):
                i, j = int(row_gpu.group(1)), int(_GPU_LABEL.match(col).group(1))
                if i < j:
                    links["%d-%d" % (i, j)] = value
            elif row_gpu:
                nic_links.setdefault(row_gpu.group(1), {})[col] = value
        if row_gpu:
            rest = values[len(device_cols):]
            affinity[row_gpu.group(1)] = _affinity_cells(rest, "\t" in line, columns[len(device_cols):])
    for line in lines:
        name_match = re.match(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$", line)
        if name_match:
            nic_names[name_match.group(1)] = name_match.group(2)
    return {
        "gpus": gpus,
        "nics": nics,
        "links": links,
        "affinity": affinity,
        "nic_links": nic_links,
        "nic_names": nic_names,
    }


def _header_columns(header):
    cells = [c.strip() for c in re.split(r"\t|\s{2,}", header.strip()) if c.strip()]
    columns = []
    for cell in cells:
        # Space-separated headers: 'GPU0 GPU1 CPU Affinity' may come as one cell.
        parts = cell.split()
        buf = []
        for part in parts:
            if _GPU_LABEL.match(part) or _NIC_LABEL.match(part):
                if buf:
                    columns.append(" ".join(buf))
                    buf = []
                columns.append(part)
            else:
                buf.append(part)
        if buf:
            columns.append(" ".join(buf))
    # Normalise the trailing descriptive columns when spaces glued them together.
    joined = []
    for col in columns:
        for known in ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID"):
            if col != known and known in col:
                pieces = [p for p in re.split(r"(CPU Affinity|NUMA Affinity|GPU NUMA ID)", col) if p.strip()]
                joined.extend(p.strip() for p in pieces)
                break
        else:
            joined.append(col)
    return joined


def _affinity_cells(rest, tabbed, names):
    out = {"cpu_affinity": "", "numa_affinity": None, "gpu_numa_id": None}
    keys = []
    for name in names:
        keys.append({"CPU Affinity": "cpu_affinity", "NUMA Affinity": "numa_affinity",
                     "GPU NUMA ID": "gpu_numa_id"}.get(name))
    if tabbed:
        # Cells in order; nvidia-smi writes an extra empty cell before 'GPU NUMA ID'.
        values = [v.strip() for v in rest]
        non_empty_tail = [v for v in values[1:] if v != ""]
        cpu = values[0] if values else ""
        out["cpu_affinity"] = "" if cpu.upper() == "N/A" else cpu
        tail_keys = [k for k in keys[1:] if k]
        for key, value in zip(tail_keys, non_empty_tail):
            out[key] = None if value.upper() == "N/A" else value
        return out
    # Space separated: CPU affinity is one token (ranges use commas, no spaces); it may be absent.
    values = [v for v in rest if v != ""]
    cpu_like = re.compile(r"^\d[\d,\-]*$")
    if len(values) >= 1 and cpu_like.match(values[0]) and (len(values) > len([k for k in keys if k]) - 1):
        out["cpu_affinity"] = values.pop(0)
    elif len(values) >= 1 and values[0].upper() == "N/A" and len(values) >= len([k for k in keys if k]):
        values.pop(0)
    tail_keys = [k for k in keys[1:] if k]
    for key, value in zip(tail_keys, values):
        out[key] = None if value.upper() == "N/A" else value
    return out


def parse_compute_cap_csv(text):
    """Parse ``nvidia-smi --query-gpu=pci.bus_id,compute_cap --format=csv,noheader``.

    Returns ``{pci_bus_id: "9.0"}``; rows whose value is not a version are left out.
    """
    out = {}
    for line in text.replace("\r", "").split("\n"):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 2:
            continue
        if re.match(r"^\d+\.\d+$", parts[1]):
            out[parts[0]] = parts[1]
    return out


# (pattern, kind) for messages nvidia-smi prints when it cannot talk to the driver; kinds match
# nvml.FATAL_HINTS so both backends give the same advice.
_SMI_FAILURES = (
    (re.compile(r"version mismatch", re.I), "lib_rm_version_mismatch"),
    (re.compile(r"couldn't communicate with the NVIDIA driver|driver not loaded|"
                r"Driver Not Loaded", re.I), "driver_not_loaded"),
    (re.compile(r"Insufficient Permissions|Permission denied", re.I), "no_permission"),
    (re.compile(r"libnvidia-ml\.so|NVML Shared Library Not Found", re.I), "library_not_found"),
    (re.compile(r"No devices were found", re.I), "no_devices"),
    (re.compile(r"GPU is lost|fallen off the bus", re.I), "gpu_is_lost"),
)


def classify_error(text):
    """Kind of an nvidia-smi failure message ('no_devices', 'driver_not_loaded', ...) or 'unknown'."""
    for pattern, kind in _SMI_FAILURES:
        if pattern.search(text or ""):
            return kind
    return "unknown"
