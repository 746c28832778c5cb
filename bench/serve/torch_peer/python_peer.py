#!/usr/bin/python3
"""The Python peer of evoscale-serve (issue 29): grpcio's server with the same TorchScript
module as the libtorch peer (export_torchscript.py, the same weights). Parses requests as
evoscale-serve does (trainer/criteo_reader.h: log1p of numeric values, hex categorical values
turned into feature ids as trainer/feature_id.h's MakeFid) and maps ids to rows with a dict.

usage: python_peer.py --export DIR [--grpc 127.0.0.1:0] [--threads 2]
Prints {"event":"listening","grpc":HOST:PORT}; serves until SIGTERM or SIGINT.
"""
import argparse
import concurrent.futures
import json
import math
import os
import signal
import sys
import tempfile
import threading

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from online_quality import stubs  # noqa: E402

MASK64 = (1 << 64) - 1
HASH_MASK = (1 << 48) - 1


def make_fid(slot, value):
    """trainer/feature_id.h's MakeFid: the slot above a splitmix64 hash's low 48 bits."""
    value = (value + 0x9E3779B97F4A7C15) & MASK64
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & MASK64
    return (slot << 48) | ((value ^ (value >> 31)) & HASH_MASK)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--export", required=True)
    ap.add_argument("--grpc", default="127.0.0.1:0")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(1)
    pb, pb_grpc = stubs(tempfile.mkdtemp(prefix="python_peer."))
    import grpc

    module = torch.jit.load(os.path.join(args.export, "model.pt"))
    keys = np.fromfile(os.path.join(args.export, "keys.u64"), dtype=np.uint64)
    rows = {int(k): i + 1 for i, k in enumerate(keys)}

    class Servicer(pb_grpc.PredictionServiceServicer):
        def Predict(self, request, context):
            n = len(request.examples)
            if n == 0:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "examples: empty batch")
            ids = np.zeros((n, 26), dtype=np.int64)
            dense = np.zeros((n, 13), dtype=np.float32)
            for i, e in enumerate(request.examples):
                if len(e.numeric) != 13 or len(e.categorical) != 26:
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                  f"examples[{i}]: 13 numeric and 26 categorical values wanted")
                dense[i] = [math.log1p(v if v > 0 else 0) for v in e.numeric]
                try:
                    ids[i] = [rows.get(make_fid(f, int(t, 16) if t else 0), 0)
                              for f, t in enumerate(e.categorical)]
                except ValueError:
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                  f"examples[{i}].categorical: not hex")
            with torch.inference_mode():
                p = module(torch.from_numpy(ids), torch.from_numpy(dense))
            return pb.PredictResponse(probabilities=p.tolist())

    server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=args.threads),
                         options=[("grpc.max_receive_message_length", 64 << 20)])
    pb_grpc.add_PredictionServiceServicer_to_server(Servicer(), server)
    port = server.add_insecure_port(args.grpc)
    server.start()
    print(json.dumps({"event": "listening",
                      "grpc": args.grpc[:args.grpc.rfind(":") + 1] + str(port),
                      "torch": torch.__version__}), flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    server.stop(0)


if __name__ == "__main__":
    main()
