#!/usr/bin/python3
"""The work of `ffn-trace transcoder train` as a plain PyTorch float64 loop, for scripts/bench_transcoder.sh.

    bench_transcoder_torch.py MODEL_DIR IDS_JSON LAYER FEATURES K EPOCHS FT_JSON

IDS_JSON holds the corpus's token ids (one list a text, as `ffn-trace tokenize` gives them). The
same data as ffn-trace's: x̂ = ln_2(x) and y = the FFN's output of the GPT-2 layer at every token,
made here by the NumPy float64 model of the tests (not timed: "setup"); then the same epochs, batch
256 shuffled each epoch, TopK (torch.topk, then max(0, ·)), the same loss and Adam (torch.optim.Adam,
lr 0.001), in float64 on every core. Prints one JSON line: the seconds torch's import took, the
setup, the work, and the difference between the last epoch's MSE here and FT_JSON's (the two start
from different random weights, so this is a sanity check, not an equality).
"""
import json
import os
import sys
import time

start = time.time()
import numpy as np  # noqa: E402
import torch  # noqa: E402

imported = time.time()
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "locate"))
from reference_model import layer_norm, model  # noqa: E402

model_dir, ids_json, layer, F, K, epochs, ft_json = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:7]), sys.argv[7]
torch.set_num_threads(os.cpu_count() or 1)
m = model(model_dir)
xs, ys = [], []
for ids in json.load(open(ids_json)):
    x = m.embed(np.array(ids))[None]
    for l in range(layer):
        x = x + m.attention(l, x)
        x = x + m.ffn(l, x)
    x = x + m.attention(layer, x)
    xs.append(layer_norm(x[0], m.w[f"h.{layer}.ln_2.weight"], m.w[f"h.{layer}.ln_2.bias"], m.eps))
    ys.append(m.ffn(layer, x)[0])
X, Y = torch.from_numpy(np.concatenate(xs)), torch.from_numpy(np.concatenate(ys))
T, d = X.shape
setup = time.time()

g = torch.Generator().manual_seed(0)
W_enc = torch.nn.functional.normalize(torch.randn(F, d, generator=g, dtype=torch.float64), dim=1).T.contiguous().requires_grad_()
W_dec = torch.nn.functional.normalize(torch.randn(F, d, generator=g, dtype=torch.float64), dim=1).requires_grad_()
b_enc = torch.zeros(F, dtype=torch.float64, requires_grad=True)
b_dec = Y.mean(0).clone().requires_grad_()
opt = torch.optim.Adam([W_enc, b_enc, W_dec, b_dec], lr=1e-3)
mse = []
for epoch in range(epochs):
    order = torch.randperm(T, generator=g)
    squares = 0.0
    for s in range(0, T, 256):
        rows = order[s:s + 256]
        xb, yb = X[rows], Y[rows]
        pre = xb @ W_enc + b_enc
        top = torch.topk(pre, K, dim=1)
        z = torch.zeros_like(pre).scatter(1, top.indices, torch.relu(top.values))
        err = z @ W_dec + b_dec - yb
        loss = (err * err).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        squares += float(loss) * err.numel()
    mse.append(squares / (T * d))
done = time.time()
ft = json.load(open(ft_json))
print(json.dumps({"import_seconds": imported - start, "setup_seconds": setup - imported, "work_seconds": done - setup,
                  "max_difference": abs(mse[-1] - ft["epochs"][-1]["mse"]), "tokens": T, "mse": mse[-1], "ft_mse": ft["epochs"][-1]["mse"]}))
