# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The model_weights role's source check, evaluated with Ansible's own templating on the shipped task file
(issue 27 LOW): user:pass@ in a mirror URL was accepted (the module dropped it) and echoed in the message."""
import pathlib

import pytest
import yaml

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROLE = pathlib.Path(__file__).resolve().parents[2] / "roles" / "model_weights"
NAME = "Check model_weights_source and its settings"


def _evaluate(**overrides):
    t = next(t for t in yaml.safe_load((ROLE / "tasks" / "validate.yml").read_text()) if t["name"] == NAME)
    variables = {}
    for name in ("defaults", "vars"):
        variables.update((k, trust_as_template(v) if isinstance(v, str) else v)
                         for k, v in yaml.safe_load((ROLE / name / "main.yml").read_text()).items())
    variables.update((k, trust_as_template(v) if isinstance(v, str) else v) for k, v in t["vars"].items())
    variables.update(overrides)
    templar = Templar(loader=DataLoader(), variables=variables)
    ok = all(templar.template(trust_as_template("{{ (%s) | bool }}" % c)) for c in t["ansible.builtin.assert"]["that"])
    return ok, " ".join(templar.template(trust_as_template(t["ansible.builtin.assert"]["fail_msg"])).split())


@pytest.mark.parametrize("overrides, refused_option", [
    ({"model_weights_source": "http", "model_weights_url": "https://mirror.example/m"}, None),
    ({"model_weights_source": "http", "model_weights_url": "https://alice:s3cret@mirror.example/m"}, "model_weights_url"),
    ({"model_weights_source": "http", "model_weights_url": "https://mirror.example/m",
      "model_weights_manifest": "http://bob:pw@mirror.example/SHA256SUMS"}, "model_weights_manifest"),
    ({"model_weights_source": "hf", "model_weights_repo_id": "org/m",
      "model_weights_endpoint": "https://alice:s3cret@hub.example"}, "model_weights_endpoint"),
])
def test_user_and_password_in_a_url_are_refused_and_never_echoed(overrides, refused_option):
    ok, msg = _evaluate(**overrides)
    assert ok is (refused_option is None)
    if refused_option:
        assert msg.startswith(refused_option + " carries user:password@"), msg
        assert "s3cret" not in msg and "pw@" not in msg and "alice" not in msg
