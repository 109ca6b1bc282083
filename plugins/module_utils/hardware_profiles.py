# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Named GPU profiles for planning on hardware you do not have yet.

Each memory figure is what the driver reports for one GPU, never the marketing size, with
where it was read. ONE definition for every ``gpus`` declaration (a profile here, a declared
``memory_total_bytes``, or gpu_facts): ``memory_total_bytes`` is the driver's NVML total, what
``nvidia-smi --query-gpu=memory.total`` prints in MiB x 2^20 and what gpu_facts reports. vLLM's
``requested = util x total`` uses the CUDA total (cudaMemGetInfo), which is below it by the driver's
reservation; the planner takes that gap off once (``cuda_total``, from ``CUDA_GAPS``).
Pure Python, no Ansible import.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError

MIB = 1024 ** 2

PROFILES = {
    "rtx3090": {
        "name": "NVIDIA GeForce RTX 3090", "memory_total_bytes": 24576 * MIB, "compute_capability": "8.6",
        "source": "nvidia-smi memory.total 24576 MiB (e.g. '0, NVIDIA GeForce RTX 3090, 24576, ..., 550.54' in public "
                  "test fixtures found with the search tool, ids 71588275258, 55288568262)",
    },
    "rtx4090": {
        "name": "NVIDIA GeForce RTX 4090", "memory_total_bytes": 24564 * MIB, "compute_capability": "8.9",
        "source": "nvidia-smi memory.total 24564 MiB, driver 550.90.07 (search-tool file id 55288568262)",
    },
    "rtx5090": {
        "name": "NVIDIA GeForce RTX 5090", "memory_total_bytes": 32607 * MIB, "compute_capability": "12.0",
        "source": "nvidia-smi memory.total 32607 MiB, drivers 580.173.02 to 610.43.02 (search-tool file ids 71296261736, 54569639022)",
    },
    "l40s": {
        "name": "NVIDIA L40S", "memory_total_bytes": 46068 * MIB, "compute_capability": "8.9",
        "source": "nvidia-smi 46068 MiB (https://github.com/modal-labs/modal-client/pull/2797)",
    },
    "a100-40gb": {
        "name": "NVIDIA A100-SXM4-40GB", "memory_total_bytes": 40960 * MIB, "compute_capability": "8.0",
        "source": "nvidia-smi 40960 MiB (modal-client#2797); CUDA deviceQuery 'Total amount of global memory: 40339 MBytes "
                  "(42298834944 bytes)' (https://github.com/bottlerocket-os/bottlerocket/pull/3873): CUDA_GAPS",
    },
    "a100-80gb": {
        "name": "NVIDIA A100-SXM4-80GB", "memory_total_bytes": 81920 * MIB, "compute_capability": "8.0",
        "source": "nvidia-smi 81920 MiB on drivers 535 to 595 (modal-client#2797; 'NVIDIA A100 80GB PCIe, 81920 MiB', "
                  "search-tool file ids 63162668273, 68922542039); CUDA deviceQuery 'Total amount of global memory: 81251 "
                  "MBytes' (search-tool file id 54573392711): CUDA_GAPS. Driver 450's nvidia-smi printed 81252 MiB "
                  "(https://github.com/keyu-tian/SparK/issues/8)",
    },
    "h100": {
        "name": "NVIDIA H100 80GB HBM3", "memory_total_bytes": 81559 * MIB, "compute_capability": "9.0",
        "source": "nvidia-smi 81559 MiB = 85520809984 bytes (https://github.com/modal-labs/modal-client/pull/2797)",
    },
    "h200": {
        "name": "NVIDIA H200", "memory_total_bytes": 143771 * MIB, "compute_capability": "9.0",
        "source": "nvidia-smi and NVML 143771 MiB = 150754820096 B on this project's 2 x H200 host "
                  "(tests/fixtures/gpu-acceptance/gpu_facts.json); CUDA 150109880320 B there: CUDA_GAPS",
    },
    "b200": {
        "name": "NVIDIA B200", "memory_total_bytes": 183359 * MIB, "compute_capability": "10.0",
        "source": "nvidia-smi 183359 MiB, compute capability 10.0, driver 595.71.05 (search-tool file id 56960514481)",
    },
}


# NVML total - CUDA total (cudaMemGetInfo, what vLLM's util x total uses), per GPU name, where both were seen.
CUDA_GAPS = {
    # 150754820096 (gpu_facts.json, NVML) - 150109880320 (vLLM 0.26.0's "Free memory on device (139.29/139.8 GiB)"
    # and torch.cuda.mem_get_info on the same host, notes/GPU_HOST.md) = 615.06 MiB.
    "NVIDIA H200": 644939776,
    # 81920 MiB (nvidia-smi) - 81251 MiB (deviceQuery), the a100-80gb sources above.
    "NVIDIA A100-SXM4-80GB": (81920 - 81251) * MIB,
    "NVIDIA A100 80GB PCIe": (81920 - 81251) * MIB,
    # 40960 MiB (nvidia-smi) - 42298834944 B (deviceQuery), the a100-40gb sources above.
    "NVIDIA A100-SXM4-40GB": 40960 * MIB - 42298834944,
}
# A GPU whose two totals were not both seen: the H200's measured gap (the driver's reservation is of that
# order on data-centre parts; taking it off keeps the utilization estimate from landing above the engine).
DEFAULT_CUDA_GAP = 644939776


def cuda_total(name, nvml_total_bytes, known_only=False):
    """The CUDA total vLLM sizes from, for a GPU whose declared/NVML total is ``nvml_total_bytes``.
    ``known_only``: only a measured gap (an error such as the OOM check must not rest on the assumed one)."""
    if not nvml_total_bytes:
        return nvml_total_bytes
    return int(nvml_total_bytes) - CUDA_GAPS.get(str(name or ""), 0 if known_only else DEFAULT_CUDA_GAP)


class ProfileError(UserError, ValueError):
    """Unknown profile name or bad count; the message lists the names."""


def hardware_profile(name, count, numa_nodes=None, nvlink_islands=None):
    """A vllm_plan ``gpus`` declaration for ``count`` GPUs of the named profile."""
    key = str(name).lower().replace(" ", "").replace("_", "-")
    if key not in PROFILES:
        raise ProfileError("unknown GPU profile %r: use one of %s, or declare gpus {count, name, memory_total_bytes, "
                           "compute_capability} yourself" % (name, ", ".join(sorted(PROFILES))))
    if int(count) < 1:
        raise ProfileError("gpu count must be >= 1, got %r" % count)
    prof = PROFILES[key]
    out = {"count": int(count), "name": prof["name"], "memory_total_bytes": prof["memory_total_bytes"],
           "compute_capability": prof["compute_capability"], "nvlink_islands": nvlink_islands or [],
           "numa_nodes": numa_nodes or [list(range(int(count)))]}
    return out
