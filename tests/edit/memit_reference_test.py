#!/usr/bin/env python3
"""`ffn-trace edit --facts` (MEMIT) against NumPy float64 on data/models/atlas.

The tool writes three facts over layers 1-3 (keys at the last token, W2 stored as F64). This script
shares no code with it: the tokenizer is scripts/train_model.py's byte-level BPE fed the model's
merges, the forward pass is GPT-2's in NumPy from the safetensors files. It checks:
  - every tensor but the three layers' c_proj.weight is byte for byte the original's;
  - C_l = (1/N) Σ k kᵀ over the corpus's N tokens at layer l, λ = 10⁻³ of its mean diagonal (the
    tool's ridge), recomputed here;
  - the update, recomputed here layer by layer from the tool's δ alone (the single edit's
    optimisation, tested on its own): z = h + δ at layer 3's output, then for l = 1 … 3 the keys K
    and streams h of the model with the earlier layers already updated (by this script's own ΔW),
    R = (z − h) / (3 − l + 1), ΔW = (C + λI + K Kᵀ)⁻¹ K Rᵀ — against W2' − W2 read back, and each
    update's norm and rank against the JSON;
  - the written model run here gives every fact's p(new) and top token after, as the tool's;
  - the marks: each of fact 1's neighbours and other facts of its subject run by `ffn-trace run
    --prompt` on the written checkpoint, its top token against the tool's "after" and "changed";
then a fact edited onto that written checkpoint (edits compose): only its three W2 change again,
and NumPy runs the result to the tool's prediction.

Usage: memit_reference_test.py FFN_TRACE DATA_DIR TRAIN_SCRIPT WORK_DIR   (exit 77 without numpy)
"""
import ast
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

ft, data, train_script, work = sys.argv[1:5]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
atlas = os.path.join(data, "models", "atlas")
failures = []
FIRST, LAST = 1, 3
# The atlas corpus's lines about the three subjects and every capital (117 of its 1200): C over them.
CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "facts", "corpus.txt")
FACTS = [("The capital of France is", "France", " Rome"), ("The capital of Germany is", "Germany", " Paris"),
         ("The capital of Japan is", "Japan", " Cairo")]


