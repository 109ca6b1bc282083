# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run INSIDE the pinned vLLM venv (VLLM_TARGET_DEVICE=cpu, HF_HUB_OFFLINE=1): validate `vllm serve` argv
with vLLM's own parser, validate_parsed_serve_args, AsyncEngineArgs.from_cli_args and
create_engine_config, and report the parser registries.

stdin: {"argvs": [[...argv starting with "vllm", "serve", <config-only model dir>...], ...]}
stdout (last line): JSON {"results": [{"ok", "error", "max_model_len", "block_size", "tp", "kv_transfer",
"gpu_memory_utilization", "enable_extensible_kv_cache"}], "tool_parsers": [...],
"reasoning_parsers": [...], "version": "..."}
"""
from __future__ import absolute_import, division, print_function

import json
import sys
import traceback


def _no_triton_cpu_check(version):
    """vLLM 0.34.0's CpuPlatform.check_and_update_config raises "vLLM on x86 CPUs requires Triton (triton-cpu)"
    when vllm.triton_utils.HAS_TRITON is false, as it is for the CUDA wheel on a machine without a GPU (no active
    Triton driver). That is about running kernels, not the command line: the check sees HAS_TRITON true."""
    if tuple(int(x) for x in version.split(".")[:2]) >= (0, 34):
        import vllm.triton_utils
        vllm.triton_utils.HAS_TRITON = True


def _kv_transfer(cfg):
    """The KV connector the engine ends up with (vLLM >= 0.33 also builds one from --kv-offloading-size)."""
    ktc = cfg.kv_transfer_config
    if ktc is None:
        return None
    return {"kv_connector": ktc.kv_connector, "kv_role": ktc.kv_role, "extra": ktc.kv_connector_extra_config}


def main():
    req = json.loads(sys.stdin.read())
    import vllm
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.common.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.usage.usage_lib import UsageContext
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    _no_triton_cpu_check(vllm.__version__)
    results = []
    for argv in req["argvs"]:
        res = {"ok": False, "error": None}
        try:
            assert argv[:2] == ["vllm", "serve"], "argv must start with vllm serve"
            parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
            # --skip-tokenizer-init only for this offline check: the directory has no tokenizer.
            ns = parser.parse_args(argv[2:] + ["--skip-tokenizer-init"])
            if getattr(ns, "model_tag", None):
                ns.model = ns.model_tag
            validate_parsed_serve_args(ns)
            # The reasoning parser needs the tokenizer at config time, which a config-only directory lacks:
            # check its name against vLLM's registry here, then leave it out of create_engine_config.
            if getattr(ns, "reasoning_parser", None):
                from vllm.reasoning import ReasoningParserManager
                if ns.reasoning_parser not in ReasoningParserManager.list_registered():
                    raise ValueError("unknown reasoning parser %r" % ns.reasoning_parser)
                ns.reasoning_parser = parser.get_default("reasoning_parser")
            engine_args = AsyncEngineArgs.from_cli_args(ns)
            cfg = engine_args.create_engine_config(UsageContext.OPENAI_API_SERVER)
            res.update(ok=True, max_model_len=cfg.model_config.max_model_len, block_size=cfg.cache_config.block_size,
                       tp=cfg.parallel_config.tensor_parallel_size, kv_transfer=_kv_transfer(cfg),
                       gpu_memory_utilization=cfg.cache_config.gpu_memory_utilization,
                       enable_extensible_kv_cache=getattr(cfg.cache_config, "enable_extensible_kv_cache", None))
        except SystemExit as exc:  # argparse error
            res["error"] = "argparse exit %s" % exc.code
        except BaseException as exc:  # report any failure of vLLM's validation as data
            res["error"] = "%s: %s" % (type(exc).__name__, exc)
            res["trace"] = traceback.format_exc()[-2000:]
        results.append(res)
    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager
    out = {"results": results, "version": vllm.__version__,
           "tool_parsers": sorted(ToolParserManager.list_registered()),
           "reasoning_parsers": sorted(ReasoningParserManager.list_registered())}
    sys.stdout.write("\n" + json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
