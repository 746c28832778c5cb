#!/usr/bin/env bash
# Creates examples/managed_study.yaml and watches evoscaled run it: every trial is the real
# evoscale-trainer, started by the server itself (a managed study); then prints the trials and
# the best one.
# usage: examples/managed_demo.sh [path/to/evoscale]   (server from EVOSCALE_SERVER; the
# server must find evoscale-trainer in its PATH, as scripts/dev.sh demo arranges)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CLI="${1:-$HERE/../build/bin/evoscale}"

study=$("$CLI" study create -f "$HERE/managed_study.yaml" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["name"])')
echo "created $study (managed: evoscaled runs its trials)"
# Progress rewritten in place at a terminal; elsewhere a line at each change (scripts/dev.sh demo
# reads them). The study has a budget: it completes once its trials have spent it, and the
# trials running then finish.
report() {
  python3 -c '
import json, sys
s = json.load(sys.stdin)
done = int(s.get("completed_trial_count", 0)); total = int(s.get("trial_count", 0))
spent = s.get("spent_core_seconds", 0); budget = s["spec"].get("budget_core_seconds", 0)
over = s.get("state") == "COMPLETED" and done == total
print(f"{done} trials finished, {spent:.1f}/{budget:g} core-seconds spent", "over" if over else "running")'
}
shown=""
for _ in $(seq 1 2400); do
  line=$("$CLI" study get "$study" --json | report)
  text="${line% *}"
  if [ -t 1 ]; then
    printf '\r[demo] %s' "$text"
  elif [ "$text" != "$shown" ]; then
    printf '[demo] %s\n' "$text"
  fi
  shown="$text"
  [ "${line##* }" = over ] && break
  sleep 0.25
done
if [ -t 1 ]; then echo; fi
"$CLI" trials list "$study"
"$CLI" study get "$study" | grep -E "^(budget|early_stopping):"
# Where trials were stopped, and how well the AUC at that step ranks the trials that ran in
# full (Spearman's rho against their final AUC): COST_AWARE stops only where it ranks them.
"$CLI" trials list "$study" --json | python3 -c '
import json, sys
trials = json.load(sys.stdin).get("trials", [])
def at(t, step):
    best = None
    for m in t.get("measurements", []):
        if int(m.get("step", 0)) <= step and "auc" in m.get("metrics", {}):
            best = max(best or 0, m["metrics"]["auc"])
    return best
def ranks(xs):
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    r = [0.0] * len(xs)
    for k, i in enumerate(order): r[i] = k
    return r
full = [t for t in trials if t.get("state") == "SUCCEEDED"]
stops = {}
for t in trials:
    if t.get("state") == "STOPPED" and t.get("measurements"):
        step = max(int(m.get("step", 0)) for m in t["measurements"])
        stops[step] = stops.get(step, 0) + 1
for step in sorted(stops):
    pairs = [(at(t, step), t["final_measurement"]["metrics"]["auc"]) for t in full]
    pairs = [p for p in pairs if p[0] is not None]
    if len(pairs) < 3:
        print(f"stopped at step {step}: {stops[step]} trials"); continue
    a, b = ranks([p[0] for p in pairs]), ranks([p[1] for p in pairs])
    n = len(pairs); d2 = sum((x - y) ** 2 for x, y in zip(a, b))
    rho = 1 - 6 * d2 / (n * (n * n - 1))
    print(f"stopped at step {step}: {stops[step]} trials; AUC at step {step} vs final AUC of the {n} full runs: rho {rho:.2f}")
'

echo "best trial:"
"$CLI" optimal "$study"
