# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one flag matcher (cli_flags.py) and every guard over extra args that uses it (issue 43 class 2): each
prefix argparse accepts for a guarded flag (allow_abbrev: ``--hos`` is ``--host``), ``--flag=value`` and vLLM's
underscores (``--api_key``; vllm/utils/argparse_utils.py FlexibleArgumentParser.parse_args) is refused by the
vllm_profile guard (vllm_args.check_extra_args), the hand-written argv's bind check (units/settings.py), the
tuner's grid (tune/grid.py) and the router's ``router_extra_args`` (the filter guarded_flags over
cli_flags.guarded_words; tests/unit/plugins/filter/test_guarded_flags.py runs this table through the filter). Plus the one reader:
a repeated flag's last value wins, as in argparse (issue 42 item 2)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils import cli_flags

from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import passthrough_flags, vllm_args
from ansible_collections.gpufleet.vllm.plugins.module_utils.bench import targets
from ansible_collections.gpufleet.vllm.plugins.module_utils.router import workers
from ansible_collections.gpufleet.vllm.plugins.module_utils.tune import grid
from ansible_collections.gpufleet.vllm.plugins.module_utils.tune.errors import TuneError
from ansible_collections.gpufleet.vllm.plugins.module_utils.units import settings

ROUTER_GUARDED = ["--host", "--port", "--worker-urls", "--policy", "--prometheus-host", "--prometheus-port",
                  "--api-key", "--service-discovery", "--cache-threshold", "--balance-abs-threshold",
                  "--balance-rel-threshold", "--request-timeout-secs", "--log-level"]  # roles/router/vars/main.yml


def prefixes(flag):
    """Every abbreviation argparse could take for ``flag``: '--h', '--ho', '--hos', '--host'."""
    return [flag[:n] for n in range(3, len(flag) + 1)]


def spellings(flag):
    """The flag's prefixes as words, as ``--word=value`` and with vLLM's underscores."""
    out = []
    for p in prefixes(flag):
        out += [[p, "0.0.0.0"], [p + "=0.0.0.0"]]
        if "-" in p[2:]:
            out.append([p[:2] + p[2:].replace("-", "_"), "0.0.0.0"])
    return out


VLLM_CASES = [words for flag in ("--host", "--port", "--api-key") for words in spellings(flag)]
ROUTER_CASES = [(flag, words) for flag in ROUTER_GUARDED for words in spellings(flag)]


def test_argparse_itself_reads_a_prefix_as_the_flag():
    """What the guard defends against, shown on CPython's argparse with vLLM's kind of flags."""
    parser = argparse.ArgumentParser()
    for flag in ("--host", "--port", "--api-key", "--hf-token", "--max-model-len"):
        parser.add_argument(flag)
    assert parser.parse_args(["--hos", "0.0.0.0"]).host == "0.0.0.0"
    assert parser.parse_args(["--ho=0.0.0.0"]).host == "0.0.0.0"
    assert parser.parse_args(["--api-k", "K"]).api_key == "K"
    assert parser.parse_args(["--port", "1", "--port", "2"]).port == "2"  # the last one wins


@pytest.mark.parametrize("words", VLLM_CASES, ids=[" ".join(w) for w in VLLM_CASES])
def test_vllm_profile_extra_args_guard_refuses_every_prefix(words):
    errors = [f for f in vllm_args.check_extra_args(words) if f["level"] == "error"]
    assert errors, words
    assert "0.0.0.0" not in errors[0]["message"]  # the value is never echoed (it may be a key)


MULTINODE_CASES = [words for flag in ("--nnodes", "--node-rank", "--master-addr", "--master-port", "--headless")
                   for words in spellings(flag) if len(words[0].split("=")[0]) > len("--ma")]


@pytest.mark.parametrize("words", MULTINODE_CASES, ids=[" ".join(w) for w in MULTINODE_CASES])
def test_the_multinode_guard_refuses_every_prefix(words):
    _overrides, findings = passthrough_flags.passthrough({"extra_args": words})
    assert [f["code"] for f in findings] == ["multinode_flag_in_extra_args"]


@pytest.mark.parametrize("words", VLLM_CASES, ids=[" ".join(w) for w in VLLM_CASES])
def test_tune_grid_refuses_every_prefix(words):
    with pytest.raises(TuneError, match=r"tune_grid\.extra_args\[0\]"):
        grid.validate_grid({"extra_args": [words]})


@pytest.mark.parametrize("words", [w for w in VLLM_CASES if w[0].startswith(("--h", "--h_"))],
                         ids=[" ".join(w) for w in VLLM_CASES if w[0].startswith(("--h", "--h_"))])
