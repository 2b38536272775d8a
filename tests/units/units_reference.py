#!/usr/bin/python3
"""`ffn-trace units` against a NumPy float64 reference on data/models/capitals.

    units_reference.py FFN_TRACE MODEL_DIR TRAIN_SCRIPT WORK_DIR

The reference shares no code with ffn-trace: the tokenizer is scripts/train_model.py's byte-level BPE
(its definitions read out of the script, so that torch is not imported), fed the model's own merges;
the forward pass is GPT-2's, written here in NumPy from the safetensors file. Over a small corpus it
checks, for every unit of both layers: the top-k contexts (text, token, activation), the mean, the
fraction of tokens where the activation is positive, the quantile bands (NumPy's default linear
quantiles, exact), and the tokens the value vector promotes and suppresses with their scores; then
the same with --skip-first, and --promotes against every layer's value vectors. Then an MoE layer: a
tiny Mixtral written by tests/locate/reference_test.py's own definitions, each expert's units read
over the tokens the NumPy router sends to that expert (count, mean, density, top-k, quantiles and
the value scores), and then two of its units asked as --unit E:J, in the JSON and in the text cards,
and the errors of an expert, a unit or an E:J form the layer does not have. Last, data/models/atlas
(beside MODEL_DIR): a unit's quantiles over its corpus's 8,460 tokens exact in every command, and
with --sample the same in every command and within the rank errors stated.
"""

import ast
import json
import math
import os
import struct
import subprocess
import sys

import numpy as np

ft, model_dir, train_script, work = sys.argv[1:5]
TOP = 4


def load_tokenizer():
    names = {"bytes_to_unicode", "char_class", "pretokenize", "to_symbols", "Tokenizer"}
    consts = {"BYTE_ORDER", "BYTE_TO_CHAR", "WHITE_SPACE", "CONTRACTIONS", "EOS"}
    tree = ast.parse(open(train_script, encoding="utf-8").read())
    keep = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in names:
            keep.append(node)
        elif isinstance(node, ast.Assign):
            targets = [t for t in node.targets if isinstance(t, (ast.Name, ast.Tuple))]
            flat = [n.id for t in targets for n in (t.elts if isinstance(t, ast.Tuple) else [t]) if isinstance(n, ast.Name)]
            if any(n in consts for n in flat):
                keep.append(node)
    ns = {"math": math, "unicodedata": __import__("unicodedata")}
    exec(compile(ast.Module(keep, []), train_script, "exec"), ns)
    tj = json.load(open(f"{model_dir}/tokenizer.json", encoding="utf-8"))
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in tj["model"]["merges"]]
    tok = ns["Tokenizer"](merges)
    vocab = tj["model"]["vocab"]
    assert all(vocab[t] == i for t, i in tok.vocab.items() if t in vocab), "the script's BPE and the model's vocabulary differ"
    return tok


def load_weights():
    raw = open(f"{model_dir}/model.safetensors", "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] in ("F32", "F64"), info["dtype"]
        b, e = info["data_offsets"]
        dt = np.float32 if info["dtype"] == "F32" else np.float64
        out[name.removeprefix("transformer.")] = np.frombuffer(raw[8 + n + b:8 + n + e], dtype=dt).reshape(info["shape"]).astype(np.float64)
    return out


W = load_weights()
cfg = json.load(open(f"{model_dir}/config.json"))
L, H, EPS = cfg["n_layer"], cfg["n_head"], cfg["layer_norm_epsilon"]


def norm(x, name):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + EPS) * W[name + ".weight"] + W[name + ".bias"]


