#!/usr/bin/env bash
# The changelog of galaxy.yml's version, (re)generated from every fragment: changelogs/changelog.yaml and
# CHANGELOG.rst. antsibull-changelog reads the plugins' documentation through ansible-doc, so it runs in a copy
# at ansible_collections/gpufleet/vllm; only the two files come back. The fragments stay (keep_fragments: true).
# Usage: ./scripts/changelog-release.sh [--again]
#   --again   the version was released already and is not published: fold the fragments added since into it
#             (changelog.yaml is reset to no release first). Without it, galaxy.yml's version must be a new one.
source "$(dirname "$0")/lib.sh"
activate_venv
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
copy="$work/ansible_collections/gpufleet/vllm"
mkdir -p "$copy"
rsync -a --exclude '/.venv/' --exclude '/build/' --exclude '/.git/' --exclude '/.cache/' --exclude '/tests/fixtures/' \
  --exclude '/tests/output/' --exclude '__pycache__/' --exclude '/.whl/' "$ROOT/" "$copy/"
if [ "${1:-}" = "--again" ]; then
  printf -- '---\nancestor: null\nreleases: {}\n' > "$copy/changelogs/changelog.yaml"
  rm -f "$copy/CHANGELOG.rst" "$copy/changelogs/.plugin-cache.yaml"
fi
version=$(python -c 'import yaml,sys; print(yaml.safe_load(open(sys.argv[1]))["version"])' "$ROOT/galaxy.yml")
log "antsibull-changelog release ($version)"
(cd "$copy" && ANSIBLE_COLLECTIONS_PATH="$work" antsibull-changelog release --date "$(date -u +%F)") \
  || die "antsibull-changelog release failed (a plugin's DOCUMENTATION it cannot read is named above)"
cp "$copy/changelogs/changelog.yaml" "$ROOT/changelogs/changelog.yaml"
cp "$copy/CHANGELOG.rst" "$ROOT/CHANGELOG.rst"
(cd "$ROOT" && antsibull-changelog lint) && log "changelogs/changelog.yaml and CHANGELOG.rst: $version"
