#!/usr/bin/env bash
# The bundle an offline H200 test host needs for the GPU acceptance suite and `vllm bench serve`
# (../shared/notes/GPU_HOST.md): vLLM 0.26.0 (the CUDA 13 wheel) trimmed for Hopper, the small wheels
# it imports on the dense / MoE / hybrid bf16-fp8 path, ansible-core + resolvelib, installed into ONE
# site directory for CPython 3.12 and packed as one tar.xz. The host already has torch 2.11.0+cu130,
# transformers, tokenizers, numpy, triton, aiohttp, pandas, tqdm, ... (its image's package list).
#
#   scripts/gpu-bundle.sh [build] [--out DIR]     on this machine: download (cached), install, trim, pack
#   scripts/gpu-bundle.sh lean                    the full bundle less fused-MoE and ansible (dense-only runs)
#   scripts/gpu-bundle.sh router                  vllm-router + orjson + Debian's nginx for the router A/B run
#   scripts/gpu-bundle.sh unpack --to DIR [--bundle FILE]
#                                                 on the GPU host: unpack, point bin/* at its python3
#
# build: wheels are cached in ${XDG_CACHE_HOME:-$HOME/.cache}/gpufleet-vllm/gpu-wheels (a second build
# downloads nothing); the bundle lands in DIR (default .gpu/ of the checkout, which .git/info/exclude
# ignores so the device tool can carry it: `carry: [".gpu"]`; its carry limit is 64 MiB for the whole
# working tree, printed at the end). Trimmed as GPU_HOST.md says: no FA2 (Hopper runs FA3), no Rust
# frontend (vllm-rs), no deep_gemm / fmha_sm100 / flashmla / qutlass; the fat binaries keep only what
# the driver loads on compute capability 9.0 (tests/gpu/fatbin_strip.py: sm_90 cubins, else the newest
# PTX <= 9.0), so xz packs the rest away. Needs: a python3 with pip (GPUFLEET_PYTHON), xz, network (PyPI).
# unpack: PYTHON (default: python3 on PATH) is written into bin/*'s first line; then
#   export PYTHONPATH=DIR; DIR/bin/vllm serve ... ; python3 -m ansible.cli.playbook ...
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VLLM_VERSION=0.26.0
ARCH=90
NAME="vllm-$VLLM_VERSION-sm$ARCH-cp312-site"
log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'ERROR: %s\n' "$*" >&2; exit 1; }

# Exact pins: vLLM 0.26.0's own requirement ranges resolved on PyPI for CPython 3.12 / manylinux_2_28
# (pip install --dry-run --report, 2026-12-01), keeping only what the H200 image lacks (KINDS.md's list),
# plus typing-extensions (pydantic 2.14 needs a recent one; newer is backward compatible).
WHEELS="vllm==$VLLM_VERSION
annotated-types==0.8.0 apache-tvm-ffi==0.1.10 astor==0.8.1 blake3==1.0.11 cachetools==8.0.2 cbor2==6.3.0
compressed-tensors==0.17.0 depyf==0.20.0 dill==0.4.1 fastapi==0.136.3 httpcore2==2.16.2 httpx2==2.16.2
ijson==3.6.0 jiter==0.19.0 jmespath==1.1.0 lark==1.2.2 llguidance==1.7.6 loguru==0.7.3
model-hosting-container-standards==0.1.16 msgspec==0.23.0 openai==3.57.0 openai-harmony==0.0.8
partial-json-parser==0.2.1.1.post7 prometheus-fastapi-instrumentator==8.1.0 pybase64==1.5.1
pydantic==2.14.4 pydantic-core==2.50.5 python-multipart==0.0.34 pyzmq==27.3.0 setproctitle==1.3.8
sniffio==1.3.1 starlette==1.10.0 supervisor==4.3.0 truststore==0.10.5 typing-inspection==0.4.5
typing-extensions==4.16.0 uvicorn==0.54.0 watchfiles==1.3.0 xgrammar==0.2.7
ansible-core==2.19.14 resolvelib==1.2.1"
# Not needed on Hopper for dense/MoE/hybrid bf16/fp8 (GPU_HOST.md); _moe_C, FA3, _C, cumem_allocator stay.
TRIM="vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so vllm/vllm-rs vllm/third_party/deep_gemm vllm/third_party/fmha_sm100
vllm/_flashmla_C.abi3.so vllm/_flashmla_extension_C.abi3.so vllm/third_party/flashmla vllm/_qutlass_C.abi3.so"
PLATFORMS="manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_26_x86_64 manylinux_2_24_x86_64
manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux_2_31_x86_64 manylinux_2_5_x86_64 manylinux1_x86_64"

