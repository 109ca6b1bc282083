# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One error type for the weights package: the module turns it into fail_json in one place."""

from __future__ import annotations

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError


class WeightsError(UserError):
    """A failure with a message that names the cause and the fix.

    ``details`` carries structured facts for the module result (expected/actual digest, url, path).
    """

    def __init__(self, message, **details):
        super(WeightsError, self).__init__(message, **details)
