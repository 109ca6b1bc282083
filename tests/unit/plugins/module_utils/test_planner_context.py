# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The planner's steps share one PlanContext (issue 29): no step takes a long argument list or returns a
tuple of its results, and the release and the platform are worked out once, in the context."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import json
import os

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import planner
from ansible_collections.gpufleet.vllm.plugins.module_utils import releases as R

SOURCE = planner.__file__
CONFIG = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "tiny-qwen3", "model", "config.json")


def _build_plan_steps():
    tree = ast.parse(open(SOURCE).read())
    build = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "build_plan"][0]
    called = set()
    for node in ast.walk(build):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id.startswith("_"):
            called.add(node.func.id)
    defs = dict((n.name, n) for n in tree.body if isinstance(n, ast.FunctionDef))
    return dict((name, defs[name]) for name in called if name in defs)


def test_the_steps_take_the_context():
    steps = _build_plan_steps()
    assert len(steps) >= 12, sorted(steps)
    for name, node in steps.items():
        args = [a.arg for a in node.args.args]
        assert len(args) <= 3, "%s(%s): pass the PlanContext" % (name, ", ".join(args))
    assert sum(1 for node in steps.values() if node.args.args[0].arg == "c") >= 11


def test_no_step_returns_a_long_tuple():
    for name, node in _build_plan_steps().items():
        for ret in ast.walk(node):
            if isinstance(ret, ast.Return) and isinstance(ret.value, ast.Tuple):
                assert len(ret.value.elts) <= 2, "%s returns a %d-tuple: set it on the context" % (name, len(ret.value.elts))


def test_release_and_platform_are_read_once():
    text = open(SOURCE).read()
    assert text.count('p.get("platform")') == 1
    reads = [line for line in text.splitlines() if 'p.get("vllm_version")' in line]
    # PlanContext.__init__, and the public offload_option_findings (also called on its own)
    assert len(reads) == 3 and "self.version" in reads[0], reads


@pytest.mark.parametrize("params,version,cpu", [
    ({}, R.DEFAULT_RELEASE, False),
    ({"vllm_version": "0.26.0", "platform": "cuda"}, "0.26.0", False),
    ({"platform": "cpu"}, R.DEFAULT_RELEASE, True),
])
def test_context_works_out_release_and_platform(params, version, cpu):
    with open(CONFIG) as handle:
        raw = json.load(handle)
    c = planner.PlanContext(params, raw, "/models/tiny")
    assert (c.version, c.cpu, c.family) == (version, cpu, "qwen3")
