#!/usr/bin/env python3
"""evoscale-serve under open-loop load, beside the null server (the transport floor), in one run.

Trains the CTR model on criteo-8k (or takes --model-dir), starts build/bin/evoscale-serve and
`serve_load null`, then for each server and each rate runs `serve_load load` (latency from each
request's due time) --repeats times, interleaving the servers, and reports medians:
  - single-example requests: p99 at each QPS, and the highest QPS whose median p99 <= 5 ms;
  - 100-example requests: examples/s and p99 at each rate, the most examples/s at p99 <= 10 ms.
The load generator shares the machine's cores with the server (as issue 29's bar says).

With --torch-peer, the libtorch peer runs in the same interleaved rounds: the same checkpoint
exported as TorchScript (torch_peer/, built by torch_peer/build.sh), behind the same gRPC server
and threads; its answers are first checked against evoscale-serve's on the test file
(`serve_load agree`), and the report ends with evoscale-serve's highest QPS at p99 <= 5 ms over
the peer's. --torch-reload S adds the peer again reloading its whole model every S seconds (how a
TorchScript deployment takes updates). --python-peer adds grpcio's server with the same module
(torch_peer/python_peer.py). --servers NAME,... runs the load against only those named.

usage: serve_bench.py [--model-dir DIR] [--qps 5000,10000,...] [--batch-rates 500,...]
                      [--seconds 4] [--repeats 3] [--json FILE] [--torch-peer]
                      [--torch-reload S] [--python-peer] [--servers NAME,...]
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


def start(cmd, env=None):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    line = p.stdout.readline()
    event = json.loads(line)
    if event.get("event") != "listening":
        sys.exit(f"{cmd[0]} did not start: {line}")
    return p, event["grpc"]


def train(model_dir):
    """The model the serving benches answer with: criteo-8k, 2 epochs, into model_dir."""
    subprocess.run([os.path.join(BIN, "evoscale-trainer"), "--train",
                    os.path.join(DATA, "train.tsv"), "--test", os.path.join(DATA, "test.tsv"),
                    "--epochs", "2", "--batch-size", "256", "--seed", "1",
                    "--checkpoint-dir", model_dir], check=True, stdout=subprocess.DEVNULL)


def load(target, qps, batch, seconds):
    out = subprocess.run([os.path.join(BIN, "serve_load"), "load", "--target", target, "--data",
                          os.path.join(DATA, "test.tsv"), "--qps", str(qps), "--batch",
                          str(batch), "--seconds", str(seconds)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def agree(servers, name):
    """Checks that servers[name] answers as evoscale-serve on the test file."""
    out = subprocess.run([os.path.join(BIN, "serve_load"), "agree", "--target",
                          servers["evoscale-serve"], "--other", servers[name], "--data",
                          os.path.join(DATA, "test.tsv")],
                         capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    print(json.dumps({f"{name}_vs_evoscale_serve": result}), flush=True)
    if result["max_abs_diff"] > 1e-5:
        sys.exit(f"{name} does not serve the same model: {result}")


def start_peers(args, model_dir, tmp, servers, procs):
    """Exports model_dir for the torch peers and starts those asked for: the libtorch peer (and,
    with --torch-reload S, a second one reloading every S seconds) and the Python one, each
    checked against evoscale-serve's answers."""
    peer = os.path.join(BIN, "serve_torch_peer")
    if args.torch_peer and not os.path.exists(peer):
        sys.exit("--torch-peer: build/bin/serve_torch_peer is missing: run "
                 "bench/serve/torch_peer/build.sh")
    export = os.path.join(tmp, "export")
    here = os.path.join(ROOT, "bench", "serve", "torch_peer")
    subprocess.run([os.path.join(BIN, "serve_export"), "--model-dir", model_dir, "--out", export],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["/usr/bin/python3", os.path.join(here, "export_torchscript.py"), export],
                   check=True, stdout=subprocess.DEVNULL)
    # One BLAS thread per call, as torch's own intra-op threads: the server's threads are the
    # parallelism (Debian's libtorch calls libblas.so.3; build.sh makes that OpenBLAS).
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    started = []
    if args.torch_peer:
        started.append(("libtorch", [peer, "--export", export, "--grpc", "127.0.0.1:0"]))
        if args.torch_reload > 0:
            started.append((f"libtorch-reload-{args.torch_reload:g}s",
                            [peer, "--export", export, "--grpc", "127.0.0.1:0",
                             "--reload-seconds", str(args.torch_reload)]))
    if args.python_peer:
        started.append(("python-torch", ["/usr/bin/python3", os.path.join(here, "python_peer.py"),
                                         "--export", export, "--grpc", "127.0.0.1:0"]))
    for name, cmd in started:
        p, servers[name] = start(cmd, env)
        procs.append(p)
        agree(servers, name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-dir")
    ap.add_argument("--qps", default="5000,10000,20000,30000,40000")
    ap.add_argument("--batch-rates", default="500,1000,1500,2000")
    ap.add_argument("--seconds", type=float, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json")
    ap.add_argument("--torch-peer", action="store_true")
    ap.add_argument("--torch-reload", type=float, default=0)
    ap.add_argument("--python-peer", action="store_true")
    ap.add_argument("--servers", help="run the load against only these (comma-separated)")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="serve_bench.")
    model_dir = args.model_dir
    if not model_dir:
        model_dir = os.path.join(tmp, "ckpt")
        train(model_dir)
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
        if args.torch_peer or args.python_peer:
            start_peers(args, model_dir, tmp, servers, procs)
        if args.servers:
            servers = {n: a for n, a in servers.items() if n in args.servers.split(",")}
        plans = [(1, int(q)) for q in args.qps.split(",") if q] + \
                [(100, int(r)) for r in args.batch_rates.split(",") if r]
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
    best = {}
    for name in servers:
        ok1 = [r["rate"] for r in results if r["server"] == name and r["batch"] == 1
               and r["p99_ms"] <= 5 and r["errors"] == 0]
        ok100 = [r["examples_per_s"] for r in results if r["server"] == name
                 and r["batch"] == 100 and r["p99_ms"] <= 10 and r["errors"] == 0]
        best[name] = max(ok1) if ok1 else 0
        print(f"{name}: highest single-example QPS at p99 <= 5 ms: {max(ok1) if ok1 else 'none'}; "
              f"most examples/s in 100-example requests at p99 <= 10 ms: "
              f"{max(ok100) if ok100 else 'none'}")
    for name in servers:
        if name != "evoscale-serve" and name != "null" and "evoscale-serve" in best:
            ratio = best["evoscale-serve"] / best[name] if best[name] else float("inf")
            print(f"evoscale-serve / {name}, highest QPS at p99 <= 5 ms: {ratio:.2f}x "
                  f"({best['evoscale-serve']} / {best[name]}; bounded by the rates tried)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
