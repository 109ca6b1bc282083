# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit-test set-up: hypothesis runs derandomized, so the suite (and CI) sees the same examples every
run; a property failure is then a real regression, not a new random draw. Explore with fresh random
examples by setting GPUFLEET_HYPOTHESIS_RANDOM=1."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from hypothesis import settings

settings.register_profile("gpufleet-derandomized", derandomize=True)
settings.register_profile("gpufleet-random", derandomize=False)
settings.load_profile("gpufleet-random" if os.environ.get("GPUFLEET_HYPOTHESIS_RANDOM") else "gpufleet-derandomized")
