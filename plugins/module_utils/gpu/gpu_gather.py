# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the gpu_facts module does, behind an injected command runner (no Ansible import).

community.general's shape: the commands are built here as exact argv lists and run through a runner
the module hands in (``runner.run(argv) -> (rc, stdout, stderr)``, ``runner.which(name) -> path or
None``), so the tests give a recording stand-in runner and assert the argv. NVML is loaded through
``load_pynvml`` (the tests give the fake NVML); sysfs is read under ``sysfs_root``.

- :func:`gather` reads the facts through NVML or nvidia-smi (``backend``), with the auto fallback.
- :func:`gpu_facts` is the module's whole job: option checks, gathering, ``min_gpus``, warnings
  and the expected-hardware mismatches.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import time

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError
from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu.gpu_facts_assembly import (
    check_expected,
    empty_facts,
    facts_from_nvml,
    facts_from_smi,
    smi_nvlinks,
    validate_expected,
)
from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu.nvidia_smi import (
    classify_error,
    parse_compute_cap_csv,
    parse_nvlink_remote,
    parse_nvlink_status,
    parse_query_xml,
    parse_topology,
)
from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu.nvml import (
    FATAL_HINTS,
    Nvml,
    NvmlFatalError,
    canonical_pci_bus_id,
    collect,
    load_pynvml,
    sysfs_pci_address,
)

SYSFS_PCI = "/sys/bus/pci/devices"
SYSFS_NODES = "/sys/devices/system/node"
_NODE_MEMTOTAL = re.compile(r"^Node\s+\d+\s+MemTotal:\s+(\d+)\s+kB\s*$", re.MULTILINE)
FALLBACK_KINDS = ("library_missing", "unofficial_library")
C_ENV = {"LC_ALL": "C", "LANG": "C"}   # nvidia-smi's words are parsed: the runner sets this environment
SMI_QUERY = ["-q", "-x"]
SMI_TOPOLOGY = ["topo", "-m"]
SMI_COMPUTE_CAP = ["--query-gpu=pci.bus_id,compute_cap", "--format=csv,noheader"]
SMI_NVLINK_STATUS = ["nvlink", "-s"]
SMI_NVLINK_REMOTE = ["nvlink", "-R"]


class NoGpu(UserError):
    """No driver or no GPU: not a failure unless min_gpus asks for GPUs (gather turns it into gpu_count 0)."""


class ModuleRunner(object):
    """The runner over an AnsibleModule (duck-typed): run_command with C_ENV, get_bin_path."""

    def __init__(self, module):
        self.module = module

    def run(self, argv):
        return self.module.run_command(argv, environ_update=C_ENV)

    def which(self, name):
        return self.module.get_bin_path(name)


def read_sysfs(bus_ids, root=SYSFS_PCI):
    """{bus id: {"numa_node": n}} from <root>/<address>/numa_node; unreadable entries are left out."""
    out = {}
    for bus in bus_ids:
        if not bus:
            continue
        path = os.path.join(root, sysfs_pci_address(bus), "numa_node")
        try:
            with open(path) as handle:
                out[canonical_pci_bus_id(bus)] = {"numa_node": int(handle.read().strip())}
        except (IOError, OSError, ValueError):
            continue
    return out


def read_numa_memory(root=SYSFS_NODES):
    """{node: bytes} from <root>/nodeN/meminfo's "Node N MemTotal: K kB" (what the vllm plan checks an instance's
    offload tier against under numactl --membind); {} where the kernel shows no nodes."""
    out = {}
    try:
        names = os.listdir(root)
    except (IOError, OSError):
        return out
    for name in names:
        if not re.match(r"node\d+\Z", name):
            continue
        try:
            with open(os.path.join(root, name, "meminfo")) as handle:
                found = _NODE_MEMTOTAL.search(handle.read())
        except (IOError, OSError):
            continue
        if found:
            out[int(name[4:])] = int(found.group(1)) * 1024
    return dict(sorted(out.items()))


def gather_nvml(load=None, sysfs_root=SYSFS_PCI):
    nvml = Nvml((load or load_pynvml)())
    nvml.init()
    try:
        raw = collect(nvml, os.cpu_count() or 1)
    finally:
        nvml.shutdown()
    return facts_from_nvml(raw, read_sysfs([g.get("pci_bus_id") for g in raw["gpus"]], sysfs_root))


