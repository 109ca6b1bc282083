# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The planned instance as a record (plan/instance.py): planned fields read once, hand-written entries read
from their argv as argparse would, and a planned entry whose argv changed after the plan read again.

Expected values are written out by hand from vLLM's argparse rules (the last value of a repeated flag wins,
``--flag=value``, abbreviations), not computed by the module."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import instance as ir

PLANNED_ARGV = ["vllm", "serve", "/srv/models/qwen", "--served-model-name", "qwen", "--host", "127.0.0.1",
                "--port", "8001", "--max-model-len", "32768"]


@pytest.mark.parametrize("entry, expected", [
    # the planner's shape
    (dict(name="qwen-1", port=8001, cuda_visible_devices="2,3", argv=PLANNED_ARGV),
     dict(name="qwen-1", model="/srv/models/qwen", served_model_name="qwen", host="127.0.0.1", port=8001,
          max_model_len=32768, devices="2,3", environment={})),
    # hand-written, no --port: the entry's port; no --host: vLLM's default (every address)
    (dict(name="x", port=9000, argv=["vllm", "serve", "/m", "--max-model-len=4096"]),
     dict(name="x", model="/m", served_model_name="/m", host=None, port=9000, max_model_len=4096, devices="",
          environment={})),
    # a repeated flag: argparse keeps the last; an abbreviation is the flag
    (dict(name="y", port=1, argv=["vllm", "serve", "/m", "--port", "8000", "--port=8005", "--served-model-n", "a",
                                  "--served-model-name", "b"]),
     dict(name="y", model="/m", served_model_name="b", host=None, port=8005, max_model_len=None, devices="",
          environment={})),
    # an entry's served_model_name key is not what vLLM serves under: the argv is
    (dict(name="z", served_model_name="other", argv=["vllm", "serve", "/srv/m"]),
     dict(name="z", model="/srv/m", served_model_name="/srv/m", host=None, port=None, max_model_len=None, devices="",
          environment={})),
    # no argv at all: nothing to read, the name stands in for the served name
    (dict(name="w"), dict(name="w", model=None, served_model_name="w", host=None, port=None, max_model_len=None,
                          devices="", environment={})),
])
def test_record_of_an_entry(entry, expected):
    got = ir.record(entry)
    assert dict((k, got[k]) for k in expected) == expected
    assert got["argv"] == [str(a) for a in entry.get("argv") or []]


def test_planned_entry_carries_the_fields_and_the_digest_of_its_argv():
    entry = ir.planned(dict(name="qwen-1", port=8001, argv=PLANNED_ARGV, environment={"A": "1"}))
    assert set(ir.FIELDS) <= set(entry)
    assert (entry["served_model_name"], entry["host"], entry["port"], entry["max_model_len"]) == \
        ("qwen", "127.0.0.1", 8001, 32768)
    assert len(entry["record_of"]) == 12


def test_planned_fields_are_read_not_parsed_while_the_argv_is_unchanged():
    entry = ir.planned(dict(name="qwen-1", port=8001, argv=PLANNED_ARGV))
    # A field the planner wrote is what consumers get (here changed by hand to prove the argv is not re-read).
    entry["served_model_name"] = "as-planned"
    assert ir.record(entry)["served_model_name"] == "as-planned"


@pytest.mark.parametrize("change, field, value", [
    # an inventory's combine({'argv': ...}) after the plan: the new argv wins, the old fields are stale
    ({"argv": PLANNED_ARGV[:-4] + ["--port", "8009", "--max-model-len", "1024"]}, "port", 8009),
    ({"argv": PLANNED_ARGV + ["--max-model-len", "2048"]}, "max_model_len", 2048),
    ({"argv": PLANNED_ARGV + ["--host", "0.0.0.0"]}, "host", "0.0.0.0"),
    # the entry's own keys are never taken from the record
    ({"name": "renamed"}, "name", "renamed"),
    ({"environment": {"B": "2"}}, "environment", {"B": "2"}),
    ({"cuda_visible_devices": "5"}, "devices", "5"),
])
def test_a_planned_entry_changed_after_the_plan_is_read_again(change, field, value):
    entry = ir.planned(dict(name="qwen-1", port=8001, argv=PLANNED_ARGV))
    entry.update(change)
    assert ir.record(entry)[field] == value


@pytest.mark.parametrize("host, address", [(None, "0.0.0.0"), ("::", "::"), ("127.0.0.1", "127.0.0.1")])
def test_listen_address(host, address):
    assert ir.listen_address({"host": host}) == address


@pytest.mark.parametrize("argv, given", [
    (["vllm", "serve", "/m"], False),
    (["vllm", "serve", "/m", "--shutdown-timeout", "30"], True),
    (["vllm", "serve", "/m", "--shutdown_timeout=30"], True),
    (["vllm", "serve", "/m", "--shutdown-t", "30"], True),
])
def test_gives_flag(argv, given):
    assert ir.gives_flag({"argv": argv}, "--shutdown-timeout") is given
