# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The DCGM exporter's counters file and unit, rendered by the monitoring role's own tasks (dcgm_files.yml).
These machines have no NVIDIA repository, so the role's install path is covered by its skip message in
the Molecule scenario; the files it would install are checked here."""
import configparser
import re
import shutil
import subprocess

import pytest

from test_monitoring_rules import render


@pytest.fixture(scope="module", params=[True, False], ids=["hostengine", "embedded"])
def files(request, tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("dcgm")
    rules = render(tmp_path, {"render_dcgm": True, "_monitoring_dcgm_dir": str(tmp_path / "dcgm"),
                              "_monitoring_unit_dir": str(tmp_path), "_monitoring_dcgm_hostengine": request.param})
    csv = (tmp_path / "dcgm" / "gpufleet-counters.csv").read_text()
    unit = (tmp_path / "gpufleet-dcgm-exporter.service").read_text()
    return dict(hostengine=request.param, rules=rules, csv=csv, unit=unit, tmp_path=tmp_path)


def _fields(csv):
    rows = [line.split(",") for line in csv.splitlines() if line.strip() and not line.startswith("#")]
    assert all(len(r) == 3 and r[1].strip() in ("gauge", "counter", "label") for r in rows), rows
    return {r[0].strip() for r in rows}


def test_counters_enable_xid_ecc_and_nvlink_errors(files):
    fields = _fields(files["csv"])
    for name in ("DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
                 "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
                 "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL"):
        assert name in fields, name


def test_every_dcgm_name_the_rules_use_is_collected(files):
    used = set(re.findall(r"DCGM_FI_[A-Z0-9_]+", files["rules"]))
    assert len(used) >= 8
    assert used - _fields(files["csv"]) == set()


def test_unit_uses_the_running_host_engine_or_embeds_one(files):
    hostengine, unit, tmp_path = files["hostengine"], files["unit"], files["tmp_path"]
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.read_string(unit)
    argv = parser["Service"]["ExecStart"].split()
    assert argv[:5] == ["/usr/bin/dcgm-exporter", "--collectors", str(tmp_path / "dcgm" / "gpufleet-counters.csv"),
                        "--address", ":9400"]
    if hostengine:
        assert argv[5:] == ["--remote-hostengine-info", "localhost:5555"]
        assert "nvidia-dcgm.service" in parser["Unit"]["After"]
    else:
        assert argv[5:] == []
        assert "nvidia-dcgm" not in unit


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_unit_parses_for_systemd(files):
    tmp_path = files["tmp_path"]
    proc = subprocess.run(["systemd-analyze", "verify", "--man=no", str(tmp_path / "gpufleet-dcgm-exporter.service")],
                          capture_output=True, text=True, check=False)
    # The exporter binary is not installed here: only that complaint is allowed.
    problems = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip() and "dcgm-exporter" not in line]
    assert problems == [], proc.stdout + proc.stderr
