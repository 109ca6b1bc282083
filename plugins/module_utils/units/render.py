# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Render one vLLM instance's systemd unit from the plan (what vllm-instance.service.j2 did in Jinja).

``settings`` holds the role's values under short names (``venv``, ``platform``, ``user``, ...; the
module's ``settings`` option lists them). The text is byte-identical to the template's output for the
same inputs (tests/fixtures/units/).
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError
from ansible_collections.gpufleet.vllm.plugins.module_utils.systemd_unit import (
    SystemdQuoteError,
    quote_environment,
    quote_exec_argv,
)

SETTINGS = (
    "venv", "unit_prefix", "marker", "env_file", "header", "platform", "numa_binding", "shutdown_timeout",
    "cpu_omp_threads_bind", "cpu_reserved_cpus", "home", "cache_dir", "environment", "cluster", "cluster_hosts",
    "fabric_address", "fabric_iface", "engine_ready_timeout", "user", "group", "timeout_start_sec", "restart_sec",
    "limit_nofile", "limit_memlock", "read_write_paths", "device_allow", "rdma", "rdma_device_allow",
)
_TRUE = ("1", "true", "yes", "on", "y", "t")


class UnitRenderError(UserError):
    """A planned instance or a setting cannot be written into a unit."""


def to_bool(value):
    """Ansible's `bool` filter: True, 1, "yes", "true", "on" ... are true."""
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in _TRUE


def unit_name(prefix, name):
    return "%s-%s.service" % (prefix, name)


def comment(text):
    """Ansible's `comment` filter with its defaults (a '#' line above and below)."""
    return "\n".join(["#"] + ["# " + line for line in str(text).splitlines()] + ["#"])


def flags(argv):
    """The planned argv's flags, "--flag value" and "--flag=value" alike (the last one wins)."""
    opts = {}
    for i, arg in enumerate(argv):
        if isinstance(arg, str) and arg.startswith("--"):
            if "=" in arg:
                key, value = arg.split("=", 1)
                opts[key] = value
            elif i + 1 < len(argv):
                opts[arg] = argv[i + 1]
    return opts


def exec_argv(instance, s):
    """ExecStart's argv: numactl for a known NUMA node, the venv's vllm, the plan's argv, the drain timeout."""
    argv = instance["argv"]
    numa = instance.get("numa_node")
    prefix = []
    if to_bool(s["numa_binding"]) and re.match(r"[0-9]+\Z", str(numa)):  # null, -1, "unknown" never bind
        prefix = ["/usr/bin/numactl", "--cpunodebind=%s" % numa, "--membind=%s" % numa, "--"]
    drain = []
    if int(s["shutdown_timeout"]) > 0 and "--shutdown-timeout" not in flags(argv):
        drain = ["--shutdown-timeout", str(s["shutdown_timeout"])]
    return prefix + [s["venv"] + "/bin/vllm"] + [str(a) for a in argv[1:]] + drain


def environment(instance, s, member):
    cpu = s["platform"] == "cpu"
    if cpu:  # the CPU build: the platform is explicit, the KV space comes from the plan
        env = {"VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_OMP_THREADS_BIND": str(s["cpu_omp_threads_bind"])}
        if str(s["cpu_reserved_cpus"]):
            env["VLLM_CPU_NUM_OF_RESERVED_CPU"] = str(s["cpu_reserved_cpus"])
    else:
        env = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
        if "cuda_visible_devices" in instance:
            env["CUDA_VISIBLE_DEVICES"] = str(instance["cuda_visible_devices"])
    env.update((name, str(value)) for name, value in (instance.get("environment") or {}).items())
    cache = s["cache_dir"]
    env.update(HOME=s["home"], HF_HOME=cache + "/huggingface", VLLM_CACHE_ROOT=cache + "/vllm", XDG_CACHE_HOME=cache,
               TRITON_CACHE_DIR=cache + "/triton")
    if member:  # its address and interface on the group's network; the head waits for every rank
        env.update(VLLM_HOST_IP=s["fabric_address"], GLOO_SOCKET_IFNAME=s["fabric_iface"],
                   VLLM_ENGINE_READY_TIMEOUT_S=str(s["engine_ready_timeout"]))
        if not cpu:
            env["NCCL_SOCKET_IFNAME"] = s["fabric_iface"]
    env.update(s["environment"] or {})
    return env


