# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 43 class 8: a secret a module refuses (or carries inside a non-secret argument) appears nowhere in what
the module prints - its message, its details, nor the ``invocation`` Ansible echoes. The REAL exit path runs
(AnsibleModule's own fail_json / exit_json print the JSON Ansible reads), so the echoed arguments are checked."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible_collections.gpufleet.vllm.plugins.modules import model_weights, vllm_settings_check, vllm_venv
from ansible_collections.gpufleet.vllm.tests.unit.plugins.modules.module_harness import patch_module_args

SECRET = "s3cr3t-Pa55word"


def _printed(capsys, main, args):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            main()
    out = capsys.readouterr().out
    return out, json.loads(out)


@pytest.mark.parametrize("option, value", [
    ("url", "http://alice:%s@mirror.internal/models/x" % SECRET),
    ("url", "https://%s@mirror.internal/models/x" % SECRET),
    ("manifest", "http://bob:%s@mirror.internal/SHA256SUMS" % SECRET),
    ("endpoint", "https://carol:%s@hub.internal" % SECRET),
])
def test_model_weights_never_echoes_a_refused_password(capsys, tmp_path, option, value):
    args = dict(dest=str(tmp_path / "snap"), source="http", url="http://mirror.internal/models/x")
    args[option] = value
    out, result = _printed(capsys, model_weights.main, args)
    assert result["failed"] and "user:password@" in result["msg"]
    assert SECRET not in out


@pytest.mark.parametrize("environment", [
    {"HF_TOKEN": SECRET},
    {"VLLM_API_KEY": SECRET, "VLLM_NO_USAGE_STATS": "1"},
    {"MY_PASSWORD": SECRET},
    {"AWS_SECRET_ACCESS_KEY": SECRET},
])
def test_vllm_settings_check_never_echoes_a_refused_environment_value(capsys, environment):
    settings = {"vllm_environment": environment, "vllm_user": "vllm", "vllm_group": "vllm"}
    out, result = _printed(capsys, vllm_settings_check.main, dict(settings=settings))
    assert result["failed"] and "must not hold secrets" in result["msg"]
    assert SECRET not in out


def test_vllm_venv_never_echoes_an_index_password(capsys, tmp_path):
    args = dict(venv=str(tmp_path / "venv"), package="vllm", version="0.32.0", requirement="--index-url x",
                index_url="https://user:%s@pypi.internal/simple" % SECRET)
    out, result = _printed(capsys, vllm_venv.main, args)
    assert result["failed"] and "is not one requirement" in result["msg"]
    assert SECRET not in out
