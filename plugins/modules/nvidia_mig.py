#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: nvidia_mig
short_description: Set the MIG mode of NVIDIA GPUs, knowing that a pending mode is not an applied one
version_added: 0.1.0
description:
  - Reads the MIG mode (current, pending) of every selected GPU through NVML and sets the pending mode
    where it differs from O(mode).
  - A GPU whose pending mode already equals O(mode) but whose current mode does not is B(not changed)
    but reported with RV(gpus[].reset_required=true); the mode takes effect after a GPU reset or a reboot.
  - Refuses to change a GPU that has compute processes on it, listing their PIDs and names, unless
    O(force=true).
  - Never resets a GPU and never reboots; the C(gpufleet.vllm.mig) role applies the reset policy.
  - GPUs without MIG support (for example RTX 4090, L40S) satisfy V(disabled); V(enabled) fails for them.
author:
  - gpufleet.vllm maintainers (@gpufleet)
options:
  mode:
    description: Desired MIG mode.
    type: str
    choices: [enabled, disabled]
    required: true
  gpus:
    description:
      - GPUs to act on, as NVML indices or UUIDs. Empty means all GPUs.
    type: list
    elements: str
    default: []
  force:
    description:
      - Change the mode even when compute processes run on the GPU. The change then usually fails at
        reset time; stop the processes instead.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Reports what would change without setting anything.
  diff_mode:
    support: full
    description: Shows current and pending mode per GPU before and after.
requirements:
  - NVIDIA driver and nvidia-ml-py (C(pip install nvidia-ml-py)) on the target.
  - Root (setting the MIG mode needs it).
notes:
  - A host without a usable NVIDIA driver satisfies O(mode=disabled) with no GPU and fails O(mode=enabled).
seealso:
  - module: gpufleet.vllm.gpu_facts
  - name: NVIDIA MIG user guide
    description: MIG modes, resets and what holds a GPU.
    link: https://docs.nvidia.com/datacenter/tesla/mig-user-guide/
"""

EXAMPLES = r"""
- name: Whole GPUs for long-context serving (MIG off everywhere)
  gpufleet.vllm.nvidia_mig:
    mode: disabled
  register: mig

- name: Tell the operator a reset is still needed
  ansible.builtin.debug:
    msg: "reset required on {{ mig.gpus | selectattr('reset_required') | map(attribute='index') | list }}"
  when: mig.reset_required

- name: Enable MIG on two GPUs by UUID, in check mode first
  gpufleet.vllm.nvidia_mig:
    mode: enabled
    gpus:
      - GPU-93b246b7-8cba-5a98-bfb2-7864472c8e7b
      - "1"
  check_mode: true
"""

RETURN = r"""
gpus:
  description: One entry per selected GPU.
  returned: always
  type: list
  elements: dict
  contains:
    index:
      description: NVML index.
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
    current:
      description: Current MIG mode after the module ran (V(null) when MIG is not supported).
      type: str
      sample: disabled
    pending:
      description: Pending MIG mode after the module ran (in check mode, what it would be).
      type: str
      sample: disabled
    desired:
      description: The requested mode.
      type: str
      sample: disabled
    changed:
      description: Whether the pending mode was (or in check mode would be) set.
      type: bool
      sample: false
    reset_required:
      description: Whether current differs from the desired mode (a GPU reset or a reboot applies it).
      type: bool
      sample: false
    activation_status:
      description: NVML's activation status of the change (only when the mode was set).
      type: str
      sample: success
    processes:
      description: Compute processes found on the GPU (pid, name, used memory).
      type: list
      elements: dict
      sample: []
reset_required:
  description: Whether any selected GPU needs a reset (or a reboot) for its mode to take effect.
  returned: always
  type: bool
  sample: false
reboot_required:
  description:
    - Whether NVML's activation status of a change was V(reset_required) (C(NVML_ERROR_RESET_REQUIRED)).
      Per NVML's C(nvmlDeviceSetMigMode) documentation, on platforms such as pass-through virtualization
      where GPU reset is not exposed, only a (VM) reboot applies the mode.
    - An activation status of V(in_use) (the device was not idle) is not a reboot. Idle the GPU, then a
      GPU reset applies the pending mode (RV(reset_required)).
  returned: always
  type: bool
  sample: false
reason:
  description: Why no GPU was handled (no usable driver), V(null) otherwise.
  returned: always
  type: str
  sample: null
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import run_guarded
from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu.mig import after_apply, decide_actions, diff, needs_reboot
from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu.nvml import (
    Nvml,
    NvmlFatalError,
    load_pynvml,
    mig_state,
    set_mig_mode,
)


def _open_nvml(module, mode):
    try:
        nvml = Nvml(load_pynvml())
        nvml.init()
    except NvmlFatalError as exc:
        if not (exc.absent and mode == "disabled" and not module.params["gpus"]):
            raise
        module.exit_json(changed=False, gpus=[], reset_required=False, reboot_required=False,
                         reason="no usable NVIDIA driver (%s): nothing to disable" % exc.kind)
    return nvml


def _apply_one(module, nvml, handles, entry, mode):
    activation = set_mig_mode(nvml, handles[entry["index"]], mode, "GPU%d (%s)" % (entry["index"], entry.get("uuid")))
    # NVML: the change may unbind or reset the device, so its attributes are read again.
    fresh, dummy = mig_state(nvml)
    now = fresh[entry["index"]]
    return after_apply(entry, now["current"], now["pending"], activation)


def _converge(module, nvml, mode):
    state, handles = mig_state(nvml)
    planned = decide_actions(state, mode, module.params["gpus"], module.params["force"])
    by_index = dict((g["index"], g) for g in state)
    results = []
    for entry in planned["gpus"]:
        entry = dict(entry)
        entry["processes"] = by_index[entry["index"]]["processes"]
        if entry["action"] == "set" and not module.check_mode:
            entry = _apply_one(module, nvml, handles, entry, mode)
        elif entry["action"] == "set":
            entry["pending"] = mode
        entry.pop("action")
        results.append(entry)
    result = dict(
        changed=planned["changed"],
        gpus=results,
        reset_required=any(e["reset_required"] for e in results),
        reboot_required=any(needs_reboot(e) for e in results),
        reason=None,
    )
    if module._diff:
        result["diff"] = diff(planned)
    return result


def _run(module):
    mode = module.params["mode"]
    nvml = _open_nvml(module, mode)
    try:
        result = _converge(module, nvml, mode)
    finally:
        nvml.shutdown()
    module.exit_json(**result)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            mode=dict(type="str", required=True, choices=["enabled", "disabled"]),
            gpus=dict(type="list", elements="str", default=[]),
            force=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    run_guarded(module, _run, "nvidia_mig")


if __name__ == "__main__":
    main()
