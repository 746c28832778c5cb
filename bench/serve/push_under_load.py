#!/usr/bin/python3
"""Issue 29, must-show 3: serving latency while rows are pushed, on the same replica.

Trains criteo-8k (or takes --model-dir), starts one evoscale-serve, and for each round runs
`serve_load load` at --qps single-example requests for --seconds, once alone and once with
`serve_load push` sending --rows-per-s rows (--batch a push) for the same seconds; the two
kinds alternate, --repeats rounds. Reports the medians of p50/p99 each way, the p99's rise,
and the rows/s the replica applied, and the cores the pushes cost (the replica's CPU beyond
answering alone, plus the pushing client's). With --burn, each round adds a third run: no
pushes, `serve_load burn` spinning that many cores instead, spread evenly and then in bursts
at the pushes' interval, for the bound: how far that much CPU taken from the answers raises
their p99 by itself.

usage: push_under_load.py [--qps 7500] [--rows-per-s 1000000] [--batch 50000] [--part-rows N]
                          [--seconds 4]
                          [--repeats 5] [--burn] [--model-dir DIR] [--json FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_bench import BIN, load, start, train  # noqa: E402


def cpu_s(pid):
    """A process's CPU seconds so far (user + system)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qps", type=float, default=7500)
    ap.add_argument("--rows-per-s", type=float, default=1e6)
    ap.add_argument("--batch", type=int, default=50000)
    ap.add_argument("--part-rows", type=int, default=0,
                    help="send each push in parts of this many rows (the trainer's: 8192)")
    ap.add_argument("--seconds", type=float, default=4)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--burn", action="store_true",
                    help="a third round per repeat: no pushes, a CPU burner of the cores the "
                         "pushes cost instead (the bound: what that much CPU alone does)")
    ap.add_argument("--model-dir")
    ap.add_argument("--json")
    args = ap.parse_args()
    model_dir = args.model_dir
    if not model_dir:
        model_dir = os.path.join(tempfile.mkdtemp(prefix="push_under_load."), "ckpt")
        train(model_dir)
    server, target = start([os.path.join(BIN, "evoscale-serve"), "--model-dir", model_dir,
                            "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"])
    alone, pushed, applied, burned, bursts, extra_cores = [], [], [], [], [], []
    try:
        for _ in range(args.repeats):
            t0, c0 = time.monotonic(), cpu_s(server.pid)
            alone.append(load(target, args.qps, 1, args.seconds))
            idle_cores = (cpu_s(server.pid) - c0) / (time.monotonic() - t0)
            t0, c0 = time.monotonic(), cpu_s(server.pid)
            push = subprocess.Popen([os.path.join(BIN, "serve_load"), "push", "--target", target,
                                     "--rows-per-s", str(args.rows_per_s), "--batch",
                                     str(args.batch), "--part-rows", str(args.part_rows),
                                     "--seconds", str(args.seconds + 0.5)],
                                    stdout=subprocess.PIPE, text=True)
            time.sleep(0.25)  # the pushes are under way when the load starts
            pushed.append(load(target, args.qps, 1, args.seconds))
            out = push.stdout.read()
            _, _, usage = os.wait4(push.pid, 0)
            push.returncode = 0
            took = time.monotonic() - t0
            # What the pushes cost these cores: the replica's CPU beyond answering alone, and
            # the pushing client's own (a trainer elsewhere in a real fleet).
            extra_cores.append((cpu_s(server.pid) - c0) / took - idle_cores +
                               (usage.ru_utime + usage.ru_stime) / took)
            applied.append(json.loads(out.strip().splitlines()[-1]))
            if args.burn:
                # Spread evenly (1 ms periods), and in bursts as the pushes come (each push's
                # share at the start of its interval).
                for period_ms, runs in ((1, burned), (1e3 * args.batch / args.rows_per_s, bursts)):
                    burn = subprocess.Popen(
                        [os.path.join(BIN, "serve_load"), "burn", "--cores",
                         f"{max(0.01, extra_cores[-1]):.3f}", "--period-ms", f"{period_ms:g}",
                         "--seconds", str(args.seconds + 0.5)], stdout=subprocess.DEVNULL)
                    time.sleep(0.25)
                    runs.append(load(target, args.qps, 1, args.seconds))
                    burn.wait()
    finally:
        server.terminate()
        server.wait()

    def med(runs, key):
        return statistics.median(r[key] for r in runs)

    result = {"qps": args.qps, "rows_per_s_target": args.rows_per_s, "batch": args.batch,
              "repeats": args.repeats,
              "alone_p50_ms": med(alone, "p50_ms"), "alone_p99_ms": med(alone, "p99_ms"),
              "pushed_p50_ms": med(pushed, "p50_ms"), "pushed_p99_ms": med(pushed, "p99_ms"),
              "rows_applied_per_s": med(applied, "rows_applied_per_s"),
              "push_p99_ms": med(applied, "push_p99_ms"),
              "alone_p99_runs": [round(r["p99_ms"], 3) for r in alone],
              "pushed_p99_runs": [round(r["p99_ms"], 3) for r in pushed],
              "errors": sum(r["errors"] + r["unanswered"] for r in alone + pushed) +
              sum(r["failed"] for r in applied),
              "push_cpu_cores": round(statistics.median(extra_cores), 3)}
    if burned:
        result["burned_p99_ms"] = med(burned, "p99_ms")
        result["burned_p99_runs"] = [round(r["p99_ms"], 3) for r in burned]
        result["bursts_p99_ms"] = med(bursts, "p99_ms")
        result["bursts_p99_runs"] = [round(r["p99_ms"], 3) for r in bursts]
    result["p99_rise"] = result["pushed_p99_ms"] / result["alone_p99_ms"] - 1
    print(json.dumps(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
