#!/usr/bin/env python3
"""The expected numbers of transcoder_test.cpp, in NumPy float64: one batch of T = 5 tokens,
d = 3, F = 4 features, through a TopK transcoder (k = 2) and a ReLU one with an L1 penalty —
the forward pass, the loss, every gradient (checked here by central differences) and one Adam
step. Writes reference.json beside this script; run it again to regenerate.
"""
import json
import os

import numpy as np

rng = np.random.default_rng(57)
T, d, F = 5, 3, 4
x = rng.normal(size=(T, d))
y = rng.normal(size=(T, d))
W_enc = rng.normal(size=(F, d))  # circuit-tracer's layout: (features, d_model)
b_enc = rng.normal(size=F) * 0.3
W_dec = rng.normal(size=(F, d))
b_dec = rng.normal(size=d) * 0.3


def forward(p, k, l1):
    W_enc, b_enc, W_dec, b_dec = p
    pre = x @ W_enc.T + b_enc
    if k:
        keep = np.argsort(-pre, axis=1, kind="stable")[:, :k]  # ties: the lower index first
        z = np.zeros_like(pre)
        np.put_along_axis(z, keep, np.maximum(np.take_along_axis(pre, keep, 1), 0), 1)
    else:
        z = np.maximum(pre, 0)
    y_hat = z @ W_dec + b_dec
    mse = ((y_hat - y) ** 2).sum() / (T * d)
    return pre, z, y_hat, mse, mse + l1 * z.sum() / T


def gradients(p, k, l1):
    W_enc, b_enc, W_dec, b_dec = p
    pre, z, y_hat, mse, loss = forward(p, k, l1)
    dy = 2 * (y_hat - y) / (T * d)
    dW_dec = z.T @ dy
    db_dec = dy.sum(0)
    dz = dy @ W_dec.T + l1 / T
    dpre = np.where(z > 0, dz, 0.0)
    return [dpre.T @ x, dpre.sum(0), dW_dec, db_dec]


def numeric(p, k, l1, h=1e-6):
    out = []
    for i, a in enumerate(p):
        g = np.zeros_like(a)
        for j in np.ndindex(a.shape):
            up = [q.copy() for q in p]
            down = [q.copy() for q in p]
            up[i][j] += h
            down[i][j] -= h
            g[j] = (forward(up, k, l1)[4] - forward(down, k, l1)[4]) / (2 * h)
        out.append(g)
    return out


def adam(p, g, lr):
    # one step from m = v = 0, t = 1: m̂ = g, v̂ = g², θ − lr · ĝ / (|g| + ε)
    b1, b2, eps = 0.9, 0.999, 1e-8
    m = [(1 - b1) * gi for gi in g]
    v = [(1 - b2) * gi * gi for gi in g]
    return [pi - lr * (mi / (1 - b1)) / (np.sqrt(vi / (1 - b2)) + eps) for pi, mi, vi in zip(p, m, v)]


def case(k, l1, lr=0.01):
    p = [W_enc, b_enc, W_dec, b_dec]
    pre, z, y_hat, mse, loss = forward(p, k, l1)
    g = gradients(p, k, l1)
    for a, b in zip(g, numeric(p, k, l1)):
        assert np.allclose(a, b, atol=1e-7), (a, b)
    stepped = adam(p, g, lr)
    names = ["W_enc", "b_enc", "W_dec", "b_dec"]
    return {"k": k, "l1": l1, "lr": lr, "pre": pre.tolist(), "z": z.tolist(), "y_hat": y_hat.tolist(), "mse": mse, "loss": loss,
            "gradients": {n: a.tolist() for n, a in zip(names, g)}, "after_adam": {n: a.tolist() for n, a in zip(names, stepped)}}


out = {"x": x.tolist(), "y": y.tolist(), "W_enc": W_enc.tolist(), "b_enc": b_enc.tolist(), "W_dec": W_dec.tolist(),
       "b_dec": b_dec.tolist(), "cases": [case(2, 0.0), case(0, 0.05)]}
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference.json"), "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
