#!/usr/bin/env python3
"""`ffn-trace edit` against NumPy float64: the edited checkpoint read byte by byte and run here.

The tool edits data/models/capitals ("The capital of France is" → " Rome" at layer 0) and writes
the edited model twice, W2' stored as F64 and in the checkpoint's own F32. This script reads the
safetensors files itself and checks, with its own GPT-2 forward pass (Hugging Face's
modelling_gpt2.py as the specification):
  - every tensor but layer 0's c_proj.weight is byte for byte the original's, every file copied;
  - ΔW2 = W2' − W2 has rank one (its second singular value is 0 to rounding) and equals u Λᵀ
    of the tool's JSON;
  - k*, recomputed here as layer 0's mlp_post at the edited token, is the tool's key, and the
    edited layer maps it to the tool's v*: k*ᵀW2' = v* to 1e-10;
  - the edited model's prediction on the prompt, a paraphrase and the neighbours, run here from
    the written weights, is the tool's "after" (token and probability), for both dtypes;
  - the edit succeeds: " Rome" is the prompt's top prediction after, and at least 8 of the 10
    neighbours keep theirs.
And one expert's edit (--expert 0) of the whole tiny Mixtral of tests/inputs/checkpoints, against a
Mixtral forward pass here: only that expert's w2 changed, ΔW2 rank one and u Λᵀ, k* that expert's
activations at the edited token, k*ᵀW2' = v*, and the predictions before and after the tool's.

Usage: reference_test.py FFN_TRACE DATA_DIR WORK_DIR   (exit 77 without numpy)
"""
import filecmp
import json
import math
import os
import shutil
import struct
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    print("skipped: no numpy (scripts/install-deps.sh installs python3-numpy)")
    sys.exit(77)

ft, data, work = sys.argv[1:4]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
failures = []
capitals = os.path.join(data, "models", "capitals")
TENSOR = "h.0.mlp.c_proj.weight"


