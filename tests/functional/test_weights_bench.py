# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A tiny run of benchmarks/weights_bench.py (2 x 8 MiB, one repeat): the script works end to end
against nginx and reports every figure. The real benchmark (4 x 1 GiB) is run by hand, not in CI."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from weights_support import ROOT

pytestmark = pytest.mark.skipif(not (shutil.which("nginx") or os.path.exists("/usr/sbin/nginx"))
                                or not shutil.which("curl"), reason="needs nginx and curl from apt")


def test_tiny_benchmark_reports_every_figure(tmp_path):
    out = tmp_path / "figures.json"
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "weights_bench.py"), "--files", "2",
                           "--size-mib", "8", "--repeat", "1", "--workdir", str(tmp_path / "work"), "--json", str(out)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300, check=False)
    text = proc.stdout.decode()
    assert proc.returncode in (0, 1), text  # 1 = a target missed (meaningless at 8 MiB); anything else is a crash
    figures = json.loads(out.read_text())
    for key in ("a_download_1_worker_vs_curl", "a_parallel_gain", "b_verify_full_vs_sha256sum_time",
                "c_verify_cached_s"):
        assert figures[key] > 0 or key == "c_verify_cached_s", (key, figures)
    assert figures["files"] == 2 and len(figures["runs_s"]["curl_s"]) == 1
    assert "verify: cached" in text and "sha256sum" in text
    assert not os.path.exists(str(tmp_path / "work" / "data"))  # random data removed without --keep
