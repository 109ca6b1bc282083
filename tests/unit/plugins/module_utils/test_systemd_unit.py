# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import json

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.units.systemd_unit import (
    SystemdQuoteError,
    parse_environment,
    parse_exec_line,
    quote_environment,
    quote_exec_argv,
    quote_word,
)

YARN = json.dumps(
    {
        "rope_parameters": {
            "rope_type": "yarn",
            "factor": 4.0,
            "original_max_position_embeddings": 32768,
            "rope_theta": 1000000,
        },
        "max_position_embeddings": 131072,
    },
    separators=(",", ":"),
)

WORDS = [
    # (argument, expected rendering in ExecStart=)
    ("serve", "serve"),
    ("--max-model-len", "--max-model-len"),
    ("/srv/models/Qwen3-32B", "/srv/models/Qwen3-32B"),
    ("0.92", "0.92"),
    ("", '""'),
    ("two words", '"two words"'),
    ("50%", '"50%%"'),
    ("%n", '"%%n"'),
    ("$HOME", '"$$HOME"'),
    ("${X}", '"$${X}"'),
    ('{"cudagraph_mode":"PIECEWISE"}', '"{\\"cudagraph_mode\\":\\"PIECEWISE\\"}"'),
    ("back\\slash", '"back\\\\slash"'),
    ("line\nbreak", '"line\\nbreak"'),
    ("tab\there", '"tab\\there"'),
    ("bell\x07", '"bell\\a"'),
    ("esc\x1b", '"esc\\x1b"'),
    (";", '";"'),
    ("it's", '"it\'s"'),
    ("ünïcode", '"ünïcode"'),
]


@pytest.mark.parametrize("arg, rendered", WORDS)
def test_quote_word(arg, rendered):
    assert quote_word(arg) == rendered


@pytest.mark.parametrize("arg, rendered", WORDS)
def test_every_word_round_trips(arg, rendered):
    assert parse_exec_line("/bin/true " + rendered) == ["/bin/true", arg]


ARGVS = [
    ["/opt/vllm/venvs/0.33.0-abc/bin/vllm", "serve", "/srv/models/q"],
    [
        "/usr/bin/numactl",
        "--cpunodebind=1",
        "--membind=1",
        "--",
        "/opt/vllm/venvs/0.33.0-abc/bin/vllm",
        "serve",
        "/srv/models/Qwen3-32B",
        "--served-model-name",
        "qwen3-32b",
        "--hf-overrides",
        YARN,
        "--kv-transfer-config",
        '{"kv_connector":"OffloadingConnector","kv_role":"kv_both",'
        '"kv_connector_extra_config":{"cpu_bytes_to_use":214748364800}}',
        "--speculative-config",
        '{"method":"mtp","num_speculative_tokens":3}',
        "--max-model-len",
        "128K",
        "--chat-template",
        "/etc/vllm/template with space.jinja",
    ],
    ["/opt/my dir/bin/vllm", "serve", "a;b", ";", "100%", "$$", "\\", '"'],
]


@pytest.mark.parametrize("argv", ARGVS)
def test_argv_round_trips(argv):
    line = quote_exec_argv(argv)
    assert "\n" not in line
    assert parse_exec_line(line) == argv


def test_json_flag_rendering_is_readable():
    line = quote_exec_argv(["/x/vllm", "--speculative-config", '{"method":"mtp","num_speculative_tokens":3}'])
    assert line == '/x/vllm --speculative-config "{\\"method\\":\\"mtp\\",\\"num_speculative_tokens\\":3}"'


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "empty"),
        ("vllm serve", "list of strings"),
        (["vllm", "serve"], "absolute path"),
        (["-/bin/vllm"], "absolute path"),
        (["@/bin/vllm"], "absolute path"),
        (["/bin/vllm", 8000], "quote numbers as strings"),
        (["/bin/vllm", None], "must be a string"),
        (["/bin/vllm", "a\0b"], "NUL"),
    ],
)
def test_quote_exec_argv_rejects(argv, message):
    with pytest.raises(SystemdQuoteError, match=message):
        quote_exec_argv(argv)


ENVIRONMENT = [
    ("CUDA_VISIBLE_DEVICES", "0,1", "CUDA_VISIBLE_DEVICES=0,1"),
    ("CUDA_DEVICE_ORDER", "PCI_BUS_ID", "CUDA_DEVICE_ORDER=PCI_BUS_ID"),
    ("X", "a b", '"X=a b"'),
    ("X", "100%", '"X=100%%"'),
    ("X", "$HOME", '"X=$HOME"'),  # no $ expansion in Environment=
    ("X", "", "X="),
    ("X", True, "X=1"),
    ("X", 8000, "X=8000"),
    ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"),
]


@pytest.mark.parametrize("name, value, rendered", ENVIRONMENT)
def test_quote_environment(name, value, rendered):
    assert quote_environment(name, value) == rendered
    expected = {True: "1", 8000: "8000"}.get(value, value) if not isinstance(value, str) else value
    assert parse_environment(rendered) == {name: expected}


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("1X", "v", "not a valid environment variable name"),
        ("A-B", "v", "not a valid environment variable name"),
        ("", "v", "not a valid environment variable name"),
        ("X\n", "v", "not a valid environment variable name"),  # issue 27: `$` let a final newline through
        ("X", ["a"], "must be a string"),
        ("X", None, "must be a string"),
    ],
)
def test_quote_environment_rejects(name, value, message):
    with pytest.raises(SystemdQuoteError, match=message):
        quote_environment(name, value)


@pytest.mark.parametrize(
    "line, message",
    [
        ("/bin/a ; /bin/b", "separates commands"),
        ('/bin/a "open', "unterminated"),
        ("/bin/a %n", "specifier"),
        ("/bin/a $HOME", "variable reference"),
        ("/bin/a \\q", "unknown escape"),
        ("/bin/a \\x4", "bad \\\\x escape"),
        ("/bin/a \\", "trailing backslash"),
    ],
)
def test_parse_exec_line_rejects(line, message):
    with pytest.raises(SystemdQuoteError, match=message):
        parse_exec_line(line)


@pytest.mark.parametrize(
    "line, argv",
    [
        ("/bin/a   b\tc", ["/bin/a", "b", "c"]),
        ("/bin/a 'single quoted'", ["/bin/a", "single quoted"]),
        ('/bin/a pre"fix mid"post', ["/bin/a", "prefix midpost"]),
        ("/bin/a \\101\\x42\\u00e9\\s", ["/bin/a", "ABé "]),
        ("/bin/a \\;", ["/bin/a", ";"]),
    ],
)
def test_parse_exec_line_systemd_syntax(line, argv):
    assert parse_exec_line(line) == argv


def test_a_word_ending_in_a_newline_is_quoted_not_bare():
    """Issue 27: `$` matched before the final newline, so "a\\n" was written bare and ended the line."""
    assert quote_word("abc\n") == '"abc\\n"'
