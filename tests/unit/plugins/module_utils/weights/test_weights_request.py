# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""weights.request, table-driven: the option checks, the token's binding and the source each request builds."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights import request, sources

BASE = dict(dest="/srv/models/m", source="hf", repo_id="Qwen/Qwen3-0.6B", revision="main", url=None, manifest=None,
            path=None, follow_links=False, verify="cached", workers=4, allow_patterns=None, ignore_patterns=None,
            token=None, token_over_http=False, endpoint=None, owner=None, group=None, mode="0644")


def params(**changes):
    out = dict(BASE)
    out.update(changes)
    return out


REFUSED = [
    # changes, the option named, words of the message
    (dict(workers=0), "workers", "workers must be between 1 and 256 (got 0)"),
    (dict(workers=257), "workers", "workers must be between 1 and 256 (got 257)"),
    (dict(revision="main\n"), "revision", "revision must not contain a newline or NUL character"),
    (dict(endpoint="https://user:pw@hub.example"), "endpoint", "carries user:password@"),
    (dict(allow_patterns=[""]), "allow_patterns", "is not a usable pattern"),
    (dict(dest="/usr"), "dest", "dest /usr is a system folder"),
    (dict(dest="/usr/lib"), "dest", "inside the system folder /usr"),
    (dict(dest="/etc/models"), "dest", "inside the system folder /etc"),
    (dict(repo_id=None), "repo_id", "repo_id is required with source: hf (it is empty or null)"),
    (dict(source="http", url="ftp://mirror/x"), "url", "must start with http:// or https://"),
    (dict(source="local"), "path", "path is required with source: local"),
]


@pytest.mark.parametrize("changes,option,words", REFUSED)
def test_check_params_refusals_name_the_option(changes, option, words):
    with pytest.raises(UserError) as info:
        request.check_params(params(**changes))
    assert info.value.details == {"option": option} and words in info.value.message


TOKENS = [
    # changes, the token sent (None: withheld), warnings
    (dict(token="hf_x"), "hf_x", 0),
    (dict(token="hf_x", endpoint="http://hub.lan"), None, 1),
    (dict(token="hf_x", endpoint="http://hub.lan", token_over_http=True), "hf_x", 0),
    (dict(token="hf_x", source="http", url="https://mirror/x"), None, 0),
    (dict(), None, 0),
]


@pytest.mark.parametrize("changes,sent,warned", TOKENS)
def test_hub_token_binding(changes, sent, warned, monkeypatch):
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    warnings = []
    assert request.hub_token(params(**changes), warnings) == sent
    assert len(warnings) == warned


def test_build_source_local(tmp_path):
    """A local source is built on the path, with the workers and link policy of the request."""
    (tmp_path / "config.json").write_text("{}")
    client = object()   # test stand-in: a local source sends nothing
    source = request.build_source(params(source="local", path=str(tmp_path), follow_links=True,
                                         dest=str(tmp_path / "dest")), client)
    assert isinstance(source, sources.LocalSource) and source.root == str(tmp_path) and source.follow_links is True
