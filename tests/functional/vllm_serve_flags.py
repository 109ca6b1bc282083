# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run INSIDE a vLLM venv (VLLM_TARGET_DEVICE=cpu): the `vllm serve` option strings of its own parser and the
KV-cache defaults (CacheConfig). stdout (last line): JSON {"version", "flags", "defaults", "DEFAULT_BLOCK_SIZE",
"DEFAULT_GPU_MEMORY_UTILIZATION"} (the last None before 0.34.0)."""
from __future__ import absolute_import, division, print_function

import json
import sys

DEFAULTS = ("block_size", "gpu_memory_utilization", "kv_offloading_size", "kv_offloading_backend",
            "enable_extensible_kv_cache", "kv_cache_memory_bytes")


def main():
    import vllm
    from vllm.config.cache import CacheConfig
    from vllm.entrypoints.common.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
    flags = sorted(set(s for a in parser._actions for s in a.option_strings if s.startswith("--")))
    out = {"version": vllm.__version__, "flags": flags, "defaults": dict((k, parser.get_default(k)) for k in DEFAULTS),
           "DEFAULT_BLOCK_SIZE": CacheConfig.DEFAULT_BLOCK_SIZE,
           "DEFAULT_GPU_MEMORY_UTILIZATION": getattr(CacheConfig, "DEFAULT_GPU_MEMORY_UTILIZATION", None)}
    sys.stdout.write("\n" + json.dumps(out, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
