#!/usr/bin/env python3
"""`ffn-trace run --prompt`'s attribution and its reconciliation with the logit lens, against NumPy
float64 on the shipped GPT-2 models, computed here from the safetensors alone.

At the last token of layer N, with x the stream entering the FFN (resid_mid), y = x + ffn(x), a the
values fed to W2 and the final LayerNorm taken as linear at y (its centring included):
  g = γ_f ⊙ (U[target] − U[versus]) − mean,   score_j = a_j · (W2[j] · g) / σ(y)
and the lens's change of the target's logit (or of target − versus), read from the softmax-free
logits LN_f(y)·Uᵀ − LN_f(x)·Uᵀ, must equal Σ_j score_j + b2 · g / σ(y) + x · g · (1/σ(y) − 1/σ(x)).
Every one of these is checked against the tool's JSON, and the tool's top units against NumPy's
ranking.

Usage: attribution_reference_test.py FFN_TRACE DATA_DIR   (exit 77 without numpy)
"""
import json
import os
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    print("skipped: no numpy (scripts/install-deps.sh installs python3-numpy)")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "locate"))
from reference_model import gelu_new, layer_norm, model  # noqa: E402

ft, data = sys.argv[1:3]
failures = []


def close(name, got, want, tol=1e-9):
    if abs(got - want) > tol * max(1.0, abs(want)):
        failures.append(f"{name}: ffn-trace {got!r}, NumPy {want!r}")


def sigma(v, eps):
    return np.sqrt(((v - v.mean()) ** 2).mean() + eps)


def check(directory, prompt, layer, versus=None):
    args = [ft, "run", "--checkpoint", directory, "--layer", str(layer), "--prompt", prompt, "--format", "json"]
    if versus:
        args += ["--versus", versus]
    got = json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)
    m = model(directory)
    w = m.w
    ids = got["prompt"]["token_ids"]
    x = m.embed(ids)[None]
    for l in range(layer):
        x = x + m.attention(l, x)
        x = x + m.ffn(l, x)
    mid = x + m.attention(layer, x)
    xs = mid[0, -1]
    h = layer_norm(xs, w[f"h.{layer}.ln_2.weight"], w[f"h.{layer}.ln_2.bias"], m.eps)
    a = gelu_new(h @ w[f"h.{layer}.mlp.c_fc.weight"] + w[f"h.{layer}.mlp.c_fc.bias"])
    W2, b2 = w[f"h.{layer}.mlp.c_proj.weight"], w[f"h.{layer}.mlp.c_proj.bias"]
    ys = xs + a @ W2 + b2
    at = got["attribution"]
    target = at["target"]["id"]
    u = m.embedding[target].copy()
    if versus:
        u -= m.embedding[at["versus"]["id"]]
    g = w["ln_f.weight"] * u
    g -= g.mean()
    sx, sy = sigma(xs, m.eps), sigma(ys, m.eps)
    scores = a * (W2 @ g) / sy
    lens = lambda v: layer_norm(v, w["ln_f.weight"], w["ln_f.bias"], m.eps) @ u
    case = f"{os.path.basename(directory)} layer {layer} {prompt!r}{' versus ' + repr(versus) if versus else ''}"
    terms = at["lens_terms"]
    close(case + ": the lens's change", terms["lens_change"], lens(ys) - lens(xs))
    close(case + ": the units' push", terms["units"], scores.sum())
    close(case + ": total", at["total"], scores.sum())
    close(case + ": b2", terms["bias"], b2 @ g / sy)
    close(case + ": the rescaling", terms["rescale"], xs @ g * (1 / sy - 1 / sx))
    close(case + ": sigma before", terms["sigma_before"], sx)
    close(case + ": sigma after", terms["sigma_after"], sy)
    close(case + ": the terms add up", terms["units"] + terms["bias"] + terms["rescale"], lens(ys) - lens(xs))
    order = np.argsort(-scores, kind="stable")
    for k, e in enumerate(at["units"]):
        if e["unit"] != order[k]:
            failures.append(f"{case}: unit {k + 1} is {e['unit']}, NumPy's is {order[k]}")
        close(f"{case}: unit {e['unit']}'s score", e["score"], scores[e["unit"]])
        close(f"{case}: unit {e['unit']}'s activation", e["activation"], a[e["unit"]])


capitals = os.path.join(data, "models", "capitals")
atlas = os.path.join(data, "models", "atlas")
for layer in range(2):
    check(capitals, "The capital of France is", layer)
check(capitals, "The capital of France is", 0, versus=" Tokyo")
n_layers = json.load(open(os.path.join(atlas, "config.json")))["n_layer"]
prompt = open(os.path.join(atlas, "corpus.txt")).readline().split()
prompt = " ".join(prompt[:-1])
for layer in range(n_layers):
    check(atlas, prompt, layer)
check(atlas, prompt, n_layers - 1, versus=" the")

for f in failures:
    print(f)
print(f"{len(failures)} failure(s)" if failures else "every attribution and lens term equals NumPy float64's")
sys.exit(1 if failures else 0)