pip_target_flags() {
  printf -- '--only-binary=:all: --python-version 3.12 --implementation cp'
  for p in $PLATFORMS; do printf -- ' --platform %s' "$p"; done
}

wheel_file() {  # the cached wheel of name==version, if any (wheel names normalise - . to _)
  local name="${1%%==*}" version="${1##*==}"
  name="$(printf '%s' "$name" | tr '.-' '__')"
  find "$CACHE" -maxdepth 1 -iname "${name}-${version}-*.whl" | head -n 1
}

download() {
  local missing=() spec
  for spec in $WHEELS; do [ -n "$(wheel_file "$spec")" ] || missing+=("$spec"); done
  if [ "${#missing[@]}" -eq 0 ]; then log "all $(wc -w <<<"$WHEELS") wheels cached in $CACHE"; return; fi
  log "downloading ${#missing[@]} wheels into $CACHE (vllm alone is 304 MB, once)"
  # shellcheck disable=SC2046
  PIP_CONFIG_FILE=/dev/null PIP_FIND_LINKS='' "$PY" -m pip download --disable-pip-version-check --no-deps \
    $(pip_target_flags) -d "$CACHE" "${missing[@]}" 1>&2
  for spec in "${missing[@]}"; do [ -n "$(wheel_file "$spec")" ] || die "pip saved no wheel for $spec in $CACHE"; done
}

install_site() {
  local site="$1" files=() spec
  for spec in $WHEELS; do files+=("$(wheel_file "$spec")"); done
  log "installing ${#files[@]} wheels into one site directory (pip --target, CPython 3.12)"
  # shellcheck disable=SC2046
  PIP_CONFIG_FILE=/dev/null PIP_FIND_LINKS='' "$PY" -m pip install --disable-pip-version-check --quiet \
    --no-deps --no-index --no-compile --target "$site" $(pip_target_flags) "${files[@]}" 1>&2
  if [ ! -f "$site/vllm/version.py" ] || [ ! -d "$site/vllm-$VLLM_VERSION.dist-info" ]; then
    die "vllm did not install into $site"
  fi
  for spec in $WHEELS; do printf '%s\t%s\n' "$spec" "$(sha256sum "$(wheel_file "$spec")" | cut -d' ' -f1)"; done \
    > "$site/GPUFLEET_BUNDLE_WHEELS.txt"
}

trim_site() {
  local site="$1" item
  for item in $TRIM; do
    [ -e "$site/$item" ] || die "trim list names $item, which vllm $VLLM_VERSION does not ship"
    rm -rf "${site:?}/$item"
  done
  find "$site" -name __pycache__ -type d -prune -exec rm -rf {} +
  log "keeping only sm_$ARCH kernels in the fat binaries"
  find "$site/vllm" -name '*.so' -print0 | xargs -0 "$PY" "$ROOT/tests/gpu/fatbin_strip.py" --arch "$ARCH" 1>&2
}

build() {
  local out="$ROOT/.gpu"
  while [ $# -gt 0 ]; do
    case "$1" in --out) out="$2"; shift 2;; *) die "unknown argument $1 (see --help)";; esac
  done
  command -v xz >/dev/null || die "xz is missing: apt-get install xz-utils"
  "$PY" -m pip --version >/dev/null 2>&1 || die "$PY has no pip: set GPUFLEET_PYTHON to a python3 with pip"
  mkdir -p "$CACHE" "$out"
  if [ "$out" = "$ROOT/.gpu" ] && ! grep -qx '/.gpu/' "$ROOT/.git/info/exclude" 2>/dev/null; then
    mkdir -p "$ROOT/.git/info" && echo '/.gpu/' >> "$ROOT/.git/info/exclude"
    log "added /.gpu/ to .git/info/exclude (the device tool carries ignored paths only when named)"
  fi
  download
  BUILD_TMP="$(mktemp -d)"; trap 'rm -rf "$BUILD_TMP"' EXIT
  install_site "$BUILD_TMP/site"
  trim_site "$BUILD_TMP/site"
  log "site directory: $(du -sh "$BUILD_TMP/site" | cut -f1); packing with xz (4 min of CPU: 12 min on 2 busy cores)"
  tar -C "$BUILD_TMP" -cf - site | xz -9 -T"$(nproc)" > "$out/$NAME.tar.xz.part"
  mv "$out/$NAME.tar.xz.part" "$out/$NAME.tar.xz"
  (cd "$out" && sha256sum "$NAME.tar.xz" > "$NAME.tar.xz.sha256")
  log "bundle: $out/$NAME.tar.xz ($(du -h "$out/$NAME.tar.xz" | cut -f1))"
  log "what the device tool sends with carry [.gpu]: $(travel_size "$out") MiB (limit 64)"
  printf '%s\n' "$out/$NAME.tar.xz"
}

