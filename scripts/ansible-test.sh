#!/usr/bin/env bash
# Run ansible-test (sanity / units) on a physical copy of the collection, without Docker.
# Usage: ./scripts/ansible-test.sh sanity|units [ansible-test args...]
source "$(dirname "$0")/lib.sh"
activate_venv
mkdir -p "$BUILD"
exec 9>"$BUILD/.ansible-test.lock"
flock 9   # one ansible-test at a time per checkout: they share the synced copy
sync_collection
cd "$AT_ROOT" || exit 1
cmd="$1"; shift
exec ansible-test "$cmd" --venv --python "${GPUFLEET_TEST_PYTHON:-3.11}" "$@"
