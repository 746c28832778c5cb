#!/usr/bin/env bash
# evoscale developer entry point.
#   scripts/dev.sh deps    install the Debian 12 packages the build and every test need
#   scripts/dev.sh build   configure and build everything (tests, fuzzers, benches) Release into
#                          build/ (binaries in build/bin/)
#   scripts/dev.sh test    deps + build + every test (ctest, parallel)
#   scripts/dev.sh demo    only what the demo needs: its packages, its three binaries (evoscaled,
#                          evoscale, evoscale-trainer); then start evoscaled and run two example
#                          studies to the end (ask/tell through the CLI; managed: evoscaled runs
#                          the trainer). One line per phase; the full output goes to a log file.
set -euo pipefail
# The last command of a pipeline runs in this shell: the readers below keep their counts.
shopt -s lastpipe

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${EVOSCALE_BUILD_DIR:-$ROOT/build}"
JOBS="${JOBS:-$(nproc)}"

# What building evoscaled, evoscale and evoscale-trainer needs (the top-level CMakeLists.txt's
# find_package calls, service/'s OpenSSL; pkg-config for gRPC's CMake files, which find RE2
# through it), and what the demo runs: python3 in the example scripts. npm (the dashboard's chart
# library, web/) is added below.
DEMO_PACKAGES=(
  build-essential cmake ninja-build pkg-config ca-certificates
  libgrpc++-dev libgrpc-dev protobuf-compiler protobuf-compiler-grpc libprotobuf-dev
  libabsl-dev libboost-dev libsqlite3-dev libpq-dev libeigen3-dev prometheus-cpp-dev
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libssl-dev
  python3
)
# The rest, for the tests, fuzzers and benches (cmake/EvoscaleTestDeps.cmake checks for them).
TEST_PACKAGES=(
  git curl sqlite3 openssl
  libgtest-dev libgmock-dev libbenchmark-dev
  python3-venv python3-pip python3-setuptools python3-grpcio python3-protobuf python3-optuna
  python3-pandas python3-pytest python3-yaml python3-psycopg2
  clang libclang-rt-14-dev
  chromium
  slurm-wlm munge
  postgresql-15
  openmpi-bin libopenmpi-dev
)
# npm ci fills web/node_modules (and tests/web's); a machine with its own node keeps it.
if ! command -v npm >/dev/null 2>&1; then
  DEMO_PACKAGES+=(npm)
  if ! command -v node >/dev/null 2>&1; then DEMO_PACKAGES+=(nodejs); fi
fi

# The demo's full output (apt, npm, cmake, ninja, the studies) goes to $LOG and its terminal gets
# one line per phase; deps, build and test show everything, as CI wants.
QUIET=""
LOG=""

log() { printf '[dev.sh] %s\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# 75 -> "1m15s"
duration() { if [ "$1" -ge 60 ]; then printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); else printf '%ds' "$1"; fi; }

# A phase's progress: at a terminal one line rewritten in place, elsewhere only the lines
# passed with "keep" (a few per phase, so that a CI log stays short).
PHASE_LINE=""
progress() {
  local text="$1" keep="${2:-}"
  if [ -t 2 ]; then
    printf '\r\033[K[dev.sh] %s' "$text" >&2
  elif [ -n "$keep" ]; then
    printf '[dev.sh] %s\n' "$text" >&2
  fi
  PHASE_LINE="$text"
}
# Ends the phase's line with "done (TIME)".
phase_done() {
  local started="$1"
  if [ -t 2 ]; then printf '\r\033[K' >&2; fi
  log "$PHASE_LINE ... done ($(duration $((SECONDS - started))))"
}
# A phase failed: say where its output is, and show its end.
phase_failed() {
  if [ -t 2 ]; then printf '\n' >&2; fi
  log "$1 failed; the last lines of $LOG:"
  tail -n 40 "$LOG" >&2
  exit 1
}

missing_packages() {
  local p
  for p in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      printf '%s\n' "$p"
    fi
  done
}

