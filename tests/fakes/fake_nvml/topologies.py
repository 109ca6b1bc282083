# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixture topologies for the FAKE pynvml (tests/fakes/fake_nvml/pynvml.py).

``TOPOLOGIES[name]()`` returns a fresh state dict. ``h200x2`` is built from the real capture in
tests/fixtures/h200x2/nvml_dump.json; the others are modelled on public spec sheets and
``nvidia-smi topo -m`` outputs (see tests/fixtures/nvidia-smi/README.md).

Run ``python3 topologies.py NAME`` to print a state as JSON (the Molecule scenario does that).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "..", "fixtures")
NVSWITCH = "FFFFFFFF:FF:FF.0"
GIB = 1024 ** 3


def _uuid(prefix, i):
    return "GPU-%s%04d-0000-0000-0000-%012d" % (prefix, i, i)


def _gpu(i, name, bus, memory, cc, power_w, prefix, mig=None, numa=0, cpus=None, ecc=(1, 1), nvlinks=None,
         fabric=None, persistence=1):
    return {
        "name": name, "uuid": _uuid(prefix, i), "pci_bus_id": bus, "minor_number": i,
        "memory_total": memory, "cc": list(cc), "persistence": persistence,
        "ecc": list(ecc) if ecc is not None else None, "power_limit_mw": power_w * 1000,
        "mig": list(mig) if mig is not None else None, "mig_devices": [], "numa": numa,
        "cpu_affinity": list(cpus or []), "nvlinks": nvlinks or [], "fabric": fabric,
        "processes": [], "errors": {},
    }


def h200x2():
    """The real 2 x H200 VM capture (NVSwitch, NUMA not supported, MIG disabled/disabled)."""
    with open(os.path.join(FIXTURES, "h200x2", "nvml_dump.json")) as handle:
        dump = json.load(handle)
    gpus = []
    for g in dump["gpus"]:
        gpus.append({
            "name": g["name"], "uuid": g["uuid"], "pci_bus_id": g["busId"], "minor_number": g["index"],
            "memory_total": g["mem_total"], "cc": g["cc"], "persistence": g["persistence"], "ecc": g["ecc"],
            "power_limit_mw": g["power_limit"], "mig": g["mig"], "mig_devices": [], "numa": None,
            "cpu_affinity": list(range(32)),  # topo -m and sysfs local_cpulist: 0-31
            "nvlinks": [{"state": l["state"], "version": l["version"], "remote_type": l["remote_type"],
                         "remote": l["remote"]} for l in g["nvlink"]],
            "fabric": {"state": 3, "status": 0},  # nvidia-smi -q: Completed / Success
            "fabric_v1_not_supported": True,  # driver 580: only nvmlDeviceGetGpuFabricInfoV answers
            "processes": [], "errors": {},
        })
    return {
        "driver_version": dump["driver"], "cuda_driver_version": dump["cuda"], "nvml_version": dump["nvml_version"],
        "init_error": None, "gpus": gpus,
        "pairs": {"0-1": {"p2p_nvlink": dump["pairs"]["0-1"]["p2p_nvlink"], "ancestor": dump["pairs"]["0-1"]["ancestor"]}},
    }


def _switch_links(n, version):
    return [{"state": 1, "version": version, "remote_type": 2, "remote": NVSWITCH} for dummy in range(n)]


def h100x8_nvswitch():
    """HGX H100 80GB SXM: 8 GPUs x 18 NVLink4 links to 4 NVSwitches, 2 NUMA nodes (4 GPUs each)."""
    buses = ["00000000:18:00.0", "00000000:2A:00.0", "00000000:3A:00.0", "00000000:5D:00.0",
             "00000000:9A:00.0", "00000000:AB:00.0", "00000000:BA:00.0", "00000000:DB:00.0"]
    gpus = []
    for i, bus in enumerate(buses):
        node = 0 if i < 4 else 1
        cpus = list(range(0, 56)) + list(range(112, 168)) if node == 0 else list(range(56, 112)) + list(range(168, 224))
        gpus.append(_gpu(i, "NVIDIA H100 80GB HBM3", bus, 85520809984, (9, 0), 700, "h100", mig=(0, 0),
                         numa=node, cpus=cpus, nvlinks=_switch_links(18, 4), fabric={"state": 3, "status": 0}))
    pairs = {}
    for a in range(8):
        for b in range(a + 1, 8):
            pairs["%d-%d" % (a, b)] = {"p2p_nvlink": 0, "ancestor": 40 if (a < 4) == (b < 4) else 50}
    return {"driver_version": "550.54.15", "cuda_driver_version": 12040, "nvml_version": "12.550.54.15",
            "init_error": None, "gpus": gpus, "pairs": pairs}


