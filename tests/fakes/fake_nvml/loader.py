# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Load the FAKE pynvml and its topologies from tests/fakes/fake_nvml without shadowing a real pynvml."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib.util
import os

FAKES = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(FAKES, "..", "..", "fixtures")


def _load(name):
    spec = importlib.util.spec_from_file_location("gpufleet_fake_nvml_" + name, os.path.join(FAKES, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


fake_pynvml = _load("pynvml")
topologies = _load("topologies")


def fake(name):
    return fake_pynvml.FakePynvml(topologies.TOPOLOGIES[name]())