# Installs the packages that are missing of "$@". QUIET: apt-get and dpkg write to $LOG, and the
# terminal gets their progress as one line (downloads, then packages set up, out of the total
# with dependencies).
install_packages() {
  local started=$SECONDS missing total
  mapfile -t missing < <(missing_packages "$@")
  if [ "${#missing[@]}" -eq 0 ]; then
    log "packages: all $# present"
    return
  fi
  if [ -z "$QUIET" ]; then
    log "installing: ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "${missing[@]}"
    return
  fi
  progress "packages: ${#missing[@]} to install (apt-get update)"
  as_root apt-get update >>"$LOG" 2>&1 </dev/null || phase_failed "apt-get update"
  total=$(as_root apt-get install -s --no-install-recommends "${missing[@]}" 2>>"$LOG" </dev/null |
          grep -c '^Inst ' || true)
  progress "packages: ${#missing[@]} to install, $total with dependencies" keep
  local head="$PHASE_LINE" got=0 set_up=0 line
  if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
         "${missing[@]}" </dev/null 2>&1 |
       while IFS= read -r line; do
         printf '%s\n' "$line" >>"$LOG"
         case "$line" in
           Get:*) got=$((got + 1)); progress "$head: downloading $got/$total" ;;
           "Setting up "*) set_up=$((set_up + 1)); progress "$head: setting up $set_up/$total" ;;
         esac
       done; then
    phase_failed "apt-get install"
  fi
  PHASE_LINE="$head"
  phase_done "$started"
}

# From npm, each pinned by its lockfile: the dashboard's chart library (web/, compiled into
# evoscaled, so it must be there before CMake) and playwright-core for its browser test
# (tests/web, not for the demo).
web_deps() {
  local dir
  for dir in "$@"; do
    # A lockfile newer than the installed tree: install again.
    if [ ! -f "$ROOT/$dir/node_modules/.package-lock.json" ] ||
       [ "$ROOT/$dir/package-lock.json" -nt "$ROOT/$dir/node_modules/.package-lock.json" ]; then
      log "installing $dir/node_modules (npm ci)"
      npm ci --prefix "$ROOT/$dir" --no-audit --no-fund --loglevel=error >/dev/null || return 1
    fi
  done
}

# Everything, with every test package required (a missing one fails the configure, naming it).
build() {
  web_deps web tests/web
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEVOSCALE_BUILD_TESTS=ON \
    -DEVOSCALE_BUILD_BENCH=ON -DEVOSCALE_REQUIRE_TEST_DEPS=ON >/dev/null
  cmake --build "$BUILD" -j "$JOBS"
}

# The demo's three binaries only. A new build folder is configured without tests and benches
# (whose packages the demo does not install); one configured before, by `build` or `test`, keeps
# its options, so that the demo never turns the tests off there. CUDA stays as CMake finds it
# (on where nvcc and NCCL's header are).
demo_build() {
  local started=$SECONDS options=()
  if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    options=(-DEVOSCALE_BUILD_TESTS=OFF -DEVOSCALE_BUILD_BENCH=OFF)
  fi
  progress "configure (npm ci web, cmake)"
  { web_deps web && cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release "${options[@]}"
  } >>"$LOG" 2>&1 || phase_failed "configure"
  phase_done "$started"

  # ninja's status lines, "[57/128] Building CXX ...", become "build 57/128"; outside a terminal
  # a line at each quarter.
  started=$SECONDS
  local line n=0 total=0 quarter=0
  progress "build (evoscaled, evoscale, evoscale-trainer)" keep
  if ! cmake --build "$BUILD" -j "$JOBS" --target evoscaled evoscale_cli evoscale_trainer_main \
         2>&1 | while IFS= read -r line; do
           printf '%s\n' "$line" >>"$LOG"
           if [[ $line =~ ^\[([0-9]+)/([0-9]+)\] ]]; then
             n=${BASH_REMATCH[1]} total=${BASH_REMATCH[2]}
             if [ $((n * 4 / total)) -gt "$quarter" ] && [ "$n" -lt "$total" ]; then
               quarter=$((n * 4 / total))
               progress "build $n/$total" keep
             else
               progress "build $n/$total"
             fi
           fi
         done; then
    phase_failed "build"
  fi
  if [ "$PHASE_LINE" = "build (evoscaled, evoscale, evoscale-trainer)" ]; then
    PHASE_LINE="build: up to date"
  fi
  phase_done "$started"
}

