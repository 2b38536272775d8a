#!/usr/bin/env python3
"""The arithmetic a forward-pass bench case does, this machine's dgemm rate, and the time that
arithmetic takes at that rate (the limit), for scripts/bench_forward.sh.

    bench_limit.py CHECKPOINT_DIR TOKENS [--lens] [--vocab-columns N] [--wall SECONDS]

prints one line: the multiply-adds, the rate, the limit and, given ffn-trace's wall time, its
multiple of the limit.

Multiply-adds, counted from config.json's sizes for a prompt of TOKENS tokens through every
layer, then the final norm and the unembedding of the last position:
  per layer: q, k, v and o projections  T·d·(d + 2·d_kv + d)
             attention scores and mix   2·T²·d  (the full square: ffn-trace computes it whole)
             the FFN                    T·d·f·(2, or 3 when gated)
  head:      d·V for the last position; with --lens (run --prompt) 2·T·d·V more for the logit
             lens before and after layer N's FFN at every position, and d_ff·d for each unit's
             direct push toward the prediction (the attribution);
  the vocabulary view (run --prompt): N·d·V for the N vectors it projects onto the unembedding
             (--vocab-columns N: its units and its tokens' updates, as many as the JSON's "vocab"
             lists).
The rate is NumPy's dgemm on OpenBLAS (Debian's python3-numpy) on a product of 32 rows of the
model's width by a d × d matrix, the best of five, measured in this run; with --vocab-columns a
second line gives the limit with the vocabulary view at sgemm's rate on the same shapes, since
ffn-trace screens that product in float32."""
import json
import os
import sys
import time

import numpy as np


def rate(d, rows=32, repeats=5, dtype=np.float64):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((rows, d)).astype(dtype), rng.standard_normal((d, d)).astype(dtype)
    best = float("inf")
    for _ in range(repeats):
        n = max(1, int(2e9 / (rows * d * d)))  # about 2 G multiply-adds a timing
        start = time.perf_counter()
        for _ in range(n):
            a @ b
        best = min(best, (time.perf_counter() - start) / n)
    return rows * d * d / best  # multiply-adds per second


def multiply_adds(config, tokens, lens, columns=0):
    c, t = config, tokens
    d = c.get("n_embd") or c["hidden_size"]
    f = c.get("n_inner") or c.get("intermediate_size") or 4 * d
    layers = c.get("n_layer") or c["num_hidden_layers"]
    vocab = c["vocab_size"]
    heads = c.get("n_head") or c["num_attention_heads"]
    d_kv = d * c.get("num_key_value_heads", heads) // heads
    gated = c.get("model_type") in ("llama", "mistral", "qwen2", "mixtral")
    per_layer = t * d * (2 * d + 2 * d_kv) + 2 * t * t * d + t * d * f * (3 if gated else 2)
    head = d * vocab + (2 * t * d * vocab + f * d if lens else 0)
    return layers * per_layer + head + columns * d * vocab, d


def main():
    checkpoint, tokens, rest = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    lens = "--lens" in rest
    wall = rest[rest.index("--wall") + 1] if "--wall" in rest else "nan"
    columns = int(rest[rest.index("--vocab-columns") + 1]) if "--vocab-columns" in rest else 0
    config = json.load(open(os.path.join(checkpoint, "config.json")))
    macs, d = multiply_adds(config, tokens, lens, columns)
    r = rate(d)
    limit = macs / r
    multiple = "" if wall == "nan" else f"; ffn-trace {wall} s = {float(wall) / limit:.2f}× the limit"
    print(f"{os.path.basename(checkpoint.rstrip('/'))}: {macs / 1e9:.2f} G multiply-adds; dgemm here {2 * r / 1e9:.1f} "
          f"GFLOP/s (32 × {d} by {d} × {d}); limit {limit:.3f} s{multiple}")
    if columns:
        # ffn-trace screens the vocabulary view in float32 (sgemm) and scores only the few rows that
        # may be a column's top in double: that part's limit at sgemm's rate, the rest at dgemm's.
        view = columns * d * config["vocab_size"]
        rs = rate(d, dtype=np.float32)
        limit32 = (macs - view) / r + view / rs
        multiple = "" if wall == "nan" else f"; ffn-trace {float(wall) / limit32:.2f}× it"
        print(f"  the vocabulary view's {view / 1e9:.2f} G at sgemm's {2 * rs / 1e9:.1f} GFLOP/s, the rest at dgemm's: "
              f"limit {limit32:.3f} s{multiple}")


if __name__ == "__main__":
    main()
