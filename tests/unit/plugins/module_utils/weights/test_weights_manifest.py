# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.errors import WeightsError
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.manifest import (
    check_relpath, parse_manifest, render_manifest,
)

A = "a" * 64
B = "b" * 64


@pytest.mark.parametrize("text, expected", [
    (A + "  config.json\n", [("config.json", A)]),
    (A + " *model.safetensors\n", [("model.safetensors", A)]),                      # binary mode
    ("# comment\n\n" + A + "  x\r\n" + B + "  d/y\n", [("x", A), ("d/y", B)]),        # CRLF, comments
    (A.upper() + "  up\n", [("up", A)]),                                              # upper-case hex
    (A + "  name with  spaces\n", [("name with  spaces", A)]),
    ("\\" + A + "  back\\\\slash\\nnl\n", [("back\\slash\nnl", A)]),                  # sha256sum escaping
    (A + "  ./d/../d/z\n", [("d/z", A)]),                                             # normalised
])
def test_parse_manifest_accepts(text, expected):
    assert parse_manifest(text) == expected


@pytest.mark.parametrize("text, fragment", [
    ("", "lists no files"),
    ("# only a comment\n", "lists no files"),
    (A + " config.json\n", "line 1 is not in sha256sum format"),
    ("z" * 64 + "  x\n", "is not a sha256 hex digest"),
    (A[:63] + "  x\n", "not in sha256sum format"),
    (A + "  /etc/passwd\n", "not a relative path"),
    (A + "  ../up\n", "leaves the snapshot directory"),
    (A + "  a/../../up\n", "leaves the snapshot directory"),
    (A + "  .gpufleet-weights/record.json\n", "module's own state"),
    (A + "  x\n" + B + "  ./x\n", "line 2: x is listed twice"),
])
def test_parse_manifest_rejects(text, fragment):
    with pytest.raises(WeightsError) as err:
        parse_manifest(text, where="m")
    assert fragment in err.value.message


def test_render_roundtrip_sorted_and_escaped():
    entries = [("z.bin", B), ("a/b.json", A), ("odd\\name", A)]
    text = render_manifest(entries)
    assert text.splitlines()[0] == A + "  a/b.json"
    assert "\\" + A + "  odd\\\\name" in text.splitlines()
    assert sorted(parse_manifest(text)) == sorted(entries)


@pytest.mark.parametrize("path, ok", [("a", True), ("a/b/c", True), ("", False), (".", False), ("a\0b", False)])
def test_check_relpath(path, ok):
    if ok:
        assert check_relpath(path) == path
    else:
        with pytest.raises(WeightsError):
            check_relpath(path)
