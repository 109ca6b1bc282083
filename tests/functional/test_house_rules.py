# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""House rules a maintainer relies on, checked on the tree as it is.

1. docs/ARCHITECTURE.md is the map: every module, module_util, filter plugin and role that exists is
   named there (as its path), and every such path the document names exists.
2. No function in plugins/module_utils is longer than MAX_FUNCTION_LINES (the seven long functions of
   round 1, build_plan among them, were split into named steps in round 2).
3. Every Python file in git starts with the one header (after a shebang, where there is one):
   coding line, the one copyright line, the licence line.
4. The roles take the check-mode and the start decisions from the internal role `common` only: no role
   task reads `ansible_check_mode` (it misses check_mode set on a block or include) and only `common`
   looks for /dev/nvidiactl.
"""
import ast
import pathlib
import re
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "ARCHITECTURE.md"
MAX_FUNCTION_LINES = 60


def code_pieces():
    pieces = set()
    for pattern in ("plugins/modules/*.py", "plugins/module_utils/**/*.py", "plugins/filter/*.py"):
        for path in ROOT.glob(pattern):
            if path.name != "__init__.py":
                pieces.add(path.relative_to(ROOT).as_posix())
    for role in (ROOT / "roles").iterdir():
        if (role / "tasks").is_dir():
            pieces.add("roles/%s" % role.name)
    return pieces


def named_paths(text):
    found = set(re.findall(r"(?<![\w/])(plugins/(?:modules|module_utils|filter)/[\w/]+\.py)", text))
    found |= set(re.findall(r"(?<![\w/])(roles/[a-z_]+)\b", text))
    return found


def test_architecture_names_every_piece_that_exists():
    text = DOC.read_text()
    missing = sorted(code_pieces() - named_paths(text))
    assert not missing, "docs/ARCHITECTURE.md does not name: %s" % ", ".join(missing)


def test_architecture_names_nothing_that_does_not_exist():
    text = DOC.read_text()
    ghosts = sorted(path for path in named_paths(text) if not (ROOT / path).exists())
    assert not ghosts, "docs/ARCHITECTURE.md names what does not exist: %s" % ", ".join(ghosts)


def function_lengths():
    for path in sorted((ROOT / "plugins" / "module_utils").glob("**/*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = "%s:%s" % (path.relative_to(ROOT).as_posix(), node.name)
                yield name, node.end_lineno - node.lineno + 1


def test_no_new_long_functions_in_module_utils():
    too_long = {}
    for name, length in function_lengths():
        if length > MAX_FUNCTION_LINES:
            too_long[name] = (length, MAX_FUNCTION_LINES)
    assert not too_long, "functions over their length limit (split them into named steps): %s" % ", ".join(
        "%s %d > %d lines" % (name, got, limit) for name, (got, limit) in sorted(too_long.items()))


PY_HEADER = [
    "# -*- coding: utf-8 -*-",
    "# Copyright: gpufleet.vllm contributors",
    "# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)",
]


def tracked_python_files():
    listing = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / name for name in listing.stdout.split()]


def test_every_python_file_has_the_one_header():
    files = tracked_python_files()
    assert len(files) > 50  # the listing worked (a broken git call must not pass as "no file")
    wrong = []
    for path in files:
        lines = path.read_text(encoding="utf-8").split("\n")
        if lines and lines[0].startswith("#!"):
            lines = lines[1:]
        if lines[:3] != PY_HEADER:
            wrong.append(path.relative_to(ROOT).as_posix())
    assert not wrong, "files without the standard three-line header: %s" % wrong


def role_task_files():
    return sorted(p for p in (ROOT / "roles").glob("*/tasks/*.yml") if p.parts[-3] != "common")


@pytest.mark.parametrize("pattern, rule", [
    (r"\bansible_check_mode\b", "read common_check_mode (tasks_from: check_mode) instead"),
    (r"/dev/nvidiactl", "use the common role's start_decision instead"),
])
def test_roles_take_shared_decisions_from_common(pattern, rule):
    files = role_task_files()
    assert len(files) > 30  # the glob found the roles
    offenders = [p.relative_to(ROOT).as_posix() for p in files if re.search(pattern, p.read_text())]
    assert not offenders, "%s in %s: %s" % (pattern, offenders, rule)
