# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection builds, installs next to the bundle's ansible.posix / community.general, and
documents its roles and modules through ansible-doc."""
import json
import os
import subprocess


def _doc(venv_bin, collections, *args):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections), ANSIBLE_NOCOLOR="1")
    out = subprocess.run(
        [str(venv_bin / "ansible-doc"), "--json", *args], check=True, capture_output=True, text=True, env=env
    )
    return json.loads(out.stdout)


def test_installed_collection_lists_dependencies(installed_collection):
    manifest = json.loads(
        (installed_collection / "ansible_collections" / "gpufleet" / "vllm" / "MANIFEST.json").read_text()
    )
    deps = manifest["collection_info"]["dependencies"]
    assert set(deps) == {"ansible.posix", "community.general"}
    files = (installed_collection / "ansible_collections" / "gpufleet" / "vllm" / "FILES.json").read_text()
    for dev_only in (".venv/", "scripts/", ".ci/", "tests/output"):
        assert f'"name": "{dev_only}' not in files


def test_role_documentation_shows_variables(installed_collection, venv_bin):
    doc = _doc(venv_bin, installed_collection, "-t", "role", "gpufleet.vllm.host_tuning")
    options = doc["gpufleet.vllm.host_tuning"]["entry_points"]["main"]["options"]
    assert {"host_tuning_sysctls", "host_tuning_nofile", "host_tuning_kv_offload_bytes"} <= set(options)
    assert options["host_tuning_nofile"]["type"] == "int"


def test_every_module_is_documented(installed_collection, venv_bin, root):
    modules = sorted(p.stem for p in (root / "plugins" / "modules").glob("*.py") if p.stem != "__init__")
    for module in modules:
        doc = _doc(venv_bin, installed_collection, "-t", "module", f"gpufleet.vllm.{module}")
        entry = doc[f"gpufleet.vllm.{module}"]
        assert entry["doc"]["short_description"], module
        assert entry["examples"], module
        assert entry["return"] is not None, module
