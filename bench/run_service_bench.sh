#!/usr/bin/env bash
# Runs bench/service_bench and then Optuna's ask+tell latency peer in the same session, and prints
# the two side by side. Arguments go to service_bench (e.g. --durability power --seconds 10).
#
#   bench/run_service_bench.sh [service_bench flags...]
#
# Environment: BUILD_DIR (default $ROOT/build), OPTUNA_SIZES (default 100,1000,5000),
# OUT_DIR (keep the JSON lines there: evoscale.jsonl, optuna.jsonl; default: a temp dir).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
BENCH="$BUILD_DIR/bin/service_bench"
PEER="$ROOT/../shared/bench/hpo/optuna_latency.py"
OPTUNA_SIZES="${OPTUNA_SIZES:-100,1000,5000}"
PYTHON=/usr/bin/python3

if [[ ! -x "$BENCH" ]]; then
  echo "run_service_bench: $BENCH not found; build it first:" >&2
  echo "  cmake -S $ROOT -B $BUILD_DIR -G Ninja -DCMAKE_BUILD_TYPE=Release" >&2
  echo "  cmake --build $BUILD_DIR --target service_bench evoscaled" >&2
  exit 1
fi
if [[ ! -f "$PEER" ]]; then
  echo "run_service_bench: Optuna peer $PEER not found" >&2
  exit 1
fi

if [[ -n "${OUT_DIR:-}" ]]; then
  OUT="$OUT_DIR"
  mkdir -p "$OUT"
else
  OUT="$(mktemp -d "${TMPDIR:-/tmp}/service_bench.XXXXXX")"
  trap 'rm -rf "$OUT"' EXIT
fi

echo "== evoscale: bench/service_bench (gRPC over loopback, SQLite store) =="
# The human-readable table goes to stderr (the terminal), the JSON rows to a file.
"$BENCH" --json "$@" >"$OUT/evoscale.jsonl"

if ! "$PYTHON" -c 'import optuna' 2>/dev/null; then
  if [[ "$(id -u)" == 0 ]]; then
    echo "== installing Debian's python3-optuna =="
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-optuna >/dev/null
  else
    echo "run_service_bench: python3-optuna is missing; as root run:" >&2
    echo "  apt-get update && apt-get install -y python3-optuna" >&2
    echo "then run this script again." >&2
    exit 1
  fi
fi

echo
echo "== Optuna $("$PYTHON" -c 'import optuna; print(optuna.__version__)'): $PEER $OPTUNA_SIZES =="
"$PYTHON" "$PEER" "$OPTUNA_SIZES" | tee "$OUT/optuna.jsonl"

echo
"$PYTHON" - "$OUT/evoscale.jsonl" "$OUT/optuna.jsonl" <<'EOF'
import json, sys

ev = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
op = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
loads = [r for r in ev if r.get("kind") == "load"]
study = next((r for r in ev if r.get("kind") == "study"), {})
if not loads:
    sys.exit("no service_bench rows")
base = min(loads, key=lambda r: r["clients"])  # 1 client unless --clients says otherwise
# A closed loop of one client: the mean time per pair is the inverse of the rate.
ev_mean = 1000.0 / base["pairs_per_s"] if base["pairs_per_s"] else float("nan")
ev_p50 = base["pair_p50_ms"]

print("== side by side: one ask+tell (evoscale: SuggestTrials + CompleteTrial) ==")
print(f"evoscale, {base['clients']} client(s), study of {base['study_trials_before']:,} trials "
      f"(RANDOM), durability {base['durability']}: mean {ev_mean:.3f} ms, "
      f"p50 {ev_p50:.3f} ms, p99 {base['pair_p99_ms']:.3f} ms per pair")
print()
print(f"{'optuna sampler':>14} {'trials':>7} {'optuna ms':>10} {'evoscale ms':>12} "
      f"{'optuna/evoscale':>16}")
for r in op:
    ms = r["ms_per_ask_tell"]
    print(f"{r['sampler']:>14} {r['completed_trials']:>7} {ms:>10.3f} {ev_mean:>12.3f} "
          f"{ms / ev_mean:>15.1f}x")
print()
print("evoscale throughput (pairs/s) by clients: " +
      ", ".join(f"{r['clients']}: {r['pairs_per_s']:.0f} (p99 {r['pair_p99_ms']:.1f} ms)"
                for r in loads))
if study:
    print(f"study {study['name']} ended with {study['trial_count']:,} trials")
print("Optuna: in-process, in-memory storage, one thread, nothing persisted (mean of 20 ask+tell).")
print("evoscale: every pair is two gRPC calls over loopback TCP and two SQLite WAL commits "
      f"(durability {base['durability']}); the load generator shares the machine's CPUs.")
EOF