def test_hand_written_argv_bind_check_refuses_every_prefix_of_host(words):
    argv = ["vllm", "serve", "/m", "--host", "127.0.0.1"] + words
    found = settings.bind_checks([{"name": "a", "port": 8000, "argv": argv}], {}, "key", False)
    assert found and "0.0.0.0" in found[0]


@pytest.mark.parametrize("flag, words", ROUTER_CASES, ids=[" ".join(w) for _f, w in ROUTER_CASES])
def test_router_extra_args_guard_refuses_every_prefix(flag, words):
    found = cli_flags.guarded_words(words, ROUTER_GUARDED)
    prefix = words[0].split("=", 1)[0].replace("_", "-")
    # a prefix two guarded flags share (--prometheus-) is refused as either of them
    assert len(found) == 1 and found[0][2].startswith(prefix) and (found[0][2] == flag or flag.startswith(prefix))


@pytest.mark.parametrize("words", [["--max-num-seqs", "8"], ["--enforce-eager"], ["--block-size=32"], ["-O3"],
                                   ["--kv-cache-memory", "1G"], ["--tokenizer", "/srv/seed"], ["--hostname-x"]])
def test_other_flags_pass_every_guard(words):
    assert [f for f in vllm_args.check_extra_args(words) if f["level"] == "error"] == []
    grid.validate_grid({"extra_args": [words]}) if words[0] != "--kv-cache-memory" else None
    assert cli_flags.guarded_words(words, ROUTER_GUARDED) == []


def test_a_known_flag_is_not_taken_for_a_prefix():
    assert cli_flags.guarded_flag("--ho", ["--host"], known=["--ho"]) is None
    assert cli_flags.guarded_flag("--ho", ["--host"]) == "--host"


ARGV = ["vllm", "serve", "/m", "--port", "8001", "--served-model-name", "first", "--max-model-len", "1024",
        "--port=8002", "--served-model-name", "second", "--max-model-len", "2048"]


def test_a_repeated_flag_reads_as_argparse_reads_it_everywhere():
    """Issue 42 item 2: the unit writer, the router's worker list and the bench targets read the same value."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--port")
    parser.add_argument("--served-model-name")
    parser.add_argument("--max-model-len")
    ns, _rest = parser.parse_known_args(ARGV[3:])
    assert (ns.port, ns.served_model_name, ns.max_model_len) == ("8002", "second", "2048")
    assert cli_flags.flag_value(ARGV, "--port") == "8002"
    instance = {"name": "a", "port": 8002, "argv": ARGV}
    facts = targets.instance_facts(instance)
    assert (facts["model"], facts["max_model_len"]) == ("second", 2048)
    assert workers.served_model_name(instance) == "second"
    assert workers.instance_url(instance, "h", "h").endswith(":8002")


@pytest.mark.parametrize("argv, expected", [
    (["vllm", "serve", "/m", "--port", "8001", "--enforce-eager"],
     {"": ["vllm", "serve", "/m"], "--port": "8001", "--enforce-eager": True}),
    # the last of a repeated flag, --f=v, vLLM's underscores, a negative number as a value
    (["vllm", "serve", "/m", "--port=8000", "--port", "8002", "--max_model_len", "4096", "--seed", "-1"],
     {"": ["vllm", "serve", "/m"], "--port": "8002", "--max-model-len": "4096", "--seed": "-1"}),
    # a bare flag before another flag; an abbreviation stays as written (the parser's list resolves it)
    (["--headless", "--hos", "0.0.0.0"], {"": [], "--headless": True, "--hos": "0.0.0.0"}),
])
def test_flag_map(argv, expected):
    assert cli_flags.flag_map(argv) == expected


# The planner and the hand-written instance check read values through the one reader: an abbreviation argparse
# accepts is the flag (vLLM would run with it), and the last of a repeated flag is what argparse keeps.
@pytest.mark.parametrize("extra_args, flag, expected", [
    (["--max-num-seqs", "8"], "--max-num-seqs", ["8"]),
    (["--max-num-seq", "8"], "--max-num-seqs", ["8"]),
    (["--max_num_seqs=8"], "--max-num-seqs", ["8"]),
    (["--max-num-seqs", "4", "--max-num-seqs=16"], "--max-num-seqs", ["4", "16"]),
    (["--max-num-batched-tokens", "4096"], "--max-num-seqs", []),
    (["--limit-mm-per-prom", '{"image": 0}'], "--limit-mm-per-prompt", ['{"image": 0}']),
])
def test_the_planners_flag_reader_is_the_one_reader(extra_args, flag, expected):
    assert cli_flags.flag_values(extra_args, flag) == expected
    assert not hasattr(passthrough_flags, "flag_values")  # no second reader beside it