run_tests() {
  # GPU tests carry the label "gpu" and need a GPU: skipped on CPU-only machines.
  local exclude=()
  if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi >/dev/null 2>&1; then
    exclude=(-LE gpu)
  fi
  ctest --test-dir "$BUILD" -j "$JOBS" --output-on-failure --timeout 600 "${exclude[@]}"
}

# Runs one example study (examples/NAME.sh) with its output in $LOG: its "[demo] TEXT" lines
# become the phase's progress, "TITLE: TEXT"; what follows its "best trial:" is shown after the
# phase's line.
run_study() {
  local title="$1" script="$2" started=$SECONDS line best=() in_best=""
  progress "$title"
  if ! EVOSCALE_SERVER="$GRPC" "$ROOT/examples/$script" "$BUILD/bin/evoscale" 2>&1 |
       while IFS= read -r line; do
         printf '%s\n' "$line" >>"$LOG"
         case "$line" in
           "[demo] "*) progress "$title: ${line#\[demo\] }" ;;
           "best trial:") in_best=1 ;;
           *) if [ -n "$in_best" ]; then best+=("  $line"); fi ;;
         esac
       done; then
    phase_failed "$title"
  fi
  phase_done "$started"
  if [ "${#best[@]}" -gt 0 ]; then printf '%s\n' "${best[@]}" >&2; fi
}

demo() {
  local dir started=$SECONDS
  dir="$(mktemp -d "${TMPDIR:-/tmp}/evoscale-demo.XXXXXX")"
  QUIET=1
  LOG="$dir/demo.log"
  log "demo: full output (apt, npm, cmake, ninja, the studies) in $LOG"
  install_packages "${DEMO_PACKAGES[@]}"
  demo_build

  local out="$dir/evoscaled.out"
  # build/bin on evoscaled's PATH: the managed study's trials run evoscale-trainer.
  PATH="$BUILD/bin:$PATH" "$BUILD/bin/evoscaled" --db "$dir/demo.db" --grpc 127.0.0.1:0 \
    --http 127.0.0.1:0 >"$out" 2>"$dir/evoscaled.err" &
  local pid=$!
  trap 'kill "$pid" 2>/dev/null || true' EXIT
  for _ in $(seq 1 100); do grep -q listening "$out" 2>/dev/null && break; sleep 0.1; done
  local http
  GRPC=$(sed -n 's/.*"grpc":"\([^"]*\)".*/\1/p' "$out")
  http=$(sed -n 's/.*"http":"\([^"]*\)".*/\1/p' "$out")
  [ -n "$GRPC" ] || { cat "$dir/evoscaled.err" >&2; log "evoscaled did not start"; exit 1; }
  log "evoscaled: gRPC $GRPC, database $dir/demo.db"
  log "dashboard: http://$http/  (open it now to watch the studies run)"
  run_study "study 1, ask/tell through the CLI" ask_tell_demo.sh
  run_study "study 2, managed (evoscaled runs the real trainer)" managed_demo.sh
  log "study JSON: http://$http/api/v1/studies/1  metrics: http://$http/metrics"
  log "demo ready in $(duration $((SECONDS - started))); log: $LOG"
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
  deps) install_packages "${DEMO_PACKAGES[@]}" "${TEST_PACKAGES[@]}" ;;
  build) install_packages "${DEMO_PACKAGES[@]}" "${TEST_PACKAGES[@]}"; build ;;
  test) install_packages "${DEMO_PACKAGES[@]}" "${TEST_PACKAGES[@]}"; build; run_tests ;;
  demo) demo ;;
  *) echo "usage: scripts/dev.sh deps|build|test|demo" >&2; exit 2 ;;
esac
