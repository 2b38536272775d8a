#!/usr/bin/env python3
"""`ffn-trace run --prompt`'s interventions at a position (--intervene) and its view of every layer
(--layer all), against NumPy float64 on the shipped GPT-2 models, computed here from the
safetensors alone.

Interventions: the prediction after each change equals a rerun with the weights changed to give
the same effect (a unit zeroed at every token is its W2 row zeroed, and equals --ablate; a unit set
to v at every token is its W2 row zeroed and v · W2[j] added to b2), the changed checkpoint written
here as F64 and run by the tool; and a change at one token (scaled, set, zeroed) against the forward
pass written here with the same change; a mean ablation's mean against the mean over the corpus's
tokens computed here (the corpus tokenized by the training script's own BPE, as
tests/units/units_reference.py does).

Every layer: at the last token, the lens before and after each layer's FFN (top tokens, the
target's logit and probability), the FFN's push (every unit's a_j · (W2[j] · g) / σ summed, g the
final LayerNorm's γ ⊙ U[target] less its mean, σ at the stream leaving that FFN), the top units, and
the lens's top token after each layer at every token.

Usage: layers_intervene_reference_test.py FFN_TRACE DATA_DIR TRAIN_SCRIPT WORK_DIR   (exit 77 without numpy)
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "locate"))
from reference_model import gelu_new, layer_norm, model, softmax  # noqa: E402

ft, data, train_script, work = sys.argv[1:5]
os.makedirs(work, exist_ok=True)
failures = []
capitals = os.path.join(data, "models", "capitals")
atlas = os.path.join(data, "models", "atlas")
PROMPT = "The capital of France is"


def close(name, got, want, tol=1e-9):
    if not abs(got - want) <= tol * max(1.0, abs(want)):
        failures.append(f"{name}: ffn-trace {got!r}, NumPy {want!r}")


def tool(directory, *args):
    r = subprocess.run([ft, "run", "--checkpoint", directory, *args, "--format", "json"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"ffn-trace run {' '.join(args)} failed ({r.returncode}): {r.stderr}")
    return json.loads(r.stdout)


def hidden(m, layer, x):
    """GPT-2's FFN of block `layer` on the stream x (T, d): the values fed to W2."""
    w = m.w
    h = layer_norm(x, w[f"h.{layer}.ln_2.weight"], w[f"h.{layer}.ln_2.bias"], m.eps)
    return gelu_new(h @ w[f"h.{layer}.mlp.c_fc.weight"] + w[f"h.{layer}.mlp.c_fc.bias"])


def forward(m, ids, layer=None, change=None, changes=None):
    """The streams of every block (resid_mid, resid_post) and the last token's probabilities; at
    `layer`, change(a) alters the values fed to W2 in place (at each layer l of `changes`, changes[l])."""
    changes = changes or ({layer: change} if change else {})
    w = m.w
    x = m.embed(ids)[None]
    mids, posts = [], []
    for l in range(m.L):
        mid = x + m.attention(l, x)
        a = hidden(m, l, mid[0])
        if l in changes:
            changes[l](a)
        x = mid + (a @ w[f"h.{l}.mlp.c_proj.weight"] + w[f"h.{l}.mlp.c_proj.bias"])[None]
        mids.append(mid[0])
        posts.append(x[0])
    return mids, posts, softmax(lens_logits(m, x[0][-1]))


def lens_logits(m, v):
    return layer_norm(v, m.w["ln_f.weight"], m.w["ln_f.bias"], m.eps) @ m.embedding.T


def check_prediction(case, got, probs):
    """The changed run's top tokens (prediction) against NumPy's probabilities."""
    for e in got["prediction"]["top"]:
        close(f"{case}: P({e['token']!r})", e["prob"], probs[e["id"]], 1e-8)
    if got["prediction"]["top"][0]["id"] != int(np.argmax(probs)):
        failures.append(f"{case}: the top token is {got['prediction']['top'][0]['token']!r}, NumPy's id {int(np.argmax(probs))}")


# ---- a checkpoint with its weights changed, written as F64 ---------------------------------------

def write_changed(directory, out, change):
    """directory's checkpoint with change(tensors) applied, every tensor stored as F64 under its own name."""
    raw = open(os.path.join(directory, "model.safetensors"), "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    stripped = {name: name.removeprefix("transformer.").removeprefix("model.") for name in header if name != "__metadata__"}
    tensors = model(directory).w
    change(tensors)
    head, body = {}, b""
    for name, short in stripped.items():
        b = np.ascontiguousarray(tensors[short], dtype="<f8").tobytes()
        head[name] = {"dtype": "F64", "shape": list(tensors[short].shape), "data_offsets": [len(body), len(body) + len(b)]}
        body += b
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    for f in ("config.json", "tokenizer.json"):
        shutil.copy(os.path.join(directory, f), out)
    text = json.dumps(head).encode()
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + body)


