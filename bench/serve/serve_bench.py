#!/usr/bin/env python3
"""evoscale-serve under open-loop load, beside the null server (the transport floor), in one run.

Trains the CTR model on criteo-8k (or takes --model-dir), starts build/bin/evoscale-serve and
`serve_load null`, then for each server and each rate runs `serve_load load` (latency from each
request's due time) --repeats times, interleaving the servers, and reports medians:
  - single-example requests: p99 at each QPS, and the highest QPS whose median p99 <= 5 ms;
  - 100-example requests: examples/s and p99 at each rate, the most examples/s at p99 <= 10 ms.
The load generator shares the machine's cores with the server (as issue 29's bar says).

usage: serve_bench.py [--model-dir DIR] [--qps 5000,10000,...] [--batch-rates 500,...]
                      [--seconds 4] [--repeats 3] [--json FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, "build", "bin")
DATA = os.path.join(ROOT, "..", "shared", "data", "criteo-8k")


def start(cmd):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    event = json.loads(line)
    if event.get("event") != "listening":
        sys.exit(f"{cmd[0]} did not start: {line}")
    return p, event["grpc"]


def load(target, qps, batch, seconds):
    out = subprocess.run([os.path.join(BIN, "serve_load"), "load", "--target", target, "--data",
                          os.path.join(DATA, "test.tsv"), "--qps", str(qps), "--batch",
                          str(batch), "--seconds", str(seconds)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-dir")
    ap.add_argument("--qps", default="5000,10000,20000,30000,40000")
    ap.add_argument("--batch-rates", default="500,1000,1500,2000")
    ap.add_argument("--seconds", type=float, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="serve_bench.")
    model_dir = args.model_dir
    if not model_dir:
        model_dir = os.path.join(tmp, "ckpt")
        subprocess.run([os.path.join(BIN, "evoscale-trainer"), "--train",
                        os.path.join(DATA, "train.tsv"), "--test", os.path.join(DATA, "test.tsv"),
                        "--epochs", "2", "--batch-size", "256", "--seed", "1",
                        "--checkpoint-dir", model_dir], check=True, stdout=subprocess.DEVNULL)
    servers = {}
    procs = []
    p, addr = start([os.path.join(BIN, "evoscale-serve"), "--model-dir", model_dir, "--grpc",
                     "127.0.0.1:0", "--http", "127.0.0.1:0"])
    procs.append(p)
    servers["evoscale-serve"] = addr
    p, addr = start([os.path.join(BIN, "serve_load"), "null", "--grpc", "127.0.0.1:0"])
    procs.append(p)
    servers["null"] = addr
    results = []
    try:
        plans = [(1, int(q)) for q in args.qps.split(",")] + \
                [(100, int(r)) for r in args.batch_rates.split(",")]
        for batch, rate in plans:
            runs = {name: [] for name in servers}
            for _ in range(args.repeats):
                for name, target in servers.items():  # interleaved: same noise for both
                    runs[name].append(load(target, rate, batch, args.seconds))
            for name, rs in runs.items():
                row = {"server": name, "batch": batch, "rate": rate,
                       "p50_ms": statistics.median(r["p50_ms"] for r in rs),
                       "p99_ms": statistics.median(r["p99_ms"] for r in rs),
                       "examples_per_s": statistics.median(r["examples_per_s"] for r in rs),
                       "errors": sum(r["errors"] + r["unanswered"] for r in rs),
                       "p99_runs": [round(r["p99_ms"], 3) for r in rs]}
                results.append(row)
                print(json.dumps(row), flush=True)
    finally:
        for p in procs:
            p.terminate()
            p.wait()
    print("\n| server | batch | rate (req/s) | examples/s | p50 ms | p99 ms (median of runs) |")
    print("|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['server']} | {r['batch']} | {r['rate']} | {r['examples_per_s']:.0f} | "
              f"{r['p50_ms']:.3f} | {r['p99_ms']:.3f} |")
    for name in servers:
        ok1 = [r["rate"] for r in results if r["server"] == name and r["batch"] == 1
               and r["p99_ms"] <= 5 and r["errors"] == 0]
        ok100 = [r["examples_per_s"] for r in results if r["server"] == name
                 and r["batch"] == 100 and r["p99_ms"] <= 10 and r["errors"] == 0]
        print(f"{name}: highest single-example QPS at p99 <= 5 ms: {max(ok1) if ok1 else 'none'}; "
              f"most examples/s in 100-example requests at p99 <= 10 ms: "
              f"{max(ok100) if ok100 else 'none'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
