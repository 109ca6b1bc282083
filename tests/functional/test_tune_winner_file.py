# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 43 class 3: the winner host_vars file playbooks/tune.yml writes holds texts a host reported (the name of
the venv it serves); loaded as Ansible loads an inventory's host_vars file (trusted as templates) and templated,
each comes back as the text it was - a host that names its venv ``{{ 7 * 7 }}`` gets that text, not 49."""

from __future__ import absolute_import, division, print_function

import sys

import pytest

from weights_support import collections_path

sys.path.insert(0, collections_path())
from ansible_collections.gpufleet.vllm.plugins.module_utils.tune import winner as W  # noqa: E402

HOST_TEXTS = ["{{ 7 * 7 }}", "{% if true %}x{% endif %}", "{{ lookup('env', 'HOME') }}", "{# c #}"]


def _as_host_vars(tmp_path, text):
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar
    path = tmp_path / "vllm_tuned.yml"
    path.write_text(text)
    loader = DataLoader()
    try:
        data = loader.load_from_file(str(path), trusted_as_template=True)
    except TypeError:  # ansible-core < 2.19: every loaded text is a template unless !unsafe
        data = loader.load_from_file(str(path))
    return Templar(loader=loader).template(data)


@pytest.mark.parametrize("host_text", HOST_TEXTS)
def test_host_reported_text_stays_text_in_the_winner_file(tmp_path, host_text):
    on = dict(vllm_version=host_text, model="m", gpu_type=host_text, plan_hash="p", inputs_hash="h")
    overrides = {"extra_args": ["--served-model-name", host_text], "kv_cache_dtype": host_text,
                 "layout": {"instances": 2, "name": host_text}}
    loaded = _as_host_vars(tmp_path, W.vars_text("vllm_tuned", {"winner": host_text, "apply": True}, overrides, on))
    tuned = loaded["vllm_tuned"]
    assert tuned["candidate"] == host_text
    assert tuned["measured_on"]["vllm_version"] == host_text and tuned["measured_on"]["gpu_type"] == host_text
    assert tuned["profile_overrides"] == overrides