def same_predictions(case, got, want):
    """Two runs' changed predictions, token by token."""
    for a, b in zip(got["prediction"]["top"], want["prediction"]["top"]):
        if a["id"] != b["id"]:
            failures.append(f"{case}: {a['token']!r} where the changed weights give {b['token']!r}")
        close(f"{case}: P({a['token']!r})", a["prob"], b["prob"], 1e-9)


def check_interventions(directory, layer, unit, token, s, v):
    m = model(directory)
    name = os.path.basename(directory)
    c_proj = f"h.{layer}.mlp.c_proj"

    def zeroed(t):
        t[c_proj + ".weight"][unit] = 0

    def set_to(value):
        def change(t):
            t[c_proj + ".bias"] = t[c_proj + ".bias"] + value * t[c_proj + ".weight"][unit]
            t[c_proj + ".weight"][unit] = 0
        return change

    base = ["--layer", str(layer), "--prompt", PROMPT]
    # Zeroed at every token: --ablate J, and J's W2 row zeroed.
    got = tool(directory, *base, "--intervene", f"{unit}=0")
    same_predictions(f"{name}: {unit}=0 against --ablate {unit}", got, tool(directory, *base, "--ablate", str(unit)))
    write_changed(directory, os.path.join(work, "zeroed"), zeroed)
    same_predictions(f"{name}: {unit}=0 against W2[{unit}] = 0", got, tool(os.path.join(work, "zeroed"), *base))
    # Set to v at every token: W2[j] = 0 and b2 + v · W2[j].
    got = tool(directory, *base, "--intervene", f"{unit}={v}")
    write_changed(directory, os.path.join(work, "set"), set_to(v))
    same_predictions(f"{name}: {unit}={v} against b2 + {v} · W2[{unit}]", got, tool(os.path.join(work, "set"), *base))
    # At one token: scaled, set, zeroed, against the forward pass with the same change.
    ids = got["prompt"]["token_ids"]
    for spec, change in ((f"{unit}@{token}*{s}", lambda a: a.__setitem__((token, unit), a[token, unit] * s)),
                         (f"{unit}@{token}={v}", lambda a: a.__setitem__((token, unit), v)),
                         (f"{unit}@last=0", lambda a: a.__setitem__((len(ids) - 1, unit), 0.0))):
        got = tool(directory, *base, "--intervene", spec)
        check_prediction(f"{name}: {spec}", got, forward(m, ids, layer, change)[2])
        iv = got["interventions"][0]
        if iv["unit"] != unit or iv["token"] != (len(ids) - 1 if "last" in spec else token):
            failures.append(f"{name}: {spec}'s JSON names unit {iv['unit']} at token {iv['token']}")
    # Two at once, in order: scaled at one token, then set at every token.
    got = tool(directory, *base, "--intervene", f"{unit}@{token}*{s}", "--intervene", f"{unit + 1}={v}")

    def both(a):
        a[token, unit] *= s
        a[:, unit + 1] = v
    check_prediction(f"{name}: two interventions", got, forward(m, ids, layer, both)[2])


# ---- the mean over a corpus ---------------------------------------------------------------------

def load_tokenizer(directory):
    """The training script's byte-level BPE, its definitions read out of the script (no torch), fed
    the model's own merges."""
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
    tj = json.load(open(os.path.join(directory, "tokenizer.json"), encoding="utf-8"))
    merges = [tuple(x.split(" ")) if isinstance(x, str) else tuple(x) for x in tj["model"]["merges"]]
    return ns["Tokenizer"](merges)


def check_mean(directory, layer, unit, lines):
    m = model(directory)
    tok = load_tokenizer(directory)
    corpus = os.path.join(work, "corpus.txt")
    open(corpus, "w", encoding="utf-8").write("\n".join(lines) + "\n")
    values = []
    for line in lines:
        ids = tok.encode(line)
        values.extend(forward_hidden(m, ids, layer)[:, unit])
    mean = float(np.mean(values))
    got = tool(directory, "--layer", str(layer), "--prompt", PROMPT, "--intervene", f"{unit}=mean", "--corpus", corpus)
    iv = got["interventions"][0]
    name = os.path.basename(directory)
    close(f"{name}: unit {unit}'s mean over the corpus", iv["value"], mean, 1e-9)
    if iv["mean_over"]["tokens"] != len(values) or iv["mean_over"]["texts"] != len(lines):
        failures.append(f"{name}: the mean over {iv['mean_over']}, NumPy's over {len(lines)} texts, {len(values)} tokens")
    ids = got["prompt"]["token_ids"]
    check_prediction(f"{name}: {unit}=mean", got, forward(m, ids, layer, lambda a: a.__setitem__((slice(None), unit), mean))[2])


def forward_hidden(m, ids, layer):
    x = m.embed(ids)[None]
    for l in range(layer):
        x = x + m.attention(l, x)
        x = x + m.ffn(l, x)
    return hidden(m, layer, (x + m.attention(layer, x))[0])


# ---- every layer --------------------------------------------------------------------------------

