#!/usr/bin/env python3
"""The live autoscaling loop (issue 29, must-show 5): evoscale-serve replicas under a load that
follows the Alibaba GenAI trace's QPS, their telemetry into evoscaled, the replica count set
from `evoscale recommend`, against the HPA policy on the same load in the same run.

For each policy (evoscale, hpa) in turn, on one evoscaled (SQLite in a temporary folder):
  - a workload `default/live-POLICY` (target utilisation 0.6, 1..--max-replicas replicas,
    startup delay --startup-minutes);
  - replicas of build/bin/evoscale-serve on one checkpoint, each in its own cgroup v1 CPU group
    holding --replica-cores (the CFS quota: its request and limit, as a Kubernetes pod with
    requests = limits) and a cpuacct group that measures what it used;
  - one open-loop load generator (`serve_load live`) that spreads --batch-example requests
    round robin over the replicas live now (a client-side balancer);
  - the trace's QPS shape (each container's QPS held until its next sample, summed over the
    containers, per minute), scaled so that its peak is --peak-qps, one trace minute every
    --minute-seconds of wall time;
  - every trace minute: the minute's latency and errors are measured; each serving replica's
    telemetry for it (CPU from its cpuacct group over the minute, memory, QPS and mean latency
    from the balancer, its CPU request) goes to evoscaled stamped in trace time (one minute of
    trace every --minute-seconds: the compression is the bench's, so the sample times are
    virtual; evoscale-serve's own --evoscaled reporter stamps wall time and is not used here);
    then `evoscale recommend` gives the replica count, and the bench starts replicas (serving
    --startup-minutes later, as model loading takes) or stops the newest.
A minute meets the SLO when its p99 latency is at most --slo-ms and no call failed. Reported
per policy: minutes meeting the SLO (%), replica-minutes (every replica alive in a minute,
starting or serving, counts: it holds its request), and the same for a fixed fleet of
--max-replicas replicas (the over-provisioned reference).

Needs root (cgroup v1 CPU groups below /sys/fs/cgroup/cpu) and a build with the benches.

usage: live_loop.py [--minutes 0:660] [--minute-seconds 0.5] [--peak-qps 1000]
                    [--replica-cores 0.2] [--max-replicas 6] [--policies evoscale,hpa,fixed]
                    [--repeats 1] [--json FILE]
With --repeats N the policies run N times in turn (the order reversed every other round, so
that neither always follows the other), and the table gives each policy's median.
"""
import argparse
import collections
import csv
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, "build", "bin")
DATA = os.path.join(ROOT, "..", "shared", "data")
TRACE = os.path.join(DATA, "traces", "alibaba-genai-2026", "qps.csv")
CPU_CGROUP = "/sys/fs/cgroup/cpu"
CPUACCT_CGROUP = "/sys/fs/cgroup/cpuacct"


