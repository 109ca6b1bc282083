# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one table of vLLM releases (releases.py) and every copy that cannot import it.

YAML cannot import Python: the roles' defaults, the argument specs, the monitoring role's metric names
and its oldest release, the example inventories and vllm_plan's DOCUMENTATION each spell a release.
This test reads each one and fails naming the file when it differs from the table, so "support vLLM
0.34" is an edit of releases.py plus the copies this test lists (docs/DEVELOPING.md).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os
import re

import pytest
import yaml

from ansible_collections.gpufleet.vllm.plugins.module_utils import releases as R
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import engine_memory as em
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import kv_capacity as kv
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import vllm_args as va
from ansible_collections.gpufleet.vllm.plugins.modules import vllm_plan

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))


def _yaml(*parts):
    with open(os.path.join(ROOT, *parts)) as handle:
        return yaml.safe_load(handle)


def _text(*parts):
    with open(os.path.join(ROOT, *parts)) as handle:
        return handle.read()


def _spec_default(role, option):
    return _yaml("roles", role, "meta", "argument_specs.yml")["argument_specs"]["main"]["options"][option]["default"]


DEFAULT_COPIES = [
    ("roles/vllm/defaults/main.yml vllm_version", lambda: _yaml("roles", "vllm", "defaults", "main.yml")["vllm_version"]),
    ("roles/vllm/meta/argument_specs.yml vllm_version", lambda: _spec_default("vllm", "vllm_version")),
    ("roles/monitoring/defaults/main.yml monitoring_vllm_version",
     lambda: _yaml("roles", "monitoring", "defaults", "main.yml")["monitoring_vllm_version"]),
    ("roles/monitoring/meta/argument_specs.yml monitoring_vllm_version",
     lambda: _spec_default("monitoring", "monitoring_vllm_version")),
    ("playbooks/site.yml monitoring_vllm_version's fallback",
     lambda: re.search(r"monitoring_vllm_version: \"\{\{ vllm_version \| default\('([^']+)'\)", _text("playbooks", "site.yml")).group(1)),
    ("plugins/modules/vllm_plan.py DOCUMENTATION vllm_version default",
     lambda: yaml.safe_load(vllm_plan.DOCUMENTATION)["options"]["vllm_version"]["default"]),
    ("plugins/modules/vllm_plan.py argument spec", lambda: vllm_plan.ARGUMENT_SPEC["vllm_version"]["default"]),
]


@pytest.mark.parametrize("where,read", DEFAULT_COPIES, ids=[c[0] for c in DEFAULT_COPIES])
def test_every_copy_of_the_default_release_is_the_table(where, read):
    assert read() == R.DEFAULT_RELEASE, "%s is %r, releases.DEFAULT_RELEASE is %r: change them together" % (
        where, read(), R.DEFAULT_RELEASE)


def test_example_inventories_pin_the_default_release():
    found = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "inventories", "examples", "*", "group_vars", "all.yml"))):
        for match in re.finditer(r"^\s*vllm_version: \"([^\"]+)\"", _text(path), re.M):
            found[os.path.relpath(path, ROOT)] = match.group(1)
    assert len(found) >= 3, found
    wrong = dict((k, v) for k, v in found.items() if v != R.DEFAULT_RELEASE)
    assert not wrong, "example inventories pin another release than %s: %s" % (R.DEFAULT_RELEASE, wrong)


def test_monitoring_metric_names_are_the_table():
    """roles/monitoring/vars/main.yml: the names per era and the era's first release equal releases.METRIC_ERAS."""
    vars_ = _yaml("roles", "monitoring", "vars", "main.yml")
    eras = dict(("%d.%d" % first[:2], names) for first, names, dummy in R.METRIC_ERAS)
    assert vars_["_monitoring_vllm_names_by_era"] == eras
    switch = R.version_text(R.METRIC_ERAS[1][0])
    assert vars_["_monitoring_vllm_era"] == "{{ '%s' if monitoring_vllm_version is version('%s', '>=') else '%s' }}" % (
        "%d.%d" % R.METRIC_ERAS[1][0][:2], switch, "%d.%d" % R.METRIC_ERAS[0][0][:2])


def test_monitoring_oldest_release_is_the_verified_range():
    text = _text("roles", "monitoring", "tasks", "validate.yml")
    assert "monitoring_vllm_version is version('%s', '>=')" % R.OLDEST_VERIFIED in text
    assert "monitoring_vllm_version must be a vLLM release >= %s" % R.OLDEST_VERIFIED in text
    assert R.METRIC_ERAS[0][0] == R.parse_version(R.OLDEST_VERIFIED)


def test_the_users_read_the_table():
    """No second copy in Python: the users hold the table's own objects."""
    for name in ("RUNNER_RULES", "SCHEDULER_RULES", "HYBRID_PREFIX_DEFAULTS", "OFFLOAD_OPTIONS", "METRIC_ERAS"):
        assert not hasattr(em, name), "engine_memory keeps its own %s" % name
    assert va.REMOVED_FLAGS is R.REMOVED_FLAGS and kv.parse_version is R.parse_version
    assert kv.OLDEST_VERIFIED == R.parse_version(R.OLDEST_VERIFIED)


def _is_table(value):
    return isinstance(value, tuple) and value and all(isinstance(r, tuple) and isinstance(r[0], tuple) for r in value)


@pytest.mark.parametrize("name", sorted(n for n in dir(R) if n.isupper() and _is_table(getattr(R, n))))
def test_rule_tables_are_oldest_first_and_name_their_source(name):
    table = getattr(R, name)
    firsts = [row[0] for row in table]
    assert firsts == sorted(firsts) and len(set(firsts)) == len(firsts), name
    assert all(len(first) == 3 for first in firsts)
    assert max(firsts) <= R.parse_version(R.NEWEST_VERIFIED), "%s has a row newer than NEWEST_VERIFIED" % name


@pytest.mark.parametrize("version,first", [
    ("0.9.2", None), ("0.26.0", (0, 26, 0)), ("0.31.1", (0, 26, 0)), ("0.32.0", (0, 32, 0)),
    ("0.32.0rc1", (0, 26, 0)), ("0.33.0+cu130", (0, 32, 0)),
])
def test_rule_for_takes_the_newest_row_not_after_the_release(version, first):
    row = R.rule_for(R.HYBRID_PREFIX_DEFAULTS, version)
    assert (row[0] if row else None) == first


def test_default_release_is_in_the_verified_range():
    assert R.parse_version(R.OLDEST_VERIFIED) <= R.parse_version(R.DEFAULT_RELEASE) <= R.parse_version(R.NEWEST_VERIFIED)
