# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""vllm_force_aot_load (issue 45): the cause the health gate's failure names is read from the unit's journal with the
role's own expression (roles/vllm/tasks/health.yml), here on a real forced start's output
(tests/fixtures/startup/cpu-0.32.0/forced-aot-load.log, provenance in its README). A fresh-clone run caught the first
version of that expression: Ansible 2.19's Jinja keeps '\\\\S' as two characters, so the line was never found."""
import os

import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LOG = os.path.join(ROOT, "tests", "fixtures", "startup", "cpu-0.32.0", "forced-aot-load.log")
AOT = "/tmp/vc/torch_compile_cache/torch_aot_compile/e60ca662118d572ab821933e07813200b58bca0c4538e62b498f218a476b32d8/rank_0_0/model"


def cause(journal, judged=True):
    with open(os.path.join(ROOT, "roles", "vllm", "tasks", "health.yml")) as handle:
        task = next(t for t in yaml.safe_load(handle) if t["name"].startswith("Fail with the health gate's finding"))
    variables = dict((k, trust_as_template(v)) for k, v in task["vars"].items())
    variables.update(item={"item": "tiny-qwen3-0"}, _vllm_force_aot_judged=judged, _vllm_prewarmed_from="host-a",
                     __vllm_force_aot_journal={"results": [{"item": "tiny-qwen3-0", "stdout": journal}]})
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template("{{ _vllm_force_aot_cause }}"))


def test_a_forced_start_names_the_artefact_and_vllms_reason():
    with open(LOG) as handle:
        text = cause(handle.read())
    assert text.startswith(" -- VLLM_FORCE_AOT_LOAD (vllm_force_aot_load): this start expected the compile cache pre-warmed")
    assert "from host-a" in text and AOT + ": 'function' object has no attribute 'finalize_loading'" in text


def test_without_the_line_it_says_so_and_without_the_flag_nothing():
    assert "vLLM logged no load failure" in cause("RuntimeError: Engine core initialization failed.")
    assert cause("anything", judged=False) == ""
