# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
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

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_NA = ("", "n/a", "[n/a]", "not supported", "[not supported]", "none", "unknown error",
       "requested functionality has been deprecated", "insufficient permissions")
_MIG_WORDS = {"enabled": "enabled", "disabled": "disabled"}


class NvidiaSmiParseError(UserError, ValueError):
    """The text is not nvidia-smi output of the expected kind; ``problem`` is what was wrong with it."""

    def __init__(self, problem):
        self.problem = problem
        super(NvidiaSmiParseError, self).__init__(
            "could not parse nvidia-smi output: %s. Check 'nvidia-smi -q -x' and 'nvidia-smi topo -m' on the host, "
            "or use backend=nvml" % problem)


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


# A DOCTYPE with an optional internal subset: drivers 340-352 print the whole DTD inline
# (<!DOCTYPE nvidia_smi_log [ <!ELEMENT ...> ... ]>); its '>' characters end a naive match early.
_DOCTYPE = re.compile(r"<!DOCTYPE\s+[^\[>]*(\[.*?\]\s*)?>", re.DOTALL)


def _strip_doctype(text):
    """Remove the DOCTYPE (and its internal subset) before parsing, so no entity it declares can
    be expanded; an entity declared anywhere else is refused."""
    text = _DOCTYPE.sub("", text, count=1)
    if re.search(r"<!(DOCTYPE|ENTITY)", text):
        raise NvidiaSmiParseError("nvidia-smi -q -x output declares entities outside its DOCTYPE: refused "
                                  "(entity expansion is never enabled)")
    return text


