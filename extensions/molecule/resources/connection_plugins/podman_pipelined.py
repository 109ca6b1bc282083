# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""TEST-HOST connection: containers.podman.podman with pipelining, for Molecule and the demo only.

The stock plugin runs four podman calls per task (mount, mkdir, exec the copied module, rm) and
says pipelining "does not work", because it never passes stdin to `podman exec`. With `exec -i`
it does: one podman call per task, about half the wall and controller time of the suite's tasks
(docs/DEVELOPING.md has the measurement). The container is mounted only when a file must really
be copied (copy, template, async jobs).
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

import shlex

from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.connection import ConnectionBase
from ansible_collections.containers.podman.plugins.connection.podman import Connection as PodmanConnection


class Connection(PodmanConnection):
    transport = "podman_pipelined"
    has_pipelining = True

    def _connect(self):
        # ConnectionBase's, not the stock plugin's: that one runs `podman mount` for every task.
        ConnectionBase._connect(self)
        self._connected = True
        return self

    def _mount_once(self):
        if self._mount_point is None:
            rc, out, _err = self._podman("mount")
            out = out.strip()
            self._mount_point = out if rc == 0 and out else False  # False: use `podman cp`

    def put_file(self, in_path, out_path):
        self._mount_once()
        return PodmanConnection.put_file(self, in_path, out_path)

    def fetch_file(self, in_path, out_path):
        self._mount_once()
        return PodmanConnection.fetch_file(self, in_path, out_path)

    def exec_command(self, cmd, in_data=None, sudoable=False):
        ConnectionBase.exec_command(self, cmd, in_data=in_data, sudoable=sudoable)
        argv = ["exec", "-i"] if in_data is not None else ["exec"]
        if self.user:
            argv.extend(("--user", self.user))
        return self._podman(argv, shlex.split(to_native(cmd, errors="surrogate_or_strict")), in_data)
