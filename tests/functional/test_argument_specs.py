# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every role's meta/argument_specs.yml declares exactly the variables of defaults/main.yml, with the
same defaults, and every public variable is prefixed with the role's name."""
import pathlib

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROLES = sorted(p.name for p in (ROOT / "roles").iterdir() if (p / "tasks").is_dir())


def _load(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle) or {}


def test_there_are_roles():
    assert "host_tuning" in ROLES


@pytest.mark.parametrize("role", ROLES)
def test_argument_specs_match_defaults(role):
    role_dir = ROOT / "roles" / role
    defaults = _load(role_dir / "defaults" / "main.yml") if (role_dir / "defaults" / "main.yml").exists() else {}
    specs = _load(role_dir / "meta" / "argument_specs.yml")
    assert "main" in specs["argument_specs"], f"{role}: no 'main' entry point in meta/argument_specs.yml"
    options = {}
    for entry in specs["argument_specs"].values():
        options.update(entry.get("options") or {})

    undeclared = sorted(set(defaults) - set(options))
    assert not undeclared, f"{role}: in defaults/main.yml but not in meta/argument_specs.yml: {undeclared}"
    for name, spec in options.items():
        assert name.startswith(role + "_"), f"{role}: variable {name} is not prefixed with '{role}_'"
        assert spec.get("description"), f"{role}: {name} has no description"
        if name in defaults:
            assert "default" in spec or spec.get("required"), f"{role}: {name} has a default in defaults/main.yml but none in argument_specs"
            assert spec.get("default") == defaults[name], (
                f"{role}: {name}: argument_specs default {spec.get('default')!r} != defaults/main.yml {defaults[name]!r}"
            )
        else:
            assert spec.get("required") or "default" not in spec, (
                f"{role}: {name} documents a default but defaults/main.yml has none"
            )


@pytest.mark.parametrize("role", ROLES)
def test_role_has_galaxy_meta(role):
    meta = _load(ROOT / "roles" / role / "meta" / "main.yml")
    assert meta["galaxy_info"]["description"]
