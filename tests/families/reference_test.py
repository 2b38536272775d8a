#!/usr/bin/env python3
"""The families that extend the Llama block — Llama 3.1's rope scaling and Qwen3's norm of each
head's query and key — run by ffn-trace against NumPy float64 written from Hugging Face's modelling
code (tests/locate/reference_model.py), each from safetensors and from its GGUF twin.

Each tiny checkpoint is written here (tests/families/models.py). For each file `run --prompt` at the
last layer gives the stream that layer's FFN reads (every token), every step of that FFN and the
last token's top logits; the reference recomputes them from the prompt's token ids the tool reports.
The GGUF twin is checked against the reference made as llama.cpp's file makes it (the rms eps
stored as f32, Llama 3.1's frequencies divided by the float32 factors of rope_freqs) to 1e-9, and
against the safetensors run to 1e-5 when both tokenize the prompt alike. `grad --prompt` must pass
its own finite-difference check through the new parts (Qwen3's head norms' backward).

Usage: reference_test.py FFN_TRACE TOKENIZERS_DIR WORK_DIR   (exit 77 without numpy)
"""
import json
import os
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    print("skipped: no numpy (scripts/install-deps.sh installs python3-numpy)")
    sys.exit(77)

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "locate"))
import models  # noqa: E402
from reference_model import model, read_safetensors, rms_norm, silu, write_safetensors  # noqa: E402

ft, tokenizers, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
failures = []
PROMPT = "The capital of France is"


def close(name, got, want, tol):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        failures.append(f"{name}: shape {got.shape}, the reference's {want.shape}")
        return 0.0
    diff = float(np.abs(got - want).max()) if got.size else 0.0
    scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    if not diff <= tol * scale:
        failures.append(f"{name}: differs from the reference by up to {diff:.3g} (tolerance {tol} × {scale:.3g})")
    return diff


def run(path, layer):
    args = [ft, "run", "--checkpoint", path, "--layer", str(layer), "--prompt", PROMPT, "--format", "json"]
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != 0:
        failures.append(f"{path}: exit {done.returncode}: {done.stderr.strip()}")
        return None
    return json.loads(done.stdout)


def reference(m, ids, layer):
    """The stream layer `layer`'s FFN reads, its steps, and the last token's logits."""
    x = m.embed(ids)[None]
    for l in range(layer):
        x = x + m.attention(l, x)
        x = x + m.ffn(l, x)
    mid = x + m.attention(layer, x)
    w, p = m.w, f"layers.{layer}."
    h = rms_norm(mid, w[p + "post_attention_layernorm.weight"], m.eps)
    if p + "mlp.gate_up_proj.weight" in w:  # Phi-3: the fused projection's first half is the gate
        gate, up = np.split(h @ w[p + "mlp.gate_up_proj.weight"].T, 2, axis=-1)
    else:
        gate = h @ w[p + "mlp.gate_proj.weight"].T
        up = h @ w[p + "mlp.up_proj.weight"].T
    act = silu(gate)
    mult = act * up
    out = mult @ w[p + "mlp.down_proj.weight"].T
    y = mid + out
    logits = rms_norm(y[0, -1], w["norm.weight"], m.eps) @ m.head.T
    steps = {"norm": h, "gate": gate, "up": up, "activate": act, "multiply": mult, "contract": out, "residual": y}
    return mid[0], {k: v[0] for k, v in steps.items()}, logits


def compare(name, got, m, tol):
    ids = got["prompt"]["token_ids"]
    layer = got["layer"]
    mid, steps, logits = reference(m, ids, layer)
    worst = close(f"{name}: the stream layer {layer}'s FFN reads", got["input"], mid, tol)
    for s in got["steps"]:
        worst = max(worst, close(f"{name}: step {s['name']}", s["value"], steps[s["name"]], tol))
    top = got["prediction"]["top"]
    worst = max(worst, close(f"{name}: the last token's top logits", [t["logit"] for t in top], logits[[t["id"] for t in top]], tol))
    order = list(np.argsort(-logits, kind="stable")[: len(top)])
    if [t["id"] for t in top] != [int(i) for i in order]:
        failures.append(f"{name}: top ids {[t['id'] for t in top]}, the reference's {order}")
    return worst


