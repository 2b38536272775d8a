#!/usr/bin/env python3
"""`ffn-trace transcoder train` against NumPy float64: the written files read byte by byte and the
replacement measured again here, with this script's own GPT-2 forward pass.

The tool trains small transcoders of data/models/atlas's layer 1 over the corpus's first texts,
TopK and ReLU with L1. This script reads each folder the tool wrote (config.json and
layer_1.safetensors, as circuit-tracer's SingleLayerTranscoder loads them) and checks:
  - the tensors' names and shapes: W_enc (F, d), b_enc (F), W_dec (F, d), b_dec (d), and the
    config's layer, hooks, activation and k;
  - the JSON's evaluation, recomputed from the files with the FFN's output at every token replaced
    by 0, by the transcoder's ŷ and by ŷ + (y − ŷ): loss_clean, loss_zeroed, loss_spliced,
    loss_recovered and top1_agreement, to 1e-9;
  - the error term added back gives the clean model's loss;
  - the same seed gives the same files byte for byte on one thread of the matrix library and on
    two, and the JSON's epochs are the same;
  - run --prompt --transcoder on a folder written by hand (tests/inputs/transcoder/atlas_layer1):
    at every token the active features (id, activation), ŷ, the error y − ŷ, and each feature's
    push z_f · (W_dec[f] · g) / σ on the predicted token, g = γ_f ⊙ U[t] less its mean and σ the
    final LayerNorm's scale at the stream after the layer, to 1e-9;
  - units --transcoder on the same folder over the corpus: each feature's max, mean, share active,
    its largest activations, and the tokens its decoder row promotes and suppresses through γ_f and
    the unembedding, to 1e-9;
  - units --unit J --split on the same folder: the features whose decoder rows align most with
    unit J's W2 row (their cosines, largest first) and each one's z at the unit's examples.
  - a Mixture of Experts replaced whole (the tests' small Mixtral, layer 1): a transcoder trained
    there, its replacement's losses from the files, run --transcoder at every token (x̂ the
    router's and experts' input, y their combined output), units --transcoder and units --unit
    E:J --split, to 1e-9.

Usage: reference_test.py FFN_TRACE DATA_DIR WORK_DIR   (exit 77 without numpy)
"""
import json
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    print("skipped: no numpy (scripts/install-deps.sh installs python3-numpy)")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "locate"))
from reference_model import layer_norm, model  # noqa: E402

ft, data, work = sys.argv[1:4]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
failures = []
atlas = os.path.join(data, "models", "atlas")
LAYER = 1

texts = [line for line in open(os.path.join(atlas, "corpus.txt"), encoding="utf-8").read().split("\n") if line.strip()][:60]
corpus = os.path.join(work, "corpus.txt")
with open(corpus, "w", encoding="utf-8") as f:
    f.write("\n".join(texts) + "\n")


def close(name, got, want, tol):
    got, want = np.asarray(got, float), np.asarray(want, float)
    diff = float(np.max(np.abs(got - want))) if got.size else 0.0
    if got.shape != want.shape or not diff <= tol:
        failures.append(f"{name}: max difference {diff:.3g} over {tol:g} (shapes {got.shape}, {want.shape}; got {got}, want {want})")


def train(out, *extra, env=None):
    args = [ft, "transcoder", "train", "--checkpoint", atlas, "--layer", str(LAYER), "--corpus", corpus, "-o", out,
            "--format", "json", "--epochs", "3", "--seed", "7", *extra]
    r = subprocess.run(args, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"{' '.join(args)} exited {r.returncode}: {r.stderr}")
    return json.loads(r.stdout)


def ids_of(text):
    r = subprocess.run([ft, "tokenize", "--checkpoint", atlas, "--format", "json", text], capture_output=True, text=True, check=True)
    return json.loads(r.stdout)["token_ids"]


m = model(atlas)
token_ids = [ids_of(t) for t in texts]


