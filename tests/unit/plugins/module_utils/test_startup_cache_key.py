# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""startup.cache_key: the inputs of a start read from real rendered units, what enters vLLM's key, the verdict.

The units are tests/fixtures/units/*.service (rendered by the role's template, PROVENANCE.md there) and the H200
run's unit (tests/fixtures/gpu-acceptance/graphs-0.26.0/cases/*.service). The rules under test are vLLM 0.32.0's
(vllm/envs.py compile_factors, vllm/config/*.py compute_hash), listed in cache_key's docstring.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.startup import boot_log, cache_key

HERE = os.path.dirname(__file__)
FIX = os.path.join(HERE, "..", "..", "..", "fixtures")


def unit(name):
    with open(os.path.join(FIX, name)) as handle:
        return cache_key.unit_inputs(handle.read())


def start_inputs(name, **change):
    argv, env, venv, rank = unit(name)
    env = dict(env, **change.pop("env", {}))
    values = dict(vllm_version="0.33.0", argv=argv, environment=env, venv=venv, cache_dir=env.get("XDG_CACHE_HOME"),
                  node_rank=rank)
    values.update(change)
    return cache_key.inputs(**values)


def test_unit_inputs_cut_numactl_and_find_the_venv():
    argv, env, venv, rank = unit("units/cpu-single.service")
    assert argv[:3] == ["/opt/vllm/venvs/0.33.0-f08601881163/bin/vllm", "serve", "/srv/models/fake"]
    assert venv == "/opt/vllm/venvs/0.33.0-f08601881163"
    assert env["VLLM_CACHE_ROOT"] == "/var/cache/vllm/vllm"
    assert rank is None
    assert unit("units/cpu-group-member.service")[3] == "1"


# (what changes between two starts of cpu-single.service, [(input, enters_key)]). Every expected value is
# written by hand from vLLM 0.32.0's compute_hash functions (cache_key's docstring), never read from cache_key:
# "argv_set" replaces the flag's value when the unit has it (--port is 8101 there) and appends it otherwise.
KEY_ROWS = [
    ({"argv_set": ["--max-model-len", "1024"]}, [("argv --max-model-len", True)]),
    ({"argv_set": ["--port", "8102"]}, [("argv --port", False)]),
    ({"argv_set": ["--served-model-name", "other"]}, [("argv --served-model-name", False)]),
    ({"argv_set": ["--gpu-memory-utilization", "0.5"]}, [("argv --gpu-memory-utilization", False)]),
    ({"argv_set": ["--dtype", "float32"]}, [("argv --dtype", True)]),
    ({"env": {"VLLM_HOST_IP": "10.0.0.9"}}, [("env VLLM_HOST_IP", False)]),
    ({"env": {"VLLM_CPU_KVCACHE_SPACE": "8"}}, [("env VLLM_CPU_KVCACHE_SPACE", False)]),
    ({"env": {"VLLM_CPU_NUM_OF_RESERVED_CPU": "2"}}, [("env VLLM_CPU_NUM_OF_RESERVED_CPU", True)]),
    ({"env": {"VLLM_CACHE_ROOT": "/srv/c/vllm"}}, [("env VLLM_CACHE_ROOT", False)]),
    ({"env": {"FAKE_VLLM_MODE": "slow"}}, [("env FAKE_VLLM_MODE", False)]),
    ({"vllm_version": "0.33.1"}, [("vllm_version", True)]),
    ({"venv": "/opt/vllm/venvs/0.33.0-other"}, [("venv", True)]),
]


def _differences(change):
    """[(input, enters_key)] between cpu-single.service and the same start with ``change``."""
    before = start_inputs("units/cpu-single.service")
    change = dict(change)
    flag_value = change.pop("argv_set", None)
    if flag_value:
        argv = list(before["argv"])
        if flag_value[0] in argv:
            argv[argv.index(flag_value[0]) + 1] = flag_value[1]
        else:
            argv += flag_value
        change["argv"] = argv
    after = start_inputs("units/cpu-single.service", **change)
    return [(d["input"], d["enters_key"]) for d in cache_key.differences(before, after) if d["input"] != "cache_dir"]


@pytest.mark.parametrize("change, expected", KEY_ROWS)
def test_differences_name_what_enters_the_key(change, expected):
    assert _differences(change) == expected


def test_the_unit_really_has_the_port_the_row_changes():
    argv = start_inputs("units/cpu-single.service")["argv"]
    assert argv[argv.index("--port") + 1] == "8101"


@pytest.mark.parametrize("planted, row", [
    # --port planted INTO the key: the --port row must fail
    (lambda flags: flags - {"--port"}, 1),
    # --max-model-len planted OUT of the key: the --max-model-len row must fail
    (lambda flags: flags | {"--max-model-len"}, 0),
])
def test_a_planted_change_of_the_key_fails_the_table(monkeypatch, planted, row):
    change, expected = KEY_ROWS[row]
    assert _differences(change) == expected
    monkeypatch.setattr(cache_key, "ARGV_NOT_IN_KEY", planted(cache_key.ARGV_NOT_IN_KEY))
    assert _differences(change) != expected


def test_fingerprint_ignores_host_address_and_cache_folder_but_not_the_model():
    base = start_inputs("units/cpu-group-member.service")
    moved = start_inputs("units/cpu-group-member.service", env={"VLLM_HOST_IP": "10.89.0.4",
                                                                "VLLM_CACHE_ROOT": "/srv/other/vllm"},
                         cache_dir="/srv/other")
    other_model = dict(base, argv=[a.replace("/srv/models/g", "/srv/models/h") for a in base["argv"]])
    assert cache_key.fingerprint(base) == cache_key.fingerprint(moved)
    assert cache_key.fingerprint(base) != cache_key.fingerprint(other_model)


def read_log(name):
    with open(os.path.join(FIX, "startup", "cpu-0.32.0", name)) as handle:
        return boot_log.parse(handle.read(), year=2026)


@pytest.mark.parametrize("log, previous_log, diffs, expect_hit, status, expected, words", [
    ("cold.log", None, [], False, "miss", True, "first start recorded here"),
    ("warm.log", "cold.log", [], False, "unloadable", False, "could not load"),
    ("copied.log", "warm.log", [], True, "unloadable", False, "the pre-warmed copy"),
    ("cold.log", "warm.log", [{"input": "argv --max-model-len", "before": "2048", "after": "1024",
                               "enters_key": True, "note": ""}], False, "miss", True, "inputs of the key changed"),
    ("cold.log", "warm.log", [], False, "miss", False, "same key"),
    ("cold.log", "warm.log", [{"input": "cache_dir", "before": "/a", "after": "/b", "enters_key": False,
                               "note": ""}], False, "miss", True, "the cache moved"),
    ("cold.log", "warm.log", [], True, "miss", False, "pre-warmed copy"),
])
def test_judge(log, previous_log, diffs, expect_hit, status, expected, words):
    parsed = read_log(log)
    previous = {"compile": read_log(previous_log)["compile"]} if previous_log else None
    verdict = cache_key.judge(parsed["compile_cache"], parsed["compile"]["keys"], previous, diffs,
                              expect_hit=expect_hit, copied_from="h1")
    assert verdict["status"] == status
    assert verdict["expected"] is expected
    assert words in ((verdict["finding"] or "") + " " + (verdict["cause"] or ""))


def test_a_changed_key_with_unchanged_inputs_is_named():
    parsed = read_log("cold.log")
    previous = {"compile": {"keys": ["0123456789"]}}
    verdict = cache_key.judge(parsed["compile_cache"], parsed["compile"]["keys"], previous, [])
    assert verdict["key_changed"] and not verdict["expected"]
    assert "the key changed (0123456789 -> 8a9193705a" in verdict["finding"]


def test_secrets_are_not_recorded():
    recorded = cache_key.inputs("0.32.0", ["/v/bin/vllm"], {"VLLM_API_KEY": "s3cret", "HF_TOKEN": "t", "A": "1"},
                                "/v", "/c")
    assert recorded["environment"] == {"A": "1"}


@pytest.mark.parametrize("version, enters", [("0.26.0", True), ("0.31.9", True), ("0.32.0", False),
                                             ("0.32.0+cpu", False), ("0.33.0", False)])
def test_the_cache_folder_enters_the_key_before_0_32(version, enters):
    before = start_inputs("units/cpu-single.service", vllm_version=version)
    after = start_inputs("units/cpu-single.service", vllm_version=version, env={"XDG_CACHE_HOME": "/srv/c"},
                         cache_dir="/srv/c")
    got = [d["enters_key"] for d in cache_key.differences(before, after) if d["input"] == "env XDG_CACHE_HOME"]
    assert got == [enters]
    assert (cache_key.fingerprint(before) != cache_key.fingerprint(after)) is enters


H200 = os.path.join(FIX, "startup", "restart-timing-h200-0.26.0")


def h200(name):
    with open(os.path.join(H200, name)) as handle:
        return boot_log.parse(handle.read(), year=2026)


def test_h200_warm_start_hit_and_copied_start_got_another_key():
    """tests/gpu/restart_timing.py on an H200, vLLM 0.26.0 (README there). Keys read from the logs' lines
    `Using cache directory: .../torch_compile_cache/<key>/...` and `.../torch_aot_compile/<key>/...`."""
    cold, warm, copied = h200("dense-cold.log"), h200("dense-warm.log"), h200("dense-copied.log")
    assert cold["compile_cache"]["status"] == "miss"
    assert warm["compile_cache"]["status"] == "hit"  # "Directly load the compiled graph(s) ..." and "... AOT ..."
    assert [k[:10] for k in warm["compile"]["keys"]] == [k[:10] for k in cold["compile"]["keys"]] == [
        "c358ef1909", "35b7ea87cf"]
    assert [k[:10] for k in copied["compile"]["keys"]] == ["0769cd86fd", "2801dd6dd6"]
    assert copied["compile_cache"]["status"] == "miss"
    # what the start report says of that copy on 0.26.0: the moved folder entered the key, an expected miss
    argv = ["/v/bin/vllm", "serve", "/m"]
    env_a = {"XDG_CACHE_HOME": "/c/A", "HOME": "/c/A/home", "VLLM_HOST_IP": "127.0.0.1"}
    env_b = {"XDG_CACHE_HOME": "/c/B", "HOME": "/c/B/home", "VLLM_HOST_IP": "127.0.0.2"}
    before = cache_key.inputs("0.26.0", argv, env_a, "/v", "/c/A")
    after = cache_key.inputs("0.26.0", argv, env_b, "/v", "/c/B")
    diffs = cache_key.differences(before, after)
    assert dict((d["input"], d["enters_key"]) for d in diffs) == {
        "env HOME": True, "env VLLM_HOST_IP": False, "env XDG_CACHE_HOME": True, "cache_dir": False}
    verdict = cache_key.judge(copied["compile_cache"], copied["compile"]["keys"], {"compile": cold["compile"]}, diffs,
                              expect_hit=True)
    assert verdict["expected"] and "env XDG_CACHE_HOME /c/A -> /c/B" in verdict["cause"]


@pytest.mark.parametrize("version, in_key", [
    ("0.31.1", True), ("0.32.0", False), ("0.32.0+cpu", False), ("0.34.0", False),
    # a pre-release of 0.32.0 is before it, as releases.parse_version (the one release parser) orders it
    ("0.32.0rc1", True), ("0.32.0rc1.dev16+g7a1eb8ac2", True), ("v0.33.0", False),
])
def test_location_in_key_reads_the_release_with_releases_parser(version, in_key):
    assert cache_key.location_in_key(version) is in_key
