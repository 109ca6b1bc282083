# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every role's meta/argument_specs.yml declares exactly the variables of defaults/main.yml, with the
same defaults, and every public variable is prefixed with the role's name."""
import pathlib
import re

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROLES = sorted(p.name for p in (ROOT / "roles").iterdir() if (p / "tasks").is_dir())


def _load(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle) or {}


def test_there_are_roles():
    assert "host_tuning" in ROLES


SHARED_KEYS = ("type", "default", "choices", "elements", "required")


def entry_point_drift(specs):
    """Every option an entry point shares with main but declares differently (type, default, choices,
    elements, required): the copies must be the same option (docs/DEVELOPING.md, house rule 8)."""
    main = specs["argument_specs"]["main"].get("options") or {}
    drift = []
    for entry, body in sorted(specs["argument_specs"].items()):
        if entry == "main":
            continue
        for name, spec in sorted((body.get("options") or {}).items()):
            if name not in main:
                continue
            for key in SHARED_KEYS:
                if spec.get(key) != main[name].get(key):
                    drift.append("%s.%s %s: %r, main has %r" % (entry, name, key, spec.get(key), main[name].get(key)))
    return drift


def defaults_drift(role, specs, defaults):
    """Each entry point's options against defaults/main.yml, one entry point at a time (not merged)."""
    problems = []
    declared = set()
    for entry, body in sorted(specs["argument_specs"].items()):
        for name, spec in sorted((body.get("options") or {}).items()):
            declared.add(name)
            where = "%s: %s (entry point %s)" % (role, name, entry)
            if not name.startswith(role + "_"):
                problems.append("%s is not prefixed with '%s_'" % (where, role))
            if not spec.get("description"):
                problems.append("%s has no description" % where)
            if _templated_collection(spec, defaults.get(name)):
                # antsibull-docs validates a default against the type: a Jinja string is no list or dict. Such an
                # option declares no default; its description names the variable defaults/main.yml templates.
                source = re.search(r"\{\{\s*(\w+)", defaults[name]).group(1)
                if "default" in spec or "C(%s)" % source not in str(spec["description"]):
                    problems.append("%s: a templated %s default: no default in argument_specs, its description "
                                    "names C(%s)" % (where, spec["type"], source))
                continue
            if name in defaults and not spec.get("required") and spec.get("default") != defaults[name]:
                problems.append("%s: argument_specs default %r != defaults/main.yml %r" % (where, spec.get("default"), defaults[name]))
            if name not in defaults and not spec.get("required") and "default" in spec:
                problems.append("%s documents a default but defaults/main.yml has none" % where)
    problems += ["%s: in defaults/main.yml but not in meta/argument_specs.yml: %s" % (role, name)
                 for name in sorted(set(defaults) - declared)]
    return problems


def _templated_collection(spec, default):
    """A list or dict option whose defaults/main.yml value is a Jinja template."""
    return spec.get("type") in ("list", "dict") and isinstance(default, str) and "{{" in default


def _role_files(role):
    role_dir = ROOT / "roles" / role
    defaults = _load(role_dir / "defaults" / "main.yml") if (role_dir / "defaults" / "main.yml").exists() else {}
    return _load(role_dir / "meta" / "argument_specs.yml"), defaults


@pytest.mark.parametrize("role", ROLES)
def test_argument_specs_match_defaults(role):
    specs, defaults = _role_files(role)
    assert "main" in specs["argument_specs"], f"{role}: no 'main' entry point in meta/argument_specs.yml"
    problems = defaults_drift(role, specs, defaults)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("role", ROLES)
def test_entry_points_copy_main_options_exactly(role):
    specs, dummy = _role_files(role)
    drift = entry_point_drift(specs)
    assert not drift, f"{role}: entry points declare a shared option differently from main: {drift}"


def test_entry_points_share_options_somewhere():
    """The comparison has something to compare: nginx's drain and vllm's rollback copy main's options."""
    shared = 0
    for role in ROLES:
        specs, dummy = _role_files(role)
        main = specs["argument_specs"]["main"].get("options") or {}
        shared += sum(1 for entry, body in specs["argument_specs"].items() if entry != "main"
                      for name in (body.get("options") or {}) if name in main)
    assert shared >= 40, shared


@pytest.mark.parametrize("key,value", [("default", 12345), ("type", "raw"), ("choices", ["x"]), ("elements", "int")])
def test_a_planted_drift_fails(tmp_path, key, value):
    """A changed default (type, choices, elements) in one entry point's copy of an option fails: planted in a
    temp copy of nginx's argument_specs, where the drain entry point copies main's options."""
    specs, defaults = _role_files("nginx")
    entry = [e for e, b in specs["argument_specs"].items() if e != "main" and b.get("options")][0]
    name = sorted(specs["argument_specs"][entry]["options"])[0]
    specs["argument_specs"][entry]["options"][name][key] = value
    planted = tmp_path / "argument_specs.yml"
    planted.write_text(yaml.safe_dump(specs))
    drift = entry_point_drift(_load(planted))
    assert len(drift) == 1 and drift[0].startswith("%s.%s %s: " % (entry, name, key)), drift
    if key == "default":   # and the per-entry-point defaults check says so too (the merge used to hide it)
        assert any("(entry point %s)" % entry in problem for problem in defaults_drift("nginx", _load(planted), defaults))


@pytest.mark.parametrize("role", ROLES)
def test_role_has_galaxy_meta(role):
    meta = _load(ROOT / "roles" / role / "meta" / "main.yml")
    assert meta["galaxy_info"]["description"]
