#!/usr/bin/python3
"""The work of `ffn-trace units --layer N` as a plain PyTorch float64 loop, for scripts/bench_units.sh.

    bench_units_torch.py MODEL_DIR CORPUS LAYER TOP UNITS_JSON

Each text (one a line, each byte one token: the bench's tokenizer has no merges) through GPT-2's
blocks up to layer N, layer N's activations gelu_new(ln_2(x) W1 + b1), and per unit a running top-k,
sum and count of positives; then every unit's value scores W2 (γ_f ⊙ U)ᵀ and key scores (E ⊙ γ) W1,
top-k of each. Prints one JSON line: the seconds the import of torch took, reading the weights,
and the work; and the largest difference from UNITS_JSON (what `ffn-trace units --format json`
wrote) of every unit's top-k activations, mean and promoted scores.
"""
import json
import math
import os
import struct
import sys
import time

start = time.time()
import numpy as np  # noqa: E402
import torch  # noqa: E402

imported = time.time()
model_dir, corpus, layer, top, located = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
torch.set_grad_enabled(False)
torch.set_num_threads(os.cpu_count() or 1)
raw = open(f"{model_dir}/model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
W = {}
for name, info in header.items():
    if name == "__metadata__":
        continue
    b, e = info["data_offsets"]
    a = np.frombuffer(raw[8 + n + b:8 + n + e], dtype=np.float32).reshape(info["shape"])
    W[name.removeprefix("transformer.")] = torch.from_numpy(a.astype(np.float64))
cfg = json.load(open(f"{model_dir}/config.json"))
H, EPS = cfg["n_head"], cfg["layer_norm_epsilon"]
order = [b for b in range(ord("!"), ord("~") + 1)] + [b for b in range(0xA1, 0xAD)] + [b for b in range(0xAE, 0x100)]
order += [b for b in range(256) if b not in order]
byte_id = {b: i for i, b in enumerate(order)}


def norm(x, name):
    return torch.nn.functional.layer_norm(x, x.shape[-1:], W[name + ".weight"], W[name + ".bias"], EPS)


def attention(i, x):
    T, C = x.shape
    p = f"h.{i}.attn."
    q, k, v = (norm(x, f"h.{i}.ln_1") @ W[p + "c_attn.weight"] + W[p + "c_attn.bias"]).split(C, 1)
    d = C // H
    q, k, v = (t.view(T, H, d).transpose(0, 1) for t in (q, k, v))
    s = q @ k.transpose(1, 2) / math.sqrt(d) + torch.triu(torch.full((T, T), -math.inf, dtype=torch.float64), 1)
    return x + (torch.softmax(s, -1) @ v).transpose(0, 1).reshape(T, C) @ W[p + "c_proj.weight"] + W[p + "c_proj.bias"]


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


ready = time.time()
F = W[f"h.{layer}.mlp.c_fc.weight"].shape[1]
best = torch.full((top, F), -math.inf, dtype=torch.float64)
total = torch.zeros(F, dtype=torch.float64)
positive = torch.zeros(F, dtype=torch.float64)
count = 0
for line in open(corpus, encoding="utf-8"):
    text = line.rstrip("\n")
    if not text.strip():
        continue
    ids = torch.tensor([byte_id[b] for b in text.encode("utf-8")])
    x = W["wte.weight"][ids] + W["wpe.weight"][: len(ids)]
    for i in range(layer + 1):
        x = attention(i, x)
        p = f"h.{i}.mlp."
        a = gelu_new(norm(x, f"h.{i}.ln_2") @ W[p + "c_fc.weight"] + W[p + "c_fc.bias"])
        if i < layer:
            x = x + a @ W[p + "c_proj.weight"] + W[p + "c_proj.bias"]
    best = torch.topk(torch.cat([best, a]), top, dim=0).values
    total += a.sum(0)
    positive += (a > 0).sum(0)
    count += len(ids)
U = W["wte.weight"]
values = W[f"h.{layer}.mlp.c_proj.weight"] @ (W["ln_f.weight"][:, None] * U.T)  # (F, vocab)
promotes, suppresses = torch.topk(values, top, 1), torch.topk(-values, top, 1)
keys = torch.topk((U * W[f"h.{layer}.ln_2.weight"]) @ W[f"h.{layer}.mlp.c_fc.weight"], top, 0)
done = time.time()
got = json.load(open(located))["units"]
worst = 0.0
for j, u in enumerate(got):
    kept = [c["activation"] for c in u["max_activating"]]
    worst = max(worst, max(abs(a - b) for a, b in zip(kept, best[:, j].tolist())), abs(u["mean"] - total[j].item() / count))
    worst = max(worst, max(abs(p["score"] - v) for p, v in zip(u["promotes"], promotes.values[j].tolist())))
print(json.dumps({"import_seconds": round(imported - start, 3), "setup_seconds": round(ready - imported, 3),
                  "work_seconds": round(done - ready, 3), "max_difference": worst}))
