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
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan import instance as instance_record
from ansible_collections.gpufleet.vllm.plugins.module_utils.units.systemd_unit import SystemdQuoteError
from ansible_collections.gpufleet.vllm.plugins.module_utils.units import writer

SETTINGS = (
    "venv", "unit_prefix", "marker", "env_file", "header", "platform", "numa_binding", "shutdown_timeout",
    "cpu_omp_threads_bind", "cpu_reserved_cpus", "home", "cache_dir", "environment", "cluster", "cluster_hosts",
    "fabric_address", "fabric_iface", "engine_ready_timeout", "user", "group", "timeout_start_sec", "restart_sec",
    "limit_nofile", "limit_memlock", "read_write_paths", "device_allow", "rdma", "rdma_device_allow",
)
_TRUE = ("1", "true", "yes", "on", "y", "t")
NAME_RE = r"[A-Za-z0-9_.@:-]+\Z"  # what a unit name may hold (systemd.unit(5)): never a newline or a slash


class UnitRenderError(UserError):
    """A planned instance or a setting cannot be written into a unit."""


def to_bool(value):
    """Ansible's `bool` filter: True, 1, "yes", "true", "on" ... are true."""
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in _TRUE


def unit_name(prefix, name):
    return "%s-%s.service" % (prefix, name)


def exec_argv(instance, s):
    """ExecStart's argv: numactl for a known NUMA node, the venv's vllm, the plan's argv, the drain timeout."""
    argv = instance["argv"]
    numa = instance.get("numa_node")
    prefix = []
    if to_bool(s["numa_binding"]) and re.match(r"[0-9]+\Z", str(numa)):  # null, -1, "unknown" never bind
        prefix = ["/usr/bin/numactl", "--cpunodebind=%s" % numa, "--membind=%s" % numa, "--"]
    drain = []
    if int(s["shutdown_timeout"]) > 0 and not instance_record.gives_flag(instance, "--shutdown-timeout"):
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
    rec = instance_record.record(instance)
    name = writer.value(instance["name"], "instances.name")
    served = writer.value(rec["served_model_name"], "instances.argv").replace("%", "%%")
    listen = instance_record.listen_address(rec)
    connect = "127.0.0.1" if listen in ("0.0.0.0", "", "localhost") else ("::1" if listen == "::" else listen)
    url_host = "[%s]" % connect if ":" in connect else connect
    port = instance_record.DEFAULT_PORT if rec["port"] is None else rec["port"]
    what = ("headless member (node rank %s) of instance" % instance.get("node_rank") if headless
            else "OpenAI-compatible server, instance")
    after = ["network-online.target"] + ([] if s["platform"] == "cpu" else ["nvidia-persistenced.service"])
    lines = writer.unit_header("vLLM %s %s (%s)" % (what, name, served), "https://docs.vllm.ai/", after,
                               "%d" % (int(s["timeout_start_sec"]) + 600), 5, "instances")
    url = "X-GpufleetVllmHeadless=yes"
    if not headless:
        url = writer.directive("X-GpufleetVllmURL", "http://%s:%s" % (url_host, port), "instances.argv")
    lines += [writer.value("%s%s" % (s["marker"], name), "settings.marker"),
              writer.directive("X-GpufleetVllmServedModelName", served, "instances.argv"), url]
    if member:
        lines += [writer.directive("X-GpufleetVllmNodeRank", instance.get("node_rank"), "instances.node_rank"),
                  writer.directive("X-GpufleetVllmGroup", " ".join(s["cluster_hosts"]).replace("%", "%%"),
                                   "settings.cluster_hosts")]
    return lines + [writer.directive("X-GpufleetVllmGPUs", instance.get("cuda_visible_devices", ""),
                                     "instances.cuda_visible_devices")]


def _service_section(instance, s, member):
    cpu = s["platform"] == "cpu"
    lines = ["[Service]", "Type=exec"] + writer.account(s["user"], s["group"], "settings.", s["home"])
    lines.append(writer.directive("SyslogIdentifier", "%s-%s" % (s["unit_prefix"], instance["name"]), "instances.name"))
    lines += writer.environment(environment(instance, s, member), "settings.environment")
    lines += [
        writer.directive("EnvironmentFile", s["env_file"], "settings.env_file"),
        writer.exec_start(exec_argv(instance, s), "instances.argv"),
        "# SIGTERM to vLLM's main process only: it drains (--shutdown-timeout) and stops its workers.",
        "KillMode=mixed", "KillSignal=SIGTERM",
        writer.directive("TimeoutStartSec", s["timeout_start_sec"], "settings.timeout_start_sec"),
        "TimeoutStopSec=%d" % (int(s["shutdown_timeout"]) + 30),
        "Restart=on-failure", writer.directive("RestartSec", s["restart_sec"], "settings.restart_sec"),
        writer.directive("LimitNOFILE", s["limit_nofile"], "settings.limit_nofile"),
        writer.directive("LimitMEMLOCK", s["limit_memlock"], "settings.limit_memlock"),
        "# Hardening: no privilege gain, read-only system, private /tmp, %s."
        % ("no devices (CPU build)" if cpu else "only the NVIDIA devices"),
    ]
    lines += writer.hardening("engine", [s["home"], s["cache_dir"]] + list(s["read_write_paths"]), "settings.read_write_paths")
    rdma = list(s["rdma_device_allow"]) if member and to_bool(s["rdma"]) else []
    return lines + writer.device_allow(cpu, s["device_allow"], rdma, "settings.device_allow")


def render_unit(instance, settings):
    """The unit text for one planned instance (``name``, ``argv`` ["vllm", "serve", MODEL, ...], ``port``,
    ``cuda_visible_devices``, ``numa_node``, ``environment``, ``node_rank``, ``headless``)."""
    missing = [key for key in SETTINGS if key not in settings]
    if missing:
        raise UnitRenderError("settings lacks %s: pass every key of the settings option" % ", ".join(missing),
                              option="settings")
    for what, text in (("instances.name", instance.get("name")), ("settings.unit_prefix", settings["unit_prefix"])):
        if not re.match(NAME_RE, str(text)):
            raise UnitRenderError("%s is %r: a unit name is made of letters, digits, '_', '.', '@', ':', '-' (no newline, "
                                  "no '/'): fix vllm_instances or vllm_unit_prefix" % (what, text), option=what)
    argv = instance.get("argv")
    if not isinstance(argv, list) or len(argv) < 3 or argv[:2] != ["vllm", "serve"]:
        raise UnitRenderError("instance %s: argv must be a list starting vllm, serve, MODEL (got %r): fix the plan "
                              "or vllm_instances" % (instance.get("name"), argv), option="instances")
    member = to_bool(settings["cluster"])
    headless = member and to_bool(instance.get("headless", False))
    try:  # the sections first: every value is checked there, before the comments quote the name and the file
        unit = _unit_section(instance, settings, member, headless)
        service = _service_section(instance, settings, member)
    except SystemdQuoteError as exc:
        raise UnitRenderError("instance %s: %s (fix vllm_instances, vllm_environment or the profile)"
                              % (instance["name"], exc), option="instances")
    head = [writer.comment(settings["header"]),
            '# vLLM instance "%s", rendered by the gpufleet.vllm.vllm role from the plan.' % instance["name"],
            "# Secrets (HF_TOKEN, VLLM_API_KEY) live only in %s (mode 0600), never here." % settings["env_file"]]
    return writer.text(head, unit, service, trailing_blank=True)
