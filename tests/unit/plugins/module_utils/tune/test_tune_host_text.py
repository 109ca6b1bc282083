# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 43 classes 3 and 4: what a host reports is never templated on the controller (the winner file's texts
that could be templates are !unsafe data; tests/functional/test_tune_winner_file.py loads the file as Ansible loads
an inventory's host_vars and templates it), and the tune's pending mark is restored only while the host still
serves the tune's release and units (a host that moved on is never rolled back)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError
from ansible_collections.gpufleet.vllm.plugins.module_utils.tune import pending
from ansible_collections.gpufleet.vllm.plugins.module_utils.tune import winner as W


def _load(text):
    """PyYAML's safe loader with Ansible's ``!unsafe`` tag (its value is the scalar's text, as Ansible keeps it)."""
    yaml = pytest.importorskip("yaml")

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!unsafe", lambda loader, node: loader.construct_scalar(node))
    return yaml.load(text, Loader=Loader)  # nosec - a SafeLoader


@pytest.mark.parametrize("host_text", ["{{ 7 * 7 }}", "{% if true %}x{% endif %}", "{{ lookup('pipe', 'id') }}",
                                       "{# c #}", "a{b"])
def test_every_text_that_could_be_a_template_is_tagged_unsafe(host_text):
    on = dict(vllm_version=host_text, model="m", gpu_type="cpu", plan_hash="p", inputs_hash="h")
    overrides = {"extra_args": ["--served-model-name", host_text], "layout": {"instances": 2, "name": host_text}}
    text = W.vars_text("vllm_tuned", {"winner": host_text, "apply": True}, overrides, on)
    assert text.count("!unsafe ") == 4   # candidate, vllm_version, the extra_args item, the layout's name
    tuned = _load(text)["vllm_tuned"]
    assert tuned["candidate"] == host_text and tuned["measured_on"] == on and tuned["profile_overrides"] == overrides


def test_plain_values_keep_their_types():
    """Ansible resolves an !unsafe scalar as if plain ("4" would load as 4): plain texts are not tagged."""
    on = dict(vllm_version="0.32.0", model="m", gpu_type="cpu", plan_hash="p", inputs_hash="h")
    overrides = {"extra_args": ["--max-num-seqs", "4", "true", "null"], "max_num_seqs": 4, "enable_prefix_caching": False}
    text = W.vars_text("vllm_tuned", {"winner": "c1", "apply": True}, overrides, on)
    assert "!unsafe" not in text
    loaded = _load(text)["vllm_tuned"]
    assert loaded["profile_overrides"] == overrides and loaded["measured_on"] == on


def _files(**units):
    return [{"path": "/etc/systemd/system/%s" % name, "checksum": digest} for name, digest in units.items()]


SAVED = _files(**{"vllm-a.service": "s1"})
CANDIDATE = _files(**{"vllm-a.service": "c1"})
LATER = _files(**{"vllm-a.service": "r1"})
V32, V33 = "/opt/vllm/venvs/0.32.0-0123456789ab", "/opt/vllm/venvs/0.33.0-ba9876543210"


def _mark(launched=None):
    text = pending.mark(V32, SAVED)
    return pending.mark("", launched, text) if launched is not None else text


@pytest.mark.parametrize("text, venv, live, restore, why", [
    (_mark(CANDIDATE), V32, CANDIDATE, True, "still live"),
    (_mark(), V32, CANDIDATE, True, "still live"),                     # interrupted during the first launch
    (_mark(CANDIDATE), V33, LATER, False, "moved on .* vLLM 0.33.0, the saved units 0.32.0"),
    (_mark(), V33, LATER, False, "moved on"),
    (_mark(CANDIDATE), V32, LATER, False, "changed since"),            # a later deployment of the same release
    (_mark(CANDIDATE), V32, SAVED, False, "serves the saved units already"),
    ("/opt/vllm/venvs/0.32.0-0123456789ab\n", V33, LATER, False, "records no release"),  # the old mark
    ("[1]", V32, CANDIDATE, False, "records no release"),
])
def test_a_pending_mark_is_restored_only_in_its_own_context(text, venv, live, restore, why):
    got = pending.check(text, venv, live)
    assert got["restore"] is restore
    assert pytest.importorskip("re").search(why, got["reason"]), got["reason"]
    if restore:
        assert got["venv"] == V32


def test_the_mark_records_what_it_belongs_to():
    doc = json.loads(_mark(CANDIDATE))
    assert doc["release"] == "0.32.0" and doc["venv"] == V32
    assert doc["saved"] == {"vllm-a.service": "s1"} and doc["launched"] == {"vllm-a.service": "c1"}


def test_a_damaged_mark_is_an_error_naming_it():
    with pytest.raises(UserError, match="pending mark"):
        pending.mark("", CANDIDATE, "not json")
