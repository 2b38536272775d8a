#!/usr/bin/python3
"""MEMIT written plainly in PyTorch float64, for the benchmark (scripts/bench_edit.sh).

    bench_edit.py CHECKPOINT_DIR FACTS CORPUS FIRST LAST EDIT_JSON

The same algorithm as `ffn-trace edit --facts --layers FIRST-LAST` on a GPT-2 checkpoint whose
vocabulary is its bytes (scripts/bench_byte_vocab.py: token id = byte): for each fact, δ added to
layer LAST's FFN output at the subject's last token, found by Adam (learning rate 0.5, 20 passes at
most, the last without a step, stopping below a loss of 0.05) on −log p(target) + 0.0625 KL(p_δ ‖
p_0) on "SUBJECT is a" + 0.5 ‖δ‖ / ‖v₀‖², ‖δ‖ clamped to 4 ‖v₀‖; z = h + δ at layer LAST's output;
C = (1/N) Σ k kᵀ over the corpus, λ = 10⁻³ of its mean diagonal; then for each layer the keys and
streams of the model updated so far, R = (z − h) / (layers left), ΔW = (C + λI + KᵀK)⁻¹ KᵀR; and
each fact's p(target) after. Prints one JSON line: the import's, the weights' and the work's
seconds, and the largest difference of p(target) after from EDIT_JSON's. Writes nothing.
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
    directory, facts_file, corpus_file, first, last, edited = sys.argv[1:7]
    first, last = int(first), int(last)
    torch.set_num_threads(os.cpu_count() or 1)
    c = json.load(open(os.path.join(directory, "config.json")))
    w = tensors(directory)
    loaded = time.time()
    L, d, H, eps = c["n_layer"], c["n_embd"], c["n_head"], c.get("layer_norm_epsilon", 1e-5)
    hd = d // H

    def ln(x, name):
        return torch.nn.functional.layer_norm(x, (d,), w[name + ".weight"], w[name + ".bias"], eps)

    def block(l, x, updates, post_out=None):
        T = x.shape[0]
        qkv = ln(x, f"h.{l}.ln_1") @ w[f"h.{l}.attn.c_attn.weight"] + w[f"h.{l}.attn.c_attn.bias"]
        q, k, v = (t.reshape(T, H, hd).transpose(0, 1) for t in qkv.split(d, dim=-1))
        mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
        a = (torch.softmax(q @ k.transpose(-1, -2) / hd ** 0.5 + mask, dim=-1) @ v).transpose(0, 1).reshape(T, d)
        x = x + a @ w[f"h.{l}.attn.c_proj.weight"] + w[f"h.{l}.attn.c_proj.bias"]
        post = torch.nn.functional.gelu(ln(x, f"h.{l}.ln_2") @ w[f"h.{l}.mlp.c_fc.weight"] + w[f"h.{l}.mlp.c_fc.bias"],
                                        approximate="tanh")
        if post_out is not None:
            post_out[l] = post
        W2 = w[f"h.{l}.mlp.c_proj.weight"] + updates.get(l, 0)
        return x + post @ W2 + w[f"h.{l}.mlp.c_proj.bias"]

    def run(ids, upto, updates=None, posts=None):
        x = w["wte.weight"][ids] + w["wpe.weight"][: len(ids)]
        for l in range(upto + 1):
            x = block(l, x, updates or {}, posts)
        return x

    def head(x):
        return torch.log_softmax(ln(x[-1], "ln_f") @ w["wte.weight"].T, -1)

    def tail(x, start, updates=None):
        for l in range(start, L):
            x = block(l, x, updates or {})
        return head(x)

    facts = [line.rstrip("\n").split("\t") for line in open(facts_file) if line.strip()]
    corpus = [line.rstrip("\n") for line in open(corpus_file) if line.strip()]
    ids_of = lambda text: list(text.encode())

    def value(prompt, subject, target):
        """δ by Adam as ROME's compute_v, at the subject's last token of layer `last`."""
        ids, pos = ids_of(prompt), prompt.index(subject) + len(subject) - 1
        kl_text = subject + " is a"
        kl_ids, kl_pos = ids_of(kl_text), len(subject) - 1
        posts = {}
        x = run(ids, last, None, posts)  # the stream after layer `last`
        key = posts[last][pos]
        v0 = key @ w[f"h.{last}.mlp.c_proj.weight"]
        kx = run(kl_ids, last)
        log_p0 = tail(kx, last + 1)
        scale = 0.5 / (v0.norm() ** 2)
        delta = torch.zeros(d, dtype=torch.float64, requires_grad=True)
        opt = torch.optim.Adam([delta], lr=0.5)
        for step in range(20):
            opt.zero_grad()
            one = torch.zeros_like(x)
            one[pos] = 1
            nll = -tail(x + one * delta, last + 1)[target]
            kone = torch.zeros_like(kx)
            kone[kl_pos] = 1
            lp = tail(kx + kone * delta, last + 1)
            kl = 0.0625 * (lp.exp() * (lp - log_p0)).sum()
            loss = nll + kl + scale * delta.norm()
            if loss.item() < 0.05 or step == 19:
                break
            loss.backward()
            opt.step()
            with torch.no_grad():
                most = 4 * v0.norm()
                if delta.norm() > most:
                    delta.mul_(most / delta.norm())
        return ids, pos, x[pos].detach() + delta.detach()

    zs, where = [], []
    for prompt, subject, target in facts:
        ids, pos, z = value(prompt, subject, ord(target))
        zs.append(z)
        where.append((ids, pos))
    Z = torch.stack(zs)
    moments, count = {l: 0 for l in range(first, last + 1)}, 0
    with torch.no_grad():
        for text in corpus:
            posts = {}
            run(ids_of(text), last, None, posts)
            for l in moments:
                moments[l] = moments[l] + posts[l].T @ posts[l]
            count += len(text.encode())
        updates = {}
        for l in range(first, last + 1):
            K, Hs = [], []
            for ids, pos in where:
                posts = {}
                x = run(ids, last, updates, posts)
                K.append(posts[l][pos])
                Hs.append(x[pos])
            K, Hs = torch.stack(K), torch.stack(Hs)
            R = (Z - Hs) / (last - l + 1)
            C = moments[l] / count
            C = C + 1e-3 * torch.trace(C) / C.shape[0] * torch.eye(C.shape[0], dtype=torch.float64)
            updates[l] = torch.linalg.solve(C + K.T @ K, K.T @ R)
        after = [run(ids, L - 1, updates) for ids, _ in where]
        probs = [head(x)[ord(t)].exp().item() for x, (_, _, t) in zip(after, facts)]
    done = time.time()
    got = [f["efficacy"]["after"]["p_new"] for f in json.load(open(edited))["facts"]]
    print(json.dumps({"import_seconds": imported - start, "setup_seconds": loaded - imported, "work_seconds": done - loaded,
                      "max_difference": max(abs(a - b) for a, b in zip(probs, got))}))


main()
