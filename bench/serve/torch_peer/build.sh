#!/usr/bin/env bash
# Builds bench/serve's libtorch peer (serve_torch_peer) and its exporter in build/. Installs
# Debian's libtorch-dev and python3-torch when missing, and OpenBLAS: Debian's libtorch calls
# libblas.so.3, the reference BLAS (several times slower) until OpenBLAS provides it. Then turns
# EVOSCALE_TORCH_PEER on in the existing build (scripts/dev.sh test or demo made it) and builds
# only the peer's targets.
# Not part of `scripts/dev.sh test`: libtorch is a peer for the bench, not a dependency.
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
if ! dpkg -s libtorch-dev python3-torch libopenblas0-pthread >/dev/null 2>&1; then
  apt-get update
  apt-get install -y libtorch-dev python3-torch libopenblas0-pthread
fi
if [[ ! -f "$root/build/CMakeCache.txt" ]]; then
  echo "build.sh: no build/ yet: run scripts/dev.sh test (or demo) first" >&2
  exit 1
fi
cmake -S "$root" -B "$root/build" -DEVOSCALE_TORCH_PEER=ON >/dev/null
cmake --build "$root/build" -j"$(nproc)" --target serve_torch_peer serve_export serve_load \
  evoscale_serve_main evoscale_trainer_main
