# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The execution environment a user builds (execution-environment.yml, issue 41 item 4): a standard base, the
collections by name (requirements.yml), the controller's Python requirements with matplotlib. `ansible-builder
create` turns it into a build context, checked here (the image build itself needs a registry and minutes).
The lab's offline variant (execution-environment-offline.yml) is test_controller_requirements.py's."""
import json
import pathlib
import re
import subprocess
import sys

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
BASE = "docker.io/library/debian:12"
SITE = pathlib.Path(sys.executable).parent.parent / "lib" / ("python%d.%d" % sys.version_info[:2]) / "site-packages"


def _load(name):
    return yaml.safe_load((ROOT / name).read_text())


def _requirement_lines(text):
    return [line.split("#")[0].strip() for line in text.splitlines() if line.split("#")[0].strip()]


@pytest.fixture(scope="module")
def context(tmp_path_factory, venv_bin):
    out = tmp_path_factory.mktemp("ee") / "context"
    subprocess.run([str(venv_bin / "ansible-builder"), "create", "-f", str(ROOT / "execution-environment.yml"),
                    "-c", str(out)], check=True, capture_output=True, text=True, cwd=ROOT, timeout=120)
    return out


def test_created_context_builds_from_the_standard_base(context):
    containerfile = (context / "Containerfile").read_text()
    assert 'ARG EE_BASE_IMAGE="%s"' % BASE in containerfile
    assert "FROM $EE_BASE_IMAGE AS base" in containerfile
    # python3 and pip from apt before ansible-builder's own pip steps (Debian's python3 has no ensurepip).
    base_stage = containerfile.split("# Galaxy build stage")[0]
    assert base_stage.index("apt-get install") < base_stage.index("pip install --no-cache-dir $ANSIBLE_INSTALL_REFS")
    assert 'ARG PKGMGR="/usr/bin/apt-get"' in containerfile
    assert re.search(r'ARG ANSIBLE_INSTALL_REFS="ansible-core==[0-9.]+ ansible-runner==[0-9.]+"', containerfile)


def test_created_context_installs_the_collections_by_name(context):
    containerfile = (context / "Containerfile").read_text()
    assert "ansible-galaxy collection install $ANSIBLE_GALAXY_CLI_COLLECTION_OPTS -r requirements.yml" in containerfile
    assert "--offline" not in containerfile  # the lab variant's: this one asks Galaxy (or the configured server)
    copied = yaml.safe_load((context / "_build" / "requirements.yml").read_text())
    assert copied == _load("requirements.yml")
    names = [entry["name"] for entry in copied["collections"]]
    assert names[:3] == ["gpufleet.vllm", "ansible.posix", "community.general"], names
    assert all(re.match(r"^[a-z_0-9]+\.[a-z_0-9]+$", name) for name in names), names  # names, not files or folders


def test_created_context_installs_the_python_requirements_and_matplotlib(context):
    containerfile = (context / "Containerfile").read_text()
    assert "introspect --user-pip=requirements.txt --user-bindep=bindep.txt" in containerfile
    pip = _requirement_lines((context / "_build" / "requirements.txt").read_text())
    for line in _requirement_lines((ROOT / "requirements.txt").read_text()):
        assert line in pip, (line, pip)
    assert any(line.startswith("matplotlib") for line in pip), pip
    assert (context / "_build" / "bindep.txt").read_text() == (ROOT / "bindep.txt").read_text()


def test_requirements_follow_galaxy_yml_and_what_the_roles_call():
    from packaging.specifiers import SpecifierSet
    from packaging.requirements import Requirement

    galaxy = _load("galaxy.yml")
    wanted = {entry["name"]: entry.get("version", "*") for entry in _load("requirements.yml")["collections"]}
    assert wanted["gpufleet.vllm"] == galaxy["version"], wanted
    for dep, spec in galaxy["dependencies"].items():
        assert wanted.get(dep) == spec, (dep, spec, wanted.get(dep))
    called = set()
    for path in list((ROOT / "roles").rglob("*.yml")) + list((ROOT / "playbooks").rglob("*.yml")):
        called |= set(re.findall(r"\b((?:ansible|community|grafana|containers)\.[a-z_0-9]+)\.[a-z_0-9]+\b", path.read_text()))
    called -= {"ansible.builtin"}
    assert called <= set(wanted), "collections the roles/playbooks call but requirements.yml lacks: %s" % sorted(called - set(wanted))
    # The versions the suite runs with (the ansible bundle in requirements-dev.txt) are inside each range.
    for name, spec in wanted.items():
        if name == "gpufleet.vllm":
            continue
        manifest = json.loads((SITE / "ansible_collections" / name.replace(".", "/") / "MANIFEST.json").read_text())
        assert SpecifierSet(spec.replace(" ", "")).contains(manifest["collection_info"]["version"]), (name, spec)
    # matplotlib's range holds the version the suite draws reports with.
    ee = _load("execution-environment.yml")
    dev = {Requirement(line).name.lower(): Requirement(line) for line in _requirement_lines((ROOT / "requirements-dev.txt").read_text())}
    mpl = [Requirement(line) for line in ee["dependencies"]["python"] if line.startswith("matplotlib")][0]
    assert mpl.specifier.contains(next(iter(dev["matplotlib"].specifier)).version), mpl


def test_shipped_definition_pins_what_the_suite_tests():
    ee = _load("execution-environment.yml")
    offline = _load("execution-environment-offline.yml")
    assert ee["version"] == 3 and ee["images"]["base_image"]["name"] == BASE
    assert ee["dependencies"]["galaxy"] == "requirements.yml"
    for key in ("ansible_core", "ansible_runner", "python_interpreter"):
        assert ee["dependencies"][key] == offline["dependencies"][key], key
    assert ee["options"]["tags"] == ["gpufleet-ee:%s" % _load("galaxy.yml")["version"]]


def test_navigator_example_runs_the_shipped_image():
    settings = _load("docs/ansible-navigator.yml")["ansible-navigator"]
    ee = settings["execution-environment"]
    assert ee["enabled"] is True
    assert ee["image"].endswith("/gpufleet-ee:%s" % _load("galaxy.yml")["version"]), ee["image"]
