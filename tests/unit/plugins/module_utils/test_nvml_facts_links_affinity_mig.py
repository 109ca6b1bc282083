# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVML facts (issue 12): real NVLink count, CPU affinity beyond the visible CPUs, MIG capability.
Runs against the FAKE pynvml (tests/fakes/fake_nvml), a test double, not NVIDIA code."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu import nvml as N
from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu.gpu_facts_assembly import check_expected, facts_from_nvml
from ansible_collections.gpufleet.vllm.tests.fakes.fake_nvml.loader import fake


def facts_of(lib, cpu_count=32):
    nvml = N.Nvml(lib)
    nvml.init()
    try:
        return facts_from_nvml(N.collect(nvml, cpu_count), {})
    finally:
        nvml.shutdown()


def a100_with_phantom_links(link_count_field):
    """2 x A100 PCIe (12 NVLink3 links each) whose NVML also answers links 12-17 as inactive, the
    behaviour the issue reports for NVIDIA's mock NVML A100 profile."""
    lib = fake("a100x2_pcie_bridge")
    for gpu in lib.state["gpus"]:
        gpu["nvlinks"] += [{"state": 0, "version": 3, "remote_type": 0, "remote": "00000000:00:00.0"}] * 6
        if link_count_field:
            gpu["nvlink_count"] = 12
    return lib


def test_link_count_field_limits_the_walk():
    facts = facts_of(a100_with_phantom_links(True))
    for gpu in facts["gpus"]:
        assert [l["link"] for l in gpu["nvlinks"]] == list(range(12))
        assert gpu["nvlink_active_count"] == 12
    assert check_expected(facts, {"nvlink": "required", "nvlinks_per_gpu": 12}) == []


def test_phantom_inactive_links_are_not_down_unless_expected():
    facts = facts_of(a100_with_phantom_links(False))
    assert len(facts["gpus"][0]["nvlinks"]) == 18            # NVML answered them: reported as inactive
    assert check_expected(facts, {}) == []                   # ... but no peer has them active: not down
    assert check_expected(facts, {"nvlink": "any"}) == []


def test_a_link_active_on_a_peer_is_down():
    lib = fake("a100x2_pcie_bridge")
    lib.state["gpus"][1]["nvlinks"][3]["state"] = 0
    problems = check_expected(facts_of(lib), {})
    assert "GPU1 has 1 NVLink(s) down: [3]" in problems


def test_walk_stops_at_first_missing_link():
    lib = fake("a100x2_pcie_bridge")
    lib.state["gpus"][0]["nvlinks"] = lib.state["gpus"][0]["nvlinks"][:4]
    lib.calls[:] = []
    facts = facts_of(lib)
    assert len(facts["gpus"][0]["nvlinks"]) == 4
    assert lib.calls.count("nvmlDeviceGetNvLinkState") == 5 + 13   # GPU0: 4 + the first missing; GPU1: 12 + 1


def test_cpu_affinity_of_numa_node_1_beyond_visible_cpus():
    # HGX H100 layout: GPU4 sits on node 1 (CPUs 56-111,168-223). A controller-sized mask of 32 CPUs
    # returned only 56-63 before.
    facts = facts_of(fake("h100x8_nvswitch"), cpu_count=32)
    assert facts["gpus"][4]["cpu_affinity_str"] == "56-111,168-223"
    assert "cpu_affinity" not in facts["gpus"][4]["errors"]


def test_empty_cpu_affinity_is_an_error_not_an_empty_list():
    lib = fake("h100x8_nvswitch")
    lib.state["gpus"][0]["cpu_affinity"] = []
    gpu = facts_of(lib)["gpus"][0]
    assert gpu["cpu_affinity"] is None
    assert gpu["errors"]["cpu_affinity"].startswith("empty")


@pytest.mark.parametrize("name,cc,answered,supported", [
    ("NVIDIA A100-SXM4-80GB", (8, 0), True, True),
    ("NVIDIA H200", (9, 0), True, True),
    ("NVIDIA B200", (10, 0), True, True),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", (12, 0), True, True),
    ("NVIDIA GeForce RTX 5090", (12, 0), True, False),
    ("NVIDIA L40S", (8, 9), True, False),
    ("NVIDIA GeForce RTX 4090", (8, 9), True, False),
    ("Tesla T4", (7, 5), True, False),
    ("NVIDIA A10", (8, 6), True, False),
    ("NVIDIA A100-SXM4-80GB", (8, 0), False, False),
])
def test_mig_capable(name, cc, answered, supported):
    assert N.mig_capable(name, cc, answered) is supported


def test_mig_supported_false_on_l40s_even_when_the_call_answers():
    lib = fake("rtx4090x4_two_numa")
    for gpu in lib.state["gpus"]:
        gpu["name"], gpu["mig"] = "NVIDIA L40S", [0, 0]
    facts = facts_of(lib)
    assert [g["mig"]["supported"] for g in facts["gpus"]] == [False] * 4
    assert facts_of(fake("h100x8_nvswitch"))["gpus"][0]["mig"]["supported"] is True
