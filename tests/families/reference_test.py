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
import shutil
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
from reference_model import inverse_frequencies, model, read_safetensors, rms_norm, rope, silu, softmax, write_safetensors  # noqa: E402

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


def gelu_tanh(x):
    """ACT2FN["gelu_pytorch_tanh"]: GELU's tanh form."""
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def cap(x, c):
    return c * np.tanh(x / c) if c else x


class gemma:
    """Gemma 2 and Gemma 3's text model, from the logic of modeling_gemma2.py / modeling_gemma3.py:
    the embedding times sqrt(hidden_size); every RMSNorm x / sqrt(mean(x^2) + eps) * (1 + w); each
    sublayer normed before and after (the sandwich) and then added; attention scores
    q.k * query_pre_attn_scalar^-1/2, soft-capped, masked causally and, on the sliding layers, to
    the last sliding_window keys; Gemma 3's q_norm and k_norm per head before RoPE, and its sliding
    layers' RoPE at rope_local_base_freq; the MLP down(gelu_tanh(gate(x)) * up(x)); logits through
    the tied embedding, soft-capped."""

    def __init__(self, directory):
        self.w = read_safetensors(os.path.join(directory, "model.safetensors"))
        c = json.load(open(os.path.join(directory, "config.json")))
        self.L, self.d, self.heads, self.kv = c["num_hidden_layers"], c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
        self.hd, self.eps = c["head_dim"], c["rms_norm_eps"]
        self.scale = c["query_pre_attn_scalar"] ** -0.5
        self.attn_cap, self.final_cap = c.get("attn_logit_softcapping"), c.get("final_logit_softcapping")
        self.window = c["sliding_window"]
        pattern = c.get("sliding_window_pattern", 2)
        self.sliding = c.get("layer_types") or ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(self.L)]
        self.inv = inverse_frequencies(self.hd, c["rope_theta"], c.get("rope_scaling"))
        self.inv_local = inverse_frequencies(self.hd, c.get("rope_local_base_freq", c["rope_theta"]))
        self.embedding = self.head = self.w["embed_tokens.weight"]
        self.f32_norms = False  # the GGUF twin's norms: 1 + w rounded to float32, as the converter writes them

    def norm(self, x, name):
        g = 1.0 + self.w[name]
        if self.f32_norms:
            g = (np.float32(1) + self.w[name].astype(np.float32)).astype(np.float64)
        return rms_norm(x, g, self.eps)

    def embed(self, ids):
        return self.embedding[ids] * np.sqrt(self.d)

    def attention(self, l, x):
        w, hd, p = self.w, self.hd, f"layers.{l}."
        h = self.norm(x, p + "input_layernorm.weight")
        q, k, v = (h @ w[p + f"self_attn.{n}_proj.weight"].T for n in "qkv")
        if p + "self_attn.q_norm.weight" in w:
            q = self.norm(q.reshape(*q.shape[:-1], -1, hd), p + "self_attn.q_norm.weight").reshape(q.shape)
            k = self.norm(k.reshape(*k.shape[:-1], -1, hd), p + "self_attn.k_norm.weight").reshape(k.shape)
        sliding = self.sliding[l] == "sliding_attention"
        inv = self.inv_local if sliding else self.inv
        q, k = rope(q, self.heads, hd, None, inv), rope(k, self.kv, hd, None, inv)
        S, T, _ = q.shape
        q = q.reshape(S, T, self.heads, hd)
        k = np.repeat(k.reshape(S, T, self.kv, hd), self.heads // self.kv, axis=2)
        v = np.repeat(v.reshape(S, T, self.kv, hd), self.heads // self.kv, axis=2)
        scores = cap(np.einsum("sihd,sjhd->shij", q, k) * self.scale, self.attn_cap)
        i, j = np.arange(T)[:, None], np.arange(T)[None, :]
        allowed = (j <= i) & ((i - j < self.window) if sliding else True)
        o = np.einsum("shij,sjhd->sihd", softmax(np.where(allowed, scores, -np.inf)), v).reshape(S, T, self.heads * hd)
        return self.norm(o @ w[p + "self_attn.o_proj.weight"].T, p + "post_attention_layernorm.weight")

    def ffn_steps(self, l, x):
        w, p = self.w, f"layers.{l}."
        h = self.norm(x, p + "pre_feedforward_layernorm.weight")
        gate, up = h @ w[p + "mlp.gate_proj.weight"].T, h @ w[p + "mlp.up_proj.weight"].T
        act = gelu_tanh(gate)
        out = (act * up) @ w[p + "mlp.down_proj.weight"].T
        return {"norm": h, "gate": gate, "up": up, "activate": act, "multiply": act * up, "contract": out,
                "out_norm": self.norm(out, p + "post_feedforward_layernorm.weight")}

    def ffn(self, l, x):
        return self.ffn_steps(l, x)["out_norm"]

    def logits(self, x):
        return cap(self.norm(x, "norm.weight") @ self.head.T, self.final_cap)


def load(directory):
    config = json.load(open(os.path.join(directory, "config.json")))
    return gemma(directory) if config["model_type"].startswith("gemma") else model(directory)


def reference(m, ids, layer):
    """The stream layer `layer`'s FFN reads, its steps, and the last token's logits."""
    x = m.embed(ids)[None]
    for l in range(layer):
        x = x + m.attention(l, x)
        x = x + m.ffn(l, x)
    mid = x + m.attention(layer, x)
    if isinstance(m, gemma):
        steps = m.ffn_steps(layer, mid)
        steps["residual"] = mid + steps["out_norm"]
        return mid[0], {k: v[0] for k, v in steps.items()}, m.logits(steps["residual"][0, -1])
    w, p = m.w, f"layers.{layer}."
    h = rms_norm(mid, w[p + "post_attention_layernorm.weight"], m.eps)
    steps = {"norm": h}
    if p + "mlp.gate_up_proj.weight" in w:  # Phi-3: the fused projection's first half is the gate
        steps["split"] = h @ w[p + "mlp.gate_up_proj.weight"].T
        gate, up = np.split(steps["split"], 2, axis=-1)
    else:
        gate = h @ w[p + "mlp.gate_proj.weight"].T
        up = h @ w[p + "mlp.up_proj.weight"].T
    act = silu(gate)
    mult = act * up
    out = mult @ w[p + "mlp.down_proj.weight"].T
    y = mid + out
    logits = rms_norm(y[0, -1], w["norm.weight"], m.eps) @ m.head.T
    steps.update(gate=gate, up=up, activate=act, multiply=mult, contract=out, residual=y)
    return mid[0], {k: v[0] for k, v in steps.items()}, logits


def compare(name, got, m, tol):
    ids = got["prompt"]["token_ids"]
    layer = got["layer"]
    mid, steps, logits = reference(m, ids, layer)
    worst = close(f"{name}: the stream layer {layer}'s FFN reads", got["input"], mid, tol)
    if [s["name"] for s in got["steps"]] != list(steps):  # Phi-3's split among them, before the gate
        failures.append(f"{name}: steps {[s['name'] for s in got['steps']]}, the reference's {list(steps)}")
        return worst
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
    m = load(path)
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
        f = m.logits(stream[0]) if isinstance(m, gemma) else rms_norm(stream[0], m.w["norm.weight"], m.eps) @ m.head.T
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
    # the rms eps is stored as f32 in GGUF: 1e-6 there is 9.99999997e-7; Gemma's norms as 1 + w in
    # float32, which rounds w's last bits away (a relative 6e-8)
    tol = 1e-6 if arch in models.GEMMA else 1e-9
    return max(close(f"{arch} GGUF against safetensors, step {k}", runs[1][k], runs[0][k], tol) for k in runs[0])


def params_counted(name, path, tensors):
    """`params --checkpoint` from the file's config: its total is every number the writer stored, each
    tensor's size as NumPy counts it (a GGUF file's rope_freqs, factors and not weights, aside)."""
    done = subprocess.run([ft, "params", "--checkpoint", path, "--format", "json"], capture_output=True, text=True)
    if done.returncode != 0:
        failures.append(f"{name} params: exit {done.returncode}: {done.stderr.strip()}")
        return 0
    got = json.loads(done.stdout)
    want = int(sum(v.size for v in tensors.values()))
    held = got.get("checkpoint", {})
    if got["total"] != want or held.get("numbers") != want or held.get("agrees") is not True or held.get("absent_weights"):
        failures.append(f"{name} params: total {got['total']}, the file's {held}; the writer stored {want} numbers")
    return want


def family(arch, seed, pre):
    directory = os.path.join(work, arch)
    tensors, config, tok = models.write(arch, seed, directory, tokenizers)
    gguf = os.path.join(work, arch + ".gguf")
    models.write_gguf(arch, tensors, config, tok, gguf, pre)
    m = load(directory)
    before = len(failures)
    layer = config["num_hidden_layers"] - 1
    got = run(directory, layer)
    if got is None:
        return
    worst = compare(f"{arch} safetensors", got, m, 1e-9)
    # the same model as the GGUF file holds it
    m.eps = float(np.float32(config["rms_norm_eps"]))
    m.f32_norms = True
    if arch == "llama3":
        m.inv = 1.0 / config["rope_theta"] ** (np.arange(0, m.hd, 2) / m.hd) / models.llama3_factors(config).astype(np.float64)
    got_gguf = run(gguf, layer)
    if got_gguf is None:
        return
    worst_gguf = compare(f"{arch} GGUF", got_gguf, m, 1e-9)
    twin = twins(arch, directory, gguf, layer)
    grad = check_grad(arch, directory, got["prompt"]["token_ids"])
    counted = params_counted(f"{arch} safetensors", directory, tensors)
    params_counted(f"{arch} GGUF", gguf, tensors)
    print(f"{arch}: {len(got['prompt']['token_ids'])} tokens, layer {layer}; max |diff| safetensors {worst:.2g}, "
          f"GGUF {worst_gguf:.2g}, GGUF − safetensors on the same embedding rows {twin:.2g}, grad's upstream {grad:.2g}, "
          f"params {counted:,} numbers: " + ("OK" if len(failures) == before else "FAILED"))


def refused(name, directory, change, says, command=("run", "--layer", "0")):
    """A copy of `directory` whose config.json (or tensors) `change` spoils: exit 2, one line, nothing on stdout."""
    bad = os.path.join(work, "bad")
    os.makedirs(bad, exist_ok=True)
    for f in os.listdir(directory):
        with open(os.path.join(directory, f), "rb") as src, open(os.path.join(bad, f), "wb") as dst:
            dst.write(src.read())
    change(bad)
    done = subprocess.run([ft, command[0], "--checkpoint", bad, *command[1:], "--prompt", PROMPT], capture_output=True, text=True)
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
family("gemma2", 4, "gpt-2")
family("gemma3", 5, "gpt-2")


def own_query_scale(arch, scalar):
    """A query_pre_attn_scalar that is not head_dim (Gemma 2 27B's d_model / heads): safetensors alone,
    since llama.cpp's GGUF has no key for it."""
    directory = os.path.join(work, arch)
    edit_config(query_pre_attn_scalar=scalar)(directory)
    got = run(directory, models.layers(arch) - 1)
    if got is not None:
        worst = compare(f"{arch} with query_pre_attn_scalar {scalar}", got, load(directory), 1e-9)
        print(f"{arch} with query_pre_attn_scalar {scalar}: max |diff| {worst:.2g}")
    edit_config(query_pre_attn_scalar=models.head_dim(arch))(directory)


own_query_scale("gemma2", 3)
own_query_scale("gemma3", 5)

# The keys a multimodal Gemma 3 config.json leaves out of its text_config, and Hugging Face's
# Gemma3TextConfig defaults for them (configuration_gemma3.py): its text-only twin spells them.
GEMMA3_TEXT_DEFAULTS = {"rope_theta": 1_000_000.0, "rms_norm_eps": 1e-6, "hidden_activation": "gelu_pytorch_tanh",
                        "rope_local_base_freq": 10_000.0, "sliding_window_pattern": 6, "max_position_embeddings": 131_072}


def multimodal_gemma3():
    """Gemma 3 as Gemma3ForConditionalGeneration saves it: config.json's model_type "gemma3" with the
    text model's keys under text_config (some left to their defaults), the text model's tensors under
    language_model.model., and a vision tower and projector beside them. Its logits and its last
    layer's steps must be its text-only twin's, exactly."""
    directory, twin = os.path.join(work, "gemma3-multimodal"), os.path.join(work, "gemma3-text-twin")
    tensors, config, _ = models.write("gemma3", 5, directory, tokenizers)
    models.write("gemma3", 5, twin, tokenizers)
    edit_config(**GEMMA3_TEXT_DEFAULTS)(twin)
    rng = np.random.default_rng(6)
    stored = {"language_model." + name: w for name, w in tensors.items()}
    stored["vision_tower.vision_model.embeddings.patch_embedding.weight"] = rng.uniform(-1, 1, (4, 3, 2, 2)).astype(np.float32)
    stored["multi_modal_projector.mm_input_projection_weight"] = rng.uniform(-1, 1, (4, models.D)).astype(np.float32)
    write_safetensors(os.path.join(directory, "model.safetensors"), stored)
    text = {k: v for k, v in config.items() if k not in GEMMA3_TEXT_DEFAULTS}
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump({"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "text_config": text,
                   "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 4}}, f, indent=2)
    layer = models.layers("gemma3") - 1
    got, want = run(directory, layer), run(twin, layer)
    if got is None or want is None:
        return
    same = got["steps"] == want["steps"] and got["prediction"]["top"] == want["prediction"]["top"] and got["input"] == want["input"]
    if not same:
        failures.append("gemma3 multimodal: its text model's steps or logits are not its text-only twin's")
    print(f"gemma3 multimodal (text_config, language_model.model.*, a vision tower): its text model's steps and "
          f"{len(got['prediction']['top'])} top logits {'equal' if same else 'DIFFER from'} the text-only twin's")
    refused("gemma3 multimodal without text_config", directory, edit_config(text_config=None),
            "config.json: text_config: missing: a \"gemma3\" config.json holds its text model's keys there")
    refused("gemma3 multimodal whose text_config is a string", directory, edit_config(text_config="gemma3_text"),
            "config.json: text_config: expected an object holding the text model's keys, got the string")
    refused("gemma3 multimodal with a query scalar of 0", directory,
            edit_config(text_config=dict(text, query_pre_attn_scalar=0)),
            "config.json: text_config.query_pre_attn_scalar: expected a finite number > 0, got the number 0")


multimodal_gemma3()


def phi3_split_views():
    """Phi-3's fused gate and up as a step of its own in the text, Markdown and HTML walkthroughs (its
    values, x·[Wg | Wu], are checked against NumPy's with every step's in the JSON above): the step,
    its formula, which columns are the gate and which the up, and each column's dot product with the
    half of the fused tensor it is."""
    ff = models.FF
    heading = "Split   fused = normed · [Wg | Wu]"
    wants = {("text",): ["Step 2 · " + heading, f"whose first d_ff = {ff}", "The next two steps are its halves"],
             ("markdown",): ["## Step 2 · " + heading], ("html",): ["<h2>Step 2 · Split</h2>", "fused = normed · [Wg | Wu]"],
             ("text", "--detail", "arithmetic"): ["fused[0][0] = normed[0] · Wg[:, 0] = ",
                                                 f"fused[0][{2 * ff - 1}] = normed[0] · Wu[:, {ff - 1}] = "]}
    for view, says in wants.items():
        done = subprocess.run([ft, "run", "--checkpoint", os.path.join(work, "phi3"), "--layer", "1", "--prompt", PROMPT,
                               "--width", "200", "--format", *view], capture_output=True, text=True)
        for said in says:
            if said not in done.stdout:
                failures.append(f"phi3: the {' '.join(view)} walkthrough does not say {said!r}")
    print("phi3: the split step in the text, Markdown and HTML walkthroughs and in the arithmetic: "
          + ("shown" if not any(f.startswith("phi3: the") for f in failures) else "see failures"))


phi3_split_views()


def gemma3_gguf(name, folder, **changes):
    """The Gemma 3 GGUF the converter writes for a config.json with `changes`, against the reference
    of that config: llama.cpp (as of 2026) runs it as Hugging Face runs that config."""
    directory = os.path.join(work, folder)
    tensors, config, tok = models.write("gemma3", 5, directory, tokenizers)
    edit_config(**changes)(directory)
    config.update(changes)
    gguf = directory + ".gguf"
    models.write_gguf("gemma3", tensors, config, tok, gguf, "gpt-2")
    m = load(directory)
    m.eps, m.f32_norms = float(np.float32(config["rms_norm_eps"])), True
    got = run(gguf, config["num_hidden_layers"] - 1)
    if got is not None:
        print(f"{name}: max |diff| {compare(name, got, m, 1e-9):.2g}")


# the sliding layers' RoPE base from rope.freq_base_swa, not always Gemma 3's 10000
gemma3_gguf("gemma3 GGUF with rope.freq_base_swa 100", "gemma3_base", rope_local_base_freq=100.0)
# no attention.sliding_window: every layer global (Hugging Face's sliding_window_pattern 1), with
# the global layers' RoPE, not Gemma 2's default window of 4096
gemma3_gguf("gemma3 GGUF without a sliding window", "gemma3_global", sliding_window_pattern=1)
# one global layer in 3 (layers 2 and 5), from attention.sliding_window_pattern
gemma3_gguf("gemma3 GGUF with attention.sliding_window_pattern 3", "gemma3_period", sliding_window_pattern=3)


def smoke(arch):
    """Every command that runs on a Llama runs on Gemma: the lens, attribution and the knock-out,
    locate, units, edit (its edited copy run again) and grad --prompt, each exit 0 with its JSON."""
    directory = os.path.join(work, arch)
    corpus = os.path.join(work, "corpus.txt")
    with open(corpus, "w") as f:
        f.write("The capital of France is Paris\nThe capital of the United Kingdom is London\n")
    edited = os.path.join(work, arch + "-edited")
    commands = [
        ["run", "--checkpoint", directory, "--layer", "1", "--prompt", PROMPT, "--ablate", "0,3", "--format", "json"],
        ["run", "--checkpoint", directory, "--layer", "all", "--prompt", PROMPT, "--format", "json"],
        ["locate", "--checkpoint", directory, "--prompt", PROMPT, "--subject", "France", "--samples", "2", "--format", "json"],
        ["units", "--checkpoint", directory, "--layer", "1", "--corpus", corpus, "--top", "3", "--format", "json"],
    ]
    outputs = []
    for args in commands:
        done = subprocess.run([ft] + args, capture_output=True, text=True)
        if done.returncode != 0:
            failures.append(f"{arch}: {' '.join(args[:1] + args[3:])}: exit {done.returncode}: {done.stderr.strip()[:300]}")
            return
        try:
            outputs.append(json.loads(done.stdout))
        except ValueError:
            failures.append(f"{arch}: {args[0]}: not JSON: {done.stdout[:120]!r}")
            return
    # the knock-out's logits at the last token, before and after units 0 and 3 of layer 1 are zeroed,
    # against the reference run with those units of mlp_post zeroed and every later block run again
    got, m = outputs[0], load(directory)
    ids = got["prompt"]["token_ids"]
    for ablate, field in (([], "logit_before"), ([0, 3], "logit_after")):
        x = m.embed(ids)[None]
        for l in range(m.L):
            x = x + m.attention(l, x)
            steps = m.ffn_steps(l, x)
            if l == 1 and ablate:
                mult = steps["multiply"].copy()
                mult[..., ablate] = 0
                out = mult @ m.w[f"layers.{l}.mlp.down_proj.weight"].T
                steps["out_norm"] = m.norm(out, f"layers.{l}.post_feedforward_layernorm.weight")
            x = x + steps["out_norm"]
        logits = m.logits(x[0, -1])
        close(f"{arch}: --ablate 0,3's {field}", [c[field] for c in got["changes"]], logits[[c["id"] for c in got["changes"]]], 1e-9)
    check_locate(arch, outputs[2], m)
    check_units(arch, outputs[3], m, corpus, directory)
    # the walkthrough shows what is new as steps of their own: GELU's tanh form on the gate, and the
    # norm of the output that the residual adds
    done = subprocess.run([ft, "run", "--checkpoint", directory, "--layer", "1", "--prompt", PROMPT, "--width", "200"],
                          capture_output=True, text=True)
    for says in ("Activate (GEGLU)", "activated = gelu(gate)", "gelu_pytorch_tanh",
                 "Out_norm   normed_output = output/√(mean(output²) + ε) · γ", "y = x + normed_output"):
        if says not in done.stdout:
            failures.append(f"{arch}: the walkthrough does not say {says!r}")
    print(f"{arch}: run --ablate (its logits against the reference), --layer all, locate, units, the walkthrough's steps: " + ("ran" if not failures else "see failures"))
    check_edit(arch, directory, corpus, edited)
    # MEMIT spreads a residual as what W2 adds to the stream; the norm of the FFN's output stands
    # between them, so edit --facts refuses rather than write a wrong update
    facts = os.path.join(work, arch + "-facts.tsv")
    with open(facts, "w") as f:
        f.write(PROMPT + "\tFrance\t London\n")
    done = subprocess.run([ft, "edit", "--checkpoint", directory, "--facts", facts, "--layers", "0-1", "--corpus", corpus],
                          capture_output=True, text=True)
    lines = done.stderr.splitlines()
    if done.returncode != 2 or done.stdout or len(lines) != 1 or "norm the FFN's output" not in lines[0]:
        failures.append(f"{arch}: edit --facts: exit {done.returncode}, stderr {done.stderr[:300]!r}; expected MEMIT refused")


def check_locate(arch, got, m):
    """locate's clean and corrupted p(target), and one cell of its mlp grid (the subject's last token,
    layer 1): the corrupted runs (the tool's noise added to the subject's embeddings) with the clean
    run's FFN output — after Gemma's norm of it, what the residual adds — put back there."""
    ids, target, positions = got["prompt"]["token_ids"], got["target"]["id"], got["subject"]["positions"]
    x0 = m.embed(ids)[None]
    eps = np.array(got["noise"]["samples"], dtype=np.float64)
    corrupted = np.repeat(x0, eps.shape[0], axis=0)
    corrupted[:, positions] += got["noise"]["scale"] * eps

    def p_target(x, restore=None):
        outs = []
        for l in range(m.L):
            x = x + m.attention(l, x)
            out = m.ffn(l, x)
            if restore and l == restore[0]:
                out[:, restore[1]] = restore[2][l][0, restore[1]]
            outs.append(out)
            x = x + out
        z = m.logits(x[:, -1])
        p = np.exp(z - z.max(-1, keepdims=True))
        return (p[:, target] / p.sum(-1)).mean(), outs

    clean, clean_outs = p_target(x0)
    corrupt = p_target(corrupted)[0]
    t = positions[-1]
    cell = p_target(corrupted, (1, t, clean_outs))[0]
    close(f"{arch}: locate's clean and corrupted p(target), mlp cell (1, {t})",
          [got["clean_prob"], got["corrupted_prob"], got["grids"]["mlp"]["value"][1][t]], [clean, corrupt, cell], 1e-9)


def check_units(arch, got, m, corpus, directory):
    """units' first unit, its top text's activations: layer 1's multiply (what W2 reads) there."""
    unit = got["units"][0]
    top = unit["max_activating"][0]
    line = open(corpus).read().splitlines()[top["text"]]
    keys = forward_ids(m, run_prompt_ids(line, directory), 1)[1]
    first = top["first"]
    close(f"{arch}: units' unit {unit['unit']} on text {top['text']}", top["activations"],
          keys[first:first + len(top["activations"]), unit["unit"]], 1e-9)


def forward_ids(m, ids, layer, at=None, value=None):
    """Gemma's last-token logits and layer `layer`'s multiply (the keys, tokens × d_ff); `value`
    replaces the FFN's output before its norm at token `at` (what W2 writes there)."""
    x = m.embed(ids)[None]
    for l in range(m.L):
        x = x + m.attention(l, x)
        steps = m.ffn_steps(l, x)
        if l == layer:
            keys = steps["multiply"][0]
            if value is not None:
                out = steps["contract"].copy()
                out[0, at] = value
                steps["out_norm"] = m.norm(out, f"layers.{l}.post_feedforward_layernorm.weight")
        x = x + steps["out_norm"]
    return m.logits(x[0, -1]), keys


def check_edit(arch, directory, corpus, edited):
    """`edit` on Gemma, whose FFN output is normed before the residual: v* is solved before that
    norm, so W2' = W2 + ΔW writes it exactly. On a copy whose last layer's out-norm γ is larger
    (and final cap looser), so that the edit can move the prediction: v* put in NumPy's forward pass
    makes the target the top token; ΔW read from the saved file equals the closed form
    C⁻¹k* (v* − W2ᵀk*)ᵀ / (k*ᵀC⁻¹k*) with k*, C and λ computed here; and the saved model run here
    predicts the target."""
    editable = os.path.join(work, arch + "-editable")
    shutil.rmtree(editable, ignore_errors=True)
    shutil.copytree(directory, editable)
    layer = models.layers(arch) - 1
    gamma = f"layers.{layer}.post_feedforward_layernorm.weight"
    tensors = read_safetensors(os.path.join(editable, "model.safetensors"))
    tensors[gamma] = tensors[gamma] + 4.0
    write_safetensors(os.path.join(editable, "model.safetensors"), tensors)
    edit_config(final_logit_softcapping=30.0)(editable)
    shutil.rmtree(edited, ignore_errors=True)
    done = subprocess.run([ft, "edit", "--checkpoint", editable, "--prompt", PROMPT, "--layer", str(layer), "--subject", "France",
                           "--target", " London", "--at", "last", "--corpus", corpus, "--dtype", "f64", "--save", edited,
                           "--format", "json"], capture_output=True, text=True)
    if done.returncode != 0:
        failures.append(f"{arch}: edit: exit {done.returncode}: {done.stderr.strip()[:300]}")
        return
    got = json.loads(done.stdout)
    e, target, ids = got["edit"], got["target"]["id"], got["prompt"]["token_ids"]
    m = load(editable)
    at = e["position"]
    logits, keys = forward_ids(m, ids, layer)
    key = keys[at]
    close(f"{arch}: edit's k*", e["key"], key, 1e-9)
    corpus_keys = []
    for line in open(corpus).read().splitlines():
        line_ids = run_prompt_ids(line, editable)
        corpus_keys.append(forward_ids(m, line_ids, layer)[1])
    K = np.concatenate(corpus_keys)
    if K.shape[0] != e["corpus_tokens"]:
        failures.append(f"{arch}: edit read {e['corpus_tokens']} corpus tokens, the reference {K.shape[0]}")
        return
    C = K.T @ K / K.shape[0]
    ridge = 1e-3 * np.trace(C) / C.shape[0]
    close(f"{arch}: edit's default ridge", [e["ridge"]], [ridge], 1e-9)
    v = np.array(e["value"])
    w2 = m.w[f"layers.{layer}.mlp.down_proj.weight"].T  # (d_ff, d_model)
    c_inv_key = np.linalg.solve(C + ridge * np.eye(C.shape[0]), key)
    want = np.outer(c_inv_key, v - key @ w2) / (key @ c_inv_key)
    saved = load(edited)
    close(f"{arch}: ΔW2 against the closed form", saved.w[f"layers.{layer}.mlp.down_proj.weight"].T - w2, want, 1e-9)
    # v*, put where W2 writes at the edited token, makes the target the top token in NumPy's pass
    with_value = forward_ids(m, ids, layer, at, v)[0]
    after = forward_ids(saved, ids, layer)[0]
    for name, z in (("v* in the FFN's output before its norm", with_value), ("the saved model", after)):
        if int(np.argmax(z)) != target:
            failures.append(f"{arch}: edit: with {name} the top token is {int(np.argmax(z))}, not the target {target}")
    p = np.exp(after - after.max())
    close(f"{arch}: edit's p(target) after", [got["efficacy"]["after"]["prob"]], [p[target] / p.sum()], 1e-9)
    print(f"{arch}: edit at layer {layer}: ΔW2 the closed form's, the target {target} on top in NumPy's pass with v* and "
          f"with the saved model (p = {p[target] / p.sum():.3f})")


def run_prompt_ids(text, directory):
    done = subprocess.run([ft, "run", "--checkpoint", directory, "--layer", "0", "--prompt", text, "--format", "json"],
                          capture_output=True, text=True)
    return json.loads(done.stdout)["prompt"]["token_ids"]


smoke("gemma2")
smoke("gemma3")

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

gemma2, gemma3 = os.path.join(work, "gemma2"), os.path.join(work, "gemma3")
refused("gemma2 without query_pre_attn_scalar", gemma2, edit_config(query_pre_attn_scalar=None),
        "query_pre_attn_scalar: missing: Gemma scales each query by query_pre_attn_scalar^−½")
refused("gemma3 without sliding_window", gemma3, edit_config(sliding_window=None),
        "sliding_window: missing: Gemma's sliding layers attend within it")
refused("gemma2 with a soft cap of 0", gemma2, edit_config(attn_logit_softcapping=0),
        "attn_logit_softcapping: expected a finite number > 0, got the number 0")
refused("gemma2 with a negative final soft cap", gemma2, edit_config(final_logit_softcapping=-30.0),
        "final_logit_softcapping: expected a finite number > 0, got the number -30")
refused("gemma2 with another activation", gemma2, edit_config(hidden_activation="relu"),
        "hidden_activation: ffn-trace traces GELU-gated layers (\"gelu_pytorch_tanh\"), got \"relu\"")

for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
