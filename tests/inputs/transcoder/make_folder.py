#!/usr/bin/env python3
"""Writes atlas_layer1/, a transcoder's folder for data/models/atlas's layer 1 (d_model 64) as
another program would lay it out for circuit-tracer, with Python's standard library alone: 16
features, ReLU, its weights drawn from a fixed seed, stored as F32. The CLI tests read it with
run --transcoder. Run again to regenerate.
"""
import json
import os
import random
import struct

F, d, LAYER = 16, 64, 1
rng = random.Random(57)
tensors = {
    "W_enc": ([F, d], [rng.gauss(0, 0.3) for _ in range(F * d)]),
    "b_enc": ([F], [rng.gauss(0, 0.1) for _ in range(F)]),
    "W_dec": ([F, d], [rng.gauss(0, 0.2) for _ in range(F * d)]),
    "b_dec": ([d], [rng.gauss(0, 0.1) for _ in range(d)]),
}
header, data = {}, b""
for name, (shape, values) in tensors.items():
    raw = struct.pack(f"<{len(values)}f", *values)
    header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
    data += raw
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "atlas_layer1")
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, f"layer_{LAYER}.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + data)
with open(os.path.join(out, "config.json"), "w") as f:
    json.dump({"model": "atlas", "layer": LAYER, "activation": "relu"}, f)
    f.write("\n")
