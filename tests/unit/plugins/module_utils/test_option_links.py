# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The module-side lists that must agree, tied by tests (issue 29 item 4):

- vllm_plan's argument spec and the options its core reads (plan_inputs, planner and their helpers);
- the flags render_argv / node_commands write and the flags extra_args may not carry (OWNED_FLAGS,
  passthrough_flags.MULTINODE_FLAGS).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import engine_memory, model_families

from ansible_collections.gpufleet.vllm.plugins.module_utils.cluster import multinode
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import passthrough_flags, plan_inputs, planner
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import vllm_args as va
from ansible_collections.gpufleet.vllm.plugins.modules import vllm_plan

CORE = (plan_inputs, planner, model_families, passthrough_flags, engine_memory, va, multinode)
PARAM_NAMES = ("p", "o")   # the names the core gives the module options


def options_read(module):
    """Keys read as p.get("x") / p["x"] / o.get("x") / o["x"] in a module's source."""
    found = set()
    for node in ast.walk(ast.parse(open(module.__file__).read())):
        target, key = None, None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args:
            target, key = node.func.value, node.args[0]
        elif isinstance(node, ast.Subscript):
            target, key = node.value, getattr(node, "slice", None)
            key = getattr(key, "value", key) if not isinstance(key, ast.Constant) else key
        base = getattr(target, "id", None) or (getattr(target, "attr", None) if isinstance(target, ast.Attribute) else None)
        if base in PARAM_NAMES and isinstance(key, ast.Constant) and isinstance(key.value, str):
            found.add(key.value)
    return found


def test_every_option_the_core_reads_is_declared():
    read = set()
    for module in CORE:
        read |= options_read(module)
    internal = set(k for k in read if k.startswith("_"))
    # keys the planner itself puts into the rendered options (not module options)
    rendered = {"host"} & read
    undeclared = sorted(read - internal - rendered - set(vllm_plan.ARGUMENT_SPEC))
    assert not undeclared, "read by the core but not in vllm_plan's argument spec: %s" % undeclared


def test_every_declared_option_is_read():
    read = set()
    for module in CORE:
        read |= options_read(module)
    unread = sorted(set(vllm_plan.ARGUMENT_SPEC) - read - {"model", "serve_path"})   # the module reads these two
    assert not unread, "declared in vllm_plan's argument spec but read nowhere in its core: %s" % unread


FULL = {"host": "127.0.0.1", "served_model_name": "m", "tensor_parallel_size": 2, "pipeline_parallel_size": 2,
        "max_model_len": 4096, "kv_cache_dtype": "fp8", "kv_cache_memory_bytes": 1 << 30, "gpu_memory_utilization": 0.9,
        "enable_prefix_caching": True, "num_speculative_tokens": 2, "speculative_method": "mtp",
        "tool_call_parser": "hermes", "reasoning_parser": "qwen3", "extra_args": []}


def _flags(argv):
    return set(a for a in argv if str(a).startswith("-"))


def test_every_rendered_flag_is_owned():
    """A flag the planner renders must be refused in extra_args (else two values reach the engine)."""
    argv = va.render_argv("/m", FULL, hf_overrides={"x": 1}, kv_transfer_config={"kv_connector": "x"})
    argv_off = va.render_argv("/m", dict(FULL, enable_prefix_caching=False, enable_sleep_mode=True),
                              kv_transfer_config={"native_gib": 2.0})
    rendered = _flags(argv) | _flags(argv_off)
    not_owned = sorted(rendered - set(va.OWNED_FLAGS) - {"--enable-auto-tool-choice"})
    assert not not_owned, "rendered but allowed in extra_args: %s" % not_owned


def test_every_owned_flag_is_rendered():
    argv = va.render_argv("/m", FULL, hf_overrides={"x": 1}, kv_transfer_config={"kv_connector": "x"})
    # vLLM >= 0.34: the native offload flags instead of the JSON, and sleep mode when asked for
    argv_off = va.render_argv("/m", dict(FULL, enable_prefix_caching=False, enable_sleep_mode=True),
                              kv_transfer_config={"native_gib": 2.0})
    short = {"-tp", "-pp"}   # argparse's short spellings of two rendered flags: owned, never rendered
    unrendered = sorted(set(va.OWNED_FLAGS) - _flags(argv) - _flags(argv_off) - short)
    assert not unrendered, "owned but never rendered: %s" % unrendered


def test_every_multinode_flag_rendered_is_refused_in_extra_args():
    nodes = multinode.node_commands(["vllm", "serve", "/m"], 2, "10.0.0.1")
    rendered = set().union(*(_flags(n["argv"]) for n in nodes))
    assert rendered <= set(passthrough_flags.MULTINODE_FLAGS), sorted(rendered - set(passthrough_flags.MULTINODE_FLAGS))


@pytest.mark.parametrize("flag", sorted(set(va.OWNED_FLAGS)))
def test_an_owned_flag_in_extra_args_is_an_error(flag):
    codes = [f["code"] for f in va.check_extra_args([flag, "1"])]
    assert codes == ["planner_owned_flag"]
