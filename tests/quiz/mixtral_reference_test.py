#!/usr/bin/env python3
"""`ffn-trace quiz --checkpoint` on a tiny Mixtral against the NumPy float64 Mixtral of
tests/locate/reference_model.py (Hugging Face's modelling code as the specification).

A mixture's units are E:J, unit J of expert E, and each one's direct push is w · a · (W2[j] · g) / σ
with w its expert's routing weight at the last token (the router's softmax over the top k,
renormalised). For each layer and seed this script works every answer out again: a unit's gate
score and its SiLU in the expert named, the push and the numbers it gives, the unit that pushes
most (answered by its place among the options), the token its value vector promotes most (when
the model's 8 tokens leave four options apart), the probability with units knocked out (their
activations 0 at every token) and the layer whose FFN pushes most.

Usage: mixtral_reference_test.py FFN_TRACE MODEL_DIR   (exit 77 without numpy)
"""
import json
import math
import os
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    print("skipped: no numpy (scripts/install-deps.sh installs python3-numpy)")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "locate"))
import reference_model as R  # noqa: E402

ft, model_dir = sys.argv[1:3]
m = R.model(model_dir)
ff = m.w["layers.0.block_sparse_moe.experts.0.w2.weight"].shape[1]
failures = []


def run(ids, knocked=None):
    """Each layer's normed FFN input, its units (experts side by side, 0 where not chosen) and the
    streams around its FFN; the probabilities at the last token. knocked = (layer, columns)."""
    m.kept_units = {}
    m.units = {l: (lambda a: a) for l in range(m.L)}
    if knocked:
        def zero(a, cols=knocked[1]):
            a = a.copy()
            a[..., cols] = 0
            return a
        m.units[knocked[0]] = zero
    x = m.embed(ids)[None]
    states = []
    for l in range(m.L):
        x = x + m.attention(l, x)
        normed = R.rms_norm(x[0], m.w[f"layers.{l}.post_attention_layernorm.weight"], m.eps)
        x = x + m.ffn(l, x)
        states.append({"normed": normed, "post": x[0].copy()})
    for l in range(m.L):
        states[l]["units"] = m.kept_units[l][0]
    return states, m.last_probs(x)[0]


def routing_weight(normed, l, e):
    probs = R.softmax(normed @ m.w[f"layers.{l}.block_sparse_moe.gate.weight"].T)
    chosen = np.argsort(-probs, kind="stable")[: m.top_k]
    return probs[e] / probs[chosen].sum() if e in chosen else 0.0


def push(states, l, target, e, j):
    """w · a · (W2[j] · g) / σ at the last token, with its factors: g = γ ⊙ U, σ of the stream leaving the FFN."""
    s = states[l]
    w = routing_weight(s["normed"][-1], l, e)
    a = s["units"][-1, e * ff + j]
    dot = m.w[f"layers.{l}.block_sparse_moe.experts.{e}.w2.weight"][:, j] @ (m.w["norm.weight"] * m.head[target])
    sigma = np.sqrt((s["post"][-1] ** 2).mean() + m.eps)
    return w * a * dot / sigma, w, a, dot, sigma


def close(name, got, want, tol=1e-7):
    if not abs(got - want) <= tol:
        failures.append(f"{name}: {got!r}, the reference's {want!r} (tolerance {tol})")


def given(q, i):
    """The number after " = " on line i of what the question gives."""
    return float(q["given"][i].split(" = ")[1].split()[0])


def check(layer, seed):
    name = f"layer {layer} seed {seed}"
    out = subprocess.run([ft, "quiz", "--checkpoint", model_dir, "--layer", str(layer), "--prompt", "abcde", "--seed", str(seed),
                          "--format", "json"], capture_output=True, text=True)
    if out.returncode != 0:
        failures.append(f"{name}: exit {out.returncode}: {out.stderr.strip()}")
        return set()
    got = json.loads(out.stdout)
    ids = got["token_ids"]
    states, probs = run(ids)
    target = int(np.argmax(probs))
    close(f"{name}: the target", got["target"]["id"], target, 0)
    kinds = set()
    for i, q in enumerate(got["questions"]):
        k, t, units, experts = q["kind"], q["token"], q["units"], q.get("experts", [])
        kinds.add(k)
        where = f"{name}: question {i + 1} ({k})"
        if len(experts) != len(units):
            failures.append(f"{where}: {len(units)} units but {len(experts)} experts")
            continue
        if k in ("gate", "activate"):
            e, j = experts[0], units[0]
            if routing_weight(states[layer]["normed"][t], layer, e) == 0:
                failures.append(f"{where}: token {t} did not choose expert {e}")
            gate = states[layer]["normed"][t] @ m.w[f"layers.{layer}.block_sparse_moe.experts.{e}.w1.weight"][j]
            close(where, q["answer"], gate if k == "gate" else R.silu(gate))
        elif k == "push":
            p, w, a, dot, sigma = push(states, layer, target, experts[0], units[0])
            close(where, q["answer"], p)
            for line, want in ((0, a), (1, dot), (2, sigma), (3, w)):
                close(f"{where} given[{line}]", given(q, line), round(want, 4), 0)
        elif k == "top-unit":
            pushes = [push(states, layer, target, e, j)[0] for j, e in zip(units, experts)]
            close(where, q["answer"], 1 + int(np.argmax(pushes)), 0)
            every = [push(states, layer, target, e, j)[0] for e in range(len(m.w[f"layers.{layer}.block_sparse_moe.gate.weight"]))
                     for j in range(ff)]
            close(where + ": the best of the layer", max(pushes), max(every), 1e-12)
        elif k == "vocabulary":
            g = m.w["norm.weight"][:, None] * m.head.T  # (d, vocab): γ ⊙ U[t] for every token t, an RMSNorm's: no centring
            scores = m.w[f"layers.{layer}.block_sparse_moe.experts.{experts[0]}.w2.weight"][:, units[0]] @ g
            close(where, q["choices"][int(q["answer"]) - 1], int(np.argmax(scores)), 0)
        elif k == "knock-out":
            # the answer is the estimate from the direct pushes alone; the model run again is given beside it
            p = run(ids, (layer, [e * ff + j for j, e in zip(units, experts)]))[1][target]
            close(where + ": the model run again", q["model_run_again"], p, 1e-9)
            delta = sum(push(states, layer, target, e, j)[0] for j, e in zip(units, experts))
            kept = probs[target] * math.exp(-delta)
            close(where, q["answer"], kept / (1 - probs[target] + kept), 1e-9)
        elif k == "layers":
            n_experts = len(m.w["layers.0.block_sparse_moe.gate.weight"])
            totals = [sum(push(states, l, target, e, j)[0] for e in range(n_experts) for j in range(ff)) for l in range(m.L)]
            close(where, q["answer"], int(np.argmax(totals)), 0)
        else:
            failures.append(f"{where}: a kind the reference does not know")
    return kinds


kinds = set()
for layer in range(m.L):
    for seed in (1, 2, 3, 4, 5):
        kinds |= check(layer, seed)
every = {"top-unit", "gate", "activate", "push", "vocabulary", "knock-out", "layers"}
if kinds != every:
    failures.append(f"asked {sorted(kinds)}, not every kind {sorted(every)}")
for f in failures:
    print("FAILED:", f)
if failures:
    sys.exit(1)
print(f"quiz OK: a Mixtral's {m.L} layers × 5 seeds, every answer within 1e-7 of NumPy float64")
