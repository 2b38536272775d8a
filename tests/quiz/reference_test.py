#!/usr/bin/env python3
"""`ffn-trace quiz --checkpoint` on the shipped model against GPT-2 written plainly in NumPy float64.

For each layer and seed the tool's JSON gives the prompt's token ids, the token it predicts and
its questions; this script reads the safetensors itself, runs the model its own way (Hugging
Face's GPT-2 as the specification) and works every answer out again: a unit's score and its
GELU, a unit's direct push a · (W2[j] · g) / σ (g = γ ⊙ U less its mean), the unit that pushes most, the token a
value vector promotes most (W2[j] · g_t for every token t, g_t = γ ⊙ E[t] less its mean), the probability with units knocked out (the model run
again with their activations 0 at every token) and the layer whose FFN pushes most.

Usage: reference_test.py FFN_TRACE MODEL_DIR   (exit 77 without numpy)
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from safetensors_numpy import read_safetensors  # noqa: E402

ft, model_dir = sys.argv[1:3]
failures = []


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def softmax(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def gelu_new(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


w = read_safetensors(os.path.join(model_dir, "model.safetensors"))
config = json.load(open(os.path.join(model_dir, "config.json")))
L, heads, eps = config["n_layer"], config["n_head"], config["layer_norm_epsilon"]
E = w["wte.weight"]  # tied: the unembedding is the token embedding


def attention(l, x):
    h = layer_norm(x, w[f"h.{l}.ln_1.weight"], w[f"h.{l}.ln_1.bias"], eps)
    q, k, v = np.split(h @ w[f"h.{l}.attn.c_attn.weight"] + w[f"h.{l}.attn.c_attn.bias"], 3, axis=-1)
    T, d = x.shape
    hd = d // heads
    q, k, v = (a.reshape(T, heads, hd).transpose(1, 0, 2) for a in (q, k, v))
    scores = q @ k.transpose(0, 2, 1) / math.sqrt(hd)
    scores = np.where(np.tri(T, dtype=bool), scores, -np.inf)
    o = (softmax(scores) @ v).transpose(1, 0, 2).reshape(T, d)
    return o @ w[f"h.{l}.attn.c_proj.weight"] + w[f"h.{l}.attn.c_proj.bias"]


def run(ids, knocked=None):
    """Every layer's states: normed FFN input, score, activation, stream after the FFN; the last
    position's probabilities. knocked = (layer, units): their activations set to 0 at every token."""
    x = E[ids] + w["wpe.weight"][: len(ids)]
    states = []
    for l in range(L):
        x = x + attention(l, x)
        normed = layer_norm(x, w[f"h.{l}.ln_2.weight"], w[f"h.{l}.ln_2.bias"], eps)
        pre = normed @ w[f"h.{l}.mlp.c_fc.weight"] + w[f"h.{l}.mlp.c_fc.bias"]
        act = gelu_new(pre)
        if knocked and knocked[0] == l:
            act[:, knocked[1]] = 0
        x = x + act @ w[f"h.{l}.mlp.c_proj.weight"] + w[f"h.{l}.mlp.c_proj.bias"]
        states.append({"normed": normed, "pre": pre, "act": act, "post": x.copy()})
    logits = layer_norm(x[-1], w["ln_f.weight"], w["ln_f.bias"], eps) @ E.T
    return states, softmax(logits), logits


def pushes(state, l, target):
    """Every unit's a · (W2[j] · g) / σ (g = γ ⊙ U less its mean) at the last token, σ of the stream leaving layer l's FFN."""
    last = state["post"][-1]
    sigma = math.sqrt(((last - last.mean()) ** 2).mean() + eps)
    g = w["ln_f.weight"] * E[target]
    g = g - g.mean()  # the final LayerNorm centres what it reads: a write c counts as (c − c̄) · g
    dots = w[f"h.{l}.mlp.c_proj.weight"] @ g
    return state["act"][-1] * dots / sigma, dots, sigma


def close(name, got, want, tol=1e-7):
    if not abs(got - want) <= tol:
        failures.append(f"{name}: {got!r}, the reference's {want!r} (tolerance {tol})")


def check(layer, seed):
    name = f"layer {layer} seed {seed}"
    out = subprocess.run([ft, "quiz", "--checkpoint", model_dir, "--layer", str(layer), "--prompt",
                          "The capital of France is", "--seed", str(seed), "--format", "json"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        failures.append(f"{name}: exit {out.returncode}: {out.stderr.strip()}")
        return set()
    got = json.loads(out.stdout)
    ids = got["token_ids"]
    states, probs, logits = run(ids)
    target = int(np.argmax(logits))
    close(f"{name}: the target", got["target"]["id"], target, 0)
    push, dots, sigma = pushes(states[layer], layer, target)
    kinds = set()
    for i, q in enumerate(got["questions"]):
        k, t, units = q["kind"], q["token"], q["units"]
        kinds.add(k)
        where = f"{name}: question {i + 1} ({k})"
        if k == "expand":
            close(where, q["answer"], states[layer]["pre"][t, units[0]])
        elif k == "activate":
            close(where, q["answer"], states[layer]["act"][t, units[0]])
        elif k == "push":
            close(where, q["answer"], push[units[0]])
            close(where + " a", float(q["given"][0].split(" = ")[1].split()[0]), round(states[layer]["act"][-1, units[0]], 4), 0)
            close(where + " W2[j] · g", float(q["given"][1].split(" = ")[1]), round(dots[units[0]], 4), 0)
            close(where + " σ", float(q["given"][2].split(" = ")[1]), round(sigma, 4), 0)
        elif k == "top-unit":
            close(where, q["answer"], int(np.argmax(push)), 0)
            if int(np.argmax(push)) not in q["choices"]:
                failures.append(f"{where}: the answer is not among the choices")
        elif k == "vocabulary":
            g = w["ln_f.weight"][:, None] * E.T  # (d, vocab): γ ⊙ E[t] for every token t
            scores = w[f"h.{layer}.mlp.c_proj.weight"][units[0]] @ (g - g.mean(0, keepdims=True))
            chosen = q["choices"][int(q["answer"]) - 1]
            close(where, chosen, int(np.argmax(scores)), 0)
        elif k == "knock-out":
            # the answer is the estimate from the direct pushes alone; the model run again is given beside it
            p = run(ids, (layer, units))[1][target]
            close(where + ": the model run again", q["model_run_again"], p, 1e-9)
            delta = push[units].sum()
            kept = probs[target] * math.exp(-delta)
            close(where, q["answer"], kept / (1 - probs[target] + kept), 1e-9)
        elif k == "layers":
            totals = [pushes(states[l], l, target)[0].sum() for l in range(L)]
            close(where, q["answer"], int(np.argmax(totals)), 0)
        else:
            failures.append(f"{where}: a kind the reference does not know")
    return kinds


kinds = set()
for layer in range(L):
    for seed in (1, 2, 3, 4, 5):
        kinds |= check(layer, seed)
every = {"top-unit", "expand", "activate", "push", "vocabulary", "knock-out", "layers"}
if kinds != every:
    failures.append(f"asked {sorted(kinds)}, not every kind {sorted(every)}")
for f in failures:
    print("FAILED:", f)
if failures:
    sys.exit(1)
print(f"quiz OK: {L} layers × 5 seeds, every answer within 1e-7 of NumPy float64")
