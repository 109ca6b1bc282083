# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import vllm_args as va


@pytest.mark.parametrize("args,code,level", [
    (["--rope-scaling", "{}"], "removed_flag", "error"),
    (["--swap-space=4"], "removed_flag", "error"),
    (["--enable-reasoning"], "removed_flag", "error"),
    (["--num-scheduler-steps", "8"], "removed_flag", "error"),
    (["--skip-tokenizer-init"], "forbidden_flag", "error"),
    (["--api-key", "x"], "forbidden_flag", "error"),
    (["--tensor-parallel-size", "2"], "planner_owned_flag", "error"),
    (["--kv-cache-memory", "10G"], "abbreviated_flag", "warning"),
])
def test_extra_args_findings(args, code, level):
    found = va.check_extra_args(args)
    assert [(f["code"], f["level"]) for f in found] == [(code, level)]


def test_harmless_extra_args_pass():
    assert va.check_extra_args(["--max-num-seqs", "96", "--disable-custom-all-reduce"]) == []


@pytest.mark.parametrize("family,tool,reasoning,codes", [
    ("qwen3", "hermes", "qwen3", []),
    ("qwen3_5", "qwen3_coder", "qwen3", []),
    ("qwen3_5", "hermes", None, ["tool_parser_family"]),
    ("qwen3", "qwen3", None, ["unknown_tool_parser"]),
    ("qwen3", None, "qwen3_thinking", ["unknown_reasoning_parser"]),
])
def test_parsers(family, tool, reasoning, codes):
    assert [f["code"] for f in va.check_parsers(family, tool, reasoning)] == codes


def test_render_argv_compact_json_and_no_secrets():
    o = {"host": "0.0.0.0", "served_model_name": "q", "tensor_parallel_size": 2, "pipeline_parallel_size": 1,
         "max_model_len": 1000, "kv_cache_dtype": "fp8", "kv_cache_memory_bytes": 10737418240,
         "enable_prefix_caching": False, "num_speculative_tokens": 3, "speculative_method": "mtp",
         "tool_call_parser": "qwen3_coder", "reasoning_parser": "qwen3", "extra_args": ["--max-num-seqs", "4"]}
    argv = va.render_argv("/m", o, kv_transfer_config=va.offload_transfer_config(5), port=8002)
    assert argv == ["vllm", "serve", "/m", "--host", "0.0.0.0", "--port", "8002", "--served-model-name", "q",
                    "--tensor-parallel-size", "2", "--max-model-len", "1000", "--kv-cache-dtype", "fp8",
                    "--kv-cache-memory-bytes", "10737418240", "--no-enable-prefix-caching",
                    "--speculative-config", '{"method":"mtp","num_speculative_tokens":3}',
                    "--kv-transfer-config",
                    '{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":{"cpu_bytes_to_use":5,"eviction_policy":"lru"}}',
                    "--enable-auto-tool-choice", "--tool-call-parser", "qwen3_coder", "--reasoning-parser", "qwen3",
                    "--max-num-seqs", "4"]