def _xml_root(text):
    """The ``<nvidia_smi_log>`` element of ``text`` (bytes or str, any line ending, BOM and DOCTYPE dropped)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    text = _strip_doctype(text)
    try:
        root = ET.fromstring(text.strip().encode("utf-8"))
    except ET.ParseError as exc:
        raise NvidiaSmiParseError("nvidia-smi -q -x output is not valid XML: %s" % exc)
    if root.tag != "nvidia_smi_log":
        raise NvidiaSmiParseError("expected <nvidia_smi_log>, found <%s>" % root.tag)
    return root


def _processes(gpu):
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
    return processes


def _power_limit(gpu):
    power = _text(gpu, "gpu_power_readings/current_power_limit")
    if power is None:  # DTD <= v11 name
        power = _text(gpu, "power_readings/power_limit") or _text(gpu, "power_readings/current_power_limit")
    return _watts(power)


def _gpu_from_xml(gpu):
    """One ``<gpu>`` element as the dict ``parse_query_xml`` documents."""
    pci_bus_id = gpu.get("id") or _text(gpu, "pci/pci_bus_id")
    processes = _processes(gpu)
    power_limit_watts = _power_limit(gpu)
    return {
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
        "power_limit_watts": power_limit_watts,
        "fabric_state": _text(gpu, "fabric/state"),
        "fabric_status": _text(gpu, "fabric/status"),
        "processes": processes,
    }


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
    root = _xml_root(text)
    return {
        "driver_version": _text(root, "driver_version"),
        "cuda_version": _text(root, "cuda_version"),
        "attached_gpus": _int(_text(root, "attached_gpus")),
        "gpus": [_gpu_from_xml(gpu) for gpu in root.findall("gpu")],
    }


_GPU_LABEL = re.compile(r"^GPU(\d+)$")
_LEGEND_START = re.compile(r"^\s*(NIC\s+)?Legend\s*:?\s*$")
# Header tokens; finditer also separates labels a lost tab glued together ('NIC8NIC9', seen in
# vllm-project/vllm#13855). Descriptive columns first so 'GPU NUMA ID' is not read as a GPU label.
_HEADER_TOKEN = re.compile(r"CPU Affinity|NUMA Affinity|GPU NUMA ID|GPU\d+|NIC\d+|mlx\d+_\d+|[a-z]+\d*_\d+")
_ROW_LABEL = re.compile(r"^\s*(GPU\d+|NIC\d+|mlx\d+_\d+|[a-z]+\d*_\d+)(?![\w])")
# One matrix cell; cells glued by a lost separator ('NODENODE') still split.
_CELL = re.compile(r"X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|NVB|C2C")
_DESCRIPTIVE = {"CPU Affinity": "cpu_affinity", "NUMA Affinity": "numa_affinity", "GPU NUMA ID": "gpu_numa_id"}
_CPU_LIST = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")
_NA_CELL = ("N/A", "n/a")


def _header(line):
    """[(name, start column after tab expansion)] of a ``topo -m`` header line."""
    expanded = _ANSI.sub("", line).expandtabs(8)
    return [(m.group(0), m.start()) for m in _HEADER_TOKEN.finditer(expanded)]


def _find_header(lines):
    for idx, line in enumerate(lines):
        tokens = _ANSI.sub("", line).split()
        # The header starts with GPU0 then another label; the matrix row GPU0 goes on with a cell ('X').
        if tokens and tokens[0].startswith("GPU0") and (len(tokens) == 1 or not _CELL.fullmatch(tokens[1])):
            return idx, _header(line)
    raise NvidiaSmiParseError("no 'GPU0 ...' header found in nvidia-smi topo -m output")


def _cells_by_tokens(text, pos, count):
    """``count`` cells read in order from ``text[pos:]``; (cells, end) or (partial, end)."""
    cells = []
    while len(cells) < count:
        while pos < len(text) and text[pos] in " \t":
            pos += 1
        match = _CELL.match(text, pos)
        if not match:
            break
        cells.append(match.group(0))
        pos = match.end()
    return cells, pos


def _cells_by_position(expanded, columns):
    """{column name: token} taking each whitespace token under the nearest header column start."""
    out = {}
    for match in re.finditer(r"\S+", expanded):
        nearest = min(columns, key=lambda col: abs(col[1] - match.start()))
        out.setdefault(nearest[0], []).append(match.group(0))
    return out


def _valid_cpu_list(text):
    """'0-31,64-95' is a CPU list: ranges ascending, start <= end."""
    if not _CPU_LIST.match(text):
        return False
    last = -1
    for part in text.split(","):
        bounds = [int(b) for b in part.split("-")]
        if bounds[0] <= last or bounds[-1] < bounds[0]:
            return False
        last = bounds[-1]
    return True


def split_glued_affinity(token, known_cpu_lists=()):
    """'0-31,64-951' -> ('0-31,64-95', '1'): a CPU list that ran into the NUMA node, or None.

    Candidates keep a valid ascending CPU list; one that another row printed whole wins, else
    the shortest NUMA suffix (node ids are small)."""
    candidates = []
    for cut in range(len(token) - 1, 0, -1):
        cpu, numa = token[:cut], token[cut:]
        if numa.isdigit() and _valid_cpu_list(cpu):
            candidates.append((cpu, numa))
    for cpu, numa in candidates:
        if cpu in known_cpu_lists:
            return cpu, numa
    return candidates[0] if candidates else None


def _row_cells(line, label_end, device_cols, warnings):
    """Device cells of one row, by tokens and by header positions, cross-checked.

    Tokens (order) win when they give one cell per column: nvidia-smi separates cells with tabs,
    so positions drift when a cell is wider than a tab stop; positions fill in when a lost or
    doubled separator leaves the token count short."""
    expanded = line.expandtabs(8)
    by_tokens, end = _cells_by_tokens(line, label_end, len(device_cols))
    offset = len(line[:label_end].expandtabs(8))
    placed = _cells_by_position(" " * offset + expanded[offset:], device_cols)
    by_position = [placed.get(name, [None])[0] if len(placed.get(name, [])) == 1 else None
                   for name, dummy in device_cols]
    label = line[:label_end].strip()
    if len(by_tokens) == len(device_cols):
        if any(p is not None and _CELL.fullmatch(p) and p != t for p, t in zip(by_position, by_tokens)):
            warnings.append("%s: cells are not aligned under the header; read in order" % label)
        return by_tokens, end
    if all(p is not None and _CELL.fullmatch(p) for p in by_position):
        warnings.append("%s: %d cell(s) for %d columns in order; read by header position" % (
            label, len(by_tokens), len(device_cols)))
        return by_position, end
    warnings.append("%s: only %d of %d cells could be read" % (label, len(by_tokens), len(device_cols)))
    return by_tokens + [None] * (len(device_cols) - len(by_tokens)), end


def _tail_tokens(tail_text, tail_cols):
    """(value, start column) of the affinity cells; notes after them are ignored."""
    out = []
    for match in re.finditer(r"\S+", tail_text):
        value = match.group(0)
        if not (_CPU_LIST.match(value) or value in _NA_CELL) or len(out) >= len(tail_cols):
            break
        out.append((value, match.start()))
    return out


def _affinity(raw_tail, tail_text, tail_cols, known_cpu_lists):
    """Assign the affinity cells by order, shape and header position.

    All cells present: in order. A cell short: on tab-separated lines the first tab cell is the CPU
    affinity (empty when the driver cannot place the GPU); on space-aligned lines a token goes to
    the header column nearest to it. A CPU list that ran into the NUMA column ('0-31,64-951') is
    split by ``split_glued_affinity`` when a cell is missing and it sits under 'CPU Affinity'."""
    keys = [_DESCRIPTIVE[name] for name, dummy in tail_cols]
    tokens = _tail_tokens(tail_text, tail_cols)
    if len(tokens) >= len(keys):
        return _affinity_dict(zip(keys, [t[0] for t in tokens]))
    if "\t" not in raw_tail:
        raw_tail = _retab(tokens, len(tail_text) - len(raw_tail)) or raw_tail
    if "\t" in raw_tail:
        cells = [c.strip() for c in raw_tail.split("\t")[1:]]
        values = [cells[0] if cells else ""] + [c for c in cells[1:] if c]
        if keys[:1] == ["cpu_affinity"] and len(values) < len(keys) and values[0]:
            values = _unglue(values[0], known_cpu_lists) + values[1:]
        return _affinity_dict(zip(keys, values))
    if tokens and "numa_affinity" in keys:
        nearest = min(tail_cols, key=lambda col: abs(col[1] - tokens[0][1]))[0]
        if nearest == "CPU Affinity":
            values = _unglue(tokens[0][0], known_cpu_lists)
            if len(values) == 2:
                tokens = [(values[0], tokens[0][1]), (values[1], None)] + tokens[1:]
                return _affinity_dict(zip(keys, [t[0] for t in tokens]))
    assigned = [(_DESCRIPTIVE[min(tail_cols, key=lambda col: abs(col[1] - start))[0]], value)
                for value, start in tokens]
    return _affinity_dict(assigned)


def _retab(tokens, cells_end):
    """A space-aligned row's affinity cells back in the tabs they were printed with, or None.

    nvidia-smi separates the cells with tabs ("\\t0-47\\t0\\t\\tN/A", an empty CPU affinity "\\t\\t0\\t\\tN/A");
    a terminal copy expands them to the next multiple of 8, so each value of the row starts on a tab stop
    and the run of spaces before it crossed one stop per tab. The header cannot tell an empty cell from a
    shifted one (its labels are wider than a stop: a value sits halfway between two of them), the row's own
    stops can. ``cells_end``: the column where the row's last GPU/NIC cell ends. None where a value is off
    the stops (the text was not tab-expanded)."""
    prev_end, out = cells_end, []
    for value, start in tokens:
        first_stop = (prev_end // 8 + 1) * 8
        if start % 8 or start < first_stop:
            return None
        out.append("\t" * ((start - first_stop) // 8 + 1) + value)
        prev_end = start + len(value)
    return "".join(out) if out else None


def _unglue(token, known_cpu_lists):
    if token in known_cpu_lists:
        return [token]
    split = split_glued_affinity(token, known_cpu_lists)
    return list(split) if split else [token]


def _affinity_dict(pairs):
    out = {"cpu_affinity": "", "numa_affinity": None, "gpu_numa_id": None}
    for key, value in pairs:
        if key == "cpu_affinity":
            out[key] = "" if value in _NA_CELL else value
        else:
            out[key] = None if value in _NA_CELL or value == "" else value
    return out


def _matrix_rows(lines):
    rows = []
    for line in lines:
        if _LEGEND_START.match(line):
            break
        match = _ROW_LABEL.match(line)
        if match:
            rows.append((match.group(1), line, match.end()))
    return rows


def parse_topology(text):
    """Parse ``nvidia-smi topo -m``.

    Returns ``{"gpus": ["GPU0", ...], "nics": ["NIC0", ...], "links": {"0-1": "NV12", ...},
    "affinity": {"0": {"cpu_affinity": str, "numa_affinity": str|None, "gpu_numa_id": str|None}},
    "nic_links": {"0": {"NIC0": "PIX"}}, "nic_names": {"NIC0": "mlx5_0"}, "warnings": [str]}``.
    ``links`` holds GPU pairs i<j only. ``SOC`` (drivers before 384 printed it for what is now
    ``SYS``: a path across the SMP interconnect) is reported as ``SYS`` so placement compares
    one word. Cells are read by tokens and by the header's column positions and cross-checked;
    ``warnings`` says where the two disagreed or a CPU list ran into the NUMA column.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    lines = _ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "\n").split("\n")
    header_idx, columns = _find_header(lines)
    device_cols = [c for c in columns if c[0] not in _DESCRIPTIVE]
    tail_cols = [c for c in columns if c[0] in _DESCRIPTIVE]
    names = [c[0] for c in device_cols]
    result = {"gpus": [n for n in names if _GPU_LABEL.match(n)], "nics": [n for n in names if not _GPU_LABEL.match(n)],
              "links": {}, "affinity": {}, "nic_links": {}, "nic_names": {}, "warnings": []}
    rows = [r for r in _matrix_rows(lines[header_idx + 1:]) if r[0] in names]
    parsed = [(label, line) + _row_cells(line, end, device_cols, result["warnings"]) for label, line, end in rows]
    known = set()
    for label, line, cells, end in parsed:
        tail = _tail_tokens(line.expandtabs(8)[len(line[:end].expandtabs(8)):], tail_cols)
        if len(tail) == len(tail_cols) and tail:
            known.add(tail[0][0])
    for label, line, cells, end in parsed:
        _store_row(result, label, cells, names)
        if _GPU_LABEL.match(label):
            offset = len(line[:end].expandtabs(8))
            tail_text = " " * offset + line.expandtabs(8)[offset:]
            aff = _affinity(line[end:], tail_text, tail_cols, known)
            result["affinity"][label[3:]] = aff
    for line in lines:
        name_match = re.match(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$", line)
        if name_match:
            result["nic_names"][name_match.group(1)] = name_match.group(2)
    return result


def _store_row(result, label, cells, names):
    row_gpu = _GPU_LABEL.match(label)
    if not row_gpu:
        return
    for col, value in zip(names, cells):
        if value is None:
            continue
        value = "SYS" if value == "SOC" else value
        col_gpu = _GPU_LABEL.match(col)
        if col_gpu:
            i, j = int(row_gpu.group(1)), int(col_gpu.group(1))
            if i < j:
                result["links"]["%d-%d" % (i, j)] = value
        else:
            result["nic_links"].setdefault(row_gpu.group(1), {})[col] = value


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


_NVLINK_GPU = re.compile(r"^\s*GPU\s+(\d+)\s*:")
_NVLINK_STATUS = re.compile(r"^\s*Link\s+(\d+)\s*:\s*(.*?)\s*$")
_NVLINK_REMOTE = re.compile(r"^\s*Link\s+(\d+)\s*:\s*Remote Device\s+([0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+\.[0-9A-Fa-f])")


def _nvlink_lines(text):
    """(gpu index, link, rest of line) for each 'Link N: ...' line under a 'GPU i: ...' line."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    gpu = None
    for line in _ANSI.sub("", text or "").replace("\r", "").split("\n"):
        head = _NVLINK_GPU.match(line)
        if head:
            gpu = int(head.group(1))
            continue
        if gpu is not None:
            yield gpu, line


def parse_nvlink_status(text):
    """``nvidia-smi nvlink -s`` -> ``{gpu index: [{"link", "active", "speed_gbps"}]}``.

    A link prints its speed ('26.562 GB/s') when active and ``<inactive>`` otherwise; a GPU with
    no NVLink has a header line and no link lines (an empty list)."""
    out = {}
    for gpu, line in _nvlink_lines(text):
        out.setdefault(gpu, [])
        match = _NVLINK_STATUS.match(line)
        if not match:
            continue
        value = match.group(2)
        speed = re.match(r"^([0-9]+(?:\.[0-9]+)?)\s*GB/s$", value)
        out[gpu].append({"link": int(match.group(1)), "active": speed is not None,
                         "speed_gbps": float(speed.group(1)) if speed else None})
    return out


def parse_nvlink_remote(text):
    """``nvidia-smi nvlink -R`` -> ``{gpu index: {link: remote PCI bus id as printed}}``
    ('Link 0: Remote Device 00000008:00:00.0: Link 32')."""
    out = {}
    for gpu, line in _nvlink_lines(text):
        out.setdefault(gpu, {})
        match = _NVLINK_REMOTE.match(line)
        if match:
            out[gpu][int(match.group(1))] = match.group(2)
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
