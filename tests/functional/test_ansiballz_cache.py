# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The suite's shared AnsiballZ payloads (extensions/molecule/resources/callback_plugins/gpufleet_ansiballz_cache.py):
the key changes with anything a payload is built from, a run links its cache folder to the shared one only where it
has none yet, and real ansible-playbook runs take the payload a first run built, but not across a change of a module
and not for a playbook with modules beside it."""
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PLUGINS = ROOT / "extensions" / "molecule" / "resources" / "callback_plugins"
sys.path.insert(0, str(PLUGINS))
import gpufleet_ansiballz_cache as cache  # noqa: E402  pylint: disable=wrong-import-position

import ansible  # noqa: E402  pylint: disable=wrong-import-position


def _tree(tmp_path):
    """Two collections: a source tree (no MANIFEST.json) and an installed one (MANIFEST.json), and a module folder."""
    root = tmp_path / "collections"
    source = root / "ansible_collections" / "acme" / "src"
    (source / "plugins" / "modules").mkdir(parents=True)
    (source / "plugins" / "module_utils" / "sub").mkdir(parents=True)
    (source / "plugins" / "modules" / "thing.py").write_text("print(1)\n")
    (source / "plugins" / "module_utils" / "sub" / "helper.py").write_text("X = 1\n")
    (source / "roles" / "r" / "tasks").mkdir(parents=True)
    (source / "roles" / "r" / "tasks" / "main.yml").write_text("---\n")
    installed = root / "ansible_collections" / "acme" / "inst"
    (installed / "plugins" / "modules").mkdir(parents=True)
    (installed / "MANIFEST.json").write_text('{"collection_info": {"version": "1.0.0"}}')
    (installed / "plugins" / "modules" / "other.py").write_text("print(2)\n")
    library = tmp_path / "library"
    library.mkdir()
    (library / "legacy.py").write_text("print(3)\n")
    return root, library


def _bump(path, text=None):
    """Change a file's mtime (and its text when given), as an edit would."""
    if text is not None:
        path.write_text(text)
    info = path.stat()
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000_000))


# (what changes, how): each must give a new key
CHANGES = [
    ("a source collection's module, same size", lambda root, lib: _bump(
        root / "ansible_collections/acme/src/plugins/modules/thing.py", "print(9)\n")),
    ("a nested module_utils file", lambda root, lib: _bump(
        root / "ansible_collections/acme/src/plugins/module_utils/sub/helper.py", "X = 22\n")),
    ("a new module in a source collection", lambda root, lib: (
        root / "ansible_collections/acme/src/plugins/modules/new.py").write_text("pass\n")),
    ("an installed collection's MANIFEST.json", lambda root, lib: _bump(
        root / "ansible_collections/acme/inst/MANIFEST.json", '{"collection_info": {"version": "1.0.1"}}')),
    ("a new collection", lambda root, lib: (
        root / "ansible_collections/acme/more/plugins/modules").mkdir(parents=True) or (
        root / "ansible_collections/acme/more/plugins/modules/m.py").write_text("pass\n")),
    ("a module in a configured module folder", lambda root, lib: _bump(lib / "legacy.py", "print(4)\n")),
]

# (what changes, how): none of these is in a payload, so the key stays
NOT_CHANGES = [
    ("a role's file", lambda root, lib: _bump(root / "ansible_collections/acme/src/roles/r/tasks/main.yml", "--- \n")),
    ("a module inside an installed collection (its MANIFEST.json stands for it)", lambda root, lib: _bump(
        root / "ansible_collections/acme/inst/plugins/modules/other.py", "print(5)\n")),
]


@pytest.mark.parametrize("what,change", CHANGES, ids=[c[0] for c in CHANGES])
def test_the_key_changes_with_what_a_payload_is_built_from(tmp_path, what, change):
    root, library = _tree(tmp_path)
    before = cache.payload_key([str(root)], [str(library)])
    assert cache.payload_key([str(root)], [str(library)]) == before, "the same tree must give the same key"
    change(root, library)
    assert cache.payload_key([str(root)], [str(library)]) != before, what


@pytest.mark.parametrize("what,change", NOT_CHANGES, ids=[c[0] for c in NOT_CHANGES])
def test_the_key_ignores_what_no_payload_holds(tmp_path, what, change):
    root, library = _tree(tmp_path)
    before = cache.payload_key([str(root)], [str(library)])
    change(root, library)
    assert cache.payload_key([str(root)], [str(library)]) == before, what


def test_the_key_changes_with_ansible_core(tmp_path, monkeypatch):
    root, library = _tree(tmp_path)
    before = cache.payload_key([str(root)], [str(library)])
    monkeypatch.setattr(ansible, "__version__", ansible.__version__ + ".post1")
    assert cache.payload_key([str(root)], [str(library)]) != before


@pytest.mark.parametrize("beside,expected", [
    ([], False), (["library"], True), (["module_utils"], True), (["roles", "files"], False)])
def test_modules_beside_a_playbook_turn_the_sharing_off(tmp_path, beside, expected):
    for name in beside:
        (tmp_path / name).mkdir()
    assert cache.has_adjacent_modules(str(tmp_path / "site.yml")) is expected


