# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""TEST-HOST connection: containers.podman.podman with pipelining, for Molecule and the demo only.

The stock plugin runs four podman calls per task (mount, mkdir, exec the copied module, rm) and
says pipelining "does not work", because it never passes stdin to `podman exec`. With `exec -i`
it does: one podman call per task, about half the wall and controller time of the suite's tasks
(docs/DEVELOPING.md has the measurement). The container is mounted only when a file must really
be copied (copy, template, async jobs).

As root on the controller (the suite and the demo run as root), each command enters the container's
namespaces with nsenter(1) instead of `podman exec`: podman, conmon and runc cost about 0.3 s of a loaded
2-core machine per call, nsenter under 0.01 s (measured side by side, docs/DEVELOPING.md). The command
runs as the container's root with the container's environment (podman's Config.Env), its root directory
and its working directory: what `podman exec` gives it, minus the container's cgroup (systemd inside
still starts every service in its own). The container's init PID and environment are read once with
`podman inspect` and kept in a file on the controller, checked against /proc/<pid>/environ's
container_uuid before each use. GPUFLEET_PODMAN_NSENTER=0 goes back to `podman exec`.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = """
name: podman_pipelined
short_description: Run tasks in a local podman container, with pipelining (test hosts)
description:
  - M(containers.podman.podman)'s connection with pipelining enabled (C(podman exec -i)) and the container
    mounted only for file transfers. Used by the collection's Molecule scenarios and demo; not part of the
    collection's public content.
author: gpufleet.vllm contributors
options:
  remote_addr:
    description: The container's ID or name.
    default: inventory_hostname
    vars:
      - name: inventory_hostname
      - name: ansible_host
      - name: ansible_podman_host
  remote_user:
    description: The user inside the container (C(podman exec --user)).
    vars:
      - name: ansible_user
  podman_executable:
    description: The podman binary.
    default: podman
    vars:
      - name: ansible_podman_executable
    env:
      - name: ANSIBLE_PODMAN_EXECUTABLE
  podman_extra_args:
    description: Extra arguments for every podman call.
    default: ""
    vars:
      - name: ansible_podman_extra_args
    env:
      - name: ANSIBLE_PODMAN_EXTRA_ARGS
"""

import json
import os
import shlex
import shutil
import subprocess
import tempfile

from ansible.errors import AnsibleError
from ansible.module_utils.common.text.converters import to_bytes, to_native
from ansible.plugins.connection import ConnectionBase
from ansible.utils.display import Display
from ansible_collections.containers.podman.plugins.connection.podman import Connection as PodmanConnection


display = Display()


class Connection(PodmanConnection):
    transport = "podman_pipelined"
    has_pipelining = True

    def _connect(self):
        # ConnectionBase's, not the stock plugin's: that one runs `podman mount` for every task.
        ConnectionBase._connect(self)
        self._connected = True
        return self

    # --- nsenter path (root on the controller) ---------------------------------------------------------
    def _nsenter_target(self):
        """(pid, env) of the container's init, or None to use podman exec."""
        if getattr(self, "_ns_target", "unset") != "unset":
            return self._ns_target
        self._ns_target = None
        if (os.environ.get("GPUFLEET_PODMAN_NSENTER", "1") == "0" or self.user or os.geteuid() != 0
                or not shutil.which("nsenter")):
            return None
        cache = os.path.join(tempfile.gettempdir(), "gpufleet-podman-ns", "%s.json" % self._container_id)
        target = _read_target(cache)
        if target is None or not _init_is(target["pid"], target["uuid"]):
            target = self._inspect_target()
            if target is None:
                return None
            _write_target(cache, target)
        self._ns_target = (target["pid"], target["env"])
        return self._ns_target

    def _inspect_target(self):
        rc, out, _err = self._podman("inspect", ["--format", "{{.State.Pid}} {{.Id}} {{json .Config.Env}}",
                                     self._container_id], use_container_id=False)
        if rc != 0:
            return None
        pid, cid, env = to_native(out).strip().split(" ", 2)
        target = {"pid": int(pid), "uuid": cid[:32], "env": json.loads(env)}
        return target if target["pid"] > 0 and _init_is(target["pid"], target["uuid"]) else None

    def _nsenter(self, target, argv, stdin=None, in_data=None):
        pid, env = target
        local = ["nsenter", "--target", str(pid), "--mount", "--uts", "--ipc", "--net", "--pid", "--root", "--wd", "--"]
        local += ["/usr/bin/env", "-i"] + env + argv
        display.vvv("RUN %s" % (local,), host=self._container_id)  # as the stock plugin shows its podman calls
        proc = subprocess.Popen([to_bytes(a, errors="surrogate_or_strict") for a in local], shell=False,
                                stdin=stdin if stdin is not None else subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = proc.communicate(input=in_data)
        return proc.returncode, out, err

    def _mount_once(self):
        if self._mount_point is None:
            rc, out, _err = self._podman("mount")
            out = out.strip()
            self._mount_point = out if rc == 0 and out else False  # False: use `podman cp`

    def put_file(self, in_path, out_path):
        target = self._nsenter_target()
        if target is None:
            self._mount_once()
            return PodmanConnection.put_file(self, in_path, out_path)
        ConnectionBase.put_file(self, in_path, out_path)
        display.vvv("PUT %s TO %s" % (in_path, out_path), host=self._container_id)
        with open(in_path, "rb") as handle:
            rc, _out, err = self._nsenter(target, ["/bin/sh", "-c", 'cat > "$0"', out_path], stdin=handle)
        if rc != 0:
            raise AnsibleError("Failed to copy %s to %s in container %s: %s" % (in_path, out_path, self._container_id, to_native(err)))
        return None

    def fetch_file(self, in_path, out_path):
        target = self._nsenter_target()
        if target is None:
            self._mount_once()
            return PodmanConnection.fetch_file(self, in_path, out_path)
        ConnectionBase.fetch_file(self, in_path, out_path)
        display.vvv("FETCH %s TO %s" % (in_path, out_path), host=self._container_id)
        rc, out, err = self._nsenter(target, ["/bin/cat", "--", in_path])
        if rc != 0:
            raise AnsibleError("Failed to fetch %s from container %s: %s" % (in_path, self._container_id, to_native(err)))
        with open(out_path, "wb") as handle:
            handle.write(out)
        return None

    def exec_command(self, cmd, in_data=None, sudoable=False):
        ConnectionBase.exec_command(self, cmd, in_data=in_data, sudoable=sudoable)
        target = self._nsenter_target()
        if target is not None:
            return self._nsenter(target, shlex.split(to_native(cmd, errors="surrogate_or_strict")), in_data=in_data)
        argv = ["exec", "-i"] if in_data is not None else ["exec"]
        if self.user:
            argv.extend(("--user", self.user))
        return self._podman(argv, shlex.split(to_native(cmd, errors="surrogate_or_strict")), in_data)


def _init_is(pid, uuid):
    """True when PID is the init of the container whose ID starts with uuid (its environment says so)."""
    try:
        with open("/proc/%d/environ" % pid, "rb") as handle:
            return ("container_uuid=%s" % uuid).encode() in handle.read().split(b"\0")
    except (IOError, OSError):
        return False


def _read_target(path):
    try:
        with open(path) as handle:
            return json.load(handle)
    except (IOError, OSError, ValueError):
        return None


def _write_target(path, target):
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder)
    with os.fdopen(fd, "w") as handle:
        json.dump(target, handle)
    os.rename(tmp, path)
