# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The filter guarded_flags as roles/router/tasks/validate.yml calls it on router_extra_args with the role's own
_router_owned_flags (issue 43 class 2): every prefix vllm-router's argparse accepts, ``--flag=value`` and
underscores are refused; other flags pass."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import os

import pytest
import yaml

from ansible_collections.gpufleet.vllm.plugins.filter.guarded_flags import guarded_flags

VARS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "roles", "router", "vars", "main.yml")
with open(VARS) as handle:
    OWNED = ast.literal_eval(yaml.safe_load(handle)["_router_owned_flags"].strip()[2:-2].strip())


def spellings(flag):
    out = []
    for n in range(3, len(flag) + 1):
        word = flag[:n]
        out += [[word, "0.0.0.0"], [word + "=0.0.0.0"], [word[:2] + word[2:].replace("-", "_"), "x"]]
    return out


CASES = [(flag, words) for flag in OWNED for words in spellings(flag)]


def test_the_role_guards_its_listeners_and_the_key():
    assert {"--host", "--port", "--prometheus-host", "--prometheus-port", "--api-key"} <= set(OWNED)


@pytest.mark.parametrize("flag, words", CASES, ids=["%s" % " ".join(w) for _f, w in CASES])
def test_every_prefix_of_every_owned_flag_is_refused(flag, words):
    found = guarded_flags(words, OWNED)
    assert len(found) == 1
    assert "0.0.0.0" not in found[0]


def test_the_message_names_the_word_and_the_flag():
    assert guarded_flags(["--hos", "0.0.0.0", "--api_k=KEY"], OWNED) == ["--hos (--host)", "--api_k (--api-key)"]


@pytest.mark.parametrize("words", [["--max-tree-size", "1"], ["--eviction-interval-secs=3"], ["--disable-circuit-breaker"]])
def test_other_router_flags_pass(words):
    assert guarded_flags(words, OWNED) == []
