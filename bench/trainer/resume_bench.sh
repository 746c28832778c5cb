#!/usr/bin/env bash
# --resume against a fresh run, side by side (issue 16): trains the README's 200k synthetic run
# fresh; then the same run stopped at step HALF with a checkpoint, and resumed from it. Prints
# the resumed run's wall time over what its remaining work costs in the fresh run (its fixed
# costs, start and evaluation, plus the remaining steps' share of its training time). Reading
# the checkpoint (and the resumed run's final checkpoint write) is not in the denominator, so
# the ratio bounds "resume <= X x (reading the checkpoint + the remaining training)" from above.
#
#   bench/trainer/resume_bench.sh [ROWS (200000)] [HALF (100)] [REPEATS (3)]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TRAINER="${BUILD_DIR:-$ROOT/build}/bin/evoscale-trainer"
ROWS="${1:-200000}" HALF="${2:-100}" REPEATS="${3:-3}"
work="$(mktemp -d "${TMPDIR:-/tmp}/resume_bench.XXXXXX")"
trap 'rm -rf "$work"' EXIT
run() {  # prints "WALL_S TRAIN_S STEPS" of one trainer run
  local start end
  start=$(date +%s.%N)
  "$TRAINER" --synthetic "$ROWS" --threads 2 --progress-every 0 "$@" >"$work/out.jsonl"
  end=$(date +%s.%N)
  python3 - "$start" "$end" "$work/out.jsonl" <<'PY'
import json, sys
final = [json.loads(l) for l in open(sys.argv[3]) if '"final"' in l][-1]
print(float(sys.argv[2]) - float(sys.argv[1]), final["train_s"], final["steps"])
PY
}
for i in $(seq 1 "$REPEATS"); do
  read -r fresh_wall fresh_train steps < <(run)
  rm -rf "$work/ck"
  "$TRAINER" --synthetic "$ROWS" --threads 2 --progress-every 0 --checkpoint-dir "$work/ck" \
    --max-steps "$HALF" >/dev/null
  read -r resume_wall _ _ < <(run --checkpoint-dir "$work/ck" --resume)
  python3 -c "
fw, ft, n, rw, h = $fresh_wall, $fresh_train, $steps, $resume_wall, $HALF
remaining = (fw - ft) + ft * (n - h) / n
print(f'run $i: fresh {fw:.2f} s ({n} steps, training {ft:.2f} s); resume from step {h}: '
      f'{rw:.2f} s; its remaining work in the fresh run {remaining:.2f} s; ratio {rw / remaining:.2f}x')"
done
