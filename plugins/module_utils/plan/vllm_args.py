# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Render the ``vllm serve`` argv for one instance and check flags and parser names (pure).

The argv is a list (no shell quoting); JSON-valued flags are compact JSON. Nothing secret
goes into it: vLLM reads the API key from the VLLM_API_KEY environment variable.
Parser names are those of vLLM 0.33.0 and 0.34.0 (PARSER_REGISTRIES), removed flags those of releases.py (the
tests tests/functional/test_vllm_argv_real_parser.py and test_vllm_034_real_parser.py check them against the
real packages).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.gpufleet.vllm.plugins.module_utils import cli_flags
from ansible_collections.gpufleet.vllm.plugins.module_utils import releases as R
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan.instance import DEFAULT_PORT

# ToolParserManager / ReasoningParserManager registries of vLLM 0.33.0 (vllm/tool_parsers/__init__.py,
# vllm/reasoning/__init__.py). Parser names are not checked by argparse, only at server start.
TOOL_PARSERS = frozenset((
    "apertus beam cohere_command3 cohere_command4 deepseek_v3 deepseek_v31 deepseek_v32 deepseek_v4 "
    "deepseek_v41 dots ernie45 functiongemma gemma4 gigachat3 glm45 glm47 granite granite-20b-fc granite4 "
    "hermes hf hunyuan_a13b hy_v3 hy_v4 inkling internlm jamba k2_horizon kimi_k2 kimi_k3 lfm2 ling3 "
    "llama3_json llama4_json llama4_pythonic longcat mimo minicpm5 minimax_m2 minimax_m3 mistral muse "
    "muse_glimmer musespark1x olmo3 openai phi4_mini_json plamo3 poolside_v1 pythonic qwen3_coder "
    "qwen3_json qwen3_xml seed_oss step3 step3p5 step5 xlam"
).split())
REASONING_PARSERS = frozenset((
    "beam cohere_command3 cohere_command4 deepseek_r1 deepseek_v3 deepseek_v4 deepseek_v41 ernie45 gemma4 "
    "glm45 glm47 granite granite_thinking_parser hf holo2 hunyuan_a13b hy_v3 hy_v4 inkling k2_horizon "
    "kimi_k2 kimi_k3 ling3 mimo minicpmv minimax_m2 minimax_m2_append_think minimax_m3 mistral muse "
    "muse_glimmer musespark1x nemotron_v3 olmo3 openai_gptoss plamo3 poolside_v1 qwen3 seed_oss step3 "
    "step3p5 step5"
).split())
# vLLM 0.34.0's registries (the same files, read with its own ToolParserManager / ReasoningParserManager on this
# machine: tests/fixtures/vllm-0.34.0/parsers.json): musespark1x renamed musespark; ripple, zaya (+ zaya_xml),
# granite_toolcall_parser new.
TOOL_PARSERS_034 = (TOOL_PARSERS - {"musespark1x"}) | {"granite_toolcall_parser", "musespark", "ripple", "zaya", "zaya_xml"}
REASONING_PARSERS_034 = (REASONING_PARSERS - {"musespark1x"}) | {"musespark", "ripple", "zaya"}
# (first release, tool parsers, reasoning parsers): releases before 0.33.0 are checked against 0.33.0's names.
PARSER_REGISTRIES = (
    ((0, 0, 0), TOOL_PARSERS, REASONING_PARSERS),
    ((0, 34, 0), TOOL_PARSERS_034, REASONING_PARSERS_034),
)
RENAMED_PARSERS = {"musespark1x": "musespark"}  # 0.34.0: the old name is gone from both registries


def registry_for(vllm_version):
    """(release the registry was read from, tool parsers, reasoning parsers) for ``vllm_version``."""
    row = R.rule_for(PARSER_REGISTRIES, vllm_version)
    return "0.33.0" if row[0] < (0, 34, 0) else R.version_text(row[0]), row[1], row[2]


# Tool parser that matches each model family's chat template.
RECOMMENDED_TOOL_PARSER = {
    "qwen3": "hermes",
    "qwen3_moe": "hermes",
    "qwen3_vl": "hermes",
    "qwen3_next": "hermes",
    "qwen3_5": "qwen3_coder",
}
RECOMMENDED_REASONING_PARSER = {
    "qwen3": "qwen3", "qwen3_moe": "qwen3", "qwen3_vl": "qwen3", "qwen3_next": "qwen3", "qwen3_5": "qwen3",
    "deepseek": "deepseek_r1",
}