def logits(ids, replace=None):
    """Every position's logits (T, vocab), layer LAYER's FFN output replaced by replace(x̂, y)."""
    x = m.embed(ids)[None]
    for l in range(m.L):
        x = x + m.attention(l, x)
        y = m.ffn(l, x)
        if l == LAYER and replace is not None:
            w = m.w
            h = layer_norm(x, w[f"h.{l}.ln_2.weight"], w[f"h.{l}.ln_2.bias"], m.eps)
            y = replace(h[0], y[0])[None]
        x = x + y
    f = layer_norm(x[0], m.w["ln_f.weight"], m.w["ln_f.bias"], m.eps)
    return f @ m.embedding.T


def loss_and_top(z, ids):
    z = z[:-1]
    z = z - z.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return -logp[np.arange(len(ids) - 1), ids[1:]].sum(), z.argmax(-1)


def check(name, out, report, topk):
    config = json.load(open(os.path.join(out, "config.json")))
    from reference_model import read_safetensors
    t = read_safetensors(os.path.join(out, f"layer_{LAYER}.safetensors"))
    F, d = report["transcoder"]["features"], m.d
    for key, shape in {"W_enc": (F, d), "b_enc": (F,), "W_dec": (F, d), "b_dec": (d,)}.items():
        if t[key].shape != shape:
            failures.append(f"{name}: {key} has shape {t[key].shape}, expected {shape}")
    want_config = {"layer": LAYER, "feature_input_hook": f"blocks.{LAYER}.mlp_in", "feature_output_hook": f"blocks.{LAYER}.mlp_out",
                   "activation": "topk" if topk else "relu", "d_model": d, "d_transcoder": F}
    if topk:
        want_config["k"] = topk
    for key, value in want_config.items():
        if config.get(key) != value:
            failures.append(f"{name}: config.json {key} is {config.get(key)!r}, expected {value!r}")

    def y_hat(h):
        pre = h @ t["W_enc"].T + t["b_enc"]
        if topk:
            keep = np.argsort(-pre, axis=1, kind="stable")[:, :topk]
            z = np.zeros_like(pre)
            np.put_along_axis(z, keep, np.maximum(np.take_along_axis(pre, keep, 1), 0), 1)
        else:
            z = np.maximum(pre, 0)
        return z @ t["W_dec"] + t["b_dec"]

    sums = {"clean": 0.0, "zeroed": 0.0, "spliced": 0.0, "error": 0.0}
    agree = predictions = 0
    for ids in token_ids:
        if len(ids) < 2:
            continue
        clean, top_clean = loss_and_top(logits(ids), ids)
        sums["clean"] += clean
        sums["zeroed"] += loss_and_top(logits(ids, lambda h, y: np.zeros_like(y)), ids)[0]
        spliced, top = loss_and_top(logits(ids, lambda h, y: y_hat(h)), ids)
        sums["spliced"] += spliced
        sums["error"] += loss_and_top(logits(ids, lambda h, y: y_hat(h) + (y - y_hat(h))), ids)[0]
        agree += int((top == top_clean).sum())
        predictions += len(ids) - 1
    e = report["evaluation"]
    got = {k: v / predictions for k, v in sums.items()}
    close(f"{name}: loss_clean", e["loss_clean"], got["clean"], 1e-9)
    close(f"{name}: loss_zeroed", e["loss_zeroed"], got["zeroed"], 1e-9)
    close(f"{name}: loss_spliced", e["loss_spliced"], got["spliced"], 1e-9)
    close(f"{name}: loss_recovered", e["loss_recovered"], (got["zeroed"] - got["spliced"]) / (got["zeroed"] - got["clean"]), 1e-8)
    close(f"{name}: top1_agreement", e["top1_agreement"], agree / predictions, 1e-12)
    close(f"{name}: the error term added back gives the clean loss", e["loss_with_error"], got["clean"], 1e-9)
    if e["predictions"] != predictions:
        failures.append(f"{name}: {e['predictions']} predictions, expected {predictions}")
    if len(report["epochs"]) != 3:
        failures.append(f"{name}: {len(report['epochs'])} epochs reported, expected 3")


topk_out = os.path.join(work, "topk")
one = dict(os.environ, OPENBLAS_NUM_THREADS="1")
two = dict(os.environ, OPENBLAS_NUM_THREADS="2")
report = train(topk_out, "--features", "96", "--k", "6", env=one)
check("topk", topk_out, report, 6)
relu_out = os.path.join(work, "relu")
check("relu", relu_out, train(relu_out, "--features", "64", "--l1", "0.001"), 0)

