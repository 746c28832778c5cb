#!/usr/bin/python3
"""Runs the rbv2_xgboost surrogate matrix (tasks x methods x seeds) with simulate.py and prints
the median regrets.

Each (task, method) pair is one simulate.py process (its own evoscaled when the method is
evoscale) running every seed; --jobs of them run at once (default 2). The JSON lines go to
--out; a progress line per finished run goes to stderr. Then, per budget: a table task x
method of the median regret over seeds, and for each evoscale method: on how many tasks its
median is no worse than the best Optuna pair's, on how many no worse than optuna:tpe:hyperband's,
and per task the budget fraction at which its median (over seeds) best-so-far regret first
reaches tpe+hyperband's final median regret at that budget.

usage: run_bench.py [--split tuning|heldout] [--seeds 5] [--budgets 10,30]
       [--methods M1,M2,...] [--out FILE] [--jobs 2] [--no-fidelity --trials 150]
       run_bench.py --report FILE   (only the tables, from an earlier run's JSON lines)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from typing import Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

OPTUNA = [f"optuna:{s}:{p}" for s in ("tpe", "random") for p in ("hyperband", "median", "sh", "none")]
DEFAULT_METHODS = ["evoscale:GENETIC:COST_AWARE"] + OPTUNA
NO_FIDELITY_METHODS = ["evoscale:GENETIC:NONE", "optuna:tpe:none", "optuna:random:none"]
REFERENCE = "optuna:tpe:hyperband"


def run_matrix(a) -> None:
    jobs = [(t, m) for t in a.tasks for m in a.methods]
    total_runs = 0
    for _, m in jobs:
        aware = m.startswith("evoscale") and (m.split(":")[2:3] in ([], ["COST_AWARE"]) or a.budget_always)
        total_runs += len(a.seed_list) * (len(a.budget_list) if aware and not a.no_fidelity else 1)
    lock = threading.Lock()
    done = [0]
    start = time.monotonic()
    out = open(a.out, "a")
    failures = []

    def worker(queue: List[tuple]) -> None:
        while True:
            with lock:
                if not queue:
                    return
                task, method = queue.pop(0)
            cmd = [sys.executable, os.path.join(HERE, "simulate.py"), "--task", task,
                   "--method", method, "--seeds", ",".join(map(str, a.seed_list)),
                   "--budgets", a.budgets, "--workers", str(a.workers),
                   "--max-step", str(a.max_step)]
            if a.no_fidelity:
                cmd += ["--no-fidelity", "--trials", str(a.trials)]
            if a.budget_always:
                cmd.append("--budget-always")
            if a.evoscaled:
                cmd += ["--evoscaled", a.evoscaled]
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
            for line in p.stdout:
                r = json.loads(line)
                with lock:
                    out.write(line)
                    out.flush()
                    done[0] += 1
                    reg = r["regret"]
                    reg = (" ".join(f"{b}M {v:.4f}" for b, v in reg.items())
                           if isinstance(reg, dict) else f"{reg:.4f}")
                    print(f"[{done[0]}/{total_runs} {time.monotonic() - start:6.0f}s] "
                          f"{r['method']} task {r['task']} seed {r['seed']}: regret {reg}; "
                          f"{r['trials']['started']} trials, {r['wall_s']:.1f} s",
                          file=sys.stderr, flush=True)
            if p.wait() != 0:
                with lock:
                    failures.append((task, method, p.returncode))
                    print(f"FAILED: {task} {method} (exit {p.returncode})", file=sys.stderr)

    queue = list(jobs)
    threads = [threading.Thread(target=worker, args=(queue,)) for _ in range(a.jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.close()
    print(f"{done[0]} runs in {time.monotonic() - start:.0f} s -> {a.out}", file=sys.stderr)
    if failures:
        raise SystemExit(f"{len(failures)} jobs failed: {failures}")


# ---- the report ------------------------------------------------------------------------------

def best_within(trajectory, spent):
    best = None
    for c, b, _ in trajectory:
        if c <= spent * (1 + 1e-12):
            best = b
    return best


def regret_of(stats, task, best):
    lo, hi = stats[task]
    return 1.0 if best is None else (hi - best) / (hi - lo)


def fmt(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.4f}"


def groups_of_five(regrets, b, tasks, e, opt) -> None:
    """With 10 or more seeds (run alike), the issue's counts in each disjoint group of 5 seeds:
    how much of a 5-seed verdict is the draw of the seeds."""
    seeds = min(len(regrets.get((b, t, m), [])) for t in tasks for m in opt + [e])
    if seeds < 10:
        return
    counts = []
    for g in range(seeds // 5):
        def med(t, m):
            return statistics.median(regrets[(b, t, m)][5 * g:5 * g + 5])
        best = sum(1 for t in tasks if all(med(t, e) <= med(t, o) + 1e-12 for o in opt))
        ref = (sum(1 for t in tasks if med(t, e) <= med(t, REFERENCE) + 1e-12)
               if REFERENCE in opt else "-")
        counts.append(f"{best}/{ref}")
    print(f"{e}: per group of 5 seeds, tasks no worse than the best pair / than {REFERENCE}: "
          + " ".join(counts))


def tasks_and_methods(rows: List[dict]) -> tuple:
    """The tasks of `rows` (by id, numerically) and their methods in order of appearance."""
    tasks = sorted({r["task"] for r in rows}, key=lambda t: (len(t), t))
    methods = []
    for r in rows:
        if r["method"] not in methods:
            methods.append(r["method"])
    return tasks, methods


def report(rows: List[dict]) -> None:
    import rbv2
    rows = sorted(rows, key=lambda r: r["seed"])  # regrets in seed order (groups_of_five)
    stats = rbv2.auc_stats()
    tasks, methods = tasks_and_methods(rows)
    no_fidelity = all(r["mode"] == "no-fidelity" for r in rows)

    # regrets[(budget, task, method)] = [regret per seed]; runs[(budget, task, method)] = rows
    regrets: Dict[tuple, List[float]] = defaultdict(list)
    runs: Dict[tuple, List[dict]] = defaultdict(list)
    if no_fidelity:
        budgets = ["trials"]
        for r in rows:
            regrets[("trials", r["task"], r["method"])].append(r["regret"])
    else:
        budgets = sorted({b for r in rows for b in r["regret"]}, key=float)
        for r in rows:
            for b, v in r["regret"].items():
                regrets[(b, r["task"], r["method"])].append(v)
                runs[(b, r["task"], r["method"])].append(r)

    def med(b, t, m):
        v = regrets.get((b, t, m))
        return statistics.median(v) if v else None

    width = max(10, max(len(m) for m in methods) + 1)
    for b in budgets:
        title = (f"median regret after {rows[0].get('trials_limit')} trials (no fidelity)"
                 if no_fidelity else f"budget {b} x M: median regret over seeds")
        print(f"\n{title}")
        print(f"{'method':<{width}}" + "".join(f"{t:>10}" for t in tasks) + f"{'median':>10}")
        for m in methods:
            vals = [med(b, t, m) for t in tasks]
            have = [v for v in vals if v is not None]
            print(f"{m:<{width}}" + "".join(f"{fmt(v):>10}" for v in vals)
                  + f"{fmt(statistics.median(have) if have else None):>10}")
        print(f"mean regret over seeds")
        for m in methods:
            vals = [statistics.mean(regrets[(b, t, m)]) if regrets.get((b, t, m)) else None
                    for t in tasks]
            have = [v for v in vals if v is not None]
            print(f"{m:<{width}}" + "".join(f"{fmt(v):>10}" for v in vals)
                  + f"{fmt(statistics.mean(have) if have else None):>10}  (mean)")
        evo = [m for m in methods if m.startswith("evoscale")]
        opt = [m for m in methods if m.startswith("optuna")]
        for e in evo:
            if opt:
                groups_of_five(regrets, b, tasks, e, opt)
                vs_best = sum(1 for t in tasks if med(b, t, e) is not None and all(
                    med(b, t, o) is None or med(b, t, e) <= med(b, t, o) + 1e-12 for o in opt))
                line = f"{e}: no worse than the best Optuna pair's median on {vs_best}/{len(tasks)} tasks"
                if REFERENCE in opt:
                    vs_ref = sum(1 for t in tasks if med(b, t, e) is not None
                                 and med(b, t, REFERENCE) is not None
                                 and med(b, t, e) <= med(b, t, REFERENCE) + 1e-12)
                    line += f"; no worse than {REFERENCE} on {vs_ref}/{len(tasks)}"
                print(line)
            if no_fidelity or REFERENCE not in opt:
                continue
            fractions = []
            for t in tasks:
                target = med(b, t, REFERENCE)
                ers = runs.get((b, t, e))
                if target is None or not ers:
                    fractions.append("-")
                    continue
                B = float(b) * ers[0]["reference_cost_M"]
                points = sorted({c / B for r in ers for c, _, _ in r["trajectory"] if c <= B * (1 + 1e-12)})
                hit = None
                for f in points:
                    m_f = statistics.median(regret_of(stats, t, best_within(r["trajectory"], f * B))
                                            for r in ers)
                    if m_f <= target + 1e-12:
                        hit = f
                        break
                fractions.append("never" if hit is None else f"{hit:.2f}")
            print(f"{e}: budget fraction at which its median best-so-far regret first reaches "
                  f"{REFERENCE}'s final median: " + ", ".join(f"{t} {x}" for t, x in zip(tasks, fractions)))

    print("\nper run: median wall seconds / median trials started / median seconds in the method")
    for m in methods:
        rs = [r for r in rows if r["method"] == m]
        print(f"{m:<{width}} {statistics.median(r['wall_s'] for r in rs):7.2f} s "
              f"{statistics.median(r['trials']['started'] for r in rs):7.0f} trials "
              f"{statistics.median(r['method_s'] for r in rs):7.2f} s   (max wall "
              f"{max(r['wall_s'] for r in rs):.2f} s over {len(rs)} runs)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--split", choices=("tuning", "heldout"), default="tuning")
    p.add_argument("--tasks", help="comma-separated task ids instead of the split")
    p.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 (default 5)")
    p.add_argument("--budgets", default="10,30")
    p.add_argument("--methods", help="comma-separated (default: evoscale:GENETIC:COST_AWARE and "
                   "the 8 Optuna pairs; with --no-fidelity: " + ", ".join(NO_FIDELITY_METHODS) + ")")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--max-step", type=int, default=32)
    p.add_argument("--no-fidelity", action="store_true")
    p.add_argument("--trials", type=int, default=150)
    p.add_argument("--budget-always", action="store_true")
    p.add_argument("--evoscaled")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--out", help="JSON lines file, appended (default results/SPLIT-TIME.jsonl "
                   "here; results/ is not tracked)")
    p.add_argument("--report", help="print the tables of this JSON lines file and exit")
    a = p.parse_args()
    if a.report:
        with open(a.report) as f:
            report([json.loads(l) for l in f if l.strip()])
        return
    with open(os.path.join(HERE, "split.json")) as f:
        split = json.load(f)
    a.tasks = a.tasks.split(",") if a.tasks else split[a.split]
    a.seed_list = list(range(a.seeds))
    a.budget_list = a.budgets.split(",")
    a.methods = (a.methods.split(",") if a.methods
                 else NO_FIDELITY_METHODS if a.no_fidelity else DEFAULT_METHODS)
    if not a.out:
        os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
        label = "tasks" if a.tasks != split[a.split] else a.split
        a.out = os.path.join(HERE, "results", f"{label}{'-nofid' if a.no_fidelity else ''}-"
                             f"{time.strftime('%Y%m%d-%H%M%S')}.jsonl")
    run_matrix(a)
    with open(a.out) as f:
        report([json.loads(l) for l in f if l.strip()])


if __name__ == "__main__":
    main()
