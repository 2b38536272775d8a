#!/usr/bin/python3
"""Causal tracing written plainly in PyTorch float64, for the benchmark (scripts/bench_locate.sh).

    bench_locate.py CHECKPOINT_DIR LOCATE_JSON

Reads a GPT-2 checkpoint's config.json and model.safetensors itself, and from LOCATE_JSON (what
`ffn-trace locate --format json` wrote) the prompt's ids, the subject's positions, the target, the
noise's scale and draws ε and the window, so that both routes run the very same causal tracing.
Then, as ROME's calculate_hidden_flow does: the clean run, the S corrupted runs as one batch, and
for each kind (state, mlp, attn), layer and token the whole batch run again from the embeddings
with the clean values put back by forward hooks. Prints one JSON line: the seconds the import of
torch took, the seconds of the tracing, and the largest difference from LOCATE_JSON's
probabilities. Writes nothing.
"""

import json
import os
import sys
import time

start = time.time()
import torch  # noqa: E402

from bench_weights import tensors  # noqa: E402

imported = time.time()


def main():
    directory, located = sys.argv[1:3]
    torch.set_num_threads(os.cpu_count() or 1)
    c = json.load(open(os.path.join(directory, "config.json")))
    w = tensors(directory)
    got = json.load(open(located))
    L, d, H, eps = c["n_layer"], c["n_embd"], c["n_head"], c.get("layer_norm_epsilon", 1e-5)
    ids = got["prompt"]["token_ids"]
    T, hd = len(ids), d // H
    positions, target, window = got["subject"]["positions"], got["target"]["id"], got["window"]
    noise = got["noise"]["scale"] * torch.tensor(got["noise"]["samples"], dtype=torch.float64)
    S = noise.shape[0]
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
    traced = time.time()

    def ln(x, name):
        return torch.nn.functional.layer_norm(x, (d,), w[name + ".weight"], w[name + ".bias"], eps)

    def attn(l, x):  # x (B, T, d) -> attention's output (B, T, d)
        qkv = ln(x, f"h.{l}.ln_1") @ w[f"h.{l}.attn.c_attn.weight"] + w[f"h.{l}.attn.c_attn.bias"]
        q, k, v = (t.reshape(x.shape[0], T, H, hd).transpose(1, 2) for t in qkv.split(d, dim=-1))
        a = torch.softmax(q @ k.transpose(-1, -2) / hd ** 0.5 + mask, dim=-1) @ v
        return a.transpose(1, 2).reshape(x.shape[0], T, d) @ w[f"h.{l}.attn.c_proj.weight"] + w[f"h.{l}.attn.c_proj.bias"]

    def mlp(l, x):
        h = ln(x, f"h.{l}.ln_2") @ w[f"h.{l}.mlp.c_fc.weight"] + w[f"h.{l}.mlp.c_fc.bias"]
        return torch.nn.functional.gelu(h, approximate="tanh") @ w[f"h.{l}.mlp.c_proj.weight"] + w[f"h.{l}.mlp.c_proj.bias"]

    def run(x, restore=None, clean=None):
        """P(target) at the last token, the batch's mean; and every sublayer's output and state."""
        kept = {"attn": [], "mlp": [], "state": []}
        for l in range(L):
            here = restore is not None and restore[1][0] <= l < restore[1][1]
            a = attn(l, x)
            if here and restore[0] == "attn":
                a[:, restore[2]] = clean["attn"][l][0, restore[2]]
            x = x + a
            m = mlp(l, x)
            if here and restore[0] == "mlp":
                m[:, restore[2]] = clean["mlp"][l][0, restore[2]]
            x = x + m
            if here and restore[0] == "state":
                x[:, restore[2]] = clean["state"][l][0, restore[2]]
            kept["attn"].append(a)
            kept["mlp"].append(m)
            kept["state"].append(x)
        logits = ln(x[:, -1], "ln_f") @ w["wte.weight"].T
        return torch.softmax(logits, dim=-1)[:, target].mean().item(), kept

    with torch.no_grad():
        x0 = (w["wte.weight"][ids] + w["wpe.weight"][:T]).unsqueeze(0)
        p_clean, clean = run(x0)
        corrupted = x0.repeat(S, 1, 1)
        corrupted[:, positions] += noise
        p_corrupted, _ = run(corrupted)
        worst = max(abs(p_clean - got["clean_prob"]), abs(p_corrupted - got["corrupted_prob"]))
        for kind in ("state", "mlp", "attn"):
            for l in range(L):
                span = (max(0, l - window // 2), min(L, l + (window + 1) // 2))
                for t in range(T):
                    p, _ = run(corrupted, (kind, span, t), clean)
                    worst = max(worst, abs(p - got["grids"][kind]["value"][l][t]))
    done = time.time()
    print(json.dumps({"import_seconds": round(imported - start, 3), "setup_seconds": round(traced - imported, 3),
                      "work_seconds": round(done - traced, 3), "max_difference": worst}))


main()
