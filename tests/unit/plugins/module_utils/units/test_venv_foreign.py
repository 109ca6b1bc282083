# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 43 class 6: vllm_venv trusts its caller no more than the role does - a folder at the venv path that is not
an interrupted venv of ours is refused (its files kept), and a requirement line is never a pip option."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.units import venv as v


class Runner(object):
    """RECORDING STAND-IN for run_command: makes the venv folder on `-m venv`, answers the version and listing."""

    def __init__(self, listing="numpy==2.2.6\n"):
        self.calls, self.listing = [], listing

    def __call__(self, argv):
        self.calls.append(list(argv))
        if argv[1:3] == ["-m", "venv"]:
            os.makedirs(os.path.join(argv[3], "bin"))
        if argv[1].endswith("vllm_requirements.py"):
            return 0, self.listing, ""
        return 0, "0.32.0\n" if argv[1] == "-c" else "", ""


def _spec(venv, **changes):
    out = dict(venv=venv, python="/usr/bin/python3", package="vllm", version="0.32.0", requirement="vllm==0.32.0",
               pip_packages=[], exclude=[], requirements_script="/opt/vllm/libexec/vllm_requirements.py",
               wheelhouse="", index_url="", pip_extra_args=[])
    out.update(changes)
    return out


@pytest.mark.parametrize("files", [["data.db"], ["projects/app.py"], ["bin/python", "notes.txt"], [".ssh/id_rsa"]])
def test_a_foreign_folder_at_the_venv_path_is_refused_and_kept(tmp_path, files):
    venv = tmp_path / "venvs" / "0.32.0-0123456789ab"
    for name in files:
        (venv / name).parent.mkdir(parents=True, exist_ok=True)
        (venv / name).write_text("theirs")
    run = Runner()
    with pytest.raises(v.VenvError, match="is not a venv this module made") as info:
        v.ensure(_spec(str(venv)), run)
    assert info.value.details["option"] == "venv"
    assert all((venv / name).read_text() == "theirs" for name in files) and run.calls == []


def test_a_file_at_the_venv_path_is_refused(tmp_path):
    venv = tmp_path / "venv"
    venv.write_text("theirs")
    with pytest.raises(v.VenvError, match="is not a venv this module made"):
        v.ensure(_spec(str(venv)), Runner())
    assert venv.read_text() == "theirs"


def test_an_interrupted_venv_of_ours_is_made_again(tmp_path):
    venv = tmp_path / "venv"
    (venv / "lib").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "gpufleet-requirements.txt").write_text("vllm==0.32.0\n")
    v.ensure(_spec(str(venv)), Runner())
    assert (venv / ".gpufleet-installed").exists() and not (venv / "pyvenv.cfg").exists()


@pytest.mark.parametrize("field, value", [
    ("requirement", "--index-url http://evil.example/simple"),
    ("requirement", "vllm==0.32.0\n--extra-index-url http://evil.example/simple"),
    ("requirement", "vllm==0.32.0 --index-url http://evil.example/simple"),
    ("requirement", "-r /etc/shadow"),
    ("requirement", ""),
    ("pip_packages", ["-f", "http://evil.example/"]),
    ("pip_packages", ["--find-links=http://evil.example/"]),
    ("pip_packages", ["-e", "git+http://evil.example/x"]),
    ("pip_packages", ["torch==2.13.0\r\n-i http://evil.example"]),
    ("pip_packages", ["torch==2.13.0\x00"]),
])
def test_a_requirement_line_is_never_a_pip_option(tmp_path, field, value):
    run = Runner()
    with pytest.raises(v.VenvError, match="is not one requirement"):
        v.ensure(_spec(str(tmp_path / "venv"), **{field: value}), run)
    assert run.calls == [] and not (tmp_path / "venv").exists()


def test_a_listed_requirement_that_is_an_option_is_refused(tmp_path):
    run = Runner(listing="numpy==2.2.6\n--index-url http://evil.example/simple\n")
    with pytest.raises(v.VenvError, match="is not one requirement"):
        v.ensure(_spec(str(tmp_path / "venv"), exclude=["torch"]), run)
    assert not any("--index-url" in argv for argv in run.calls)


@pytest.mark.parametrize("line", ["vllm==0.32.0", "vllm[audio]==0.32.0", "torch>=2.0; platform_machine != 'x86-64'",
                                  "vllm @ https://example.org/vllm-0.32.0-py3-none-any.whl"])
def test_real_requirements_pass(line):
    assert v.requirement_problem(line) is None
