# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/vllm/files/vllm_check_unit.py checks a unit's OWN ExecStart= (issue 29: it used to check the plan's
argv): laid out as install.yml installs it (the collection's units/systemd_unit.py under its directory), run with
the REAL pinned vLLM's venv (scripts/vllm-venv.sh) on units rendered by plugins/module_utils/units/render.py,
and on one edited after rendering. systemd-analyze verify runs for real. Skipped ONLY when GPUFLEET_SKIP_VLLM=1.
"""
from __future__ import absolute_import, division, print_function

import json
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
UTILS = os.path.join("ansible_collections", "gpufleet", "vllm", "plugins", "module_utils")

pytestmark = pytest.mark.skipif(os.environ.get("GPUFLEET_SKIP_VLLM") == "1", reason="GPUFLEET_SKIP_VLLM=1")


@pytest.fixture(scope="module")
def libexec(tmp_path_factory):
    """The checker as install.yml lays it out, and render_unit importable from this checkout."""
    base = tmp_path_factory.mktemp("libexec")
    os.makedirs(str(base / UTILS / "units"))
    shutil.copy(os.path.join(ROOT, "roles", "vllm", "files", "vllm_check_unit.py"), str(base))
    for name in ("units/systemd_unit.py", "error_boundary.py"):
        shutil.copy(os.path.join(ROOT, "plugins", "module_utils", name), str(base / UTILS / name))
    coll = tmp_path_factory.mktemp("collections")
    os.makedirs(str(coll / "ansible_collections" / "gpufleet"))
    os.symlink(ROOT, str(coll / "ansible_collections" / "gpufleet" / "vllm"))
    sys.path.insert(0, str(coll))
    return str(base)


@pytest.fixture(scope="module")
def vllm_python():
    out = subprocess.run([os.path.join(ROOT, "scripts", "vllm-venv.sh")], stdout=subprocess.PIPE, check=True,
                         universal_newlines=True, timeout=3000)
    return out.stdout.strip().splitlines()[-1]


def unit_text(vllm_python, tail):
    from ansible_collections.gpufleet.vllm.plugins.module_utils.units.render import render_unit

    with open(os.path.join(ROOT, "tests", "fixtures", "units", "cases.json")) as handle:
        case = json.load(handle)[2]  # the CPU build's unit
    model = os.path.join(ROOT, "tests", "fixtures", "tiny-qwen3", "model")
    instance = dict(case["instance"], numa_node=None, argv=["vllm", "serve", model, "--port", "8101"] + tail)
    venv = os.path.dirname(os.path.dirname(vllm_python))
    return render_unit(instance, dict(case["settings"], venv=venv, home="/tmp", cache_dir="/tmp"))


def check(libexec, vllm_python, tmp_path, text, parser=True):
    path = tmp_path / "staged.service"
    path.write_text(text)
    return subprocess.run([vllm_python, os.path.join(libexec, "vllm_check_unit.py"), "--name", "vllm-a.service",
                           "--parser" if parser else "--no-parser", str(path)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=600, check=False)


def test_a_rendered_unit_passes_both_checks(libexec, vllm_python, tmp_path):
    done = check(libexec, vllm_python, tmp_path, unit_text(vllm_python, ["--max-model-len", "1024",
                                                                         "--served-model-name", "tiny qwen %"]))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("vllm-a.service: systemd-analyze verify - ok; vLLM ") and "parser - ok" in done.stdout


def test_the_unit_file_is_what_is_parsed_not_the_plan(libexec, vllm_python, tmp_path):
    text = unit_text(vllm_python, []).replace("--port 8101", "--port 8101 --no-such-flag")  # edited after rendering
    done = check(libexec, vllm_python, tmp_path, text)
    assert done.returncode == 1
    assert "unrecognized arguments: --no-such-flag" in done.stderr and "UNIT CHECK FAILED" in done.stderr
    assert check(libexec, vllm_python, tmp_path, text, parser=False).returncode == 0  # --no-parser: systemd only


@pytest.mark.parametrize("edit, words", [
    (lambda t: t.replace("ExecStart=", "ExecStart=/bin/true\nExecStart="), "has 2 ExecStart= lines"),
    (lambda t: t.replace(" serve ", " bench "), "does not run `vllm serve MODEL`"),
    (lambda t: t.replace("ExecStart=/", 'ExecStart="/'), "cannot read ExecStart="),
])
def test_a_unit_that_is_not_a_vllm_serve_command_fails(libexec, vllm_python, tmp_path, edit, words):
    done = check(libexec, vllm_python, tmp_path, edit(unit_text(vllm_python, [])), parser=False)
    assert done.returncode == 1 and words in done.stderr, done.stderr


def test_two_units_are_checked_in_one_run_and_a_refused_one_is_named(libexec, vllm_python, tmp_path):
    good = unit_text(vllm_python, [])
    bad = good.replace("--port 8101", "--port 8102 --no-such-flag")
    paths = []
    for name, text in (("vllm-a.service", good), ("vllm-b.service", bad)):
        paths.append(tmp_path / name)
        paths[-1].write_text(text)
    done = subprocess.run([vllm_python, os.path.join(libexec, "vllm_check_unit.py"), "--name", "vllm-a.service",
                           "--name", "vllm-b.service", "--parser", str(paths[0]), str(paths[1])],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=600,
                          check=False)
    assert done.returncode == 1
    assert done.stdout.startswith("vllm-a.service: systemd-analyze verify - ok; vLLM "), done.stdout
    assert "UNIT CHECK FAILED: vllm-b.service: vLLM" in done.stderr and "--no-such-flag" in done.stderr
    mismatch = subprocess.run([vllm_python, os.path.join(libexec, "vllm_check_unit.py"), "--name", "vllm-a.service",
                               str(paths[0]), str(paths[1])],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=600,
                              check=False)
    assert mismatch.returncode == 2 and "1 --name for 2 unit files" in mismatch.stderr
