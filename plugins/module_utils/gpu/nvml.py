# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Thin NVML layer: the only file of the collection that imports ``pynvml`` (nvidia-ml-py).

- Importing this file has no side effect; ``load_pynvml()`` imports the library on demand.
- ``Nvml`` wraps a loaded library with an error taxonomy: a failing *field* becomes ``None``
  and the error is recorded on that GPU (``errors[field]``); only a broken NVML as a whole
  (library missing, driver not loaded, driver/library mismatch, no permission) raises
  ``NvmlFatalError`` whose ``hint`` says what to do.
- ``collect(nvml, read_sysfs)`` walks every GPU and returns plain data (see gpu_facts_assembly for the
  final facts shape). The library is injectable, so tests pass the fake under tests/fakes/.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ctypes
import time

from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu import gpu_families as F
from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError

NVSWITCH_PCI_BUS_ID = "FFFFFFFF:FF:FF.0"

# NVML return codes (nvml.h); kept here so the taxonomy works with any nvidia-ml-py version.
ERROR_NAMES = {
    1: "uninitialized", 2: "invalid_argument", 3: "not_supported", 4: "no_permission",
    5: "already_initialized", 6: "not_found", 7: "insufficient_size", 8: "insufficient_power",
    9: "driver_not_loaded", 10: "timeout", 11: "irq_issue", 12: "library_not_found",
    13: "function_not_found", 14: "corrupted_inforom", 15: "gpu_is_lost", 16: "reset_required",
    17: "operating_system", 18: "lib_rm_version_mismatch", 19: "in_use", 20: "memory",
    21: "no_data", 22: "vgpu_ecc_not_supported", 23: "insufficient_resources",
    24: "freq_not_supported", 25: "argument_version_mismatch", 26: "deprecated", 27: "not_ready",
    28: "gpu_not_found", 29: "invalid_state", 999: "unknown",
}

# Fatal kinds: (kind, hint). 'absent' kinds mean "no usable NVIDIA driver here" (gpu_count 0).
FATAL_HINTS = {
    "library_missing": "install nvidia-ml-py on the target (pip install nvidia-ml-py)",
    "unofficial_library": "the unofficial 'pynvml' distribution is installed; uninstall it and install "
                          "nvidia-ml-py (pip uninstall pynvml && pip install nvidia-ml-py)",
    "library_not_found": "libnvidia-ml.so.1 was not found: install the NVIDIA driver (or its "
                         "libnvidia-compute package) on this host",
    "driver_not_loaded": "the NVIDIA kernel module is not loaded: install the driver or run "
                         "'modprobe nvidia' and check dmesg",
    "lib_rm_version_mismatch": "NVML driver/library version mismatch (the driver was upgraded without "
                               "reloading it): reboot the host or reload the nvidia kernel modules",
    "no_permission": "no permission to open /dev/nvidia*: run the task with become: true",
    "gpu_is_lost": "a GPU fell off the bus: check dmesg for Xid 79, then reset or reboot",
    "unknown": "NVML failed: check 'nvidia-smi' and dmesg on the host",
}
ABSENT_KINDS = ("library_not_found", "driver_not_loaded")
NVLINK_REMOTE = {0: "gpu", 1: "cpu", 2: "nvswitch"}   # 1 = IBM NPU (a CPU-side NVLink endpoint)
CPU_SET_WORDS = 1024 // 64   # nvmlDeviceGetCpuAffinity: cpuSetSize in 64-bit words, at least 1024 CPUs
CPU_SET_WORDS_MAX = 65536 // 64   # the widest mask read (Linux NR_CPUS tops out at 8192 today)
TOPOLOGY_LEVELS = {0: "PIX", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}


