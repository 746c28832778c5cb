#!/usr/bin/env python3
"""A table larger than one replica: evoscale-serve sharded by id hash behind a front, measured.

Writes a checkpoint of --rows embedding rows (serve_big_table: the trainer's checkpoint format,
no training) and examples whose ids all have rows, drawn uniformly over the table. Then:
  - memory: a whole replica's resident memory and start time, and each shard's and the front's
    for every shard count in --shards (each set started, measured and stopped in turn);
  - the budget: a whole replica given --memory-budget (default: 60% of the whole replica's
    resident memory) refuses to start naming it, while each shard of the first shard count
    starts within the same budget;
  - scores: every example answered by the front equals the whole replica's answer
    (`serve_load agree`, max abs diff);
  - latency: open-loop single-example requests at each --qps, and 100-example requests at each
    --batch-rates, against the whole replica and the fronts, interleaved --repeats times; medians
    of p50/p99 and the examples/s answered.
Every process shares the machine's cores: a front and its shards on one 2-core machine pay three
RPCs per request where a whole replica pays one, so the latency rows are the cost of sharding at
equal hardware, not what shards on their own machines would give.

usage: sharded.py [--rows 20000000] [--shards 2,4] [--qps 1000,2500,5000]
                  [--batch-rates 100,250,500] [--seconds 4] [--repeats 3] [--budget-mib N]
                  [--json FILE] [--keep DIR]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, "build", "bin")


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def serve(model_dir, *flags):
    """A started evoscale-serve: (process, listening line or error line, seconds to start)."""
    t0 = time.monotonic()
    p = subprocess.Popen([os.path.join(BIN, "evoscale-serve"), "--model-dir", model_dir,
                          "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0", *flags],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = json.loads(p.stdout.readline() or "{}")
    return p, line, time.monotonic() - t0


def stop(procs):
    for p in procs:
        p.terminate()
    for p in procs:
        p.wait()


def load(target, data, qps, batch, seconds):
    out = subprocess.run([os.path.join(BIN, "serve_load"), "load", "--target", target, "--data",
                          data, "--qps", str(qps), "--batch", str(batch), "--seconds",
                          str(seconds)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def agree(a, b, data):
    out = subprocess.run([os.path.join(BIN, "serve_load"), "agree", "--target", a, "--other", b,
                          "--data", data], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def start_sharded(model_dir, n):
    """n shards and their front: (processes, front address, memory and start figures)."""
    procs, addrs, shard_rss, starts = [], [], [], []
    for i in range(n):
        p, line, took = serve(model_dir, "--shard", f"{i}/{n}", "--threads", "1")
        if line.get("event") != "listening":
            stop(procs + [p])
            sys.exit(f"shard {i}/{n} did not start: {line}")
        procs.append(p)
        addrs.append(line["grpc"])
        shard_rss.append(rss_mib(p.pid))
        starts.append(took)
    p, line, took = serve(model_dir, "--shards", ",".join(addrs), "--threads", "2")
    if line.get("event") != "listening":
        stop(procs + [p])
        sys.exit(f"the front over {n} shards did not start: {line}")
    procs.append(p)
    figures = {"shard_rss_mib": [round(r) for r in shard_rss],
               "shard_start_s": [round(s, 2) for s in starts],
               "front_rss_mib": round(rss_mib(p.pid)), "front_start_s": round(took, 2)}
    return procs, line["grpc"], figures


def measure_memory(args, model_dir):
    """Each layout started alone: its memory, the budget's refusal, and the shards within it."""
    report = {}
    p, line, took = serve(model_dir)
    if line.get("event") != "listening":
        sys.exit(f"the whole replica did not start: {line}")
    report["whole"] = {"rows": line["rows"], "rss_mib": round(rss_mib(p.pid)),
                       "start_s": round(took, 2)}
    stop([p])
    print(json.dumps({"whole": report["whole"]}), flush=True)
    budget = args.budget_mib or int(0.6 * report["whole"]["rss_mib"])
    p, line, took = serve(model_dir, "--memory-budget", f"{budget}MiB")
    p.wait()
    report["budget"] = {"mib": budget, "whole_exit_code": p.returncode,
                        "whole_says": line.get("message", line.get("event")),
                        "whole_refused_after_s": round(took, 2)}
    for n in args.shards:
        procs, _, figures = start_sharded(model_dir, n)
        stop(procs)
        report[f"shards_{n}"] = figures
        print(json.dumps({f"shards_{n}": figures}), flush=True)
    n = args.shards[0]
    procs = []
    within = True
    for i in range(n):
        p, line, _ = serve(model_dir, "--shard", f"{i}/{n}", "--memory-budget", f"{budget}MiB")
        procs.append(p)
        within = within and line.get("event") == "listening"
    stop(procs)
    report["budget"][f"shards_{n}_start_within_it"] = within
    print(json.dumps({"budget": report["budget"]}), flush=True)
    return report