def smi_output(runner, path, args):
    """stdout of ``path args``; no devices or no driver raise NoGpu, other failures NvmlFatalError."""
    rc, out, err = runner.run([path] + args)
    if rc != 0 or (not out.strip() and err.strip()):
        text = (out + "\n" + err).strip()
        kind = classify_error(text)
        if kind == "no_devices":
            raise NoGpu("nvidia-smi: No devices were found")
        if kind in ("driver_not_loaded", "library_not_found"):
            raise NoGpu("NVIDIA driver not usable (%s): %s" % (kind, text.splitlines()[0] if text else ""))
        raise NvmlFatalError(kind if kind in FATAL_HINTS else "unknown",
                             "%s %s exited %d: %s" % (path, " ".join(args), rc, text))
    return out


def gather_smi(runner, sysfs_root=SYSFS_PCI):
    path = runner.which("nvidia-smi")
    if not path:
        raise NoGpu("nvidia-smi not found in PATH")
    query = parse_query_xml(smi_output(runner, path, SMI_QUERY))
    if not query["gpus"]:
        return facts_from_smi(query)
    topo = parse_topology(smi_output(runner, path, SMI_TOPOLOGY))
    caps = {}
    rc, out, dummy = runner.run([path] + SMI_COMPUTE_CAP)
    if rc == 0:
        caps = parse_compute_cap_csv(out)
    bus_ids = [g["pci_bus_id"] for g in query["gpus"]]
    return facts_from_smi(query, topo, caps, read_sysfs(bus_ids, sysfs_root), gather_smi_nvlinks(runner, path, bus_ids))


def gather_smi_nvlinks(runner, path, bus_ids):
    """Per-link state (nvlink -s) and remote (nvlink -R); None when nvidia-smi cannot say."""
    rc, out, dummy = runner.run([path] + SMI_NVLINK_STATUS)
    if rc != 0:
        return None
    rc_r, out_r, dummy = runner.run([path] + SMI_NVLINK_REMOTE)
    return smi_nvlinks(parse_nvlink_status(out), parse_nvlink_remote(out_r) if rc_r == 0 else {}, bus_ids)


def _smi_fallback(runner, nvml_error, sysfs_root):
    try:
        facts = gather_smi(runner, sysfs_root)
    except NoGpu as smi_exc:
        if nvml_error.kind == "library_missing" and not runner.which("nvidia-smi"):
            raise NoGpu("no NVIDIA driver tools: nvidia-ml-py (pynvml) is not installed and nvidia-smi "
                        "is not in PATH")
        raise NoGpu("%s; nvidia-smi fallback: %s" % (nvml_error.message, smi_exc.message))
    facts["errors"]["nvml"] = nvml_error.message
    return facts


def gather(backend, runner, load=None, sysfs_root=SYSFS_PCI):
    """The facts through ``backend`` (auto, nvml, nvidia-smi); NoGpu where there is no driver or GPU."""
    if backend == "nvidia-smi":
        return gather_smi(runner, sysfs_root)
    try:
        return gather_nvml(load, sysfs_root)
    except NvmlFatalError as exc:
        if exc.absent:
            raise NoGpu("NVIDIA driver not usable: %s" % exc.message)
        if backend == "auto" and exc.kind in FALLBACK_KINDS:
            return _smi_fallback(runner, exc, sysfs_root)
        if exc.kind in FALLBACK_KINDS:
            exc.message += " (or set backend=nvidia-smi)"
        raise


def read_warnings(facts):
    """One warning per GPU with fields it could not read (not_supported is not a failure)."""
    out = []
    for gpu in facts["gpus"]:
        failed = sorted(k for k, v in gpu["errors"].items() if not str(v).startswith("not_supported"))
        if failed:
            index = gpu["index"]
            out.append("GPU%d: could not read %s (see gpus[%d].errors)" % (index, ", ".join(failed), index))
    return out


def gpu_facts(params, runner, load=None, sysfs_root=SYSFS_PCI, nodes_root=SYSFS_NODES):
    """(facts, warnings) for the module's ``params`` (backend, expected, min_gpus); UserError otherwise."""
    min_gpus = params["min_gpus"]
    if min_gpus < 0:
        raise UserError("min_gpus must be >= 0, got %d" % min_gpus, option="min_gpus")
    validate_expected(params["expected"])
    started = time.time()
    try:
        facts = gather(params["backend"], runner, load, sysfs_root)
    except NoGpu as exc:
        facts = empty_facts("none", exc.message)
    facts["numa_memory_bytes"] = read_numa_memory(nodes_root)
    facts["collection_seconds"] = round(time.time() - started, 4)
    if facts["gpu_count"] < min_gpus:
        raise UserError("found %d GPU(s) but min_gpus=%d%s. Check the driver with 'nvidia-smi', or lower "
                        "min_gpus" % (facts["gpu_count"], min_gpus,
                                      " (%s)" % facts["reason"] if facts["reason"] else ""), **facts)
    facts["mismatches"] = check_expected(facts, params["expected"])
    return facts, read_warnings(facts)
