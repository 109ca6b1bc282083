#!/usr/bin/env bash
# The static checks of the collection as a user's tools see it, offline, against the working tree:
# ansible-lint with the production profile; antsibull-docs lint-collection-docs --plugin-docs (every
# module, filter and role argument spec renders: markup, references such as O()/RV(), defaults valid for
# their type); antsibull-changelog lint (changelog.yaml and every fragment). Each runs; the first
# failure's status is the script's.
source "$(dirname "$0")/lib.sh"
activate_venv
# scripts/test.sh syncs once and runs lint beside sanity (GPUFLEET_NO_SYNC=1): one writer only.
[ "${GPUFLEET_NO_SYNC:-0}" = 1 ] || sync_collection
rc=0
cd "$ROOT" || exit 1
ansible-lint --offline "$@" || rc=$?
# antsibull-docs needs the collection at ansible_collections/gpufleet/vllm: the synced copy.
cd "$AT_ROOT" || exit 1
echo "antsibull-docs lint-collection-docs --plugin-docs"
antsibull-docs lint-collection-docs --plugin-docs . || { [ "$rc" != 0 ] || rc=1; }
echo "antsibull-changelog lint"
antsibull-changelog lint || { [ "$rc" != 0 ] || rc=1; }
exit "$rc"
