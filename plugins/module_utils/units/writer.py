# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one systemd unit writer of the collection (in the shape of containers.podman's Quadlet base class):
one hardening table with named profiles, one [Unit] header builder, one environment builder, one device rule,
and the text assembled in one place. The kinds are built on it: the vLLM instance (render.py), the Ray node
and the router (kinds.py). Pure, no Ansible import.

Every value that lands in a unit goes through ``value()``: a newline or another control character would add a
line (a root ``ExecStartPre=+`` among them), so it is refused with a UserError naming the option. Quoting of
``ExecStart=`` and ``Environment=`` is systemd_unit.py's.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError
from ansible_collections.gpufleet.vllm.plugins.module_utils.units.systemd_unit import quote_environment, quote_exec_argv

# The slot of a profile where the kind's ReadWritePaths= goes.
READ_WRITE_PATHS = "ReadWritePaths"
HARDENING = {
    # vLLM instances and the Ray node under them: read-only system, writable home and caches, only the devices
    # the device rule allows (DevicePolicy=closed).
    "engine": (
        "NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=read-only", READ_WRITE_PATHS, "PrivateTmp=yes",
        "ProtectKernelModules=yes", "ProtectKernelTunables=yes", "ProtectControlGroups=yes", "RestrictSUIDSGID=yes",
        "LockPersonality=yes", "DevicePolicy=closed",
    ),
    # A network service of its own account: no home, no devices, no capabilities, IP sockets only.
    "network_service": (
        "NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes", "PrivateDevices=yes",
        "DevicePolicy=closed", "ProtectKernelModules=yes", "ProtectKernelTunables=yes", "ProtectKernelLogs=yes",
        "ProtectControlGroups=yes", "ProtectClock=yes", "ProtectHostname=yes", "RestrictSUIDSGID=yes",
        "RestrictRealtime=yes", "RestrictNamespaces=yes", "LockPersonality=yes", "CapabilityBoundingSet=",
        "AmbientCapabilities=", "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX", "SystemCallArchitectures=native",
        "UMask=0077",
    ),
    # NVIDIA's DCGM exporter as root (it reads the GPUs through DCGM): no privilege gain, /usr and /boot read-only.
    "exporter": ("NoNewPrivileges=true", "ProtectHome=true", "ProtectSystem=full"),
}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class UnitValueError(UserError):
    """A value cannot be written into a unit (a newline or control character, a bad quote)."""


def value(text, option):
    """``text`` as a string, refused when it holds a newline or another control character."""
    text = str(text)
    if _CONTROL.search(text):
        raise UnitValueError("%s is %r: a newline or control character would add a line to the systemd unit. Give it "
                             "without control characters." % (option, text), option=option)
    return text


def directive(key, text, option):
    """One ``Key=value`` line."""
    return "%s=%s" % (key, value(text, option))


def comment(text):
    """Ansible's `comment` filter with its defaults (a '#' line above and below): the ansible_managed header."""
    return "\n".join(["#"] + ["# " + line for line in str(text).splitlines()] + ["#"])


def comment_lines(lines, option):
    """Free-text comment lines of a unit ('#' first), each value checked."""
    return ["# " + value(line, option) if line else "#" for line in lines]


def unit_header(description, documentation, after, start_limit_interval, start_limit_burst, option,
                wants="network-online.target"):
    """The [Unit] section's common lines: Description, Documentation, Wants, After, StartLimit*."""
    return [
        "[Unit]",
        directive("Description", description, option),
        directive("Documentation", documentation, option),
        directive("Wants", wants, option),
        directive("After", " ".join(after), option),
        directive("StartLimitIntervalSec", start_limit_interval, option),
        directive("StartLimitBurst", start_limit_burst, option),
    ]


def account(user, group, option_prefix, home=None):
    """User=, Group= (and WorkingDirectory= for a service that has a home)."""
    lines = [directive("User", user, option_prefix + "user"), directive("Group", group, option_prefix + "group")]
    if home is not None:
        lines.append(directive("WorkingDirectory", home, option_prefix + "home"))
    return lines


def environment(env, option):
    """One ``Environment=`` line per variable, in the mapping's order, quoted by systemd's rules."""
    return ["Environment=" + quote_environment(value(name, option), value(text, "%s.%s" % (option, name)))
            for name, text in env.items()]


def exec_start(argv, option):
    """``ExecStart=`` for an argv (every word checked, then quoted; systemd_unit's SystemdQuoteError for what
    cannot be quoted, which the kind names)."""
    return "ExecStart=" + quote_exec_argv([value(word, option) for word in argv])


def hardening(profile, read_write_paths=(), option="read_write_paths"):
    """The profile's lines, its ReadWritePaths slot filled with ``read_write_paths`` (space-joined)."""
    lines = []
    for line in HARDENING[profile]:
        if line == READ_WRITE_PATHS:
            line = directive(READ_WRITE_PATHS, " ".join(value(p, option) for p in read_write_paths), option)
        lines.append(line)
    return lines


def device_allow(cpu, devices, rdma_devices, option="device_allow"):
    """The device rule: the accelerator's devices unless the CPU build runs, then the RDMA devices when used."""
    return [directive("DeviceAllow", d, option) for d in ([] if cpu else list(devices)) + list(rdma_devices)]


def text(head, unit, service, trailing_blank=False):
    """The unit file: header comments, [Unit], [Service], [Install] (WantedBy=multi-user.target)."""
    tail = ["", "[Install]", "WantedBy=multi-user.target", ""] + ([""] if trailing_blank else [])
    return "\n".join(list(head) + list(unit) + [""] + list(service) + tail)
