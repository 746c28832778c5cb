#!/usr/bin/env bash
# GENETIC beside Optuna 4.9's samplers on the search suite (issue 44): evoscale's suite_bench and
# optuna_suite.py with ../shared/peers/optuna-4.9 first on the path, same problems, budget and
# seeds, then compare_49.py. Output: JSON lines in $OUT (default bench/search/results_44/run-DATE)
# and the tables on stdout.
#
#   BUDGET=100 SEEDS=5 SPLIT=held-out bench/search/run_optuna49.sh
#   ASYNC=8 ... adds 8 trials in flight (GENETIC, GPSampler, TPE constant liar; 3 seeds)
#   MO=1 ...    adds the multi-objective problems (NSGA2 beside Optuna's NSGA-II and TPE)
#
# GPSampler is slow here (0.5-2 s a trial at 100-200 trials): budget 100 on the eight held-out
# problems takes about 50 minutes on this 2-core machine, Optuna's side alone.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PEER="$ROOT/../shared/peers/optuna-4.9"
BIN="${BIN:-$ROOT/build/bin}"
BUDGET="${BUDGET:-100}"
SEEDS="${SEEDS:-5}"
SPLIT="${SPLIT:-held-out}"
OUT="${OUT:-$ROOT/bench/search/results_44/run-$(date +%Y%m%d-%H%M%S)}"
PY=/usr/bin/python3

if [[ ! -d "$PEER/optuna" ]]; then
  echo "run_optuna49.sh: $PEER not found (Optuna 4.9.0, shared/peers)" >&2
  exit 1
fi
if [[ ! -x "$BIN/suite_bench" ]]; then
  echo "run_optuna49.sh: $BIN/suite_bench not built (scripts/dev.sh build)" >&2
  exit 1
fi
# Optuna 4.9 on Debian's packages; GPSampler needs torch, CmaEsSampler cmaes.
if ! PYTHONPATH="$PEER" "$PY" -c 'import optuna, torch, cmaes, scipy' 2>/dev/null; then
  if [[ "$(id -u)" -eq 0 ]]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      python3-optuna python3-torch python3-cmaes python3-scipy python3-packaging >/dev/null
  else
    echo "run_optuna49.sh: needs python3-optuna, -torch, -cmaes, -scipy (run as root to install)" >&2
    exit 1
  fi
fi
mkdir -p "$OUT"
checkpoints="$((BUDGET / 4)),$((BUDGET / 2))"
peers=(env PYTHONPATH="$PEER" OMP_NUM_THREADS=1 "$PY" "$ROOT/bench/search/optuna_suite.py" "$BIN/suite_bench")

echo "evoscale: suite_bench, budget $BUDGET, $SEEDS seeds, $SPLIT ..." >&2
"$BIN/suite_bench" --budget "$BUDGET" --seeds "$SEEDS" --split "$SPLIT" --parallel 0 \
  --async_workers "${ASYNC:-0}" --mo_budget 0 --checkpoints "$checkpoints" \
  --json_out "$OUT/genetic.jsonl" >/dev/null
echo "Optuna 4.9: gp, tpe, tpe_mv, cmaes, random (long) ..." >&2
"${peers[@]}" --budget "$BUDGET" --seeds "$SEEDS" --split "$SPLIT" --mo_budget 0 \
  --samplers gp,tpe,tpe_mv,cmaes,random --checkpoints "$checkpoints" >"$OUT/optuna49.jsonl" 2>/dev/null
extra=()
if [[ "${ASYNC:-0}" -gt 0 ]]; then
  echo "Optuna 4.9 with ${ASYNC} in flight: gp, tpe_cl ..." >&2
  "${peers[@]}" --budget "$BUDGET" --seeds 3 --split "$SPLIT" --mo_budget 0 --samplers gp,tpe_cl \
    --checkpoints "$checkpoints" --async_workers "$ASYNC" >"$OUT/optuna49_async.jsonl" 2>/dev/null
  extra+=(--async "$OUT/optuna49_async.jsonl" --workers "$ASYNC")
fi
if [[ "${MO:-0}" == 1 ]]; then
  echo "multi-objective: NSGA2 and Optuna's NSGA-II, TPE ..." >&2
  "$BIN/suite_bench" --algorithms "" --parallel 0 --mo_budget 300 --mo_seeds 5 \
    --json_out "$OUT/nsga2_mo.jsonl" >/dev/null
  "${peers[@]}" --budget 0 --seeds 0 --samplers "" --mo_budget 300 --mo_seeds 5 \
    --mo_samplers nsga2,tpe >"$OUT/optuna49_mo.jsonl" 2>/dev/null
  extra+=(--mo "$OUT/nsga2_mo.jsonl" "$OUT/optuna49_mo.jsonl")
fi
"$PY" "$ROOT/bench/search/compare_49.py" "$OUT/genetic.jsonl" "$OUT/optuna49.jsonl" \
  --budgets "$((BUDGET / 2)),$BUDGET" --anytime "$BUDGET:$checkpoints" "${extra[@]}"
