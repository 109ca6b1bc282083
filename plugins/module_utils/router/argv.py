# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vllm-router command line the router role writes into router.json (what ``_router_argv`` built in Jinja, the
same list: tests/fixtures/units/router-argv.json). One table, flag -> role variable, in argv order (pure)."""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError

# vllm-router 0.1.17's flags the role sets, each from its router_* variable (roles/router/defaults/main.yml).
FLAGS = (
    ("--host", "router_host"), ("--port", "router_port"), ("--policy", "router_policy"),
    ("--prometheus-host", "router_metrics_host"), ("--prometheus-port", "router_metrics_port"),
    ("--cache-threshold", "router_cache_threshold"), ("--balance-abs-threshold", "router_balance_abs_threshold"),
    ("--balance-rel-threshold", "router_balance_rel_threshold"),
    ("--eviction-interval-secs", "router_eviction_interval_secs"), ("--max-tree-size", "router_max_tree_size"),
    ("--max-payload-size", "router_max_payload_size"), ("--request-timeout-secs", "router_request_timeout_secs"),
    ("--retry-max-retries", "router_retry_max_retries"), ("--retry-initial-backoff-ms", "router_retry_initial_backoff_ms"),
    ("--retry-max-backoff-ms", "router_retry_max_backoff_ms"), ("--cb-failure-threshold", "router_cb_failure_threshold"),
    ("--cb-success-threshold", "router_cb_success_threshold"),
    ("--cb-timeout-duration-secs", "router_cb_timeout_duration_secs"),
    ("--cb-window-duration-secs", "router_cb_window_duration_secs"),
    ("--health-check-endpoint", "router_health_check_endpoint"),
    ("--health-check-interval-secs", "router_health_check_interval_secs"),
    ("--health-check-timeout-secs", "router_health_check_timeout_secs"),
    ("--health-failure-threshold", "router_health_failure_threshold"),
    ("--health-success-threshold", "router_health_success_threshold"),
    ("--worker-startup-timeout-secs", "router_worker_startup_timeout_secs"), ("--log-level", "router_log_level"),
)
VARIABLES = tuple(var for _flag, var in FLAGS) + ("router_circuit_breaker", "router_extra_args")
_TRUE = ("1", "true", "yes", "on", "y", "t")


class RouterArgvError(UserError):
    """A router_* variable the command line needs is missing."""


def router_argv(values, venv):
    """[venv/bin/vllm-router, --flag, value, ...] from the role's variables (``values``: router_* name -> value);
    ``--disable-circuit-breaker`` unless router_circuit_breaker; router_extra_args last (argparse: the last wins)."""
    missing = [var for var in VARIABLES if var not in values]
    if missing:
        raise RouterArgvError("the router's command line needs %s: pass every router_* variable" % ", ".join(missing),
                              option=missing[0])
    argv = ["%s/bin/vllm-router" % venv]
    for flag, var in FLAGS:
        argv += [flag, str(values[var])]
    if str(values["router_circuit_breaker"]).strip().lower() not in _TRUE:
        argv.append("--disable-circuit-breaker")
    return argv + [str(arg) for arg in values["router_extra_args"] or []]
