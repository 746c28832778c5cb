#!/usr/bin/env python3
"""How often a method is "no worse than itself" on every task of a split, at 5 seeds.

Reads the JSON lines of run_bench.py for one method run with many seeds (at least 10) and, per
budget and split, resamples two disjoint groups of 5 seeds per task: the share of resamples in
which the second group's median regret is no worse than the first's on all tasks of the split,
and the mean number of such tasks. A method compared with itself this way is the floor a "no
worse than peer X on every task" bar is measured against.

usage: run_bench.py --split tuning --seeds 20 --methods optuna:tpe:hyperband --out F.jsonl
       run_bench.py --split heldout --seeds 20 --methods optuna:tpe:hyperband --out F.jsonl
       noise_floor.py F.jsonl [--method optuna:tpe:hyperband] [--group 5] [--resamples 2000]
"""
import argparse
import json
import os
import random
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results", nargs="+", help="JSON lines files of run_bench.py")
    p.add_argument("--method", default="optuna:tpe:hyperband")
    p.add_argument("--group", type=int, default=5, help="seeds per group (default 5)")
    p.add_argument("--resamples", type=int, default=2000)
    args = p.parse_args()

    runs = {}  # task -> seed -> {budget: regret}
    for path in args.results:
        with open(path) as f:
            for line in f:
                r = json.loads(line)
                if r.get("method") == args.method:
                    runs.setdefault(r["task"], {})[r["seed"]] = r["regret"]
    if not runs:
        sys.exit(f"noise_floor: no runs of method {args.method!r} in {args.results}")
    with open(os.path.join(HERE, "split.json")) as f:
        split = json.load(f)
    budgets = sorted({b for seeds in runs.values() for reg in seeds.values() for b in reg}, key=float)

    for budget in budgets:
        print(f"budget {budget} x M, {args.method}, groups of {args.group} seeds:")
        for name in ("tuning", "heldout"):
            tasks = [t for t in split[name] if t in runs]
            if len(tasks) < len(split[name]):
                print(f"  {name}: skipped (runs for {len(tasks)} of {len(split[name])} tasks)")
                continue
            seeds = {t: sorted(s for s in runs[t] if budget in runs[t][s]) for t in tasks}
            fewest = min(len(s) for s in seeds.values())
            if fewest < 2 * args.group:
                print(f"  {name}: skipped (needs {2 * args.group} seeds per task, has {fewest})")
                continue
            rng = random.Random(1)
            all_tasks = 0
            per_task = []
            for _ in range(args.resamples):
                ok = 0
                for t in tasks:
                    drawn = rng.sample(seeds[t], 2 * args.group)
                    first = statistics.median(runs[t][s][budget] for s in drawn[:args.group])
                    second = statistics.median(runs[t][s][budget] for s in drawn[args.group:])
                    ok += second <= first
                per_task.append(ok)
                all_tasks += ok == len(tasks)
            print(f"  {name} ({', '.join(tasks)}; {fewest} seeds): no worse on all {len(tasks)} "
                  f"tasks in {all_tasks / args.resamples:.0%} of resamples; "
                  f"mean {statistics.mean(per_task):.2f}/{len(tasks)} tasks")


if __name__ == "__main__":
    main()
