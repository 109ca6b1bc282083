# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The unit kinds besides the vLLM instance (render.py), written by writer.py: the Ray node of a group on Ray
(the vllm role, vllm_cluster_backend: ray), vLLM's router (the router role), NVIDIA's DCGM exporter (the
monitoring role) and NVIDIA's persistence daemon where the driver ships no unit (the host_tuning role). What the Jinja
templates vllm-ray.service.j2, vllm-router.service.j2, gpufleet-dcgm-exporter.service.j2 and
nvidia-persistenced.service.j2 wrote, byte for byte (tests/fixtures/units/ray-*, router-*, dcgm-*, persistenced-*).

``settings`` holds the role's values under short names (KIND_SETTINGS); the service_unit module's ``settings``
option documents them. Option names in errors are ``settings.<key>``.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError
from ansible_collections.gpufleet.vllm.plugins.module_utils.units.systemd_unit import SystemdQuoteError
from ansible_collections.gpufleet.vllm.plugins.module_utils.units import writer

KIND_SETTINGS = {
    "ray": ("header", "unit_name", "ray_version", "node_rank", "cluster_hosts", "token_file", "fabric_address",
            "fabric_iface", "argv", "ray_environment", "environment", "user", "group", "home", "cache_dir", "temp_dir",
            "read_write_paths", "limit_nofile", "limit_memlock", "platform", "device_allow", "rdma", "rdma_device_allow"),
    "router": ("header", "unit_name", "version", "model", "policy", "host", "config", "drained_dir", "python",
               "launcher", "user", "group"),
    "dcgm": ("header", "unit_name", "exporter", "counters", "port", "hostengine", "hostengine_address"),
    "persistenced": ("header", "unit_name", "program", "user"),
}
_TRUE = ("1", "true", "yes", "on", "y", "t")


class UnitKindError(UserError):
    """A unit kind or its settings are wrong."""


def _check(kind, s):
    if kind not in KIND_SETTINGS:
        raise UnitKindError("kind %r is not a unit kind: use one of %s" % (kind, ", ".join(sorted(KIND_SETTINGS))),
                            option="kind")
    missing = [key for key in KIND_SETTINGS[kind] if key not in s]
    if missing:
        raise UnitKindError("settings lacks %s for kind %s: pass every key the module documents"
                            % (", ".join(missing), kind), option="settings")
    for key in KIND_SETTINGS[kind]:
        for item in (s[key] if isinstance(s[key], (list, tuple)) else [s[key]]):
            if not isinstance(item, dict):
                writer.value(item, "settings." + key)


