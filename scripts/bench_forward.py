#!/usr/bin/python3
"""The forward pass written plainly in PyTorch float64, for the benchmark (scripts/bench_forward.sh).

    bench_forward.py CHECKPOINT_DIR LAYER ID,ID,... [--one-at-a-time]

Reads config.json and model.safetensors itself (no safetensors package: the header, then the
mapped bytes; BF16 by shifting into float32's high half), runs every block of a GPT-2 or Llama
checkpoint as Hugging Face's modelling code does, in float64, then the final norm and the
unembedding of the last position, and prints one JSON line: the top 10 logits and the norm of the
row, as the C++ driver (build/tests/bench_forward) does. Writes nothing.

By default every weight is converted to float64 before the pass (as model.double() holds a model);
--one-at-a-time converts each weight as it is used and lets it go (embedding rows only).
"""

import argparse
import json
import math
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F


class Checkpoint:
    def __init__(self, directory):
        path = os.path.join(directory, "model.safetensors")
        with open(path, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            self.header = json.loads(f.read(n))
        self.header.pop("__metadata__", None)
        self.data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)

    def raw(self, name):
        h = self.header[name]
        a, b = h["data_offsets"]
        kind = {"F32": "<f4", "F64": "<f8", "F16": "<f2", "BF16": "<u2"}[h["dtype"]]
        return np.frombuffer(self.data[a:b], dtype=kind).reshape(h["shape"]), h["dtype"]

    def get(self, name, rows=None):
        """The tensor (or some of its rows) as float64."""
        values, dtype = self.raw(name)
        if rows is not None:
            values = values[rows]
        # converted by NumPy, which does it several times faster than torch's shift and .double() here
        if dtype == "BF16":
            values = (values.astype(np.uint32) << np.uint32(16)).view(np.float32)
        return torch.from_numpy(values.astype(np.float64))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("layer", type=int)
    ap.add_argument("ids")
    ap.add_argument("--one-at-a-time", action="store_true")
    ap.add_argument("--prompt-work", action="store_true",
                    help="also what run --prompt computes: the lens, the attribution and the vocabulary view")
    args = ap.parse_args()
    start = time.time()
    torch.set_num_threads(os.cpu_count() or 1)
    config = json.load(open(os.path.join(args.checkpoint, "config.json")))
    ck = Checkpoint(args.checkpoint)
    ids = [int(i) for i in args.ids.split(",")]
    T = len(ids)

    held = {}
    if not args.one_at_a_time:
        held = {name: ck.get(name) for name in ck.header}

    def w(name):
        return held[name] if name in held else ck.get(name)

    seen = {}  # layer N's FFN: the stream before and after it, and the values fed to its W2

    def keep(i, before, hidden, after, w2_name, w2_transposed):
        if i == args.layer:
            seen.update(before=before, hidden=hidden, after=after, w2=(w2_name, w2_transposed))

    def rows(name, r):
        return held[name][r] if name in held else ck.get(name, r)

    def attend(q, k, v, n_heads, head_dim):
        # (T, H·hd) -> (H, T, hd); softmax(q kᵀ/√hd + causal mask) v; back to (T, H·hd)
        q, k, v = (t.view(T, n_heads, head_dim).transpose(0, 1) for t in (q, k, v))
        scores = q @ k.transpose(1, 2) / math.sqrt(head_dim)
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        scores = scores.masked_fill(mask, float("-inf"))
        return (F.softmax(scores, dim=-1) @ v).transpose(0, 1).reshape(T, n_heads * head_dim)

    if config["model_type"] == "gpt2":
        d, H, eps = config["n_embd"], config["n_head"], config["layer_norm_epsilon"]
        p = "transformer."
        ln = lambda x, n: F.layer_norm(x, (d,), w(n + ".weight"), w(n + ".bias"), eps)
        x = rows(p + "wte.weight", ids) + rows(p + "wpe.weight", list(range(T)))
        for i in range(config["n_layer"]):
            b = f"{p}h.{i}."
            qkv = ln(x, b + "ln_1") @ w(b + "attn.c_attn.weight") + w(b + "attn.c_attn.bias")
            q, k, v = qkv.split(d, dim=1)
            x = x + attend(q, k, v, H, d // H) @ w(b + "attn.c_proj.weight") + w(b + "attn.c_proj.bias")
            h = F.gelu(ln(x, b + "ln_2") @ w(b + "mlp.c_fc.weight") + w(b + "mlp.c_fc.bias"), approximate="tanh")
            before = x
            x = x + h @ w(b + "mlp.c_proj.weight") + w(b + "mlp.c_proj.bias")
            keep(i, before, h, x, b + "mlp.c_proj.weight", False)
        final = lambda x: ln(x, p + "ln_f")
        head = p + "wte.weight"
        logits = final(x[-1:]) @ w(head).T
    else:
        d, H = config["hidden_size"], config["num_attention_heads"]
        KV = config.get("num_key_value_heads", H)
        hd, eps, theta = d // H, config["rms_norm_eps"], config.get("rope_theta", 10000.0)
        rms = lambda x, n: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w(n + ".weight")
        # rotate-half RoPE in float64: inv_freq = θ^(−2i/hd), emb = cat(freqs, freqs)
        inv_freq = 1.0 / theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)
        emb = torch.cat([torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)] * 2, dim=-1)
        cos, sin = emb.cos(), emb.sin()

        def rope(x, heads):
            x = x.view(T, heads, hd)
            rotated = torch.cat([-x[..., hd // 2:], x[..., : hd // 2]], dim=-1)
            return (x * cos[:, None, :] + rotated * sin[:, None, :]).reshape(T, heads * hd)

        x = rows("model.embed_tokens.weight", ids)
        for i in range(config["num_hidden_layers"]):
            b = f"model.layers.{i}."
            h = rms(x, b + "input_layernorm")
            q = rope(h @ w(b + "self_attn.q_proj.weight").T, H)
            k = rope(h @ w(b + "self_attn.k_proj.weight").T, KV)
            v = h @ w(b + "self_attn.v_proj.weight").T
            if KV != H:  # repeat_kv: each key/value head serves H/KV consecutive query heads
                k = k.view(T, KV, hd).repeat_interleave(H // KV, dim=1).reshape(T, H * hd)
                v = v.view(T, KV, hd).repeat_interleave(H // KV, dim=1).reshape(T, H * hd)
            x = x + attend(q, k, v, H, hd) @ w(b + "self_attn.o_proj.weight").T
            h = rms(x, b + "post_attention_layernorm")
            gate = F.silu(h @ w(b + "mlp.gate_proj.weight").T) * (h @ w(b + "mlp.up_proj.weight").T)
            before = x
            x = x + gate @ w(b + "mlp.down_proj.weight").T
            keep(i, before, gate, x, b + "mlp.down_proj.weight", True)
        head = "model.embed_tokens.weight" if config.get("tie_word_embeddings") else "lm_head.weight"
        final = lambda x: rms(x, "model.norm")
        logits = final(x[-1:]) @ w(head).T
    row = logits[0]
    top = torch.topk(row, 10)
    out = {"top": [[int(i), float(v)] for v, i in zip(top.values, top.indices)], "norm": float(row.norm())}
    if args.prompt_work:
        out.update(prompt_work(seen, w, final, head, int(top.indices[0])))
    out["wall_seconds"] = round(time.time() - start, 3)
    print(json.dumps(out))


def prompt_work(seen, w, final, head, target):
    """What `run --prompt` computes beyond the pass, the same arithmetic: the logit lens before and
    after layer N's FFN at every position (the top 10 of each and of the change), each unit's direct
    push toward the prediction at the last position (W2 · (γ ⊙ U[target]) / σ, centred for a
    LayerNorm), and the vocabulary view: every unit among each token's 10 that fired most, and
    each token's update, projected onto the unembedding, the top and bottom 10 of each. (The
    push's γ and σ are left out: they cost no product.)"""
    U = w(head)
    before, after, hidden = seen["before"], seen["after"], seen["hidden"]
    lens = torch.cat([final(before), final(after)]) @ U.T  # (2T, vocab)
    T = before.shape[0]
    change = lens[T:] - lens[:T]
    lens_top = [torch.topk(z, 10).indices for z in (lens[T - 1], lens[-1], change[-1], -change[-1])]
    name, transposed = seen["w2"]
    W2 = w(name).T if transposed else w(name)  # (d_ff, d)
    unit_push = W2 @ U[target]  # one dot product per unit, the arithmetic of the attribution
    fired = sorted({int(j) for t in range(T) for j in torch.topk(hidden[t], 10).indices if hidden[t, j] > 0})
    columns = torch.cat([W2[fired], after - before])  # (units + tokens, d)
    scores = columns @ U.T
    tops = torch.topk(scores, 10, dim=1).indices, torch.topk(-scores, 10, dim=1).indices
    return {"lens_last_after_top": [int(i) for i in lens_top[1]], "vocab_columns": len(columns),
            "unit_push_norm": float(unit_push.norm()), "vocab_first_top": [int(i) for i in tops[0][0]]}


if __name__ == "__main__":
    sys.exit(main())