class NvmlFatalError(UserError):
    """NVML cannot be used at all on this host; ``message`` names the kind, the detail and the fix."""

    def __init__(self, kind, detail=""):
        self.kind = kind
        self.detail = detail
        self.hint = FATAL_HINTS.get(kind, FATAL_HINTS["unknown"])
        text = "NVML unusable (%s)" % kind
        if detail:
            text += ": %s" % detail
        super(NvmlFatalError, self).__init__("%s. Fix: %s" % (text, self.hint), kind=kind)

    @property
    def absent(self):
        return self.kind in ABSENT_KINDS


def load_pynvml():
    """Import nvidia-ml-py's ``pynvml``; refuse the unofficial ``pynvml`` package."""
    try:
        import pynvml  # pylint: disable=import-outside-toplevel
    except ImportError as exc:
        raise NvmlFatalError("library_missing", str(exc))
    # nvidia-ml-py ships a single module pynvml.py; the unofficial distribution (<= 11.x) ships a
    # package (pynvml/__init__.py, pynvml/nvml.py, pynvml/smi.py) with its own, older bindings.
    if hasattr(pynvml, "__path__") or not hasattr(pynvml, "nvmlInit"):
        raise NvmlFatalError("unofficial_library", getattr(pynvml, "__file__", "pynvml"))
    return pynvml


def error_kind(lib, exc):
    code = getattr(exc, "value", None)
    if code is None:
        return "unknown"
    return ERROR_NAMES.get(code, "unknown")