def measure_latency(args, model_dir, data):
    procs = []
    p, line, _ = serve(model_dir)
    procs.append(p)
    targets = {"whole": line["grpc"]}
    for n in args.shards:
        started, front, _ = start_sharded(model_dir, n)
        procs += started
        targets[f"front_{n}_shards"] = front
    try:
        agreement = {name: agree(targets["whole"], addr, data)
                     for name, addr in targets.items() if name != "whole"}
        print(json.dumps({"agree": agreement}), flush=True)
        runs = {}
        plan = [(1, q) for q in args.qps] + [(100, r) for r in args.batch_rates]
        for _ in range(args.repeats):
            for batch, rate in plan:
                for name, addr in targets.items():
                    r = load(addr, data, rate, batch, args.seconds)
                    runs.setdefault((name, batch, rate), []).append(r)
        table = []
        for (name, batch, rate), rs in runs.items():
            row = {"server": name, "batch": batch, "rate": rate,
                   "examples_per_s": round(statistics.median(r["examples_per_s"] for r in rs)),
                   "p50_ms": round(statistics.median(r["p50_ms"] for r in rs), 3),
                   "p99_ms": round(statistics.median(r["p99_ms"] for r in rs), 3),
                   "errors": sum(r["errors"] for r in rs)}
            table.append(row)
            print(json.dumps(row), flush=True)
        return {"agree": agreement, "load": table}
    finally:
        stop(procs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=20_000_000)
    ap.add_argument("--shards", default="2,4")
    ap.add_argument("--qps", default="1000,2500,5000")
    ap.add_argument("--batch-rates", default="100,250,500")
    ap.add_argument("--seconds", type=float, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--budget-mib", type=int, default=0)
    ap.add_argument("--json")
    ap.add_argument("--keep", help="write (or reuse) the table here instead of a temporary folder")
    args = ap.parse_args()
    args.shards = [int(s) for s in args.shards.split(",")]
    args.qps = [float(q) for q in args.qps.split(",")]
    args.batch_rates = [float(r) for r in args.batch_rates.split(",")]
    out = args.keep or tempfile.mkdtemp(prefix="sharded.")
    model_dir, data = os.path.join(out, "ckpt"), os.path.join(out, "examples.tsv")
    if not os.path.exists(data):
        t0 = time.monotonic()
        subprocess.run([os.path.join(BIN, "serve_big_table"), "--out", out, "--rows",
                        str(args.rows)], check=True, stdout=subprocess.DEVNULL)
        print(json.dumps({"table_written_s": round(time.monotonic() - t0, 1)}), flush=True)
    report = {"rows": args.rows, "memory": measure_memory(args, model_dir)}
    report.update(measure_latency(args, model_dir, data))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    if not args.keep:
        subprocess.run(["rm", "-rf", out], check=False)


if __name__ == "__main__":
    main()
