# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""FAKE pynvml (a test double of nvidia-ml-py), driven by a JSON-able state dict.

Two ways to use it:

- Unit tests: ``FakePynvml(state)`` is an object that quacks like the ``pynvml`` module (functions,
  constants, ``NVMLError``); pass it to ``Nvml(lib)`` or put it in ``sys.modules["pynvml"]``.
- Test hosts (Molecule): copy this file as ``pynvml.py`` onto the Python path; on first use it loads
  the state from ``$FAKE_NVML_STATE`` (default ``/etc/fake_nvml/state.json``) and writes MIG changes
  back to that file, so a later process (the fake ``nvidia-smi -r``) sees them.

State (see topologies.py for complete examples)::

    {"driver_version": "550.54.15", "cuda_driver_version": 12040, "nvml_version": "12.550.54.15",
     "init_error": null,              # or an NVML error code number / name to fail nvmlInit with
     "gpus": [{"name", "uuid", "pci_bus_id", "minor_number", "memory_total", "cc": [8, 0],
               "persistence": 1, "ecc": [1, 1] | null, "power_limit_mw": 400000,
               "nvlink_count": 12 (NVML_FI_DEV_NVLINK_LINK_COUNT; absent = field not supported),
               "mig": [current, pending] | null, "passthrough": false (true: a pass-through VM), "mig_devices": [{"gi", "ci", "memory", "uuid"}],
               "numa": 0 | null, "cpu_affinity": [0, 1], "nvlinks": [{"state", "version",
               "remote_type", "remote"}], "fabric": {"state": 3, "status": 0} | null,
               "processes": [{"pid", "name", "used"}], "errors": {"nvmlDeviceGetX": 3}}],
     "pairs": {"0-1": {"p2p_nvlink": 0, "ancestor": 30}},
     "holders_dir": "/run/fake_nvml/holders"}   # <dir>/<gpu index>/<pid> files = live processes

This is not NVIDIA code; it implements only what gpufleet.vllm calls.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import ctypes
import json
import os

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_RESET_REQUIRED = 16
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_IN_USE = 19
NVML_ERROR_UNKNOWN = 999
NVML_NVLINK_MAX_LINKS = 18
NVML_FI_DEV_NVLINK_LINK_COUNT = 91
NVML_P2P_CAPS_INDEX_NVLINK = 2
NVML_P2P_STATUS_OK = 0
NVML_P2P_STATUS_NOT_SUPPORTED = 5
NVML_DEVICE_MIG_DISABLE = 0
NVML_DEVICE_MIG_ENABLE = 1

_ERROR_STRINGS = {
    1: "Uninitialized", 2: "Invalid Argument", 3: "Not Supported", 4: "Insufficient Permissions",
    6: "Not Found", 9: "Driver Not Loaded", 12: "NVML Shared Library Not Found", 15: "GPU is lost", 16: "Reset required",
    18: "Driver/library version mismatch", 19: "In use by another client", 999: "Unknown Error",
}
_ERROR_CODES = {
    "uninitialized": 1, "invalid_argument": 2, "not_supported": 3, "no_permission": 4, "not_found": 6,
    "driver_not_loaded": 9, "library_not_found": 12, "gpu_is_lost": 15, "reset_required": 16, "lib_rm_version_mismatch": 18,
    "in_use": 19, "unknown": 999,
}


class NVMLError(Exception):
    def __init__(self, value):
        self.value = value
        super(NVMLError, self).__init__(value)

    def __str__(self):
        return _ERROR_STRINGS.get(self.value, "Unknown Error")


class _Struct(object):
    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)


class c_nvmlGpuFabricInfo_t(ctypes.Structure):  # noqa: N801  (pynvml's name)
    _fields_ = [("clusterUuid", ctypes.c_uint8 * 16), ("status", ctypes.c_uint),
                ("cliqueId", ctypes.c_uint32), ("state", ctypes.c_uint)]


class c_nvmlGpuFabricInfoV_t(ctypes.Structure):  # noqa: N801  (pynvml's name, v2 layout)
    _fields_ = [("version", ctypes.c_uint), ("clusterUuid", ctypes.c_uint8 * 16), ("status", ctypes.c_uint),
                ("cliqueId", ctypes.c_uint32), ("state", ctypes.c_uint), ("healthMask", ctypes.c_uint)]

    def __init__(self):
        super(c_nvmlGpuFabricInfoV_t, self).__init__(version=0x02000024)