again = os.path.join(work, "topk-two-threads")
report_two = train(again, "--features", "96", "--k", "6", env=two)
name = f"layer_{LAYER}.safetensors"
if open(os.path.join(topk_out, name), "rb").read() != open(os.path.join(again, name), "rb").read():
    failures.append("the same seed on one thread and on two wrote different tensors")
if report["epochs"] != report_two["epochs"]:
    failures.append("the same seed on one thread and on two reported different epochs")



def run_transcoder(folder, prompt):
    r = subprocess.run([ft, "run", "--checkpoint", atlas, "--layer", str(LAYER), "--prompt", prompt, "--transcoder", folder,
                        "--format", "json"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"run --transcoder exited {r.returncode}: {r.stderr}")
    got = json.loads(r.stdout)["transcoder"]
    from reference_model import read_safetensors
    t = read_safetensors(os.path.join(folder, f"layer_{LAYER}.safetensors"))
    ids = ids_of(prompt)
    x = m.embed(ids)[None]
    for l in range(LAYER + 1):
        x = x + m.attention(l, x)
        h = layer_norm(x, m.w[f"h.{l}.ln_2.weight"], m.w[f"h.{l}.ln_2.bias"], m.eps)[0]
        y = m.ffn(l, x)[0]
        x = x + y[None]
    after = x[0]
    final = logits(ids)
    target = int(final[-1].argmax())
    if got["target"]["id"] != target:
        failures.append(f"run --transcoder: target {got['target']['id']}, expected {target}")
    g = m.w["ln_f.weight"] * m.embedding[target]
    g = g - g.mean()
    pre = h @ t["W_enc"].T + t["b_enc"]
    z = np.maximum(pre, 0)
    y_hat = z @ t["W_dec"] + t["b_dec"]
    for i, token in enumerate(got["tokens"]):
        sigma = np.sqrt(after[i].var() + m.eps)
        active = [f for f in np.argsort(-z[i], kind="stable") if z[i, f] > 0]
        if [f["id"] for f in token["features"]] != [int(f) for f in active]:
            failures.append(f"run --transcoder: token {i}'s active features {[f['id'] for f in token['features']]}, expected {active}")
            continue
        close(f"run --transcoder: token {i}'s activations", [f["activation"] for f in token["features"]], z[i, active], 1e-9)
        close(f"run --transcoder: token {i}'s pushes", [f["push"] for f in token["features"]],
              z[i, active] * (t["W_dec"][active] @ g) / sigma, 1e-9)
        close(f"run --transcoder: token {i}'s ŷ", token["y_hat"], y_hat[i], 1e-9)
        close(f"run --transcoder: token {i}'s error", token["error"], y[i] - y_hat[i], 1e-9)
        close(f"run --transcoder: token {i}'s FFN push", token["ffn_push"], y[i] @ g / sigma, 1e-9)


run_transcoder(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "inputs", "transcoder", "atlas_layer1"),
               "The capital of France is")


