# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""issue 42 item 4: the release recipe holds. The bump to the newest verified release (docs/DEVELOPING.md,
"Support a new vLLM release": DEFAULT_RELEASE, then every copy test_releases.py names, and the scripts' default)
is performed in a temporary copy of the tree; afterwards no user-facing message of plugins/ (findings, errors),
no parser registry and no script may still name the old release. What still does, outside the files the release
work may edit, is listed by path in KNOWN_STALE: the list must be exactly what the scan finds (a fix or a new
offender fails the test until the list follows)."""
from __future__ import absolute_import, division, print_function

import ast
import os
import re
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "plugins", "module_utils"))
import releases as R  # noqa: E402 (a leaf: imports nothing of ours)
from test_vllm_argv_real_parser import collection_path  # pylint: disable=unused-import  # noqa: E402,F401

OLD, NEW = R.DEFAULT_RELEASE, R.NEWEST_VERIFIED
OLD_MINOR = ".".join(OLD.split(".")[:2])
# Where the recipe's copies of the default release live (test_releases.py DEFAULT_COPIES and the examples).
COPIES = ["plugins/module_utils/releases.py", "roles/vllm/defaults/main.yml", "roles/vllm/meta/argument_specs.yml",
          "roles/monitoring/defaults/main.yml", "roles/monitoring/meta/argument_specs.yml", "playbooks/site.yml",
          "plugins/modules/vllm_plan.py", "scripts/vllm-venv.sh", "scripts/vllm-wheelhouse.sh"]
# Comments and messages naming the old release in files the release work does not own (scripts/test.sh: its
# parser venv build, the default venv and the 0.34.0 overlay on it): reported to their owners.
KNOWN_STALE = {"scripts/test.sh"}
MESSAGE_CALLS = ("_f", "finding", "_finding")
_OLD_NAMED = re.compile(r"vLLM %s(?:\.0)?(?![\d.])|%s" % (re.escape(OLD_MINOR), re.escape(OLD)))


def _tracked():
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, stdout=subprocess.PIPE,
                         universal_newlines=True, check=True).stdout.split("\n")
    return [p for p in out if p and not p.startswith("tests/") and os.path.isfile(os.path.join(ROOT, p))]


def bump(tmp):
    """The recipe in a copy: the table's default and each copy of it. Returns the files it changed."""
    files = _tracked()
    for rel in files:
        os.makedirs(os.path.dirname(os.path.join(tmp, rel)) or tmp, exist_ok=True)
        shutil.copyfile(os.path.join(ROOT, rel), os.path.join(tmp, rel))
    examples = [p for p in files if re.match(r"inventories/examples/[^/]+/group_vars/all\.yml$", p)]
    touched = []
    for rel in COPIES + examples:
        path = os.path.join(tmp, rel)
        with open(path) as fh:
            text = fh.read()
        if rel.endswith("releases.py"):
            new = text.replace('DEFAULT_RELEASE = "%s"' % OLD, 'DEFAULT_RELEASE = "%s"' % NEW)
        else:
            new = re.sub(r'(vllm_version:\s*"?|default\(\'|VERSION:-|default:\s*"|vllm-)%s' % re.escape(OLD),
                         lambda m: m.group(1) + NEW, text)
        if new != text:
            with open(path, "w") as fh:
                fh.write(new)
            touched.append(rel)
    return files, touched


def _message_strings(path):
    """String constants inside finding / error calls (the messages a user reads)."""
    with open(path) as fh:
        tree = ast.parse(fh.read())
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "id", None) or getattr(node.func, "attr", "")
        if name in MESSAGE_CALLS or name.endswith("Error"):
            for sub in ast.walk(node):
                if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                    yield sub.lineno, sub.value


def stale(tmp, files):
    found = {}
    for rel in files:
        path = os.path.join(tmp, rel)
        if rel.startswith("plugins/") and rel.endswith(".py"):
            hits = ["%d: %s" % (n, s) for n, s in _message_strings(path) if _OLD_NAMED.search(s)]
        elif rel.startswith("scripts/"):
            with open(path) as fh:
                hits = ["%d: %s" % (n, line.strip()) for n, line in enumerate(fh, 1) if _OLD_NAMED.search(line)]
        else:
            continue
        if hits:
            found[rel] = hits
    return found


@pytest.mark.skipif(OLD == NEW, reason="no newer verified release to bump to")
def test_the_bump_leaves_no_message_registry_or_script_on_the_old_release(tmp_path, collection_path):
    files, touched = bump(str(tmp_path))
    assert "plugins/module_utils/releases.py" in touched and len(touched) >= len(COPIES)
    found = stale(str(tmp_path), files)
    assert set(found) == KNOWN_STALE, dict((k, v) for k, v in found.items() if k not in KNOWN_STALE)
    # the registries follow: the new default's parser names are the new release's own
    from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import vllm_args as va
    assert va.registry_for(NEW)[0] == NEW


def test_the_scan_catches_a_stale_message(tmp_path):
    """The check can fail: a finding message that names the old release is found."""
    rel = "plugins/module_utils/planted.py"
    os.makedirs(str(tmp_path / "plugins" / "module_utils"))
    (tmp_path / rel).write_text('x = _f("error", "c", "not a vLLM %s tool parser", "fix")\n' % OLD_MINOR)
    assert list(stale(str(tmp_path), [rel])) == [rel]
