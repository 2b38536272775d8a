#!/usr/bin/env python3
"""Rewrites the top_units of tests/inputs/models/NAME_reference.json with the attribution that takes
the final LayerNorm as linear at the stream it reads, its centring included (as TransformerLens's
apply_ln_to_stack): score_j = a_j · (W2[j] · g) / σ, g = γ_f ⊙ U[t] less its mean. Computed in NumPy
float64 from data/models/NAME's safetensors alone (tests/locate/reference_model.py). The file's other
numbers are scripts/train_model.py's; the knock-out's units must stay the same five, which this
script checks (their ablated prediction was computed with them).

Usage: scripts/reference_unit_scores.py NAME…   (capitals, atlas)
"""
import json
import os
import sys

import numpy as np

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(root, "tests", "locate"))
from reference_model import gelu_new, layer_norm, model  # noqa: E402

for name in sys.argv[1:]:
    path = os.path.join(root, "tests", "inputs", "models", f"{name}_reference.json")
    doc = json.load(open(path))
    m = model(os.path.join(root, "data", "models", name))
    w, n = m.w, doc["fact_layer"]
    for p in doc["prompts"]:
        x = m.embed(p["token_ids"])[None]
        for l in range(n):
            x = x + m.attention(l, x)
            x = x + m.ffn(l, x)
        mid = (x + m.attention(n, x))[0, -1]
        a = gelu_new(layer_norm(mid, w[f"h.{n}.ln_2.weight"], w[f"h.{n}.ln_2.bias"], m.eps) @ w[f"h.{n}.mlp.c_fc.weight"]
                     + w[f"h.{n}.mlp.c_fc.bias"])
        y = mid + a @ w[f"h.{n}.mlp.c_proj.weight"] + w[f"h.{n}.mlp.c_proj.bias"]
        t = p["top_units"]["token"]
        g = w["ln_f.weight"] * m.embedding[t]
        g = g - g.mean()
        scores = a * (w[f"h.{n}.mlp.c_proj.weight"] @ g) / np.sqrt(y.var() + m.eps)
        units = np.argsort(-scores, kind="stable")[:5].tolist()
        old = [u["unit"] for u in p["top_units"]["units"]]
        if sorted(units) != sorted(old):
            sys.exit(f"{name}: {p['text']!r}: the top five are now {units}, were {old}: the knock-out must be recomputed")
        p["top_units"]["units"] = [{"unit": u, "score": float(scores[u])} for u in units]
        p["_doc"]["top_units"] = ("the 5 units of layer N with the largest score_j = a_j (W2[j] · g) / σ at the last "
                                  "position, g = γ_f ⊙ U[t] less its mean (ln_f's centring), t = the predicted token, "
                                  "σ = √(var + eps) of ln_f at the stream leaving layer N's FFN; largest first "
                                  "(scripts/reference_unit_scores.py, NumPy float64)")
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"{name}: top_units rewritten")
