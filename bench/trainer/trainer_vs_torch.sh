#!/usr/bin/env bash
# Side by side, in one run: evoscale-trainer against ../shared/bench/ctr/torch_dnn.py (the same
# model: dim 16, MLP 429-256-128-1, Adagrad 0.05 / Adam 1e-3, one epoch, two threads).
#   1. a 200k/50k train/test pair from gen_synth.py, batch 1024: training examples/s and test AUC
#   2. ../shared/data/criteo-8k train -> test, batch 256: test AUC and logloss
# Prints one JSON object per comparison, with the ratios.
#
# usage: bench/trainer/trainer_vs_torch.sh [BUILD_DIR (build)] [WORK_DIR (/tmp/evoscale-ctr)]
# needs: /usr/bin/python3 with numpy, pandas, sklearn, torch (Debian: python3-torch ...).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$root/build}"
work="${2:-/tmp/evoscale-ctr}"
shared="$root/../shared"
trainer="$build/bin/evoscale-trainer"
py=/usr/bin/python3
threads="${THREADS:-2}"
mkdir -p "$work"
[[ -x "$trainer" ]] || { echo "missing $trainer (build target evoscale_trainer_main)" >&2; exit 1; }

if [[ ! -s "$work/train200k.tsv" || ! -s "$work/test50k.tsv" ]]; then
  "$py" "$shared/bench/ctr/gen_synth.py" 200000 1 "$work/train200k.tsv" >&2
  "$py" "$shared/bench/ctr/gen_synth.py" 50000 2 "$work/test50k.tsv" >&2
fi

compare() {  # name train test batch
  local name=$1 train=$2 test=$3 batch=$4
  local torch ours
  torch=$("$py" "$shared/bench/ctr/torch_dnn.py" "$train" "$test" 16 "$batch" | tail -1)
  ours=$("$trainer" --train "$train" --test "$test" --embedding-dim 16 --batch-size "$batch" \
           --threads "$threads" --progress-every 0 | tail -1)
  "$py" - "$name" "$torch" "$ours" <<'PY'
import json, sys
name, torch, ours = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
print(json.dumps({
    "comparison": name,
    "torch": {"examples_per_s": torch["train_examples_per_s"], "auc": torch["test_auc"],
              "logloss": torch["test_logloss"]},
    "evoscale": {"examples_per_s": round(ours["examples_per_s"]), "auc": ours["metrics"]["auc"],
                 "logloss": ours["metrics"]["logloss"], "peak_rss_bytes": ours["peak_rss_bytes"],
                 "model_bytes": ours["model_bytes"], "rss_over_model": ours["rss_over_model"],
                 "rows": ours["table"]["rows"], "isa": ours["isa"]},
    "speedup": round(ours["examples_per_s"] / torch["train_examples_per_s"], 2),
    "auc_delta": round(ours["metrics"]["auc"] - torch["test_auc"], 4),
}))
PY
}

compare synthetic-200k "$work/train200k.tsv" "$work/test50k.tsv" 1024
if [[ -s "$shared/data/criteo-8k/train.tsv" ]]; then
  compare criteo-8k "$shared/data/criteo-8k/train.tsv" "$shared/data/criteo-8k/test.tsv" 256
else
  echo "skipping criteo-8k: $shared/data/criteo-8k is absent" >&2
fi
