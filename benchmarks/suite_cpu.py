# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the suite's CPU goes, per step: run a command (the suite) and account each step's CPU seconds.

    sudo .venv/bin/python benchmarks/suite_cpu.py --out /tmp/suite-cpu.json -- env CI=true bash .ci/run

As root, on cgroup v1 (cpuacct) or v2. Every half second it looks for the processes that start a step of
scripts/test.sh (STEPS: sanity, lint, units, pytest, a Molecule scenario, the set-up scripts) and moves each such
process and its descendants into a cgroup of that step's own, which the children they start later inherit; each
running test host (a podman container) is read from its own cgroup. The JSON: the command's exit code and wall
seconds, the CPU seconds each step and each test host used, and the machine's busy and idle CPU seconds meanwhile.
A step's processes are counted from the moment they are moved, so a step that ends within half a second may be
missed. The suite's connection enters the test hosts with nsenter, outside their cgroups: the modules Ansible runs
there, and the jobs they start (pip's installs included), count for the Molecule scenario's step; a test host's own
figure is what its systemd starts (the vLLM engines, the router, nginx, the exporters).
Measured on cgroup v1 (the development and CI machines); the v2 branch follows the kernel's documented cpu.stat
and is not exercised there."""
from __future__ import absolute_import, division, print_function

import argparse
import json
import os
import re
import subprocess
import sys
import time

# (step, pattern of a command line that starts it): the first match names the step; a %s takes the group.
STEPS = (
    ("sanity", r"ansible-test\.sh sanity"),
    ("units", r"ansible-test\.sh units"),
    ("lint", r"scripts/lint\.sh"),
    ("pytest", r"bin/pytest "),
    ("parser-venvs", r"scripts/vllm-(wheelhouse|venv)\.sh"),
    ("cpu-wheelhouse", r"scripts/vllm-cpu-wheelhouse\.sh"),
    ("testhost-image", r"scripts/build-testhost-image\.sh"),
    ("setup", r"scripts/setup\.sh"),
    ("molecule:%s", r"scripts/molecule\.sh test -s (\S+)"),
)
GROUP = "gpufleet-suite-cpu"


def step_of(cmdline):
    """The step a process's command line starts, or None."""
    for name, pattern in STEPS:
        found = re.search(pattern, cmdline)
        if found:
            return name % found.group(found.lastindex) if "%s" in name else name
    return None


def cgroup_name(step):
    """The step's cgroup folder name."""
    return re.sub(r"[^A-Za-z0-9_.:-]", "_", step)


class Cgroups(object):
    """One cgroup per step under the cpuacct hierarchy (v1) or the unified one (v2)."""

    def __init__(self):
        if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
            self.version, self.root = 2, "/sys/fs/cgroup"
        elif os.path.isdir("/sys/fs/cgroup/cpuacct"):
            self.version, self.root = 1, "/sys/fs/cgroup/cpuacct"
        else:
            raise SystemExit("suite_cpu.py: no cgroup v2 and no cgroup v1 cpuacct hierarchy under /sys/fs/cgroup")
        self.base = os.path.join(self.root, GROUP, str(os.getpid()))  # this run's own: no earlier run's seconds
        try:
            os.makedirs(self.base, exist_ok=True)
        except OSError as exc:
            raise SystemExit("suite_cpu.py: cannot create %s (%s): run it as root" % (self.base, exc))

    def path_of(self, pid):
        """The pid's cgroup path in this hierarchy ('' when it is gone)."""
        try:
            with open("/proc/%s/cgroup" % pid) as handle:
                for line in handle:
                    _num, controllers, path = line.rstrip("\n").split(":", 2)
                    if (self.version == 2 and controllers == "") or \
                            (self.version == 1 and "cpuacct" in controllers.split(",")):
                        return path
        except (OSError, IOError):
            pass
        return ""

    def usage(self, path):
        """CPU seconds of a cgroup (absolute path, or one relative to the hierarchy's root)."""
        full = path if path.startswith(self.root) else os.path.join(self.root, path.lstrip("/"))
        try:
            if self.version == 1:
                with open(os.path.join(full, "cpuacct.usage")) as handle:
                    return int(handle.read()) / 1e9
            with open(os.path.join(full, "cpu.stat")) as handle:
                return int(re.search(r"usage_usec (\d+)", handle.read()).group(1)) / 1e6
        except (OSError, IOError, AttributeError, ValueError):
            return None

    def relative(self, name):
        """A step cgroup's path as /proc/PID/cgroup names it."""
        return "/" + os.path.relpath(os.path.join(self.base, name), self.root)

    def move(self, step, pids):
        folder = os.path.join(self.base, cgroup_name(step))
        os.makedirs(folder, exist_ok=True)
        for pid in pids:
            try:
                with open(os.path.join(folder, "cgroup.procs"), "w") as handle:
                    handle.write(pid)
            except (OSError, IOError):
                pass  # gone meanwhile, or a kernel thread

    def remove(self):
        """Remove this run's cgroups (one that still holds a process stays)."""
        for name in os.listdir(self.base):
            try:
                os.rmdir(os.path.join(self.base, name))
            except OSError:
                pass
        try:
            os.rmdir(self.base)
        except OSError:
            pass

    def steps(self):
        found = {}
        for name in os.listdir(self.base):
            seconds = self.usage(os.path.join(self.base, name))
            if seconds is not None:
                found[name] = seconds
        return found


def processes():
    """{pid: (ppid, command line)} of the processes now running."""
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as handle:
                stat = handle.read()
            with open("/proc/%s/cmdline" % pid) as handle:
                cmdline = handle.read().replace("\0", " ")
        except (OSError, IOError):
            continue
        found[pid] = (stat[stat.rfind(")") + 2:].split()[1], cmdline)
    return found


def is_accountant(cmdline):
    """Whether a command line runs this script (another run of it accounts for its own command's processes)."""
    return re.search(r"suite_cpu\.py ", cmdline) is not None


def under_another_accountant(pid, procs, me):
    """Whether another run of this script (one its own command started: the suite's test of it) started pid."""
    seen = set()
    while pid in procs and pid not in seen:
        seen.add(pid)
        pid = procs[pid][0]
        if pid == me:
            return False
        if pid in procs and is_accountant(procs[pid][1]):
            return True
    return False


def tag_new_steps(cgroups, procs, me=None):
    """Move each step-starting process not yet in its step's cgroup (and its descendants) into its step's one."""
    me = me or str(os.getpid())
    children = {}
    for pid, (ppid, _cmd) in procs.items():
        children.setdefault(ppid, []).append(pid)
    for pid, (_ppid, cmdline) in procs.items():
        step = step_of(cmdline)
        path = cgroups.path_of(pid) if step else ""
        # Already in its step's cgroup, or a test host's process, or another run's: left where it is. A step started
        # inside another (a test that runs a set-up script) is its own: the innermost step is charged.
        if not step or not path or path == cgroups.relative(cgroup_name(step)) or "libpod" in path or \
                under_another_accountant(pid, procs, me):
            continue
        tree, stack = [], [pid]
        while stack:
            current = stack.pop()
            if current != pid and (step_of(procs[current][1]) or is_accountant(procs[current][1])):
                continue  # a step inside this one, or another run of this script: not this step's
            if "libpod" not in cgroups.path_of(current):  # a test host's processes stay in its own cgroup
                tree.append(current)
            stack.extend(children.get(current, []))
        cgroups.move(step, tree)


def read_test_hosts(cgroups, seen):
    """Update {container name: CPU seconds} with the running test hosts' cgroups (the largest reading kept)."""
    listing = subprocess.run(["podman", "ps", "--format", "{{.Names}} {{.Pid}}"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, universal_newlines=True, check=False).stdout
    for line in listing.splitlines():
        name, _sep, pid = line.partition(" ")
        path = cgroups.path_of(pid.strip()) if pid.strip().isdigit() else ""
        # systemd inside the container puts its own services one level down: the container's scope is the parent.
        scope = re.sub(r"/(init\.scope|system\.slice.*)$", "", path)
        seconds = cgroups.usage(scope) if scope else None
        if seconds is not None:
            seen[name] = max(seen.get(name, 0.0), seconds)


def machine_cpu():
    """(busy, idle) CPU seconds since boot, from /proc/stat."""
    with open("/proc/stat") as handle:
        fields = [int(v) for v in handle.readline().split()[1:]]
    tick = float(os.sysconf("SC_CLK_TCK"))
    return (sum(fields) - fields[3] - fields[4]) / tick, (fields[3] + fields[4]) / tick


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0], allow_abbrev=False)
    parser.add_argument("--out", required=True, help="the JSON report's path")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between looks for new steps")
    parser.add_argument("--hosts-every", type=float, default=10.0,
                        help="seconds between readings of the test hosts' cgroups (and of the report, rewritten)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the command to account (the suite)")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --, e.g. -- env CI=true bash .ci/run")
    cgroups = Cgroups()
    busy0, idle0 = machine_cpu()
    start, hosts, written = time.time(), {}, 0.0
    proc = subprocess.Popen(command)

    def report(code):
        busy, idle = machine_cpu()
        doc = dict(command=command, exit_code=code, wall_s=round(time.time() - start, 1),
                   busy_cpu_s=round(busy - busy0, 1), idle_cpu_s=round(idle - idle0, 1),
                   steps=dict((k, round(v, 1)) for k, v in sorted(cgroups.steps().items())),
                   test_hosts=dict((k, round(v, 1)) for k, v in sorted(hosts.items())))
        with open(args.out + ".tmp", "w") as handle:
            json.dump(doc, handle, indent=1)
        os.replace(args.out + ".tmp", args.out)

    while proc.poll() is None:
        tag_new_steps(cgroups, processes())
        if time.time() - written >= args.hosts_every:
            read_test_hosts(cgroups, hosts)
            report(None)
            written = time.time()
        time.sleep(args.interval)
    read_test_hosts(cgroups, hosts)
    report(proc.returncode)
    cgroups.remove()
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
