# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.vllm.plugins.filter.systemd_quote import FilterModule, systemd_quote
from ansible_collections.gpufleet.vllm.plugins.module_utils.units.systemd_unit import parse_environment, parse_exec_line


def test_filter_is_registered():
    assert FilterModule().filters()["systemd_quote"] is systemd_quote


@pytest.mark.parametrize(
    "argv",
    [
        ["/opt/vllm/current/bin/vllm", "serve", "/srv/m", "--speculative-config", '{"method":"mtp","num_speculative_tokens":3}'],
        ["/usr/bin/numactl", "--cpunodebind=1", "--membind=1", "--", "/x/vllm", "serve", "/srv/m", "--chat-template", "a b%c$d"],
    ],
)
def test_exec_context_round_trips(argv):
    assert parse_exec_line(systemd_quote(argv)) == argv


def test_environment_context():
    rendered = systemd_quote({"CUDA_VISIBLE_DEVICES": "0,1", "X": "a b"}, context="environment")
    assert rendered == 'CUDA_VISIBLE_DEVICES=0,1 "X=a b"'
    assert parse_environment(rendered) == {"CUDA_VISIBLE_DEVICES": "0,1", "X": "a b"}


@pytest.mark.parametrize(
    "data, kwargs, message",
    [
        (["vllm", "serve"], {}, "absolute path"),
        ("vllm serve", {}, "list of strings"),
        (["/x"], {"context": "environment"}, "takes a dictionary"),
        ({"1BAD": "x"}, {"context": "environment"}, "not a valid environment variable name"),
        (["/x"], {"context": "shell"}, "context must be"),
    ],
)
def test_errors_are_filter_errors(data, kwargs, message):
    with pytest.raises(AnsibleFilterError, match=message):
        systemd_quote(data, **kwargs)
