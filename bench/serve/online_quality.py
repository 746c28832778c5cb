#!/usr/bin/env python3
"""Issue 29, must-show 4: online-updated serving against the frozen deployment, on criteo-8k's
training file as a stream in file order.

Deploys a model trained on the first --deploy rows (evoscale-trainer, checkpointed), starts two
evoscale-serve replicas from it (frozen, online) and an evoscale-trainer --stream --resume that
reads the rest from stdin and pushes to the online replica. Then, chunk by chunk (--chunk rows,
one training batch): every example of the chunk is scored by both replicas before the chunk is
trained on (progressive validation), then the chunk goes to the trainer and the bench waits
until the online replica holds the step it made (rows and MLP). With --sync-every K the bench
waits only every K chunks, so K chunks are scored with the model as of K chunks before
(per-chunk sync is K = 1). Reports the AUC of all scores of each replica.

usage: online_quality.py [--deploy 2000] [--chunk 256] [--sync-every 1] [--json FILE]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, "build", "bin")
DATA = os.path.join(ROOT, "..", "shared", "data", "criteo-8k")


def stubs(out):
    proto = os.path.join(ROOT, "proto")
    subprocess.run(["protoc", f"-I{proto}", "--plugin=protoc-gen-grpc_python=" +
                    shutil.which("grpc_python_plugin"), f"--python_out={out}",
                    f"--grpc_python_out={out}", "evoscale/v1/serving.proto"], check=True)
    sys.path.insert(0, out)
    from evoscale.v1 import serving_pb2, serving_pb2_grpc  # noqa: E402
    return serving_pb2, serving_pb2_grpc


def deploy(tmp, rows, batch_size):
    """criteo-8k's training lines, and a checkpoint folder in tmp of a model trained on the
    first `rows` of them (what the online benches deploy)."""
    lines = open(os.path.join(DATA, "train.tsv")).read().splitlines()
    with open(os.path.join(tmp, "deploy.tsv"), "w") as f:
        f.write("\n".join(lines[:rows]) + "\n")
    ckpt = os.path.join(tmp, "ckpt")
    subprocess.run([os.path.join(BIN, "evoscale-trainer"), "--train",
                    os.path.join(tmp, "deploy.tsv"), "--holdout-fraction", "0",
                    "--checkpoint-dir", ckpt, "--batch-size", str(batch_size), "--seed", "1"],
                   check=True, stdout=subprocess.DEVNULL)
    return lines, ckpt


def auc(scores, labels):
    pairs = sorted(zip(scores, labels))
    pos = sum(labels)
    neg = len(labels) - pos
    rank, total, i = 0.0, 0.0, 0
    while i < len(pairs):
        j = i
        while j < len(pairs) and pairs[j][0] == pairs[i][0]:
            j += 1
        mid = (i + j + 1) / 2  # 1-based average rank of the tie group
        total += mid * sum(l for _, l in pairs[i:j])
        i = j
    return (total - pos * (pos + 1) / 2) / (pos * neg)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--deploy", type=int, default=2000)
    ap.add_argument("--chunk", type=int, default=256)
    ap.add_argument("--sync-every", type=int, default=1)
    ap.add_argument("--json")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="online_quality.")
    pb, pb_grpc = stubs(tmp)
    import grpc

    lines, ckpt = deploy(tmp, args.deploy, args.chunk)
    trainer_args = ["--batch-size", str(args.chunk), "--seed", "1"]
    shutil.copytree(ckpt, ckpt + "-frozen")
    procs = []

    def serve(model_dir):
        p = subprocess.Popen([os.path.join(BIN, "evoscale-serve"), "--model-dir", model_dir,
                              "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"],
                             stdout=subprocess.PIPE, text=True)
        procs.append(p)
        return json.loads(p.stdout.readline())["grpc"]

    frozen_addr, online_addr = serve(ckpt + "-frozen"), serve(ckpt)
    frozen = pb_grpc.PredictionServiceStub(grpc.insecure_channel(frozen_addr))
    online = pb_grpc.PredictionServiceStub(grpc.insecure_channel(online_addr))
    sync = pb_grpc.ModelSyncServiceStub(grpc.insecure_channel(online_addr))
    trainer = subprocess.Popen([os.path.join(BIN, "evoscale-trainer"), "--stream", "--train", "-",
                                "--resume", "--checkpoint-dir", ckpt, "--serve", online_addr,
                                "--push-every", "0.001", "--dense-every", "0.001",
                                "--progress-every", "0"] + trainer_args,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    step = sync.GetSyncState(pb.GetSyncStateRequest()).checkpoint_step

    def request(chunk):
        req = pb.PredictRequest()
        for line in chunk:
            f = line.split("\t")
            e = req.examples.add()
            e.numeric.extend(int(x) if x else 0 for x in f[1:14])
            e.categorical.extend(f[14:40])
        return req

    scores = {"frozen": [], "online": []}
    staleness = []
    labels = []
    rest = lines[args.deploy:]
    chunks = [rest[i:i + args.chunk] for i in range(0, len(rest), args.chunk)]
    chunks = [c for c in chunks if len(c) == args.chunk]  # whole batches: one step each
    started = time.time()
    for k, chunk in enumerate(chunks):
        req = request(chunk)
        scores["frozen"] += list(frozen.Predict(req).probabilities)
        scores["online"] += list(online.Predict(req).probabilities)
        labels += [1 if line[0] == "1" else 0 for line in chunk]
        trainer.stdin.write("\n".join(chunk) + "\n")
        trainer.stdin.flush()
        sent = time.time()
        step += 1
        if (k + 1) % args.sync_every == 0:
            while True:  # until the online replica holds this step's rows and MLP
                state = sync.GetSyncState(pb.GetSyncStateRequest())
                if state.sparse_version >= step and state.dense_version >= step:
                    break
                time.sleep(0.002)
            # From the examples' arrival to the replica answering with the step trained on
            # them (training the step, collecting, pushing rows and MLP, applying).
            staleness.append(time.time() - sent)
    trainer.stdin.close()
    trainer.wait()
    for p in procs:
        p.terminate()
        p.wait()
    result = {"deploy_rows": args.deploy, "chunk": args.chunk, "sync_every": args.sync_every,
              "chunks": len(chunks), "scored": len(labels),
              "auc_frozen": round(auc(scores["frozen"], labels), 5),
              "auc_online": round(auc(scores["online"], labels), 5),
              "seconds": round(time.time() - started, 1),
              "staleness_p50_ms": round(1e3 * sorted(staleness)[len(staleness) // 2], 1),
              "staleness_max_ms": round(1e3 * max(staleness), 1)}
    result["gain"] = round(result["auc_online"] - result["auc_frozen"], 5)
    print(json.dumps(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
