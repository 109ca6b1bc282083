# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One vLLM instance over several hosts: the group's shape (vLLM's multi-node launch), the Ray cluster under it,
and the cross-host probe and checks.
"""