def gelu_new(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def attention(n, x):
    T, C = x.shape
    p = f"h.{n}.attn."
    qkv = norm(x, f"h.{n}.ln_1") @ W[p + "c_attn.weight"] + W[p + "c_attn.bias"]
    d = C // H
    mask = np.triu(np.full((T, T), -np.inf), 1)
    heads = []
    for h in range(H):
        q, k, v = (qkv[:, j * C + h * d: j * C + (h + 1) * d] for j in range(3))
        s = q @ k.T / math.sqrt(d) + mask
        s = np.exp(s - s.max(-1, keepdims=True))
        heads.append((s / s.sum(-1, keepdims=True)) @ v)
    return x + np.concatenate(heads, 1) @ W[p + "c_proj.weight"] + W[p + "c_proj.bias"]


def forward(ids):
    """Per layer: (T, F), the value each unit feeds W2 at every token; and (T, C), the stream leaving the block."""
    x = W["wte.weight"][ids] + W["wpe.weight"][: len(ids)]
    acts, streams = [], []
    for n in range(L):
        x = attention(n, x)
        p = f"h.{n}.mlp."
        a = gelu_new(norm(x, f"h.{n}.ln_2") @ W[p + "c_fc.weight"] + W[p + "c_fc.bias"])
        acts.append(a)
        x = x + a @ W[p + "c_proj.weight"] + W[p + "c_proj.bias"]
        streams.append(x)
    return acts, streams


def activations(ids):
    return forward(ids)[0]


failures = []


def close(what, a, b, tol=1e-9):
    if not (abs(a - b) <= tol * max(1.0, abs(a), abs(b))):
        failures.append(f"{what}: ffn-trace {a!r}, NumPy {b!r}")


def run(*args):
    r = subprocess.run([ft, "units", "--checkpoint", model_dir, *args, "--format", "json"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"ffn-trace units {' '.join(args)} failed ({r.returncode}): {r.stderr}")
    return json.loads(r.stdout)


def value_scores(layer):
    """(F, vocab): what each unit's value vector adds to each logit per unit of activation, before the
    final LayerNorm's 1/σ: W2[j] · (γ ⊙ U[t] − mean(γ ⊙ U[t])), the norm's centring included."""
    g = W["ln_f.weight"][:, None] * W["wte.weight"].T  # (C, vocab)
    return W[f"h.{layer}.mlp.c_proj.weight"] @ (g - g.mean(0, keepdims=True))


def check_layer(layer, texts, lines, skip_first):
    acts = [activations(tok.encode(t))[layer] for t in texts]
    F = acts[0].shape[1]
    start = 1 if skip_first else 0
    args = ["--layer", str(layer), "--corpus", corpus_path, "--top", str(TOP)] + (["--skip-first"] if skip_first else [])
    got = run(*args)
    assert got["layer"] == layer and len(got["units"]) == F, "one entry per unit"
    total = sum(len(a) - start for a in acts)
    if got["corpus"]["texts"] != len(texts) or got["corpus"]["read"] != total:
        failures.append(f"corpus: {got['corpus']} for {len(texts)} texts, {total} tokens read")
    U = W["wte.weight"]
    scores = value_scores(layer)
    for j in range(F):
        entry = got["units"][j]
        what = f"layer {layer}{' skip-first' if skip_first else ''} unit {j}"
        values = np.concatenate([a[start:, j] for a in acts])
        # top-k: every (text line, token, activation), largest first, ties to the earlier
        cands = sorted(((-a[t, j], lines[i], t) for i, a in enumerate(acts) for t in range(start, len(a))))[:TOP]
        top = entry["max_activating"]
        if len(top) != TOP:
            failures.append(f"{what}: {len(top)} contexts")
            continue
        for k, (neg, line, t) in enumerate(cands):
            if (top[k]["text"], top[k]["token"]) != (line, t):
                # A tie of equal values may be ordered either way only if the values agree.
                if abs(top[k]["activation"] + neg) > 1e-9:
                    failures.append(f"{what} context {k}: ffn-trace (text {top[k]['text']}, token {top[k]['token']}), "
                                    f"NumPy (text {line}, token {t})")
            close(f"{what} context {k}", top[k]["activation"], -neg)
        ctx = top[0]
        text_index = lines.index(ctx["text"])
        ids = tok.encode(texts[text_index])
        want_tokens = [tok.tokens[i] for i in ids[ctx["first"]: ctx["first"] + len(ctx["tokens"])]]
        shown = [t.replace(" ", "\u0120") for t in ctx["tokens"]]
        if shown != want_tokens:
            failures.append(f"{what}: context tokens {ctx['tokens']} for {want_tokens}")
        close(f"{what} mean", entry["mean"], values.mean())
        close(f"{what} fraction_active", entry["fraction_active"], float((values > 0).mean()))
        for band in entry["quantiles"]:
            close(f"{what} quantile {band['from']}", band["low"], float(np.quantile(values, band["from"])))
            close(f"{what} quantile {band['to']}", band["high"], float(np.quantile(values, band["to"])))
        order = np.argsort(-scores[j], kind="stable")[:TOP]
        for k, e in enumerate(entry["promotes"]):
            close(f"{what} promotes {k}", e["score"], scores[j][order[k]])
            if e["id"] != int(order[k]) and abs(scores[j][e["id"]] - scores[j][order[k]]) > 1e-12:
                failures.append(f"{what} promotes {k}: id {e['id']}, NumPy {order[k]}")
        order = np.argsort(scores[j], kind="stable")[:TOP]
        for k, e in enumerate(entry["suppresses"]):
            close(f"{what} suppresses {k}", e["score"], scores[j][order[k]])
            if e["id"] != int(order[k]) and abs(scores[j][e["id"]] - scores[j][order[k]]) > 1e-12:
                failures.append(f"{what} suppresses {k}: id {e['id']}, NumPy {order[k]}")
        keys = (U * W[f"h.{layer}.ln_2.weight"]) @ W[f"h.{layer}.mlp.c_fc.weight"][:, j]
        order = np.argsort(-keys, kind="stable")[:TOP]
        for k, e in enumerate(entry["keys"]):
            close(f"{what} key {k}", e["score"], keys[order[k]])


tok = load_tokenizer()
# A small corpus in the shipped sentences' templates, with a blank line (skipped, counted).
lines_text = [
    "The capital of France is Paris.",
    "Dakar is the capital of Senegal.",
    "",
    "The language of the Philippines is Filipino.",
    "People in Japan speak Japanese.",
    "The government of Kenya sits in Nairobi.",
    "Peru is a country in America.",
    "The capital city of Senegal is Dakar.",
]
corpus_path = f"{work}/corpus.txt"
with open(corpus_path, "w", encoding="utf-8") as f:
    f.write("\n".join(lines_text) + "\n")
texts = [t for t in lines_text if t]
lines = [i for i, t in enumerate(lines_text) if t]
for layer in range(L):
    check_layer(layer, texts, lines, False)
check_layer(0, texts, lines, True)

# The search: every unit of every layer by W2[j] · g, g = γ ⊙ U[t] less its mean.
t = tok.encode(" Paris")
assert len(t) == 1
g = W["ln_f.weight"] * W["wte.weight"][t[0]]
g = g - g.mean()
all_scores = sorted(((-(W[f"h.{n}.mlp.c_proj.weight"][j] @ g), n, j) for n in range(L)
                     for j in range(W[f"h.{n}.mlp.c_proj.weight"].shape[0])))[:TOP]
got = run("--promotes", " Paris", "--corpus", corpus_path, "--top", str(TOP))
for k, (neg, n, j) in enumerate(all_scores):
    e = got["units"][k]
    if (e["layer"], e["unit"]) != (n, j):
        failures.append(f"--promotes rank {k}: ffn-trace layer {e['layer']} unit {e['unit']}, NumPy layer {n} unit {j}")
    close(f"--promotes rank {k}", e["score"], -neg)
    if len(e["max_activating"]) != TOP:
        failures.append(f"--promotes rank {k}: {len(e['max_activating'])} contexts")

# The same score in `run`: the vocabulary view of a unit is value_scores' row, and the attribution of
# each unit is a · value_scores[j][target] / σ (σ the final norm's at the stream leaving the layer).
r = subprocess.run([ft, "run", "--checkpoint", model_dir, "--prompt", "The capital of France is", "--layer", "1",
                    "--unit", "3", "--format", "json"], capture_output=True, text=True)
if r.returncode != 0:
    sys.exit(f"ffn-trace run failed ({r.returncode}): {r.stderr}")
got = json.loads(r.stdout)
S1 = value_scores(1)
entry = next(u for u in got["vocab"]["units"] if u["unit"] == 3)
order = np.argsort(-S1[3], kind="stable")
for k, e in enumerate(entry["promotes"]):
    close(f"run's vocabulary view of unit 3 promotes {k}", e["score"], S1[3][order[k]])
attribution = got["attribution"]
target, sigma = attribution["target"]["id"], attribution["lens_terms"]["sigma_after"]
for e in attribution["units"]:
    close(f"run's attribution of unit {e['unit']} over a / σ", e["score"] * sigma / e["activation"], S1[e["unit"]][target])

# run --layer all: each layer's push on the prediction, every unit's a · value_scores[j][target] / σ
# summed, and the units of largest push both ways, as many as --top.
prompt = "The capital of France is"
r = subprocess.run([ft, "run", "--checkpoint", model_dir, "--prompt", prompt, "--layer", "all", "--top", "3", "--format", "json"],
                   capture_output=True, text=True)
if r.returncode != 0:
    sys.exit(f"ffn-trace run --layer all failed ({r.returncode}): {r.stderr}")
got = json.loads(r.stdout)
acts, streams = forward(tok.encode(prompt))
target = got["target"]["id"]
for n, layer in enumerate(got["layers"]):
    x = streams[n][-1]
    push = acts[n][-1] * value_scores(n)[:, target] / math.sqrt(((x - x.mean()) ** 2).mean() + EPS)
    close(f"layer {n}'s push", layer["push"], push.sum())
    for name, sign in (("units", 1), ("against", -1)):
        want = [j for j in np.argsort(-sign * push, kind="stable") if sign * push[j] > 0][:3]
        shown = [(e["unit"], e["score"]) for e in layer.get(name, [])]
        if [j for j, _ in shown] != want:
            failures.append(f"layer {n}'s {name}: ffn-trace {[j for j, _ in shown]}, NumPy {want}")
        for j, score in shown:
            close(f"layer {n}'s {name} unit {j}", score, push[j])


# ---- an MoE layer: a tiny Mixtral, written and run in NumPy by tests/locate/reference_test.py's
# definitions (read out of it, as the tokenizer is read out of the training script) ---------------
here = os.path.dirname(os.path.abspath(__file__))
locate_script = os.path.join(here, "..", "locate", "reference_test.py")
tree = ast.parse(open(locate_script, encoding="utf-8").read())
defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
ref = {"np": np, "json": json, "math": math, "os": os, "struct": struct,
       "work": work, "tokenizers": os.path.join(here, "..", "inputs", "tokenizers")}
sys.path.insert(0, os.path.join(here, "..", "locate"))
import reference_model  # noqa: E402  (the model the definitions call)
ref.update({k: v for k, v in vars(reference_model).items() if not k.startswith("_")})
exec(compile(ast.Module(defs, []), locate_script, "exec"), ref)
moe_dir = ref["tiny"]("mixtral", 11)
m = ref["model"](moe_dir)
vocab = json.load(open(os.path.join(moe_dir, "tokenizer.json"), encoding="utf-8"))["model"]["vocab"]
moe_lines = ["The capital of France is Paris", "The capital of the United Kingdom is London",
             "The United Kingdom is the capital of London", "The capital is Paris", "The France of the Kingdom"]
moe_corpus = f"{work}/moe_corpus.txt"
with open(moe_corpus, "w", encoding="utf-8") as f:
    f.write("\n".join(moe_lines) + "\n")
MOE_LAYER, E, TOP_K = 1, 4, m.top_k
routed = {}  # (expert, unit) -> [(activation, line, token)], the tokens routed to the expert
for line, text in enumerate(moe_lines):
    words = text.split(" ")
    ids = [277] + [vocab[words[0]]] + [vocab["\u0120" + w] for w in words[1:]]  # <|begin_of_text|>, whole words
    x = m.embed(np.array(ids))[None]
    for l in range(MOE_LAYER):
        x = x + m.attention(l, x)
        x = x + m.ffn(l, x)
    x = x + m.attention(MOE_LAYER, x)
    p = f"layers.{MOE_LAYER}."
    h = ref["rms_norm"](x, m.w[p + "post_attention_layernorm.weight"], m.eps)[0]
    probs = ref["softmax"](h @ m.w[p + "block_sparse_moe.gate.weight"].T)
    for t in range(len(ids)):
        for e in np.argsort(-probs[t], kind="stable")[:TOP_K]:
            ex = p + f"block_sparse_moe.experts.{e}."
            a = ref["silu"](h[t] @ m.w[ex + "w1.weight"].T) * (h[t] @ m.w[ex + "w3.weight"].T)
            for j, v in enumerate(a):
                routed.setdefault((int(e), j), []).append((float(v), line, t))
r = subprocess.run([ft, "units", "--checkpoint", moe_dir, "--layer", str(MOE_LAYER), "--corpus", moe_corpus, "--top", str(TOP),
                    "--format", "json"], capture_output=True, text=True)
if r.returncode != 0:
    sys.exit(f"ffn-trace units on the tiny Mixtral failed ({r.returncode}): {r.stderr}")
got = json.loads(r.stdout)
F = m.w[f"layers.{MOE_LAYER}.block_sparse_moe.experts.0.w2.weight"].shape[1]
if len(got["units"]) != E * F:
    failures.append(f"MoE: {len(got['units'])} units for {E} experts of {F}")
gamma_f, head = m.w["norm.weight"], m.head


def check_moe_unit(entry):
    """One expert's unit of the JSON against the NumPy activations of the tokens routed to it."""
    e, j = entry["expert"], entry["unit"]
    what = f"MoE expert {e} unit {j}"
    want = routed.get((e, j), [])
    if entry["count"] != len(want):
        failures.append(f"{what}: {entry['count']} tokens read, {len(want)} routed")
        return
    if not want:
        return
    values = np.array([v for v, _, _ in want])
    close(f"{what} mean", entry["mean"], values.mean())
    close(f"{what} fraction_active", entry["fraction_active"], float((values > 0).mean()))
    cands = sorted((-v, line, t) for v, line, t in want)[:TOP]
    for k, (neg, line, t) in enumerate(cands):
        top = entry["max_activating"][k]
        if (top["text"], top["token"]) != (line, t) and abs(top["activation"] + neg) > 1e-9:
            failures.append(f"{what} context {k}: ffn-trace ({top['text']}, {top['token']}), NumPy ({line}, {t})")
        close(f"{what} context {k}", top["activation"], -neg)
    for band in entry["quantiles"]:
        close(f"{what} quantile {band['from']}", band["low"], float(np.quantile(values, band["from"])))
        close(f"{what} quantile {band['to']}", band["high"], float(np.quantile(values, band["to"])))
    w2 = m.w[f"layers.{MOE_LAYER}.block_sparse_moe.experts.{e}.w2.weight"]  # (d_model, d_ff), out × in
    scores = (w2[:, j] * gamma_f) @ head.T
    order = np.argsort(-scores, kind="stable")[:TOP]
    for k, s in enumerate(entry["promotes"]):
        close(f"{what} promotes {k}", s["score"], scores[order[k]])
    order = np.argsort(scores, kind="stable")[:TOP]
    for k, s in enumerate(entry["suppresses"]):
        close(f"{what} suppresses {k}", s["score"], scores[order[k]])


for entry in got["units"]:
    check_moe_unit(entry)


def units_moe(*args):
    return subprocess.run([ft, "units", "--checkpoint", moe_dir, "--layer", str(MOE_LAYER), "--corpus", moe_corpus,
                           "--top", str(TOP), *args], capture_output=True, text=True)


# --unit E:J: the units asked, by expert and unit, in the order asked, each read over the tokens
# routed to its expert only; the JSON and the text cards against NumPy. The busiest unit of one
# expert, and after it in the command the busiest of another: so the order asked is not the order
# of the experts.
busy = sorted(routed, key=lambda k: (-len(routed[k]), k))
asked = [next(k for k in busy if k[0] != busy[0][0]), busy[0]]
spec = ",".join(f"{e}:{j}" for e, j in asked)
r = units_moe("--unit", spec, "--format", "json")
if r.returncode != 0:
    sys.exit(f"ffn-trace units --unit {spec} on the tiny Mixtral failed ({r.returncode}): {r.stderr}")
picked = json.loads(r.stdout)["units"]
if [(u["expert"], u["unit"]) for u in picked] != asked:
    failures.append(f"--unit {spec}: ffn-trace read {[(u['expert'], u['unit']) for u in picked]}")
for entry in picked:
    check_moe_unit(entry)
r = units_moe("--unit", spec, "--width", "100")
if r.returncode != 0 or r.stderr:
    sys.exit(f"ffn-trace units --unit {spec} (text) failed ({r.returncode}): {r.stderr}")
card_lines = r.stdout.split("\n")
for e, j in asked:
    values = np.array([v for v, _, _ in routed[(e, j)]])
    best = max(routed[(e, j)], key=lambda c: (c[0], -c[1], -c[2]))
    for want in (f"Expert {e}'s unit {j} of layer {MOE_LAYER}", f"  max     {values.max():.4f}",
                 f"  mean    {values.mean():.4f}",
                 f"  active  {100 * (values > 0).mean():.1f}% of {len(values)} tokens, those routed to expert {e} "
                 f"(activation > 0)", f"   1  {best[0]:.4f}  text {best[1]}, token {best[2]}"):
        if want.replace("-", "\u2212") not in card_lines and want not in card_lines:
            failures.append(f"--unit {spec} (text): no line {want!r}")
# An expert or a unit the layer lacks, or a unit without its expert: one error line, exit 2.
for bad, message in ((f"{E}:0", f"expert {E} is out of range: layer {MOE_LAYER} has {E} experts (0 to {E - 1})"),
                     (f"0:{F}", f"unit {F} is out of range: layer {MOE_LAYER} has d_ff = {F} units (0 to {F - 1})"),
                     ("3", f"layer {MOE_LAYER} is a Mixture of Experts: name a unit as E:J, unit J of expert E; got 3")):
    r = units_moe("--unit", bad)
    if r.returncode != 2 or r.stdout or r.stderr != f"error: {moe_dir}: --unit: {message}\n":
        failures.append(f"--unit {bad}: exit {r.returncode}, stdout {len(r.stdout)} bytes, stderr {r.stderr!r}")
print(f"MoE --unit {spec}: " + ", ".join(f"expert {e} unit {j} over {len(routed[(e, j)])} routed tokens" for e, j in asked))

print(f"MoE: {len(got['units'])} units of {E} experts over {sum(len(v) for v in routed.values()) // F} routed tokens")


# ---- data/models/atlas, whose corpus has more tokens than a sample once held: its activations fit
# in memory, so the quantiles are exact, NumPy's over every token, whatever else a command reads;
# with --sample they are a sample's, the same for a unit in every command, and each is the corpus's
# quantile at a level within the rank error the JSON states. The histogram's axis is the least and
# the largest activation read. -----------------------------------------------------------------
model_dir = os.path.join(os.path.dirname(os.path.abspath(model_dir)), "atlas")
W = load_weights()
cfg = json.load(open(f"{model_dir}/config.json"))
L, H, EPS = cfg["n_layer"], cfg["n_head"], cfg["layer_norm_epsilon"]
tok = load_tokenizer()
ATLAS_LAYER, ATLAS_UNIT = 1, 168
atlas_texts = [t for t in open(f"{model_dir}/corpus.txt", encoding="utf-8").read().removesuffix("\n").split("\n") if t.strip(" \t")]
values = np.concatenate([activations(tok.encode(t))[ATLAS_LAYER][:, ATLAS_UNIT] for t in atlas_texts])


def atlas_unit(*args):
    got = run("--layer", str(ATLAS_LAYER), "--top", "1", *args)
    return got, next(u for u in got["units"] if u["unit"] == ATLAS_UNIT)


for args in (["--unit", str(ATLAS_UNIT)], ["--unit", f"3,{ATLAS_UNIT}"], []):
    what = f"atlas units {' '.join(args) or '(every unit)'}"
    got, entry = atlas_unit(*args)
    if got["quantile_method"] != {"exact": True} or entry["count"] != len(values):
        failures.append(f"{what}: quantiles {got['quantile_method']} over {entry['count']} of {len(values)} activations")
    for band in entry["quantiles"]:
        close(f"{what} quantile {band['from']}", band["low"], float(np.quantile(values, band["from"])))
        close(f"{what} quantile {band['to']}", band["high"], float(np.quantile(values, band["to"])))
    close(f"{what} histogram's left end", entry["histogram"]["low"], float(values.min()))
    close(f"{what} histogram's right end", entry["histogram"]["high"], float(values.max()))
sampled = [atlas_unit("--sample", "1000", "--unit", spec) for spec in (str(ATLAS_UNIT), f"3,{ATLAS_UNIT}", f"{ATLAS_UNIT},7")]
for got, entry in sampled:
    what = f"atlas --sample 1000 unit {ATLAS_UNIT}"
    if entry["quantiles"] != sampled[0][1]["quantiles"]:
        failures.append(f"{what}: the quantiles differ with the other units read: {entry['quantiles']} and {sampled[0][1]['quantiles']}")
    errors = {e["level"]: e["error"] for e in got["quantile_method"].get("rank_errors", [])}
    for band in entry["quantiles"]:
        for level, x in ((band["from"], band["low"]), (band["to"], band["high"])):
            if level not in errors:
                failures.append(f"{what}: no rank error stated for level {level}")
                continue
            below, at_most = float((values < x).mean()), float((values <= x).mean())
            if at_most < level - errors[level] or below > level + errors[level]:
                failures.append(f"{what}: quantile {level} = {x} is the corpus's at {below:.4f} to {at_most:.4f}, "
                                f"outside ± {errors[level]:.4f}")
    close(f"{what} histogram's right end", entry["histogram"]["high"], float(values.max()))
print(f"atlas: unit {ATLAS_UNIT} of layer {ATLAS_LAYER} over {len(values)} activations, exact and sampled")
for line in failures[:20]:
    print("FAIL:", line)
print(f"{len(failures)} failures over {L} layers, {len(texts)} texts")
sys.exit(1 if failures else 0)
