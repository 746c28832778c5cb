#!/usr/bin/env bash
# Runs every fuzz target (tests/fuzz) for SECONDS each (default 600), JOBS at a time (default
# 1), from its committed seed corpus plus what earlier runs found (kept in BUILD/fuzz-bench/).
# Prints one line per target: runs, executions per second, coverage (edges), corpus size and
# the outcome; a crash, leak, timeout or out-of-memory leaves its input in BUILD/fuzz-bench/.
#   bench/fuzz/run_fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${EVOSCALE_BUILD_DIR:-$ROOT/build}"
SECONDS_EACH="${1:-600}"
shift || true
TARGETS=("$@")
if [ "${#TARGETS[@]}" -eq 0 ]; then
  TARGETS=(spec_fuzz study_file_fuzz trial_event_fuzz http_fuzz telemetry_fuzz checkpoint_fuzz)
fi
OUT="$BUILD/fuzz-bench"
mkdir -p "$OUT"

run_one() {
  local t="$1" bin="$BUILD/fuzz/$1"
  [ -x "$bin" ] || { echo "$t: not built (needs clang and libclang-rt-14-dev)"; return 1; }
  mkdir -p "$OUT/$t"
  local rc=0 start
  start=$(date +%s)
  "$bin" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$OUT/$t-" "$OUT/$t" "$ROOT/tests/fuzz/corpus/$t" >"$OUT/$t.log" 2>&1 || rc=$?
  local runs cov corpus outcome elapsed
  elapsed=$(( $(date +%s) - start ))
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$OUT/$t.log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$OUT/$t.log" | tail -1 | cut -d' ' -f2)
  corpus=$(find "$OUT/$t" -type f | wc -l)
  outcome=$([ "$rc" -eq 0 ] && echo "no finding" ||
            grep -m1 -o 'ERROR: [A-Za-z]*: [a-z-]*\|SUMMARY: .*' "$OUT/$t.log" || echo "exit $rc")
  printf '%-18s %6ss %12s runs %8s exec/s  cov %5s  corpus %5s  %s\n' "$t" "$elapsed" \
    "${runs:-?}" "$(( ${runs:-0} / (elapsed > 0 ? elapsed : 1) ))" "${cov:-?}" "$corpus" "$outcome"
}

export -f run_one
export BUILD OUT ROOT SECONDS_EACH
printf '%s\n' "${TARGETS[@]}" | xargs -P "${JOBS:-1}" -I{} bash -c 'run_one {}'
