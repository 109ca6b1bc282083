#!/usr/bin/env bash
# Build the local test-host image: Debian 12 booting systemd as PID 1, made with debootstrap and
# `podman import` (no registry). Reused when present; --force rebuilds.
source "$(dirname "$0")/lib.sh"

base="${IMAGE%%:*}-base:${IMAGE##*:}"
# The derived image's recipe version (its label): an image built by an older recipe is built again (the base is kept).
recipe=2
if [ "${1:-}" != "--force" ] && podman image exists "$IMAGE" &&
   [ "$(podman image inspect --format '{{ index .Labels "gpufleet.testhost.recipe" }}' "$IMAGE")" = "$recipe" ]; then
  log "test-host image $IMAGE already present"
  exit 0
fi

mirror=$(sed -n 's/^URIs: *\(http[^ ]*debian\)\/\?$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)
[ -n "$mirror" ] || mirror=$(awk '$1=="deb" && $2 ~ /debian\/?$/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null)
[ -n "$mirror" ] || die "no Debian mirror found in the machine's apt sources"

if ! podman image exists "$base" || [ "${1:-}" = "--force" ]; then
  rootfs=$(mktemp -d "$BUILD/rootfs.XXXXXX")
  trap 'rm -rf "$rootfs"' EXIT
  log "debootstrap bookworm from $mirror (about a minute)"
  debootstrap --variant=minbase \
    --include=systemd,systemd-sysv,python3,dbus,iproute2,procps,ca-certificates,sudo \
    bookworm "$rootfs" "$mirror" >"$BUILD/debootstrap.log" 2>&1 \
    || { tail -20 "$BUILD/debootstrap.log"; die "debootstrap failed (log: $BUILD/debootstrap.log)"; }
  # The apt sources the test host uses: the same mirror as the machine.
  echo "deb $mirror bookworm main" > "$rootfs/etc/apt/sources.list"
  # Units that cannot work in a container and only slow boot down.
  for unit in systemd-udevd.service systemd-udev-trigger.service getty@tty1.service \
              systemd-remount-fs.service systemd-firstboot.service; do
    ln -sf /dev/null "$rootfs/etc/systemd/system/$unit"
  done
  log "importing $base"
  tar -C "$rootfs" -c . | podman import \
    --change 'CMD=["/sbin/init"]' --change 'STOPSIGNAL=SIGRTMIN+3' - "$base" >/dev/null
fi

# Derived image: the packages every scenario needs, installed once here instead of per scenario.
# g++ and python3-dev are what the vllm role installs for the CPU build (vllm_cpu_system_packages): baked
# in, the real-engine hosts (vllm_serve, both multinode hosts, the demo) skip an apt refresh + install each.
# extensions/molecule/resources/testhost_pyc: a bytecode cache for the modules Ansible sends as zip files (zipimport
# compiles them on every task otherwise: about 45 % of a module run's CPU on these hosts; docs/DEVELOPING.md).
ctx=$(mktemp -d "$BUILD/ctx.XXXXXX")
cp "$ROOT"/extensions/molecule/resources/testhost_pyc/gpufleet_testhost_pyc.* "$ctx/"
cat > "$ctx/Containerfile" <<CF
FROM $base
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      python3-apt python3-venv python3-pip numactl curl xfsprogs e2fsprogs util-linux kmod g++ python3-dev \
    && apt-get clean && rm -rf /var/lib/apt/lists/*
COPY gpufleet_testhost_pyc.py gpufleet_testhost_pyc.pth /usr/local/lib/python3.11/dist-packages/
RUN install -d -m 0755 /var/cache/gpufleet-testhost-pyc && python3 -c 'import zipimport; assert zipimport._compile_source.__module__ == "gpufleet_testhost_pyc"'
LABEL gpufleet.testhost.recipe=$recipe
CMD ["/sbin/init"]
STOPSIGNAL SIGRTMIN+3
CF
log "building $IMAGE"
podman build -q -t "$IMAGE" "$ctx" >/dev/null
rm -rf "$ctx"
log "test-host image $IMAGE ready"
