# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection builds, installs next to the bundle's ansible.posix / community.general, and
documents its roles and modules through ansible-doc."""
import json
import os
import pathlib
import posixpath
import re
import subprocess

import yaml


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


# What a user of the installed collection reads (README.md, docs/, the roles' READMEs) names only files the tarball ships, unless the
# text says the file is "from a checkout": in the same paragraph (a list or a code block counts as one, a table row),
# or in a heading above it (a "# ... (from a checkout)" title covers its whole section, a page's title the page).
CHECKOUT = "from a checkout"
TOP = r"(?:\.ci|benchmarks|build|changelogs|docs|extensions|inventories|meta|playbooks|plugins|roles|scripts|tests)"
PATH_IN_TEXT = re.compile(r"(?<![\w./~$<>{}-])(%s/[\w./-]*[\w/]|requirements(?:-dev)?\.txt|requirements\.yml|bindep\.txt|"
                          r"execution-environment(?:-offline)?\.yml|CHANGELOG\.rst|galaxy\.yml)(?![\w<>{}*])" % TOP)
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
# Paths a user makes (the fleet steps' inventory), not files of the collection.
USER_PATHS = ("inventories/prod",)


def _blocks(text):
    """(paragraph, headings above it) for each blank-line-separated block; a fenced code block is one block."""
    heads, block, fenced, out = {}, [], False, []
    for line in text.splitlines() + [""]:
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and not line.strip():
            if block:
                out.append(("\n".join(block), " ".join(heads[k] for k in sorted(heads))))
            block = []
            continue
        match = re.match(r"^(#{1,6}) ", line) if not fenced else None
        if match:
            level = len(match.group(1))
            heads = {k: v for k, v in heads.items() if k < level}
            heads[level] = line
        if not fenced and line.startswith("|"):
            out.append((line, " ".join(heads[k] for k in sorted(heads))))  # a table row is a paragraph of its own
            continue
        block.append(line)
    return out


def _named_paths(doc, text):
    for block, heads in _blocks(text):
        # a line break inside the words is still the words a reader sees
        if CHECKOUT in " ".join(block.lower().split()) or CHECKOUT in heads.lower():
            continue
        for name in PATH_IN_TEXT.findall(block):
            yield name.rstrip("./")
        for link in LINK.findall(block):
            if not re.match(r"^[a-z]+:", link):
                yield (doc.parent / link).as_posix()


def _missing_from(installed):
    shipped = {p.relative_to(installed).as_posix() for p in installed.rglob("*")}
    problems = []
    docs = [pathlib.PurePosixPath(p.relative_to(installed).as_posix())
            for pattern in ("README.md", "docs/*.md", "roles/*/README.md") for p in sorted(installed.glob(pattern))]
    for doc in docs:
        text = (installed / doc.as_posix()).read_text()
        for name in sorted(set(_named_paths(doc, text))):
            name = posixpath.normpath(name)
            # A role's README may name its own files (meta/argument_specs.yml) from the role's folder.
            local = posixpath.normpath(posixpath.join(doc.parent.as_posix(), name)) if doc.parts[0] == "roles" else name
            if name.startswith(USER_PATHS) or {name, local} & shipped or any(p.startswith(name) for p in shipped):
                continue
            problems.append("%s names %s: not in the collection (ship it, or say it is %s)" % (doc, name, CHECKOUT))
    return problems


def test_docs_name_only_shipped_files_unless_from_a_checkout(installed_collection):
    installed = installed_collection / "ansible_collections" / "gpufleet" / "vllm"
    assert _missing_from(installed) == []


def test_docs_check_catches_an_unmarked_checkout_path(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("# x\n\nRun `scripts/demo.sh`.\n\n## Try (from a checkout)\n\n`scripts/test.sh`\n")
    (tmp_path / "docs" / "a.md").write_text(
        "# a\n\nSee [b](b.md).\n\n`tests/fixtures/x` (from a checkout).\n\n`tests/fixtures/y` (from\na checkout).\n")
    assert _missing_from(tmp_path) == [
        "README.md names scripts/demo.sh: not in the collection (ship it, or say it is from a checkout)",
        "docs/a.md names docs/b.md: not in the collection (ship it, or say it is from a checkout)"]


def test_tarball_keeps_test_data_and_lab_material_out(installed_collection):
    """No file over 64 KB under tests/ (engine logs, PNGs, the tiny model stay in the repository), and none of the
    checkout-only material: scripts/, benchmarks/, tests/gpu/, the lab's EE definition."""
    installed = installed_collection / "ansible_collections" / "gpufleet" / "vllm"
    big = sorted("%s (%d bytes)" % (p.relative_to(installed), p.stat().st_size)
                 for p in (installed / "tests").rglob("*") if p.is_file() and p.stat().st_size > 64 * 1024)
    assert big == []
    for gone in ("scripts", "benchmarks", "tests/fixtures", "tests/gpu", "execution-environment-offline.yml",
                 "requirements-dev.txt", ".pytest_cache"):
        assert not (installed / gone).exists(), gone
    assert not list(installed.rglob("*.png")) and not list(installed.rglob("*.engine.log"))
    for shipped in ("execution-environment.yml", "requirements.yml", "CHANGELOG.rst", "changelogs/changelog.yaml",
                    "docs/ansible-navigator.yml", "README.md"):
        assert (installed / shipped).is_file(), shipped