def read_safetensors(path):
    """Every tensor as float64, and each one's raw bytes and dtype."""
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    body = raw[8 + n:]
    values, stored = {}, {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        kind = {"F64": "<f8", "F32": "<f4"}[t["dtype"]]
        values[name] = np.frombuffer(body[b:e], kind).astype(np.float64).reshape(t["shape"])
        stored[name] = (t["dtype"], body[b:e])
    return values, stored


def layer_norm(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps) * w + b


def softmax(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def gelu_new(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def forward(w, ids, heads=4):
    """GPT-2: the last token's softmax, and each layer's mlp_post (tokens, d_ff)."""
    x = w["wte.weight"][ids] + w["wpe.weight"][: len(ids)]
    T, d = x.shape
    hd = d // heads
    posts = []
    for l in range(sum(name.endswith(".ln_1.weight") for name in w)):
        h = layer_norm(x, w[f"h.{l}.ln_1.weight"], w[f"h.{l}.ln_1.bias"])
        q, k, v = np.split(h @ w[f"h.{l}.attn.c_attn.weight"] + w[f"h.{l}.attn.c_attn.bias"], 3, axis=-1)
        q, k, v = (a.reshape(T, heads, hd).transpose(1, 0, 2) for a in (q, k, v))
        s = q @ k.transpose(0, 2, 1) / math.sqrt(hd)
        s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
        o = (softmax(s) @ v).transpose(1, 0, 2).reshape(T, d)
        x = x + o @ w[f"h.{l}.attn.c_proj.weight"] + w[f"h.{l}.attn.c_proj.bias"]
        h = layer_norm(x, w[f"h.{l}.ln_2.weight"], w[f"h.{l}.ln_2.bias"])
        post = gelu_new(h @ w[f"h.{l}.mlp.c_fc.weight"] + w[f"h.{l}.mlp.c_fc.bias"])
        posts.append(post)
        x = x + post @ w[f"h.{l}.mlp.c_proj.weight"] + w[f"h.{l}.mlp.c_proj.bias"]
    f = layer_norm(x[-1], w["ln_f.weight"], w["ln_f.bias"])
    return softmax(f @ w["wte.weight"].T), posts


def close(name, got, want, tol):
    got, want = np.asarray(got, float), np.asarray(want, float)
    diff = float(np.max(np.abs(got - want))) if got.size else 0.0
    if got.shape != want.shape or not diff <= tol:
        failures.append(f"{name}: max difference {diff:.3g} over {tol:g} (shapes {got.shape}, {want.shape})")


def evaluation(name, original, edited, got, new):
    """Every evaluated prompt run here on the original and the written (F64) model: its top token,
    p(true) and p(new) before and after, whether its top changed, and each kind's score, magnitude
    and accuracy, against the tool's JSON."""
    old = None
    kinds = {}
    for c in [got["efficacy"]] + got["paraphrases"] + got["neighbours"] + got["subject_facts"]:
        p0, _ = forward(original, c["token_ids"])
        p1, _ = forward(edited, c["token_ids"])
        if c["kind"] == "efficacy":
            old = int(np.argmax(p0))
        true = old if c["kind"] in ("efficacy", "paraphrase") else int(np.argmax(p0))
        if c["before"]["id"] != int(np.argmax(p0)) or c["after"]["id"] != int(np.argmax(p1)):
            failures.append(f"{name}: {c['text']!r}: NumPy's top {int(np.argmax(p0))} → {int(np.argmax(p1))}, the tool's "
                            f"{c['before']['id']} → {c['after']['id']}")
        if c["changed"] != (int(np.argmax(p0)) != int(np.argmax(p1))):
            failures.append(f"{name}: {c['text']!r}: changed is {c['changed']}")
        for when, p in (("before", p0), ("after", p1)):
            close(f"{name}: {c['text']!r}: p_true {when}", c[when]["p_true"], p[true], 1e-9)
            close(f"{name}: {c['text']!r}: p_new {when}", c[when]["p_new"], p[new], 1e-9)
        to_new = c["kind"] in ("efficacy", "paraphrase")
        margin = p1[new] - p1[true] if to_new else p1[true] - p1[new]
        kinds.setdefault(c["kind"], []).append((margin > 0, margin, int(np.argmax(p1)) == (new if to_new else true)))
    for kind, rows in kinds.items():
        s = got["summary"][kind]
        if s["count"] != len(rows):
            failures.append(f"{name}: {kind}: count {s['count']}, NumPy's {len(rows)}")
        close(f"{name}: {kind}: score", s["score"], np.mean([r[0] for r in rows]), 1e-12)
        close(f"{name}: {kind}: magnitude", s["magnitude"], np.mean([r[1] for r in rows]), 1e-9)
        close(f"{name}: {kind}: accuracy", s["accuracy"], np.mean([r[2] for r in rows]), 1e-12)
    if got["taken"] != bool(kinds["efficacy"][0][0]):
        failures.append(f"{name}: taken is {got['taken']}")
    return kinds


def edit(out, *extra):
    args = [ft, "edit", "--checkpoint", capitals, "--layer", "0", "--prompt", "The capital of France is", "--subject",
            "France", "--target", " Rome", "--at", "last", "--save", out, "--format", "json", *extra]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"edit failed ({r.returncode}): {r.stderr}")
    return json.loads(r.stdout)


original, original_stored = read_safetensors(os.path.join(capitals, "model.safetensors"))
tok = json.load(open(os.path.join(capitals, "tokenizer.json")))["model"]["vocab"]
id_of = {text: i for text, i in tok.items()}

for dtype in ("f64", "f32"):
    out = os.path.join(work, dtype)
    got = edit(out, "--dtype", dtype, "--paraphrase", "The capital city of France is")
    e = got["edit"]
    edited, stored = read_safetensors(os.path.join(out, "model.safetensors"))

    # Every file copied; every tensor but W2 the same bytes.
    for f in sorted(os.listdir(capitals)):
        if f != "model.safetensors" and not filecmp.cmp(os.path.join(capitals, f), os.path.join(out, f), shallow=False):
            failures.append(f"{dtype}: {f} is not a copy of the original")
    for name, (kind, raw) in original_stored.items():
        if name != TENSOR and stored.get(name) != (kind, raw):
            failures.append(f"{dtype}: {name} changed")
    if stored[TENSOR][0] != dtype.upper():
        failures.append(f"{dtype}: W2' stored as {stored[TENSOR][0]}")

    ids = got["prompt"]["token_ids"]
    probs, posts = forward(original, ids)
    key = posts[0][e["position"]]
    close(f"{dtype}: k* (layer 0's mlp_post at token {e['position']})", e["key"], key, 1e-9)
    w2, w2_new = original[TENSOR], edited[TENSOR]
    delta_w = w2_new - w2
    if dtype == "f64":
        s = np.linalg.svd(delta_w, compute_uv=False)
        if not s[1] <= 1e-12 * s[0]:
            failures.append(f"ΔW2 is not rank one: singular values {s[0]:.6g}, {s[1]:.3g}")
        close("ΔW2 = u Λᵀ", delta_w, np.outer(e["u"], e["lambda"]), 1e-12)
        close("k*ᵀW2' = v*", key @ w2_new, e["value"], 1e-10)
        close("k*ᵀW2 = the old value", key @ w2, e["old_value"], 1e-10)
        close("v* − v₀ = δ", np.array(e["value"]) - np.array(e["old_value"]), e["delta"], 1e-12)

    # The written model's predictions, run here, against the tool's "after".
    checks = [("prompt", got["prompt"]["token_ids"], got["efficacy"]["after"])]
    checks += [(c["text"], None, c["after"]) for c in got["paraphrases"] + got["neighbours"]]
    for text, ids_, after in checks:
        if ids_ is None:
            ids_ = [id_of[t] for t in ("Ġ" + w if i else w for i, w in enumerate(text.split(" ")))]
        p, _ = forward(edited, ids_)
        top = int(np.argmax(p))
        if top != after["id"]:
            failures.append(f"{dtype}: {text!r}: NumPy predicts {top} after the edit, the tool {after['id']}")
        # The tool's "after" is the edit in float64; F32 storage moves it by its rounding.
        close(f"{dtype}: {text!r}: p(top) after", p[top], after["prob"], 1e-9 if dtype == "f64" else 1e-5)
    if dtype == "f64":
        evaluation(dtype, original, edited, got, id_of["ĠRome"])
    p, _ = forward(edited, got["prompt"]["token_ids"])
    close(f"{dtype}: the written model's p(top), as the tool read it back", p.max(), got["written"]["prediction"]["prob"], 1e-9)

    if got["efficacy"]["after"]["token"] != " Rome":
        failures.append(f"{dtype}: the prompt predicts {got['efficacy']['after']['token']!r} after the edit")
    kept = sum(c["before"]["id"] == c["after"]["id"] for c in got["neighbours"])
    if len(got["neighbours"]) != 10 or kept < 8:
        failures.append(f"{dtype}: {kept} of {len(got['neighbours'])} neighbours keep their prediction; expected 8 of 10 or more")
    print(f"{dtype}: p(' Rome') {got['efficacy']['before']['target_prob']:.4f} -> {got['efficacy']['after']['target_prob']:.4f}, "
          f"{kept} of {len(got['neighbours'])} neighbours kept, {len(e['steps'])} steps")



# The edit of the issue's example on the atlas model: layer 1 at the last token. Its evaluation
# against NumPy, and the damage it must show: Spain's capital and France's language change.
atlas = os.path.join(data, "models", "atlas")
out = os.path.join(work, "atlas")
r = subprocess.run([ft, "edit", "--checkpoint", atlas, "--layer", "1", "--at", "last", "--prompt", "The capital of France is",
                    "--subject", "France", "--target", " Rome", "--dtype", "f64", "--save", out, "--format", "json"],
                   capture_output=True, text=True)
if r.returncode != 0:
    sys.exit(f"edit on atlas failed ({r.returncode}): {r.stderr}")
got = json.loads(r.stdout)
atlas_vocab = json.load(open(os.path.join(atlas, "tokenizer.json")))["model"]["vocab"]
kinds = evaluation("atlas", read_safetensors(os.path.join(atlas, "model.safetensors"))[0],
                   read_safetensors(os.path.join(out, "model.safetensors"))[0], got, atlas_vocab["ĠRome"])
changed = {c["text"]: c["after"]["token"] for c in got["neighbours"] + got["subject_facts"] if c["changed"]}
for text, token in (("The capital of Spain is", " Rome"), ("The language of France is", " Icelandic")):
    if changed.get(text) != token:
        failures.append(f"atlas: {text!r} should be marked changed to {token!r}; changed: {changed}")
print(f"atlas: {len(changed)} prompts changed their top prediction: {changed}")

# One expert's edit (--expert) of a whole tiny Mixtral (tests/inputs/checkpoints/mixtral_whole), run
# here with Hugging Face's modeling_mixtral.py as the specification: RMSNorm, rotate-half RoPE, two
# query heads sharing one key/value head, the softmax router's top 2 renormalised, SwiGLU experts.
mixtral = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "inputs", "checkpoints", "mixtral_whole")
EXPERT = "model.layers.1.block_sparse_moe.experts.0.w2.weight"


def rms_norm(x, w, eps=1e-5):
    return x / np.sqrt((x ** 2).mean(-1, keepdims=True) + eps) * w


def rope(x, theta=100.0):
    T, d = x.shape[-2], x.shape[-1]
    angles = np.arange(T)[:, None] * theta ** (-np.arange(0, d, 2) / d)[None, :]
    cos, sin = np.cos(np.concatenate([angles] * 2, -1)), np.sin(np.concatenate([angles] * 2, -1))
    half = np.concatenate([-x[..., d // 2:], x[..., : d // 2]], -1)
    return x * cos + half * sin


def mixtral_forward(w, ids, heads=2, hd=4):
    """The last token's softmax, and layer 1's expert 0: its activations (tokens, d_ff) and routing weights."""
    x = w["model.embed_tokens.weight"][ids]
    T = len(ids)
    for l in range(2):
        at = f"model.layers.{l}."
        h = rms_norm(x, w[at + "input_layernorm.weight"])
        q = (h @ w[at + "self_attn.q_proj.weight"].T).reshape(T, heads, hd).transpose(1, 0, 2)
        k = (h @ w[at + "self_attn.k_proj.weight"].T).reshape(T, 1, hd).transpose(1, 0, 2)
        v = (h @ w[at + "self_attn.v_proj.weight"].T).reshape(T, 1, hd).transpose(1, 0, 2)
        q, k = rope(q), rope(k)
        s = q @ k.transpose(0, 2, 1) / math.sqrt(hd)
        s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
        o = (softmax(s) @ v).transpose(1, 0, 2).reshape(T, heads * hd)
        x = x + o @ w[at + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[at + "post_attention_layernorm.weight"])
        p = softmax(h @ w[at + "block_sparse_moe.gate.weight"].T)
        out = np.zeros_like(x)
        for t in range(T):
            top = np.argsort(-p[t], kind="stable")[:2]
            for e in top:
                e_at = at + f"block_sparse_moe.experts.{e}."
                a = h[t] @ w[e_at + "w1.weight"].T
                act = a / (1 + np.exp(-a)) * (h[t] @ w[e_at + "w3.weight"].T)
                out[t] += p[t, e] / p[t, top].sum() * (act @ w[e_at + "w2.weight"].T)
                if l == 1 and e == 0 and t == T - 1:
                    key, weight = act, p[t, e] / p[t, top].sum()
        x = x + out
    f = rms_norm(x[-1], w["model.norm.weight"])
    return softmax(f @ w["lm_head.weight"].T), key, weight


letters = json.load(open(os.path.join(mixtral, "vocab.json")))
before, _ = read_safetensors(os.path.join(mixtral, "model.safetensors"))
out = os.path.join(work, "expert")
r = subprocess.run([ft, "edit", "--checkpoint", mixtral, "--layer", "1", "--expert", "0", "--prompt", "abcde", "--subject", "c",
                    "--at", "last", "--target", "f", "--neighbour", "abfde", "--dtype", "f64", "--save", out, "--format", "json"],
                   capture_output=True, text=True)
if r.returncode != 0:
    sys.exit(f"edit --expert failed ({r.returncode}): {r.stderr}")
got = json.loads(r.stdout)
e = got["edit"]
after, after_stored = read_safetensors(os.path.join(out, "model.safetensors"))
for name in before:
    if name != EXPERT and not np.array_equal(before[name], after[name]):
        failures.append(f"expert: {name} changed")
ids = got["prompt"]["token_ids"]
p0, key, weight = mixtral_forward(before, ids)
if e.get("expert") != 0:
    failures.append(f"expert: the JSON's edit.expert is {e.get('expert')!r}")
close("expert: k* (expert 0's activations at the last token)", e["key"], key, 1e-9)
delta_w = (after[EXPERT] - before[EXPERT]).T  # the math form (d_ff, d_model)
s = np.linalg.svd(delta_w, compute_uv=False)
if not s[1] <= 1e-12 * s[0]:
    failures.append(f"expert: ΔW2 is not rank one: singular values {s[0]:.6g}, {s[1]:.3g}")
close("expert: ΔW2 = u Λᵀ", delta_w, np.outer(e["u"], e["lambda"]), 1e-12)
close("expert: k*ᵀW2' = v*", key @ after[EXPERT].T, e["value"], 1e-10)
for text, want in [("abcde", got["efficacy"]), ("abfde", got["neighbours"][0])]:
    p, _, _ = mixtral_forward(after, [letters[c] for c in text])
    pb, _, _ = mixtral_forward(before, [letters[c] for c in text])
    if int(np.argmax(p)) != want["after"]["id"]:
        failures.append(f"expert: {text!r}: NumPy predicts {int(np.argmax(p))} after the edit, the tool {want['after']['id']}")
    close(f"expert: {text!r}: p(target) after", p[got["target"]["id"]], want["after"]["target_prob"], 1e-9)
    close(f"expert: {text!r}: p(target) before", pb[got["target"]["id"]], want["before"]["target_prob"], 1e-9)
print(f"expert 0 (routing weight {weight:.4f}): p('f') {got['efficacy']['before']['target_prob']:.4f} -> "
      f"{got['efficacy']['after']['target_prob']:.4f}")

for f in failures:
    print("FAIL", f)
sys.exit(1 if failures else 0)
