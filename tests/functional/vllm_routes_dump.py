# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run INSIDE a vLLM >= 0.34 venv (VLLM_TARGET_DEVICE=cpu, HF_HUB_OFFLINE=1): the route table of vLLM's OpenAI
server as its own build_app registers it for `vllm serve MODEL_DIR [FLAGS...]` (no engine is started).

Usage: vllm_routes_dump.py MODEL_DIR [FLAGS...]
stdout (last line): JSON {"version", "enable_sleep_mode", "routes": {path: [methods]}}.
ModelConfig refuses sleep mode on the CPU platform ("Sleep mode is not supported on current platform"): the
config is validated without it and the field register_api_routers reads is then set as a CUDA host has it.
"""
from __future__ import absolute_import, division, print_function

import json
import sys


def main():
    import vllm
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.common.cli_args import make_arg_parser
    from vllm.entrypoints.launchers.app import build_app
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    model_dir, extra = sys.argv[1], sys.argv[2:]
    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
    ns = parser.parse_args([model_dir, "--skip-tokenizer-init", "--api-key", "k"] + extra)
    ns.model = model_dir
    sleep, ns.enable_sleep_mode = ns.enable_sleep_mode, False
    model_config = AsyncEngineArgs.from_cli_args(ns).create_model_config()
    model_config.enable_sleep_mode = ns.enable_sleep_mode = sleep
    app = build_app(ns, ("generate",), model_config)
    routes = {}
    for route in app.routes:
        if getattr(route, "path", None):
            methods = set(m.lower() for m in (getattr(route, "methods", None) or ()) if m != "HEAD")
            routes[route.path] = sorted(set(routes.get(route.path, [])) | methods)
    sys.stdout.write("\n" + json.dumps({"version": vllm.__version__, "enable_sleep_mode": model_config.enable_sleep_mode,
                                        "routes": routes}, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
