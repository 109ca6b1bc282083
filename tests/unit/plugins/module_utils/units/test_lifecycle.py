# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The unit life cycle's decisions, table-driven: ours or not, the shrink guard, change, restart, rollback."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.vllm.plugins.module_utils.units import lifecycle as lc

MARK = "X-GpufleetVllmInstance="
UNIT = "[Unit]\nDescription=x\nX-GpufleetVllmInstance=a\n"


@pytest.mark.parametrize("listing, marker, found", [
    ({"vllm-a.service": UNIT}, MARK, ["vllm-a.service"]),
    ({"vllm-a.service": "[Unit]\nDescription=hand-made\n"}, MARK, []),            # not the role's
    ({"vllm-a.service": "[Unit]\n# X-GpufleetVllmInstance=a\n"}, MARK, []),       # the marker must start a line
    ({"other-a.service": UNIT, "vllm-a.timer": UNIT}, MARK, []),                  # another prefix, not a service
    ({"vllm-a.service": "[Unit]\n"}, None, ["vllm-a.service"]),                   # the rollback copy: the name counts
])
def test_ours(listing, marker, found):
    assert sorted(lc.ours(listing, "vllm", marker)) == found


@pytest.mark.parametrize("live, planned, allow, stale, refused", [
    (["vllm-a.service", "vllm-b.service"], ["vllm-a.service"], False, ["vllm-b.service"], True),
    (["vllm-a.service", "vllm-b.service"], ["vllm-a.service"], True, ["vllm-b.service"], False),
    (["vllm-a.service", "vllm-b.service"], ["vllm-a.service", "vllm-c.service"], False, ["vllm-b.service"], False),  # a rename
    (["vllm-a.service", "vllm-b.service"], ["vllm-a.service", "vllm-b.service"], False, [], False),
    ([], ["vllm-a.service", "vllm-b.service"], False, [], False),
])
def test_shrink_guard(live, planned, allow, stale, refused):
    if refused:
        with pytest.raises(lc.UnitLifecycleError) as info:
            lc.shrink_guard(live, planned, allow)
        for word in ("has %d instance(s)" % len(planned), "runs %d" % len(live), ", ".join(stale),
                     "vllm_allow_instance_removal=true", "Nothing was changed"):
            assert word in info.value.message
        assert info.value.details["stale"] == stale
    else:
        assert lc.shrink_guard(live, planned, allow) == stale


@pytest.mark.parametrize("rendered, live, changing", [
    ({"vllm-a.service": "A", "vllm-b.service": "B"}, {"vllm-a.service": "A", "vllm-b.service": "B"}, []),
    ({"vllm-a.service": "A2", "vllm-b.service": "B"}, {"vllm-a.service": "A", "vllm-b.service": "B"}, ["vllm-a.service"]),
    ({"vllm-b.service": "B", "vllm-a.service": "A"}, {}, ["vllm-b.service", "vllm-a.service"]),  # plan order
])
def test_change_set(rendered, live, changing):
    assert lc.change_set(rendered, live) == changing


@pytest.mark.parametrize("planned, changed, restart", [
    (["a", "b"], [], []),
    (["a", "b"], ["b"], ["b"]),
    (["a", "b"], ["b", "a"], ["a", "b"]),
])
def test_restart_set(planned, changed, restart):
    assert lc.restart_set(planned, changed) == restart


@pytest.mark.parametrize("changing, stale, live, keeps", [
    (["vllm-a.service"], [], {"vllm-a.service": "A"}, True),
    ([], ["vllm-b.service"], {"vllm-b.service": "B"}, True),   # a removal alone can be rolled back
    (["vllm-a.service"], [], {}, False),                        # the first deployment: nothing to keep
    ([], [], {"vllm-a.service": "A"}, False),                   # nothing replaced: the older copy stays
])
def test_keeps_rollback_copy(changing, stale, live, keeps):
    assert lc.keeps_rollback_copy(changing, stale, live) is keeps


def test_rollback_moves():
    moves = lc.rollback_moves({"vllm-a.service": "A1", "vllm-b.service": "B1"},
                              {"vllm-a.service": "A2", "vllm-c.service": "C2"})
    assert moves == dict(remove=["vllm-c.service"], restore=["vllm-a.service", "vllm-b.service"],
                         keep={"vllm-a.service": "A2", "vllm-c.service": "C2"})


@pytest.mark.parametrize("previous, restore", [(None, {"vllm-a.service": "A"}), ("/opt/vllm/venvs/x", {})])
def test_nothing_to_roll_back_to(previous, restore):
    with pytest.raises(lc.UnitLifecycleError) as info:
        lc.rollback_source(previous, restore, "/opt/vllm/previous", "/opt/vllm/rollback/units")
    assert "Nothing to roll back to" in info.value.message and "/opt/vllm/previous" in info.value.message


@pytest.mark.parametrize("name, instance", [("vllm-a.service", "a"), ("vllm-m-0.service", "m-0")])
def test_instance_name(name, instance):
    assert lc.instance_name(name, "vllm") == instance


@pytest.mark.parametrize("venv, version", [("/opt/vllm/venvs/0.32.0-0123456789ab", "0.32.0"), ("/x/0.1.0-ab/", "0.1.0")])
def test_venv_version(venv, version):
    assert lc.venv_version(venv) == version
