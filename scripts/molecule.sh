#!/usr/bin/env bash
# Run Molecule from the collection root against the working tree.
# Usage: ./scripts/molecule.sh test -s host_tuning      (any molecule arguments)
source "$(dirname "$0")/lib.sh"
activate_venv
sync_collection
cd "$ROOT" || exit 1
exec molecule "$@"
