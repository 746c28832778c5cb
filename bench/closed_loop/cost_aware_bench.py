#!/usr/bin/python3
"""Issue 28, benchmark 2: the real trainer at an equal budget of core-seconds. evoscale's managed
study (GENETIC, COST_AWARE early stopping) against Optuna 3.1's TPE + HyperbandPruner and
TPE + MedianPruner, each driving evoscale-trainer as a subprocess.

Every trial is fidelity_trial.py around evoscale-trainer, one thread, on the same synthetic click
log (--synthetic ROWS --seed 7: every 10th row is held out, never trained on; the final line's AUC
is on those rows). A step is 1024 training examples whatever the batch size (see
fidelity_trial.py), so a full run is max_step = EPOCHS x 0.9 x ROWS / 1024 steps (432 by default)
for every configuration, and progress lines (the AUC over the 8192 training examples since the
previous line) come at steps 8, 16, ... on both sides.

Space (as bench/closed_loop/closed_loop_bench.py): embedding_dim int 4..64, batch_size
{256, 512, 1024}, lr_dense log 3e-4..3e-2, lr_sparse log 5e-3..0.5; --hidden 32,16.

Budget: B = --budget-runs x the median wall seconds of full runs of a few random configurations
(measured first, two at a time as in the runs), the same B for every method and seed. A trial
costs 1 core x its wall seconds. Both sides run 2 trials at a time and launch no trial once B is
spent (the trials running then finish):
  evoscale      evoscaled --capacity cpu=2; a managed study with budget_core_seconds B,
                early_stopping {max_step, min_resource, reduction_factor 3} (COST_AWARE, the
                budget's default), fixed_resources (1 core per trial, so that its cost is
                1 core x wall, as Optuna's), parallel_trials 2; GENETIC with the seed.
  tpe-hyperband TPESampler(seed) + HyperbandPruner(min_resource, max_step, reduction_factor 3)
  tpe-median    TPESampler(seed) + MedianPruner(n_startup_trials 5, n_warmup_steps min_resource)
                Optuna's side: two worker threads, ask/tell; a trial's progress lines are
                trial.report(auc, step); should_prune() -> SIGTERM to the trial, TrialPruned.
                Spent = finished trials' wall seconds + the running ones' so far.

Score: the best held-out AUC among the full runs that ended within B (the core-seconds all trials
had spent by the run's end, partial runs included, at most B). Also printed: trials run, full
runs (within B / all), core-seconds spent, and the seeds where evoscale >= TPE + Hyperband.

usage: bench/closed_loop/cost_aware_bench.py [--seeds 0,1,2] [--budget-runs 12] [--rows 491520]
       [--epochs 1] [--min-resource 8] [--methods evoscale,tpe-hyperband,tpe-median]
       [--budget CORE_SECONDS] [--build-dir build] [--json FILE] [--quick]
  --quick: a smoke run: seed 0, a budget of 3 full runs, 2 calibration runs.
"""
import argparse
import datetime
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
WRAPPER = os.path.join(HERE, "fidelity_trial.py")
UNIT = 1024  # training examples per step (fidelity_trial.py)
METHODS = ("evoscale", "tpe-hyperband", "tpe-median")
PARALLEL = 2


def log(*parts):
    print(*parts, file=sys.stderr, flush=True)


def trainer_flags(args):
    """The flags every trial shares (the trial's own parameters come after them)."""
    return ["--synthetic", str(args.rows), "--epochs", str(args.epochs), "--threads", "1",
            "--hidden", "32,16", "--seed", "7"]


def trial_command(args, params):
    """The command of one trial with concrete parameters (Optuna's side, and calibration)."""
    return [sys.executable, WRAPPER, os.path.join(args.build_dir, "bin", "evoscale-trainer")] + \
        trainer_flags(args) + [
            "--embedding-dim", str(params["embedding_dim"]),
            "--batch-size", str(params["batch_size"]),
            "--lr-dense", repr(float(params["lr_dense"])),
            "--lr-sparse", repr(float(params["lr_sparse"]))]


