#!/usr/bin/python3
"""Median regret after N trials of a --no-fidelity run_bench.py run, for several N at once.

No method of a no-fidelity run knows its budget, so a run of 200 trials holds the runs of 50 and
100 (its best after that many trials finished, from the trajectory). Per N: a table task x
method of the median regret over seeds, and for each evoscale method on how many tasks it is no
worse than the best Optuna sampler's median and than GPSampler's (optuna:gp:none).

usage: trials_report.py FILE.jsonl [--at 50,100,200]
"""
import argparse
import json
import os
import statistics
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def best_after(trajectory, trials):
    best = None
    for _, auc, finished in trajectory:
        if finished <= trials:
            best = auc if best is None else max(best, auc)
    return best


def main():
    import rbv2
    from run_bench import tasks_and_methods
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--at", default="50,100,200")
    a = ap.parse_args()
    rows = [json.loads(l) for l in open(a.file) if l.startswith("{")]
    rows = [r for r in rows if r.get("mode") == "no-fidelity"]
    stats = rbv2.auc_stats()
    tasks, methods = tasks_and_methods(rows)
    for n in [int(x) for x in a.at.split(",") if x]:
        regrets = defaultdict(list)
        for r in rows:
            auc = best_after(r["trajectory"], n)
            if auc is not None:
                regrets[(r["task"], r["method"])].append(rbv2.regret(r["task"], auc, stats))
        med = {k: statistics.median(v) for k, v in regrets.items()}
        print(f"\n### {n} trials: median regret over seeds\n")
        print("| method | " + " | ".join(tasks) + " |")
        print("|---|" + "---|" * len(tasks))
        for m in methods:
            print(f"| {m} | " + " | ".join(
                f"{med[(t, m)]:.4f}" if (t, m) in med else "-" for t in tasks) + " |")
        optuna = [m for m in methods if m.startswith("optuna")]
        for e in (m for m in methods if m.startswith("evoscale")):
            best = sum(1 for t in tasks if (t, e) in med and all(
                med[(t, e)] <= med[(t, o)] + 1e-12 for o in optuna if (t, o) in med))
            gp = sum(1 for t in tasks if (t, e) in med and (t, "optuna:gp:none") in med
                     and med[(t, e)] <= med[(t, "optuna:gp:none")] + 1e-12)
            print(f"\n{e}: no worse than the best Optuna sampler on {best}/{len(tasks)} tasks, "
                  f"than GPSampler on {gp}/{len(tasks)}")


if __name__ == "__main__":
    sys.exit(main())
