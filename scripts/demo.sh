#!/usr/bin/env bash
# The main job on an embedded default: a local throwaway systemd host (podman container
# "gpufleet-demo" from the test-host image) gets playbooks/site.yml with inventories/demo, then
# the read-only preflight report. Run it twice: the second run reports changed=0.
# Usage: ./scripts/demo.sh            set up, create the demo host if needed, converge, report
#        ./scripts/demo.sh --destroy  remove the demo host and restore this machine's vm.* values
source "$(dirname "$0")/lib.sh"
HOST=gpufleet-demo
saved="$BUILD/demo-vm-sysctls.txt"
keys="vm.swappiness vm.max_map_count kernel.numa_balancing"

if [ "${1:-}" = "--destroy" ]; then
  podman rm -f "$HOST" >/dev/null 2>&1 || true
  if [ -f "$saved" ]; then sysctl -q -p "$saved" && rm -f "$saved"; fi
  log "demo host removed, this machine's kernel settings restored"
  exit 0
fi

"$ROOT/scripts/setup.sh"
activate_venv
sync_collection

# The container is privileged: vm.* settings it makes are this machine's. Save them once.
if [ ! -f "$saved" ]; then
  for k in $keys; do echo "$k = $(sysctl -n "$k")"; done > "$saved"
fi
# vLLM's wheels (about 4.6 GB, downloaded once and shared with the test suite), mounted read-only.
wheelhouse=$("$ROOT/scripts/vllm-wheelhouse.sh")
if ! podman container exists "$HOST"; then
  log "creating the demo host $HOST"
  podman run -d --name "$HOST" --hostname "$HOST" --systemd=always --privileged \
    -v "$wheelhouse:/srv/wheelhouse:ro" -v "$ROOT/tests/fixtures/demo-model:/srv/seed:ro" \
    "$IMAGE" /sbin/init >/dev/null
fi
podman start "$HOST" >/dev/null
for _ in $(seq 60); do
  state=$(podman exec "$HOST" systemctl is-system-running 2>/dev/null || true)
  case "$state" in running|degraded) break ;; esac
  sleep 1
done

cd "$ROOT" || exit 1
log "ansible-playbook -i inventories/demo site.yml"
ANSIBLE_CALLBACK_RESULT_FORMAT=yaml ansible-playbook -i inventories/demo site.yml | tee "$BUILD/demo-site.log"
if [ -f playbooks/preflight.yml ]; then
  log "ansible-playbook -i inventories/demo playbooks/preflight.yml --check (read-only report)"
  ansible-playbook -i inventories/demo playbooks/preflight.yml --check | tee "$BUILD/demo-preflight.log"
fi
echo
log "what it did: $(grep -E '^gpufleet-demo' "$BUILD/demo-site.log" | tail -1)"
log "run ./scripts/demo.sh again: it should report changed=0; ./scripts/demo.sh --destroy removes the host"
