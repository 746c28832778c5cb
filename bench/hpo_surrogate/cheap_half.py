#!/usr/bin/env python3
"""What knowing a configuration's cost is worth on the rbv2_xgboost surrogate: random search
without early stopping on W one-core workers within B = k x M, drawing from all of the space
or only from its cheaper share by the surrogate's own full-run cost (an oracle no method has:
it is the bound that learning costs can approach). A worker takes the next configuration in a
random order; one that would not finish within the worker's share B / W of the budget runs
until the budget is spent and counts for nothing (its cost is not known before it runs).

usage: cheap_half.py [--tasks 1462,188,...] [--configs 3000] [--repeats 200] [--workers 4]
prints per task the median regret over repeats at 10 and 30 x M for shares 1, 1/2 and 1/4.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rbv2  # noqa: E402


def best_random(cost, auc, order, budget, workers):
    clock = np.zeros(workers)
    best = None
    for i in order:
        w = int(np.argmin(clock))
        if np.isinf(clock[w]):
            break  # every worker is running a trial that cannot finish
        if clock[w] + cost[i] > budget / workers:
            clock[w] = np.inf
            continue
        clock[w] += cost[i]
        best = auc[i] if best is None else max(best, auc[i])
    return best


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--tasks", default="1462,188,40668,40670,41138,46,1457,50")
    p.add_argument("--configs", type=int, default=3000)
    p.add_argument("--repeats", type=int, default=200)
    p.add_argument("--workers", type=int, default=4)
    a = p.parse_args()
    stats = rbv2.auc_stats()
    for task in a.tasks.split(","):
        ev = rbv2.Evaluator(task, 32)
        rng = np.random.default_rng(7)
        configs = [rbv2.sample(rng) for _ in range(a.configs)]
        curves = ev.curves(configs)
        cost = np.array([c.cost[-1] for c in curves])
        auc = np.array([c.auc[-1] for c in curves])
        M = rbv2.reference_cost(task)
        cells = []
        for share in (1.0, 0.5, 0.25):
            pool = np.where(cost <= np.quantile(cost, share))[0]
            for k in (10, 30):
                regrets = [rbv2.regret(task, best_random(cost, auc, np.random.default_rng(r).permutation(pool),
                                                         k * M, a.workers), stats)
                           for r in range(a.repeats)]
                cells.append(f"share {share:g} {k}M {np.median(regrets):.4f}")
        print(task, " | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
