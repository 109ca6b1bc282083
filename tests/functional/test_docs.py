# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The README is a landing page and every piece is documented where a user looks (issue 41 items 1-2): the README
stays short, names every module, filter, role and playbook, keeps the fleet steps between their markers and links
the docs pages; every role has a README with its variables and an example play. That the README and docs name only
shipped files (or say "from a checkout") is checked on the built collection: test_collection_build.py."""
import pathlib
import re

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
MAX_README_LINES = 150
ROLES = sorted(p.name for p in (ROOT / "roles").iterdir() if (p / "tasks").is_dir())
DOC_PAGES = ("serving", "multi-host", "fleet-weights", "front-door", "benchmarks", "tuning", "restarts", "monitoring",
             "execution-environment", "controller-at-scale", "gpu-acceptance")


def _section(title):
    return README.split("\n%s\n" % title, 1)[1].split("\n## ", 1)[0]


def test_readme_is_a_landing_page():
    lines = README.splitlines()
    assert len(lines) <= MAX_README_LINES, "README.md has %d lines: move details to docs/" % len(lines)
    assert max(len(line) for line in lines) <= 200, "a README line over 200 characters (a table cell grew)"
    try_it = _section("## Try it (from a checkout)")
    assert "./scripts/demo.sh" in try_it and "./scripts/test.sh" in try_it


def test_fleet_steps_sit_between_their_markers():
    assert README.count("<!-- fleet-steps:begin -->") == 1 and README.count("<!-- fleet-steps:end -->") == 1
    fleet = _section("## Use on your fleet")
    inside = fleet.split("<!-- fleet-steps:begin -->", 1)[1].split("<!-- fleet-steps:end -->", 1)[0]
    assert "```bash" in inside and "ansible-playbook" in inside


@pytest.mark.parametrize("folder,heading", [("plugins/modules", "Modules"), ("plugins/filter", "Filters"),
                                            ("roles", "Roles"), ("playbooks", "Playbooks")])
def test_readme_lists_every_piece(folder, heading):
    listed = _section("## What is in it").split("\n%s (" % heading, 1)[1].split("\n\n", 1)[0]
    names = set(re.findall(r"^- `([a-z_]+)` - ", listed, re.M))
    if folder == "roles":
        present = set(ROLES)
    else:
        present = {p.stem for p in (ROOT / folder).glob("*.py" if folder.startswith("plugins") else "*.yml")
                   if p.stem != "__init__"}
    assert names == present, "README.md 'What is in it', %s: missing %s, gone %s" % (
        heading, sorted(present - names), sorted(names - present))


def test_readme_links_every_docs_page():
    for page in DOC_PAGES:
        assert "(docs/%s.md)" % page in README, page
        assert (ROOT / "docs" / ("%s.md" % page)).is_file(), page


@pytest.mark.parametrize("role", ROLES)
def test_every_role_has_a_readme_with_variables_and_an_example_play(role):
    path = ROOT / "roles" / role / "README.md"
    assert path.is_file(), "roles/%s has no README.md (purpose, the variables a user sets, an example play)" % role
    text = path.read_text()
    assert text.startswith("# gpufleet.vllm.%s" % role), text.splitlines()[0]
    specs = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    options = {name for body in specs.values() for name in (body.get("options") or {})}
    assert any("`%s`" % name in text for name in options), "roles/%s/README.md names none of its variables" % role
    plays = [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", text, re.S)]
    plays = [p for p in plays if isinstance(p, list) and p and isinstance(p[0], dict) and "hosts" in p[0]]
    assert plays, "roles/%s/README.md has no example play (a ```yaml block with hosts:)" % role
    assert "gpufleet.vllm.%s" % role in str(plays), "roles/%s/README.md's example play does not use the role" % role
