#!/usr/bin/python3
"""Issue 29, must-show 3: staleness over a long run, from a trainer step to the first answer
computed with its rows.

A replica deployed from a model of criteo-8k's first --deploy rows; an evoscale-trainer --stream
--resume that reads rows from stdin (the training file cycled, --rows-per-s of them, for
--seconds) and pushes to the replica every --push-every seconds. Two threads watch:
  - the trainer's progress lines (--progress-every 1): when each step s was trained, as the line
    is read;
  - a prober sending one-example Predict calls back to back (--probe-gap-ms apart): when the
    replica first answers with sparse_version >= s.
A step's staleness is the second minus the first. Reports p50, p99 and max over every step, and
the prober's own call latency (the resolution).

usage: staleness.py [--seconds 300] [--rows-per-s 2560] [--push-every 1] [--json FILE]
"""
import argparse
import bisect
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from online_quality import BIN, deploy, stubs  # noqa: E402
from serve_bench import start  # noqa: E402


def percentile(sorted_values, q):
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--deploy", type=int, default=2000)
    ap.add_argument("--seconds", type=float, default=300)
    ap.add_argument("--rows-per-s", type=float, default=2560)
    ap.add_argument("--push-every", type=float, default=1.0)
    ap.add_argument("--probe-gap-ms", type=float, default=2.0)
    ap.add_argument("--json")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="staleness.")
    pb, pb_grpc = stubs(tmp)
    import grpc

    lines, ckpt = deploy(tmp, args.deploy, 256)
    replica, address = start([os.path.join(BIN, "evoscale-serve"), "--model-dir", ckpt,
                              "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"])
    trainer = subprocess.Popen([os.path.join(BIN, "evoscale-trainer"), "--stream", "--train", "-",
                                "--resume", "--checkpoint-dir", ckpt, "--batch-size", "256",
                                "--seed", "1", "--serve", address, "--push-every",
                                str(args.push_every), "--progress-every", "1"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                               bufsize=1)
    stub = pb_grpc.PredictionServiceStub(grpc.insecure_channel(address))
    probe = pb.PredictRequest()
    f = lines[0].split("\t")
    e = probe.examples.add()
    e.numeric.extend(int(x) if x else 0 for x in f[1:14])
    e.categorical.extend(f[14:40])

    trained = {}   # step -> when its progress line was read
    seen = []      # (version, first time answered with it), versions increasing
    call_ms = []
    done = threading.Event()

    def read_progress():
        for line in trainer.stdout:
            now = time.monotonic()
            event = json.loads(line)
            if event.get("event") == "progress":
                trained[event["step"]] = now

    def prober():
        last = -1
        while not done.is_set():
            t0 = time.monotonic()
            version = stub.Predict(probe).sparse_version
            t1 = time.monotonic()
            call_ms.append(1e3 * (t1 - t0))
            if version > last:
                seen.append((version, t1))
                last = version
            time.sleep(args.probe_gap_ms / 1e3)

    threads = [threading.Thread(target=read_progress), threading.Thread(target=prober)]
    for t in threads:
        t.start()
    rest = lines[args.deploy:]
    began = time.monotonic()
    sent, chunk = 0, max(64, int(args.rows_per_s / 200))
    while time.monotonic() - began < args.seconds:
        due = began + sent / args.rows_per_s
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        trainer.stdin.write("\n".join(rest[(sent + i) % len(rest)] for i in range(chunk)) + "\n")
        trainer.stdin.flush()
        sent += chunk
    trainer.stdin.close()
    trainer.wait()
    time.sleep(2 * args.push_every + 0.5)  # the last push lands
    done.set()
    threads[0].join()
    threads[1].join()
    replica.terminate()
    replica.wait()

    versions = [v for v, _ in seen]
    stale, unseen = [], 0
    for step, t in sorted(trained.items()):
        i = bisect.bisect_left(versions, step)
        if i == len(versions):
            unseen += 1
            continue
        stale.append(max(0.0, seen[i][1] - t))
    stale.sort()
    call_ms.sort()
    result = {"seconds": args.seconds, "rows_per_s": args.rows_per_s,
              "push_every_s": args.push_every, "steps": len(trained),
              "steps_never_answered": unseen, "versions_seen": len(seen),
              "staleness_p50_ms": round(1e3 * percentile(stale, 0.5), 1),
              "staleness_p99_ms": round(1e3 * percentile(stale, 0.99), 1),
              "staleness_max_ms": round(1e3 * stale[-1], 1),
              "probe_call_p50_ms": round(percentile(call_ms, 0.5), 3),
              "probe_call_p99_ms": round(percentile(call_ms, 0.99), 3)}
    print(json.dumps(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
