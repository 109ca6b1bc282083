# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""TEST SUITE ONLY: one AnsiballZ payload cache for all the suite's ansible-playbook runs, not one per run.

Before a task runs a module, Ansible builds the module's payload (AnsiballZ: the module and every module_utils
file it imports, found by parsing each one) and keeps it in ``ansiballz_cache`` under the run's own temporary
folder (``DEFAULT_LOCAL_TMP``, made fresh by every ``ansible-playbook`` and removed at its end), so each of the
suite's 200-odd runs builds every module it uses again: in the ``nginx`` scenario that parsing was about a sixth of
the samples of a profile of its runs (docs/DEVELOPING.md, "The suite's time"). This callback links the run's
``ansiballz_cache`` to a folder shared by all runs, named by a key of everything a payload is built from: ansible-core's
and Python's versions and the state of every module and module_utils file the run can find (the installed
collections, by their MANIFEST.json; a collection without one, such as the suite's synced copy of this one, by
every file under plugins/modules and plugins/module_utils; the configured module and module_utils paths). A change to
any of those makes a new key, so a payload is never taken from another tree. Ansible's own cache code is unchanged:
it already writes each payload under a lock and renames it into place, so concurrent runs share the folder safely.

It acts only when ``GPUFLEET_ANSIBALLZ_CACHE`` names the shared folder (scripts/lib.sh sets it for the suite), and
not for a playbook with a ``library`` or ``module_utils`` folder beside it (modules found there are not in the key).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = """
name: gpufleet_ansiballz_cache
type: aggregate
short_description: Share AnsiballZ payloads between the test suite's runs
description:
  - Links each run's AnsiballZ cache folder to one shared by runs whose modules and module_utils are the same.
    Used by the collection's Molecule scenarios only; not part of the collection's public content.
author: gpufleet.vllm contributors
requirements:
  - GPUFLEET_ANSIBALLZ_CACHE set to a folder (otherwise the callback does nothing)
"""

import hashlib
import os
import sys

import ansible
from ansible import constants as C
from ansible.plugins.callback import CallbackBase
from ansible.utils.collection_loader import AnsibleCollectionConfig

ENV = "GPUFLEET_ANSIBALLZ_CACHE"
LINK = "ansiballz_cache"  # the folder name ansible.executor.module_common uses under DEFAULT_LOCAL_TMP
PAYLOAD_DIRS = ("plugins/modules", "plugins/module_utils")


def _stat_line(path):
    info = os.stat(path)
    return "%s\0%d\0%d\n" % (path, info.st_size, info.st_mtime_ns)


def _tree_lines(top):
    """A line per file under ``top`` (path, size, mtime), in a stable order; none when it does not exist."""
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        for name in sorted(filenames):
            yield _stat_line(os.path.join(dirpath, name))


def _collection_lines(collection_dir):
    """An installed collection changes only with its MANIFEST.json; a source tree is read file by file."""
    manifest = os.path.join(collection_dir, "MANIFEST.json")
    if os.path.isfile(manifest):
        yield _stat_line(manifest)
        return
    for sub in PAYLOAD_DIRS:
        yield from _tree_lines(os.path.join(collection_dir, sub))


def _collections_lines(roots):
    for root in roots:
        base = os.path.join(root, "ansible_collections")
        if not os.path.isdir(base):
            continue
        for namespace in sorted(os.listdir(base)):
            namespace_dir = os.path.join(base, namespace)
            if not os.path.isdir(namespace_dir):
                continue
            for name in sorted(os.listdir(namespace_dir)):
                collection_dir = os.path.join(namespace_dir, name)
                if os.path.isdir(collection_dir):
                    yield from _collection_lines(collection_dir)


def payload_key(collection_roots, module_dirs):
    """A short digest of what AnsiballZ payloads are built from: versions, collections, module folders."""
    digest = hashlib.sha256()
    digest.update(("ansible-core %s\0python %s\n" % (ansible.__version__, sys.version)).encode("utf-8"))
    for line in _collections_lines(collection_roots):
        digest.update(line.encode("utf-8", "surrogateescape"))
    for top in module_dirs:
        digest.update(("dir %s\n" % top).encode("utf-8", "surrogateescape"))
        for line in _tree_lines(top):
            digest.update(line.encode("utf-8", "surrogateescape"))
    return digest.hexdigest()[:16]


def has_adjacent_modules(playbook_path):
    """Whether a playbook has library/ or module_utils/ beside it (Ansible adds those; the key does not see them)."""
    here = os.path.dirname(os.path.abspath(playbook_path))
    return any(os.path.isdir(os.path.join(here, name)) for name in ("library", "module_utils"))


def link_shared_cache(shared_root, key, local_tmp):
    """Point ``local_tmp``/ansiballz_cache at ``shared_root``/``key``; False where the run already has its own."""
    target = os.path.join(shared_root, key)
    os.makedirs(target, exist_ok=True)
    try:
        os.symlink(target, os.path.join(local_tmp, LINK))
    except FileExistsError:
        return False
    return True


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gpufleet_ansiballz_cache"
    # Loaded by every run that has this folder on its callback path: no run's callbacks_enabled needs to change.
    CALLBACK_NEEDS_ENABLED = False

    def v2_playbook_on_start(self, playbook):
        shared_root = os.environ.get(ENV)
        if not shared_root:
            return
        playbook_path = getattr(playbook, "_file_name", None) or ""
        if not playbook_path or has_adjacent_modules(playbook_path):
            self._display.vv("%s: %s has library/ or module_utils/ beside it; this run builds its own payloads"
                             % (self.CALLBACK_NAME, playbook_path))
            return
        module_dirs = list(C.DEFAULT_MODULE_PATH or []) + list(C.DEFAULT_MODULE_UTILS_PATH or [])
        key = payload_key(AnsibleCollectionConfig.collection_paths, module_dirs)
        if link_shared_cache(shared_root, key, C.DEFAULT_LOCAL_TMP):
            self._display.vv("%s: AnsiballZ payloads from %s" % (self.CALLBACK_NAME, os.path.join(shared_root, key)))