def split_check(folder, t, zs, unit=5):
    r = subprocess.run([ft, "units", "--checkpoint", atlas, "--layer", str(LAYER), "--unit", str(unit), "--split", folder, "--corpus",
                        corpus, "--format", "json", "--top", "4"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"units --split exited {r.returncode}: {r.stderr}")
    got = json.loads(r.stdout)["split"]
    w2 = m.w[f"h.{LAYER}.mlp.c_proj.weight"][unit]  # Conv1D (d_ff, d_model): unit j's row
    cos = t["W_dec"] @ w2 / (np.linalg.norm(t["W_dec"], axis=1) * np.linalg.norm(w2))
    best = np.argsort(-cos, kind="stable")[:8]
    if [f["id"] for f in got["features"]] != [int(i) for i in best]:
        failures.append(f"units --split: features {[f['id'] for f in got['features']]}, expected {best}")
        return
    close("units --split: cosines", [f["cosine"] for f in got["features"]], cos[best], 1e-9)
    for f in got["features"]:
        close(f"units --split: feature {f['id']} at the unit's examples", f["at_examples"],
              [zs[e["text"]][e["token"], f["id"]] for e in got["examples"]], 1e-9)


def feature_pages(folder):
    r = subprocess.run([ft, "units", "--checkpoint", atlas, "--transcoder", folder, "--corpus", corpus, "--format", "json",
                        "--top", "3"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"units --transcoder exited {r.returncode}: {r.stderr}")
    got = json.loads(r.stdout)
    from reference_model import read_safetensors
    t = read_safetensors(os.path.join(folder, f"layer_{LAYER}.safetensors"))
    zs = []
    for ids in token_ids:
        x = m.embed(ids)[None]
        for l in range(LAYER + 1):
            x = x + m.attention(l, x)
            h = layer_norm(x, m.w[f"h.{l}.ln_2.weight"], m.w[f"h.{l}.ln_2.bias"], m.eps)[0]
            x = x + m.ffn(l, x)
        zs.append(np.maximum(h @ t["W_enc"].T + t["b_enc"], 0))
    split_check(folder, t, zs)
    z = np.concatenate(zs)
    # each decoder row as a unit's W2 row is read: through the final LayerNorm, less its mean, times γ
    centred = t["W_dec"] - t["W_dec"].mean(axis=1, keepdims=True)
    scores = (m.embedding * m.w["ln_f.weight"]) @ centred.T  # (vocab, features)
    if not got.get("features") or len(got["units"]) != t["W_enc"].shape[0]:
        failures.append("units --transcoder: expected every feature, marked as features")
        return
    for u in got["units"]:
        f = u["unit"]
        close(f"units --transcoder: feature {f}'s max", u["max"], z[:, f].max(), 1e-9)
        close(f"units --transcoder: feature {f}'s mean", u["mean"], z[:, f].mean(), 1e-9)
        close(f"units --transcoder: feature {f}'s share active", u["fraction_active"], (z[:, f] > 0).mean(), 1e-12)
        close(f"units --transcoder: feature {f}'s largest activations", [c["activation"] for c in u["max_activating"]],
              np.sort(z[:, f])[::-1][:3], 1e-9)
        best = np.argsort(-scores[:, f], kind="stable")[:3]
        if [p["id"] for p in u["promotes"]] != [int(i) for i in best]:
            failures.append(f"units --transcoder: feature {f} promotes {[p['id'] for p in u['promotes']]}, expected {best}")
        close(f"units --transcoder: feature {f}'s promoted scores", [p["score"] for p in u["promotes"]], scores[best, f], 1e-9)
        worst = np.argsort(scores[:, f], kind="stable")[:3]
        close(f"units --transcoder: feature {f}'s suppressed scores", [p["score"] for p in u["suppresses"]], scores[worst, f], 1e-9)


feature_pages(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "inputs", "transcoder", "atlas_layer1"))


# ---- a Mixture of Experts replaced whole: the tests' small Mixtral (tests/inputs/checkpoints/mixtral_whole),
# its layer 1. x̂ is what the router and the experts read (the RMSNorm's output), y the experts'
# combined output. The replacement's losses, run --transcoder at every token and units --split of an
# expert's unit (E:J) against reference_model's Mixtral forward. --------------------------------------
from reference_model import read_safetensors, rms_norm  # noqa: E402

moe_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "inputs", "checkpoints", "mixtral_whole")
moe = model(moe_dir)
moe_texts = [t for t in open(os.path.join(moe_dir, "corpus.txt"), encoding="utf-8").read().split("\n") if t.strip()]
moe_ids = [json.loads(subprocess.run([ft, "tokenize", "--checkpoint", moe_dir, "--format", "json", t], capture_output=True,
                                     text=True, check=True).stdout)["token_ids"] for t in moe_texts]


def moe_forward(ids, replace=None):
    """The logits (T, vocab), x̂, y and the stream after the layer, the mixture's output replaced by replace(x̂, y)."""
    x = moe.embed(np.array(ids))[None]
    for l in range(moe.L):
        x = x + moe.attention(l, x)
        y = moe.ffn(l, x)
        if l == LAYER:
            h = rms_norm(x, moe.w[f"layers.{l}.post_attention_layernorm.weight"], moe.eps)[0]
            y_clean = y[0]
            if replace is not None:
                y = replace(h, y[0])[None]
        x = x + y
        if l == LAYER:
            after = x[0]
    return rms_norm(x[0], moe.w["norm.weight"], moe.eps) @ moe.head.T, h, y_clean, after