travel_size() {  # tracked + untracked-not-ignored files of the checkout, plus the bundle folder
  (cd "$ROOT" && { git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s -- 2>/dev/null
                   find "$1" -type f -exec stat -c %s {} +; } | awk '{s += $1} END {printf "%.1f", s / 1048576}')
}

unpack() {
  local to="" bundle=""
  while [ $# -gt 0 ]; do
    case "$1" in --to) to="$2"; shift 2;; --bundle) bundle="$2"; shift 2;; *) die "unknown argument $1";; esac
  done
  [ -n "$to" ] || die "unpack needs --to DIR (the site directory to create, e.g. /tmp/site)"
  bundle="${bundle:-$ROOT/.gpu/$NAME.tar.xz}"
  [ -f "$bundle" ] || die "no bundle at $bundle: build it with scripts/gpu-bundle.sh and carry .gpu"
  local py; py="$(command -v "${PYTHON:-python3}")" || die "no ${PYTHON:-python3} on PATH: set PYTHON"
  "$py" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 12) else 1)' \
    || die "$py is not CPython 3.12: the bundle's compiled wheels are cp312 (set PYTHON)"
  mkdir -p "$to"
  if command -v xz >/dev/null; then
    xz -dc "$bundle" | tar -C "$to" --strip-components=1 -xf -
  else  # Python's own lzma: no xz binary needed on the host
    "$py" -c 'import sys, tarfile
