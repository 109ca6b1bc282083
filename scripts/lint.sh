#!/usr/bin/env bash
# ansible-lint with the production profile, offline, against the working tree.
source "$(dirname "$0")/lib.sh"
activate_venv
sync_collection
cd "$ROOT" || exit 1
exec ansible-lint --offline "$@"
