# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Property-based tests (hypothesis) of model_weights' argument handling and pure core with random
and malformed inputs: wrong types, ranges, unicode, newlines, huge numbers, malformed manifests,
record files and sha256sum lines. Properties: never an unhandled exception (nor a result the error
boundary labels as a bug); every failure message names the offending option or file."""
from __future__ import annotations

import os
import shutil
import tempfile

from hypothesis import HealthCheck, given, settings, strategies as st

from ansible_collections.gpufleet.vllm.plugins.module_utils.weights import manifest, record, snapshot, sources
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.errors import WeightsError
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights import request
from ansible_collections.gpufleet.vllm.plugins.modules import model_weights
from ansible_collections.gpufleet.vllm.tests.unit.plugins.modules.module_harness import run_module

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
OPTIONS = sorted(model_weights.ARGUMENT_SPEC)
BUG = "This is a bug"

texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
nasty = st.one_of(texts, st.sampled_from(["", "\n", "0644\n", "a\x00b", "../../etc", "\u202e644", "６４４", " "]))
values = st.one_of(nasty, st.integers(min_value=-(2 ** 70), max_value=2 ** 70), st.floats(allow_nan=True),
                   st.booleans(), st.none(), st.lists(nasty, max_size=3), st.dictionaries(texts, texts, max_size=2))


def _names_something(msg, args, files=()):
    """The message names one of the given options, a value we passed, or a file."""
    names = [o for o in OPTIONS if o in msg]
    return bool(names) or any(str(v) in msg for v in args.values() if v not in (None, "", True, False)) or any(
        f in msg for f in files)


@SETTINGS
@given(args=st.dictionaries(st.sampled_from(OPTIONS), values, max_size=5))
def test_module_arguments_never_crash_and_name_the_option(monkeypatch, args):
    work = tempfile.mkdtemp(prefix="mw-prop-")
    try:
        src = os.path.join(work, "src")
        os.mkdir(src)
        with open(os.path.join(src, "config.json"), "wb") as handle:
            handle.write(b"{}")
        base = {"dest": os.path.join(work, "d"), "source": "local", "path": src}
        if "dest" in args and isinstance(args["dest"], str):
            args["dest"] = os.path.join(work, "d", args["dest"].replace("\x00", "").lstrip("/")[:30] or "x")
        full = dict(base, **args)
        res = run_module(monkeypatch, model_weights.main, full, check_mode=True)
        if res.get("failed"):
            msg = res["msg"]
            assert BUG not in msg, msg
            assert _names_something(msg, full, [src, work]), (msg, full)
    finally:
        shutil.rmtree(work, ignore_errors=True)


@SETTINGS
@given(mode=values)
def test_parse_mode_total(mode):
    try:
        parsed = request.parse_mode(mode)
    except WeightsError as exc:
        assert exc.message.startswith("mode ")
    else:
        assert isinstance(mode, str) and 0 <= parsed <= 0o7777


sha = st.text("0123456789abcdefABCDEF", min_size=0, max_size=70)
line = st.one_of(st.builds(lambda d, sep, p: d + sep + p, sha, st.sampled_from(["  ", " *", " ", "\t", ""]), nasty),
                 nasty)


@SETTINGS
@given(lines=st.lists(line, max_size=6), eol=st.sampled_from(["\n", "\r\n", "\r", ""]))
def test_malformed_manifests_fail_with_the_manifest_named(lines, eol):
    text = eol.join(lines)
    try:
        entries = manifest.parse_manifest(text, where="manifest /x/SUMS")
    except WeightsError as exc:
        assert "manifest /x/SUMS" in exc.message, exc.message
    else:
        for path, digest in entries:
            assert manifest.check_relpath(path) == path and len(digest) == 64


@SETTINGS
@given(rel=nasty)
def test_relpaths_stay_inside_or_fail_naming_the_path(rel):
    try:
        out = manifest.check_relpath(rel, "hub file list")
    except WeightsError as exc:
        assert "hub file list" in exc.message
    else:
        assert not out.startswith("/") and ".." not in out.split("/")


json_like = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), texts),
                         lambda kids: st.one_of(st.lists(kids, max_size=3), st.dictionaries(texts, kids, max_size=3)),
                         max_leaves=8)


@SETTINGS
@given(data=st.one_of(json_like, st.fixed_dictionaries({"format": st.just(1), "files": st.dictionaries(
    texts, json_like, max_size=3)})), raw=st.binary(max_size=40), use_raw=st.booleans())
def test_damaged_record_files_are_rehashed_with_a_warning_naming_the_record(data, raw, use_raw):
    import json
    work = tempfile.mkdtemp(prefix="mw-rec-")
    try:
        src = os.path.join(work, "src")
        os.mkdir(src)
        with open(os.path.join(src, "a.bin"), "wb") as handle:
            handle.write(b"abc")
        dest = os.path.join(work, "d")
        source = sources.LocalSource(None, src, None, None, None, 1)
        snapshot.sync(dest, source)
        path = os.path.join(dest, ".gpufleet-weights", "record.json")
        with open(path, "wb") as handle:
            handle.write(raw if use_raw else json.dumps(data).encode())
        parsed, problem = record.parse_record(raw.decode("utf-8", "replace") if use_raw else json.dumps(data))
        assert isinstance(parsed.get("files"), dict)
        res = snapshot.sync(dest, sources.LocalSource(None, src, None, None, None, 1))
        assert res["file_count"] == 1
        if problem:
            assert any("record.json" in w for w in res["warnings"]), res["warnings"]
    finally:
        shutil.rmtree(work, ignore_errors=True)
