#!/usr/bin/env python3
"""What a dense swap costs evoscale-serve's memory (issue 29: "the dense swap at most 1.3x the
MLP's size in extra memory").

Trains the CTR model on criteo-8k (or takes --model-dir), starts build/bin/evoscale-serve, and
runs `serve_load dense` against it: --warmup swaps first (default none: the RSS read is the
replica's as it loaded its checkpoint, so memory the allocator keeps after the first swap
counts as extra too), then the replica's RSS is read, its peak (VmHWM) reset, and --pushes
swaps sent through the trainer's own client (64 KiB
chunks, one every --interval-ms); the peak's rise over the RSS before them is the extra memory
the swaps needed, reported against the MLP's size. Run with the replica idle, while
`serve_load load` sends it --qps single-example requests (their buffers count too), and, as a
control, with pushes of the wrong widths that the replica refuses at their first chunk: what the
streams alone cost, no MLP built. Each run is a fresh replica.

usage: dense_swap.py [--model-dir DIR | --hidden 256,128] [--pushes 100] [--interval-ms 20]
                     [--warmup 0] [--qps 2000] [--repeats 3]
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
DATA = os.path.join(ROOT, "..", "shared", "data", "criteo-8k")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-dir")
    ap.add_argument("--hidden", default="256,128", help="the MLP's hidden widths (trained here)")
    ap.add_argument("--pushes", type=int, default=100)
    ap.add_argument("--interval-ms", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=0,
                    help="swaps before the RSS is read (0: against the replica as loaded)")
    ap.add_argument("--qps", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    model_dir = args.model_dir
    if not model_dir:
        model_dir = os.path.join(tempfile.mkdtemp(prefix="dense_swap."), "ckpt")
        subprocess.run([os.path.join(BIN, "evoscale-trainer"), "--train",
                        os.path.join(DATA, "train.tsv"), "--test", os.path.join(DATA, "test.tsv"),
                        "--epochs", "1", "--batch-size", "256", "--seed", "1", "--hidden",
                        args.hidden, "--checkpoint-dir", model_dir],
                       check=True, stdout=subprocess.DEVNULL)
    sizes = "429," + args.hidden + ",1"
    wrong = "429," + args.hidden + ",2"  # refused: the served MLP has one output
    rows = []
    for repeat in range(args.repeats):
        for mode in ("idle", "load", "refused"):
            loaded = mode == "load"
            serve = subprocess.Popen([os.path.join(BIN, "evoscale-serve"), "--model-dir",
                                      model_dir, "--grpc", "127.0.0.1:0", "--http",
                                      "127.0.0.1:0"], stdout=subprocess.PIPE, text=True)
            try:
                event = json.loads(serve.stdout.readline())
                if event.get("event") != "listening":
                    sys.exit(f"evoscale-serve did not start: {event}")
                target = event["grpc"]
                seconds = (args.pushes + 3) * (args.interval_ms / 1000 + 0.05) + 2
                load = None
                if loaded:
                    load = subprocess.Popen(
                        [os.path.join(BIN, "serve_load"), "load", "--target", target, "--data",
                         os.path.join(DATA, "test.tsv"), "--qps", str(args.qps), "--seconds",
                         str(seconds + 2)], stdout=subprocess.DEVNULL)
                    time.sleep(2)  # the replica's buffers for the load in place first
                out = subprocess.run(
                    [os.path.join(BIN, "serve_load"), "dense", "--target", target, "--pid",
                     str(serve.pid), "--pushes", str(args.pushes), "--interval-ms",
                     str(args.interval_ms), "--warmup", str(args.warmup), "--sizes", wrong if mode == "refused" else sizes],
                    capture_output=True, text=True)
                if load is not None:
                    load.wait()
                row = json.loads(out.stdout.strip().splitlines()[-1])
                if (row["failed"] > 0) != (mode == "refused"):
                    sys.exit(f"serve_load dense ({mode}): {out.stderr}")
                row["mode"] = mode
                row["repeat"] = repeat
                rows.append(row)
                print(json.dumps(row), flush=True)
            finally:
                serve.terminate()
                serve.wait()
    print(f"\nMLP {sizes}, {args.pushes} swaps per run after {args.warmup}, one every "
          f"{args.interval_ms} ms")
    print("\n| replica | MLP bytes | RSS before | peak extra | extra / MLP (median) | runs |")
    print("|---|---|---|---|---|---|")
    labels = {"idle": "idle", "load": f"serving {args.qps} req/s",
              "refused": "idle, pushes refused (streams only)"}
    for mode in ("idle", "load", "refused"):
        mine = [r for r in rows if r["mode"] == mode]
        ratios = [r["peak_extra_over_mlp"] for r in mine]
        print(f"| {labels[mode]} | {mine[0]['mlp_bytes']} | "
              f"{statistics.median(r['rss_before_bytes'] for r in mine)} | "
              f"{statistics.median(r['peak_extra_bytes'] for r in mine)} | "
              f"{statistics.median(ratios):.2f} | {', '.join(f'{x:.2f}' for x in ratios)} |")


if __name__ == "__main__":
    main()
