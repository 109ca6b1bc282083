# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The tuner's input errors (a UserError: the message names the variable and the fix)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError


class TuneError(UserError):
    """A tune_* variable or a measurement the tuner cannot use."""
