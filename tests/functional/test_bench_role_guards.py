# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bench role refuses bad input before it sends a request, with the key and the fix, never a traceback:
ansible-playbook runs the installed role on localhost (no engine: every case fails at the input check).
The real engine runs the role in the Molecule scenario `vllm_serve` (tasks/bench.yml)."""
import json
import os
import subprocess
import sys

import pytest

INSTANCE = dict(name="tiny-qwen3-0", port=9, argv=["vllm", "serve", "/srv/models/tiny-qwen3", "--served-model-name",
                                                   "tiny-qwen3", "--max-model-len", "2048", "--port", "9"])
PLAY = """
- hosts: localhost
  connection: local
  gather_facts: false
  roles:
    - gpufleet.vllm.bench
"""


def run_role(venv_bin, collections, tmp_path, extra):
    playbook = tmp_path / "bench.yml"
    playbook.write_text(PLAY)
    variables = dict(dict(bench_instances=[INSTANCE], bench_front_door=False, bench_results_dir=str(tmp_path / "r")),
                     **extra)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections), ANSIBLE_NOCOLOR="1")
    return subprocess.run([str(venv_bin / "ansible-playbook"), "-i", "localhost,", str(playbook),
                           "-e", "ansible_python_interpreter=%s" % sys.executable, "-e", json.dumps(variables)],
                          capture_output=True, text=True, env=env, check=False, timeout=300)


@pytest.mark.parametrize("extra, message", [
    (dict(gpufleet_workloads=[{"name": "w", "input_len": 128, "inputlen": 3}]),
     "gpufleet_workloads[0] has unknown key(s) inputlen"),
    (dict(gpufleet_workloads=[{"name": "w", "input_len": 4000}]),
     "the longest request is 4016 tokens"),
    (dict(gpufleet_slo={"ttft_p95_ms": 10}), "gpufleet_slo has unknown key(s) ttft_p95_ms"),
    (dict(gpufleet_slo={"min_goodput_rps": 1}), "set goodput_ttft_ms and/or goodput_tpot_ms"),
    (dict(bench_instances=[]), "bench_instances is empty"),
    (dict(gpufleet_workloads=[{"name": "mix", "mix": [{"share": 0.8, "input_len": 512}, {"share": 0.1, "input_len": "max"}]}]),
     "gpufleet_workloads[0] (mix): the mix's shares sum to 0.9, not 1: make them add up to 1"),
    (dict(gpufleet_workloads=[{"name": "mix", "mix": [{"share": 0.8, "input_len": 512}, {"share": 0.2, "input_len": 2040}],
                               "output_len": 64}]),
     "input_len 2040 + output_len 64 = 2104 tokens but the plan's max_model_len is 2048: use input_len: max (1984)"),
    (dict(gpufleet_workloads=[{"name": "mix", "mix": [{"share": 0.8, "input_len": 512}, {"share": 0.2, "input_len": "max"}]}],
          gpufleet_slo={"classes": {"medium": {"ttft_p90_ms": 5}}}),
     "gpufleet_slo.classes.medium: no workload's mix has a class medium (classes: long, short)"),
])
def test_bad_input_is_refused_before_any_request(venv_bin, installed_collection, tmp_path, extra, message):
    proc = run_role(venv_bin, installed_collection, tmp_path, extra)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert message in out, out[-3000:]
    assert "Traceback" not in out
    assert "Check the workloads and the SLO" in out  # it stopped at the input check
    assert not (tmp_path / "r").exists()