def a100x2_pcie_bridge():
    """2 x A100 80GB PCIe joined by an NVLink bridge (12 NVLink3 links between them), one NUMA node."""
    b0, b1 = "00000000:17:00.0", "00000000:65:00.0"
    gpus = [
        _gpu(0, "NVIDIA A100 80GB PCIe", b0, 85899345920, (8, 0), 300, "a100", mig=(0, 0), numa=0,
             cpus=list(range(0, 32)),
             nvlinks=[{"state": 1, "version": 3, "remote_type": 0, "remote": b1} for dummy in range(12)]),
        _gpu(1, "NVIDIA A100 80GB PCIe", b1, 85899345920, (8, 0), 300, "a100", mig=(0, 0), numa=0,
             cpus=list(range(0, 32)),
             nvlinks=[{"state": 1, "version": 3, "remote_type": 0, "remote": b0} for dummy in range(12)]),
    ]
    return {"driver_version": "535.161.08", "cuda_driver_version": 12020, "nvml_version": "12.535.161.08",
            "init_error": None, "gpus": gpus, "pairs": {"0-1": {"p2p_nvlink": 0, "ancestor": 40}}}


def rtx4090x4_two_numa():
    """4 x RTX 4090 on PCIe, GPUs 0-1 on NUMA node 0 and 2-3 on node 1; no NVLink, no MIG, no ECC."""
    buses = ["00000000:01:00.0", "00000000:21:00.0", "00000000:81:00.0", "00000000:C1:00.0"]
    gpus = []
    for i, bus in enumerate(buses):
        node = 0 if i < 2 else 1
        gpus.append(_gpu(i, "NVIDIA GeForce RTX 4090", bus, 25757220864, (8, 9), 450, "4090", mig=None,
                         numa=node, cpus=list(range(0, 16)) if node == 0 else list(range(16, 32)), ecc=None,
                         persistence=0))
    pairs = {}
    for a in range(4):
        for b in range(a + 1, 4):
            pairs["%d-%d" % (a, b)] = {"p2p_nvlink": 5, "ancestor": 40 if (a < 2) == (b < 2) else 50}
    return {"driver_version": "550.120", "cuda_driver_version": 12040, "nvml_version": "12.550.120",
            "init_error": None, "gpus": gpus, "pairs": pairs}


def a100x8_mig():
    """HGX A100 80GB: MIG enabled on GPUs 0-1 (with instances), pending enable on GPU 2, rest disabled."""
    state = h100x8_nvswitch()
    for i, gpu in enumerate(state["gpus"]):
        gpu.update({"name": "NVIDIA A100-SXM4-80GB", "uuid": _uuid("a100", i), "memory_total": 85899345920,
                    "cc": [8, 0], "power_limit_mw": 400000, "fabric": None})
        gpu["nvlinks"] = _switch_links(12, 3)
        gpu["mig"] = [0, 0]
    for i in (0, 1):
        state["gpus"][i]["mig"] = [1, 1]
        state["gpus"][i]["mig_devices"] = [
            {"gi": 1, "ci": 0, "memory": 40 * GIB, "uuid": "MIG-%d-gi1" % i},
            {"gi": 2, "ci": 0, "memory": 40 * GIB, "uuid": "MIG-%d-gi2" % i},
        ]
    state["gpus"][2]["mig"] = [0, 1]  # pending != current: reset required
    state["driver_version"] = "535.161.08"
    state["cuda_driver_version"] = 12020
    state["nvml_version"] = "12.535.161.08"
    return state


def erroring_gpu():
    """2 x A100 PCIe where GPU1 errors on several fields (power not supported, ECC unknown error, ...)."""
    state = a100x2_pcie_bridge()
    state["gpus"][1]["errors"] = {
        "nvmlDeviceGetPowerManagementLimit": "not_supported",
        "nvmlDeviceGetEccMode": "unknown",
        "nvmlDeviceGetCpuAffinity": "no_permission",
        "nvmlDeviceGetCudaComputeCapability": "gpu_is_lost",
    }
    return state


