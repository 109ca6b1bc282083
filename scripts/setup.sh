#!/usr/bin/env bash
# All set-up for a fresh Debian/Ubuntu machine, as root. Idempotent: seconds when already done.
#   apt packages (scripts/requirements-apt.txt), podman configuration for systemd test hosts,
#   the project venv (.venv from requirements-dev.txt), ansible-test's offline pip bootstrap,
#   and the local test-host image (scripts/build-testhost-image.sh).
# Usage: ./scripts/setup.sh [--no-image | --system]   (--system: the apt packages and podman's configuration only,
#        all the test-host image needs: scripts/test.sh builds the image beside the rest of the set-up)
source "$(dirname "$0")/lib.sh"

want_image=1 system_only=0
[ "${1:-}" = "--no-image" ] && want_image=0
[ "${1:-}" = "--system" ] && system_only=1
[ "$(id -u)" -eq 0 ] || die "run as root (apt, podman with systemd and loop devices need it)"

stamp_dir="$BUILD/stamps"
mkdir -p "$stamp_dir"
hash_of() { sha256sum "$@" | sha256sum | cut -c1-16; }

# 1. Debian packages
apt_list=$(grep -vE '^\s*(#|$)' "$ROOT/scripts/requirements-apt.txt" | tr '\n' ' ')
apt_stamp="$stamp_dir/apt-$(hash_of "$ROOT/scripts/requirements-apt.txt")"
if [ ! -f "$apt_stamp" ]; then
  log "apt: installing $apt_list"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $apt_list >/dev/null
  touch "$apt_stamp"
fi

# 2. podman: runc (crun fails on cgroups v1/v2 hybrid hosts) and ulimits a container may set.
conf=/etc/containers/containers.conf
if ! grep -q "gpufleet-vllm v3" "$conf" 2>/dev/null; then
  log "podman: writing $conf"
  mkdir -p /etc/containers
  [ -f "$conf" ] && cp -n "$conf" "$conf.pre-gpufleet"
  cat > "$conf" <<'CONF'
# Written by gpufleet-vllm v3 scripts/setup.sh for systemd test hosts.
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
CONF
fi
[ "$system_only" = 1 ] && exit 0

# 3. the project venv
venv_stamp="$stamp_dir/venv-$(hash_of "$ROOT/requirements-dev.txt")"
if [ ! -f "$venv_stamp" ] || [ ! -x "$VENV/bin/ansible-playbook" ]; then
  log "venv: installing requirements-dev.txt into $VENV"
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
  "$VENV/bin/python" -m pip install -q -r "$ROOT/requirements-dev.txt" 2>&1 | grep -v '^WARNING: Location' || true
  "$VENV/bin/ansible-playbook" --version >/dev/null || die "venv install failed"
  touch "$venv_stamp"
fi

# 4. ansible-test bootstraps pip in its venvs with a script from an unreachable host: give it an
#    offline stand-in at the cache path it checks first.
pip_version=$("$VENV/bin/python" - <<'PY'
import re, pathlib, ansible_test
src = pathlib.Path(ansible_test.__file__).parent / "_internal" / "python_requirements.py"
print(re.search(r"pip='([0-9.]+)'", src.read_text()).group(1))
PY
)
mkdir -p "$HOME/.ansible/test/cache"
cp "$ROOT/scripts/get_pip_standin.py" "$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py"

# 5. the collection copy used by ansible-test, ansible-lint and playbooks
sync_collection

# 6. the test-host image
if [ "$want_image" = 1 ]; then
  "$ROOT/scripts/build-testhost-image.sh"
fi
log "set-up done"
