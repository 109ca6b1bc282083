#!/usr/bin/env bash
# ansible-lint with the production profile, offline, against the working tree.
source "$(dirname "$0")/lib.sh"
activate_venv
sync_collection
cd "$ROOT"
exec ansible-lint --offline "$@"
