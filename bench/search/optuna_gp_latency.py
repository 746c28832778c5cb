"""Time of one ask+tell of Optuna's GPSampler and TPESampler with 200 completed trials in 20
dimensions (the box and history of designer_benchmark's BM_AskTell20: x_i in [-5, 5], f = sum
x_i^2, uniformly random completed trials). Prints a JSON line per sampler with the median and
the slowest of `reps` ask+tells. Run with ../shared/peers/optuna-4.9 first on PYTHONPATH.

usage: optuna_gp_latency.py [completed=200] [reps=20]
"""
import json
import random
import statistics
import sys
import time

import optuna
from optuna.distributions import FloatDistribution
from optuna.trial import create_trial

optuna.logging.set_verbosity(optuna.logging.ERROR)
DIMS = 20


def main():
    completed = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    dists = {"x%d" % i: FloatDistribution(-5.0, 5.0) for i in range(DIMS)}
    samplers = {"gp": lambda: optuna.samplers.GPSampler(seed=0),
                "tpe": lambda: optuna.samplers.TPESampler(seed=0)}
    for name, make in samplers.items():
        rng = random.Random(0)
        study = optuna.create_study(sampler=make())
        trials = []
        for _ in range(completed):
            p = {k: rng.uniform(-5, 5) for k in dists}
            trials.append(create_trial(params=p, distributions=dists, value=sum(v * v for v in p.values())))
        study.add_trials(trials)
        times = []
        for _ in range(reps):
            start = time.perf_counter()
            trial = study.ask(dists)
            study.tell(trial, sum(v * v for v in trial.params.values()))
            times.append((time.perf_counter() - start) * 1000)
        print(json.dumps({"sampler": name, "optuna_version": optuna.__version__, "dims": DIMS,
                          "completed_trials": completed, "median_ms": statistics.median(times),
                          "max_ms": max(times), "reps": reps}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
