#!/usr/bin/python3
"""Builds the libtorch peer's TorchScript module from serve_export's arrays (same weights as
evoscale-serve): OUT/model.pt, what a TorchRec-style team would deploy. The module takes
rows (n, 26) int64, each feature id's row in the table plus one (0: no row, a zero embedding,
as evoscale-serve answers an unseen id), and dense (n, 13) float32 already log1p-transformed;
it answers P(click) (n). The id -> row map stays outside the module (keys.u64), as TorchRec
keeps its id transform in front of the model.

usage: /usr/bin/python3 export_torchscript.py EXPORT_DIR   (Debian's python3-torch)
"""
import json
import os
import sys

import numpy as np
import torch


class CtrModel(torch.nn.Module):
    def __init__(self, table, layers):
        super().__init__()
        self.table = torch.nn.Embedding.from_pretrained(table, freeze=True)
        hidden = []
        for w, b in layers[:-1]:
            hidden += [self._linear(w, b), torch.nn.ReLU()]
        self.hidden = torch.nn.Sequential(*hidden)
        self.out = self._linear(*layers[-1])

    @staticmethod
    def _linear(w, b):
        layer = torch.nn.Linear(w.shape[0], w.shape[1])
        with torch.no_grad():
            layer.weight.copy_(torch.from_numpy(np.ascontiguousarray(w.T)))
            layer.bias.copy_(torch.from_numpy(b))
        return layer

    def forward(self, rows: torch.Tensor, dense: torch.Tensor) -> torch.Tensor:
        x = torch.cat([self.table(rows).reshape(rows.size(0), -1), dense], dim=1)
        return torch.sigmoid(self.out(self.hidden(x)).squeeze(1))


def main():
    out = sys.argv[1]
    meta = json.load(open(os.path.join(out, "meta.json")))
    dim, sizes = meta["dim"], meta["mlp_sizes"]
    rows = np.fromfile(os.path.join(out, "rows.f32"), dtype=np.float32).reshape(-1, dim)
    table = torch.zeros(rows.shape[0] + 1, dim)
    table[1:] = torch.from_numpy(rows)
    flat = np.fromfile(os.path.join(out, "mlp.f32"), dtype=np.float32)
    layers, at = [], 0
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        w = flat[at:at + fan_in * fan_out].reshape(fan_in, fan_out)
        at += fan_in * fan_out
        layers.append((w, flat[at:at + fan_out].copy()))
        at += fan_out
    if at != flat.size:
        sys.exit(f"mlp.f32: {flat.size} floats, the sizes {sizes} take {at}")
    model = CtrModel(table, layers).eval()
    module = torch.jit.freeze(torch.jit.script(model))
    module.save(os.path.join(out, "model.pt"))
    print(json.dumps({"model": os.path.join(out, "model.pt"), "rows": rows.shape[0],
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()