with tarfile.open(sys.argv[1], "r:xz") as tf:
    for m in tf.getmembers():
        m.name = m.name.split("/", 1)[1] if "/" in m.name else "."
        tf.extract(m, sys.argv[2])' "$bundle" "$to"
  fi
  local f
  for f in "$to"/bin/*; do
    head -c 2 "$f" | grep -q '#!' && sed -i "1s|^#!.*python.*$|#!$py|" "$f"
  done
  log "unpacked into $to ($(du -sh "$to" | cut -f1)); use: PYTHONPATH=$to $to/bin/vllm ..."
}

# lean: the router A/B run carries vLLM AND the router (+ nginx), over the device tool's 64 MiB with the full
# bundle. Dense models need neither the fused-MoE library (vLLM imports it under contextlib.suppress(ImportError),
# vllm/platforms/cuda.py) nor ansible-core: dropped. Only for dense-model runs.
lean() {
  local full="$ROOT/.gpu/$NAME.tar.xz" out="$ROOT/.gpu-lean" tmp
  [ -f "$full" ] || die "no full bundle at $full: run scripts/gpu-bundle.sh build first"
  tmp="$(mktemp -d)"
  # shellcheck disable=SC2064  # expanded now: `tmp` is local, gone when the trap runs at exit
  trap "rm -rf '$tmp'" EXIT
  xz -dc "$full" | tar -C "$tmp" -xf -
  rm -rf "$tmp"/site/vllm/_moe_C_stable_libtorch.abi3.so "$tmp"/site/ansible "$tmp"/site/ansible_test \
    "$tmp"/site/ansible_core-* "$tmp"/site/resolvelib*
  mkdir -p "$out"; grep -qx '/.gpu-lean/' "$ROOT/.git/info/exclude" || echo '/.gpu-lean/' >> "$ROOT/.git/info/exclude"
  tar -C "$tmp" -cf - site | xz -9 -T"$(nproc)" > "$out/$NAME-lean.tar.xz"
  log "lean bundle: $out/$NAME-lean.tar.xz ($(du -h "$out/$NAME-lean.tar.xz" | cut -f1)); unpack with --bundle"
}

# router: vllm-router 0.1.17 (its Rust extension stripped of symbols: 62 -> 50 MB, 14 MB packed) + orjson (the one
# dependency the H200 image and the vLLM bundle lack) as a site folder, Debian 12's nginx binary (the host has
# libssl3, libpcre2, zlib, libcrypt) and Debian 12's HAProxy 2.6 with the two libraries Ubuntu's image lacks (Lua
# 5.3, opentracing; a wrapper puts them on its library path), packed into .gpu-router/router-bundle.tar.xz.
#   on the GPU host: mkdir -p /tmp/rt && xz -dc .gpu-router/router-bundle.tar.xz | tar -C /tmp/rt -xf -
#   -> /tmp/rt/router-site (PYTHONPATH), /tmp/rt/nginx/nginx, /tmp/rt/haproxy/haproxy (router_ab.py's haproxy_bounded)
# and ansible-core 2.19.14 + resolvelib 1.2.1 without ansible_test and ansible/modules into
# .gpu-router/ansible-site.tar.xz (-> /tmp/rt/ans on the PYTHONPATH: router_ab.py renders the nginx template with it).
router_bundle() {
  local out="$ROOT/.gpu-router" tmp
  tmp="$(mktemp -d)"
  # shellcheck disable=SC2064  # expanded now: `tmp` is local, gone when the trap runs at exit
  trap "rm -rf '$tmp'" EXIT
  mkdir -p "$tmp/whl" "$tmp/pack/router-site" "$tmp/pack/nginx" "$out"
  grep -qx '/.gpu-router/' "$ROOT/.git/info/exclude" || echo '/.gpu-router/' >> "$ROOT/.git/info/exclude"
  # shellcheck disable=SC2046
  PIP_CONFIG_FILE=/dev/null "$PY" -m pip download -q --no-deps $(pip_target_flags) -d "$tmp/whl" \
    vllm-router==0.1.17 orjson==3.11.4 1>&2
  for w in "$tmp"/whl/*.whl; do (cd "$tmp/pack/router-site" && "$PY" -m zipfile -e "$w" .); done
  strip --strip-unneeded "$tmp"/pack/router-site/vllm_router_rs.abi3.so "$tmp"/pack/router-site/vllm_router.libs/*
  (cd "$tmp" && apt-get download nginx 1>&2 && dpkg -x nginx_*.deb x) && cp "$tmp/x/usr/sbin/nginx" "$tmp/pack/nginx/"
  mkdir -p "$tmp/pack/haproxy/lib"
  (cd "$tmp" && apt-get download haproxy liblua5.3-0 libopentracing-c-wrapper0 libopentracing1 1>&2 \
    && for deb in haproxy_*.deb liblua5.3-0_*.deb libopentracing*.deb; do dpkg -x "$deb" x; done)
  cp "$tmp/x/usr/sbin/haproxy" "$tmp/pack/haproxy/haproxy.bin"
  cp -P "$tmp"/x/usr/lib/x86_64-linux-gnu/liblua5.3.so.0* "$tmp"/x/usr/lib/x86_64-linux-gnu/libopentracing*.so* \
    "$tmp/pack/haproxy/lib/"
  # shellcheck disable=SC2016  # the wrapper's own expansions, at its run
  printf '#!/bin/sh\nhere=$(dirname "$0")\nLD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/haproxy.bin" "$@"\n' \
    > "$tmp/pack/haproxy/haproxy"
  chmod +x "$tmp/pack/haproxy/haproxy"
  tar -C "$tmp/pack" -cf - . | xz -9 -T"$(nproc)" > "$out/router-bundle.tar.xz"
  log "router bundle: $out/router-bundle.tar.xz ($(du -h "$out/router-bundle.tar.xz" | cut -f1))"
  # ansible-core for router_ab.py's nginx template (the lean bundle drops it), without ansible_test and the modules
  mkdir -p "$tmp/ans-whl" "$tmp/ans-pack/ans"
  # shellcheck disable=SC2046
  PIP_CONFIG_FILE=/dev/null "$PY" -m pip download -q --no-deps $(pip_target_flags) -d "$tmp/ans-whl" \
    ansible-core==2.19.14 resolvelib==1.2.1 1>&2
  for w in "$tmp"/ans-whl/*.whl; do (cd "$tmp/ans-pack/ans" && "$PY" -m zipfile -e "$w" .); done
  rm -rf "$tmp/ans-pack/ans/ansible_test" "$tmp/ans-pack/ans/ansible/modules"
  tar -C "$tmp/ans-pack" -cf - ans | xz -9 -T"$(nproc)" > "$out/ansible-site.tar.xz"
  log "ansible-core for the nginx template: $out/ansible-site.tar.xz ($(du -h "$out/ansible-site.tar.xz" | cut -f1))"
}

case "${1:-build}" in
  lean) lean;;
  router) PY="${GPUFLEET_PYTHON:-python3}"; router_bundle;;
  -h|--help) sed -n '2,20p' "$0"; exit 0;;
  unpack) shift; unpack "$@";;
  build) [ $# -gt 0 ] && shift; PY="${GPUFLEET_PYTHON:-python3}"
         CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/gpufleet-vllm/gpu-wheels"; build "$@";;
  --out) PY="${GPUFLEET_PYTHON:-python3}"; CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/gpufleet-vllm/gpu-wheels"; build "$@";;
  *) die "unknown command $1 (build or unpack; see --help)";;
esac
