#!/usr/bin/env bash
# Runs evoscale's search_bench next to Optuna's optuna_quality.py (the eight peer functions),
# and suite_bench next to optuna_suite.py (the search suite's tuning and held-out parts,
# ZDT1-3 and DTLZ2), in the same session, and prints the median regrets and hypervolumes side
# by side with ratios and the issue's bars.
#
#   bench/search/run_search_bench.sh [search_bench flags, e.g. --server 127.0.0.1:50051]
#
# Environment: BIN (default $ROOT/build/bin), BUDGET (200), SEEDS (5), MO_BUDGET (300),
# SUITE=0 to skip the suite, LATENCY=1 to add the designer_benchmark / optuna_latency.py
# 1000 comparison. Optuna's side takes about half an hour on two cores.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SHARED="$ROOT/../shared"
BIN="${BIN:-$ROOT/build/bin}"
BUDGET="${BUDGET:-200}"
SEEDS="${SEEDS:-5}"
PY=/usr/bin/python3

if [[ ! -f "$SHARED/bench/hpo/optuna_quality.py" ]]; then
  echo "run_search_bench.sh: $SHARED/bench/hpo/optuna_quality.py not found" >&2
  exit 1
fi
for b in search_bench suite_bench; do
  if [[ ! -x "$BIN/$b" ]]; then
    echo "run_search_bench.sh: $BIN/$b not built (cmake --build build --target $b)" >&2
    exit 1
  fi
done
MO_BUDGET="${MO_BUDGET:-300}"
# Optuna's CmaEsSampler imports the cmaes package: both are needed.
if ! "$PY" -c 'import optuna, cmaes' 2>/dev/null; then
  if [[ "$(id -u)" == 0 ]]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y python3-optuna python3-cmaes >/dev/null
  else
    echo "run_search_bench.sh: needs Debian's python3-optuna and python3-cmaes (run as root to install)" >&2
    exit 1
  fi
fi

OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
echo "Optuna: optuna_quality.py $BUDGET $SEEDS (in the background; minutes)..." >&2
(cd "$SHARED/bench/hpo" && "$PY" optuna_quality.py "$BUDGET" "$SEEDS" >"$OUT/optuna.jsonl") &
OPTUNA_PID=$!
SUITE_FILES=()
if [[ "${SUITE:-1}" != 0 ]]; then
  echo "Optuna: optuna_suite.py (in the background; tens of minutes)..." >&2
  "$PY" "$ROOT/bench/search/optuna_suite.py" "$BIN/suite_bench" --budget "$BUDGET" --seeds "$SEEDS" \
    --mo_budget "$MO_BUDGET" --mo_seeds "$SEEDS" >"$OUT/optuna_suite.jsonl" &
  SUITE_PID=$!
  SUITE_FILES=("$OUT/suite.jsonl" "$OUT/optuna_suite.jsonl")
fi

"$BIN/search_bench" --budget "$BUDGET" --seeds "$SEEDS" --json_out "$OUT/evoscale.jsonl" "$@"
if [[ "${SUITE:-1}" != 0 ]]; then
  "$BIN/suite_bench" --budget "$BUDGET" --seeds "$SEEDS" --mo_budget "$MO_BUDGET" --mo_seeds "$SEEDS" \
    --json_out "$OUT/suite.jsonl"
  wait "$SUITE_PID"
fi

wait "$OPTUNA_PID"
"$PY" "$ROOT/bench/search/compare.py" "$OUT/evoscale.jsonl" "$OUT/optuna.jsonl" "${SUITE_FILES[@]}"

if [[ "${LATENCY:-0}" == 1 && -x "$BIN/designer_benchmark" ]]; then
  echo
  echo "## Cost of one ask+tell"
  "$BIN/designer_benchmark" --benchmark_filter='BM_AskTell' --benchmark_min_time=0.5
  (cd "$SHARED/bench/hpo" && "$PY" optuna_latency.py 1000)
fi
