# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Named GPU profiles for planning on hardware you do not have yet (the profiles: gpu_families.py).

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

from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu import gpu_families as F
from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError

# The products and their CUDA gaps: the one table of GPUs (gpu_families.py, read at call time).
MIB = F.MIB
PROFILES = F.PROFILES


def cuda_total(name, nvml_total_bytes, known_only=False):
    """The CUDA total vLLM sizes from, for a GPU whose declared/NVML total is ``nvml_total_bytes``.
    ``known_only``: only a measured gap (an error such as the OOM check must not rest on the assumed one)."""
    if not nvml_total_bytes:
        return nvml_total_bytes
    return int(nvml_total_bytes) - F.CUDA_GAPS.get(str(name or ""), 0 if known_only else F.DEFAULT_CUDA_GAP)


class ProfileError(UserError, ValueError):
    """Unknown profile name or bad count; the message lists the names."""


def hardware_profile(name, count, numa_nodes=None, nvlink_islands=None):
    """A vllm_plan ``gpus`` declaration for ``count`` GPUs of the named profile."""
    key = str(name).lower().replace(" ", "").replace("_", "-")
    if key not in F.PROFILES:
        raise ProfileError("unknown GPU profile %r: use one of %s, or declare gpus {count, name, memory_total_bytes, "
                           "compute_capability} yourself" % (name, ", ".join(sorted(F.PROFILES))))
    if int(count) < 1:
        raise ProfileError("gpu count must be >= 1, got %r" % count)
    prof = F.PROFILES[key]
    out = {"count": int(count), "name": prof["name"], "memory_total_bytes": prof["memory_total_bytes"],
           "compute_capability": prof["compute_capability"], "nvlink_islands": nvlink_islands or [],
           "numa_nodes": numa_nodes or [list(range(int(count)))]}
    return out