def max_step(args):
    held_out_every = 10  # the trainer's default --holdout-fraction 0.1
    train_rows = args.rows - (args.rows + held_out_every - 1) // held_out_every
    return args.epochs * train_rows // UNIT


def random_params(rng):
    return {"embedding_dim": rng.randint(4, 64), "batch_size": rng.choice([256, 512, 1024]),
            "lr_dense": 10 ** rng.uniform(-3.5229, -1.5229),   # log 3e-4 .. 3e-2
            "lr_sparse": 10 ** rng.uniform(-2.3010, -0.3010)}  # log 5e-3 .. 0.5


# ---- One trial process (Optuna's side and calibration) ------------------------------------------

class TrialRun:
    """A running trial: its process, its progress, its wall time."""

    def __init__(self, command):
        self.stderr = tempfile.TemporaryFile(mode="w+")  # shown when the trial fails
        self.start = time.monotonic()
        self.end = None
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=self.stderr,
                                        text=True, start_new_session=True)
        self.final = None
        self.last_step = 0

    def events(self):
        """The progress events (step, auc) as they come; sets final at the end."""
        for line in self.process.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("event") == "progress":
                self.last_step = int(event["step"])
                auc = event.get("metrics", {}).get("auc")
                if auc is not None:
                    yield self.last_step, float(auc)
            elif event.get("event") == "final":
                self.final = event

    def stop(self):
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass

    def wait(self):
        try:
            for _ in self.process.stdout:  # what it prints after a stop
                pass
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.end = time.monotonic()
        return self.process.returncode

    def stderr_tail(self):
        self.stderr.seek(0)
        return self.stderr.read()[-2000:]

    def final_auc(self):
        if self.final is None:
            return None
        return self.final.get("metrics", {}).get("auc")


