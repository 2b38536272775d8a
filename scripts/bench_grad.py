#!/usr/bin/python3
"""grad --prompt's forward and backward written plainly in PyTorch float64 autograd, for the
benchmark (scripts/bench_grad.sh).

    bench_grad.py CHECKPOINT_DIR GRAD_JSON LAYER PROMPT

Reads a GPT-2 checkpoint's config.json and model.safetensors itself (every weight converted to
float64, as model.double() holds a model), the prompt's ids from its vocab.json (the bench's
vocabulary has no merges: each byte is a token, through GPT-2's byte-to-unicode table), and from
GRAD_JSON (what `ffn-trace grad --checkpoint ... --prompt ... --format json` wrote) the target's
id and its position.
Then one forward pass of the whole model with layer N's FFN weights and its output as leaves of
the graph, the loss L = −log p(target) at that position, and loss.backward(): the upstream
dL/d(FFN output) and dL/dW1, dL/db1, dL/dW2, dL/db2 of layer N. Prints one JSON line: the seconds
the import of torch took, reading the weights, and the forward and backward; and the largest
relative difference from GRAD_JSON's loss, upstream and weight gradients. Writes nothing.
"""

import json
import os
import sys
import time

start = time.time()
import torch  # noqa: E402

from bench_weights import tensors  # noqa: E402

imported = time.time()


def token_ids(directory, text):
    """Each byte of the text as its token: GPT-2's byte-to-unicode character, looked up in vocab.json."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, n = {}, 0
    for b in range(256):
        table[b] = chr(b) if b in keep else chr(256 + n)
        n += b not in keep
    vocab = json.load(open(os.path.join(directory, "vocab.json"), encoding="utf-8"))
    return [vocab[table[b]] for b in text.encode("utf-8")]


def relative(a, b):
    """The largest |a − b| over the largest |b|: how far a is from b, relative to b's scale."""
    a, b = torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64)
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-300))


def main():
    directory, graded, N, prompt = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    torch.set_num_threads(os.cpu_count() or 1)
    c = json.load(open(os.path.join(directory, "config.json")))
    w = tensors(directory)
    got = json.load(open(graded))
    L, d, H, eps = c["n_layer"], c["n_embd"], c["n_head"], c.get("layer_norm_epsilon", 1e-5)
    ids = token_ids(directory, prompt)
    T, hd = len(ids), d // H
    target, position = got["target"]["ids"][0], got["target"]["position"]
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
    ready = time.time()

    # Layer N's FFN weights are the leaves whose gradients the backward pass fills.
    leaves = {k: w[f"h.{N}.mlp.{k}"].clone().requires_grad_(True)
              for k in ("c_fc.weight", "c_fc.bias", "c_proj.weight", "c_proj.bias")}

    def ln(x, name):
        return torch.nn.functional.layer_norm(x, (d,), w[name + ".weight"], w[name + ".bias"], eps)

    def attn(l, x):
        qkv = ln(x, f"h.{l}.ln_1") @ w[f"h.{l}.attn.c_attn.weight"] + w[f"h.{l}.attn.c_attn.bias"]
        q, k, v = (t.reshape(T, H, hd).transpose(0, 1) for t in qkv.split(d, dim=-1))
        a = torch.softmax(q @ k.transpose(-1, -2) / hd ** 0.5 + mask, dim=-1) @ v
        return a.transpose(0, 1).reshape(T, d) @ w[f"h.{l}.attn.c_proj.weight"] + w[f"h.{l}.attn.c_proj.bias"]

    def mlp(l, x):
        p = leaves if l == N else {k: w[f"h.{l}.mlp.{k}"] for k in leaves}
        h = ln(x, f"h.{l}.ln_2") @ p["c_fc.weight"] + p["c_fc.bias"]
        return torch.nn.functional.gelu(h, approximate="tanh") @ p["c_proj.weight"] + p["c_proj.bias"]

    x = w["wte.weight"][ids] + w["wpe.weight"][:T]
    for l in range(L):
        x = x + attn(l, x)
        m = mlp(l, x)
        if l == N:
            m.retain_grad()
            upstream = m
        x = x + m
    logits = ln(x[position], "ln_f") @ w["wte.weight"].T
    loss = -torch.log_softmax(logits, dim=-1)[target]
    loss.backward()
    done = time.time()

    g = got["gradients"]
    worst = {"loss": abs(loss.item() - got["loss"]) / abs(got["loss"]),
             "upstream": relative(upstream.grad, got["upstream"]),
             "W1": relative(leaves["c_fc.weight"].grad, g["W1"]), "b1": relative(leaves["c_fc.bias"].grad, g["b1"]),
             "W2": relative(leaves["c_proj.weight"].grad, g["W2"]), "b2": relative(leaves["c_proj.bias"].grad, g["b2"])}
    print(json.dumps({"import_seconds": round(imported - start, 3), "setup_seconds": round(ready - imported, 3),
                      "work_seconds": round(done - ready, 3), "loss": loss.item(), "max_difference": max(worst.values()),
                      "differences": worst}))


main()
