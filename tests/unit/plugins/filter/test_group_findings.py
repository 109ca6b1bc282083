# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The group_findings filter: the role's entry to group_check (cases there), and its input errors."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.vllm.plugins.filter.group_findings import FilterModule

group_findings = FilterModule().filters()["group_findings"]


def test_a_consistent_group_has_no_finding_and_a_difference_is_named():
    head = {"host": "a", "node_rank": 0, "vllm_version": "0.32.0"}
    assert group_findings([head, {"host": "b", "node_rank": 1, "vllm_version": "0.32.0"}], ["a", "b"]) == []
    found = group_findings([head, {"host": "b", "node_rank": 1, "vllm_version": "0.31.0"}], ["a", "b"],
                           shm_min_bytes="0", rdma="no")
    assert [(f["host"], f["code"]) for f in found] == [("b", "different_vllm_version")]


@pytest.mark.parametrize("probes", [None, "a", [{"node_rank": 0}], ["a"]])
def test_bad_input_is_a_clear_filter_error(probes):
    with pytest.raises(AnsibleFilterError, match="list of probes"):
        group_findings(probes, ["a"])
