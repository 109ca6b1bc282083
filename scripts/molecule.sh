#!/usr/bin/env bash
# Run Molecule from the collection root against the working tree.
# Usage: ./scripts/molecule.sh test -s host_tuning      (any molecule arguments)
source "$(dirname "$0")/lib.sh"
activate_venv
# The suite syncs once before running scenarios in parallel (GPUFLEET_NO_SYNC=1).
[ "${GPUFLEET_NO_SYNC:-0}" = 1 ] || sync_collection
cd "$ROOT" || exit 1
exec molecule "$@"