def ray_environment(s):
    """The Ray node's environment, sorted by name: Ray's token settings, the caches, the fabric, no usage
    report, then vllm_environment over all of it."""
    cache = s["cache_dir"]
    env = dict(s["ray_environment"])
    env.update(HOME=s["home"], HF_HOME=cache + "/huggingface", VLLM_CACHE_ROOT=cache + "/vllm", XDG_CACHE_HOME=cache,
               TRITON_CACHE_DIR=cache + "/triton", VLLM_HOST_IP=s["fabric_address"], GLOO_SOCKET_IFNAME=s["fabric_iface"],
               NCCL_SOCKET_IFNAME=s["fabric_iface"], VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1")
    env.update(s["environment"] or {})
    return dict((name, str(env[name])) for name in sorted(env, key=lambda n: str(n).lower()))  # Jinja dictsort


def _ray_head(s, role):
    return [writer.comment(s["header"])] + writer.comment_lines([
        "Ray %s %s of the vLLM group %s" % (s["ray_version"], role, " ".join(s["cluster_hosts"])),
        "(vllm_cluster_backend: ray), rendered by the gpufleet.vllm.vllm role. vLLM's Ray executor runs its ranks",
        "in this unit's processes: they get the vllm unit's account, caches, limits and devices.",
        "Ray's control plane needs the token in %s (RAY_AUTH_MODE=token); its ports are" % s["token_file"],
        "planned (ray_cluster.py) and bound to %s (%s): keep them on that network." % (s["fabric_iface"], s["fabric_address"]),
    ], "settings")


def ray_unit(s):
    """The Ray node's unit (``ray start --block`` as the vllm account, the engine hardening and device rule)."""
    _check("ray", s)
    role = "head" if int(s["node_rank"]) == 0 else "worker"
    cpu = s["platform"] == "cpu"
    unit = writer.unit_header("Ray %s for the vLLM group %s (node rank %s)" % (role, s["cluster_hosts"][0], s["node_rank"]),
                              "https://docs.ray.io/en/latest/ray-security/token-auth.html",
                              ["network-online.target", "nvidia-persistenced.service"], 600, 10, "settings")
    service = ["[Service]", "Type=exec"] + writer.account(s["user"], s["group"], "settings.", s["home"])
    service.append(writer.directive("SyslogIdentifier", s["unit_name"], "settings.unit_name"))
    service += writer.environment(ray_environment(s), "settings.environment")
    service += [writer.exec_start([str(a) for a in s["argv"]], "settings.argv"),
                "# `ray start --block` stops the daemons it started on SIGTERM; what is left in the cgroup goes after "
                "TimeoutStopSec.", "KillSignal=SIGTERM", "TimeoutStopSec=60", "Restart=on-failure", "RestartSec=5",
                writer.directive("LimitNOFILE", s["limit_nofile"], "settings.limit_nofile"),
                writer.directive("LimitMEMLOCK", s["limit_memlock"], "settings.limit_memlock"),
                "# Hardening as the vllm units: no privilege gain, read-only system, private /tmp, %s."
                % ("no devices (CPU build)" if cpu else "only the NVIDIA devices")]
    paths = []
    for path in [s["home"], s["cache_dir"], s["temp_dir"]] + list(s["read_write_paths"]):
        if path not in paths:
            paths.append(path)
    service += writer.hardening("engine", paths, "settings.read_write_paths")
    rdma = list(s["rdma_device_allow"]) if str(s["rdma"]).strip().lower() in _TRUE else []
    service += writer.device_allow(cpu, s["device_allow"], rdma, "settings.device_allow")
    return writer.text(_ray_head(s, role), unit, service)


def router_unit(s):
    """vLLM's router: its launcher (the worker list minus the drained set), the network-service hardening."""
    _check("router", s)
    model = str(s["model"]).replace("%", "%%")
    head = [writer.comment(s["header"])] + writer.comment_lines([
        "vLLM's router (vllm-router %s) for model %s, rendered by gpufleet.vllm.router." % (s["version"], model),
        "Workers: %s minus the drained set in %s (router_launch.py)." % (s["config"], s["drained_dir"]),
        "Its admin routes (/add_worker, /remove_worker, /list_workers, ...) need no key: it listens on",
        "%s only, and nginx forwards the OpenAI paths alone." % s["host"],
    ], "settings")
    unit = writer.unit_header("vLLM router %s (%s) for %s" % (s["version"], s["policy"], model),
                              "https://github.com/vllm-project/router", ["network-online.target"], 300, 5, "settings")
    service = ["[Service]", "Type=exec"] + writer.account(s["user"], s["group"], "settings.")
    service += [writer.directive("SyslogIdentifier", s["unit_name"], "settings.unit_name"),
                writer.exec_start([s["python"], s["launcher"], s["config"]], "settings.python"),
                "Restart=on-failure", "RestartSec=2", "TimeoutStopSec=30",
                "# Hardening: its own account, read-only system, no home, no devices, no privilege gain, IP sockets only."]
    service += writer.hardening("network_service")
    return writer.text(head, unit, service)


def dcgm_unit(s):
    """NVIDIA's DCGM exporter (the monitoring role): connected to a running nvidia-dcgm host engine, or embedding one."""
    _check("dcgm", s)
    hostengine = str(s["hostengine"]).strip().lower() in _TRUE
    unit = ["[Unit]", "Description=NVIDIA DCGM exporter (gpufleet.vllm monitoring)"]
    if hostengine:
        unit += ["# The nvidia-dcgm host engine runs: connect to it rather than embedding a second one.",
                 "After=network-online.target nvidia-dcgm.service", "Wants=nvidia-dcgm.service"]
    else:
        unit.append("After=network-online.target")
    argv = [s["exporter"], "--collectors", s["counters"], "--address", ":%s" % s["port"]]
    if hostengine:
        argv += ["--remote-hostengine-info", s["hostengine_address"]]
    service = ["[Service]", "Type=simple", writer.exec_start([str(a) for a in argv], "settings.counters"),
               "Restart=on-failure", "RestartSec=10"] + writer.hardening("exporter")
    return writer.text(["# " + writer.value(s["header"], "settings.header")], unit, service)


def persistenced_unit(s):
    """NVIDIA's persistence daemon as NVIDIA's sample unit runs it (nvidia-persistenced/init/systemd): forking, the
    daemon dropping root for ``user``. Only where the driver shipped no unit of its own."""
    _check("persistenced", s)
    unit = ["[Unit]", "Description=NVIDIA Persistence Daemon (keeps GPUs initialised between CUDA processes)",
            "Wants=syslog.target"]
    service = ["[Service]", "Type=forking",
               "# As NVIDIA's sample unit (nvidia-persistenced/init/systemd): the daemon drops root for this user.",
               writer.exec_start([s["program"], "--user", s["user"], "--verbose"], "settings.user"),
               "ExecStopPost=/bin/rm -rf /var/run/nvidia-persistenced",
               "PIDFile=/var/run/nvidia-persistenced/nvidia-persistenced.pid"]
    return writer.text([writer.comment(writer.value(s["header"], "settings.header"))], unit, service)


KINDS = {"ray": ray_unit, "router": router_unit, "dcgm": dcgm_unit, "persistenced": persistenced_unit}


def render_kind(kind, settings):
    """The unit text of one ``kind`` (ray, router, dcgm, persistenced) from its settings."""
    if kind not in KINDS:
        _check(kind, settings or {})
    try:
        return KINDS[kind](settings or {})
    except SystemdQuoteError as exc:
        raise UnitKindError("the %s unit: %s (fix the role variable behind settings.argv or settings.environment)"
                            % (kind, exc), option="settings")
