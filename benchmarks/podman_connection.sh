#!/usr/bin/env bash
# Time the test hosts' connection plugin both ways, alternated: nsenter (default as root) vs `podman exec`
# (GPUFLEET_PODMAN_NSENTER=0). Usage: benchmarks/podman_connection.sh CONTAINER [ROUNDS]  (a running test host,
# e.g. gpufleet-demo after ./scripts/demo.sh). Prints one wall/CPU line per run.
source "$(dirname "$0")/../scripts/lib.sh"
container="${1:?usage: $0 CONTAINER [ROUNDS]}"; rounds="${2:-2}"
export ANSIBLE_COLLECTIONS_PATH="$BUILD/collections"
export ANSIBLE_CONNECTION_PLUGINS="$ROOT/extensions/molecule/resources/connection_plugins" ANSIBLE_PIPELINING=1
for _ in $(seq "$rounds"); do
  for mode in 0 1; do
    /usr/bin/time -f "nsenter=$mode wall %e s, controller user %U s sys %S s" env GPUFLEET_PODMAN_NSENTER=$mode \
      "$VENV/bin/ansible-playbook" -i "$container," -c podman_pipelined -e ansible_python_interpreter=/usr/bin/python3 \
      "$ROOT/benchmarks/podman_connection.yml" 2>&1 | grep -E 'ok=|wall|fatal'
  done
done
