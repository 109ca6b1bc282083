# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the vllm_units module's one checker run saves: roles/vllm/files/vllm_check_unit.py on two rendered units of the
CPU build, once for both (as the module runs it since 82e27cd) and once per unit (as before), alternated, 3 repeats.

    .venv/bin/python benchmarks/unit_check_cost.py <a venv with vLLM>/bin/python

(from a checkout; the venv of scripts/vllm-venv.sh serves). Prints JSON: seconds per repeat and the ratio per repeat."""
from __future__ import absolute_import, division, print_function

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
UTILS = os.path.join("ansible_collections", "gpufleet", "vllm", "plugins", "module_utils")


def _layout():
    """The checker as the role installs it (with the collection's systemd word splitter beside it)."""
    base = tempfile.mkdtemp(prefix="unit-check-cost-")
    os.makedirs(os.path.join(base, UTILS, "units"))
    shutil.copy(os.path.join(ROOT, "roles", "vllm", "files", "vllm_check_unit.py"), base)
    for name in ("units/systemd_unit.py", "error_boundary.py"):
        shutil.copy(os.path.join(ROOT, "plugins", "module_utils", name), os.path.join(base, UTILS, name))
    coll = tempfile.mkdtemp(prefix="unit-check-cost-coll-")
    os.makedirs(os.path.join(coll, "ansible_collections", "gpufleet"))
    os.symlink(ROOT, os.path.join(coll, "ansible_collections", "gpufleet", "vllm"))
    sys.path.insert(0, coll)
    return base


def _units(base, python):
    from ansible_collections.gpufleet.vllm.plugins.module_utils.units.render import render_unit

    with open(os.path.join(ROOT, "tests", "fixtures", "units", "cases.json")) as handle:
        case = json.load(handle)[2]  # the CPU build's unit
    model = os.path.join(ROOT, "tests", "fixtures", "tiny-qwen3", "model")
    venv = os.path.dirname(os.path.dirname(python))
    paths = []
    for index, port in enumerate(("8101", "8102")):
        inst = dict(case["instance"], numa_node=None, argv=["vllm", "serve", model, "--port", port])
        path = os.path.join(base, "vllm-%d.service" % index)
        with open(path, "w") as handle:
            handle.write(render_unit(inst, dict(case["settings"], venv=venv, home="/tmp", cache_dir="/tmp")))
        paths.append(path)
    return paths


def _timed(argvs):
    start = time.time()
    for argv in argvs:
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return round(time.time() - start, 2)


def main():
    python = sys.argv[1]
    base = _layout()
    paths = _units(base, python)
    checker = os.path.join(base, "vllm_check_unit.py")
    names = ["vllm-%d.service" % index for index in range(len(paths))]
    together = [[python, checker] + [w for name in names for w in ("--name", name)] + ["--parser"] + paths]
    apart = [[python, checker, "--name", name, "--parser", path] for name, path in zip(names, paths)]
    result = {"one_run": [], "one_run_per_unit": []}
    for repeat in range(3):  # pylint: disable=unused-variable
        result["one_run_per_unit"].append(_timed(apart))
        result["one_run"].append(_timed(together))
    result["ratio_per_repeat"] = [round(b / a, 2) for a, b in zip(result["one_run"], result["one_run_per_unit"])]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
