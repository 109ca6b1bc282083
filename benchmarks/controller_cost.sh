#!/usr/bin/env bash
# The controller's side at fleet size (issue 30 item 4): wall time and controller CPU of a no-change site.yml and of
# preflight.yml, for 2, 4 and 8 hosts, at Ansible's default forks (5) and at forks 16, with pipelining on and off.
# The hosts are systemd containers of the test-host image plus openssh-server, reached over SSH like a real fleet
# (the suite's nsenter connection runs every module as the controller's own child, which would count the hosts'
# work as the controller's). vLLM is the TEST STAND-IN wheel and the GPUs the FAKE NVML (two H200s a host), as in
# the fleet scenario: the controller does the same work per task whatever the host runs.
# Settings: Ansible's defaults, fact caching (gathering smart + jsonfile) and the free strategy, at 8 hosts and forks 16.
# Controller CPU = user + system seconds of ansible-playbook and all its children (forks, ssh clients), from
# /usr/bin/time, plus the ssh ControlPersist masters it leaves running (read from /proc, then stopped, so every run
# starts its connections afresh); the modules themselves run inside the containers, not counted. The hosts share
# this machine's cores, so wall times include their work, as a controller's would not.
# Usage: benchmarks/controller_cost.sh [--hosts "2 4 8"] [--repeats 2] [--keep]
#   --keep   leave the containers (a rerun skips their set-up); without it they are removed at the end
# Output: a markdown table on stdout and $BUILD/controller-cost/results.json.
source "$(dirname "$0")/../scripts/lib.sh"

