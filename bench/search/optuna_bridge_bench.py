#!/usr/bin/env python3
"""Optuna with EvoscaleSampler vs Optuna's RandomSampler, on one Optuna script.

The script (`objective` below, a study.optimize of 100 trials) is the same for both; only the
sampler differs: EvoscaleSampler(algorithm="GENETIC", seed=s) against
optuna.samplers.RandomSampler(seed=s), for seeds 0..4. The bench starts its own evoscaled on a
temporary database, prints each seed's best value side by side, the medians, their
difference and the ratio of the median regrets (best - the objective's optimum), and checks
that every Optuna trial of the EvoscaleSampler runs is in evoscaled with its value.

The objective is a deterministic surrogate of a CTR model's validation logloss over six
hyperparameters with interactions: the learning rate's optimum depends on the optimizer and
the depth, the weight decay's on the embedding size, over-capacity hurts less with more weight
decay, and deep tanh/sigmoid nets pay for vanishing gradients. Its minimum is 0.44 (adam, gelu,
lr and weight decay at their optima, log2(dim) + 0.75 * layers = 8.5), up to the rounding of
the integer embedding size.

usage: optuna_bridge_bench.py [--evoscaled build/bin/evoscaled] [--trials 100] [--seeds 5]
       [--population N] [--startup N] [--tpe] [--json]
Needs the evoscale package (clients/python) and Debian's python3-optuna.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import optuna

from evoscale.integration.optuna import TRIAL_ATTR, EvoscaleSampler

ROOT = Path(__file__).resolve().parents[2]
OPTIMUM = 0.44

optuna.logging.set_verbosity(optuna.logging.WARNING)


def ctr_logloss(lr: float, weight_decay: float, embedding_dim: int, layers: int,
                optimizer: str, activation: str) -> float:
    """The surrogate validation logloss (see the module docstring)."""
    lr_opt = {"adam": 3e-3, "adagrad": 3e-2, "ftrl": 1e-2, "sgd": 5e-2}[optimizer]
    lr_opt *= math.sqrt(2 / layers)  # deeper nets want a smaller step
    x = math.log10(lr / lr_opt)
    lr_penalty = 0.010 * x * x + (0.03 * (x - 0.5) ** 2 if x > 0.5 else 0.0)  # diverges above ~3x
    wd_opt = 1e-6 * embedding_dim / 16  # bigger tables need more regularization
    y = math.log10(weight_decay / wd_opt)
    wd_penalty = 0.0015 * y * y
    capacity = math.log2(embedding_dim) + 0.75 * layers
    under = max(0.0, 8.5 - capacity)
    over = max(0.0, capacity - 8.5)
    capacity_penalty = 0.004 * under**2 + 0.002 * over**2 / (1 + max(0.0, y))
    activation_penalty = {
        "gelu": 0.0,
        "relu": 0.0008,
        "tanh": 0.002 + 0.0008 * layers,
        "sigmoid": 0.004 + 0.0015 * layers,
    }[activation]
    optimizer_penalty = {"adam": 0.0, "ftrl": 0.0006, "adagrad": 0.0012, "sgd": 0.004}[optimizer]
    penalties = (lr_penalty, wd_penalty, capacity_penalty, activation_penalty, optimizer_penalty)
    return OPTIMUM + sum(penalties)


def objective(trial: optuna.Trial) -> float:
    return suggest_and_score(trial)


STEPS = 10


def pruned_objective(trial: optuna.Trial) -> float:
    """The same surrogate trained over STEPS epochs: epoch k reports final + gap / k, the gap
    growing with how far the parameters are from their best (a worse run also learns slower),
    and Optuna's pruner may stop it."""
    final = suggest_and_score(trial)
    gap = 0.05 + 2.0 * (final - OPTIMUM)
    for step in range(1, STEPS + 1):
        trial.report(final + gap / step, step)
        if trial.should_prune():
            raise optuna.TrialPruned()
    return final


def suggest_and_score(trial: optuna.Trial) -> float:
    return ctr_logloss(
        lr=trial.suggest_float("lr", 1e-5, 1e-1, log=True),
        weight_decay=trial.suggest_float("weight_decay", 1e-8, 1e-2, log=True),
        embedding_dim=trial.suggest_int("embedding_dim", 4, 256, log=True),
        layers=trial.suggest_int("layers", 1, 6),
        optimizer=trial.suggest_categorical("optimizer", ["adam", "adagrad", "ftrl", "sgd"]),
        activation=trial.suggest_categorical("activation", ["relu", "gelu", "tanh", "sigmoid"]),
    )


