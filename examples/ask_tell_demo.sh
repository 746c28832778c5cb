#!/usr/bin/env bash
# Walks examples/study.yaml to completion through the evoscale CLI, as a client would:
# ask for trials, "train" (a cheap stand-in objective), report measurements, complete.
# usage: examples/ask_tell_demo.sh [path/to/evoscale]   (server from EVOSCALE_SERVER)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CLI="${1:-$HERE/../build/bin/evoscale}"

study=$("$CLI" study create -f "$HERE/study.yaml" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["name"])')
echo "created $study"
max=$("$CLI" study get "$study" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["spec"]["max_trials"])')
# Progress rewritten in place at a terminal; a line each elsewhere (scripts/dev.sh demo reads them).
progress() { if [ -t 1 ]; then printf '\r[demo] %s' "$1"; else printf '[demo] %s\n' "$1"; fi; }

# The stand-in objective: a smooth function of the parameters, with noise-free optimum near
# lr_dense=0.003, embedding_dim=32, hidden_layers=2, optimizer_sparse=adagrad.
objective() {
  python3 -c '
import json, math, sys
t = json.loads(sys.argv[1])
p = {}
for x in t["parameters"]:
    p[x["name"]] = x.get("double_value", x.get("int_value", x.get("string_value")))
loss = 0.44 + 0.01 * (math.log10(float(p["lr_dense"])) + 2.5) ** 2
loss += 0.002 * abs(math.log2(float(p["embedding_dim"])) - 5)
loss += 0.003 * abs(int(p["hidden_layers"]) - 2)
loss += {"adagrad": 0.0, "ftrl": 0.002, "sgd": 0.01}[p["optimizer_sparse"]]
print(t["name"], "%.6f" % loss)' "$1"
}

done_count=0
while :; do
  trials=$("$CLI" suggest "$study" --count 4 --client-id demo-worker --json)
  n=$(printf '%s' "$trials" | python3 -c 'import json,sys; print(len(json.load(sys.stdin).get("trials", [])))')
  [ "$n" -gt 0 ] || break
  while read -r t; do
    read -r name loss < <(objective "$t")
    "$CLI" measure "$name" --step 1 "logloss=$(python3 -c "print($loss + 0.05)")" >/dev/null
    "$CLI" complete "$name" "logloss=$loss" >/dev/null
    done_count=$((done_count + 1))
    progress "trials completed: $done_count/$max"
  done < <(printf '%s' "$trials" | python3 -c 'import json,sys; [print(json.dumps(t)) for t in json.load(sys.stdin)["trials"]]')
done
if [ -t 1 ]; then echo; fi
"$CLI" study get "$study"
echo "best trial:"
"$CLI" optimal "$study"
