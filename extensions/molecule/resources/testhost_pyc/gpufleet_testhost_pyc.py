# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""TEST HOSTS ONLY (the test-host image of scripts/build-testhost-image.sh): a bytecode cache for zip imports.

Python's zipimport compiles every .py it imports from a zip file, every time. Ansible sends each module as such a
zip (AnsiballZ): on a test host, importing ansible.module_utils.basic and its imports took 87 ms of a 130 ms `stat`
(`python3 -X importtime`), most of it compiling them again; with this cache the run takes about 45 % less CPU.
This keeps each compiled module in CACHE, keyed by the interpreter's magic number, its optimize flag and the source's
digest, and gives it back under the file name it is imported from now. Any error falls back to zipimport's own
compile. Loaded at start-up by gpufleet_testhost_pyc.pth; the interpreters of venvs (vLLM's) do not read that folder.
"""
import hashlib
import importlib.util
import marshal
import os
import sys
import zipimport

CACHE = os.environ.get("GPUFLEET_PYC_CACHE", "/var/cache/gpufleet-testhost-pyc")
_COMPILE = zipimport._compile_source  # pylint: disable=protected-access


def _renamed(code, filename):
    """The code object and the ones nested in it, with co_filename set to ``filename``."""
    consts = tuple(_renamed(item, filename) if isinstance(item, type(code)) else item for item in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def cache_path(source):
    key = hashlib.sha256(importlib.util.MAGIC_NUMBER + bytes([sys.flags.optimize]) + source).hexdigest()
    return os.path.join(CACHE, key[:2], key)


def cached_compile(pathname, source):
    """zipimport._compile_source, through the cache."""
    try:
        path = cache_path(source)
        try:
            with open(path, "rb") as handle:
                return _renamed(marshal.loads(handle.read()), pathname)
        except (OSError, ValueError, EOFError, TypeError):
            pass
        code = _COMPILE(pathname, source)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = "%s.%d.tmp" % (path, os.getpid())
        with open(tmp, "wb") as handle:
            handle.write(marshal.dumps(code))
        os.rename(tmp, path)  # whole files only: another process reads the old one or the new one
        return code
    except Exception:  # pylint: disable=broad-except
        return _COMPILE(pathname, source)


zipimport._compile_source = cached_compile  # pylint: disable=protected-access
