"""The models of the NumPy float64 references, written from Hugging Face's modelling code: safetensors
read and written byte by byte, GPT-2 and the Llama family (RMSNorm, rotate-half RoPE, grouped-query
heads, Qwen2's q/k/v biases, Mistral's sliding window, Mixtral's top-k experts, Llama 3.1's rope
scaling, Qwen3's norm of each head's query and key, Phi-3's fused q/k/v and gate/up projections)."""
import json
import math
import os
import struct

import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from safetensors_numpy import read_safetensors  # noqa: E402,F401  (re-exported)


# ---- safetensors, read and written byte by byte -------------------------------------------------

def write_safetensors(path, tensors):
    header, data_bytes = {}, b""
    for name, array in tensors.items():
        raw = np.ascontiguousarray(array, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [len(data_bytes), len(data_bytes) + len(raw)]}
        data_bytes += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data_bytes)


# ---- the forward passes, with a hook after each sublayer ------------------------------------------

def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def rms_norm(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def softmax(z, axis=-1):
    z = z - z.max(axis, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis, keepdims=True)


def attend(q, k, v, n_heads, n_kv, hd, window):
    """q (S, T, n_heads·hd), k and v (S, T, n_kv·hd): causal (and sliding-window) softmax attention."""
    S, T, _ = q.shape
    q = q.reshape(S, T, n_heads, hd)
    k = k.reshape(S, T, n_kv, hd)
    v = v.reshape(S, T, n_kv, hd)
    group = n_heads // n_kv
    k = np.repeat(k, group, axis=2)  # head h reads key/value head h // group
    v = np.repeat(v, group, axis=2)
    scores = np.einsum("sihd,sjhd->shij", q, k) / math.sqrt(hd)
    i = np.arange(T)[:, None]
    j = np.arange(T)[None, :]
    allowed = j <= i
    if window:
        allowed &= (i - j) < window
    scores = np.where(allowed, scores, -np.inf)
    out = np.einsum("shij,sjhd->sihd", softmax(scores), v)
    return out.reshape(S, T, n_heads * hd)


def inverse_frequencies(hd, theta, scaling=None):
    """RoPE's inverse frequencies, rescaled as modeling_rope_utils does for rope_type "linear" and
    "llama3" (Llama 3.1: the slow turns divided by factor, the fast kept, those between blended)."""
    inv = 1.0 / theta ** (np.arange(0, hd, 2) / hd)
    kind = (scaling or {}).get("rope_type", (scaling or {}).get("type", "default"))
    if kind == "linear":
        return inv / scaling["factor"]
    if kind != "llama3":
        return inv
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old = scaling["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv
    scaled = np.where(wavelen > old / low, inv / factor, inv)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < old / high) & ~(wavelen > old / low)
    return np.where(medium, smoothed, scaled)


def rope(x, n, hd, theta, inv=None):
    """Rotate-half RoPE over each head of x (S, T, n·hd), positions 0 … T − 1, at the inverse
    frequencies `inv` (default: theta's own)."""
    S, T, _ = x.shape
    x = x.reshape(S, T, n, hd)
    if inv is None:
        inv = theta ** (-np.arange(0, hd, 2) / hd)
    ang = np.arange(T)[:, None] * inv[None, :]
    cos = np.concatenate([np.cos(ang), np.cos(ang)], -1)[None, :, None, :]
    sin = np.concatenate([np.sin(ang), np.sin(ang)], -1)[None, :, None, :]
    half = hd // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], -1)
    return (x * cos + rotated * sin).reshape(S, T, n * hd)


def gelu_new(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def silu(x):
    return x / (1 + np.exp(-x))


class model:
    def __init__(self, directory):
        self.w = read_safetensors(os.path.join(directory, "model.safetensors"))
        c = json.load(open(os.path.join(directory, "config.json")))
        self.arch = c["model_type"]
        if self.arch == "gpt2":
            self.L, self.d, self.heads = c["n_layer"], c["n_embd"], c["n_head"]
            self.kv, self.eps, self.window = self.heads, c.get("layer_norm_epsilon", 1e-5), 0
            self.embedding = self.w["wte.weight"]
        else:
            self.L, self.d, self.heads = c["num_hidden_layers"], c["hidden_size"], c["num_attention_heads"]
            self.kv = c.get("num_key_value_heads", self.heads)
            self.eps, self.theta = c["rms_norm_eps"], c.get("rope_theta", 10000.0)
            self.window = c.get("sliding_window") or 0
            self.top_k = c.get("num_experts_per_tok", 0)
            self.embedding = self.w["embed_tokens.weight"]
            self.head = self.embedding if c.get("tie_word_embeddings") else self.w["lm_head.weight"]
        self.hd = c.get("head_dim") or self.d // self.heads
        if self.arch != "gpt2":
            self.inv = inverse_frequencies(self.hd, self.theta, c.get("rope_scaling"))

    def embed(self, ids):
        x = self.embedding[ids]
        if self.arch == "gpt2":
            x = x + self.w["wpe.weight"][: len(ids)]
        return x

    def attention(self, l, x):
        w, hd = self.w, self.hd
        if self.arch == "gpt2":
            h = layer_norm(x, w[f"h.{l}.ln_1.weight"], w[f"h.{l}.ln_1.bias"], self.eps)
            qkv = h @ w[f"h.{l}.attn.c_attn.weight"] + w[f"h.{l}.attn.c_attn.bias"]  # Conv1D: in × out
            q, k, v = np.split(qkv, 3, axis=-1)
            o = attend(q, k, v, self.heads, self.heads, hd, 0)
            return o @ w[f"h.{l}.attn.c_proj.weight"] + w[f"h.{l}.attn.c_proj.bias"]
        p = f"layers.{l}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], self.eps)
        proj = lambda name: h @ w[p + f"self_attn.{name}.weight"].T + w.get(p + f"self_attn.{name}.bias", 0)
        if p + "self_attn.qkv_proj.weight" in w:  # Phi-3: q, k and v in one projection, in that order
            qkv = proj("qkv_proj")
            q, k, v = np.split(qkv, [self.heads * hd, (self.heads + self.kv) * hd], axis=-1)
            proj = lambda name: {"q_proj": q, "k_proj": k, "v_proj": v}[name]
        q, k = proj("q_proj"), proj("k_proj")
        if p + "self_attn.q_norm.weight" in w:  # Qwen3: each head's query and key RMSNormed before RoPE
            q = rms_norm(q.reshape(*q.shape[:-1], -1, hd), w[p + "self_attn.q_norm.weight"], self.eps).reshape(q.shape)
            k = rms_norm(k.reshape(*k.shape[:-1], -1, hd), w[p + "self_attn.k_norm.weight"], self.eps).reshape(k.shape)
        q = rope(q, self.heads, hd, self.theta, self.inv)
        k = rope(k, self.kv, hd, self.theta, self.inv)
        o = attend(q, k, proj("v_proj"), self.heads, self.kv, hd, self.window)
        return o @ w[p + "self_attn.o_proj.weight"].T

    # units = {layer: f}: each layer's FFN activations (S, T, d_ff) become f(activations), and
    # kept_units[layer] holds them as they were (a dense FFN's; a Mixtral layer's are its experts'
    # side by side, (S, T, n_experts · d_ff), 0 where a token did not choose the expert, and only
    # the chosen experts' columns are read back); silenced: the layers whose whole FFN output is 0
    units = {}
    kept_units = {}
    silenced = set()

    def unit_hook(self, l, a):
        if l in self.units:
            self.kept_units[l] = a.copy()
            return self.units[l](a)
        return a

    def ffn(self, l, x):
        w = self.w
        if self.arch == "gpt2":
            h = layer_norm(x, w[f"h.{l}.ln_2.weight"], w[f"h.{l}.ln_2.bias"], self.eps)
            a = self.unit_hook(l, gelu_new(h @ w[f"h.{l}.mlp.c_fc.weight"] + w[f"h.{l}.mlp.c_fc.bias"]))
            return a @ w[f"h.{l}.mlp.c_proj.weight"] + w[f"h.{l}.mlp.c_proj.bias"]
        p = f"layers.{l}."
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], self.eps)
        if p + "mlp.gate_up_proj.weight" in w:  # Phi-3: gate and up in one projection, the gate first
            gate, up = np.split(h @ w[p + "mlp.gate_up_proj.weight"].T, 2, axis=-1)
            return self.unit_hook(l, silu(gate) * up) @ w[p + "mlp.down_proj.weight"].T
        if self.arch != "mixtral":
            a = self.unit_hook(l, silu(h @ w[p + "mlp.gate_proj.weight"].T) * (h @ w[p + "mlp.up_proj.weight"].T))
            return a @ w[p + "mlp.down_proj.weight"].T
        # Mixtral: the router's softmax, the top k experts, their weights renormalised to sum to 1
        probs = softmax(h @ w[p + "block_sparse_moe.gate.weight"].T)
        n_experts = probs.shape[-1]
        ff = w[p + "block_sparse_moe.experts.0.w2.weight"].shape[1]
        chosen = np.argsort(-probs, axis=-1, kind="stable")[..., : self.top_k]
        a = np.zeros((*h.shape[:2], n_experts * ff))
        for s in range(h.shape[0]):
            for t in range(h.shape[1]):
                for e in chosen[s, t]:
                    e_ = p + f"block_sparse_moe.experts.{e}."
                    a[s, t, e * ff:(e + 1) * ff] = silu(h[s, t] @ w[e_ + "w1.weight"].T) * (h[s, t] @ w[e_ + "w3.weight"].T)
        a = self.unit_hook(l, a)
        out = np.zeros_like(h)
        for s in range(h.shape[0]):
            for t in range(h.shape[1]):
                weights = probs[s, t, chosen[s, t]] / probs[s, t, chosen[s, t]].sum()
                for e, g in zip(chosen[s, t], weights):
                    out[s, t] += g * (a[s, t, e * ff:(e + 1) * ff] @ w[p + f"block_sparse_moe.experts.{e}.w2.weight"].T)
        return out

    def last_probs(self, x):
        if self.arch == "gpt2":
            f = layer_norm(x[:, -1], self.w["ln_f.weight"], self.w["ln_f.bias"], self.eps)
            return softmax(f @ self.embedding.T)
        return softmax(rms_norm(x[:, -1], self.w["norm.weight"], self.eps) @ self.head.T)

    def run(self, x, restore=None, clean=None, sever=None):
        """x (S, T, d); restore = (kind, layers, token): the clean run's values put back there (clean's
        arrays of 1 or S runs); sever = (kind, layers, token, values): that sublayer's output kept at
        `values` (ROME's Figure 4). Returns the softmax at the last token (S, vocab) and, per layer,
        attn, mlp and state."""
        kept = {"attn": [], "mlp": [], "state": []}
        for l in range(self.L):
            here = restore is not None and l in restore[1]
            a = self.attention(l, x)
            if sever is not None and sever[0] == "attn" and l in sever[1]:
                a[:, sever[2]] = sever[3]["attn"][l][:, sever[2]]
            if here and restore[0] == "attn":
                a[:, restore[2]] = clean["attn"][l][:, restore[2]]
            x = x + a
            m = self.ffn(l, x)
            if l in self.silenced:
                m = np.zeros_like(m)
            if sever is not None and sever[0] == "mlp" and l in sever[1]:
                m[:, sever[2]] = sever[3]["mlp"][l][:, sever[2]]
            if here and restore[0] == "mlp":
                m[:, restore[2]] = clean["mlp"][l][:, restore[2]]
            x = x + m
            if here and restore[0] == "state":
                x[:, restore[2]] = clean["state"][l][:, restore[2]]
            kept["attn"].append(a)
            kept["mlp"].append(m)
            kept["state"].append(x.copy())
        return self.last_probs(x), kept
