# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one error boundary every module of the collection runs its body inside.

kubernetes.core's shape: the module body raises; one place turns any exception into a failed
result with a message a user can act on. Nothing escapes as a MODULE FAILURE traceback; the
traceback is still returned (``exception``) so ``-vvv`` shows it.

- :class:`UserError` (and subclasses) carry a message that already names the option or file and
  the fix; it is reported as is, with any details as extra result keys.
- ``OSError`` is reported with the path, the errno's name and its text (EACCES, ENOSPC, ...).
- Anything else is a bug of ours: reported as such, with the exception's type and text.

Pure Python: no Ansible import (the module object is duck-typed: ``fail_json(**result)``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import traceback


class UserError(Exception):
    """A failure caused by input or by the host, whose message names the option/file and the fix."""

    def __init__(self, message, **details):
        super(UserError, self).__init__(message)
        self.message = message
        self.details = details


def describe_os_error(exc):
    """'ENOSPC (No space left on device): /models/x.tmp' - what an operator needs to act."""
    code = errno.errorcode.get(exc.errno, "") if exc.errno is not None else ""
    text = exc.strerror or str(exc)
    where = ""
    if getattr(exc, "filename", None):
        where = ": %s" % (exc.filename,)
        if getattr(exc, "filename2", None):
            where += " -> %s" % (exc.filename2,)
    return ("%s (%s)" % (code, text) if code else text) + where


def failure_result(exc, action):
    """The fail_json keyword arguments for ``exc`` raised while doing ``action`` (a short phrase)."""
    if isinstance(exc, UserError):
        result = dict(exc.details)
        result["msg"] = exc.message
        return result
    if isinstance(exc, (OSError, IOError)):
        return dict(msg="%s failed: %s" % (action, describe_os_error(exc)), exception=traceback.format_exc())
    return dict(
        msg="%s failed with an unexpected %s: %s. This is a bug in gpufleet.vllm: please report it with "
            "the traceback that -vvv shows." % (action, type(exc).__name__, exc),
        exception=traceback.format_exc(),
    )


def run_guarded(module, body, action, **defaults):
    """Run ``body(module)``; any exception becomes ``module.fail_json`` (exit_json's SystemExit passes).

    ``defaults`` are result keys every failure carries unless the error gives them (vllm_plan: findings=[])."""
    try:
        return body(module)
    except Exception as exc:  # pylint: disable=broad-except  # this IS the error boundary
        result = dict(defaults)
        result.update(failure_result(exc, action))
        module.fail_json(**result)