def test_galaxy_metadata_is_complete_and_the_changelog_has_the_release(root):
    galaxy = yaml.safe_load((root / "galaxy.yml").read_text())
    for key in ("repository", "documentation", "homepage", "issues"):
        assert galaxy.get(key, "").startswith("https://"), key
    assert len(galaxy["tags"]) >= 5
    changelog = yaml.safe_load((root / "changelogs" / "changelog.yaml").read_text())
    assert galaxy["version"] in changelog["releases"], sorted(changelog["releases"])
    assert ("v%s" % galaxy["version"]) in (root / "CHANGELOG.rst").read_text()


def test_every_plugin_was_added_in_a_release_of_the_changelog(root):
    """`version_added` of each module and filter names a release changelog.yaml has (ansible-doc shows it)."""
    releases = set(yaml.safe_load((root / "changelogs" / "changelog.yaml").read_text())["releases"])
    wrong = {}
    for path in sorted((root / "plugins").glob("*/*.py")):
        match = re.search(r"^version_added: \"?([0-9.]+)\"?$", path.read_text(), re.M)
        if path.parent.name in ("modules", "filter") and path.name != "__init__.py":
            if not match or match.group(1) not in releases:
                wrong[path.relative_to(root).as_posix()] = match.group(1) if match else None
    assert wrong == {}, "version_added not a release in changelogs/changelog.yaml: %s" % wrong


def test_reference_docs_build_offline_from_the_installed_collection(installed_collection, venv_bin, root, tmp_path):
    """antsibull-docs renders a page for every module, filter and role of the installed collection, offline, and
    none is an error page (a DOCUMENTATION or argument spec it cannot read)."""
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(installed_collection), ANSIBLE_NOCOLOR="1",
               PATH="%s:%s" % (venv_bin, os.environ.get("PATH", "")))
    out = subprocess.run([str(venv_bin / "antsibull-docs"), "collection", "--use-current", "--dest-dir", str(tmp_path),
                          "gpufleet.vllm"], capture_output=True, text=True, env=env, timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "did not return correct DOCUMENTATION" not in out.stderr, out.stderr[-3000:]
    pages = {p.name for p in (tmp_path / "collections" / "gpufleet" / "vllm").glob("*.rst")}
    expected = {"%s_module.rst" % p.stem for p in (root / "plugins" / "modules").glob("*.py") if p.stem != "__init__"}
    expected |= {"%s_filter.rst" % p.stem for p in (root / "plugins" / "filter").glob("*.py") if p.stem != "__init__"}
    expected |= {"%s_role.rst" % p.name for p in (root / "roles").iterdir() if (p / "meta" / "argument_specs.yml").is_file()}
    assert expected - pages == set(), sorted(expected - pages)


def test_every_fragment_is_in_the_release_galaxy_yml_names(root):
    """changelogs/config.yaml keeps the fragments; a fragment no release lists would be missing from CHANGELOG.rst
    of the version galaxy.yml builds."""
    galaxy = yaml.safe_load((root / "galaxy.yml").read_text())
    changelog = yaml.safe_load((root / "changelogs" / "changelog.yaml").read_text())
    released = {name for release in changelog["releases"].values() for name in release.get("fragments", [])}
    present = {p.name for p in (root / "changelogs" / "fragments").glob("*.yml")}
    assert present - released == set(), (
        "fragments in no release: %s. Before %s is published, fold them in with "
        "./scripts/changelog-release.sh --again (docs/DEVELOPING.md, Commands); after it, raise galaxy.yml's version."
        % (sorted(present - released), galaxy["version"]))
