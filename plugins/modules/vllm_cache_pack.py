#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: vllm_cache_pack
short_description: Pack the compile caches of a host's last vLLM starts for the rollout's pre-warm copy
version_added: 0.1.0
author:
  - gpufleet.vllm maintainers (@gpufleet)
description:
  - Reads the last start record of each of O(instances) in O(state_dir) (written by
    M(gpufleet.vllm.vllm_startup_report)), and packs, from O(cache_dir), each key folder they name
    (C(vllm/torch_compile_cache/KEY), C(vllm/torch_compile_cache/torch_aot_compile/KEY)) and the Triton cache
    C(triton) into a gzip tar.
  - Both folders can be written by the service account, and the module runs as root. So the records are checked
    as untrusted input (a file that is not a start record fails, naming it), the pack is built from a walk that
    never follows a symbolic link (links are left out and listed in RV(left_out)), and it is written to a new file
    with a unique name and mode 0600 in O(dest_dir). The caller removes it once fetched.
  - The core is C(plugins/module_utils/startup/prewarm.py) over C(plugins/module_utils/host/root_fs.py).
options:
  cache_dir:
    description: The source's C(vllm_cache_dir).
    type: path
    required: true
  state_dir:
    description: The source's C(vllm_startup_state_dir).
    type: path
    required: true
  instances:
    description: The instances whose caches are packed.
    type: list
    elements: str
    required: true
  dest_dir:
    description: A folder only root can write, where the pack is created.
    type: path
    required: true
attributes:
  check_mode:
    support: full
    description: Reads the records and reports the keys; writes nothing.
  diff_mode:
    support: none
    description: The pack is a new file; there is nothing to compare.
"""

EXAMPLES = r"""
- name: Pack the caches of the last starts
  gpufleet.vllm.vllm_cache_pack:
    cache_dir: /var/cache/vllm
    state_dir: /var/lib/vllm/startup
    instances: [a, b]
    dest_dir: /var/lib
  register: pack
"""

RETURN = r"""
path:
  description: The pack (empty when the records name no key, or in check mode).
  returned: always
  type: str
  sample: /var/lib/gpufleet-prewarm-3f2a9c0d1e2b4a5f.tar.gz
keys:
  description: The key folders the records name.
  returned: always
  type: list
  elements: str
members:
  description: The folders packed (the others were absent).
  returned: always
  type: list
  elements: str
files:
  description: How many files were packed.
  returned: always
  type: int
left_out:
  description: Links and other non-regular files left out (never followed).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import run_guarded
from ansible_collections.gpufleet.vllm.plugins.module_utils.startup import prewarm


def _pack(module):
    p = module.params
    result = prewarm.pack_caches(p["cache_dir"], p["state_dir"], p["instances"], p["dest_dir"],
                                 check_mode=module.check_mode)
    for path in result["left_out"]:
        module.warn("%s is a link or not a regular file/folder: left out of the pre-warm pack, not followed" % path)
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            cache_dir=dict(type="path", required=True),
            state_dir=dict(type="path", required=True),
            instances=dict(type="list", elements="str", required=True),
            dest_dir=dict(type="path", required=True),
        ),
        supports_check_mode=True,
    )
    module.exit_json(**run_guarded(module, _pack, "Packing the compile caches"))


if __name__ == "__main__":
    main()
