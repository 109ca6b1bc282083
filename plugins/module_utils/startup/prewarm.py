# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout's pre-warm pack (the vllm_cache_pack module's core): the compile caches of one host's last starts.

Root packs a folder the service account owns (``vllm_cache_dir``), from key folders named by records in another
folder it can write (``vllm_startup_state_dir``). So the records are read and checked by :mod:`store` (a record
that is not one is an error naming the file), the key folders are only hex names, and the pack is built by
``root_fs.pack``: a walk that never follows a link (a link the account planted, e.g.
``vllm/torch_compile_cache -> /root``, is left out and named in ``left_out``), written to a new file with a unique
name and mode 0600 in a folder of root's. The playbook removes it once fetched.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpufleet.vllm.plugins.module_utils.host import root_fs
from ansible_collections.gpufleet.vllm.plugins.module_utils.startup import store

PACK_PREFIX = "gpufleet-prewarm-"


def keys_of(state_dir, instances):
    """The compile-cache key folders the instances' last start records name, in order, each once."""
    records = store.Store(state_dir, create=False)
    keys = []
    try:
        for name in instances:
            record = records.current(name) or {}
            keys += [k for k in record.get("compile", {}).get("keys", []) if k not in keys]
    finally:
        records.close()
    return keys


def members(keys):
    """The folders of ``vllm_cache_dir`` to copy: each key's torch.compile folders and the Triton cache."""
    return (["vllm/torch_compile_cache/" + k for k in keys]
            + ["vllm/torch_compile_cache/torch_aot_compile/" + k for k in keys] + ["triton"])


def pack_caches(cache_dir, state_dir, instances, dest_dir, check_mode=False):
    """Pack the caches: {changed, path ('' when nothing to pack), keys, members, files, left_out}."""
    keys = keys_of(state_dir, [store.check_instance(i) for i in instances])
    result = dict(changed=bool(keys), path="", keys=keys, members=[], files=0, left_out=[])
    if not keys or check_mode:
        return result
    src_fd = root_fs.open_path(cache_dir)
    try:
        dest_fd = root_fs.open_path(dest_dir)
        try:
            fd, name = root_fs.temp_file_at(dest_fd, PACK_PREFIX, ".tar.gz")
            try:
                result.update(root_fs.pack(src_fd, cache_dir, members(keys), fd))
            except BaseException:
                root_fs.unlink_quiet(dest_fd, name)
                raise
            finally:
                os.close(fd)
        finally:
            os.close(dest_fd)
    finally:
        os.close(src_fd)
    result["path"] = os.path.join(dest_dir, name)
    return result
