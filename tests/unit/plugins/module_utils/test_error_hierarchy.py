# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One exception hierarchy: every exception class defined in plugins/module_utils derives from UserError.

The modules' error boundary (run_guarded) reports a UserError as is; a domain error outside it would
be reported as a bug, or force a re-wrap block in a module (tests/functional/test_house_rules.py
checks the modules have none).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib
import inspect
import pkgutil

from ansible_collections.gpufleet.vllm.plugins import module_utils
from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError, failure_result


def defined_exceptions():
    found = {}
    for info in pkgutil.walk_packages(module_utils.__path__, module_utils.__name__ + "."):
        mod = importlib.import_module(info.name)
        for name, obj in vars(mod).items():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == mod.__name__:
                found["%s.%s" % (info.name.rsplit(".", 1)[-1], name)] = obj
    return found


def test_every_domain_error_is_a_user_error():
    found = defined_exceptions()
    # the walk found the packages' classes too (weights, bench) and the round-2 outsiders
    for name in ("nvml.NvmlFatalError", "mig.MigPlanError", "placement.PlacementError", "errors.WeightsError",
                 "kv_capacity.CapacityError", "model_config.ModelConfigError", "gpu_gather.NoGpu"):
        assert name in found, sorted(found)
    outside = sorted(name for name, cls in found.items() if not issubclass(cls, UserError))
    assert not outside, "exceptions not derived from UserError: %s" % outside


def test_value_error_compatibility_kept():
    """The errors that were ValueErrors still are: callers inside module_utils catch ValueError."""
    found = defined_exceptions()
    for name in ("placement.PlacementError", "kv_capacity.CapacityError", "model_config.ModelConfigError",
                 "nvidia_smi.NvidiaSmiParseError", "hardware_profiles.ProfileError"):
        assert issubclass(found[name], ValueError), name


def test_domain_errors_report_their_details():
    found = defined_exceptions()
    nvml_error = found["nvml.NvmlFatalError"]("gpu_is_lost", "nvmlDeviceGetCount: GPU is lost")
    assert failure_result(nvml_error, "x") == {
        "msg": "NVML unusable (gpu_is_lost): nvmlDeviceGetCount: GPU is lost. Fix: a GPU fell off the bus: check "
               "dmesg for Xid 79, then reset or reboot", "kind": "gpu_is_lost"}
    mig_error = found["mig.MigPlanError"](["GPU0 (H200) is in use by pid 1 (x)"], [{"index": 0}])
    assert failure_result(mig_error, "x") == {"msg": "nvidia_mig: GPU0 (H200) is in use by pid 1 (x)",
                                              "problems": ["GPU0 (H200) is in use by pid 1 (x)"],
                                              "gpus": [{"index": 0}]}
