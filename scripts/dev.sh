#!/usr/bin/env bash
# evoscale developer entry point.
#   scripts/dev.sh deps    install the Debian 12 packages the build and tests need
#   scripts/dev.sh build   configure and build Release into build/ (binaries in build/bin/)
#   scripts/dev.sh test    deps + build + every test (ctest, parallel)
#   scripts/dev.sh demo    deps + build + start evoscaled and run two example studies to the end
#                          (ask/tell through the CLI; managed: evoscaled runs the trainer)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${EVOSCALE_BUILD_DIR:-$ROOT/build}"
JOBS="${JOBS:-$(nproc)}"

PACKAGES=(
  build-essential cmake ninja-build pkg-config git ca-certificates curl
  libgrpc++-dev libgrpc-dev protobuf-compiler protobuf-compiler-grpc libprotobuf-dev
  libabsl-dev libboost-dev libsqlite3-dev sqlite3 libeigen3-dev prometheus-cpp-dev
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev
  python3 openssl libssl-dev
  python3-venv python3-pip python3-setuptools python3-grpcio python3-protobuf python3-optuna
  python3-pandas python3-pytest python3-yaml
  clang libclang-rt-14-dev
  chromium
  slurm-wlm munge
  openmpi-bin libopenmpi-dev
)
# The dashboard's browser test (tests/web) runs on Node.js; a machine that has node keeps its own.
if ! command -v node >/dev/null 2>&1; then PACKAGES+=(nodejs npm); fi

log() { printf '[dev.sh] %s\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

deps() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  if [ "${#missing[@]}" -eq 0 ]; then
    log "all ${#PACKAGES[@]} packages present"
    return
  fi
  log "installing: ${missing[*]}"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

build() {
  web_deps
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD" -j "$JOBS"
}

# From npm, each pinned by its lockfile: the dashboard's chart library (web/, compiled into
# evoscaled, so it must be there before CMake) and playwright-core for its browser test.
web_deps() {
  local dir
  for dir in web tests/web; do
    # A lockfile newer than the installed tree: install again.
    if [ ! -f "$ROOT/$dir/node_modules/.package-lock.json" ] ||
       [ "$ROOT/$dir/package-lock.json" -nt "$ROOT/$dir/node_modules/.package-lock.json" ]; then
      log "installing $dir/node_modules (npm ci)"
      npm ci --prefix "$ROOT/$dir" --no-audit --no-fund --loglevel=error >/dev/null
    fi
  done
}

run_tests() {
  # GPU tests carry the label "gpu" and need a GPU: skipped on CPU-only machines.
  local exclude=()
  if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi >/dev/null 2>&1; then
    exclude=(-LE gpu)
  fi
  ctest --test-dir "$BUILD" -j "$JOBS" --output-on-failure --timeout 600 "${exclude[@]}"
}

demo() {
  local dir
  dir="$(mktemp -d "${TMPDIR:-/tmp}/evoscale-demo.XXXXXX")"
  local out="$dir/evoscaled.out"
  # build/bin on evoscaled's PATH: the managed study's trials run evoscale-trainer.
  PATH="$BUILD/bin:$PATH" "$BUILD/bin/evoscaled" --db "$dir/demo.db" --grpc 127.0.0.1:0 \
    --http 127.0.0.1:0 >"$out" 2>"$dir/evoscaled.err" &
  local pid=$!
  trap 'kill "$pid" 2>/dev/null || true' EXIT
  for _ in $(seq 1 100); do grep -q listening "$out" 2>/dev/null && break; sleep 0.1; done
  local grpc http
  grpc=$(sed -n 's/.*"grpc":"\([^"]*\)".*/\1/p' "$out")
  http=$(sed -n 's/.*"http":"\([^"]*\)".*/\1/p' "$out")
  [ -n "$grpc" ] || { cat "$dir/evoscaled.err" >&2; log "evoscaled did not start"; exit 1; }
  log "evoscaled: gRPC $grpc, database $dir/demo.db"
  log "dashboard: http://$http/  (open it now to watch the study run)"
  EVOSCALE_SERVER="$grpc" "$ROOT/examples/ask_tell_demo.sh" "$BUILD/bin/evoscale"
  log "now a managed study: evoscaled runs each trial itself (the real trainer)"
  EVOSCALE_SERVER="$grpc" "$ROOT/examples/managed_demo.sh" "$BUILD/bin/evoscale"
  log "study JSON: http://$http/api/v1/studies/1  metrics: http://$http/metrics"
  # At a terminal the dashboard stays up until Ctrl-C; in scripts and CI the demo ends here.
  if [ -t 0 ] && [ -z "${EVOSCALE_DEMO_EXIT:-}" ]; then
    log "the dashboard stays at http://$http/ — press Ctrl-C to stop"
    wait "$pid" 2>/dev/null || true
  fi
  kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true
  trap - EXIT
  log "done; the database stays at $dir/demo.db"
}

case "${1:-}" in
  deps) deps ;;
  build) deps; build ;;
  test) deps; build; run_tests ;;
  demo) deps; build; demo ;;
  *) echo "usage: scripts/dev.sh deps|build|test|demo" >&2; exit 2 ;;
esac
