# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Shared harness for module unit tests: module arguments in, exit_json / fail_json out as exceptions."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils import basic

try:
    from ansible.module_utils.testing import patch_module_args  # pylint: disable=unused-import  # re-exported (ansible-core >= 2.19)
except ImportError:  # ansible-core < 2.19
    import contextlib
    import json

    from ansible.module_utils.common.text.converters import to_bytes

    @contextlib.contextmanager
    def patch_module_args(args):
        old = basic._ANSIBLE_ARGS
        basic._ANSIBLE_ARGS = to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
        try:
            yield
        finally:
            basic._ANSIBLE_ARGS = old


class Exit(SystemExit):
    """exit_json was called; args[0] is the result. A SystemExit, as the real exit_json's
    sys.exit, so an error boundary (``except Exception``) lets it through."""


class Fail(SystemExit):
    """fail_json was called; args[0] is the result (a SystemExit like Exit)."""


def patch_exits(monkeypatch):
    """Make AnsibleModule.exit_json / fail_json raise Exit / Fail with the result."""
    def exit_json(self, **kwargs):
        raise Exit(kwargs)

    def fail_json(self, **kwargs):
        raise Fail(kwargs)

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)


def run_module(monkeypatch, main, args, check_mode=False, diff=False):
    """Run a module's ``main`` with ``args``; return its result (``failed: True`` when it failed)."""
    import pytest

    patch_exits(monkeypatch)
    args = dict(args, _ansible_check_mode=check_mode, _ansible_diff=diff)
    with patch_module_args(args):
        with pytest.raises((Exit, Fail)) as info:
            main()
    result = dict(info.value.args[0])
    if info.type is Fail:
        result["failed"] = True
    return result