def _s(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def canonical_pci_bus_id(bus_id):
    """'0000:3b:00.0' or '00000000:3B:00.0' -> '00000000:3B:00.0' (NVML / nvidia-smi spelling)."""
    if not bus_id:
        return None
    bus_id = _s(bus_id).strip()
    parts = bus_id.split(":")
    if len(parts) == 2:
        parts = ["0"] + parts
    if len(parts) != 3:
        return bus_id.upper()
    domain, bus, devfn = parts
    try:
        return "%08X:%02X:%s" % (int(domain, 16), int(bus, 16), devfn.upper())
    except ValueError:
        return bus_id.upper()


def sysfs_pci_address(bus_id):
    """'00000000:3B:00.0' -> '0000:3b:00.0' (the spelling of /sys/bus/pci/devices)."""
    canon = canonical_pci_bus_id(bus_id)
    if not canon:
        return None
    domain, bus, devfn = canon.split(":")
    return ("%04x:%s:%s" % (int(domain, 16) & 0xFFFF, bus, devfn)).lower()


def cpu_mask_to_list(words, bits_per_word):
    cpus = []
    for word_idx, word in enumerate(words):
        word = int(word)
        bit = 0
        while word:
            if word & 1:
                cpus.append(word_idx * bits_per_word + bit)
            word >>= 1
            bit += 1
    return cpus


class Nvml(object):
    """Calls into a loaded pynvml, turning per-field errors into None + a recorded error."""

    def __init__(self, lib):
        self.lib = lib
        self.initialised = False

    # -- whole-library calls -------------------------------------------------------------------
    def init(self):
        try:
            self.lib.nvmlInit()
        except self.lib.NVMLError as exc:
            kind = error_kind(self.lib, exc)
            raise NvmlFatalError(kind if kind in FATAL_HINTS else "unknown", str(exc))
        except OSError as exc:  # some bindings raise OSError when the .so cannot be loaded
            raise NvmlFatalError("library_not_found", str(exc))
        self.initialised = True

    def shutdown(self):
        if self.initialised:
            try:
                self.lib.nvmlShutdown()
            except self.lib.NVMLError:
                pass
            self.initialised = False

    def fatal_call(self, func, *args):
        try:
            return getattr(self.lib, func)(*args)
        except self.lib.NVMLError as exc:
            kind = error_kind(self.lib, exc)
            raise NvmlFatalError(kind if kind in FATAL_HINTS else "unknown", "%s: %s" % (func, exc))

    def field(self, errors, name, func, *args):
        """Call ``func``; on NVMLError record ``errors[name]`` and return None."""
        fn = getattr(self.lib, func, None)
        if fn is None:
            errors[name] = "function_not_found: %s is not in this nvidia-ml-py" % func
            return None
        try:
            return fn(*args)
        except self.lib.NVMLError as exc:
            kind = error_kind(self.lib, exc)
            if kind in ("lib_rm_version_mismatch", "driver_not_loaded", "uninitialized"):
                raise NvmlFatalError(kind, "%s: %s" % (func, exc))
            errors[name] = "%s: %s" % (kind, _s(str(exc)))
            return None
        except (TypeError, ctypes.ArgumentError, AttributeError) as exc:
            errors[name] = "binding_error: %s: %s" % (func, exc)
            return None

    def quiet(self, func, *args):
        """Call ``func``; return (value, error_kind) without recording (used for probing links)."""
        fn = getattr(self.lib, func, None)
        if fn is None:
            return None, "function_not_found"
        try:
            return fn(*args), None
        except self.lib.NVMLError as exc:
            kind = error_kind(self.lib, exc)
            if kind in ("lib_rm_version_mismatch", "driver_not_loaded", "uninitialized"):
                raise NvmlFatalError(kind, "%s: %s" % (func, exc))
            return None, kind

    # -- per-GPU readers -----------------------------------------------------------------------
    def handles(self):
        count = self.fatal_call("nvmlDeviceGetCount")
        return [self.fatal_call("nvmlDeviceGetHandleByIndex", i) for i in range(count)]

    def nvlink_count(self, handle):
        """Links the GPU really has (NVML_FI_DEV_NVLINK_LINK_COUNT, field 91), or None when the
        driver/binding cannot say. NCCL reads the same field before walking the links."""
        field_id = getattr(self.lib, "NVML_FI_DEV_NVLINK_LINK_COUNT", 91)
        values, err = self.quiet("nvmlDeviceGetFieldValues", handle, [field_id])
        if err is not None or not values:
            return None
        value = values[0]
        if int(getattr(value, "nvmlReturn", 1)) != 0:
            return None
        count = getattr(getattr(value, "value", None), "uiVal", None)
        return int(count) if count is not None else None

    def nvlinks(self, handle, errors):
        """Per-link state for links 0..count-1 only. Without the link-count field, the walk stops at
        the first NotSupported/InvalidArgument link: higher numbers do not exist on this GPU
        (an A100 has 12 of NVML_NVLINK_MAX_LINKS=18), so they are not reported as down."""
        count = self.nvlink_count(handle)
        max_links = getattr(self.lib, "NVML_NVLINK_MAX_LINKS", 18)
        links = []
        for link in range(min(count, max_links) if count is not None else max_links):
            state, err = self.quiet("nvmlDeviceGetNvLinkState", handle, link)
            if err in ("not_supported", "invalid_argument", "not_found", "function_not_found"):
                break
            if err is not None:
                errors["nvlink_%d" % link] = err
                continue
            links.append(self._nvlink(handle, link, state))
        return links

    def _nvlink(self, handle, link, state):
        version, _err = self.quiet("nvmlDeviceGetNvLinkVersion", handle, link)
        remote_type, _err = self.quiet("nvmlDeviceGetNvLinkRemoteDeviceType", handle, link)
        pci, _err = self.quiet("nvmlDeviceGetNvLinkRemotePciInfo", handle, link)
        remote_bus = canonical_pci_bus_id(_s(getattr(pci, "busId", None))) if pci is not None else None
        if remote_type is None and remote_bus is not None:
            remote = "nvswitch" if remote_bus == NVSWITCH_PCI_BUS_ID else None
        else:
            remote = NVLINK_REMOTE.get(remote_type)
        return {"link": link, "active": bool(state), "version": version, "remote": remote,
                "remote_pci_bus_id": remote_bus}

    def cpu_affinity(self, handle, errors, cpu_count):
        """CPUs near the GPU, the whole mask. NVML fills exactly the ``cpuSetSize`` words it is given and
        drops the CPUs above them, so the mask is read with one guard word above max(1024 CPUs, the host's
        ``cpu_count``) and read again twice as wide while that guard word holds a CPU (a NUMA node past
        CPU 1023 would otherwise be cut silently). A mask still set at ``CPU_SET_WORDS_MAX`` words, or one
        shorter than asked, is reported as cut; an empty mask is an error, not []."""
        words = max(CPU_SET_WORDS, (int(cpu_count or 0) + 63) // 64) + 1
        while True:
            value = self.field(errors, "cpu_affinity", "nvmlDeviceGetCpuAffinity", handle, words)
            if value is None:
                return None
            value = list(value)
            if len(value) < words:
                errors["cpu_affinity"] = "cut: NVML returned %d of the %d mask words asked for" % (len(value), words)
                return None
            if not int(value[words - 1]):
                break
            if words >= CPU_SET_WORDS_MAX:
                errors["cpu_affinity"] = "cut: the CPU mask is still set at CPU %d (%d words)" % (words * 64 - 1, words)
                return None
            words = min(words * 2, CPU_SET_WORDS_MAX)
        # nvidia-ml-py >= 12 uses c_ulonglong; older bindings c_ulong (64 bit on Linux x86-64 too).
        cpus = cpu_mask_to_list(value, 64)
        if not cpus:
            errors["cpu_affinity"] = "empty: NVML returned no CPU for this GPU (mask of %d words)" % words
            return None
        return cpus

    def mig_devices(self, handle, errors):
        max_count = self.field(errors, "mig_devices", "nvmlDeviceGetMaxMigDeviceCount", handle)
        devices = []
        for idx in range(max_count or 0):
            mig, err = self.quiet("nvmlDeviceGetMigDeviceHandleByIndex", handle, idx)
            if err is not None:
                if err not in ("not_found", "invalid_argument"):
                    errors["mig_device_%d" % idx] = err
                continue
            dev_errors = {}
            mem = self.field(dev_errors, "memory", "nvmlDeviceGetMemoryInfo", mig)
            devices.append({
                "index": idx,
                "gpu_instance_id": self.field(dev_errors, "gpu_instance_id", "nvmlDeviceGetGpuInstanceId", mig),
                "compute_instance_id": self.field(dev_errors, "compute_instance_id",
                                                  "nvmlDeviceGetComputeInstanceId", mig),
                "memory_bytes": int(mem.total) if mem is not None else None,
                "uuid": _s(self.field(dev_errors, "uuid", "nvmlDeviceGetUUID", mig)),
            })
            for key, value in dev_errors.items():
                errors["mig_device_%d_%s" % (idx, key)] = value
        return devices

    def processes(self, handle, errors):
        procs = self.field(errors, "processes", "nvmlDeviceGetComputeRunningProcesses", handle)
        out = []
        for proc in procs or []:
            pid = int(proc.pid)
            name, _err = self.quiet("nvmlSystemGetProcessName", pid)
            used = getattr(proc, "usedGpuMemory", None)
            out.append({"pid": pid, "name": _s(name), "used_memory_bytes": used if isinstance(used, int) else None})
        return out

    def fabric(self, handle, errors):
        """NVSwitch fabric registration (Hopper+). Tries the versioned call first: on driver 580 the
        unversioned nvmlDeviceGetGpuFabricInfo answers NotSupported (seen on the H200 capture)."""
        for func, struct_name in (("nvmlDeviceGetGpuFabricInfoV", "c_nvmlGpuFabricInfoV_t"),
                                  ("nvmlDeviceGetGpuFabricInfo", "c_nvmlGpuFabricInfo_t")):
            struct_cls = getattr(self.lib, struct_name, None)
            if struct_cls is None or not hasattr(self.lib, func):
                continue
            info = struct_cls()
            try:
                dummy, err = self.quiet(func, handle, ctypes.byref(info))
            except (TypeError, ctypes.ArgumentError) as exc:
                errors["fabric"] = "binding_error: %s" % exc
                return None
            if err in ("not_supported", "function_not_found", "argument_version_mismatch"):
                continue
            if err is not None:
                errors["fabric"] = err
                return None
            states = {0: "not_supported", 1: "not_started", 2: "in_progress", 3: "completed"}
            status = int(getattr(info, "status", 0))
            return {"state": states.get(int(info.state), str(info.state)),
                    "status": "success" if status == 0 else ERROR_NAMES.get(status, str(status))}
        return None


# MIG capability per family and product: gpu_families.py.
mig_capable = F.mig_capable


def read_gpu(nvml, index, handle, cpu_count):
    """Everything NVML says about one GPU; errors are recorded per field."""
    lib = nvml.lib
    errors = {}
    f = nvml.field
    pci = f(errors, "pci_bus_id", "nvmlDeviceGetPciInfo", handle)
    mem = f(errors, "memory_total_bytes", "nvmlDeviceGetMemoryInfo", handle)
    cc = f(errors, "compute_capability", "nvmlDeviceGetCudaComputeCapability", handle)
    persistence = f(errors, "persistence_mode", "nvmlDeviceGetPersistenceMode", handle)
    ecc = f(errors, "ecc_mode", "nvmlDeviceGetEccMode", handle)
    power = f(errors, "power_limit_watts", "nvmlDeviceGetPowerManagementLimit", handle)
    mig_mode, mig_err = nvml.quiet("nvmlDeviceGetMigMode", handle)
    if mig_err not in (None, "not_supported"):
        errors["mig"] = mig_err
    numa, numa_err = nvml.quiet("nvmlDeviceGetNumaNodeId", handle)
    if numa_err not in (None, "not_supported", "function_not_found"):
        errors["numa_node"] = numa_err
    mig_current = mig_pending = None
    if mig_mode is not None:
        enable = getattr(lib, "NVML_DEVICE_MIG_ENABLE", 1)
        mig_current = "enabled" if mig_mode[0] == enable else "disabled"
        mig_pending = "enabled" if mig_mode[1] == enable else "disabled"
    gpu_name = f(errors, "name", "nvmlDeviceGetName", handle)
    gpu = {
        "index": index,
        "name": _s(gpu_name),
        "uuid": _s(f(errors, "uuid", "nvmlDeviceGetUUID", handle)),
        "minor_number": f(errors, "minor_number", "nvmlDeviceGetMinorNumber", handle),
        "pci_bus_id": canonical_pci_bus_id(_s(pci.busId)) if pci is not None else None,
        "memory_total_bytes": int(mem.total) if mem is not None else None,
        "compute_capability": "%d.%d" % (cc[0], cc[1]) if cc is not None else None,
        "persistence_mode": bool(persistence) if persistence is not None else None,
        "ecc_mode": {"current": bool(ecc[0]), "pending": bool(ecc[1])} if ecc is not None else None,
        "power_limit_watts": round(power / 1000.0, 2) if power is not None else None,
        "mig": {"current": mig_current, "pending": mig_pending,
                "supported": mig_capable(_s(gpu_name), cc, mig_mode is not None),
                "devices": nvml.mig_devices(handle, errors) if mig_current == "enabled" else []},
        "nvml_numa_node": numa if (numa is not None and numa >= 0) else None,
        "cpu_affinity": nvml.cpu_affinity(handle, errors, cpu_count),
        "nvlinks": nvml.nvlinks(handle, errors),
        "fabric": nvml.fabric(handle, errors),
        "errors": errors,
    }
    return gpu


def collect(nvml, cpu_count, with_processes=False):
    """Walk NVML. ``nvml`` must be initialised. Returns plain data, see ``read_gpu``."""
    started = time.time()
    sys_errors = {}
    driver = _s(nvml.field(sys_errors, "driver_version", "nvmlSystemGetDriverVersion"))
    cuda = nvml.field(sys_errors, "cuda_driver_version", "nvmlSystemGetCudaDriverVersion")
    nvml_version = _s(nvml.field(sys_errors, "nvml_version", "nvmlSystemGetNVMLVersion"))
    handles = nvml.handles()
    gpus = []
    for idx, handle in enumerate(handles):
        gpu = read_gpu(nvml, idx, handle, cpu_count)
        if with_processes:
            gpu["processes"] = nvml.processes(handle, gpu["errors"])
        gpus.append(gpu)
    pairs = {}
    nvlink_idx = getattr(nvml.lib, "NVML_P2P_CAPS_INDEX_NVLINK", 2)
    status_ok = getattr(nvml.lib, "NVML_P2P_STATUS_OK", 0)
    for i in range(len(handles)):
        for j in range(i + 1, len(handles)):
            perr = {}
            p2p = nvml.field(perr, "p2p_nvlink", "nvmlDeviceGetP2PStatus", handles[i], handles[j], nvlink_idx)
            anc = nvml.field(perr, "common_ancestor", "nvmlDeviceGetTopologyCommonAncestor", handles[i], handles[j])
            pairs["%d-%d" % (i, j)] = {
                "p2p_nvlink": (p2p == status_ok) if p2p is not None else None,
                "common_ancestor": TOPOLOGY_LEVELS.get(anc) if anc is not None else None,
                "errors": perr,
            }
    return {
        "driver_version": driver,
        "cuda_driver_version": "%d.%d" % (cuda // 1000, (cuda % 1000) // 10) if cuda else None,
        "nvml_version": nvml_version,
        "gpus": gpus,
        "pairs": pairs,
        "errors": sys_errors,
        "collection_seconds": round(time.time() - started, 4),
    }


def _proc_name(pid):
    try:
        with open("/proc/%d/comm" % pid) as handle:
            return handle.read().strip()
    except (IOError, OSError):
        return None


def mig_state(nvml):
    """``[{index, uuid, name, current, pending, processes}]`` plus the handles, for nvidia_mig."""
    lib = nvml.lib
    enable = getattr(lib, "NVML_DEVICE_MIG_ENABLE", 1)
    handles = nvml.handles()
    gpus = []
    for idx, handle in enumerate(handles):
        errors = {}
        mode, err = nvml.quiet("nvmlDeviceGetMigMode", handle)
        if err not in (None, "not_supported"):
            errors["mig"] = err
        current = pending = None
        if mode is not None:
            current = "enabled" if mode[0] == enable else "disabled"
            pending = "enabled" if mode[1] == enable else "disabled"
        procs = nvml.processes(handle, errors)
        for proc in procs:
            if not proc.get("name"):
                proc["name"] = _proc_name(proc["pid"])
        gpus.append({
            "index": idx,
            "uuid": _s(nvml.field(errors, "uuid", "nvmlDeviceGetUUID", handle)),
            "name": _s(nvml.field(errors, "name", "nvmlDeviceGetName", handle)),
            "current": current,
            "pending": pending,
            "processes": procs,
            "errors": errors,
        })
    return gpus, handles


def set_mig_mode(nvml, handle, mode, label="the GPU"):
    """Set the MIG mode; returns the activation status word ('success', 'in_use', ...).

    A fatal NVML error names what failed first: 'setting MIG enabled on GPU0 (GPU-...) failed: ...'."""
    value = getattr(nvml.lib, "NVML_DEVICE_MIG_ENABLE", 1) if mode == "enabled" else \
        getattr(nvml.lib, "NVML_DEVICE_MIG_DISABLE", 0)
    try:
        status = nvml.fatal_call("nvmlDeviceSetMigMode", handle, value)
    except NvmlFatalError as exc:
        exc.message = "setting MIG %s on %s failed: %s" % (mode, label, exc.message)
        raise
    if status is None or status == 0:
        return "success"
    return ERROR_NAMES.get(int(status), str(status))
