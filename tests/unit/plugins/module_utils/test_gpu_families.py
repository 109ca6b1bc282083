# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one table of GPU families (gpu_families.py): each gate, per product, and every copy that names it.

Expected values per product come from outside the code: NVIDIA's MIG user guide "Supported GPUs" table,
the compute capabilities NVIDIA publishes (and gpu_facts read on the H200 host, tests/fixtures/h200x2),
vLLM 0.33's FA4_HD256_PAGE_SIZE (SM10x/11x) and _resolve_gdn_prefill_backend.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

import pytest
import yaml

from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu import gpu_families as F
from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu import hardware_profiles as hp
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import kv_capacity as kv
from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu import nvml
from ansible_collections.gpufleet.vllm.plugins.modules import vllm_plan

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))

PRODUCTS = [
    # name, cc, native FP8, MIG, FA4 128-token pages (hd256), FlashInfer GDN prefill with k_head_dim 128 / 64
    ("Tesla V100-SXM2-32GB", "7.0", False, False, False, (False, False)),
    ("NVIDIA A100-SXM4-80GB", "8.0", False, True, False, (False, False)),
    ("NVIDIA A10", "8.6", False, False, False, (False, False)),
    ("NVIDIA GeForce RTX 3090", "8.6", False, False, False, (False, False)),
    ("Orin (nvgpu)", "8.7", False, False, False, (False, False)),
    ("NVIDIA L40S", "8.9", True, False, False, (False, False)),
    ("NVIDIA GeForce RTX 4090", "8.9", True, False, False, (False, False)),
    ("NVIDIA H100 80GB HBM3", "9.0", True, True, False, (True, True)),
    ("NVIDIA H200", "9.0", True, True, False, (True, True)),
    ("NVIDIA B200", "10.0", True, True, True, (True, False)),
    ("NVIDIA B300 SXM6 AC", "10.3", True, True, True, (True, False)),
    ("NVIDIA Thor", "11.0", True, False, True, (False, False)),
    ("NVIDIA GeForce RTX 5090", "12.0", True, False, False, (True, False)),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "12.0", True, True, False, (True, False)),
    ("NVIDIA GB10", "12.1", True, False, False, (True, False)),
]


@pytest.mark.parametrize("name,cc,fp8,mig,fa4,gdn", PRODUCTS, ids=[p[0] for p in PRODUCTS])
def test_gates_per_product(name, cc, fp8, mig, fa4, gdn):
    assert F.native_fp8(cc) is fp8
    assert F.mig_capable(name, kv.parse_cc(cc), True) is mig
    assert F.fa4_hd256_pages(kv.parse_cc(cc)) is fa4
    assert (F.gdn_flashinfer(kv.parse_cc(cc), 128), F.gdn_flashinfer(kv.parse_cc(cc), 64)) == gdn


def test_mig_needs_the_mode_call_to_answer():
    assert F.mig_capable("NVIDIA H200", (9, 0), False) is False
    assert F.mig_capable("unknown", None, True) is True   # no capability read: the mode call decides


def test_the_users_read_the_table():
    assert nvml.mig_capable is F.mig_capable
    assert hp.PROFILES is F.PROFILES and not hasattr(hp, "CUDA_GAPS")


def test_families_are_ordered_and_complete():
    firsts = [row[0] for row in F.FAMILIES]
    assert firsts == sorted(firsts) and len(set(firsts)) == len(firsts) and firsts[0] == (0, 0)
    assert all(len(row) == len(F.FAMILY_KEYS) for row in F.FAMILIES)


def test_every_profile_has_a_family_and_a_driver_total():
    for key, prof in F.PROFILES.items():
        assert F.family(prof["compute_capability"])["first"] != (0, 0), key
        assert prof["memory_total_bytes"] % F.MIB == 0 and prof["source"], key


def _named_profiles(text):
    return set(re.findall(r"C\(([a-z0-9-]+)\)", text))


def test_profile_names_in_the_docs_are_the_table():
    """vllm_plan's DOCUMENTATION and playbooks/plan.yml list the profile names: the same set as the table."""
    doc = yaml.safe_load(vllm_plan.DOCUMENTATION)["options"]["gpus"]["description"]
    listed = [line for line in doc if "C(h200)" in line]
    assert len(listed) == 1 and _named_profiles(listed[0]) == set(F.PROFILES)
    with open(os.path.join(ROOT, "playbooks", "plan.yml")) as handle:
        header = handle.read().split("profiles:", 1)[1].split(";", 1)[0]
    assert set(re.findall(r"[a-z0-9-]+", header.replace(")", " "))) == set(F.PROFILES)