def trace_shape(path, hold_seconds=240):
    """QPS per trace minute: each container's latest value held until its next sample (at most
    hold_seconds), summed over containers."""
    series = collections.defaultdict(list)
    with open(path) as f:
        for row in csv.DictReader(f):
            series[row["container_ip"] or row["request_type"]].append(
                (float(row["timestamp_anon"]), float(row["value"])))
    t0 = min(t for s in series.values() for t, _ in s)
    t1 = max(t for s in series.values() for t, _ in s)
    minutes = int((t1 - t0) // 60) + 1
    shape = [0.0] * minutes
    for points in series.values():
        points.sort()
        for i, (t, v) in enumerate(points):
            end = points[i + 1][0] if i + 1 < len(points) else t + 60
            end = min(end, t + hold_seconds)
            for m in range(int((t - t0) // 60), min(minutes, int(math.ceil((end - t0) / 60)))):
                shape[m] += v
    return shape


class Replica:
    """One evoscale-serve process in its own CPU (quota) and cpuacct (usage) groups."""

    def __init__(self, name, model_dir, cores, period_us, workdir):
        self.name = name
        self.started_minute = None
        self.address = None
        self.ready = threading.Event()
        self.failed = None
        quota = max(1000, int(cores * period_us))
        self.cpu_dir = os.path.join(CPU_CGROUP, name)
        self.acct_dir = os.path.join(CPUACCT_CGROUP, name)
        for d in (self.cpu_dir, self.acct_dir):
            os.makedirs(d, exist_ok=True)
        with open(os.path.join(self.cpu_dir, "cpu.cfs_period_us"), "w") as f:
            f.write(str(period_us))
        with open(os.path.join(self.cpu_dir, "cpu.cfs_quota_us"), "w") as f:
            f.write(str(quota))
        procs = [os.path.join(d, "cgroup.procs") for d in (self.cpu_dir, self.acct_dir)]

        def enter():
            for p in procs:
                with open(p, "w") as f:
                    f.write(str(os.getpid()))

        self.proc = subprocess.Popen(
            [os.path.join(BIN, "evoscale-serve"), "--model-dir", model_dir, "--grpc",
             "127.0.0.1:0", "--http", "127.0.0.1:0"],
            stdout=subprocess.PIPE, stderr=open(os.path.join(workdir, name + ".log"), "w"),
            text=True, preexec_fn=enter)
        threading.Thread(target=self._wait_listening, daemon=True).start()
        self.last_usage_ns = self.usage_ns()

    def _wait_listening(self):
        line = self.proc.stdout.readline()
        try:
            event = json.loads(line)
            self.address = event["grpc"]
        except (ValueError, KeyError):
            self.failed = line or "exited before listening"
        self.ready.set()

    def usage_ns(self):
        try:
            with open(os.path.join(self.acct_dir, "cpuacct.usage")) as f:
                return int(f.read())
        except OSError:
            return 0

    def take_cores(self, seconds):
        now = self.usage_ns()
        cores = (now - self.last_usage_ns) / 1e9 / seconds
        self.last_usage_ns = now
        return max(cores, 0.0)

    def rss_bytes(self):
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for d in (self.cpu_dir, self.acct_dir):
            for _ in range(50):
                try:
                    os.rmdir(d)
                    break
                except OSError:
                    time.sleep(0.02)


class Generator:
    def __init__(self, batch):
        self.proc = subprocess.Popen(
            [os.path.join(BIN, "serve_load"), "live", "--data",
             os.path.join(DATA, "criteo-8k", "test.tsv"), "--batch", str(batch)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def send(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def tick(self):
        self.send("tick")
        return json.loads(self.proc.stdout.readline())

    def close(self):
        self.send("quit")
        self.proc.wait(timeout=30)


def cli(server, *args):
    out = subprocess.run([os.path.join(BIN, "evoscale"), "--server", server, "--json", *args],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"evoscale {' '.join(args)}: {out.stderr.strip()}")
    return out.stdout


def run_policy(args, policy, shape, scale, server, model_dir, workdir):
    # "evoscale:Q": the evoscale policy at demand quantile Q (its risk knob); "POLICY@U": at
    # target utilisation U instead of --target-utilization.
    spec, _, target = policy.partition("@")
    kind, _, quantile = spec.partition(":")
    target = float(target) if target else args.target_utilization
    workload = (f"default/live-{kind}-{quantile + '-' if quantile else ''}"
                f"{target:g}-{args.round}")
    fixed = kind == "fixed"
    if not fixed:
        extra = ["--demand-quantile", quantile] if quantile else []
        cli(server, "workload", "put", workload, "--policy", kind, "--target-utilization",
            str(target), "--min-replicas", "1", "--max-replicas",
            str(args.max_replicas), "--startup-delay-seconds", str(60 * args.startup_minutes),
            *extra)
    first, last = args.first, args.last
    # Trace time: the replay's minute m is stamped t0 + 60 m, all of it in the past.
    t0 = int(time.time() // 60) * 60 - 60 * (last - first + 10)
    gen = Generator(args.batch)
    replicas = []  # alive: starting or serving, oldest first
    serving_set = []
    counter = [0]

    def start_replica(minute):
        counter[0] += 1
        r = Replica(f"evoscale-live-{os.getpid()}-{policy}-{args.round}-{counter[0]}", model_dir,
                    args.replica_cores, args.cfs_period_us, workdir)
        r.started_minute = minute
        replicas.append(r)

    def publish():
        addresses = [r.address for r in replicas if r in serving_set]
        gen.send("targets " + ",".join(addresses))

    initial = args.max_replicas if fixed else args.initial_replicas
    for _ in range(initial):
        start_replica(first - args.startup_minutes)
    for r in replicas:
        r.ready.wait(30)
        if r.failed:
            sys.exit(f"{r.name}: {r.failed}")
    serving_set.extend(replicas)
    publish()
    rows = []
    samples_path = os.path.join(workdir, f"{policy}.jsonl")
    wall_start = time.monotonic()
    for r in replicas:
        r.take_cores(1.0)
    last_tick = time.monotonic()
    try:
        for m in range(first, last):
            qps = shape[m] * scale
            gen.send(f"qps {qps:.1f}")
            deadline = wall_start + (m - first + 1) * args.minute_seconds
            time.sleep(max(0.0, deadline - time.monotonic()))
            stats = gen.tick()
            now = time.monotonic()
            seconds = now - last_tick
            last_tick = now
            alive = len(replicas)
            serving = [r for r in replicas if r in serving_set]
            ok = stats["errors"] == 0 and stats["p99_ms"] <= args.slo_ms
            row = {"minute": m, "qps": round(qps, 1), "replicas": alive,
                   "serving": len(serving), "requests": stats["ok"] + stats["errors"],
                   "p99_ms": round(stats["p99_ms"], 3),
                   "errors": stats["errors"], "slo_met": ok}
            # Each serving replica's minute, as its telemetry.
            lines = []
            cpu = []
            for r in serving:
                t = stats["targets"].get(r.address, {"ok": 0, "latency_mean_ms": 0})
                cores = r.take_cores(seconds)
                cpu.append(cores)
                lines.append(json.dumps({
                    "workload": workload, "instance": r.name, "time": t0 + 60 * (m - first) + 30,
                    "cpu_cores": cores, "memory_bytes": r.rss_bytes(),
                    "qps": t["ok"] / seconds, "latency_seconds": t["latency_mean_ms"] / 1e3,
                    "cpu_request_cores": args.replica_cores}))
            for r in replicas:
                if r not in serving_set:
                    r.take_cores(seconds)
            row["utilization"] = round(sum(cpu) / (args.replica_cores * max(len(cpu), 1)), 3)
            desired = alive
            if not fixed and lines:
                with open(samples_path, "w") as f:
                    f.write("\n".join(lines) + "\n")
                cli(server, "telemetry", "send", samples_path, "--workload", workload)
                rec = json.loads(cli(server, "recommend", workload))
                desired = int(rec.get("replicas", alive) or alive)
                desired = max(1, min(args.max_replicas, desired))
            row["recommended"] = desired
            rows.append(row)
            if args.verbose:
                print(json.dumps(row), file=sys.stderr, flush=True)
            else:
                met = sum(x["slo_met"] for x in rows)
                print(f"\r[{policy}] minute {m - first + 1}/{last - first}  qps {qps:7.0f}  "
                      f"replicas {alive} (serving {len(serving)})  p99 {stats['p99_ms']:6.1f} ms"
                      f"  SLO met {100 * met / len(rows):5.1f}%", end="", file=sys.stderr,
                      flush=True)
            # Scale: start the missing replicas, stop the newest beyond the count.
            while len(replicas) < desired:
                start_replica(m + 1)
            while len(replicas) > desired:
                r = replicas.pop()
                if r in serving_set:
                    serving_set.remove(r)
                    publish()
                r.stop()
            # Replicas that have loaded and whose startup time has passed start serving.
            changed = False
            for r in replicas:
                if r not in serving_set and r.ready.is_set() and \
                        m + 1 >= r.started_minute + args.startup_minutes:
                    if r.failed:
                        sys.exit(f"{r.name}: {r.failed}")
                    serving_set.append(r)
                    changed = True
            if changed:
                publish()
    finally:
        print(file=sys.stderr)
        gen.close()
        for r in replicas:
            r.stop()
    met = sum(r["slo_met"] for r in rows)
    # The bound: what a policy that knew each minute's demand (busy replica-equivalents, as
    # measured) and held the target in every minute would have spent, starting replicas free.
    demand = [r["utilization"] * r["serving"] for r in rows]
    foresight = sum(max(1, math.ceil(x / target - 1e-9)) for x in demand)
    scored = rows[args.warmup_minutes:]
    return {"policy": policy, "target": target, "minutes": len(rows),
            "slo_met_percent_after_warmup":
                round(100 * sum(r["slo_met"] for r in scored) / max(len(scored), 1), 2),
            "over_target_minutes": sum(1 for r in rows if r["utilization"] > target),
            "foresight_replica_minutes": foresight,
            "slo_met_percent": round(100 * met / len(rows), 2),
            "replica_minutes": sum(r["replicas"] for r in rows),
            "errors": sum(r["errors"] for r in rows),
            "p99_ms_median": round(statistics.median(r["p99_ms"] for r in rows), 3),
            "scale_events": sum(1 for a, b in zip(rows, rows[1:]) if a["replicas"] != b["replicas"]),
            "rows": rows}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", default="0:660", help="FIRST:LAST trace minutes to replay")
    ap.add_argument("--minute-seconds", type=float, default=0.5)
    ap.add_argument("--peak-qps", type=float, default=1000)
    ap.add_argument("--batch", type=int, default=10, help="examples per request")
    ap.add_argument("--replica-cores", type=float, default=0.2)
    ap.add_argument("--cfs-period-us", type=int, default=100000)
    ap.add_argument("--max-replicas", type=int, default=6)
    ap.add_argument("--initial-replicas", type=int, default=1)
    ap.add_argument("--startup-minutes", type=int, default=2)
    ap.add_argument("--target-utilization", type=float, default=0.6)
    ap.add_argument("--slo-ms", type=float, default=50)
    ap.add_argument("--warmup-minutes", type=int, default=5,
                    help="minutes at the start also scored apart: the fleet starts at "
                         "--initial-replicas whatever the load")
    ap.add_argument("--policies", default="evoscale,hpa,fixed",
                    help="comma-separated: evoscale, evoscale:Q (demand quantile Q), hpa, fixed; "
                         "POLICY@U: at target utilisation U")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--model-dir")
    ap.add_argument("--json")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    args.first, args.last = (int(x) for x in args.minutes.split(":"))
    if not os.access(CPU_CGROUP, os.W_OK):
        sys.exit(f"live_loop: needs root and cgroup v1 CPU groups at {CPU_CGROUP}")
    shape = trace_shape(TRACE)
    args.last = min(args.last, len(shape))
    window = shape[args.first:args.last]
    scale = args.peak_qps / max(window)
    workdir = tempfile.mkdtemp(prefix="live_loop.")
    model_dir = args.model_dir
    if not model_dir:
        model_dir = os.path.join(workdir, "ckpt")
        subprocess.run([os.path.join(BIN, "evoscale-trainer"), "--train",
                        os.path.join(DATA, "criteo-8k", "train.tsv"), "--epochs", "1",
                        "--checkpoint-dir", model_dir], check=True, stdout=subprocess.DEVNULL)
    server = subprocess.Popen(
        [os.path.join(BIN, "evoscaled"), "--db", os.path.join(workdir, "live.db"), "--grpc",
         "127.0.0.1:0", "--http", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=open(os.path.join(workdir, "evoscaled.log"), "w"),
        text=True)
    results = []
    try:
        address = json.loads(server.stdout.readline())["grpc"]
        policies = args.policies.split(",")
        for round_ in range(args.repeats):
            for policy in (policies if round_ % 2 == 0 else policies[::-1]):
                args.round = round_
                result = run_policy(args, policy, shape, scale, address, model_dir, workdir)
                result["round"] = round_
                results.append(result)
    finally:
        server.terminate()
        server.wait()
    print(f"\ntrace minutes {args.first}-{args.last} of alibaba-genai-2026 qps.csv, peak "
          f"{args.peak_qps:.0f} requests/s of {args.batch} examples, one trace minute per "
          f"{args.minute_seconds} s; replicas of {args.replica_cores} cores (CFS quota), "
          f"startup {args.startup_minutes} min, SLO p99 <= {args.slo_ms} ms and no errors")
    print(f"| policy | round | minutes meeting the SLO | after the first {args.warmup_minutes} |"
          " replica-minutes | minutes over target |"
          " foresight replica-minutes at target | scale events | median p99 ms | errors |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['policy']} | {r['round']} | {r['slo_met_percent']}% | "
              f"{r['slo_met_percent_after_warmup']}% | {r['replica_minutes']} | "
              f"{r['over_target_minutes']} | {r['foresight_replica_minutes']} | "
              f"{r['scale_events']} | {r['p99_ms_median']} | {r['errors']} |")
    for policy in policies:
        rs = [r for r in results if r["policy"] == policy]
        print(f"{policy}: median over {len(rs)} rounds: SLO met in "
              f"{statistics.median(r['slo_met_percent'] for r in rs)}% of minutes, "
              f"{statistics.median(r['replica_minutes'] for r in rs)} replica-minutes")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": {k: v for k, v in vars(args).items()}, "results": results}, f,
                      indent=1)


if __name__ == "__main__":
    main()
