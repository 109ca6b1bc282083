# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller's requirements are declared where ansible-builder and Ansible users look for them
(requirements.txt, bindep.txt, meta/execution-environment.yml), kept in sync with what plugins/
import, shipped in the collection tarball; and the README's "Use on your fleet" first step
(plan.yml on the examples) works in a fresh venv holding only what that section lists.

Issue 28 / 30 item 1: a README reader's `ansible-playbook -i inventories/examples/<x> playbooks/plan.yml`
failed on all five examples with "Failed to import the required Python library (huggingface_hub)"."""
import ast
import json
import os
import pathlib
import re
import shlex
import subprocess
import sys

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p.name for p in (ROOT / "inventories" / "examples").iterdir() if p.is_dir())
CONFIGS = ROOT / "tests" / "fixtures" / "model-configs"
# Imported only by code that runs on the GPU hosts, never on the controller: NVML (gpu_facts, through
# plugins/module_utils/gpu/nvml.py, the only file that imports it; reported with missing_required_lib there).
HOST_ONLY = {"pynvml"}
# Import name -> the distribution requirements.txt names.
DISTRIBUTION = {"huggingface_hub": "huggingface_hub"}
# Optional on the controller: imported inside try/except by the one file named, the feature reports its
# absence instead of failing; pinned in requirements-dev.txt for the suite. matplotlib: the bench report's PNG.
# The pictures of the bench and tune reports: optional (the report says "not drawn" without it).
OPTIONAL = {"matplotlib": {"plugins/module_utils/bench/plot.py", "plugins/module_utils/tune/report.py"}}


def _third_party_imports():
    """Top-level names of every import under plugins/ that is neither stdlib, ansible nor the collection."""
    found = {}
    for path in (ROOT / "plugins").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top in ("ansible", "ansible_collections", "__future__"):
                    continue
                found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def _requirement_names(text):
    names = {}
    for line in text.splitlines():
        line = line.split("#")[0].strip()
        if line:
            names[re.split(r"[<>=!~\[; ]", line)[0].lower().replace("-", "_")] = line
    return names


def test_every_controller_import_is_declared():
    """A new third-party import under plugins/ fails here until requirements.txt names it (or it is
    host-only and listed in HOST_ONLY with the reason)."""
    declared = _requirement_names((ROOT / "requirements.txt").read_text())
    imports = _third_party_imports()
    assert "huggingface_hub" in imports and "pynvml" in imports, imports  # the scan sees the lazy imports
    for top, files in sorted(imports.items()):
        if top in HOST_ONLY:
            assert files == {"plugins/module_utils/gpu/nvml.py"}, (top, files)
            continue
        if top in OPTIONAL:
            assert files == OPTIONAL[top], (top, files)
            assert top in _requirement_names((ROOT / "requirements-dev.txt").read_text()), top
            continue
        assert top in DISTRIBUTION, "%s is imported by %s: add it to requirements.txt and DISTRIBUTION" % (top, sorted(files))
        assert DISTRIBUTION[top].lower() in declared, "requirements.txt does not declare %s (imported by %s)" % (top, sorted(files))
    assert set(declared) == {DISTRIBUTION[t].lower() for t in imports if t not in HOST_ONLY and t not in OPTIONAL}, declared


def test_dev_pin_satisfies_the_declared_range():
    """The version the suite tests with (requirements-dev.txt) is inside what requirements.txt allows."""
    from packaging.requirements import Requirement

    dev = {Requirement(v).name.lower(): Requirement(v) for v in _requirement_names((ROOT / "requirements-dev.txt").read_text()).values()}
    for line in _requirement_names((ROOT / "requirements.txt").read_text()).values():
        req = Requirement(line)
        pin = next(iter(dev[req.name.lower()].specifier)).version
        assert req.specifier.contains(pin), (line, pin)


def test_execution_environment_metadata_points_at_shipped_files(installed_collection):
    meta = yaml.safe_load((ROOT / "meta" / "execution-environment.yml").read_text())
    assert meta["dependencies"] == {"python": "requirements.txt", "system": "bindep.txt"}
    installed = installed_collection / "ansible_collections" / "gpufleet" / "vllm"
    for name in ("requirements.txt", "bindep.txt", "meta/execution-environment.yml"):
        assert (installed / name).read_text() == (ROOT / name).read_text(), name  # not build_ignored
    bindep = [line for line in (ROOT / "bindep.txt").read_text().splitlines() if line and not line.startswith("#")]
    assert all(re.match(r"^[a-z0-9.+-]+( \[platform:(dpkg|rpm)\])?$", line) for line in bindep), bindep


def _readme_install_line():
    """The one `pip install` line of the README's "Use on your fleet" block, as argv after `pip install`."""
    text = (ROOT / "README.md").read_text()
    block = text.split("## Use on your fleet", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    lines = [line.split("#")[0].strip() for line in block.splitlines() if line.strip().startswith("pip install")]
    assert len(lines) == 1, lines
    return shlex.split(lines[0])[2:]


def test_readme_install_line_names_the_controller_requirements():
    """The README's one pip line installs what requirements.txt declares for the controller (huggingface_hub)."""
    args = _readme_install_line()
    with open(ROOT / "requirements.txt") as handle:
        declared = [line.strip() for line in handle if line.strip() and not line.startswith("#")]
    assert declared and all(req in args for req in declared), (declared, args)


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """The collection built and installed from its tarball into a collections folder of its own, run with the
    project venv's Ansible. (A fresh venv holding only the README's packages is test_readme_fleet.py's.)"""
    base = tmp_path_factory.mktemp("fresh")
    venv = pathlib.Path(sys.executable).parent.parent
    coll = base / "collections"
    env = _env(venv, coll)
    subprocess.run([str(venv / "bin" / "ansible-galaxy"), "collection", "build", "--output-path", str(base), str(ROOT)],
                   check=True, capture_output=True, env=env)
    tarball = next(base.glob("gpufleet-vllm-*.tar.gz"))
    subprocess.run([str(venv / "bin" / "ansible-galaxy"), "collection", "install", "--offline", str(tarball), "-p", str(coll)],
                   check=True, capture_output=True, env=env)
    # A controller without huggingface_hub: a shim earlier on the module's sys.path that fails its import.
    shim = base / "no-huggingface-hub" / "huggingface_hub"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ImportError('No module named huggingface_hub (test shim)')\n")
    return {"venv": venv, "coll": coll, "base": base, "installed": coll / "ansible_collections" / "gpufleet" / "vllm",
            "no_hub": shim.parent}


def _env(venv, coll):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(PATH="%s:%s" % (venv / "bin", os.environ.get("PATH", "")), ANSIBLE_COLLECTIONS_PATH=str(coll),
               ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0")
    return env


def _plan(fresh, example, hub, cache, without_hub=False):
    """plan.yml from the installed collection, as the controller's Python runs it."""
    env = _env(fresh["venv"], fresh["coll"])
    if without_hub:
        env["PYTHONPATH"] = str(fresh["no_hub"])
    return subprocess.run(
        [str(fresh["venv"] / "bin" / "ansible-playbook"), "-i", str(ROOT / "inventories" / "examples" / example),
         "gpufleet.vllm.plan", "-e", "ansible_python_interpreter=%s" % sys.executable,
         "-e", "plan_cache_dir=%s" % cache, "-e", "plan_hf_endpoint=%s" % hub.endpoint],
        capture_output=True, text=True, env=env, timeout=300, check=False)


@pytest.fixture(scope="module")
def hub():
    sys.path.insert(0, str(ROOT / "tests" / "functional"))
    from weights_support import FakeHub

    fake = FakeHub()
    for example in EXAMPLES:
        model = yaml.safe_load((ROOT / "inventories" / "examples" / example / "group_vars" / "all.yml").read_text())["gpufleet_model_id"]
        fake.add_commit(model, {"config.json": (CONFIGS / (model.replace("/", "__") + ".config.json")).read_bytes()})
    fake.start()
    yield fake
    fake.stop()


def test_readme_reader_plans_every_example(fresh, hub, tmp_path):
    """Without huggingface_hub: one line saying what to install (not the bare import error). With it: every
    example plans from a model id (config.json fetched from the stand-in hub, nothing else)."""
    proc = _plan(fresh, EXAMPLES[0], hub, tmp_path / "before", without_hub=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert "pip install -r %s/requirements.txt" % fresh["installed"] in out, out[-3000:]
    for example in EXAMPLES:
        cache = tmp_path / example
        proc = _plan(fresh, example, hub, cache)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, (example, out[-4000:])
        assert "GPU KV cache size" in out, (example, out[-3000:])
        assert sorted(p.name for p in cache.iterdir() if not p.name.startswith(".")) == ["config.json"], example


def _pin(name):
    """The `name==version` line requirements-dev.txt pins, as written there."""
    line = _requirement_names((ROOT / "requirements-dev.txt").read_text())[name]
    assert re.match(r"^[A-Za-z0-9_.-]+==[0-9][0-9A-Za-z.]*$", line), line
    return line


def test_execution_environment_follows_the_declared_requirements():
    """execution-environment-offline.yml (the lab's variant, issue 30 item 2) carries what the project declares: the controller's
    ansible-core pin, requirements.txt, bindep.txt, this collection at galaxy.yml's version, every collection
    the roles and playbooks call (at the bundle's version, inside galaxy.yml's range) - and scripts/ee.sh
    fills the context with the same names. The image build itself (~2-5 min cold) is scripts/ee.sh, not here."""
    from packaging.specifiers import SpecifierSet

    ee = yaml.safe_load((ROOT / "execution-environment-offline.yml").read_text())
    galaxy = yaml.safe_load((ROOT / "galaxy.yml").read_text())
    deps = ee["dependencies"]
    assert ee["version"] == 3
    assert deps["python"] == "requirements.txt" and deps["system"] == "bindep.txt", deps
    assert deps["ansible_core"] == {"package_pip": _pin("ansible_core")}, deps["ansible_core"]
    assert deps["ansible_runner"] == {"package_pip": _pin("ansible_runner")}, deps["ansible_runner"]
    entries = deps["galaxy"]["collections"]
    assert entries[0] == {"name": "collections/gpufleet-vllm-%s.tar.gz" % galaxy["version"], "type": "file"}, entries[0]
    bundled = {}
    for entry in entries[1:]:
        match = re.match(r"^collections/([a-z_0-9]+)-([a-z_0-9]+)-([0-9.]+)$", entry["name"])
        assert match and entry["type"] == "dir", entry
        bundled["%s.%s" % match.group(1, 2)] = match.group(3)
    site = pathlib.Path(sys.executable).parent.parent / "lib" / ("python%d.%d" % sys.version_info[:2]) / "site-packages"
    for fqcn, version in bundled.items():
        manifest = json.loads((site / "ansible_collections" / fqcn.replace(".", "/") / "MANIFEST.json").read_text())
        found = manifest["collection_info"]["version"]
        assert found == version, (fqcn, version, "the ansible bundle in requirements-dev.txt has", found)
        for dep, spec in manifest["collection_info"]["dependencies"].items():
            assert dep in bundled and SpecifierSet(spec.replace(" ", "")).contains(bundled[dep]), (fqcn, dep, spec)
    for dep, spec in galaxy["dependencies"].items():
        assert dep in bundled and SpecifierSet(spec.replace(" ", "")).contains(bundled[dep]), (dep, spec, bundled)
    called = set()
    for path in list((ROOT / "roles").rglob("*.yml")) + list((ROOT / "playbooks").rglob("*.yml")):
        called |= set(re.findall(r"\b((?:ansible|community|grafana|containers)\.[a-z_0-9]+)\.[a-z_0-9]+\b", path.read_text()))
    called -= {"ansible.builtin"}
    assert called and called <= set(bundled), "collections the roles/playbooks call but the EE lacks: %s" % sorted(called - set(bundled))
    script = (ROOT / "scripts" / "ee.sh").read_text()
    assert set(re.search(r'^BUNDLE_COLLECTIONS="([^"]+)"', script, re.M).group(1).split()) == set(bundled), bundled
    assert ee["images"]["base_image"]["name"] in script
    assert 'EE_IMAGE="%s"' % ee["options"]["tags"][0] in script
    assert ee["options"]["tags"] == ["localhost/gpufleet-ee:%s" % galaxy["version"]], ee["options"]["tags"]
    assert ee["additional_build_files"] == [{"src": "build/ee/collections", "dest": "collections"}]