# Flags gone from the default release (argparse error), with the fix: releases.REMOVED_FLAGS; harmful flags here.
REMOVED_FLAGS = R.REMOVED_FLAGS   # the same dict (tests/functional/test_vllm_argv_real_parser.py reads va.REMOVED_FLAGS)
HARMFUL_FLAGS = {
    "--skip-tokenizer-init": "breaks chat serving; EOS comes from generation_config.json, drop the flag",
    "--api-key": "secrets never go into argv: set VLLM_API_KEY in the instance's environment file",
}
# Flags the planner renders itself; a copy in extra_args would contradict the plan.
OWNED_FLAGS = (
    "--host", "--port", "--served-model-name", "--tensor-parallel-size", "-tp", "--pipeline-parallel-size", "-pp",
    "--max-model-len", "--kv-cache-dtype", "--kv-cache-memory-bytes", "--gpu-memory-utilization",
    "--enable-prefix-caching", "--no-enable-prefix-caching", "--speculative-config", "--hf-overrides",
    "--kv-transfer-config", "--tool-call-parser", "--reasoning-parser", "--kv-offloading-size",
    "--kv-offloading-backend", "--enable-sleep-mode",
)

# Owned flags whose fix names more than the option.
OWNED_FLAG_FIXES = {
    "--enable-sleep-mode": "set the vllm_plan option enable_sleep_mode: true to ask for sleep mode (from vLLM 0.34 it serves "
                           "/checkpoint/* without the API key; the instance must listen on loopback behind the front door)",
    "--kv-offloading-size": "set cpu_offload_bytes (rendered as --kv-offloading-size from vLLM 0.34, as the "
                            "OffloadingConnector JSON before)",
    "--kv-offloading-backend": "set cpu_offload_bytes (the native backend is rendered; LMCache is not planned here)",
    # A disk tier has no quota anywhere: vLLM's disk-backed connector (ExampleConnector, kv_connector_extra_config
    # shared_storage_path, default /tmp) writes blocks and never deletes one (0.34.0
    # distributed/kv_transfer/kv_connector/v1/example_connector.py has no remove, unlink or eviction).
    "--kv-transfer-config": "set cpu_offload_bytes (the host-memory tier, planned and checked against the host's and "
                            "each NUMA node's memory); a disk tier is not offered: vLLM's disk-backed connector writes "
                            "KV blocks and never deletes one, so there is no quota to enforce",
}


def compact_json(value):
    return json.dumps(value, separators=(",", ":"), sort_keys=False)


def finding(level, code, message, fix):
    return {"level": level, "code": code, "message": message, "fix": fix}


SECRET_FLAGS = ("--api-key", "--hf-token")


def check_extra_args(extra_args):
    """Findings for extra args: removed flags and secrets are errors, planner-owned flags are errors. A flag is
    matched as vLLM's argparse reads it (cli_flags: ``--hos``, ``--api_k=KEY``, ``--port=1`` alike)."""
    out = []
    for arg in extra_args or []:
        flag = cli_flags.flag_name(arg)
        word = str(arg).split("=", 1)[0]  # never the value: it may be a secret
        if flag is None:
            continue
        if flag in REMOVED_FLAGS:
            out.append(finding("error", "removed_flag", "extra_args has %s, which vLLM %s no longer accepts"
                               % (flag, R.DEFAULT_RELEASE),
                               REMOVED_FLAGS[flag]))
        elif flag == "--kv-cache-memory":  # the one abbreviation the plan reads (passthrough_flags.py)
            out.append(finding("warning", "abbreviated_flag", "--kv-cache-memory only works as an argparse prefix",
                               "use the option kv_cache_memory_bytes (rendered as --kv-cache-memory-bytes)"))
        elif cli_flags.guarded_flag(arg, tuple(HARMFUL_FLAGS) + SECRET_FLAGS):
            full = cli_flags.guarded_flag(arg, tuple(HARMFUL_FLAGS) + SECRET_FLAGS)
            out.append(finding("error", "forbidden_flag", "extra_args has %s%s" % (word, "" if full == word else " (%s)" % full),
                               HARMFUL_FLAGS.get(full, "secrets never go into argv: use the 0600 environment file")))
        elif cli_flags.guarded_flag(arg, OWNED_FLAGS):
            full = cli_flags.guarded_flag(arg, OWNED_FLAGS)
            out.append(finding("error", "planner_owned_flag", "extra_args has %s%s, which the planner renders from its "
                               "own option" % (word, "" if full == word else " (argparse reads it as %s)" % full),
                               OWNED_FLAG_FIXES.get(full, "set the vllm_plan option instead of passing %s in extra_args" % full)))
    return out


def _unknown_parser_fix(name, family, known, recommended):
    if name in RENAMED_PARSERS and RENAMED_PARSERS[name] in known:
        return "use %s (the name this release gives it)" % RENAMED_PARSERS[name]
    return "use %s" % recommended.get(family, "one of: " + ", ".join(sorted(known)))


