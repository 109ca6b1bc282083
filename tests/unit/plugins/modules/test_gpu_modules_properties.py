# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Property-based tests (hypothesis) of gpu_facts and nvidia_mig argument handling, through the
modules' main() with the FAKE pynvml: any input ends in exit_json or in fail_json naming an option,
never in a traceback."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu import gpu_gather
from ansible_collections.gpufleet.vllm.plugins.modules import gpu_facts, nvidia_mig
from ansible_collections.gpufleet.vllm.tests.fakes.fake_nvml.loader import fake
from ansible_collections.gpufleet.vllm.tests.unit.plugins.modules.module_harness import run_module

PROPS = settings(max_examples=60, deadline=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
OPTIONS_GPU_FACTS = ("backend", "expected", "min_gpus")
OPTIONS_MIG = ("mode", "gpus", "force")
ANY = (st.none() | st.booleans() | st.integers(-10 ** 20, 10 ** 20) | st.text(max_size=10) |
       st.lists(st.text(max_size=4), max_size=3) | st.dictionaries(st.text(max_size=8), st.integers(), max_size=2))
EXPECTED = st.dictionaries(
    st.sampled_from(["count", "name_pattern", "min_memory_mib", "nvlink", "nvlinks_per_gpu", "min_driver", "bogus"]),
    st.none() | st.integers(-3, 10 ** 12) | st.text(max_size=8) | st.floats(allow_nan=False), max_size=4)


def _names_an_option(msg, options):
    return any(opt in msg for opt in options) or "nvidia-smi" in msg or "NVML" in msg


@PROPS
@given(backend=st.sampled_from(["auto", "nvml", "bogus", ""]) | ANY, expected=EXPECTED | ANY, min_gpus=ANY)
def test_gpu_facts_arguments(monkeypatch, backend, expected, min_gpus):
    monkeypatch.setattr(gpu_gather, "load_pynvml", lambda: fake("h200x2"))
    result = run_module(monkeypatch, gpu_facts.main, {"backend": backend, "expected": expected, "min_gpus": min_gpus})
    if result.get("failed"):
        assert "This is a bug" not in result["msg"], result["msg"]
        assert _names_an_option(result["msg"], OPTIONS_GPU_FACTS + ("GPU",)), result["msg"]


@PROPS
@given(mode=st.sampled_from(["enabled", "disabled"]) | ANY, gpus=ANY, force=ANY)
def test_nvidia_mig_arguments(monkeypatch, mode, gpus, force):
    monkeypatch.setattr(nvidia_mig, "load_pynvml", lambda: fake("h200x2"))
    result = run_module(monkeypatch, nvidia_mig.main, {"mode": mode, "gpus": gpus, "force": force},
                        check_mode=True)
    if result.get("failed"):
        assert "This is a bug" not in result["msg"], result["msg"]
        assert _names_an_option(result["msg"], OPTIONS_MIG + ("GPU",)), result["msg"]