def check_layers(directory, prompt, top=5, versus=None, args=(), changes=None):
    """With `args` (--ablate L:J, --intervene L:J…) and the same `changes` made here (layer: a
    function altering the values fed to W2), every reading is the changed run's, the target the
    unchanged model's."""
    m = model(directory)
    w = m.w
    got = tool(directory, "--layer", "all", "--prompt", prompt, "--top", str(top), *(["--versus", versus] if versus else []), *args)
    ids = got["prompt"]["token_ids"]
    mids, posts, probs = forward(m, ids, changes=changes)
    unchanged = forward(m, ids)[2] if changes else probs
    target = int(np.argmax(unchanged))
    name = f"{os.path.basename(directory)} {prompt!r} {' '.join(args)}"
    if changes:
        check_prediction(name, got, probs)
        for e in got["baseline_prediction"]["top"]:
            close(f"{name}: unchanged P({e['token']!r})", e["prob"], unchanged[e["id"]], 1e-8)
        for c in got["changes"]:
            close(f"{name}: {c['token']!r} before", c["before"], unchanged[c["id"]], 1e-8)
            close(f"{name}: {c['token']!r} after", c["after"], probs[c["id"]], 1e-8)
    if got["target"]["id"] != target:
        failures.append(f"{name}: target {got['target']}, NumPy's id {target}")
    u = m.embedding[target] - (m.embedding[got["versus"]["id"]] if versus else 0)
    g = w["ln_f.weight"] * u
    g = g - g.mean()
    if len(got["layers"]) != m.L:
        failures.append(f"{name}: {len(got['layers'])} layers, the model has {m.L}")
    for l, e in enumerate(got["layers"]):
        case = f"{name} layer {l}"
        for key, v in (("before", mids[l][-1]), ("after", posts[l][-1])):
            z = lens_logits(m, v)
            p = softmax(z)
            close(f"{case}: the target's logit {key}", e[f"target_{key}"]["logit"], z[target])
            close(f"{case}: the target's probability {key}", e[f"target_{key}"]["prob"], p[target])
            order = np.argsort(-z, kind="stable")[:top]
            if [t["id"] for t in e[f"lens_{key}"]] != list(order):
                failures.append(f"{case}: lens {key} {[t['id'] for t in e[f'lens_{key}']]}, NumPy's {list(order)}")
            for t in e[f"lens_{key}"]:
                close(f"{case}: lens {key} P({t['token']!r})", t["prob"], p[t["id"]])
        a = hidden(m, l, mids[l])
        if changes and l in changes:
            changes[l](a)
        a = a[-1]
        y = posts[l][-1]
        sigma = np.sqrt(((y - y.mean()) ** 2).mean() + m.eps)
        scores = a * (w[f"h.{l}.mlp.c_proj.weight"] @ g) / sigma
        close(f"{case}: the FFN's push", e["push"], scores.sum())
        order = np.argsort(-scores, kind="stable")[:top]
        if [u["unit"] for u in e["units"]] != list(order):
            failures.append(f"{case}: units {[u['unit'] for u in e['units']]}, NumPy's {list(order)}")
        for u in e["units"]:
            close(f"{case}: unit {u['unit']}'s score", u["score"], scores[u["unit"]])
        for t in range(len(ids)):
            p = softmax(lens_logits(m, posts[l][t]))
            cell = got["lens_grid"][t][l]
            if cell["id"] != int(np.argmax(p)):
                failures.append(f"{case}: the grid's token {t} is {cell['token']!r}, NumPy's id {int(np.argmax(p))}")
            close(f"{case}: the grid's P at token {t}", cell["prob"], p.max())


check_interventions(capitals, 0, 172, 4, 0.5, 1.5)
check_interventions(capitals, 0, 84, 3, -2.0, 0.25)
check_interventions(atlas, 1, 168, 4, 0.25, 2.0)
check_mean(capitals, 0, 172, open(os.path.join(capitals, "corpus.txt"), encoding="utf-8").read().splitlines()[:40])
check_layers(capitals, PROMPT)
check_layers(capitals, "The capital of Indonesia is")
check_layers(capitals, PROMPT, versus=" Tokyo")
check_layers(atlas, PROMPT)
check_layers(atlas, PROMPT, args=("--ablate", "1:168,1:180", "--intervene", "0:172@last*2.5"),
             changes={1: lambda a: a.__setitem__((slice(None), [168, 180]), 0), 0: lambda a: a.__setitem__((-1, 172), a[-1, 172] * 2.5)})
check_layers(capitals, PROMPT, args=("--intervene", "1:3=1.5", "--ablate", "0:172"),
             changes={0: lambda a: a.__setitem__((slice(None), 172), 0), 1: lambda a: a.__setitem__((slice(None), 3), 1.5)})
check_layers(atlas, " ".join(open(os.path.join(atlas, "corpus.txt")).readline().split()[:-1]))

for f in failures:
    print(f)
print(f"{len(failures)} failure(s)" if failures else "every intervention and every layer's reading equals NumPy float64's")
sys.exit(1 if failures else 0)
