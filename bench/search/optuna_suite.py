"""Optuna's samplers on evoscale's search suite (bench/search/suite.h), same budget and seeds.

The functions, noise draws and hypervolumes come from `suite_bench --serve` over a pipe, so
both sides see exactly the same problems. Prints JSON lines:
  {"suite": P, "split": S, "sampler": X, "median_regret": ..., "regrets": [...]}
  {"mo": P, "sampler": "nsga2", "median_hv": ..., "hv": [...]}

With --checkpoints 50,100 each line also has "regrets_at": the regret of the trial seen as best
after that many trials of the same run (Optuna's samplers do not know the budget, so a run's
first 50 trials are a run of budget 50). Run it with ../shared/peers/optuna-4.9 first on
PYTHONPATH for Optuna 4.9 (gp, tpe_mv need it); "optuna_version" says which one ran.

usage: optuna_suite.py SUITE_BENCH [--budget 200] [--seeds 5] [--mo_budget 300]
       [--mo_seeds 5] [--samplers random,tpe,tpe_mv,gp,nsga2,cmaes] [--problems a,b]
       [--split held-out] [--checkpoints 50,100] [--first_seed 0] [--async_workers 8]
       [--mo_samplers nsga2,tpe]
"""
import argparse
import json
import math
import statistics
import subprocess
import sys

import optuna

optuna.logging.set_verbosity(optuna.logging.ERROR)

SAMPLERS = {
    "random": lambda s: optuna.samplers.RandomSampler(seed=s),
    "tpe": lambda s: optuna.samplers.TPESampler(seed=s),
    "nsga2": lambda s: optuna.samplers.NSGAIISampler(seed=s),
    "cmaes": lambda s: optuna.samplers.CmaEsSampler(seed=s),
    # Optuna 4.x only: multivariate TPE over conditional groups, and the Gaussian-process sampler.
    "tpe_mv": lambda s: optuna.samplers.TPESampler(seed=s, multivariate=True, group=True),
    "gp": lambda s: optuna.samplers.GPSampler(seed=s),
    # TPE's own answer to parallel workers (pending trials count as bad ones).
    "tpe_cl": lambda s: optuna.samplers.TPESampler(seed=s, constant_liar=True),
}


class Oracle:
    def __init__(self, binary):
        self.proc = subprocess.Popen([binary, "--serve"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, bufsize=1)

    def ask(self, request):
        self.proc.stdin.write(json.dumps(request) + "\n")
        answer = json.loads(self.proc.stdout.readline())
        if "error" in answer:
            raise RuntimeError("suite_bench --serve: %s" % answer["error"])
        return answer


def suggest(trial, p):
    if p["type"] == "float":
        return trial.suggest_float(p["name"], p["low"], p["high"], log=p["log"])
    if p["type"] == "int":
        return trial.suggest_int(p["name"], int(p["low"]), int(p["high"]), log=p["log"])
    return p["choices"].index(trial.suggest_categorical(p["name"], p["choices"]))


def run_problem(oracle, problem, sampler, seed, budget, checkpoints=(), workers=0):
    """The true regret of the trial Optuna saw as best, and that regret after each checkpoint.

    workers > 0: that many trials stay in flight (ask/tell; the oldest is told first)."""
    best = [math.inf, math.inf]
    at = {}
    done = [0]

    def values_of(trial):
        values = {}
        for p in problem["params"]:
            parent = p.get("parent")
            if parent is not None and (values.get(parent) is None
                                       or int(values[parent]) not in p["parent_choices"]):
                values[p["name"]] = None
                continue
            values[p["name"]] = suggest(trial, p)
        return [values[p["name"]] for p in problem["params"]]

    def evaluate(number, values):
        answer = oracle.ask({"op": "eval", "problem": problem["name"], "seed": seed,
                             "index": number, "values": values})
        if answer["value"] < best[0]:
            best[0], best[1] = answer["value"], answer["true"]
        done[0] += 1
        if done[0] in checkpoints:
            at[done[0]] = best[1]
        return answer["value"]

    study = optuna.create_study(sampler=SAMPLERS[sampler](seed))
    if workers <= 0:
        study.optimize(lambda trial: evaluate(trial.number, values_of(trial)), n_trials=budget)
        return best[1], at
    in_flight = []
    asked = 0
    while done[0] < budget:
        while len(in_flight) < workers and asked < budget:
            trial = study.ask()
            in_flight.append((trial, values_of(trial)))
            asked += 1
        trial, values = in_flight.pop(0)
        study.tell(trial, evaluate(trial.number, values))
    return best[1], at


def run_mo(oracle, problem, seed, budget, sampler="nsga2"):
    points = []

    def objective(trial):
        x = [trial.suggest_float("x%d" % i, 0.0, 1.0) for i in range(problem["dims"])]
        f = oracle.ask({"op": "mo_eval", "problem": problem["name"], "x": x})["f"]
        points.append(f)
        return tuple(f)

    study = optuna.create_study(directions=["minimize"] * problem["objectives"],
                                sampler=SAMPLERS[sampler](seed))
    study.optimize(objective, n_trials=budget)
    return oracle.ask({"op": "hv", "problem": problem["name"], "points": points})["hv"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("suite_bench")
    ap.add_argument("--budget", type=int, default=200)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--mo_budget", type=int, default=300)
    ap.add_argument("--mo_seeds", type=int, default=5)
    ap.add_argument("--samplers", default="random,tpe,nsga2,cmaes")
    ap.add_argument("--problems", default="")
    ap.add_argument("--split", default="")
    ap.add_argument("--checkpoints", default="")
    ap.add_argument("--first_seed", type=int, default=0)
    ap.add_argument("--mo_samplers", default="nsga2",
                    help="samplers of the multi-objective problems (nsga2, tpe, random)")
    ap.add_argument("--async_workers", type=int, default=0,
                    help="keep this many trials in flight (ask/tell), the oldest told first")
    args = ap.parse_args()
    checkpoints = set(int(c) for c in filter(None, args.checkpoints.split(",")))
    oracle = Oracle(args.suite_bench)
    described = oracle.ask({"op": "describe"})
    wanted = set(filter(None, args.problems.split(",")))
    for problem in described["problems"]:
        if wanted and problem["name"] not in wanted:
            continue
        if args.split and problem["split"] != args.split:
            continue
        for sampler in filter(None, args.samplers.split(",")):
            runs = [run_problem(oracle, problem, sampler, seed, args.budget, checkpoints,
                                args.async_workers)
                    for seed in range(args.first_seed, args.first_seed + args.seeds)]
            regrets = [r for r, _ in runs]
            line = {"suite": problem["name"], "split": problem["split"],
                    "sampler": sampler, "budget": args.budget,
                    "optuna_version": optuna.__version__, "first_seed": args.first_seed,
                    "async_workers": args.async_workers,
                    "median_regret": statistics.median(regrets), "regrets": regrets}
            if checkpoints:
                line["regrets_at"] = {str(c): [at[c] for _, at in runs] for c in checkpoints}
            print(json.dumps(line), flush=True)
    if args.mo_budget > 0:
        for problem in described["mo"]:
            if wanted and problem["name"] not in wanted:
                continue
            for sampler in filter(None, args.mo_samplers.split(",")):
                hvs = [run_mo(oracle, problem, seed, args.mo_budget, sampler)
                       for seed in range(args.mo_seeds)]
                print(json.dumps({"mo": problem["name"], "sampler": sampler,
                                  "optuna_version": optuna.__version__, "budget": args.mo_budget,
                                  "median_hv": statistics.median(hvs), "hv": hvs}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
