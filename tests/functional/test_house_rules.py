# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The house rules that a test can check, checked on the tree as it is.

The rules themselves are written in docs/DEVELOPING.md, section "House rules" (where people read them);
each test here names the rule it checks. Change the rule there first, then the test.
"""
import ast
import pathlib
import re
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "ARCHITECTURE.md"
MAX_FUNCTION_LINES = 60
MAX_MODULE_CODE_LINES = 120   # a module's code outside DOCUMENTATION/EXAMPLES/RETURN, blank and comment lines
MAX_TASK_FILE_LINES = 120     # a role's or a playbook's task file: orchestration, the logic in plugins/
DOC_BLOCKS = ("DOCUMENTATION", "EXAMPLES", "RETURN")


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


# module_utils is grouped by domain (docs/ARCHITECTURE.md, "module_utils, file by file"): a new file goes into the
# package of its domain, not beside the shared leaves at the top.
MAX_TOP_LEVEL_MODULE_UTILS = 6


def test_module_utils_is_grouped_by_domain():
    top = sorted(p.name for p in (ROOT / "plugins" / "module_utils").glob("*.py") if p.name != "__init__.py")
    assert len(top) <= MAX_TOP_LEVEL_MODULE_UTILS, (
        "plugins/module_utils has %d files at the top (%s): put a domain's file in its package" % (len(top), ", ".join(top)))
    text = DOC.read_text()
    unnamed = [p.name for p in (ROOT / "plugins" / "module_utils").iterdir()
               if p.is_dir() and p.name != "__pycache__" and "`%s/`" % p.name not in text]
    assert not unnamed, "docs/ARCHITECTURE.md does not introduce the package(s) %s" % ", ".join(unnamed)


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


def task_files():
    return sorted(list((ROOT / "roles").glob("*/tasks/*.yml")) + list((ROOT / "playbooks" / "tasks").glob("*.yml")))


def test_task_files_are_orchestration():
    """DEVELOPING.md, house rule 10: no task file under roles/*/tasks/ or playbooks/tasks/ is over 120 lines."""
    files = task_files()
    assert len(files) > 40  # the globs found the task files
    long = dict((p.relative_to(ROOT).as_posix(), len(p.read_text().splitlines())) for p in files)
    long = dict((name, lines) for name, lines in long.items() if lines > MAX_TASK_FILE_LINES)
    assert not long, "task files over %d lines (move the logic into a module, or a step into its own file): %s" % (
        MAX_TASK_FILE_LINES, ", ".join("%s %d" % item for item in sorted(long.items())))


def module_code_lines(path):
    """Lines of a module that are code: not in DOCUMENTATION/EXAMPLES/RETURN, not blank, not a comment."""
    text = path.read_text()
    docs = set()
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) in DOC_BLOCKS for t in node.targets):
            docs.update(range(node.lineno, node.end_lineno + 1))
    return sum(1 for number, line in enumerate(text.splitlines(), 1)
               if number not in docs and line.strip() and not line.strip().startswith("#"))


def test_module_code_lines_counts_only_code(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text('# header\nDOCUMENTATION = r"""\nmodule: x\n"""\n\nimport os\n\n\ndef main():\n    pass\n')
    assert module_code_lines(sample) == 3


def test_modules_are_thin():
    """DEVELOPING.md, House rules: a module is AnsibleModule glue; its logic lives in plugins/module_utils."""
    modules = sorted((ROOT / "plugins" / "modules").glob("*.py"))
    assert len(modules) >= 8
    fat = dict((p.name, module_code_lines(p)) for p in modules)
    fat = dict((name, lines) for name, lines in fat.items() if lines > MAX_MODULE_CODE_LINES)
    assert not fat, "modules over %d lines of code (move the logic into plugins/module_utils): %s" % (
        MAX_MODULE_CODE_LINES, ", ".join("%s %d" % item for item in sorted(fat.items())))


def domain_error_names():
    """Names of the exception classes defined in plugins/module_utils (all derive from UserError)."""
    names = set()
    for path in (ROOT / "plugins" / "module_utils").glob("**/*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                    getattr(b, "id", getattr(b, "attr", "")).endswith(("Error", "Exception")) for b in node.bases):
                names.add(node.name)
    return names


