#!/usr/bin/python3
"""A Llama checkpoint's forward pass written plainly in NumPy float64, streaming its shards, as
the reference of scripts/bench_7b.sh.

    bench_7b_reference.py CHECKPOINT_DIR LAYER ID,ID,...

Reads config.json and model.safetensors.index.json (or model.safetensors) itself: each shard's
header, then its bytes through np.memmap, BF16 widened by shifting into float32's high half, each
weight converted to float64 as it is used and let go. Runs every block as Hugging Face's
LlamaForCausalLM does (RMSNorm, rotate-half RoPE, causal attention, SwiGLU), and prints one JSON
line: the top 10 of the final norm and the unembedding at the last position (`prediction`), the
logit lens there before and after layer LAYER's FFN (`lens_before`, `lens_after`: the stream
entering the FFN and leaving it, through the same final norm and unembedding), the largest
absolute value of the stream, and the seconds it took. Writes nothing. Needs numpy only.
"""

import json
import os
import struct
import sys
import time

import numpy as np


class Shards:
    def __init__(self, directory):
        index = os.path.join(directory, "model.safetensors.index.json")
        if os.path.exists(index):
            files = sorted(set(json.load(open(index))["weight_map"].values()))
        else:
            files = ["model.safetensors"]
        self.where = {}
        for name in files:
            path = os.path.join(directory, name)
            with open(path, "rb") as f:
                n = struct.unpack("<Q", f.read(8))[0]
                header = json.loads(f.read(n))
            header.pop("__metadata__", None)
            data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
            for tensor, h in header.items():
                self.where[tensor] = (data, h)

    def get(self, name, rows=None):
        """The tensor (or some of its rows) as float64."""
        data, h = self.where[name]
        a, b = h["data_offsets"]
        kind = {"F32": "<f4", "F64": "<f8", "F16": "<f2", "BF16": "<u2"}[h["dtype"]]
        values = np.frombuffer(data[a:b], dtype=kind).reshape(h["shape"])
        if rows is not None:
            values = values[rows]
        if h["dtype"] == "BF16":
            values = (values.astype(np.uint32) << np.uint32(16)).view(np.float32)
        return values.astype(np.float64)


def top10(row):
    order = np.argsort(-row, kind="stable")[:10]
    return [[int(i), float(row[i])] for i in order]


def main():
    directory, layer, ids = sys.argv[1], int(sys.argv[2]), [int(i) for i in sys.argv[3].split(",")]
    start = time.time()
    c = json.load(open(os.path.join(directory, "config.json")))
    ck = Shards(directory)
    T, d, H = len(ids), c["hidden_size"], c["num_attention_heads"]
    KV = c.get("num_key_value_heads", H)
    hd, eps, theta = d // H, c["rms_norm_eps"], c.get("rope_theta", 10000.0)

    def rms(x, name):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * ck.get(name + ".weight")

    # rotate-half RoPE: inv_freq = θ^(−2i/hd), angles (T, hd/2) repeated to (T, hd)
    inv_freq = 1.0 / theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd)
    angles = np.concatenate([np.outer(np.arange(T, dtype=np.float64), inv_freq)] * 2, axis=-1)
    cos, sin = np.cos(angles)[:, None, :], np.sin(angles)[:, None, :]

    def rope(x, heads):
        x = x.reshape(T, heads, hd)
        rotated = np.concatenate([-x[..., hd // 2:], x[..., : hd // 2]], axis=-1)
        return (x * cos + rotated * sin).reshape(T, heads * hd)

    def attend(q, k, v):
        q, k, v = (t.reshape(T, -1, hd).transpose(1, 0, 2) for t in (q, k, v))
        if KV != H:  # repeat_kv: each key/value head serves H/KV consecutive query heads
            k, v = np.repeat(k, H // KV, axis=0), np.repeat(v, H // KV, axis=0)
        scores = q @ k.transpose(0, 2, 1) / np.sqrt(hd)
        scores[:, np.triu(np.ones((T, T), dtype=bool), 1)] = -np.inf
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        scores /= scores.sum(-1, keepdims=True)
        return (scores @ v).transpose(1, 0, 2).reshape(T, H * hd)

    head = "model.embed_tokens.weight" if c.get("tie_word_embeddings") else "lm_head.weight"
    unembed = lambda x: (rms(x[-1:], "model.norm") @ ck.get(head).T)[0]
    out = {}
    largest = 0.0
    x = ck.get("model.embed_tokens.weight", ids)
    for i in range(c["num_hidden_layers"]):
        b = f"model.layers.{i}."
        h = rms(x, b + "input_layernorm")
        q = rope(h @ ck.get(b + "self_attn.q_proj.weight").T, H)
        k = rope(h @ ck.get(b + "self_attn.k_proj.weight").T, KV)
        v = h @ ck.get(b + "self_attn.v_proj.weight").T
        x = x + attend(q, k, v) @ ck.get(b + "self_attn.o_proj.weight").T
        if i == layer:
            out["lens_before"] = top10(unembed(x))
        h = rms(x, b + "post_attention_layernorm")
        gate = h @ ck.get(b + "mlp.gate_proj.weight").T
        gate = gate / (1.0 + np.exp(-gate)) * (h @ ck.get(b + "mlp.up_proj.weight").T)
        x = x + gate @ ck.get(b + "mlp.down_proj.weight").T
        if i == layer:
            out["lens_after"] = top10(unembed(x))
        largest = max(largest, float(np.abs(x).max()))
    out["prediction"] = top10(unembed(x))
    out["largest_stream_value"] = largest
    out["finite"] = bool(np.isfinite(x).all())
    out["wall_seconds"] = round(time.time() - start, 3)
    print(json.dumps(out))


if __name__ == "__main__":
    sys.exit(main())
