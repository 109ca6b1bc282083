# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The router's command line (router/argv.py) against what the role's former Jinja expression rendered
(tests/fixtures/units/router-argv.json, PROVENANCE.md), from the role's defaults plus each case's values."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest
import yaml

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError
from ansible_collections.gpufleet.vllm.plugins.module_utils.router.argv import FLAGS, router_argv

HERE = os.path.dirname(__file__)
ROOT = os.path.join(HERE, "..", "..", "..", "..")
with open(os.path.join(ROOT, "tests", "fixtures", "units", "router-argv.json")) as handle:
    CASES = json.load(handle)
with open(os.path.join(ROOT, "roles", "router", "defaults", "main.yml")) as handle:
    DEFAULTS = yaml.safe_load(handle)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_argv_matches_the_former_jinja(case):
    # The expected argv was rendered with the role's defaults of then: the balance thresholds were 64 / 1.5.
    values = dict(DEFAULTS, router_balance_abs_threshold=64, router_balance_rel_threshold=1.5)
    values.update(case["vars"])
    venv = "%s/venvs/%s-%s" % (values["router_base_dir"], values["router_package"], values["router_version"])
    assert router_argv(values, venv) == case["argv"]


def test_every_flag_names_a_variable_of_the_role():
    assert all(var in DEFAULTS for _flag, var in FLAGS)


def test_a_missing_variable_is_named():
    values = dict(DEFAULTS)
    del values["router_port"]
    with pytest.raises(UserError, match="router_port"):
        router_argv(values, "/v")