moe_out = os.path.join(work, "moe")
args = [ft, "transcoder", "train", "--checkpoint", moe_dir, "--layer", str(LAYER), "-o", moe_out, "--format", "json",
        "--features", "6", "--k", "2", "--epochs", "3", "--seed", "5", "--batch", "16"]
r = subprocess.run(args, capture_output=True, text=True)
if r.returncode != 0:
    sys.exit(f"{' '.join(args)} exited {r.returncode}: {r.stderr}")
moe_report = json.loads(r.stdout)
tm = read_safetensors(os.path.join(moe_out, f"layer_{LAYER}.safetensors"))


def moe_codes(h):
    pre = h @ tm["W_enc"].T + tm["b_enc"]
    keep = np.argsort(-pre, axis=1, kind="stable")[:, :2]
    z = np.zeros_like(pre)
    np.put_along_axis(z, keep, np.maximum(np.take_along_axis(pre, keep, 1), 0), 1)
    return z


sums, agree, predictions = {"clean": 0.0, "zeroed": 0.0, "spliced": 0.0}, 0, 0
for ids in moe_ids:
    if len(ids) < 2:
        continue
    clean, top_clean = loss_and_top(moe_forward(ids)[0], ids)
    sums["clean"] += clean
    sums["zeroed"] += loss_and_top(moe_forward(ids, lambda h, y: np.zeros_like(y))[0], ids)[0]
    spliced, top = loss_and_top(moe_forward(ids, lambda h, y: moe_codes(h) @ tm["W_dec"] + tm["b_dec"])[0], ids)
    sums["spliced"] += spliced
    agree += int((top == top_clean).sum())
    predictions += len(ids) - 1
e = moe_report["evaluation"]
want = {k: v / predictions for k, v in sums.items()}
for k in ("clean", "zeroed", "spliced"):
    close(f"MoE: loss_{k}", e[f"loss_{k}"], want[k], 1e-9)
close("MoE: loss_recovered", e["loss_recovered"], (want["zeroed"] - want["spliced"]) / (want["zeroed"] - want["clean"]), 1e-8)
close("MoE: top1_agreement", e["top1_agreement"], agree / predictions, 1e-12)

# run --transcoder on the mixture: each token's features, ŷ, error and pushes through the final RMSNorm
# (g = γ_f ⊙ U[t], σ = √(mean x² + ε) at the stream after the layer)
prompt = moe_texts[0]
r = subprocess.run([ft, "run", "--checkpoint", moe_dir, "--layer", str(LAYER), "--prompt", prompt, "--transcoder", moe_out,
                    "--format", "json"], capture_output=True, text=True)
if r.returncode != 0:
    sys.exit(f"run --transcoder on the Mixtral exited {r.returncode}: {r.stderr}")
got = json.loads(r.stdout)["transcoder"]
final, h, y, after = moe_forward(moe_ids[0])
target = got["target"]["id"]
if target != int(final[-1].argmax()):
    failures.append(f"MoE run --transcoder: target {target}, expected {int(final[-1].argmax())}")
g = moe.w["norm.weight"] * moe.head[target]
z = moe_codes(h)
y_hat = z @ tm["W_dec"] + tm["b_dec"]
for i, token in enumerate(got["tokens"]):
    sigma = np.sqrt((after[i] ** 2).mean() + moe.eps)
    active = [int(f) for f in np.argsort(-z[i], kind="stable") if z[i, f] > 0]
    if [f["id"] for f in token["features"]] != active:
        failures.append(f"MoE run --transcoder: token {i}'s features {[f['id'] for f in token['features']]}, expected {active}")
        continue
    close(f"MoE run --transcoder: token {i}'s activations", [f["activation"] for f in token["features"]], z[i, active], 1e-9)
    close(f"MoE run --transcoder: token {i}'s pushes", [f["push"] for f in token["features"]],
          z[i, active] * (tm["W_dec"][active] @ g) / sigma, 1e-9)
    close(f"MoE run --transcoder: token {i}'s x̂", token["x_hat"], h[i], 1e-9)
    close(f"MoE run --transcoder: token {i}'s y, the experts' combined output", token["y"], y[i], 1e-9)
    close(f"MoE run --transcoder: token {i}'s error", token["error"], y[i] - y_hat[i], 1e-9)
    close(f"MoE run --transcoder: token {i}'s FFN push", token["ffn_push"], y[i] @ g / sigma, 1e-9)
