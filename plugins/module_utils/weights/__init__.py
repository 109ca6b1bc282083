# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pinned, per-file sha256-verified model snapshots (pure logic behind gpufleet.vllm.model_weights)."""