def nvml_mismatch():
    state = h200x2()
    state["init_error"] = "lib_rm_version_mismatch"
    return state


def no_driver():
    state = h200x2()
    state["init_error"] = "driver_not_loaded"
    state["gpus"] = []
    return state


def mig_testhost():
    """The Molecule mig scenario's host: 2 MIG-capable A100s (MIG enabled) + 1 RTX 4090 (no MIG)."""
    a100 = a100x2_pcie_bridge()
    gpus = a100["gpus"]
    for gpu in gpus:
        gpu["mig"] = [1, 1]
    gpus.append(_gpu(2, "NVIDIA GeForce RTX 4090", "00000000:81:00.0", 25757220864, (8, 9), 450, "4090",
                     mig=None, numa=0, cpus=list(range(0, 32)), ecc=None))
    a100["pairs"]["0-2"] = {"p2p_nvlink": 5, "ancestor": 50}
    a100["pairs"]["1-2"] = {"p2p_nvlink": 5, "ancestor": 50}
    a100["holders_dir"] = "/run/fake_nvml/holders"
    return a100


def _nvswitch_box(count, name, memory, cc, power_w, prefix, links, link_version, driver):
    """An NVSwitch box: every GPU's links to the switches, the first half on NUMA node 0, the rest on node 1."""
    gpus = []
    for i in range(count):
        node = 0 if i < count // 2 else 1
        gpus.append(_gpu(i, name, "00000000:%02X:00.0" % (0x18 + 0x10 * i), memory, cc, power_w, prefix, mig=(0, 0),
                         numa=node, cpus=list(range(0, 32)) if node == 0 else list(range(32, 64)),
                         nvlinks=_switch_links(links, link_version), fabric={"state": 3, "status": 0}))
    pairs = dict(("%d-%d" % (a, b), {"p2p_nvlink": 0, "ancestor": 40 if (a < count // 2) == (b < count // 2) else 50})
                 for a in range(count) for b in range(a + 1, count))
    return {"driver_version": driver, "cuda_driver_version": 12040, "nvml_version": "12." + driver,
            "init_error": None, "gpus": gpus, "pairs": pairs}


def h100x4_example():
    """The h100x4 example's host: 4 x H100 80GB HBM3 SXM on NVLink (NVSwitch), GPUs 0-1 / 2-3 per NUMA node."""
    return _nvswitch_box(4, "NVIDIA H100 80GB HBM3", 85520809984, (9, 0), 700, "h100", 18, 4, "550.54.15")


def h200x8_example():
    """The h200x8 / h200x8x2 examples' hosts: 8 x H200 (143771 MiB) on NVSwitch, 4 GPUs per NUMA node."""
    return _nvswitch_box(8, "NVIDIA H200", 150754820096, (9, 0), 700, "h200", 18, 4, "570.86.15")


def a100x2_example():
    """The a100x2 example's host: the bridged A100 pair on a driver the example accepts (min_driver 550)."""
    state = a100x2_pcie_bridge()
    state.update(driver_version="550.54.15", cuda_driver_version=12040, nvml_version="12.550.54.15")
    return state


def rtx4090x4_example():
    """The rtx4090x4 example's host once nvidia-persistenced runs (the example expects persistence on)."""
    state = rtx4090x4_two_numa()
    for gpu in state["gpus"]:
        gpu["persistence"] = 1
    return state


TOPOLOGIES = {
    "h200x2": h200x2,
    "h100x8_nvswitch": h100x8_nvswitch,
    "a100x2_pcie_bridge": a100x2_pcie_bridge,
    "rtx4090x4_two_numa": rtx4090x4_two_numa,
    "a100x8_mig": a100x8_mig,
    "erroring_gpu": erroring_gpu,
    "nvml_mismatch": nvml_mismatch,
    "no_driver": no_driver,
    "mig_testhost": mig_testhost,
    "a100x2_example": a100x2_example,
    "h100x4_example": h100x4_example,
    "h200x8_example": h200x8_example,
    "rtx4090x4_example": rtx4090x4_example,
}


if __name__ == "__main__":
    print(json.dumps(TOPOLOGIES[sys.argv[1]](), indent=1, sort_keys=True))
