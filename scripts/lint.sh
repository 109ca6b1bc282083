#!/usr/bin/env bash
# ansible-lint with the production profile, offline, against the working tree.
source "$(dirname "$0")/lib.sh"
activate_venv
# scripts/test.sh syncs once and runs lint beside sanity (GPUFLEET_NO_SYNC=1): one writer only.
[ "${GPUFLEET_NO_SYNC:-0}" = 1 ] || sync_collection
cd "$ROOT" || exit 1
exec ansible-lint --offline "$@"
