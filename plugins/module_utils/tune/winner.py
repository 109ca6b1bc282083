# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The winner variables file (``tune_vars_file``) and the hash of the tuning inputs.

The file holds only what the operator commits: the winning overrides (the grid's knobs), the profile they
give, and what they were measured on (vLLM version, model, GPU type, plan hash, the inputs hash). No
measured figure and no time: the same inputs and the same winner give the same bytes, so a second run
writes nothing. The figures are in the report (``tune_results_dir``).

The file lies in the inventory, which Ansible templates, and part of it comes from the host (the name of the
venv it serves, the version read from it): every text is written as data, tagged ``!unsafe``, so a host that
names its venv ``{{ lookup('pipe', ...) }}`` gets that text back, never a template run on the controller (tests:
``tests/unit/plugins/module_utils/tune/test_tune_host_text.py`` loads the file as Ansible loads host_vars).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json

HEADER = ("# Written by gpufleet.vllm playbooks/tune.yml: the measured winner of tune_grid for this host or group.\n"
          "# Commit it beside the inventory. Serve it with gpufleet_serving: \"{{ <your profile> | combine(vllm_tuned.profile_overrides) }}\"\n"
          "# (or apply it with -e tune_apply=true). A rollout of a new vLLM version re-runs the tune to check it still wins.\n")


def inputs_hash(base_profile, grid, workloads, slo, concurrency, repeats, noise_pct, vllm_version, gpu_type):
    """12 hex digits over everything that decides the outcome (a second run with these skips the measurement)."""
    text = json.dumps(dict(base=base_profile, grid=grid, workloads=workloads, slo=slo, concurrency=concurrency,
                           repeats=repeats, noise_pct=noise_pct, vllm_version=vllm_version, gpu=gpu_type),
                      sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def _yaml_scalar(value):
    """``value`` as YAML data Ansible never templates: JSON (quoted strings, numbers, true/false/null, flow lists
    and mappings), each string that holds a ``{`` (where a template could start) tagged ``!unsafe``. Only those:
    Ansible resolves an ``!unsafe`` scalar as if plain, so ``!unsafe "4"`` would load as the number 4."""
    if isinstance(value, str):
        return ("!unsafe " if "{" in value else "") + json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[%s]" % ", ".join(_yaml_scalar(item) for item in value)
    if isinstance(value, dict):
        return "{%s}" % ", ".join("%s: %s" % (json.dumps(str(key)), _yaml_scalar(value[key]))
                                  for key in sorted(value, key=str))
    return json.dumps(value)


def vars_text(var_name, winner, overrides, measured_on):
    """The file's text: ``<var_name>: {candidate, applied_reason, profile_overrides, measured_on}``, keys sorted."""
    lines = [HEADER.rstrip("\n"), "%s:" % var_name, "  candidate: %s" % _yaml_scalar(winner["winner"]),
             "  beat_defaults: %s" % _yaml_scalar(bool(winner["apply"])),
             "  profile_overrides:"]
    if overrides:
        for key in sorted(overrides):
            lines.append("    %s: %s" % (json.dumps(str(key)), _yaml_scalar(overrides[key])))
    else:
        lines[-1] += " {}"
    lines.append("  measured_on:")
    for key in sorted(measured_on):
        lines.append("    %s: %s" % (json.dumps(str(key)), _yaml_scalar(measured_on[key])))
    return "\n".join(lines) + "\n"


def already_tuned(previous, var_name, digest):
    """The vars file on the controller records a tune of exactly these inputs."""
    entry = (previous or {}).get(var_name) or {}
    return (entry.get("measured_on") or {}).get("inputs_hash") == digest
