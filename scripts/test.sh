#!/usr/bin/env bash
# The whole test suite (README's test command). Does its own set-up first.
#   ansible-lint (production profile), ansible-test sanity and units, pytest (tests/functional),
#   and every Molecule scenario under extensions/molecule/.
# Usage: ./scripts/test.sh [--quick]   (--quick: no Molecule scenarios)
# Every step runs even when an earlier one fails; the exit code is non-zero if any failed.
source "$(dirname "$0")/lib.sh"

quick=0
[ "${1:-}" = "--quick" ] && quick=1
start=$(date +%s)
"$ROOT/scripts/setup.sh"
activate_venv

declare -a names=() results=() secs=()
step() {  # step NAME COMMAND...
  local name="$1"; shift
  local t0 rc
  t0=$(date +%s)
  log "[$name] $*"
  set +e
  "$@"
  rc=$?
  set -e
  names+=("$name"); results+=("$rc"); secs+=("$(( $(date +%s) - t0 ))")
  [ "$rc" = 0 ] || printf '\033[1;31m[%s] FAILED (exit %s)\033[0m\n' "$name" "$rc" >&2
}

pytest_functional() {
  local rc=0
  "$VENV/bin/pytest" -q -p no:cacheprovider "$ROOT/tests/functional" || rc=$?
  # pytest exits 5 when it collects no test: that is a failure of the suite, not a pass.
  return "$rc"
}

step lint "$ROOT/scripts/lint.sh"
step sanity "$ROOT/scripts/ansible-test.sh" sanity --requirements
step units "$ROOT/scripts/ansible-test.sh" units --requirements
step pytest pytest_functional
if [ "$quick" = 0 ]; then
  for scenario_dir in "$ROOT"/extensions/molecule/*/; do
    scenario=$(basename "$scenario_dir")
    [ -f "$scenario_dir/molecule.yml" ] || continue
    step "molecule:$scenario" "$ROOT/scripts/molecule.sh" test -s "$scenario"
  done
fi

passed=0; failed=0
echo
echo "== gpufleet.vllm test summary ($(( $(date +%s) - start )) s in all) =="
for i in "${!names[@]}"; do
  if [ "${results[$i]}" = 0 ]; then status=ok; passed=$((passed + 1)); else status="FAILED (exit ${results[$i]})"; failed=$((failed + 1)); fi
  printf '  %-32s %6ss  %s\n' "${names[$i]}" "${secs[$i]}" "$status"
done
echo "suite: $passed passed, $failed failed"
[ "$failed" = 0 ]
