#!/usr/bin/env python3
"""`ffn-trace locate` against causal tracing written plainly in NumPy float64, fed the same noise.

For each case the tool's JSON gives the prompt's token ids, the subject's positions, the target and
the noise draws ε it used; this script reads the checkpoint's safetensors itself, runs the model
its own way (Hugging Face's modelling code as the specification: GPT-2, and the Llama family with
RMSNorm, rotate-half RoPE, grouped-query heads, Qwen2's q/k/v biases, Mistral's sliding window and
Mixtral's top-2 experts), and recomputes every number: σ, P_clean, P_corrupted and each cell of the
three grids, every restore run from the embeddings with no cache, with the clean run's stream (state),
FFN output (mlp) or attention output (attn) put back at one token in each layer of the window.

The Llama-family checkpoints are written here into the work folder, with a tokenizer.json of whole
words after a begin-of-text token (so that the subject does not start at token 0).

Usage: reference_test.py FFN_TRACE DATA_DIR TOKENIZERS_DIR WORK_DIR   (exit 77 without numpy)
"""
import json
import math
import os
import struct
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    print("skipped: no numpy (scripts/install-deps.sh installs python3-numpy)")
    sys.exit(77)

ft, data, tokenizers, work = sys.argv[1:5]
os.makedirs(work, exist_ok=True)
failures = []


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_model import gelu_new, layer_norm, model, read_safetensors, rms_norm, softmax, write_safetensors  # noqa: E402


