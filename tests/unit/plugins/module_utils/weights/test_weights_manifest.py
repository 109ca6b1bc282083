# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.errors import WeightsError
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.manifest import (
    check_relpath, decode_manifest, parse_manifest, render_manifest,
)

A = "a" * 64
B = "b" * 64


@pytest.mark.parametrize("text, expected", [
    (A + "  config.json\n", [("config.json", A)]),
    (A + " *model.safetensors\n", [("model.safetensors", A)]),                      # binary mode
    ("# comment\n\n" + A + "  x\r\n" + B + "  d/y\n", [("x", A), ("d/y", B)]),        # CRLF, comments
    (A.upper() + "  up\n", [("up", A)]),                                              # upper-case hex
    (A + "  name with  spaces\n", [("name with  spaces", A)]),
    ("\\" + A + "  back\\\\slash\n", [("back\\slash", A)]),                            # sha256sum escaping
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
    # Issue 27: names the module's own SHA256SUMS could not read back, or that break a line elsewhere.
    ("\\" + A + "  back\\nnl\n", "holds the control character or line separator '\\n'"),
    (A + "  tab\there\n", "holds the control character or line separator '\\t'"),
    (A + "  a\u2028b\n", "holds the control character or line separator '\\u2028'"),
    (A + "  a\x85b\n", "holds the control character or line separator '\\x85'"),
    (A + "  esc\x1b[31m\n", "holds the control character or line separator '\\x1b'"),
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


def test_a_manifest_that_is_not_utf8_is_a_clear_error():
    """Issue 27 LOW: a Latin-1 manifest was a UnicodeDecodeError traceback. Byte 69 = 64 hex + 2 spaces + "caf"."""
    with pytest.raises(WeightsError) as err:
        decode_manifest((A + "  caf\xe9.json\n").encode("latin-1"), "manifest /srv/SUMS")
    assert err.value.message.startswith("manifest /srv/SUMS is not UTF-8 text (byte 69 is 0xe9)")


def test_a_name_with_a_line_separator_cannot_be_rendered_into_an_unreadable_manifest():
    """Before: render_manifest wrote 'a\\u2028b' raw and parse_manifest (splitlines) cut the line in two."""
    with pytest.raises(WeightsError):
        check_relpath("a\u2028b")
    assert parse_manifest(render_manifest([("a b", A)])) == [("a b", A)]
