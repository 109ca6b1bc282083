# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the collection knows about NVIDIA GPU families and products: one table (pure, a leaf).

Supporting a new GPU is a change of this file (docs/DEVELOPING.md, "Support a new GPU"): a row of
``FAMILIES`` when its compute capability is new, a ``PROFILES`` entry (the driver's memory total, with
where it was read) for planning without the hardware, and its ``CUDA_GAPS`` entry once both totals were
seen. Users: nvml and gpu_facts_assembly (MIG capability), kv_capacity (kernel block alignment,
FlashInfer GDN prefill), planner (native FP8), hardware_profiles (profiles, CUDA totals).

``FAMILIES`` rows are ``(first compute capability, family, native FP8, MIG, FA4 hd256 pages, GDN prefill)``,
oldest first; a GPU takes the row of the newest first capability not above its own (:func:`family`).
- native FP8: FP8 tensor cores (sm89 and later); on sm80/86 vLLM converts FP8 KV in software.
- MIG: NVIDIA's MIG user guide "Supported GPUs" table
  (https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-gpus.html): every GA100 (8.0),
  GH100 (9.0) and GB100/GB110 (10.0, 10.3) part, and of the 12.0 parts only the RTX PRO 6000/5000/4500
  Blackwell (a tuple of product-name parts); no 7.x or earlier, no GA10x (8.6), Orin (8.7), AD10x (8.9,
  L40S/L4/RTX 4090) or GB10 (12.1).
- FA4 hd256 pages: FlashAttention 4's head-dim-256 kernel uses 128-token pages on SM10x/11x
  (vLLM ``FA4_HD256_PAGE_SIZE``); elsewhere kernel blocks are multiples of 16.
- GDN prefill: vLLM 0.33 ``_resolve_gdn_prefill_backend``: FlashInfer on SM90 ("always"), on SM10x/SM12x
  when linear_key_head_dim == 128 ("k128"), else None (Triton).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

_RTX_PRO_MIG = ("RTX PRO 6000", "RTX PRO 5000", "RTX PRO 4500")

FAMILIES = (
    ((0, 0), "before Ampere", False, False, False, None),
    ((8, 0), "Ampere GA100 (A100)", False, True, False, None),
    ((8, 1), "Ampere GA10x, Orin (RTX 30, A10, A40)", False, False, False, None),
    ((8, 9), "Ada AD10x (L40S, L4, RTX 40)", True, False, False, None),
    ((9, 0), "Hopper GH100 (H100, H200, GH200)", True, True, False, "always"),
    ((9, 1), "Hopper, other", True, False, False, "always"),
    ((10, 0), "Blackwell GB100 (B200, GB200)", True, True, True, "k128"),
    ((10, 1), "Blackwell 10.x, other", True, False, True, "k128"),
    ((10, 3), "Blackwell GB110 (B300, GB300)", True, True, True, "k128"),
    ((10, 4), "Blackwell 10.x, other", True, False, True, "k128"),
    ((11, 0), "Blackwell 11.x (Thor)", True, False, True, None),
    ((12, 0), "Blackwell GB20x (RTX 50, RTX PRO)", True, _RTX_PRO_MIG, False, "k128"),
    ((12, 1), "Blackwell GB10 (DGX Spark)", True, False, False, "k128"),
    ((12, 2), "Blackwell 12.x, other", True, False, False, "k128"),
    ((13, 0), "after Blackwell (not read)", True, False, False, None),
)
FAMILY_KEYS = ("first", "family", "native_fp8", "mig", "fa4_hd256_pages", "gdn_prefill")


def family(cc):
    """The FAMILIES row of compute capability ``cc`` ((major, minor) or 'M.m') as a dict; None for None."""
    if cc is None:
        return None
    if not isinstance(cc, tuple):
        major, dummy, minor = str(cc).partition(".")
        cc = (int(major), int(minor or 0))
    cc = (int(cc[0]), int(cc[1]))
    row = [r for r in FAMILIES if cc >= r[0]][-1]
    return dict(zip(FAMILY_KEYS, row))


def native_fp8(cc):
    """FP8 tensor cores; None when the capability is not known."""
    row = family(cc)
    return None if row is None else row["native_fp8"]


def mig_capable(name, cc, mode_answered):
    """Whether the GPU supports MIG: the mode call must answer AND the product be one NVIDIA lists
    (some drivers answer the MIG mode call with 'disabled' on parts without MIG)."""
    if not mode_answered:
        return False
    row = family(cc)
    if row is None:
        return True
    if isinstance(row["mig"], tuple):
        return any(part in (name or "") for part in row["mig"])
    return row["mig"]


def fa4_hd256_pages(cc):
    row = family(cc)
    return bool(row and row["fa4_hd256_pages"])


def gdn_flashinfer(cc, linear_key_head_dim):
    """Whether vLLM 0.33+ prefills GDN (linear attention) with FlashInfer on this GPU."""
    row = family(cc)
    rule = row and row["gdn_prefill"]
    return rule == "always" or (rule == "k128" and linear_key_head_dim == 128)


# --- Named products for planning without the hardware (vllm_plan gpus: {profile, count}) ------------------
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
