"""safetensors read byte by byte into NumPy float64, for the tests' NumPy references (no
safetensors package: the reference shares no code with the tool's reader)."""
import json
import struct

import numpy as np


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    body = raw[8 + n:]
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        chunk = body[b:e]
        if t["dtype"] == "F64":
            a = np.frombuffer(chunk, "<f8")
        elif t["dtype"] == "F32":
            a = np.frombuffer(chunk, "<f4")
        elif t["dtype"] == "BF16":
            a = (np.frombuffer(chunk, "<u2").astype(np.uint32) << 16).view("<f4")
        else:
            raise ValueError(f"{name}: dtype {t['dtype']}")
        out[name.removeprefix("transformer.").removeprefix("model.")] = a.astype(np.float64).reshape(t["shape"])
    return out