class Evoscaled:
    """evoscaled on port 0 with a temporary database, stopped by close()."""

    def __init__(self, binary: str) -> None:
        self.dir = tempfile.TemporaryDirectory(prefix="optuna-bridge-bench-")
        self.process = subprocess.Popen(
            [binary, "--db", os.path.join(self.dir.name, "bench.db"),
             "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )
        assert self.process.stdout is not None
        for line in self.process.stdout:  # the first lines; evoscaled prints little after
            if "listening" in line:
                self.address = json.loads(line)["grpc"]
                return
        raise SystemExit(f"{binary} exited before listening")

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)
        self.dir.cleanup()


def run(sampler: optuna.samplers.BaseSampler, trials: int, prune: bool = False) -> optuna.Study:
    pruner = (optuna.pruners.MedianPruner(n_startup_trials=5, n_warmup_steps=2) if prune
              else optuna.pruners.NopPruner())
    study = optuna.create_study(sampler=sampler, direction="minimize", pruner=pruner)
    study.optimize(pruned_objective if prune else objective, n_trials=trials)
    return study


def check_mirrored(study: optuna.Study, sampler: EvoscaleSampler) -> None:
    """Every Optuna trial is in evoscaled, with its value."""
    stored = {t.name: t for t in sampler.evoscale_study.trials}
    assert len(stored) == len(study.trials), (len(stored), len(study.trials))
    for trial in study.trials:
        evo = stored[trial.system_attrs[TRIAL_ATTR]]
        if trial.state == optuna.trial.TrialState.PRUNED:
            assert evo.state == "STOPPED", evo
            continue
        assert evo.state == "SUCCEEDED" and evo.final_metrics == {"value": trial.value}, evo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default_binary = os.environ.get("EVOSCALED", str(ROOT / "build/bin/evoscaled"))
    parser.add_argument("--evoscaled", default=default_binary)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--population", type=int, default=0,
                        help="GENETIC population_size (0: evoscaled's default: 12 here)")
    parser.add_argument("--startup", type=int, default=1, help="EvoscaleSampler n_startup_trials")
    parser.add_argument("--tpe", action="store_true",
                        help="add a column for optuna.samplers.TPESampler(seed=s)")
    parser.add_argument("--prune", action="store_true",
                        help="the objective reports 10 epochs and Optuna's MedianPruner stops "
                        "runs (both samplers); pruned trials are STOPPED in evoscaled")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object instead of the table")
    args = parser.parse_args()

    settings = {"population_size": args.population} if args.population else None
    server = Evoscaled(args.evoscaled)
    rows = []
    try:
        for seed in range(args.seeds):
            start = time.monotonic()
            sampler = EvoscaleSampler(server.address, algorithm="GENETIC", seed=seed,
                                      settings=settings, n_startup_trials=args.startup)
            evo = run(sampler, args.trials, args.prune)
            evo_seconds = time.monotonic() - start
            check_mirrored(evo, sampler)
            rnd = run(optuna.samplers.RandomSampler(seed=seed), args.trials, args.prune)
            row = {"seed": seed, "evoscale": evo.best_value, "random": rnd.best_value,
                   "evoscale_seconds": evo_seconds}
            if args.tpe:
                row["tpe"] = run(optuna.samplers.TPESampler(seed=seed), args.trials,
                                 args.prune).best_value
            rows.append(row)
    finally:
        server.close()

    evo_median = statistics.median(r["evoscale"] for r in rows)
    rnd_median = statistics.median(r["random"] for r in rows)
    summary = {
        "trials": args.trials,
        "population_size": args.population or "default",
        "startup_trials": args.startup,
        "pruned": args.prune,
        "optimum": OPTIMUM,
        "runs": rows,
        "median_evoscale": evo_median,
        "median_random": rnd_median,
        "difference": rnd_median - evo_median,
        "regret_ratio": (rnd_median - OPTIMUM) / max(evo_median - OPTIMUM, 1e-12),
        "evoscale_wins": sum(r["evoscale"] < r["random"] for r in rows),
    }
    if args.tpe:
        summary["median_tpe"] = statistics.median(r["tpe"] for r in rows)
    if args.json:
        json.dump(summary, sys.stdout, indent=1)
        print()
        return
    print(f"{args.trials} trials per run, 6 parameters, minimum {OPTIMUM} "
          f"(GENETIC population_size={summary['population_size']}, startup trials={args.startup}"
          + (", MedianPruner over 10 epochs)" if args.prune else ")"))
    tpe_header = f"  {'TPESampler':>11}" if args.tpe else ""
    print(f"{'seed':>4}  {'EvoscaleSampler':>16}  {'RandomSampler':>14}  {'evoscale s':>10}"
          + tpe_header)
    for r in rows:
        tpe = f"  {r['tpe']:>11.5f}" if args.tpe else ""
        print(f"{r['seed']:>4}  {r['evoscale']:>16.5f}  {r['random']:>14.5f}  "
              f"{r['evoscale_seconds']:>10.2f}" + tpe)
    tpe = f"  {summary['median_tpe']:>11.5f}" if args.tpe else ""
    print((f"{'med':>4}  {evo_median:>16.5f}  {rnd_median:>14.5f}  {'':>10}" + tpe).rstrip())
    print(f"difference of medians (random - evoscale): {summary['difference']:.5f}; "
          f"median regret ratio (random / evoscale): {summary['regret_ratio']:.2f}; "
          f"evoscale better on {summary['evoscale_wins']}/{len(rows)} seeds")
    print("every EvoscaleSampler trial is in evoscaled with its value: yes")


if __name__ == "__main__":
    main()