def trace(m, got):
    """Every number of causal tracing, recomputed from the tool's ids, subject, target, versus and
    ε (or the corrupted prompt's ids), in the run's direction and metric."""
    ids = got["prompt"]["token_ids"]
    positions = got["subject"]["positions"]
    target = got["target"]["id"]
    x0 = m.embed(ids)[None]
    if got["corruption"]["kind"] == "noise":
        eps = np.array(got["noise"]["samples"], dtype=np.float64)  # S × subject tokens × d_model
        corrupted = np.repeat(x0, eps.shape[0], axis=0)
        corrupted[:, positions] += got["noise"]["scale"] * eps
    else:
        corrupted = m.embed(got["corruption"]["prompt"]["token_ids"])[None]
    S = corrupted.shape[0]
    p_clean, clean = m.run(x0.copy())
    p_corr, corr = m.run(corrupted.copy())
    versus = got["versus"]["id"] if "versus" in got else None
    metric = {"prob": lambda p: p[:, target],
              "logprob": lambda p: np.log(p[:, target]),
              "logit-diff": lambda p: np.log(p[:, target]) - np.log(p[:, versus])}[got["metric"]]
    noising = got["direction"] == "noising"
    # denoising: the corrupted runs, the clean values put back; noising: a clean run per sample,
    # each sample's corrupted values put back
    base, source = (np.repeat(x0, S, axis=0), corr) if noising else (corrupted, clean)
    T, L, w = len(ids), m.L, got["window"]
    grids = {}
    kinds = [(k, None) for k in ("state", "mlp", "attn")]
    kinds += [("state", k[len("severed_"):]) for k in got["grids"] if k.startswith("severed_")]
    for kind, sever in kinds:
        value = np.zeros((L, T))
        for l in range(L):
            layers = range(max(0, l - w // 2), min(L, l + (w + 1) // 2))
            for t in range(T):
                cut = (sever, set(range(l + 1, L)), t, corr) if sever else None
                value[l, t] = metric(m.run(base.copy(), (kind, set(layers), t), source, cut)[0]).mean()
        grids["severed_" + sever if sever else kind] = value
    # AtP: (source − base) · ∂m/∂activation at the base run, the mean over the patched runs, as a
    # central difference along that direction: the base run with the activation at (l, t) moved by
    # ±h · (source − base); a window sums its layers
    atp = {}
    if "atp" in got["grids"]["state"]:
        h = 1e-4
        base_kept = m.run(base.copy())[1]
        for kind in ("state", "mlp", "attn"):
            single = np.zeros((L, T))
            for l in range(L):
                for t in range(T):
                    moved = {}
                    for sign in (1, -1):
                        shifted = {kind: [base_kept[kind][k] + sign * h * (source[kind][k] - base_kept[kind][k]) for k in range(L)]}
                        moved[sign] = metric(m.run(base.copy(), (kind, {l}, t), shifted)[0])
                    single[l, t] = ((moved[1] - moved[-1]) / (2 * h)).mean()
            atp[kind] = np.array([[sum(single[k, t] for k in range(max(0, l - w // 2), min(L, l + (w + 1) // 2)))
                                   for t in range(T)] for l in range(L)])
    units = None
    if "units_atp" in got:
        source_inputs = corrupted if noising else x0
        unpatched = metric(p_clean)[0] if noising else metric(p_corr).mean()
        units = unit_atp(m, got, base, source_inputs, metric, unpatched)
    return {"units": units, "sigma": m.embedding.std(), "top": int(np.argmax(p_clean[0])), "clean_prob": p_clean[0, target],
            "corrupted_prob": p_corr[:, target].mean(), "clean": metric(p_clean)[0], "corrupted": metric(p_corr).mean(),
            "corrupted_top": int(np.argmax(p_corr[0])), "grids": grids, "atp": atp, "S": S}


def unit_atp(m, got, base, source, metric, unpatched):
    """Each unit j of the layer's FFN, from the base and source runs' inputs (S or 1, T, d): AtP's
    estimate, the derivative of the metric along (source − base activation) in column j alone, at the
    base run, by a central difference; and the exact change, the base run with column j of the
    activations put back from the source at every token, minus the base run's own metric."""
    N, h = got["units_layer"], 1e-4
    S = max(base.shape[0], source.shape[0])
    base = np.repeat(base, S // base.shape[0], axis=0)

    def activations(x):
        m.units = {N: lambda a: a}
        m.run(x.copy())
        m.units = {}
        return m.kept_units[N]

    a_base = activations(base)
    a_source = np.repeat(activations(source), S // source.shape[0], axis=0)

    def moved(j, amount):
        def f(a):
            a = a.copy()
            a[:, :, j] = a_base[:, :, j] + amount * (a_source[:, :, j] - a_base[:, :, j])
            return a
        m.units = {N: f}
        value = metric(m.run(base.copy())[0]).mean()
        m.units = {}
        return value

    d_ff = a_base.shape[2]
    atp = np.array([(moved(j, h) - moved(j, -h)) / (2 * h) for j in range(d_ff)])
    exact = np.array([moved(j, 1.0) - unpatched for j in range(d_ff)])
    return atp, exact


def close(name, got, want, tol=1e-9):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        failures.append(f"{name}: shape {got.shape}, the reference's {want.shape}")
        return
    diff = np.abs(got - want).max() if got.size else 0.0
    if not diff <= tol:
        failures.append(f"{name}: differs from the reference by up to {diff:.3g} (tolerance {tol})")


def check(name, directory, args, expect):
    before = len(failures)
    run = subprocess.run([ft, "locate", "--checkpoint", directory, *args, "--format", "json"], capture_output=True, text=True)
    if run.returncode != 0:
        failures.append(f"{name}: exit {run.returncode}: {run.stderr.strip()}")
        return
    got = json.loads(run.stdout)
    m = model(directory)
    want = trace(m, got)
    keys = ["prompt", "subject", "target", "clean_prob", "corrupted_prob", "metric"] + (["versus"] if "versus" in got else []) + \
        ["clean_value", "corrupted_value", "direction", "corruption"] + (["noise"] if "noise" in got else []) + ["window", "grids"] + \
        (["units_layer", "units_atp"] if "units_atp" in got else [])
    if list(got) != keys:
        failures.append(f"{name}: top-level names {list(got)}, expected {keys}")
    grids = ["state", "mlp", "attn"] + [k for k in got["grids"] if k.startswith("severed_")]
    names = ["value", "effect", "normalised"]
    if list(got["grids"]) != grids or any(list(got["grids"][g])[:3] != names for g in grids) or \
            any(list(got["grids"][g])[3:] not in ([], ["delta", "atp"]) for g in grids):
        failures.append(f"{name}: grids names {list(got['grids'])}")
    if got["corruption"]["kind"] == "noise":
        if list(got["noise"]) != ["sigma", "scale", "samples"]:
            failures.append(f"{name}: noise names {list(got['noise'])}")
        eps = np.array(got["noise"]["samples"])
        if eps.shape != (expect["samples"], len(got["subject"]["positions"]), m.d):
            failures.append(f"{name}: noise samples of shape {eps.shape}")
        elif not (abs(eps.mean()) < 0.2 and 0.8 < eps.std() < 1.2):
            failures.append(f"{name}: ε is not standard normal: mean {eps.mean():.3f}, std {eps.std():.3f}")
        close(f"{name}: sigma", got["noise"]["sigma"], want["sigma"], 1e-12)
        close(f"{name}: scale", got["noise"]["scale"], expect.get("noise", 3 * want["sigma"]), 1e-12)
    if got["subject"]["positions"] != expect["positions"]:
        failures.append(f"{name}: subject at {got['subject']['positions']}, expected {expect['positions']}")
    if "target" in expect and got["target"]["token"] != expect["target"]:
        failures.append(f"{name}: target {got['target']['token']!r}, expected {expect['target']!r}")
    if "target" not in expect and got["target"]["id"] != want["top"]:
        failures.append(f"{name}: target {got['target']['id']}, the clean run's top is {want['top']}")
    if "versus" in expect and got["versus"]["token"] != expect["versus"]:
        failures.append(f"{name}: versus {got['versus']['token']!r}, expected {expect['versus']!r}")
    if expect.get("versus_is_corrupted_top") and got["versus"]["id"] != want["corrupted_top"]:
        failures.append(f"{name}: versus {got['versus']['id']}, the corrupted run's top is {want['corrupted_top']}")
    if "metric" in expect and got["metric"] != expect["metric"]:
        failures.append(f"{name}: metric {got['metric']}, expected {expect['metric']}")
    close(f"{name}: clean_prob", got["clean_prob"], want["clean_prob"])
    close(f"{name}: corrupted_prob", got["corrupted_prob"], want["corrupted_prob"])
    close(f"{name}: clean_value", got["clean_value"], want["clean"])
    close(f"{name}: corrupted_value", got["corrupted_value"], want["corrupted"])
    total = want["clean"] - want["corrupted"]
    for kind, value in want["grids"].items():
        close(f"{name}: grids.{kind}.value", got["grids"][kind]["value"], value)
        close(f"{name}: grids.{kind}.effect", got["grids"][kind]["effect"], value - want["corrupted"])
        close(f"{name}: grids.{kind}.normalised", got["grids"][kind]["normalised"], (value - want["corrupted"]) / total, 1e-8)
    for kind, estimate in want["atp"].items():
        unpatched = want["clean"] if got["direction"] == "noising" else want["corrupted"]
        close(f"{name}: grids.{kind}.delta", got["grids"][kind]["delta"], want["grids"][kind] - unpatched)
        close(f"{name}: grids.{kind}.atp", got["grids"][kind]["atp"], estimate, 1e-6)
    if want["units"] is not None:
        atp, exact = want["units"]
        # a Mixtral layer's unit E:J is column E · d_ff + J of its experts' units side by side
        moe = "expert" in got["units_atp"][0]
        ff = m.w["layers.0.block_sparse_moe.experts.0.w2.weight"].shape[1] if moe else 0
        listed = [u.get("expert", 0) * ff + u["unit"] for u in got["units_atp"]]
        top = sorted(range(len(atp)), key=lambda j: -abs(atp[j]))[: expect.get("top", 10)]
        names = ["expert", "unit", "atp", "exact"] if moe else ["unit", "atp", "exact"]
        if sorted(listed) != sorted(top) or list(got["units_atp"][0]) != names or (moe != (m.arch == "mixtral")):
            failures.append(f"{name}: units_atp lists {listed}, the reference's top by |AtP| is {top}")
        else:
            close(f"{name}: units_atp.atp", [u["atp"] for u in got["units_atp"]], atp[listed], 1e-6)
            close(f"{name}: units_atp.exact", [u["exact"] for u in got["units_atp"]], exact[listed])
    got["reference"] = want
    print(f"{name}: {want['S']} samples, {m.L} layers × {len(got['prompt']['token_ids'])} tokens, "
          f"P clean {want['clean']:.4f}, corrupted {want['corrupted']:.4f}: " + ("OK" if len(failures) == before else "FAILED"))
    return got


# ---- tiny Llama-family checkpoints, with a tokenizer of whole words --------------------------------

def tiny(arch, seed):
    directory = os.path.join(work, arch)
    os.makedirs(directory, exist_ok=True)
    tok = json.load(open(os.path.join(tokenizers, "llama3_like.json")))
    vocab = tok["model"]["vocab"]
    for word in ["The", "\u0120capital", "\u0120of", "\u0120France", "\u0120is", "\u0120Paris", "\u0120the", "\u0120United",
                 "\u0120Kingdom", "\u0120London"]:
        vocab.setdefault(word, 1 + max(max(vocab.values()), max(a["id"] for a in tok["added_tokens"])))
    with open(os.path.join(directory, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    n_vocab = 1 + max(max(vocab.values()), max(a["id"] for a in tok["added_tokens"]))
    d, ff, L, heads, kv, hd = 16, 12, 3, 4, 2, 4
    rng = np.random.default_rng(seed)
    r = lambda *shape, s=0.5: rng.uniform(-s, s, size=shape)
    t = {"model.embed_tokens.weight": r(n_vocab, d, s=1.0)}
    for l in range(L):
        p = f"model.layers.{l}."
        t[p + "input_layernorm.weight"] = 1 + r(d, s=0.25)
        t[p + "self_attn.q_proj.weight"] = r(heads * hd, d)
        t[p + "self_attn.k_proj.weight"] = r(kv * hd, d)
        t[p + "self_attn.v_proj.weight"] = r(kv * hd, d)
        if arch == "qwen2":
            for n, width in (("q", heads * hd), ("k", kv * hd), ("v", kv * hd)):
                t[p + f"self_attn.{n}_proj.bias"] = r(width)
        t[p + "self_attn.o_proj.weight"] = r(d, heads * hd)
        t[p + "post_attention_layernorm.weight"] = 1 + r(d, s=0.25)
        if arch == "mixtral":
            t[p + "block_sparse_moe.gate.weight"] = r(4, d, s=2.0)
            for e in range(4):
                t[p + f"block_sparse_moe.experts.{e}.w1.weight"] = r(ff, d)
                t[p + f"block_sparse_moe.experts.{e}.w3.weight"] = r(ff, d)
                t[p + f"block_sparse_moe.experts.{e}.w2.weight"] = r(d, ff)
        else:
            t[p + "mlp.gate_proj.weight"] = r(ff, d)
            t[p + "mlp.up_proj.weight"] = r(ff, d)
            t[p + "mlp.down_proj.weight"] = r(d, ff)
    t["model.norm.weight"] = 1 + r(d, s=0.25)
    tied = arch == "qwen2"
    if not tied:
        t["lm_head.weight"] = r(n_vocab, d, s=1.0)
    write_safetensors(os.path.join(directory, "model.safetensors"), t)
    config = {"model_type": arch, "hidden_size": d, "intermediate_size": ff, "num_hidden_layers": L,
              "num_attention_heads": heads, "num_key_value_heads": kv, "max_position_embeddings": 32,
              "rms_norm_eps": 1e-6, "rope_theta": 100.0, "vocab_size": n_vocab, "hidden_act": "silu",
              "tie_word_embeddings": tied}
    if arch in ("mistral", "mixtral"):
        config["sliding_window"] = 3
    if arch == "mixtral":
        config.update(num_local_experts=4, num_experts_per_tok=2)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    return directory


capitals = os.path.join(data, "models", "capitals")
check("capitals, the defaults", capitals, ["--prompt", "The capital of France is", "--subject", "France"],
      {"samples": 10, "positions": [3]})
check("capitals, a subject of several tokens, a window of 3, a given noise and target", capitals,
      ["--prompt", "Berlin is the capital of Germany. The capital of Kenya is", "--subject", "of Kenya",
       "--window", "3", "--samples", "3", "--noise", "0.5", "--target", " Nairobi", "--seed", "7"],
      {"samples": 3, "positions": [10, 11], "noise": 0.5, "target": " Nairobi"})
prompt = ["--prompt", "The capital of the United Kingdom is", "--subject", "the United Kingdom"]
# token 0 is <|begin_of_text|>: "The capital of" are 1 to 3, the subject 4 to 6
check("llama, after a begin-of-text token", tiny("llama", 1), prompt + ["--samples", "4"], {"samples": 4, "positions": [4, 5, 6]})
check("llama, a window of 2", os.path.join(work, "llama"), prompt + ["--samples", "2", "--window", "2"],
      {"samples": 2, "positions": [4, 5, 6]})
check("qwen2 (q, k, v biases, tied head)", tiny("qwen2", 2), prompt + ["--samples", "3"],
      {"samples": 3, "positions": [4, 5, 6]})
check("mistral (sliding window of 3)", tiny("mistral", 3), prompt + ["--samples", "3", "--window", "3"],
      {"samples": 3, "positions": [4, 5, 6]})
check("mixtral (top-2 of 4 experts)", tiny("mixtral", 4), prompt + ["--samples", "2"], {"samples": 2, "positions": [4, 5, 6]})
check("mixtral, AtP for its experts' units of layer 1, denoising with noise", os.path.join(work, "mixtral"),
      prompt + ["--samples", "2", "--atp", "--layer", "1", "--top", "6"], {"samples": 2, "positions": [4, 5, 6], "top": 6})
check("mixtral, AtP for its experts' units of layer 2, noising with replacement, log P", os.path.join(work, "mixtral"),
      prompt[:2] + ["--subject", "the United Kingdom", "--corrupt-with", "the capital France", "--noising", "--metric", "logprob",
                    "--atp", "--layer", "2", "--top", "5"], {"samples": 1, "positions": [4, 5, 6], "top": 5})

# the families beyond Llama's block (tests/families/models.py): the same grids through Llama 3.1's
# rope scaling, Qwen3's head norms and Phi-3's fused projections
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "families"))
import models  # noqa: E402

for arch, seed in (("llama3", 5), ("qwen3", 6), ("phi3", 7)):
    directory = os.path.join(work, arch)
    models.write(arch, seed, directory, tokenizers)
    check(f"{arch}", directory, prompt + ["--samples", "2"], {"samples": 2, "positions": [4, 5, 6]})

# ---- the other corruption, direction and metrics, and severed paths, on the shipped model -------------
france = ["--prompt", "The capital of France is", "--subject", "France"]
check("capitals, severed mlp", capitals, france + ["--samples", "3", "--sever", "mlp"], {"samples": 3, "positions": [3]})
check("capitals, severed attn, a window of 2", capitals, france + ["--samples", "2", "--sever", "attn", "--window", "2"],
      {"samples": 2, "positions": [3]})
check("capitals, symmetric replacement, logit-diff against the corrupted answer", capitals,
      france + ["--corrupt-with", "Germany", "--metric", "logit-diff", "--sever", "mlp"],
      {"samples": 1, "positions": [3], "metric": "logit-diff", "versus_is_corrupted_top": True})
check("capitals, noising with noise, log P", capitals, france + ["--samples", "3", "--noising", "--metric", "logprob"],
      {"samples": 3, "positions": [3], "metric": "logprob"})
check("capitals, noising with replacement, logit-diff against a given token", capitals,
      france + ["--corrupt-with", "Japan", "--noising", "--metric", "logit-diff", "--versus", " Tokyo"],
      {"samples": 1, "positions": [3], "metric": "logit-diff", "versus": " Tokyo"})
check("capitals, AtP beside the exact patch, denoising with noise", capitals, france + ["--samples", "2", "--atp"],
      {"samples": 2, "positions": [3]})
check("capitals, AtP, noising with noise, logit-diff, a window of 2", capitals,
      france + ["--samples", "2", "--atp", "--noising", "--metric", "logit-diff", "--versus", " Tokyo", "--window", "2"],
      {"samples": 2, "positions": [3]})
check("llama, AtP, replacement, log P", os.path.join(work, "llama"),
      prompt[:2] + ["--subject", "the United Kingdom", "--corrupt-with", "the capital France", "--atp", "--metric", "logprob"],
      {"samples": 1, "positions": [4, 5, 6]})
check("capitals, AtP for the units of layer 1, denoising with noise", capitals,
      france + ["--samples", "2", "--atp", "--layer", "1", "--top", "8"], {"samples": 2, "positions": [3], "top": 8})
check("capitals, AtP for the units of layer 0, noising with replacement, logit-diff", capitals,
      france + ["--corrupt-with", "Japan", "--noising", "--metric", "logit-diff", "--atp", "--layer", "0"],
      {"samples": 1, "positions": [3]})
check("llama, AtP for the units of layer 1, replacement, log P", os.path.join(work, "llama"),
      prompt[:2] + ["--subject", "the United Kingdom", "--corrupt-with", "the capital France", "--atp", "--metric", "logprob",
                    "--layer", "1", "--top", "5"], {"samples": 1, "positions": [4, 5, 6], "top": 5})
check("llama, replacement of a three-token subject, noising", os.path.join(work, "llama"),
      prompt[:2] + ["--subject", "the United Kingdom", "--corrupt-with", "the capital France", "--noising"],
      {"samples": 1, "positions": [4, 5, 6]})


# ---- averaged over facts by token role (ROME's average_causal_effects, with the definitions) ----
def roles(positions, T):
    """first, middle, last subject token; first after, further, last token."""
    first_e, last_e = positions[0], positions[-1]
    first_a, last_a = last_e + 1, T - 1
    return [[first_e], list(range(first_e + 1, last_e)), [last_e], [first_a] if first_a < T else [],
            list(range(first_a + 1, last_a)), [last_a]]


def check_facts(name, directory, lines, args):
    before = len(failures)
    path = os.path.join(work, name.replace(" ", "_") + ".tsv")
    with open(path, "w") as f:
        f.write("".join(line + "\n" for line in lines))
    run = subprocess.run([ft, "locate", "--checkpoint", directory, "--facts", path, *args, "--format", "json"],
                         capture_output=True, text=True)
    if run.returncode != 0:
        failures.append(f"{name}: exit {run.returncode}: {run.stderr.strip()}")
        return
    got = json.loads(run.stdout)
    if list(got) != ["metric", "direction", "corruption", "window", "averaged", "facts"]:
        failures.append(f"{name}: top-level names {list(got)}")
    m = model(directory)
    per_fact = []
    for fact in got["facts"]:
        want = trace(m, fact)
        for kind, value in want["grids"].items():
            close(f"{name}: a fact's grids.{kind}.value", fact["grids"][kind]["value"], value)
        per_fact.append((want, len(fact["prompt"]["token_ids"]), fact["subject"]["positions"]))
    averaged = got["averaged"]
    if averaged["roles"] != ["first_subject", "middle_subject", "last_subject", "first_after", "further", "last"]:
        failures.append(f"{name}: roles {averaged['roles']}")
    for kind in [k for k in averaged if k != "roles"]:
        effect = np.full((6, m.L), np.nan)
        stderr = np.full((6, m.L), np.nan)
        count = np.zeros((6, m.L))
        for r in range(6):
            for l in range(m.L):
                values = []
                for want, T, positions in per_fact:
                    tokens = roles(positions, T)[r]
                    if tokens:
                        normalised = (want["grids"][kind][l] - want["corrupted"]) / (want["clean"] - want["corrupted"])
                        values.append(normalised[tokens].mean())
                count[r, l] = len(values)
                if values:
                    effect[r, l] = np.mean(values)
                if len(values) > 1:
                    stderr[r, l] = np.std(values, ddof=1) / math.sqrt(len(values))
        got_effect = np.array([[np.nan if v is None else v for v in row] for row in averaged[kind]["effect"]])
        got_stderr = np.array([[np.nan if v is None else v for v in row] for row in averaged[kind]["stderr"]])
        if not (np.array_equal(np.isnan(got_effect), np.isnan(effect)) and np.array_equal(np.isnan(got_stderr), np.isnan(stderr))):
            failures.append(f"{name}: averaged.{kind}: nulls where the reference has none, or numbers where it has")
        close(f"{name}: averaged.{kind}.effect", np.nan_to_num(got_effect), np.nan_to_num(effect), 1e-8)
        close(f"{name}: averaged.{kind}.stderr", np.nan_to_num(got_stderr), np.nan_to_num(stderr), 1e-8)
        close(f"{name}: averaged.{kind}.count", averaged[kind]["count"], count, 0)
    print(f"{name}: {len(per_fact)} facts, averaged {[k for k in averaged if k != 'roles']}: "
          + ("OK" if len(failures) == before else "FAILED"))


facts = ["The capital of France is\tFrance",
         "Berlin is the capital of Germany. The capital of Kenya is\tof Kenya\t Nairobi",
         "The capital of Japan is\tcapital of Japan",
         "Japan's capital city is the great\tJapan"]
check_facts("capitals facts, severed attn", capitals, facts, ["--samples", "2", "--sever", "attn"])
check_facts("capitals facts, replacement-free noising by log P", capitals, facts[:2], ["--samples", "2", "--noising", "--metric", "logprob"])

for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
