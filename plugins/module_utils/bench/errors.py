# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""BenchError: a benchmark failure whose message names the option or workload key and the fix."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError


class BenchError(UserError):
    """Bad workload or SLO input, or a benchmark run that could not produce a result."""