def load_tokenizer():
    names = {"bytes_to_unicode", "char_class", "pretokenize", "to_symbols", "Tokenizer"}
    consts = {"BYTE_ORDER", "BYTE_TO_CHAR", "WHITE_SPACE", "CONTRACTIONS", "EOS"}
    keep = []
    for node in ast.parse(open(train_script, encoding="utf-8").read()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in names:
            keep.append(node)
        elif isinstance(node, ast.Assign):
            flat = [n.id for t in node.targets for n in (t.elts if isinstance(t, ast.Tuple) else [t]) if isinstance(n, ast.Name)]
            if any(n in consts for n in flat):
                keep.append(node)
    ns = {"math": math, "unicodedata": __import__("unicodedata")}
    exec(compile(ast.Module(keep, []), train_script, "exec"), ns)
    tj = json.load(open(os.path.join(atlas, "tokenizer.json"), encoding="utf-8"))
    return ns["Tokenizer"]([tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in tj["model"]["merges"]])


def read_safetensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    values, stored = {}, {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        values[name] = np.frombuffer(raw[8 + n + b:8 + n + e], {"F64": "<f8", "F32": "<f4"}[t["dtype"]]).astype(np.float64).reshape(t["shape"])
        stored[name] = (t["dtype"], raw[8 + n + b:8 + n + e])
    return values, stored


def layer_norm(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps) * w + b


def softmax(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def forward(w, ids, updates=None, heads=4):
    """GPT-2 with ΔW added to layer l's W2 (updates {l: ΔW}): the last token's softmax, each
    layer's mlp_post and each layer's output stream (tokens, ·)."""
    updates = updates or {}
    x = w["wte.weight"][ids] + w["wpe.weight"][: len(ids)]
    T, d = x.shape
    hd = d // heads
    posts, streams = [], []
    for l in range(4):
        h = layer_norm(x, w[f"h.{l}.ln_1.weight"], w[f"h.{l}.ln_1.bias"])
        q, k, v = np.split(h @ w[f"h.{l}.attn.c_attn.weight"] + w[f"h.{l}.attn.c_attn.bias"], 3, axis=-1)
        q, k, v = (a.reshape(T, heads, hd).transpose(1, 0, 2) for a in (q, k, v))
        s = np.where(np.tril(np.ones((T, T), bool)), q @ k.transpose(0, 2, 1) / math.sqrt(hd), -np.inf)
        x = x + (softmax(s) @ v).transpose(1, 0, 2).reshape(T, d) @ w[f"h.{l}.attn.c_proj.weight"] + w[f"h.{l}.attn.c_proj.bias"]
        h = layer_norm(x, w[f"h.{l}.ln_2.weight"], w[f"h.{l}.ln_2.bias"])
        u = h @ w[f"h.{l}.mlp.c_fc.weight"] + w[f"h.{l}.mlp.c_fc.bias"]
        post = 0.5 * u * (1 + np.tanh(math.sqrt(2 / math.pi) * (u + 0.044715 * u ** 3)))
        posts.append(post)
        x = x + post @ (w[f"h.{l}.mlp.c_proj.weight"] + updates.get(l, 0)) + w[f"h.{l}.mlp.c_proj.bias"]
        streams.append(x)
    return softmax(layer_norm(x[-1], w["ln_f.weight"], w["ln_f.bias"]) @ w["wte.weight"].T), posts, streams


def close(name, got, want, tol):
    got, want = np.asarray(got, float), np.asarray(want, float)
    diff = float(np.max(np.abs(got - want))) if got.size else 0.0
    if got.shape != want.shape or not diff <= tol:
        failures.append(f"{name}: max difference {diff:.3g} over {tol:g}")


def memit(facts_file, checkpoint, out):
    r = subprocess.run([ft, "edit", "--checkpoint", checkpoint, "--facts", facts_file, "--layers", f"{FIRST}-{LAST}", "--at", "last",
                        "--corpus", CORPUS, "--dtype", "f64", "--save", out, "--format", "json"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"edit --facts failed ({r.returncode}): {r.stderr}")
    return json.loads(r.stdout)


tok = load_tokenizer()
facts_file = os.path.join(work, "facts.tsv")
with open(facts_file, "w") as f:
    f.writelines(f"{p}\t{s}\t{t}\n" for p, s, t in FACTS)
out = os.path.join(work, "edited")
got = memit(facts_file, atlas, out)
original, original_stored = read_safetensors(os.path.join(atlas, "model.safetensors"))
edited, stored = read_safetensors(os.path.join(out, "model.safetensors"))
W2 = {l: f"h.{l}.mlp.c_proj.weight" for l in range(FIRST, LAST + 1)}
for name, value in original_stored.items():
    if name not in W2.values() and stored.get(name) != value:
        failures.append(f"{name} changed")

# C over the corpus, each layer's, from the unedited model.
corpus = [line.strip() for line in open(CORPUS, encoding="utf-8") if line.strip()]
moments = {l: 0 for l in W2}
tokens = 0
for line in corpus:
    _, posts, _ = forward(original, tok.encode(line))
    for l in W2:
        moments[l] = moments[l] + posts[l].T @ posts[l]
    tokens += len(posts[0])
if got["corpus_tokens"] != tokens:
    failures.append(f"the corpus's tokens: the tool's {got['corpus_tokens']}, NumPy's {tokens}")

ids = [tok.encode(p) for p, _, _ in FACTS]
for i, fact in enumerate(got["facts"]):
    if fact["efficacy"]["token_ids"] != ids[i]:
        failures.append(f"fact {i + 1}: token ids {fact['efficacy']['token_ids']}, NumPy's {ids[i]}")
deltas = np.array([f["delta"] for f in got["facts"]])
targets = np.array([forward(original, x)[2][LAST][-1] for x in ids]) + deltas
updates = {}
for l in W2:
    runs = [forward(original, x, updates) for x in ids]
    K = np.array([r[1][l][-1] for r in runs])
    H = np.array([r[2][LAST][-1] for r in runs])
    R = (targets - H) / (LAST - l + 1)
    C = moments[l] / tokens
    ridge = 1e-3 * np.trace(C) / C.shape[0]
    layer = got["layers"][l - FIRST]
    close(f"layer {l}: λ", layer["ridge"], ridge, 1e-12 * ridge)
    updates[l] = np.linalg.solve(C + ridge * np.eye(C.shape[0]) + K.T @ K, K.T @ R)
    written = edited[W2[l]] - original[W2[l]]
    close(f"layer {l}: ΔW against W2' − W2 read back", written, updates[l], 1e-9 * np.abs(updates[l]).max())
    close(f"layer {l}: ‖ΔW‖", layer["norm"], np.linalg.norm(updates[l]), 1e-9 * layer["norm"])
    # The rank as the tool counts it: singular values above 10⁻⁹ of the largest (the solve leaves
    # rounding of about 10⁻¹² in the directions no fact writes).
    s = np.linalg.svd(updates[l], compute_uv=False)
    if layer["rank"] != int(np.sum(s > 1e-9 * s[0])) or layer["rank"] != len(FACTS):
        failures.append(f"layer {l}: rank {layer['rank']}, NumPy's {int(np.sum(s > 1e-9 * s[0]))}")

vocab = json.load(open(os.path.join(atlas, "tokenizer.json"), encoding="utf-8"))["model"]["vocab"]
for i, (fact, (_, _, target)) in enumerate(zip(got["facts"], FACTS)):
    p, _, _ = forward(edited, ids[i])
    new = vocab["Ġ" + target.strip()]
    close(f"fact {i + 1}: p(new) after, the written model", fact["efficacy"]["after"]["p_new"], p[new], 1e-9)
    if fact["efficacy"]["after"]["id"] != int(np.argmax(p)) or fact["taken"] != bool(p[new] > p[fact["efficacy"]["before"]["id"]]):
        failures.append(f"fact {i + 1}: the tool's top after {fact['efficacy']['after']['id']}, taken {fact['taken']}; NumPy's "
                        f"{int(np.argmax(p))}")

# The marks against separate runs of the written checkpoint.
marks = 0
for c in got["facts"][0]["neighbours"] + got["facts"][0]["subject_facts"]:
    r = subprocess.run([ft, "run", "--checkpoint", out, "--prompt", c["text"], "--format", "json", "--detail", "summary"],
                       capture_output=True, text=True)
    top = json.loads(r.stdout)["prediction"]["top"][0]
    if top["id"] != c["after"]["id"] or c["changed"] != (top["id"] != c["before"]["id"]):
        failures.append(f"{c['text']!r}: run says {top['token']!r}; the tool's after {c['after']['token']!r}, changed {c['changed']}")
    marks += 1

# Edits compose: a fourth fact onto the written checkpoint.
with open(facts_file, "w") as f:
    f.write("The capital of Egypt is\tEgypt\t Lima\n")
again = os.path.join(work, "again")
got2 = memit(facts_file, out, again)
edited2, stored2 = read_safetensors(os.path.join(again, "model.safetensors"))
for name, value in stored.items():
    if name not in W2.values() and stored2.get(name) != value:
        failures.append(f"composed: {name} changed")
p, _, _ = forward(edited2, tok.encode("The capital of Egypt is"))
close("composed: p(' Lima')", got2["facts"][0]["efficacy"]["after"]["p_new"], p[vocab["ĠLima"]], 1e-9)
p_before, _, _ = forward(edited, tok.encode("The capital of Egypt is"))
close("composed: p(' Lima') before is the first edit's", got2["facts"][0]["efficacy"]["before"]["p_new"], p_before[vocab["ĠLima"]], 1e-9)

print(f"{len(FACTS)} facts, {got['taken']} taken; updates' norms {[round(l['norm'], 4) for l in got['layers']]}; "
      f"{marks} marks against run; composed p(' Lima') {p[vocab['ĠLima']]:.4f}")
if failures:
    print("\n".join(failures))
    sys.exit(1)
print("ok")