def check_grad(name, path, prompt_ids):
    """grad --prompt's upstream at layer 1, dL/d(FFN output) for every token, against central finite
    differences of NumPy's loss through the later blocks (their attention's backward included), and
    the tool's own check of the layer's weight gradients."""
    args = [ft, "grad", "--checkpoint", path, "--prompt", PROMPT, "--target", " Paris", "--layer", "1", "--format", "json"]
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != 0:
        failures.append(f"{name}: grad exit {done.returncode}: {done.stderr.strip()}")
        return 0.0
    got = json.loads(done.stdout)
    if not got["check"]["ok"]:
        failures.append(f"{name}: grad's finite-difference check failed: {json.dumps(got['check'])}")
    m = model(path)
    target, at = got["target"]["ids"], got["target"]["position"]
    ids = prompt_ids + target[:-1]  # each piece scored at the token before it
    x = m.embed(ids)[None]
    for l in range(2):
        x = x + m.attention(l, x)
        x = x + m.ffn(l, x)

    def loss(stream):
        for l in range(2, m.L):
            stream = stream + m.attention(l, stream)
            stream = stream + m.ffn(l, stream)
        f = rms_norm(stream[0], m.w["norm.weight"], m.eps) @ m.head.T
        z = f - f.max(-1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
        return -sum(logp[at + k, t] for k, t in enumerate(target))

    eps = 1e-5
    want = np.zeros(x.shape[1:])
    for t in range(x.shape[1]):
        for j in range(x.shape[2]):
            up, down = x.copy(), x.copy()
            up[0, t, j] += eps
            down[0, t, j] -= eps
            want[t, j] = (loss(up) - loss(down)) / (2 * eps)
    return close(f"{name}: grad's upstream at layer 1", got["upstream"], want, 1e-7)


def twins(arch, directory, gguf, layer):
    """The layer's FFN on the same embedding rows from both files: every step alike."""
    runs = []
    for path in (directory, gguf):
        done = subprocess.run([ft, "run", "--checkpoint", path, "--layer", str(layer), "--embedding", "3,5,7,9", "--format", "json"],
                              capture_output=True, text=True)
        if done.returncode != 0:
            failures.append(f"{path}: --embedding: exit {done.returncode}: {done.stderr.strip()}")
            return 0.0
        runs.append({s["name"]: s["value"] for s in json.loads(done.stdout)["steps"]})
    if list(runs[0]) != list(runs[1]):
        failures.append(f"{arch}: the GGUF layer's steps {list(runs[1])}, the safetensors layer's {list(runs[0])}")
        return 0.0
    # the rms eps is stored as f32 in GGUF: 1e-6 there is 9.99999997e-7
    return max(close(f"{arch} GGUF against safetensors, step {k}", runs[1][k], runs[0][k], 1e-9) for k in runs[0])


def family(arch, seed, pre):
    directory = os.path.join(work, arch)
    tensors, config, tok = models.write(arch, seed, directory, tokenizers)
    gguf = os.path.join(work, arch + ".gguf")
    models.write_gguf(arch, tensors, config, tok, gguf, pre)
    m = model(directory)
    before = len(failures)
    layer = config["num_hidden_layers"] - 1
    got = run(directory, layer)
    if got is None:
        return
    worst = compare(f"{arch} safetensors", got, m, 1e-9)
    # the same model as the GGUF file holds it
    m.eps = float(np.float32(config["rms_norm_eps"]))
    if arch == "llama3":
        m.inv = 1.0 / config["rope_theta"] ** (np.arange(0, m.hd, 2) / m.hd) / models.llama3_factors(config).astype(np.float64)
    got_gguf = run(gguf, layer)
    if got_gguf is None:
        return
    worst_gguf = compare(f"{arch} GGUF", got_gguf, m, 1e-9)
    twin = twins(arch, directory, gguf, layer)
    grad = check_grad(arch, directory, got["prompt"]["token_ids"])
    print(f"{arch}: {len(got['prompt']['token_ids'])} tokens, layer {layer}; max |diff| safetensors {worst:.2g}, "
          f"GGUF {worst_gguf:.2g}, GGUF − safetensors on the same embedding rows {twin:.2g}, grad's upstream {grad:.2g}: "
          + ("OK" if len(failures) == before else "FAILED"))


def refused(name, directory, change, says):
    """A copy of `directory` whose config.json (or tensors) `change` spoils: exit 2, one line, nothing on stdout."""
    bad = os.path.join(work, "bad")
    os.makedirs(bad, exist_ok=True)
    for f in os.listdir(directory):
        with open(os.path.join(directory, f), "rb") as src, open(os.path.join(bad, f), "wb") as dst:
            dst.write(src.read())
    change(bad)
    done = subprocess.run([ft, "run", "--checkpoint", bad, "--layer", "0", "--prompt", PROMPT], capture_output=True, text=True)
    lines = done.stderr.splitlines()
    if done.returncode != 2 or done.stdout or len(lines) != 1 or not lines[0].startswith("error: ") or says not in lines[0]:
        failures.append(f"{name}: exit {done.returncode}, stdout {done.stdout[:80]!r}, stderr {done.stderr!r}; expected one line with {says!r}")
    else:
        print(f"{name}: {lines[0]}")


def edit_config(**changes):
    def change(directory):
        path = os.path.join(directory, "config.json")
        config = json.load(open(path))
        for key, value in changes.items():
            if value is None:
                config.pop(key, None)
            else:
                config[key] = value
        json.dump(config, open(path, "w"))
    return change


def scaling(**changes):
    s = dict(models.LLAMA3_SCALING)
    s.update(changes)
    return {k: v for k, v in s.items() if v is not None}


def fused_rows(rows):
    """Phi-3's layer 0 gate_up_proj given `rows` rows."""
    def change(directory):
        path = os.path.join(directory, "model.safetensors")
        tensors = read_safetensors(path)
        name = "layers.0.mlp.gate_up_proj.weight"  # read_safetensors drops the prefix model., which ffn-trace does not need
        tensors[name] = np.resize(tensors[name], (rows, tensors[name].shape[1]))
        write_safetensors(path, tensors)
    return change


family("llama3", 1, "gpt-2")
family("qwen3", 2, "qwen2")
family("phi3", 3, "gpt-2")

llama3, qwen3, phi3 = (os.path.join(work, a) for a in ("llama3", "qwen3", "phi3"))
refused("llama3 without low_freq_factor", llama3, edit_config(rope_scaling=scaling(low_freq_factor=None)),
        "rope_scaling.low_freq_factor: missing: rope_type \"llama3\" needs it")
refused("llama3 with a factor of 0", llama3, edit_config(rope_scaling=scaling(factor=0)),
        "rope_scaling.factor: expected a finite number > 0, got the number 0")
refused("llama3 with high_freq_factor ≤ low_freq_factor", llama3, edit_config(rope_scaling=scaling(high_freq_factor=0.5)),
        "rope_scaling.high_freq_factor: expected more than low_freq_factor = 1, got 0.5")
refused("qwen3 without its heads", qwen3, edit_config(num_attention_heads=None, num_key_value_heads=None),
        "num_attention_heads: missing: the forward pass needs the number of attention heads")
refused("phi3 with a fused tensor not twice d_ff", phi3, fused_rows(2 * models.FF + 2),
        "its 26 rows are not twice d_ff = 12 (intermediate_size)")

for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