def calibrate(args):
    """Median wall seconds of full runs of random configurations, PARALLEL at a time."""
    rng = random.Random(12345)
    configs = [random_params(rng) for _ in range(args.calibration_runs)]
    walls = []
    def drain(run):
        for _ in run.events():
            pass
        run.wait()

    for i in range(0, len(configs), PARALLEL):
        runs = [TrialRun(trial_command(args, c)) for c in configs[i:i + PARALLEL]]
        threads = [threading.Thread(target=drain, args=(r,)) for r in runs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for c, r in zip(configs[i:i + PARALLEL], runs):
            if r.process.returncode != 0 or r.final is None:
                sys.exit("calibration run failed: %s\n%s" % (c, r.stderr_tail()))
            walls.append(r.end - r.start)
            log("[calibration] %s: %.2f s, test auc %.4f, peak %.0f MiB" % (
                describe(c), r.end - r.start, r.final_auc(),
                int(r.final.get("peak_rss_bytes", 0)) / 2**20))
    return statistics.median(walls), walls


def describe(p):
    return "emb %d batch %d lr_dense %.2g lr_sparse %.2g" % (
        p["embedding_dim"], p["batch_size"], p["lr_dense"], p["lr_sparse"])


# ---- Scoring, both sides alike ------------------------------------------------------------------

def score(trials, budget):
    """trials: dicts with start, end (seconds, one clock), cost (core-seconds), full (ran to
    max_step and SUCCEEDED), auc. The best AUC among full runs whose end came while the
    core-seconds spent by all trials (running ones' so far) were at most the budget."""
    def spent_at(t):
        total = 0.0
        for x in trials:
            if x["end"] <= t:
                total += x["cost"]
            elif x["start"] < t:
                total += x["cost"] * (t - x["start"]) / max(x["end"] - x["start"], 1e-9)
        return total

    full = [x for x in trials if x["full"] and x["auc"] is not None]
    within = [x for x in full if spent_at(x["end"]) <= budget + 1e-9]
    return {
        "best_auc": max((x["auc"] for x in within), default=None),
        "best_auc_any": max((x["auc"] for x in full), default=None),
        "trials": len(trials),
        "full_runs": len(full),
        "full_runs_within_budget": len(within),
        "spent_core_seconds": sum(x["cost"] for x in trials),
    }


# ---- Optuna -------------------------------------------------------------------------------------

def run_optuna(args, method, seed, budget, full_step):
    import optuna  # imported here: the trials and calibration do not need it
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if method == "tpe-hyperband":
        pruner = optuna.pruners.HyperbandPruner(min_resource=args.min_resource,
                                                max_resource=full_step, reduction_factor=3)
    else:
        pruner = optuna.pruners.MedianPruner(n_startup_trials=5,
                                             n_warmup_steps=args.min_resource)
    study = optuna.create_study(direction="maximize", pruner=pruner,
                                sampler=optuna.samplers.TPESampler(seed=seed))
    lock = threading.Lock()
    done = []      # finished trials (score()'s dicts)
    running = {}   # number -> TrialRun
    t0 = time.monotonic()

    def spent_now():
        now = time.monotonic()
        return sum(x["cost"] for x in done) + sum(now - r.start for r in running.values())

    def worker():
        while True:
            with lock:
                if spent_now() >= budget:
                    return
                trial = study.ask()
                params = {
                    "embedding_dim": trial.suggest_int("embedding_dim", 4, 64),
                    "batch_size": trial.suggest_categorical("batch_size", [256, 512, 1024]),
                    "lr_dense": trial.suggest_float("lr_dense", 3e-4, 3e-2, log=True),
                    "lr_sparse": trial.suggest_float("lr_sparse", 5e-3, 0.5, log=True),
                }
                run = TrialRun(trial_command(args, params))
                running[trial.number] = run
            pruned = False
            for step, auc in run.events():
                trial.report(auc, step)
                if trial.should_prune():
                    pruned = True
                    run.stop()
                    break
            code = run.wait()
            auc = run.final_auc()
            full = not pruned and code == 0 and auc is not None and run.last_step >= full_step
            with lock:
                del running[trial.number]
                if full:
                    study.tell(trial, auc)
                    state = "SUCCEEDED"
                elif pruned:
                    study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                    state = "PRUNED"
                else:
                    study.tell(trial, state=optuna.trial.TrialState.FAIL)
                    state = "FAILED (exit %d)" % code
                    log(run.stderr_tail())
                done.append({"start": run.start - t0, "end": run.end - t0,
                             "cost": run.end - run.start, "full": full, "auc": auc,
                             "step": run.last_step, "params": params, "state": state})
                log("[seed %d %s] trial %d %s at step %d%s, %.1f core-s; spent %.1f/%.1f" % (
                    seed, method, trial.number, state, run.last_step,
                    ", test auc %.4f" % auc if full else "", run.end - run.start, spent_now(),
                    budget))

    threads = [threading.Thread(target=worker) for _ in range(PARALLEL)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return done


# ---- evoscale -----------------------------------------------------------------------------------

def study_spec(args, seed, budget, full_step):
    trainer = os.path.join(args.build_dir, "bin", "evoscale-trainer")
    return {
        "display_name": "cost-aware-bench-seed-%d" % seed,
        "spec": {
            "metrics": [{"name": "auc", "goal": "MAXIMIZE"}],
            "parameters": [
                {"name": "embedding_dim", "integer_spec": {"min": 4, "max": 64}},
                {"name": "batch_size", "discrete_spec": {"values": [256, 512, 1024]}},
                {"name": "lr_dense", "double_spec": {"min": 3e-4, "max": 3e-2}, "scale": "LOG"},
                {"name": "lr_sparse", "double_spec": {"min": 5e-3, "max": 0.5}, "scale": "LOG"},
            ],
            "algorithm": {"algorithm": "GENETIC", "seed": seed},
            "early_stopping": {"max_step": full_step, "min_resource": args.min_resource,
                               "reduction_factor": 3},
            "budget_core_seconds": budget,
            "max_trials": 1000,  # the budget ends the study
            "trial_template": {
                "command": sys.executable,
                "args": [WRAPPER, trainer] + trainer_flags(args) + [
                    "--embedding-dim", "${embedding_dim}", "--batch-size", "${batch_size}",
                    "--lr-dense", "${lr_dense}", "--lr-sparse", "${lr_sparse}"],
                "resources": {"cpu_cores": 1, "memory_bytes": str(args.memory_bytes)},
                "parallel_trials": PARALLEL,
                "fixed_resources": True,
            },
        },
    }


def list_trials(cli, study):
    out = subprocess.check_output(cli + ["trials", "list", study])
    trials = []
    for line in out.splitlines():
        if line.strip():
            message = json.loads(line)
            trials.extend(message.get("trials", [message] if "id" in message else []))
    return sorted(trials, key=lambda t: int(t["id"]))


def timestamp(text):
    """RFC 3339 (protobuf JSON, up to nanoseconds) to POSIX seconds."""
    date, _, rest = text.rstrip("Z").partition("T")
    clock, _, fraction = rest.partition(".")
    whole = datetime.datetime.fromisoformat(date + "T" + clock).replace(
        tzinfo=datetime.timezone.utc).timestamp()
    return whole + (float("0." + fraction) if fraction else 0.0)


TERMINAL = ("SUCCEEDED", "STOPPED", "FAILED", "INFEASIBLE")


def run_evoscale(args, seed, budget, full_step, workdir):
    name = "evoscale-seed-%d" % seed
    server_log = os.path.join(workdir, name + ".log")
    server = subprocess.Popen(
        [os.path.join(args.build_dir, "bin", "evoscaled"), "--db", os.path.join(workdir, name + ".db"),
         "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0",
         "--capacity", "cpu=%d,memory=%d" % (PARALLEL, PARALLEL * args.memory_bytes)],
        stdout=subprocess.PIPE, stderr=open(server_log, "w"), text=True)
    try:
        listening = json.loads(server.stdout.readline())
        cli = [os.path.join(args.build_dir, "bin", "evoscale"), "--server", listening["grpc"],
               "--json"]
        path = os.path.join(workdir, name + ".json")
        with open(path, "w") as f:
            json.dump(study_spec(args, seed, budget, full_step), f)
        study = json.loads(subprocess.check_output(cli + ["study", "create", "-f", path]))["name"]
        reported = set()
        deadline = time.monotonic() + max(600.0, 20 * budget)
        while True:
            s = json.loads(subprocess.check_output(cli + ["study", "get", study]))
            trials = list_trials(cli, study)
            for t in trials:
                if t.get("state") in TERMINAL and t["id"] not in reported:
                    reported.add(t["id"])
                    steps = [int(m.get("step", 0)) for m in t.get("measurements", [])]
                    auc = t.get("final_measurement", {}).get("metrics", {}).get("auc")
                    log("[seed %d evoscale] trial %s %s at step %d%s, %.1f core-s; spent "
                        "%.1f/%.1f" % (seed, t["id"], t["state"], max(steps, default=0),
                                       ", test auc %.4f" % auc if t["state"] == "SUCCEEDED"
                                       and auc is not None else "",
                                       float(t.get("core_seconds", 0)),
                                       float(s.get("spent_core_seconds", 0)), budget))
            if s.get("state") == "COMPLETED" and trials and all(
                    t.get("state") in TERMINAL for t in trials):
                break
            if time.monotonic() > deadline:
                sys.exit("evoscale study %s did not complete; see %s" % (study, server_log))
            time.sleep(0.5)
        spent = float(s.get("spent_core_seconds", 0))
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    done = []
    for t in trials:
        wall = float(t.get("usage", {}).get("wall_seconds", 0))
        if "end_time" not in t or wall <= 0:
            continue  # never ran
        end = timestamp(t["end_time"])
        steps = [int(m.get("step", 0)) for m in t.get("measurements", [])]
        auc = t.get("final_measurement", {}).get("metrics", {}).get("auc")
        full = t["state"] == "SUCCEEDED" and max(steps, default=0) >= full_step
        done.append({"start": end - wall, "end": end, "cost": float(t.get("core_seconds", wall)),
                     "full": full, "auc": auc if full else None, "step": max(steps, default=0),
                     "state": t["state"],
                     "params": {p["name"]: float(p["double_value"]) if "double_value" in p
                                else int(p["int_value"]) if "int_value" in p
                                else p.get("string_value") for p in t.get("parameters", [])}})
    return done, spent


# ---- Main ---------------------------------------------------------------------------------------

def fmt(x, pattern="%.4f"):
    return "-" if x is None else pattern % x


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--budget-runs", type=float, default=12,
                   help="B = this x the median wall seconds of a full run")
    p.add_argument("--budget", type=float, default=0,
                   help="B in core-seconds, instead of measuring (skips calibration)")
    p.add_argument("--calibration-runs", type=int, default=4)
    p.add_argument("--rows", type=int, default=491520)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--min-resource", type=int, default=8)
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--memory-bytes", type=int, default=2 << 30,
                   help="each evoscale trial's request (and limit)")
    p.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    p.add_argument("--json", help="also write every method's trials and score as JSON lines")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: seed 0, budget of 3 full runs, 2 calibration runs")
    args = p.parse_args()
    if args.quick:
        args.seeds, args.budget_runs, args.calibration_runs = "0", 3, 2
    seeds = [int(s) for s in args.seeds.split(",") if s != ""]
    methods = [m for m in args.methods.split(",") if m]
    for m in methods:
        if m not in METHODS:
            sys.exit("unknown method %r (want %s)" % (m, ", ".join(METHODS)))
    full_step = max_step(args)
    if args.budget > 0:
        budget, walls = args.budget, []
    else:
        median, walls = calibrate(args)
        budget = args.budget_runs * median
    log("rows %d (%d trained, %d held out), epochs %d: max_step %d (steps of %d examples), "
        "min_resource %d; B = %.1f core-seconds%s" % (
            args.rows, full_step * UNIT // args.epochs, args.rows // 10, args.epochs, full_step,
            UNIT, args.min_resource, budget,
            " (%.4g x median full run %.2f s of %s)" % (
                args.budget_runs, statistics.median(walls),
                ", ".join("%.2f" % w for w in walls)) if walls else ""))
    results = {}
    out = open(args.json, "w") if args.json else None
    with tempfile.TemporaryDirectory(prefix="cost_aware_bench.") as workdir:
        for seed in seeds:
            for m in methods:
                start = time.monotonic()
                if m == "evoscale":
                    trials, spent = run_evoscale(args, seed, budget, full_step, workdir)
                else:
                    trials = run_optuna(args, m, seed, budget, full_step)
                    spent = None
                r = score(trials, budget)
                if spent is not None:
                    r["spent_core_seconds"] = spent  # the study's own Study.spent_core_seconds
                r["wall_s"] = time.monotonic() - start
                results[(seed, m)] = r
                if out:
                    out.write(json.dumps({"seed": seed, "method": m, "budget": budget,
                                          "max_step": full_step, **r, "trial_list": trials})
                              + "\n")
                    out.flush()
    print("B = %.1f core-seconds per method and seed; max_step %d; a score is the best test AUC "
          "of the full runs ended within B" % (budget, full_step))
    for seed in seeds:
        print("\nseed %d" % seed)
        print("%-14s %9s %9s %7s %12s %10s %8s" % ("method", "best AUC", "(any)", "trials",
                                                  "full/in B", "core-s", "wall s"))
        for m in methods:
            r = results[(seed, m)]
            print("%-14s %9s %9s %7d %12s %10.1f %8.1f" % (
                m, fmt(r["best_auc"]), fmt(r["best_auc_any"]), r["trials"],
                "%d/%d" % (r["full_runs"], r["full_runs_within_budget"]),
                r["spent_core_seconds"], r["wall_s"]))
    if "evoscale" in methods and "tpe-hyperband" in methods:
        wins = sum(1 for s in seeds
                   if results[(s, "evoscale")]["best_auc"] is not None and (
                       results[(s, "tpe-hyperband")]["best_auc"] is None
                       or results[(s, "evoscale")]["best_auc"]
                       >= results[(s, "tpe-hyperband")]["best_auc"]))
        print("\nseeds where evoscale >= TPE+Hyperband: %d of %d" % (wins, len(seeds)))


if __name__ == "__main__":
    main()
