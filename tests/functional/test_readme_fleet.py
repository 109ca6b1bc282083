# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The README's "Use on your fleet" block, run verbatim as a user would: a fresh venv holding only what the
block installs, a project folder of the user's own (not the checkout), the release tarball, no Galaxy.

The user's two `$EDITOR` steps are a script (EDITOR): the first points the copied example inventory at this
machine (connection local; its python is the block's venv) and at a hub mirror, which is the FAKE hub of
tests/fakes/fake_hf_hub.py serving the example model's real config.json; the second pins the commit plan
printed. This machine has no GPU, so the block goes as far as a host without a GPU can: plan passes and prints
the commit; preflight reports the GPU drift (the example declares 8 x H200) and fails; site.yml passes its input
check on the host (the revision resolved at the mirror, config.json fetched, the plan against the declared
GPUs) and stops in its first role, gpu_preflight, for the same reason, with nothing changed on the host.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from test_site_inputs import host_state
from weights_support import ROOT, FakeHub

BEGIN, END = "<!-- fleet-steps:begin -->", "<!-- fleet-steps:end -->"
EDITOR = r"""#!/bin/sh
# The user's edits (test double for $EDITOR): hosts -> this machine, the mirror, then the pinned commit.
set -e
case "$*" in
  *hosts.yml*)
    cat > inventory/hosts.yml <<EOF
all:
  children:
    vllm_hosts:
      hosts:
        gpuh200-01:
          ansible_connection: local
          ansible_python_interpreter: $PWD/.venv/bin/python
EOF
    printf '\nmodel_weights_endpoint: %s\nmodel_weights_check_config_cache: %s/controller-cache\n' "$HUB" "$PWD" >> inventory/group_vars/all.yml ;;
  *)
    sed -i "s/^gpufleet_model_revision: .*/gpufleet_model_revision: \"$COMMIT\"/" inventory/group_vars/all.yml ;;
esac
"""


def readme_block():
    with open(os.path.join(ROOT, "README.md")) as handle:
        text = handle.read()
    section = text.split(BEGIN, 1)[1].split(END, 1)[0]
    return re.search(r"```bash\n(.*?)```", section, re.S).group(1)


def tarball_name(block):
    return re.search(r"gpufleet-vllm-[0-9.]+\.tar\.gz", block).group(0)


def test_block_names_the_tarball_of_this_release():
    with open(os.path.join(ROOT, "galaxy.yml")) as handle:
        version = re.search(r"^version:\s*(\S+)", handle.read(), re.M).group(1)
    assert tarball_name(readme_block()) == "gpufleet-vllm-%s.tar.gz" % version


@pytest.mark.skipif(os.geteuid() != 0, reason="site.yml's input check runs as root against this machine")
def test_readme_fleet_block_runs_verbatim_without_galaxy(tmp_path):
    block = readme_block()
    project = tmp_path / "my-fleet"
    project.mkdir()
    galaxy = os.path.join(os.path.dirname(sys.executable), "ansible-galaxy")
    subprocess.run([galaxy, "collection", "build", ROOT, "--output-path", str(project)], check=True,
                   capture_output=True)
    assert (project / tarball_name(block)).exists()
    editor = tmp_path / "editor.sh"
    editor.write_text(EDITOR)
    editor.chmod(0o755)
    hub = FakeHub()
    with open(os.path.join(ROOT, "tests", "fixtures", "model-configs", "Qwen__Qwen3-32B.config.json"), "rb") as handle:
        commit = hub.add_commit("Qwen/Qwen3-32B", {"config.json": handle.read()})
    hub.start()
    steps = [line for line in block.splitlines() if line.strip()]
    script = "\n".join("%s\necho \"@@step %d rc=$?\"" % (line, i) for i, line in enumerate(steps))
    # Only what a user's shell has: no project venv, no ANSIBLE_* settings. Galaxy is unreachable from this
    # machine (and from CI's): the block must not need it. pip reaches PyPI as configured here.
    env = dict((k, v) for k, v in os.environ.items() if k.startswith("PIP_") or k.lower().endswith("_proxy"))
    env.update({"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path), "EDITOR": str(editor),
                "HUB": hub.endpoint, "COMMIT": commit, "LANG": "C.UTF-8", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                "no_proxy": "127.0.0.1,localhost",
                "PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR", os.path.expanduser("~/.cache/pip")),
                # Not the README's to say: the same packages, without byte-compiling the bundle's ~40,000 .py files,
                # of which this run imports a few hundred (the suite is CPU-bound: docs/DEVELOPING.md). pip reads
                # --compile's value from PIP_COMPILE (PIP_NO_COMPILE=1 still compiles: pip's inverted no- options).
                "PIP_COMPILE": "0"})
    before = host_state()
    try:
        result = subprocess.run(["bash", "-c", script], cwd=str(project), env=env, capture_output=True, text=True,
                                timeout=1500, check=False)
    finally:
        hub.stop()
    out = result.stdout + result.stderr
    rcs = dict((int(n), int(rc)) for n, rc in re.findall(r"@@step (\d+) rc=(\d+)", out))
    by_word = dict((word, i) for i, line in enumerate(steps) for word in
                   ("pip install", "collection install", "gpufleet.vllm.plan", "gpufleet.vllm.preflight",
                    "gpufleet.vllm.site") if word in line)
    assert len(rcs) == len(steps), out[-4000:]
    for i, line in enumerate(steps):
        if i < by_word["gpufleet.vllm.preflight"]:
            assert rcs[i] == 0, "README step failed: %s\n%s" % (line, out[-4000:])
    plan_out = out.split("@@step %d" % (by_word["gpufleet.vllm.plan"] - 1))[1].split("@@step %d" % by_word["gpufleet.vllm.plan"])[0]
    assert "is commit %s: pin it in the inventory as gpufleet_model_revision" % commit in plan_out, plan_out[-3000:]
    assert "[WARNING]" not in plan_out, plan_out[-3000:]
    # No GPU here: preflight and site stop on the drift from the declared 8 x H200, after site's input check.
    assert rcs[by_word["gpufleet.vllm.preflight"]] != 0
    site_out = out.split("@@step %d" % by_word["gpufleet.vllm.preflight"])[1]
    assert rcs[by_word["gpufleet.vllm.site"]] != 0
    assert "Plan the instances" in site_out or "Work out the instances to serve" in site_out, site_out[-3000:]
    # The task that failed is gpu_preflight's (the first role), after the input check passed.
    failed_task = site_out.split("fatal:")[0].rsplit("TASK [", 1)[1].split("]")[0]
    assert failed_task.startswith("gpufleet.vllm.gpu_preflight"), failed_task
    assert "Resolve the snapshot at its source" in site_out
    assert "[WARNING]: Could not match supplied host pattern" not in out
    assert "changed=0" in site_out
    assert host_state() == before
    # The controller needs none of the engine's packages.
    pip_list = subprocess.run([str(project / ".venv" / "bin" / "python"), "-m", "pip", "list", "--format", "json"],
                              capture_output=True, text=True, check=True).stdout
    assert not {"vllm", "torch", "pynvml", "nvidia-ml-py"} & {p["name"].lower() for p in json.loads(pip_list)}
    shutil.rmtree(str(project / ".venv"), ignore_errors=True)
