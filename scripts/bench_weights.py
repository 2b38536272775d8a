"""A GPT-2 checkpoint's weights for the PyTorch references (bench_locate.py, bench_grad.py), read
without the safetensors package: the header, then the mapped bytes, every tensor converted to
float64 (as model.double() holds a model), named without the "transformer." prefix."""
import json
import os
import struct

import numpy as np
import torch


def tensors(directory):
    path = os.path.join(directory, "model.safetensors")
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    out = {}
    for name, h in header.items():
        a, b = h["data_offsets"]
        kind = {"F32": "<f4", "F64": "<f8"}[h["dtype"]]
        out[name.removeprefix("transformer.")] = torch.from_numpy(
            np.frombuffer(data[a:b], dtype=kind).reshape(h["shape"]).astype(np.float64))
    return out