class _Handle(object):
    def __init__(self, index, mig_index=None):
        self.index = index
        self.mig_index = mig_index


class FakePynvml(object):
    """An object that behaves like the pynvml module for the calls gpufleet.vllm makes."""

    NVMLError = NVMLError
    c_nvmlGpuFabricInfo_t = c_nvmlGpuFabricInfo_t
    c_nvmlGpuFabricInfoV_t = c_nvmlGpuFabricInfoV_t

    def __init__(self, state, state_path=None):
        self.state = copy.deepcopy(state)
        self.state_path = state_path
        self.initialised = 0
        self.calls = []
        self.set_calls = []
        for name, value in globals().items():
            if name.startswith("NVML_"):
                setattr(self, name, value)

    # -- helpers -------------------------------------------------------------------------------
    def _reload(self):
        if self.state_path:
            with open(self.state_path) as handle:
                self.state = json.load(handle)

    def _save(self):
        if self.state_path:
            tmp = self.state_path + ".tmp"
            with open(tmp, "w") as handle:
                json.dump(self.state, handle, indent=1, sort_keys=True)
            os.rename(tmp, self.state_path)

    def _check(self):
        if not self.initialised:
            raise NVMLError(NVML_ERROR_UNINITIALIZED)

    def _gpu(self, handle, func):
        self._check()
        self.calls.append(func)
        gpu = self.state["gpus"][handle.index]
        err = gpu.get("errors", {}).get(func)
        if err is not None:
            raise NVMLError(_code(err))
        return gpu

    # -- library -------------------------------------------------------------------------------
    def nvmlInit(self):
        self._reload()
        err = self.state.get("init_error")
        if err is not None:
            raise NVMLError(_code(err))
        self.initialised += 1

    def nvmlShutdown(self):
        self._check()
        self.initialised -= 1

    def nvmlSystemGetDriverVersion(self):
        self._check()
        return self.state.get("driver_version", "550.54.15")

    def nvmlSystemGetCudaDriverVersion(self):
        self._check()
        return self.state.get("cuda_driver_version", 12040)

    def nvmlSystemGetNVMLVersion(self):
        self._check()
        return self.state.get("nvml_version", "12.550.54.15")

    def nvmlSystemGetProcessName(self, pid):
        self._check()
        for gpu in self.state["gpus"]:
            for proc in gpu.get("processes", []):
                if proc["pid"] == pid:
                    return proc.get("name", "python3")
        try:
            with open("/proc/%d/cmdline" % pid) as handle:
                return handle.read().split("\0")[0] or "?"
        except (IOError, OSError):
            raise NVMLError(NVML_ERROR_NOT_FOUND)

    def nvmlDeviceGetCount(self):
        self._check()
        return len(self.state["gpus"])

    def nvmlDeviceGetHandleByIndex(self, index):
        self._check()
        if index >= len(self.state["gpus"]):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return _Handle(index)

    # -- device --------------------------------------------------------------------------------
    def nvmlDeviceGetName(self, handle):
        return self._gpu(handle, "nvmlDeviceGetName")["name"]

    def nvmlDeviceGetUUID(self, handle):
        gpu = self._gpu(handle, "nvmlDeviceGetUUID")
        if handle.mig_index is not None:
            return gpu["mig_devices"][handle.mig_index]["uuid"]
        return gpu["uuid"]

    def nvmlDeviceGetMinorNumber(self, handle):
        return self._gpu(handle, "nvmlDeviceGetMinorNumber")["minor_number"]

    def nvmlDeviceGetPciInfo(self, handle):
        gpu = self._gpu(handle, "nvmlDeviceGetPciInfo")
        return _Struct(busId=gpu["pci_bus_id"].encode("ascii"), busIdLegacy=gpu["pci_bus_id"][4:])

    def nvmlDeviceGetMemoryInfo(self, handle, version=None):
        gpu = self._gpu(handle, "nvmlDeviceGetMemoryInfo")
        if handle.mig_index is not None:
            total = gpu["mig_devices"][handle.mig_index]["memory"]
        else:
            total = gpu["memory_total"]
        return _Struct(total=total, free=total, used=0)

    def nvmlDeviceGetCudaComputeCapability(self, handle):
        return tuple(self._gpu(handle, "nvmlDeviceGetCudaComputeCapability")["cc"])

    def nvmlDeviceGetPersistenceMode(self, handle):
        return self._gpu(handle, "nvmlDeviceGetPersistenceMode")["persistence"]

    def nvmlDeviceGetEccMode(self, handle):
        ecc = self._gpu(handle, "nvmlDeviceGetEccMode").get("ecc")
        if ecc is None:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return list(ecc)

    def nvmlDeviceGetPowerManagementLimit(self, handle):
        return self._gpu(handle, "nvmlDeviceGetPowerManagementLimit")["power_limit_mw"]

    def nvmlDeviceGetMigMode(self, handle):
        mig = self._gpu(handle, "nvmlDeviceGetMigMode").get("mig")
        if mig is None:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return list(mig)

    def nvmlDeviceSetMigMode(self, handle, mode):
        gpu = self._gpu(handle, "nvmlDeviceSetMigMode")
        self.set_calls.append((handle.index, mode))
        if gpu.get("mig") is None:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        gpu["mig"][1] = mode
        applies_now = gpu.get("mig_applies_without_reset", False) and not self._live_processes(handle.index, gpu)
        if applies_now:
            gpu["mig"][0] = mode
        self._save()
        # activationStatus as nvmlDeviceSetMigMode documents it: SUCCESS when the mode took effect;
        # RESET_REQUIRED where reset is not exposed (state "passthrough": a pass-through VM);
        # IN_USE when the device could not be unbound because it was not idle.
        if gpu["mig"][0] == mode:
            return NVML_SUCCESS
        return NVML_ERROR_RESET_REQUIRED if gpu.get("passthrough") else NVML_ERROR_IN_USE

    def nvmlDeviceGetMaxMigDeviceCount(self, handle):
        gpu = self._gpu(handle, "nvmlDeviceGetMaxMigDeviceCount")
        return 7 if gpu.get("mig") is not None else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle, index):
        gpu = self._gpu(handle, "nvmlDeviceGetMigDeviceHandleByIndex")
        if index >= len(gpu.get("mig_devices", [])):
            raise NVMLError(NVML_ERROR_NOT_FOUND)
        return _Handle(handle.index, index)

    def nvmlDeviceGetGpuInstanceId(self, handle):
        return self._gpu(handle, "nvmlDeviceGetGpuInstanceId")["mig_devices"][handle.mig_index]["gi"]

    def nvmlDeviceGetComputeInstanceId(self, handle):
        return self._gpu(handle, "nvmlDeviceGetComputeInstanceId")["mig_devices"][handle.mig_index]["ci"]

    def nvmlDeviceGetNumaNodeId(self, handle):
        numa = self._gpu(handle, "nvmlDeviceGetNumaNodeId").get("numa")
        if numa is None:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return numa

    def nvmlDeviceGetCpuAffinity(self, handle, cpu_set_size):
        cpus = self._gpu(handle, "nvmlDeviceGetCpuAffinity").get("cpu_affinity", [])
        words = [0] * cpu_set_size
        for cpu in cpus:
            if cpu // 64 < cpu_set_size:
                words[cpu // 64] |= 1 << (cpu % 64)
        return words

    def _link(self, handle, link, func):
        links = self._gpu(handle, func).get("nvlinks", [])
        if link >= len(links):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT if link >= NVML_NVLINK_MAX_LINKS else NVML_ERROR_NOT_SUPPORTED)
        return links[link]

    def nvmlDeviceGetFieldValues(self, handle, field_ids):
        """Only NVML_FI_DEV_NVLINK_LINK_COUNT, from the state's ``nvlink_count`` (absent: NotSupported
        in that value's nvmlReturn, as NVML reports a field it cannot read)."""
        gpu = self._gpu(handle, "nvmlDeviceGetFieldValues")
        out = []
        for field_id in field_ids:
            count = gpu.get("nvlink_count") if field_id == NVML_FI_DEV_NVLINK_LINK_COUNT else None
            out.append(_Struct(fieldId=field_id, nvmlReturn=NVML_SUCCESS if count is not None else NVML_ERROR_NOT_SUPPORTED,
                               value=_Struct(uiVal=count or 0)))
        return out

    def nvmlDeviceGetNvLinkState(self, handle, link):
        return self._link(handle, link, "nvmlDeviceGetNvLinkState")["state"]

    def nvmlDeviceGetNvLinkVersion(self, handle, link):
        return self._link(handle, link, "nvmlDeviceGetNvLinkVersion")["version"]

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle, link):
        return self._link(handle, link, "nvmlDeviceGetNvLinkRemoteDeviceType")["remote_type"]

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle, link):
        remote = self._link(handle, link, "nvmlDeviceGetNvLinkRemotePciInfo")["remote"]
        return _Struct(busId=remote.encode("ascii"))

    def nvmlDeviceGetGpuFabricInfo(self, handle, info):
        gpu = self._gpu(handle, "nvmlDeviceGetGpuFabricInfo")
        fabric = gpu.get("fabric")
        if fabric is None or gpu.get("fabric_v1_not_supported"):
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        target = getattr(info, "_obj", info)  # ctypes.byref() wraps the struct
        target.state = fabric["state"]
        target.status = fabric["status"]
        return NVML_SUCCESS

    def nvmlDeviceGetGpuFabricInfoV(self, handle, info):
        fabric = self._gpu(handle, "nvmlDeviceGetGpuFabricInfoV").get("fabric")
        if fabric is None:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        target = getattr(info, "_obj", info)  # ctypes.byref() wraps the struct
        target.state = fabric["state"]
        target.status = fabric["status"]
        return NVML_SUCCESS

    def _live_processes(self, index, gpu):
        procs = [dict(p) for p in gpu.get("processes", [])]
        holders = self.state.get("holders_dir")
        if holders:
            folder = os.path.join(holders, str(index))
            for entry in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
                try:
                    pid = int(entry)
                except ValueError:
                    continue
                if os.path.exists("/proc/%d" % pid):
                    procs.append({"pid": pid, "used": 1 << 30})
        return procs

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        gpu = self._gpu(handle, "nvmlDeviceGetComputeRunningProcesses")
        return [_Struct(pid=p["pid"], usedGpuMemory=p.get("used")) for p in self._live_processes(handle.index, gpu)]

    # -- pairs ---------------------------------------------------------------------------------
    def _pair(self, h1, h2, func):
        self._check()
        for h in (h1, h2):
            err = self.state["gpus"][h.index].get("errors", {}).get(func)
            if err is not None:
                raise NVMLError(_code(err))
        a, b = sorted((h1.index, h2.index))
        return self.state.get("pairs", {}).get("%d-%d" % (a, b), {})

    def nvmlDeviceGetP2PStatus(self, h1, h2, index):
        pair = self._pair(h1, h2, "nvmlDeviceGetP2PStatus")
        if index != NVML_P2P_CAPS_INDEX_NVLINK:
            return NVML_P2P_STATUS_OK
        return pair.get("p2p_nvlink", NVML_P2P_STATUS_NOT_SUPPORTED)

    def nvmlDeviceGetTopologyCommonAncestor(self, h1, h2):
        pair = self._pair(h1, h2, "nvmlDeviceGetTopologyCommonAncestor")
        if "ancestor" not in pair:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return pair["ancestor"]


def _code(err):
    if isinstance(err, int):
        return err
    return _ERROR_CODES[err]


# -- module-level use on a test host: `import pynvml` gives the state file's fake --------------
_DEFAULT = []


def _default():
    if not _DEFAULT:
        path = os.environ.get("FAKE_NVML_STATE", "/etc/fake_nvml/state.json")
        with open(path) as handle:
            state = json.load(handle)
        _DEFAULT.append(FakePynvml(state, state_path=path))
    return _DEFAULT[0]


def __getattr__(name):  # PEP 562: pynvml.nvmlInit etc. resolve to the state file's fake
    if name.startswith("nvml"):
        return getattr(_default(), name)
    raise AttributeError(name)