hosts_list="2 4 8"; repeats=2; keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --hosts) hosts_list="$2"; shift 2 ;;
    --repeats) repeats="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    *) die "unknown option $1 (use --hosts \"2 4 8\", --repeats N, --keep)" ;;
  esac
done
[[ "$repeats" =~ ^[1-9][0-9]*$ ]] || die "--repeats is '$repeats': give a whole number >= 1"
max=0
for n in $hosts_list; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || die "--hosts has '$n': give whole numbers >= 1, e.g. --hosts \"2 4 8\""
  [ "$n" -gt "$max" ] && max=$n
done

[ -x /usr/bin/time ] || die "/usr/bin/time is missing: apt-get install time"
command -v ssh-keygen >/dev/null || die "ssh-keygen is missing: apt-get install openssh-client"
activate_venv
sync_collection
export ANSIBLE_COLLECTIONS_PATH="$AT_PARENT" MOLECULE_PROJECT_DIRECTORY="$ROOT" ANSIBLE_NOCOLOR=1
WORK="$BUILD/controller-cost"
SSH_IMAGE="localhost/gpufleet-testhost-ssh:bookworm"
mkdir -p "$WORK"

ssh_image() {  # the test-host image plus sshd and this benchmark's key (built once)
  [ -f "$WORK/id_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -f "$WORK/id_ed25519"
  podman image exists "$SSH_IMAGE" && return 0
  log "building $SSH_IMAGE (openssh-server on $IMAGE)"
  cp "$WORK/id_ed25519.pub" "$WORK/authorized_keys"
  cat >"$WORK/Containerfile" <<EOF
FROM $IMAGE
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-server >/dev/null \
 && rm -rf /var/lib/apt/lists/* && mkdir -p /root/.ssh && chmod 700 /root/.ssh && systemctl enable ssh
COPY authorized_keys /root/.ssh/authorized_keys
EOF
  podman build -q -t "$SSH_IMAGE" -f "$WORK/Containerfile" "$WORK" >/dev/null
}

hosts_up() {  # gpufleet-cc-1..max, started, and the inventory with their addresses
  local i name ip
  {
    echo "vllm_hosts:"
    echo "  hosts:"
  } >"$WORK/hosts.yml"
  for i in $(seq "$max"); do
    name="gpufleet-cc-$i"
    podman container exists "$name" || podman run -d --name "$name" --hostname "$name" --systemd=always --privileged \
      -v /sys/fs/cgroup:/sys/fs/cgroup:rw "$SSH_IMAGE" /sbin/init >/dev/null
    podman start "$name" >/dev/null
    ip=$(podman inspect -f '{{.NetworkSettings.IPAddress}}' "$name")
    [ -n "$ip" ] || die "$name has no address on podman's network"
    printf '    %s: {ansible_host: %s}\n' "$name" "$ip" >>"$WORK/hosts.yml"
  done
  mkdir -p "$WORK/group_vars"
  cp "$ROOT/benchmarks/controller_cost/group_vars.yml" "$WORK/group_vars/vllm_hosts.yml"
  cat >"$WORK/group_vars/all.yml" <<EOF
ansible_user: root
ansible_python_interpreter: /usr/bin/python3
ansible_ssh_private_key_file: $WORK/id_ed25519
ansible_ssh_common_args: -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR
EOF
}

limit_of() {  # limit_of N: the first N hosts
  local n="$1" i out=""
  for i in $(seq "$n"); do out="$out${out:+,}gpufleet-cc-$i"; done
  echo "$out"
}

ssh_masters_cpu() {  # CPU seconds of the ssh ControlPersist masters a run left behind (not waited children), then stop them
  python3 - <<'EOF'
import os, signal
tick, total = os.sysconf("SC_CLK_TCK"), 0.0
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        cmd = open("/proc/%s/cmdline" % pid, "rb").read()
        if not (cmd.startswith(b"ssh: ") and b"/.ansible/cp/" in cmd and b"[mux]" in cmd):
            continue
        fields = open("/proc/%s/stat" % pid).read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
        os.kill(int(pid), signal.SIGTERM)
    except (OSError, IndexError, ValueError):
        continue
print(round(total, 2))
EOF
}

variant_env() {  # variant_env VARIANT: the environment one variant of Ansible's settings runs with
  case "$1" in
    default) echo "ANSIBLE_GATHERING=implicit" ;;
    # gathering smart + a jsonfile cache: a play gathers only for hosts whose cached facts are missing or expired
    factcache) echo "ANSIBLE_GATHERING=smart ANSIBLE_CACHE_PLUGIN=jsonfile ANSIBLE_CACHE_PLUGIN_CONNECTION=$WORK/facts ANSIBLE_CACHE_PLUGIN_TIMEOUT=86400" ;;
    free) echo "ANSIBLE_GATHERING=implicit ANSIBLE_STRATEGY=free" ;;
    *) die "variant_env: unknown variant $1" ;;
  esac
}

measure() {  # measure LABEL N FORKS PIPELINING PLAYBOOK [VARIANT]: one run; appends "label n forks pipelining variant wall cpu" to runs.txt
  local label="$1" n="$2" forks="$3" pipelining="$4" playbook="$5" variant="${6:-default}" out wall user sys masters
  out="$WORK/run-$label-$n-$forks-$pipelining-$variant.log"
  # shellcheck disable=SC2046  # the variant's settings are words by design
  env $(variant_env "$variant") ANSIBLE_PIPELINING="$pipelining" /usr/bin/time -f '%e %U %S' -o "$WORK/time.txt" \
    ansible-playbook -i "$WORK/hosts.yml" "$playbook" --limit "$(limit_of "$n")" --forks "$forks" >"$out" 2>&1 \
    || die "$label on $n hosts failed: see $out"
  # A no-change run must change nothing on any host (the figure is the cost of checking, not of changing).
  if grep -E '^gpufleet-cc-[0-9]+ +:' "$out" | grep -vqE 'changed=0 .*failed=0'; then
    die "$label on $n hosts changed or failed something (see $out): the hosts are not converged"
  fi
  read -r wall user sys <"$WORK/time.txt"
  masters=$(ssh_masters_cpu)  # ssh's encryption runs in these: part of the controller's cost
  echo "$label $n $forks $pipelining $variant $wall $(python3 -c "print(round($user + $sys + $masters, 2))")" >>"$WORK/runs.txt"
  log "$label: $n hosts, forks $forks, pipelining $pipelining, $variant: ${wall} s wall, $(tail -1 "$WORK/runs.txt" | cut -d' ' -f7) s controller CPU"
}

ssh_image
hosts_up
log "preparing and converging $max hosts (stand-in vLLM, fake NVML; a no-change run needs them converged)"
ansible-playbook -i "$WORK/hosts.yml" "$ROOT/benchmarks/controller_cost/prepare.yml" --forks "$max" >"$WORK/prepare.log" 2>&1 \
  || die "prepare failed: see $WORK/prepare.log"
ansible-playbook -i "$WORK/hosts.yml" gpufleet.vllm.site --forks "$max" >"$WORK/converge.log" 2>&1 \
  || die "site.yml failed on the benchmark hosts: see $WORK/converge.log"

: >"$WORK/runs.txt"
rm -rf "$WORK/facts"  # fill the fact cache once, unmeasured: the factcache rows are warm-cache runs
# shellcheck disable=SC2046
env $(variant_env factcache) ansible-playbook -i "$WORK/hosts.yml" gpufleet.vllm.site --forks "$max" >"$WORK/factcache-fill.log" 2>&1 \
  || die "filling the fact cache failed: see $WORK/factcache-fill.log"
for r in $(seq "$repeats"); do
  for n in $hosts_list; do
    measure site "$n" 5 1 gpufleet.vllm.site
    measure preflight "$n" 5 1 "$ROOT/playbooks/preflight.yml"
  done
  measure site "$max" 16 1 gpufleet.vllm.site
  measure site "$max" 16 0 gpufleet.vllm.site
  measure preflight "$max" 16 1 "$ROOT/playbooks/preflight.yml"
  measure site "$max" 16 1 gpufleet.vllm.site factcache
  measure site "$max" 16 1 gpufleet.vllm.site free
  log "repeat $r of $repeats done"
done

python3 - "$WORK/runs.txt" "$WORK/results.json" "$(nproc)" <<'EOF'
import json, statistics, sys
runs = [line.split() for line in open(sys.argv[1]) if line.strip()]
cores = int(sys.argv[3])
groups = {}
for label, n, forks, pipe, variant, wall, cpu in runs:
    groups.setdefault((label, int(n), int(forks), pipe, variant), []).append((float(wall), float(cpu)))
rows = []
for (label, n, forks, pipe, variant), vals in sorted(groups.items()):
    wall = statistics.median(v[0] for v in vals)
    cpu = statistics.median(v[1] for v in vals)
    rows.append(dict(playbook=label, hosts=n, forks=forks, pipelining=pipe == "1", variant=variant, wall_s=round(wall, 1),
                     controller_cpu_s=round(cpu, 1), cpu_per_host_s=round(cpu / n, 2), runs=len(vals)))
# Per-host slope of controller CPU between the smallest and largest host counts at forks 5: the fixed start-up cost
# (parsing, inventory, plugin loading) drops out, what is left grows with the fleet.
proj = {}
for label in ("site", "preflight"):
    pts = sorted((r["hosts"], r["controller_cpu_s"]) for r in rows if r["playbook"] == label and r["forks"] == 5 and r["pipelining"] and r["variant"] == "default")
    if len(pts) >= 2 and pts[-1][0] > pts[0][0]:
        slope = (pts[-1][1] - pts[0][1]) / (pts[-1][0] - pts[0][0])
        fixed = pts[0][1] - slope * pts[0][0]
        proj[label] = dict(cpu_per_host_s=round(slope, 2), fixed_cpu_s=round(fixed, 1),
                           cpu_100_hosts_s=round(fixed + 100 * slope), cpu_1000_hosts_s=round(fixed + 1000 * slope))
json.dump(dict(cores=cores, rows=rows, projection=proj), open(sys.argv[2], "w"), indent=2)
print("| playbook | hosts | forks | pipelining | settings | wall (s) | controller CPU (s) | CPU per host (s) | runs |")
print("|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print("| %s | %d | %d | %s | %s | %.1f | %.1f | %.2f | %d |" % (r["playbook"], r["hosts"], r["forks"], "on" if r["pipelining"] else "off",
                                                        r["variant"], r["wall_s"], r["controller_cpu_s"], r["cpu_per_host_s"], r["runs"]))
print()
for label, p in proj.items():
    print("%s: %.2f CPU-s per host + %.1f fixed; 100 hosts ~ %d CPU-s, 1000 hosts ~ %d CPU-s of controller (%d cores here)"
          % (label, p["cpu_per_host_s"], p["fixed_cpu_s"], p["cpu_100_hosts_s"], p["cpu_1000_hosts_s"], cores))
EOF

if [ "$keep" = 0 ]; then
  for i in $(seq "$max"); do podman rm --force --ignore --time 0 "gpufleet-cc-$i" >/dev/null; done
  log "benchmark hosts removed (--keep leaves them)"
fi
