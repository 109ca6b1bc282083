# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Property-based tests (hypothesis): the nvidia-smi parsers and gpu_facts / nvidia_mig argument
handling never raise an unhandled exception on random or malformed input, and every failure names
the offending option or output."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError
from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu.gpu_facts_assembly import check_expected, validate_expected
from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu.mig import MigPlanError, decide_actions
from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu.nvidia_smi import (
    NvidiaSmiParseError,
    parse_nvlink_remote,
    parse_nvlink_status,
    parse_query_xml,
    parse_topology,
)
from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu.gpu_facts_assembly import facts_from_smi

FIX = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures")
PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def read(*parts):
    with open(os.path.join(FIX, *parts), "rb") as handle:
        return handle.read().decode("utf-8")


TOPO = read("nvidia-smi", "topo", "rtx4090x8_go-gpuallocator-17.txt")
XML = read("h200x2", "smi_q.xml")
CELLS = st.sampled_from(["X", "NV18", "SYS", "SOC", "NODE", "PIX", "N/A", "0-31,64-95", "1", "", "\t", "  ",
                         "GPU0", "NIC0", "CPU Affinity", "\u00e9\u4e2d", "9" * 40, "<!DOCTYPE", "&x;", "\x1b[4m"])


def _mutate(text, data):
    """Cut, splice and insert junk into a real output."""
    ops = data.draw(st.lists(st.tuples(st.integers(0, len(text)), st.integers(0, 40), CELLS | st.text(max_size=8)),
                             max_size=6))
    for pos, cut, junk in ops:
        text = text[:pos] + junk + text[pos + cut:]
    return text


@PROPS
@given(st.data())
def test_topology_parser_never_crashes(data):
    text = _mutate(TOPO, data)
    try:
        topo = parse_topology(text)
    except NvidiaSmiParseError as exc:
        assert "topo -m" in str(exc)
        return
    assert set(topo) >= {"gpus", "links", "affinity", "warnings"}
    for key in topo["links"]:
        i, j = key.split("-")
        assert int(i) < int(j)


@PROPS
@given(st.text(max_size=400) | st.binary(max_size=200))
def test_topology_on_random_text(text):
    try:
        parse_topology(text)
    except NvidiaSmiParseError as exc:
        assert "topo -m" in str(exc)


@PROPS
@given(st.data())
def test_query_xml_never_crashes(data):
    text = _mutate(XML, data)
    try:
        parsed = parse_query_xml(text)
    except NvidiaSmiParseError as exc:
        assert "nvidia-smi -q -x" in str(exc) or "entities" in str(exc) or "nvidia_smi_log" in str(exc)
        return
    facts_from_smi(parsed)


@PROPS
@given(st.text(max_size=300))
def test_nvlink_parsers_never_crash(text):
    status = parse_nvlink_status("GPU 0: x\n" + text)
    parse_nvlink_remote("GPU 0: x\n" + text)
    assert all(isinstance(l["active"], bool) for links in status.values() for l in links)


VALUES = (st.none() | st.booleans() | st.integers(-10 ** 30, 10 ** 30) | st.floats(allow_nan=True) |
          st.text(max_size=12) | st.lists(st.integers(), max_size=2) | st.sampled_from(["(", "[a-", "*", "9" * 5000]))
KEYS = st.sampled_from(["count", "name_pattern", "min_memory_mib", "nvlink", "nvlinks_per_gpu", "mig_disabled",
                        "persistence", "min_driver"])


@PROPS
@given(st.dictionaries(KEYS, VALUES, max_size=4))
def test_expected_validation_names_the_key(expected):
    facts = {"gpus": [], "gpu_count": 0, "nvlink_islands": [], "topology": {"links": {}}, "driver_version": "550.1",
             "reason": None}
    try:
        validate_expected(expected)
    except UserError as exc:
        assert any("expected.%s" % key in exc.message for key in expected), exc.message
        return
    assert isinstance(check_expected(facts, expected), list)


GPU_TARGETS = st.lists(st.text(max_size=10) | st.integers(-5, 10 ** 20).map(str), max_size=4)


@PROPS
@given(st.sampled_from(["enabled", "disabled", "", "Enabled", "\u00e9"]), GPU_TARGETS, st.booleans())
def test_mig_plan_never_crashes(mode, targets, force):
    gpus = [{"index": 0, "uuid": "GPU-a", "name": "NVIDIA H200", "current": "disabled", "pending": "disabled",
             "processes": []},
            {"index": 1, "uuid": "GPU-b", "name": "NVIDIA L40S", "current": None, "pending": None, "processes": []}]
    try:
        decide_actions(gpus, mode, targets, force)
    except MigPlanError as exc:
        assert exc.problems and all(isinstance(p, str) for p in exc.problems)
        assert "mode" in str(exc) or "GPU" in str(exc)


@pytest.mark.parametrize("text", ["", "\x00", "<nvidia_smi_log>", "<?xml version='1.0'?><nvidia_smi_log><gpu>",
                                  "<!DOCTYPE a [<!ENTITY b SYSTEM 'file:///etc/passwd'>]><nvidia_smi_log>&b;</nvidia_smi_log>"])
def test_query_xml_malformed_examples(text):
    with pytest.raises(NvidiaSmiParseError):
        parse_query_xml(text)


@pytest.mark.parametrize("min_driver", ["9" * 5000, "550." + "1" * 20])
def test_min_driver_with_absurd_digit_runs_is_refused_by_name(min_driver):
    """Found by hypothesis in CI: int() of a 5000-digit run raised Python's digit-limit ValueError."""
    with pytest.raises(UserError) as err:
        validate_expected({"min_driver": min_driver})
    assert "expected.min_driver" in err.value.message
