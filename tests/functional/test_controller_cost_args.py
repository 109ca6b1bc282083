# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""benchmarks/controller_cost.sh refuses bad options by name before it builds or starts anything (the benchmark
itself needs podman and several minutes: docs/controller-at-scale.md)."""
import pathlib
import subprocess

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "controller_cost.sh"


@pytest.mark.parametrize("args, words", [
    (["--hosts", "2 x"], "--hosts has 'x'"),
    (["--hosts", "0"], "--hosts has '0'"),
    (["--repeats", "0"], "--repeats is '0'"),
    (["--forks", "8"], "unknown option --forks"),
])
def test_bad_options_are_named(args, words):
    proc = subprocess.run(["bash", str(SCRIPT)] + args, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode != 0
    assert words in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
