#!/usr/bin/env bash
# One process against a job of several, side by side on this machine (issue 15): the same
# synthetic run as `-np 1 --threads T` and as `mpirun -np N --threads T/N` (the same cores),
# alternated REPEATS times. Prints each run's examples/s, AUC, the largest rank's table bytes
# and the bytes each example cost in exchanges, then the medians and the ratio N-process /
# 1-process: the price of going multi-process on one machine, which is what scales across hosts.
#
#   bench/trainer/mpi_bench.sh [ROWS (200000)] [N (2)] [REPEATS (5)] [extra trainer flags...]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TRAINER="${BUILD_DIR:-$ROOT/build}/bin/evoscale-trainer"
ROWS="${1:-200000}" N="${2:-2}" REPEATS="${3:-5}"
shift $(( $# < 3 ? $# : 3 ))
CORES="${CORES:-$(nproc)}"
THREADS_EACH=$(( CORES / N > 0 ? CORES / N : 1 ))
command -v mpirun >/dev/null || { echo "mpi_bench: no mpirun (scripts/dev.sh deps installs openmpi-bin)" >&2; exit 1; }
work="$(mktemp -d "${TMPDIR:-/tmp}/mpi_bench.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# Open MPI as root needs --allow-run-as-root; --oversubscribe lets N exceed the slots it counts.
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$N")
summary() {  # LABEL FILE: one line of the final event's figures
  python3 - "$1" "$2" <<'PY'
import json, sys
final = [json.loads(l) for l in open(sys.argv[2]) if '"final"' in l][-1]
ranks = final.get("rank_table_bytes") or [final["table"]["bytes"]]
print(sys.argv[1], final["examples_per_s"], final["metrics"]["auc"], max(ranks),
      final.get("bytes_exchanged_per_example", 0), final["table"]["rows"])
PY
}
: >"$work/results"
for i in $(seq 1 "$REPEATS"); do
  "$TRAINER" --synthetic "$ROWS" --threads "$CORES" --progress-every 0 "$@" >"$work/one.jsonl"
  summary one "$work/one.jsonl" | tee -a "$work/results"
  "${MPIRUN[@]}" "$TRAINER" --synthetic "$ROWS" --threads "$THREADS_EACH" --progress-every 0 "$@" \
    >"$work/many.jsonl"
  summary many "$work/many.jsonl" | tee -a "$work/results"
done
python3 - "$work/results" "$N" "$CORES" "$THREADS_EACH" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
n, cores, each = sys.argv[2], sys.argv[3], sys.argv[4]
def med(kind, col):
    return statistics.median(float(r[col]) for r in rows if r[0] == kind)
one, many = med("one", 1), med("many", 1)
print(f"-np 1 --threads {cores}: median {one:.0f} examples/s, AUC {med('one', 2):.5f}, "
      f"table {med('one', 3) / 2**20:.1f} MiB of {med('one', 5):.0f} ids")
print(f"-np {n} --threads {each}: median {many:.0f} examples/s, AUC {med('many', 2):.5f}, "
      f"largest rank's table {med('many', 3) / 2**20:.1f} MiB, "
      f"{med('many', 4):.0f} bytes exchanged per example")
print(f"ratio -np {n} / -np 1: {many / one:.2f}x examples/s, "
      f"{med('many', 3) / med('one', 3):.2f}x table per process")
PY