def check_parsers(family, tool_call_parser, reasoning_parser, vllm_version=None):
    """Parser names against the registry of the planned release (PARSER_REGISTRIES), and the family's match."""
    release, tools, reasonings = registry_for(vllm_version)
    out = []
    if tool_call_parser:
        if tool_call_parser not in tools:
            out.append(finding("error", "unknown_tool_parser",
                               "tool_call_parser %r is not a vLLM %s tool parser" % (tool_call_parser, release),
                               _unknown_parser_fix(tool_call_parser, family, tools, RECOMMENDED_TOOL_PARSER)
                               + " for this model family (%s)" % family))
        elif family in RECOMMENDED_TOOL_PARSER and tool_call_parser != RECOMMENDED_TOOL_PARSER[family]:
            out.append(finding("warning", "tool_parser_family",
                               "tool_call_parser %r does not match the %s chat template" % (tool_call_parser, family),
                               "use tool_call_parser: %s" % RECOMMENDED_TOOL_PARSER[family]))
    if reasoning_parser and reasoning_parser not in reasonings:
        out.append(finding("error", "unknown_reasoning_parser",
                           "reasoning_parser %r is not a vLLM %s reasoning parser" % (reasoning_parser, release),
                           _unknown_parser_fix(reasoning_parser, family, reasonings, RECOMMENDED_REASONING_PARSER)))
    return out


def yarn_overrides(cfg, raw_config, factor, original_max, new_max):
    """--hf-overrides value for static YaRN: keeps every rope_parameters key (rope_theta, mrope
    sections, partial rotary factor) because vLLM replaces a dict-valued key whole."""
    text = raw_config.get("text_config") if isinstance(raw_config.get("text_config"), dict) else raw_config
    params = dict(text.get("rope_parameters") or {})
    if cfg.get("rope_theta") is not None:
        params["rope_theta"] = cfg["rope_theta"]
    params.update({"rope_type": "yarn", "factor": float(factor), "original_max_position_embeddings": int(original_max)})
    body = {"rope_parameters": params, "max_position_embeddings": int(new_max)}
    if text is not raw_config:
        return {"text_config": body}
    return body


def render_argv(model_path, o, hf_overrides=None, kv_transfer_config=None, port=DEFAULT_PORT):
    """The argv list for one instance. ``o`` holds the planner's resolved options."""
    argv = ["vllm", "serve", model_path, "--host", o["host"], "--port", str(port)]
    if o.get("served_model_name"):
        argv += ["--served-model-name", o["served_model_name"]]
    argv += ["--tensor-parallel-size", str(o["tensor_parallel_size"])]
    if o["pipeline_parallel_size"] > 1:
        argv += ["--pipeline-parallel-size", str(o["pipeline_parallel_size"])]
    argv += ["--max-model-len", str(o["max_model_len"])]
    if o.get("kv_cache_dtype") and o["kv_cache_dtype"] != "auto":
        argv += ["--kv-cache-dtype", o["kv_cache_dtype"]]
    if o.get("kv_cache_memory_bytes"):
        argv += ["--kv-cache-memory-bytes", str(o["kv_cache_memory_bytes"])]
    if o.get("gpu_memory_utilization") is not None:
        argv += ["--gpu-memory-utilization", "%g" % o["gpu_memory_utilization"]]
    argv.append("--enable-prefix-caching" if o["enable_prefix_caching"] else "--no-enable-prefix-caching")
    if o.get("num_speculative_tokens"):
        argv += ["--speculative-config", compact_json({"method": o.get("speculative_method") or "mtp",
                                                       "num_speculative_tokens": int(o["num_speculative_tokens"])})]
    if hf_overrides:
        argv += ["--hf-overrides", compact_json(hf_overrides)]
    if kv_transfer_config and "native_gib" in kv_transfer_config:
        # repr: bytes / 2**30 is exact in a float, so vLLM's size x 2**30 gives the bytes back.
        argv += ["--kv-offloading-size", repr(kv_transfer_config["native_gib"]), "--kv-offloading-backend", "native"]
    elif kv_transfer_config:
        argv += ["--kv-transfer-config", compact_json(kv_transfer_config)]
    if o.get("enable_sleep_mode"):
        argv.append("--enable-sleep-mode")
    if o.get("tool_call_parser"):
        argv += ["--enable-auto-tool-choice", "--tool-call-parser", o["tool_call_parser"]]
    if o.get("reasoning_parser"):
        argv += ["--reasoning-parser", o["reasoning_parser"]]
    argv += [str(a) for a in (o.get("extra_args") or [])]
    return argv


def offload_transfer_config(cpu_bytes_to_use, eviction_policy="lru"):
    """OffloadingConnector config; cpu_bytes_to_use is the total over all ranks (vLLM 0.33)."""
    return {
        "kv_connector": "OffloadingConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {"cpu_bytes_to_use": int(cpu_bytes_to_use), "eviction_policy": eviction_policy},
    }
