# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The canary across KV tiers on a real H200 (tests/fixtures/offload-canary/h200-0.26.0, issue 46): the verdicts
re-derived from the raw sends (token ids and counter deltas the run recorded) with the collection's canary, against
statuses written here by hand from the README's reading of the run - cold vs a CPU-tier hit passes, a planted reset
that misses the CPU tier is caught, a reset with reset_external=true reaches it."""
import json
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
RUN = ROOT / "tests" / "fixtures" / "offload-canary" / "h200-0.26.0"


@pytest.fixture(scope="module")
def run():
    return json.loads((RUN / "results.json").read_text())


@pytest.fixture(scope="module")
def canary(collection_path):
    from ansible_collections.gpufleet.vllm.plugins.module_utils.bench import canary as module
    return module


@pytest.fixture(scope="module")
def collection_path(tmp_path_factory):
    base = tmp_path_factory.mktemp("collections")
    (base / "ansible_collections" / "gpufleet").mkdir(parents=True)
    (base / "ansible_collections" / "gpufleet" / "vllm").symlink_to(ROOT)
    sys.path.insert(0, str(base))
    yield base
    sys.path.remove(str(base))


@pytest.mark.parametrize("case, cold, warm, status, tier", [
    ("cpu_tier", "cold", "after the GPU reset", "pass", "offload"),
    ("planted_reset", "cold after the planted reset", "again", "not_cold", None),
    ("full_reset", "cold after reset_external=true", "again", "pass", "gpu+offload"),
])
def test_the_verdicts_follow_from_the_raw_sends(run, canary, case, cold, warm, status, tier):
    sends = dict((s["send"], s) for s in run["sends"] if s["case"] == case)
    verdict = canary.tier_verdict(sends[cold]["token_ids"], sends[warm]["token_ids"], sends[cold]["hits"],
                                  sends[warm]["hits"])
    assert (verdict["status"], verdict["tier"]) == (status, tier)
    assert (run["cases"][case]["status"], run["cases"][case]["tier"]) == (status, tier)
    assert run["cases"][case]["reset_ok"] is True


def test_the_cpu_tier_served_the_whole_prompt(run):
    (after,) = [s for s in run["sends"] if s["send"] == "after the GPU reset"]
    # 2,048 prompt tokens, all through the connector, none from the GPU cache (the run's counter deltas)
    assert after["hits"] == {"gpu": 0.0, "offload": 2048.0}
    assert run["prompt_tokens"] == 2048


def test_the_engine_ran_the_plans_offload_tier(run):
    argv = run["argv"]
    config = json.loads(argv[argv.index("--kv-transfer-config") + 1])
    assert config["kv_connector"] == "OffloadingConnector"
    assert config["kv_connector_extra_config"]["cpu_bytes_to_use"] == 8 * 2 ** 30
    assert "Allocating 36 CPU tensors..." in (RUN / "engine.log").read_text()