def rewrap_blocks(path, errors):
    """``except <domain error>`` handlers of a module that raise a new exception or call fail_json."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ExceptHandler) or node.type is None:
            continue
        caught = node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]
        caught = [getattr(c, "id", getattr(c, "attr", None)) for c in caught]
        if not any(name in errors for name in caught):
            continue
        for inner in ast.walk(node):
            new_raise = isinstance(inner, ast.Raise) and inner.exc is not None
            fails = isinstance(inner, ast.Call) and getattr(inner.func, "attr", None) == "fail_json"
            if new_raise or fails:
                found.append("%s:%d" % (path.name, node.lineno))
                break
    return found


def test_modules_do_not_rewrap_domain_errors():
    """DEVELOPING.md, House rules: every domain error is a UserError whose message names the option and the fix;
    run_guarded reports it, so a module never catches one to raise another."""
    errors = domain_error_names()
    assert {"NvmlFatalError", "PlacementError", "WeightsError"} <= errors
    offenders = []
    for path in sorted((ROOT / "plugins" / "modules").glob("*.py")):
        offenders += rewrap_blocks(path, errors | {"UserError"})
    assert not offenders, "re-wrap blocks in modules (let the UserError through): %s" % offenders


def test_rewrap_detector_finds_a_planted_block(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("def f():\n    try:\n        g()\n    except PlacementError as exc:\n"
                       "        raise UserError(str(exc))\n")
    assert rewrap_blocks(planted, {"PlacementError"}) == ["planted.py:4"]


# Playbooks whose vllm_profile is derived from another profile, not built from the inventory contract.
PROFILE_DERIVED = {"playbooks/tune.yml", "playbooks/tasks/tune_candidate.yml"}


def test_vllm_profile_is_built_once():
    """DEVELOPING.md, house rule 8: the playbooks that plan from the inventory (site, rollout, bench, preflight,
    plan) read the one vllm_profile of playbooks/vars/gpufleet.yml; none builds its own."""
    builders = []
    readers = set()
    for path in sorted((ROOT / "playbooks").glob("**/*.yml")):
        rel = path.relative_to(ROOT).as_posix()
        for match in re.finditer(r"^\s*vllm_profile:\s*(.*)$", path.read_text(), re.M):
            if match.group(1).strip().startswith('"{{ _gpufleet_vllm_profile }}"'):
                readers.add(rel)
            elif rel not in PROFILE_DERIVED:
                builders.append("%s: %s" % (rel, match.group(1).strip()))
    assert not builders, "vllm_profile built outside playbooks/vars/gpufleet.yml: %s" % builders
    assert {"playbooks/site.yml", "playbooks/preflight.yml", "playbooks/plan.yml"} <= readers, sorted(readers)
    assert (ROOT / "playbooks" / "vars" / "gpufleet.yml").read_text().count("_gpufleet_vllm_profile:") == 1


# DEVELOPING.md, house rule 9: roles whose main task list has phases tag each phase <role>_<phase>.
PHASED_ROLES = ("host_tuning", "model_storage", "model_weights", "monitoring", "vllm")
# Roles without separable phases, and why.
UNPHASED_ROLES = {
    "bench": "one phase: the benchmark",
    "common": "internal: entry points only",
    "gpu_preflight": "one phase: read and compare the GPUs",
    "mig": "one phase: converge the MIG mode (stop holders, set, reset)",
    "nginx": "its steps depend on each other: install, config checked by nginx -t, start",
    "router": "new in round 3: to be decided with its owner",
}


def test_every_role_decides_about_phase_tags():
    roles = sorted(p.name for p in (ROOT / "roles").iterdir() if (p / "tasks").is_dir())
    undecided = sorted(set(roles) - set(PHASED_ROLES) - set(UNPHASED_ROLES))
    assert not undecided, "roles in neither PHASED_ROLES nor UNPHASED_ROLES (house rule 9): %s" % undecided


@pytest.mark.parametrize("role", PHASED_ROLES)
def test_phased_roles_tag_every_main_task_with_its_phases(role):
    import yaml
    text = (ROOT / "roles" / role / "tasks" / "main.yml").read_text()
    tasks = yaml.safe_load(text)
    header = "\n".join(line for line in text.splitlines() if line.startswith("#"))
    phases = set()
    for task in tasks:
        tags = task.get("tags") or []
        assert role in tags, "%s: task %r lacks the tag %s" % (role, task.get("name"), role)
        own = [t for t in tags if t.startswith(role + "_")]
        assert own, "%s: task %r carries no %s_<phase> tag" % (role, task.get("name"), role)
        phases.update(own)
    assert len(phases) >= 2, phases
    unnamed = sorted(p for p in phases if p not in header)
    assert not unnamed, "%s: phase tags not described in the header comment of tasks/main.yml: %s" % (role, unnamed)


# The consumers of a planned instance read its record (plan/instance.py); none reads the argv back (issue 42).
INSTANCE_CONSUMERS = ("plugins/module_utils/units/render.py", "plugins/module_utils/router/workers.py",
                      "plugins/module_utils/bench/targets.py")
ARGV_READING = re.compile(r"\bcli_flags\b|[\"']--(port|host|served-model-name|max-model-len)[\"']")


def argv_reads(text):
    return [m.group(0) for m in ARGV_READING.finditer(text)]


@pytest.mark.parametrize("path", INSTANCE_CONSUMERS)
def test_instance_consumers_read_the_record_not_the_argv(path):
    text = (ROOT / path).read_text()
    assert "instance_record.record(" in text, path
    assert argv_reads(text) == [], "%s parses an instance's argv; read plan/instance.py's record instead" % path


def test_argv_read_detector_finds_a_planted_reader():
    assert argv_reads('port = cli_flags.flag_value(argv, "--port")') == ["cli_flags", '"--port"']
    assert argv_reads("rec['port']") == []


# Roles and playbooks read an instance's model, port and address through the instance_record filter, not by
# position or by looking up a flag in its argv (argv[2], argv.index('--host'), map(attribute=2)).
# (The Ray node's own `ray start` argv, _vllm_ray_argv, is not an instance.)
JINJA_ARGV_READING = re.compile(r"argv\[2\]|(?<!ray_)argv\.index\(|argv'\)\s*\|\s*map\(attribute=2\)|\.argv\.2\b")


def test_roles_and_playbooks_read_instances_through_the_record():
    offenders = []
    for path in sorted(list(ROOT.glob("roles/*/tasks/*.yml")) + list(ROOT.glob("playbooks/**/*.yml"))
                       + list(ROOT.glob("roles/*/templates/*.j2"))):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if JINJA_ARGV_READING.search(line):
                offenders.append("%s:%d" % (path.relative_to(ROOT), number))
    assert offenders == [], "read the instance through `| gpufleet.vllm.instance_record`: %s" % offenders


def test_jinja_argv_read_detector_finds_planted_readers():
    for line in ("{{ x.argv[2] }}", "{{ _argv.index('--host') }}", "map(attribute='argv') | map(attribute=2)"):
        assert JINJA_ARGV_READING.search(line), line
    assert not JINJA_ARGV_READING.search("{{ (x | gpufleet.vllm.instance_record).model }}")
