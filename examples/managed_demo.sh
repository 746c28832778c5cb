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
field() { python3 -c "import json,sys; d=json.load(sys.stdin); print(d.get('$1', 0))"; }
max=$("$CLI" study get "$study" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["spec"]["max_trials"])')
# Progress rewritten in place at a terminal; elsewhere a line at each change (scripts/dev.sh demo
# reads them).
shown=""
for _ in $(seq 1 1200); do
  s=$("$CLI" study get "$study" --json)
  done_count=$(printf '%s' "$s" | field completed_trial_count)
  if [ -t 1 ]; then
    printf '\r[demo] managed trials finished: %s/%s' "$done_count" "$max"
  elif [ "$done_count" != "$shown" ]; then
    printf '[demo] managed trials finished: %s/%s\n' "$done_count" "$max"
  fi
  shown="$done_count"
  [ "$done_count" -ge "$max" ] && break
  sleep 0.25
done
if [ -t 1 ]; then echo; fi
"$CLI" trials list "$study"
echo "best trial:"
"$CLI" optimal "$study"
