# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""pytest plugin: each test's CPU seconds (its worker's own, and the children it waited for: ansible-playbook runs),
one JSON line per test in $PYTEST_CPU_OUT (default /tmp/pytest-cpu.jsonl). A session fixture's set-up counts for
the first test that asks for it.

    PYTHONPATH=benchmarks .venv/bin/pytest -p pytest_cpu -n 2 tests/functional"""
from __future__ import absolute_import, division, print_function

import json
import os
import resource
import time

import pytest


def _cpu():
    own, waited = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, waited.ru_utime + waited.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):  # pylint: disable=unused-argument
    own0, waited0 = _cpu()
    wall0 = time.time()
    yield
    own1, waited1 = _cpu()
    with open(os.environ.get("PYTEST_CPU_OUT", "/tmp/pytest-cpu.jsonl"), "a") as handle:
        handle.write(json.dumps(dict(test=item.nodeid, own_cpu_s=round(own1 - own0, 2),
                                     children_cpu_s=round(waited1 - waited0, 2),
                                     wall_s=round(time.time() - wall0, 2))) + "\n")
