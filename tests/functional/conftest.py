# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Shared fixtures for the plain-pytest functional tests (run with the project venv)."""
import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def root():
    return ROOT


@pytest.fixture(scope="session")
def venv_bin():
    """The bin folder of the interpreter running pytest (the project venv)."""
    import sys

    return pathlib.Path(sys.executable).parent


@pytest.fixture(scope="session")
def installed_collection(tmp_path_factory, venv_bin):
    """Build the collection tarball and install it into a fresh collections path.

    Returns the collections path (the folder holding ansible_collections/).
    """
    build_dir = tmp_path_factory.mktemp("build")
    subprocess.run(
        [str(venv_bin / "ansible-galaxy"), "collection", "build", "--output-path", str(build_dir), str(ROOT)],
        check=True, capture_output=True, text=True,
    )
    tarballs = list(build_dir.glob("gpufleet-vllm-*.tar.gz"))
    assert len(tarballs) == 1, tarballs
    install_dir = tmp_path_factory.mktemp("collections")
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(install_dir))
    subprocess.run(
        [str(venv_bin / "ansible-galaxy"), "collection", "install", str(tarballs[0]), "-p", str(install_dir)],
        check=True, capture_output=True, text=True, env=env,
    )
    yield install_dir
    shutil.rmtree(install_dir, ignore_errors=True)
