# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import (
    UserError, describe_os_error, failure_result, run_guarded)


class Failed(Exception):
    pass


class FakeModule(object):
    def fail_json(self, **kwargs):
        raise Failed(kwargs)


def _raise(exc):
    def body(module):
        raise exc
    return body


@pytest.mark.parametrize("exc, expected_start, has_traceback", [
    (UserError("gpus[0].memory_bytes must be > 0; fix the hardware profile", option="gpus"),
     "gpus[0].memory_bytes must be > 0", False),
    (OSError(errno.ENOSPC, "No space left on device", "/models/x.tmp"),
     "saving the record failed: ENOSPC (No space left on device): /models/x.tmp", True),
    (OSError(errno.EACCES, "Permission denied", "/a", None, "/b"),
     "saving the record failed: EACCES (Permission denied): /a -> /b", True),
    (KeyError("num_hidden_layers"), "saving the record failed with an unexpected KeyError", True),
])
def test_every_exception_becomes_a_failed_result(exc, expected_start, has_traceback):
    with pytest.raises(Failed) as info:
        run_guarded(FakeModule(), _raise(exc), "saving the record")
    result = info.value.args[0]
    assert result["msg"].startswith(expected_start)
    assert ("exception" in result) is has_traceback


def test_user_error_details_become_result_keys():
    result = failure_result(UserError("bad", findings=["x"]), "planning")
    assert result == {"msg": "bad", "findings": ["x"]}


def test_exit_json_system_exit_passes_through():
    def body(module):
        raise SystemExit(0)
    with pytest.raises(SystemExit):
        run_guarded(FakeModule(), body, "anything")


def test_body_result_is_returned():
    assert run_guarded(FakeModule(), lambda module: 42, "anything") == 42


def test_os_error_without_errno_keeps_its_text():
    assert describe_os_error(OSError("plain text")) == "plain text"