def test_a_run_links_its_cache_folder_once_and_never_replaces_its_own(tmp_path):
    shared, local_tmp = tmp_path / "shared", tmp_path / "ansible-local-1"
    local_tmp.mkdir()
    assert cache.link_shared_cache(str(shared), "k1", str(local_tmp)) is True
    assert os.readlink(local_tmp / "ansiballz_cache") == str(shared / "k1")
    assert (shared / "k1").is_dir()
    assert cache.link_shared_cache(str(shared), "k2", str(local_tmp)) is False
    assert os.readlink(local_tmp / "ansiballz_cache") == str(shared / "k1")
    own = tmp_path / "ansible-local-2"
    (own / "ansiballz_cache").mkdir(parents=True)
    assert cache.link_shared_cache(str(shared), "k1", str(own)) is False
    assert not (own / "ansiballz_cache").is_symlink()


PLAYBOOK = """---
- name: Run two modules on the controller
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Ping
      ansible.builtin.ping:
    - name: Run a module of the collection under test
      acme.src.thing:
"""

THING = '''#!/usr/bin/python
from ansible.module_utils.basic import AnsibleModule
from ansible_collections.acme.src.plugins.module_utils.sub.helper import X


def main():
    module = AnsibleModule(argument_spec={})
    module.exit_json(changed=False, x=X)


if __name__ == "__main__":
    main()
'''


def _project(tmp_path):
    """A collection with a module that imports its own module_utils, and a playbook using it."""
    root = tmp_path / "collections"
    coll = root / "ansible_collections" / "acme" / "src"
    (coll / "plugins" / "modules").mkdir(parents=True)
    (coll / "plugins" / "module_utils" / "sub").mkdir(parents=True)
    (coll / "galaxy.yml").write_text("namespace: acme\nname: src\nversion: 1.0.0\nreadme: README.md\nauthors: [a]\n")
    (coll / "plugins" / "modules" / "thing.py").write_text(THING)
    (coll / "plugins" / "module_utils" / "__init__.py").write_text("")
    (coll / "plugins" / "module_utils" / "sub" / "__init__.py").write_text("")
    (coll / "plugins" / "module_utils" / "sub" / "helper.py").write_text("X = 1\n")
    play = tmp_path / "play" / "site.yml"
    play.parent.mkdir()
    play.write_text(PLAYBOOK)
    return root, coll, play


def _run(tmp_path, root, play, shared, run_name):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(root), ANSIBLE_CALLBACK_PLUGINS=str(PLUGINS),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / ("tmp-" + run_name)), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0")
    env.pop("GPUFLEET_ANSIBALLZ_CACHE", None)
    if shared:
        env["GPUFLEET_ANSIBALLZ_CACHE"] = str(shared)
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,",
                           "-c", "local", "-e", "ansible_python_interpreter=" + sys.executable, "-vv", str(play)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return proc.stdout


def _payloads(shared):
    """{key folder/payload file: mtime_ns} of the shared cache (lock files aside)."""
    return {str(p.relative_to(shared)): p.stat().st_mtime_ns for p in shared.glob("*/*") if not p.name.endswith(".lock")}


def test_runs_share_payloads_until_a_module_changes(tmp_path):
    root, coll, play = _project(tmp_path)
    shared = tmp_path / "shared"
    out = _run(tmp_path, root, play, shared, "1")
    first = _payloads(shared)
    names = sorted(pathlib.PurePath(p).name for p in first)
    assert names == ["ansible.modules.ping-ZIP_DEFLATED-none",
                     "ansible_collections.acme.src.plugins.modules.thing-ZIP_DEFLATED-none"], first
    assert "gpufleet_ansiballz_cache: AnsiballZ payloads from " + str(shared) in out
    assert "'x': 1" in out or '"x": 1' in out

    _run(tmp_path, root, play, shared, "2")
    assert _payloads(shared) == first, "the second run must take the first run's payloads, not build them again"

    # An edit of the module_utils file: a new key folder, and the module runs with the new value.
    helper = coll / "plugins" / "module_utils" / "sub" / "helper.py"
    _bump(helper, "X = 2\n")
    out = _run(tmp_path, root, play, shared, "3")
    assert len({pathlib.PurePath(p).parent for p in _payloads(shared)}) == 2
    assert "'x': 2" in out or '"x": 2' in out, out[-2000:]


def test_no_sharing_without_the_variable_or_with_modules_beside_the_playbook(tmp_path):
    root, _coll, play = _project(tmp_path)
    shared = tmp_path / "shared"
    _run(tmp_path, root, play, None, "plain")
    assert not shared.exists()
    (play.parent / "library").mkdir()
    out = _run(tmp_path, root, play, shared, "beside")
    assert _payloads(shared) == {}
    assert "has library/ or module_utils/ beside it" in out


def test_the_suite_has_no_module_folders_the_key_would_miss():
    """Modules Ansible finds beside a playbook or in a role are not in the key: the tree has none."""
    allowed = {ROOT / "plugins" / "module_utils", ROOT / "tests" / "unit" / "plugins" / "module_utils"}
    found = set()
    for dirpath, dirnames, _files in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if d not in (".git", ".venv", "build", "__pycache__", ".cache")]
        for name in dirnames:
            if name in ("library", "module_utils"):
                found.add(pathlib.Path(dirpath) / name)
    assert found <= allowed, sorted(str(p) for p in found - allowed)
