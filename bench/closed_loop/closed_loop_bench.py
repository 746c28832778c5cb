#!/usr/bin/env python3
"""The closed loop, A/B: the same managed study of real evoscale-trainer trials, run twice by
evoscaled under the same --capacity.

  A (learned): the template asks for the largest trial's memory; once trials have finished,
               each trial requests what the study's load model predicts for its parameters.
  B (fixed):   every trial requests the template's resources, sized for the largest trial
               (what a Katib or Ray Tune user sets); TrialTemplate.fixed_resources.

Capacity: 2 cores and 1.5x the largest trial's peak memory (measured first by running the
largest configuration once), so that under B memory, not CPU, holds trials to one at a time.
It prints, side by side: median memory slack (requested - peak) / requested over the trials
after the first 6, OOM kills and trials lost, the study's wall time, and the best AUC.

usage: bench/closed_loop/closed_loop_bench.py [--trials 30] [--rows 100000] [--build-dir build]
       [--json FILE]
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def spec(args, memory_bytes, fixed):
    trainer = os.path.join(args.build_dir, "bin", "evoscale-trainer")
    return {
        "display_name": "closed-loop-" + ("fixed" if fixed else "learned"),
        "spec": {
            "metrics": [{"name": "auc", "goal": "MAXIMIZE"}],
            "parameters": [
                # Peak memory follows embedding_dim (about 8x over this range) and batch_size.
                {"name": "embedding_dim", "integer_spec": {"min": 4, "max": 64}},
                {"name": "batch_size", "discrete_spec": {"values": [256, 512, 1024]}},
                {"name": "lr_dense", "double_spec": {"min": 3e-4, "max": 3e-2}, "scale": "LOG"},
                {"name": "lr_sparse", "double_spec": {"min": 5e-3, "max": 0.5}, "scale": "LOG"},
            ],
            "algorithm": {"algorithm": "GENETIC", "seed": args.seed},
            "max_trials": args.trials,
            "trial_template": {
                "command": trainer,
                "args": ["--synthetic", str(args.rows), "--threads", "1", "--hidden", "32,16",
                         "--progress-every", "50", "--seed", "7",
                         "--embedding-dim", "${embedding_dim}", "--batch-size", "${batch_size}",
                         "--lr-dense", "${lr_dense}", "--lr-sparse", "${lr_sparse}"],
                "resources": {"cpu_cores": 1, "memory_bytes": str(memory_bytes)},
                "parallel_trials": 2,
                "fixed_resources": fixed,
            },
        },
    }


def largest_peak(args):
    """Runs the largest configuration once and returns its peak RSS."""
    trainer = os.path.join(args.build_dir, "bin", "evoscale-trainer")
    out = subprocess.run([trainer, "--synthetic", str(args.rows), "--threads", "1",
                          "--hidden", "32,16", "--progress-every", "0", "--seed", "7",
                          "--embedding-dim", "64", "--batch-size", "1024"],
                         check=True, capture_output=True, text=True).stdout
    final = [json.loads(l) for l in out.splitlines() if '"final"' in l][-1]
    return int(final["peak_rss_bytes"])


def run(args, name, memory_capacity, request, fixed, workdir):
    db = os.path.join(workdir, name + ".db")
    server = subprocess.Popen(
        [os.path.join(args.build_dir, "bin", "evoscaled"), "--db", db, "--grpc", "127.0.0.1:0",
         "--http", "127.0.0.1:0", "--capacity", "cpu=2,memory=%d" % memory_capacity],
        stdout=subprocess.PIPE, stderr=open(os.path.join(workdir, name + ".log"), "w"), text=True)
    try:
        listening = json.loads(server.stdout.readline())
        cli = [os.path.join(args.build_dir, "bin", "evoscale"), "--server", listening["grpc"],
               "--json"]
        path = os.path.join(workdir, name + ".json")
        with open(path, "w") as f:
            json.dump(spec(args, request, fixed), f)
        start = time.monotonic()
        study = json.loads(subprocess.check_output(cli + ["study", "create", "-f", path]))["name"]
        while True:
            s = json.loads(subprocess.check_output(cli + ["study", "get", study]))
            done = int(s.get("completed_trial_count", 0))
            print("\r[%s] trials finished %d/%d  %.0f s" % (name, done, args.trials,
                                                           time.monotonic() - start),
                  end="", file=sys.stderr, flush=True)
            if done >= args.trials:
                break
            time.sleep(0.5)
        wall = time.monotonic() - start
        print(file=sys.stderr)
        trials = []
        for line in subprocess.check_output(cli + ["trials", "list", study]).splitlines():
            if line.strip():
                message = json.loads(line)
                trials.extend(message.get("trials", [message] if "id" in message else []))
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    trials.sort(key=lambda t: int(t["id"]))
    slack = []
    for t in trials[6:]:
        asked = int(t.get("resources", {}).get("memory_bytes", 0))
        peak = int(t.get("usage", {}).get("peak_memory_bytes", 0))
        if asked > 0 and peak > 0:
            slack.append((asked - peak) / asked)
    aucs = [t["final_measurement"]["metrics"]["auc"] for t in trials
            if t.get("state") == "SUCCEEDED" and "auc" in t.get("final_measurement", {}).get(
                "metrics", {})]
    return {
        "run": name,
        "trials": len(trials),
        "succeeded": len(aucs),
        "lost": args.trials - len(aucs),
        "oom_kills": sum(int(t.get("usage", {}).get("oom_kills", 0)) for t in trials),
        "median_memory_slack_after_6": statistics.median(slack) if slack else None,
        "wall_s": wall,
        "best_auc": max(aucs) if aucs else None,
        "peaks_mib": [round(int(t.get("usage", {}).get("peak_memory_bytes", 0)) / 2**20)
                      for t in trials],
        "requests_mib": [round(int(t.get("resources", {}).get("memory_bytes", 0)) / 2**20)
                         for t in trials],
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trials", type=int, default=30)
    p.add_argument("--rows", type=int, default=100000)
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    p.add_argument("--json", help="also write the two rows as JSON lines to FILE")
    args = p.parse_args()
    peak = largest_peak(args)
    capacity = int(1.5 * peak)
    request = int(1.1 * peak)  # the user's fixed request: the largest trial plus 10%
    print("largest trial's peak %.0f MiB: capacity cpu=2, memory=%.0f MiB; template request "
          "%.0f MiB" % (peak / 2**20, capacity / 2**20, request / 2**20), file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="closed_loop.") as workdir:
        a = run(args, "A-learned", capacity, request, False, workdir)
        b = run(args, "B-fixed", capacity, request, True, workdir)
    rows = [
        ("median memory slack after 6", "%.1f%%" % (100 * a["median_memory_slack_after_6"]),
         "%.1f%%" % (100 * b["median_memory_slack_after_6"]), "A <= 20%"),
        ("OOM kills", a["oom_kills"], b["oom_kills"], "A <= 2"),
        ("trials lost", a["lost"], b["lost"], "0"),
        ("study wall time (s)", "%.1f" % a["wall_s"], "%.1f" % b["wall_s"],
         "B/A = %.2fx (>= 1.5x)" % (b["wall_s"] / a["wall_s"])),
        ("best AUC", "%.4f" % a["best_auc"], "%.4f" % b["best_auc"], "A not worse"),
    ]
    print("%-30s %14s %14s   %s" % ("", "A learned", "B fixed", "bar"))
    for r in rows:
        print("%-30s %14s %14s   %s" % r)
    print("requests MiB A:", a["requests_mib"])
    print("peaks    MiB A:", a["peaks_mib"])
    if args.json:
        with open(args.json, "w") as f:
            for r in (a, b):
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