def _unit_section(instance, s, member, headless):
    argv = instance["argv"]
    opts = flags(argv)
    name = instance["name"]
    served = str(opts.get("--served-model-name", argv[2])).replace("%", "%%")  # % is a systemd specifier
    listen = opts.get("--host", "0.0.0.0")
    connect = "127.0.0.1" if listen in ("0.0.0.0", "", "localhost") else ("::1" if listen == "::" else listen)
    url_host = "[%s]" % connect if ":" in connect else connect
    port = opts.get("--port", instance.get("port", 8000))
    what = ("headless member (node rank %s) of instance" % instance.get("node_rank") if headless
            else "OpenAI-compatible server, instance")
    lines = [
        "[Unit]",
        "Description=vLLM %s %s (%s)" % (what, name, served),
        "Documentation=https://docs.vllm.ai/",
        "Wants=network-online.target",
        "After=network-online.target" + ("" if s["platform"] == "cpu" else " nvidia-persistenced.service"),
        "StartLimitIntervalSec=%d" % (int(s["timeout_start_sec"]) + 600),
        "StartLimitBurst=5",
        "%s%s" % (s["marker"], name),
        "X-GpufleetVllmServedModelName=%s" % served,
        "X-GpufleetVllmHeadless=yes" if headless else "X-GpufleetVllmURL=http://%s:%s" % (url_host, port),
    ]
    if member:
        lines += ["X-GpufleetVllmNodeRank=%s" % instance.get("node_rank"),
                  "X-GpufleetVllmGroup=%s" % " ".join(s["cluster_hosts"]).replace("%", "%%")]
    return lines + ["X-GpufleetVllmGPUs=%s" % instance.get("cuda_visible_devices", "")]


def _service_section(instance, s, member):
    cpu = s["platform"] == "cpu"
    lines = ["[Service]", "Type=exec", "User=%s" % s["user"], "Group=%s" % s["group"],
             "WorkingDirectory=%s" % s["home"], "SyslogIdentifier=%s-%s" % (s["unit_prefix"], instance["name"])]
    lines += ["Environment=" + quote_environment(k, v) for k, v in environment(instance, s, member).items()]
    lines += [
        "EnvironmentFile=%s" % s["env_file"],
        "ExecStart=" + quote_exec_argv(exec_argv(instance, s)),
        "# SIGTERM to vLLM's main process only: it drains (--shutdown-timeout) and stops its workers.",
        "KillMode=mixed", "KillSignal=SIGTERM",
        "TimeoutStartSec=%s" % s["timeout_start_sec"],
        "TimeoutStopSec=%d" % (int(s["shutdown_timeout"]) + 30),
        "Restart=on-failure", "RestartSec=%s" % s["restart_sec"],
        "LimitNOFILE=%s" % s["limit_nofile"], "LimitMEMLOCK=%s" % s["limit_memlock"],
        "# Hardening: no privilege gain, read-only system, private /tmp, %s."
        % ("no devices (CPU build)" if cpu else "only the NVIDIA devices"),
        "NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=read-only",
        "ReadWritePaths=%s" % " ".join([s["home"], s["cache_dir"]] + list(s["read_write_paths"])),
        "PrivateTmp=yes", "ProtectKernelModules=yes", "ProtectKernelTunables=yes", "ProtectControlGroups=yes",
        "RestrictSUIDSGID=yes", "LockPersonality=yes", "DevicePolicy=closed",
    ]
    devices = ([] if cpu else list(s["device_allow"])) + (list(s["rdma_device_allow"]) if member and to_bool(s["rdma"]) else [])
    return lines + ["DeviceAllow=%s" % device for device in devices]


def render_unit(instance, settings):
    """The unit text for one planned instance (``name``, ``argv`` ["vllm", "serve", MODEL, ...], ``port``,
    ``cuda_visible_devices``, ``numa_node``, ``environment``, ``node_rank``, ``headless``)."""
    missing = [key for key in SETTINGS if key not in settings]
    if missing:
        raise UnitRenderError("settings lacks %s: pass every key of the settings option" % ", ".join(missing),
                              option="settings")
    argv = instance.get("argv")
    if not isinstance(argv, list) or len(argv) < 3 or argv[:2] != ["vllm", "serve"]:
        raise UnitRenderError("instance %s: argv must be a list starting vllm, serve, MODEL (got %r): fix the plan "
                              "or vllm_instances" % (instance.get("name"), argv), option="instances")
    member = to_bool(settings["cluster"])
    headless = member and to_bool(instance.get("headless", False))
    head = [comment(settings["header"]),
            '# vLLM instance "%s", rendered by the gpufleet.vllm.vllm role from the plan.' % instance["name"],
            "# Secrets (HF_TOKEN, VLLM_API_KEY) live only in %s (mode 0600), never here." % settings["env_file"]]
    try:
        body = _unit_section(instance, settings, member, headless) + [""] + _service_section(instance, settings, member)
    except SystemdQuoteError as exc:
        raise UnitRenderError("instance %s: %s (fix vllm_instances, vllm_environment or the profile)"
                              % (instance["name"], exc), option="instances")
    return "\n".join(head + body + ["", "[Install]", "WantedBy=multi-user.target", "", ""])
