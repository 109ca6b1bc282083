# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run several of the vLLM helper scripts of tests/functional in ONE interpreter of a vLLM venv: importing vLLM
costs 15-20 s of CPU per process, and the 0.34 tests ran seven. Each script runs as `python SCRIPT ARGS < STDIN`
would (runpy, __main__), its stdout captured.

    stdin: {"jobs": [{"script": "vllm_serve_flags.py", "args": [], "stdin": ""}, ...]}
    stdout (last line): [{"rc": 0, "stdout": "...", "error": ""}, ...]   one entry per job, in order
"""
from __future__ import absolute_import, division, print_function

import contextlib
import io
import json
import os
import runpy
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))


def run_job(job):
    real_argv, real_stdin = sys.argv, sys.stdin
    sys.argv = [os.path.join(HERE, job["script"])] + list(job.get("args") or [])
    sys.stdin = io.StringIO(job.get("stdin") or "")
    out, rc, error = io.StringIO(), 0, ""
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(sys.argv[0], run_name="__main__")
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Exception:  # pylint: disable=broad-except  # a job's failure is its result, the others still run
        rc, error = 1, traceback.format_exc()
    finally:
        sys.argv, sys.stdin = real_argv, real_stdin
    return {"rc": rc, "stdout": out.getvalue(), "error": error[-3000:]}


def main():
    import vllm.logger  # noqa: F401  # pylint: disable=unused-import  # vLLM's log handler binds the real stdout
    jobs = json.loads(sys.stdin.read())["jobs"]
    results = [run_job(job) for job in jobs]
    sys.stdout.write("\n" + json.dumps(results) + "\n")


if __name__ == "__main__":
    main()