close("MoE run --transcoder: the units' push at the last token is the FFN's", got["units_push"], got["tokens"][-1]["ffn_push"], 1e-9)

# units --unit E:J --split: cosines with expert E's W2 row, and each feature's z at the unit's examples
moe_corpus = os.path.join(moe_dir, "corpus.txt")
E, J = 1, 3
r = subprocess.run([ft, "units", "--checkpoint", moe_dir, "--layer", str(LAYER), "--unit", f"{E}:{J}", "--split", moe_out,
                    "--format", "json", "--top", "4"], capture_output=True, text=True)
if r.returncode != 0:
    sys.exit(f"units --split on the Mixtral exited {r.returncode}: {r.stderr}")
got = json.loads(r.stdout)["split"]
if (got.get("expert"), got["unit"]) != (E, J):
    failures.append(f"MoE units --split: names expert {got.get('expert')} unit {got['unit']}, expected {E}:{J}")
w2 = moe.w[f"layers.{LAYER}.block_sparse_moe.experts.{E}.w2.weight"][:, J]  # (d_model, d_ff): unit J's column
cos = tm["W_dec"] @ w2 / (np.linalg.norm(tm["W_dec"], axis=1) * np.linalg.norm(w2))
best = np.argsort(-cos, kind="stable")
if [f["id"] for f in got["features"]] != [int(i) for i in best]:
    failures.append(f"MoE units --split: features {[f['id'] for f in got['features']]}, expected {best}")
else:
    close("MoE units --split: cosines", [f["cosine"] for f in got["features"]], cos[best], 1e-9)
    zs = [moe_codes(moe_forward(ids)[1]) for ids in moe_ids]
    for f in got["features"]:
        close(f"MoE units --split: feature {f['id']} at the unit's examples", f["at_examples"],
              [zs[ex["text"]][ex["token"], f["id"]] for ex in got["examples"]], 1e-9)
# units --transcoder on the mixture: each feature's max, mean and the tokens its decoder row promotes
# through the final RMSNorm's γ and the head
r = subprocess.run([ft, "units", "--checkpoint", moe_dir, "--transcoder", moe_out, "--format", "json", "--top", "2"],
                   capture_output=True, text=True)
if r.returncode != 0:
    sys.exit(f"units --transcoder on the Mixtral exited {r.returncode}: {r.stderr}")
pages = json.loads(r.stdout)["units"]
z_all = np.concatenate([moe_codes(moe_forward(ids)[1]) for ids in moe_ids])
scores = (tm["W_dec"] * moe.w["norm.weight"]) @ moe.head.T  # (features, vocab)
if [u["unit"] for u in pages] != list(range(tm["W_dec"].shape[0])):
    failures.append(f"MoE units --transcoder: features {[u['unit'] for u in pages]}")
for u in pages:
    f = u["unit"]
    close(f"MoE units --transcoder: feature {f}'s max", u["max"], z_all[:, f].max(), 1e-9)
    close(f"MoE units --transcoder: feature {f}'s mean", u["mean"], z_all[:, f].mean(), 1e-9)
    best = np.argsort(-scores[f], kind="stable")[:2]
    close(f"MoE units --transcoder: feature {f}'s promoted scores", [p["score"] for p in u["promotes"]], scores[f, best], 1e-9)
print(f"MoE: {predictions} predictions, loss recovered {e['loss_recovered']:.4f}; run --transcoder at {len(y)} tokens; "
      f"--split of {E}:{J} over {len(got['examples'])} examples")

for f in failures:
    print("FAIL", f)
print(f"{len(failures)} failure(s)" if failures else "transcoder: the files and the replacement equal NumPy float64's")
sys.exit(1 if failures else 0)
