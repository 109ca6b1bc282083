#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: Gather NVIDIA GPU facts (NVML, or nvidia-smi as a fallback), topology included
version_added: 0.1.0
description:
  - Reads every NVIDIA GPU of the host through NVML (nvidia-ml-py) or by parsing C(nvidia-smi -q -x)
    and C(nvidia-smi topo -m), and returns the same data both as the module result and as
    C(ansible_facts.gpufleet_gpu).
  - Per GPU it reports identity, memory, compute capability, persistence, ECC, power limit, MIG mode
    (current and pending) and MIG devices, NUMA node and CPU affinity, NVLink links and fabric state.
  - Across GPUs it reports a GPU x GPU matrix in C(nvidia-smi topo -m) words (V(NV#), V(PIX), V(PXB),
    V(PHB), V(NODE), V(SYS)), the NVLink islands and the GPUs grouped by NUMA node, which is what the
    C(gpufleet.vllm) planner uses to place tensor-parallel groups.
  - A field NVML cannot read (NotSupported, or an error) becomes V(null) and the error is recorded in
    that GPU's RV(gpus[].errors); only NVML broken as a whole fails the module, with the fix in the message.
  - A host without the NVIDIA driver or without GPUs gives RV(gpu_count=0) and RV(reason), unless
    O(min_gpus) asks for more.
author:
  - gpufleet.vllm maintainers (@gpufleet)
options:
  backend:
    description:
      - Where to read from. V(nvml) uses nvidia-ml-py (C(import pynvml); the unofficial C(pynvml)
        distribution is refused). V(nvidia-smi) parses C(nvidia-smi -q -x), C(nvidia-smi topo -m) and
        C(nvidia-smi --query-gpu=pci.bus_id,compute_cap). V(auto) prefers NVML and falls back to
        nvidia-smi when nvidia-ml-py is not installed.
    type: str
    choices: [auto, nvml, nvidia-smi]
    default: auto
  expected:
    description:
      - What the inventory declares; every difference is returned in RV(mismatches) (the module itself
        does not fail on them, the C(gpufleet.vllm.gpu_preflight) role does).
      - Keys (all optional) C(count) (int), C(name_pattern) (regular expression), C(min_memory_mib) (int),
        C(nvlink) (V(required), V(forbidden) or V(any)), C(nvlinks_per_gpu) (int), C(mig_disabled) (bool),
        C(persistence) (bool), C(min_driver) (version string).
      - GPUs with fewer active links than their peers are always reported. An inactive link is reported
        as down where NVLink is expected (C(nvlink=required) or C(nvlinks_per_gpu)) or where another GPU
        has the same link number active (NVML may answer for link numbers a card does not wire).
      - A value the checks cannot use (a non-integer count, an invalid regular expression) fails the
        module with a message naming the key.
    type: dict
    default: {}
  min_gpus:
    description:
      - Fail when fewer GPUs are found (also when there is no driver at all). V(0) never fails for
        a missing GPU.
    type: int
    default: 0
attributes:
  check_mode:
    support: full
    description: The module only reads.
  diff_mode:
    support: none
    description: Nothing changes, so there is nothing to diff.
  facts:
    support: full
    description: Sets C(ansible_facts.gpufleet_gpu).
requirements:
  - NVIDIA driver with C(libnvidia-ml.so.1) on the target.
  - nvidia-ml-py on the target for O(backend=nvml) (C(pip install nvidia-ml-py)).
  - C(nvidia-smi) on the target for O(backend=nvidia-smi).
notes:
  - On NVSwitch systems every NVLink reports the remote PCI id C(FFFFFFFF:FF:FF.0), so peers are found
    through NVML's NVLink P2P status, not by matching remote PCI ids.
  - NUMA node comes from NVML when it supports it, otherwise from C(/sys/bus/pci/devices/*/numa_node)
    (V(-1) there means unknown, reported as V(null)).
  - The V(nvidia-smi) backend cannot see the NVML version or NVLink versions; it reads per-link state
    from C(nvidia-smi nvlink -s) and the remote end from C(nvidia-smi nvlink -R) (V(gpu) when the remote
    is a GPU of this host, V(nvswitch) otherwise). RV(unavailable) lists what it cannot see.
  - C(nvidia-smi topo -m) is read by tokens and by the header's column positions, cross-checked, so
    lost or doubled separators and notes on the same lines still parse; C(SOC) (drivers before 384)
    is reported as V(SYS).
seealso:
  - module: gpufleet.vllm.nvidia_mig
  - name: NVML API reference
    description: The library behind both backends.
    link: https://docs.nvidia.com/deploy/nvml-api/
"""

EXAMPLES = r"""
- name: Gather GPU facts (NVML, nvidia-smi as a fallback)
  gpufleet.vllm.gpu_facts:

- name: Use nvidia-smi only and require at least 8 GPUs
  gpufleet.vllm.gpu_facts:
    backend: nvidia-smi
    min_gpus: 8

- name: Show the NVLink islands the planner will use
  ansible.builtin.debug:
    msg: "{{ ansible_facts.gpufleet_gpu.nvlink_islands }}"
"""

RETURN = r"""
backend:
  description: Backend that produced the data (V(none) when no driver was found).
  returned: always
  type: str
  sample: nvml
gpu_count:
  description: Number of GPUs found.
  returned: always
  type: int
  sample: 2
reason:
  description: Why no GPU was found (no driver, no nvidia-ml-py and no nvidia-smi, no devices); V(null) otherwise.
  returned: always
  type: str
  sample: "NVIDIA driver not loaded (no usable NVML: driver_not_loaded)"
driver_version:
  description: NVIDIA driver version.
  returned: always
  type: str
  sample: "580.159.04"
cuda_driver_version:
  description: Highest CUDA version the driver supports.
  returned: always
  type: str
  sample: "13.0"
nvml_version:
  description: NVML library version (V(null) with the nvidia-smi backend).
  returned: always
  type: str
  sample: "13.580.159.04"
gpus:
  description: One entry per GPU, in NVML index order.
  returned: always
  type: list
  elements: dict
  contains:
    index:
      description: NVML index (the order of C(nvidia-smi) and of C(CUDA_DEVICE_ORDER=PCI_BUS_ID)).
      type: int
      sample: 0
    minor_number:
      description: Minor number of C(/dev/nvidiaN).
      type: int
      sample: 0
    uuid:
      description: GPU UUID.
      type: str
      sample: GPU-93b246b7-8cba-5a98-bfb2-7864472c8e7b
    name:
      description: Product name.
      type: str
      sample: NVIDIA H200
    pci_bus_id:
      description: Canonical PCI bus id (8-digit domain, upper case), as NVML and nvidia-smi print it.
      type: str
      sample: "00000000:00:06.0"
    memory_total_bytes:
      description: Total framebuffer memory in bytes.
      type: int
      sample: 150754820096
    memory_total_mib:
      description: Total framebuffer memory in MiB (as nvidia-smi prints it).
      type: int
      sample: 143771
    compute_capability:
      description: CUDA compute capability as a string.
      type: str
      sample: "9.0"
    persistence_mode:
      description: Whether persistence mode is on.
      type: bool
      sample: true
    ecc_mode:
      description: ECC mode, current and pending (V(null) when the GPU has no ECC).
      type: dict
      sample: {"current": true, "pending": true}
    power_limit_watts:
      description: Power management limit in watts.
      type: float
      sample: 700.0
    mig:
      description:
        - MIG mode. C(current) and C(pending) are V(enabled), V(disabled) or V(null) (no MIG support).
        - A pending mode that differs from the current one takes effect after a GPU reset or a reboot.
        - C(devices) lists MIG devices (GPU instance id, compute instance id, memory bytes, uuid).
        - C(supported) is true only for products NVIDIA lists as MIG-capable (A100/A30, H100/H200/H20,
          B200/GB200/B300, RTX PRO 6000/5000/4500 Blackwell) whose MIG mode call answers.
      type: dict
      sample: {"current": "disabled", "pending": "disabled", "supported": true, "devices": []}
    numa_node:
      description: NUMA node of the GPU; V(null) when unknown (VMs often report -1).
      type: int
      sample: null
    cpu_affinity:
      description:
        - CPUs close to the GPU, as a list (the NVML mask is read for up to 1024 CPUs).
        - V(null) with the reason in C(errors.cpu_affinity) when NVML returns none.
      type: list
      elements: int
      sample: [0, 1, 2, 3]
    cpu_affinity_str:
      description: The same CPUs as the range string nvidia-smi prints.
      type: str
      sample: "0-31"
    nvlinks:
      description:
        - NVLink links up to the GPU's link count (C(NVML_FI_DEV_NVLINK_LINK_COUNT), else up to the first
          link NVML does not know); V(null) when C(nvidia-smi nvlink) cannot be read.
        - C(remote) is V(gpu), V(nvswitch), V(cpu) or V(null) (unknown); C(version) is V(null) with nvidia-smi.
        - On NVSwitch systems C(remote_pci_bus_id) is C(FFFFFFFF:FF:FF.0) for every link.
      type: list
      elements: dict
      sample: [{"link": 0, "active": true, "version": 6, "remote": "nvswitch", "remote_pci_bus_id": "FFFFFFFF:FF:FF.0"}]
    nvlink_active_count:
      description: Number of active NVLink links (V(null) when the links could not be read).
      type: int
      sample: 18
    fabric:
      description: NVSwitch fabric registration of the GPU (Hopper and later), V(null) when not applicable.
      type: dict
      sample: {"state": "completed", "status": "success"}
    errors:
      description: Fields that could not be read on this GPU, with the NVML error.
      type: dict
      sample: {"power_limit_watts": "not_supported: Not Supported"}
topology:
  description:
    - C(links) maps each GPU pair C(i-j) (i < j) to the nvidia-smi word (V(NV18), V(PHB), ...).
    - C(matrix) is the same as text, for humans.
  returned: always
  type: dict
  sample: {"links": {"0-1": "NV18"}, "matrix": "      GPU0   GPU1\nGPU0  X      NV18\nGPU1  NV18   X"}
nvlink_islands:
  description: Groups of GPU indices connected through NVLink (a GPU without NVLink is an island of one).
  returned: always
  type: list
  elements: list
  sample: [[0, 1]]
numa_nodes:
  description: GPU indices grouped by NUMA node, ordered by node, GPUs of unknown node last in one group.
  returned: always
  type: list
  elements: list
  sample: [[0, 1]]
numa_memory_bytes:
  description:
    - Each NUMA node's memory in bytes (C(MemTotal) of C(/sys/devices/system/node/nodeN/meminfo)), by node number;
      empty where the kernel shows no nodes. The vllm role's plan checks each node's offload tiers against it.
  returned: always
  type: dict
  sample: {"0": 270582939648, "1": 270582939648}
numa_groups:
  description: The same groups with their node (V(null) = unknown).
  returned: always
  type: list
  elements: dict
  sample: [{"node": null, "gpus": [0, 1]}]
nvswitch:
  description: Whether the GPUs are linked through NVSwitches (then nvidia-fabricmanager must run).
  returned: always
  type: bool
  sample: true
pairs:
  description: Per GPU pair, NVML's NVLink P2P status and PCIe common ancestor (empty with nvidia-smi).
  returned: always
  type: dict
  sample: {"0-1": {"p2p_nvlink": true, "common_ancestor": "PHB", "errors": {}}}
unavailable:
  description: Fields the backend cannot see (they are V(null)).
  returned: always
  type: list
  elements: str
  sample: ["nvml_version"]
errors:
  description: Host-wide fields that could not be read.
  returned: always
  type: dict
  sample: {}
summary:
  description: A compact human-readable summary of the host, one line per item.
  returned: always
  type: list
  elements: str
  sample: ["2 GPU(s), driver 580.159.04, CUDA 13.0, backend nvml"]
mismatches:
  description: Differences between O(expected) and what was found, and NVLinks that are down (empty when none).
  returned: always
  type: list
  elements: str
  sample: ["GPU1 has 2 NVLink(s) down: [4, 5]"]
collection_seconds:
  description: Time spent reading the GPUs, in seconds.
  returned: always
  type: float
  sample: 0.12
ansible_facts:
  description: The same data under one key.
  returned: always
  type: complex
  contains:
    gpufleet_gpu:
      description: Everything above (except C(ansible_facts) itself).
      type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import run_guarded
from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu.gpu_facts_assembly import FACTS_KEY
from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu.gpu_gather import ModuleRunner, gpu_facts


def _run(module):
    facts, warnings = gpu_facts(module.params, ModuleRunner(module))
    for warning in warnings:
        module.warn(warning)
    result = dict(facts)
    result["ansible_facts"] = {FACTS_KEY: facts}
    module.exit_json(changed=False, **result)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            backend=dict(type="str", default="auto", choices=["auto", "nvml", "nvidia-smi"]),
            expected=dict(type="dict", default={}),
            min_gpus=dict(type="int", default=0),
        ),
        supports_check_mode=True,
    )
    run_guarded(module, _run, "gpu_facts")


if __name__ == "__main__":
    main()
