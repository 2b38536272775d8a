"""Tiny random checkpoints of the families that extend the Llama block, written twice as llama.cpp's
converter and Hugging Face would: a safetensors directory (config.json spelt as the family's own
configs spell it, a tokenizer.json of whole words) and a GGUF file of the same float32 weights
(llama.cpp's tensor names and metadata keys, Q and K rows permuted for the "llama" architecture,
Llama 3.1's rope scaling as a rope_freqs tensor of factors).

Written from modeling_llama.py / modeling_qwen3.py and from llama.cpp's convert_hf_to_gguf.py and
docs/gguf.md, with NumPy and the standard library, sharing nothing with ffn-trace."""
import json
import math
import os
import struct
import sys

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "locate"))
sys.path.insert(0, os.path.join(here, "..", "inputs", "gguf"))
from reference_model import write_safetensors  # noqa: E402
from convert import ALIGN, f32, gguf_string, i32s, string, strings, u32  # noqa: E402

WORDS = ["The", "\u0120capital", "\u0120of", "\u0120France", "\u0120is", "\u0120Paris", "\u0120the", "\u0120United",
         "\u0120Kingdom", "\u0120London"]
D, FF, LAYERS, HEADS, KV = 16, 12, 3, 4, 2


def tokenizer(tokenizers):
    tok = json.load(open(os.path.join(tokenizers, "llama3_like.json")))
    vocab = tok["model"]["vocab"]
    for word in WORDS:
        vocab.setdefault(word, 1 + max(max(vocab.values()), max(a["id"] for a in tok["added_tokens"])))
    return tok, 1 + max(max(vocab.values()), max(a["id"] for a in tok["added_tokens"]))


# What each family adds to Llama's config.json.
LLAMA3_SCALING = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 64}


MODEL_TYPE = {"llama3": "llama", "qwen3": "qwen3", "phi3": "phi3", "gemma2": "gemma2", "gemma3": "gemma3_text"}
GGUF_ARCH = {"llama3": "llama", "qwen3": "qwen3", "phi3": "phi3", "gemma2": "gemma2", "gemma3": "gemma3"}
GEMMA = ("gemma2", "gemma3")


def family_config(arch, n_vocab, hd):
    config = {"model_type": MODEL_TYPE[arch], "hidden_size": D, "intermediate_size": FF,
              "num_hidden_layers": LAYERS, "num_attention_heads": HEADS, "num_key_value_heads": KV,
              "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "rope_theta": 100.0, "vocab_size": n_vocab,
              "hidden_act": "silu", "tie_word_embeddings": arch == "qwen3", "rope_scaling": None}
    if arch == "llama3":
        # theta 100 over head_dim 8: wavelengths 6.3, 19.9, 62.8 and 199 cross both of the original
        # context's bounds (64 / 4 = 16 and 64 / 1 = 64), so one frequency is kept, two smoothed, one divided
        config["rope_scaling"] = dict(LLAMA3_SCALING)
    if arch == "qwen3":
        config.update(head_dim=hd, attention_bias=False, use_sliding_window=False)
    if arch == "phi3":
        config.update(sliding_window=4, attention_bias=False)  # Phi-3 mini's 2047, made small enough to matter
    if arch in GEMMA:
        # Gemma2Config / Gemma3TextConfig's keys: the activation is hidden_activation; queries
        # scaled by query_pre_attn_scalar^-1/2 (llama.cpp's GGUF: 1/sqrt(head_dim), so the twins
        # agree only when it is head_dim); the window, caps and RoPE bases small enough to matter
        del config["hidden_act"]
        config.update(head_dim=hd, hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=hd, sliding_window=3,
                      tie_word_embeddings=True, num_hidden_layers=layers(arch), attention_bias=False)
        if arch == "gemma2":
            config.update(attn_logit_softcapping=2.0, final_logit_softcapping=3.0)
        else:  # Gemma 3: five sliding layers to one global, whose RoPE alone is scaled
            config.update(rope_theta=1000.0, rope_local_base_freq=10000.0, sliding_window_pattern=6,
                          rope_scaling={"rope_type": "linear", "factor": 2.0}, attn_logit_softcapping=None,
                          final_logit_softcapping=None)
    return config


def layers(arch):
    return 6 if arch == "gemma3" else LAYERS  # Gemma 3's sixth layer is its first global one


def head_dim(arch):
    return 8 if arch in ("qwen3",) + GEMMA else D // HEADS  # Qwen3's and Gemma's heads are wider than d_model / heads


def write(arch, seed, directory, tokenizers):
    """The safetensors directory of a tiny `arch` ("llama3" or "qwen3"); returns its tensors and config."""
    os.makedirs(directory, exist_ok=True)
    tok, n_vocab = tokenizer(tokenizers)
    with open(os.path.join(directory, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    hd = head_dim(arch)
    rng = np.random.default_rng(seed)
    r = lambda *shape, s=0.5: rng.uniform(-s, s, size=shape).astype(np.float32)
    t = {"model.embed_tokens.weight": r(n_vocab, D, s=1.0)}
    # Gemma stores each RMSNorm's weight as w - 1 (Gemma2RMSNorm multiplies by 1 + w)
    one = 0 if arch in GEMMA else 1
    for l in range(layers(arch)):
        p = f"model.layers.{l}."
        t[p + "input_layernorm.weight"] = one + r(D, s=0.25)
        if arch == "phi3":  # q, k and v stacked along the outputs, in that order
            t[p + "self_attn.qkv_proj.weight"] = r((HEADS + 2 * KV) * hd, D)
        else:
            t[p + "self_attn.q_proj.weight"] = r(HEADS * hd, D)
            t[p + "self_attn.k_proj.weight"] = r(KV * hd, D)
            t[p + "self_attn.v_proj.weight"] = r(KV * hd, D)
        if arch in ("qwen3", "gemma3"):
            t[p + "self_attn.q_norm.weight"] = one + r(hd, s=0.5)
            t[p + "self_attn.k_norm.weight"] = one + r(hd, s=0.5)
        t[p + "self_attn.o_proj.weight"] = r(D, HEADS * hd)
        t[p + "post_attention_layernorm.weight"] = one + r(D, s=0.25)
        if arch in GEMMA:  # the sandwich: the FFN's own norms before and after it
            t[p + "pre_feedforward_layernorm.weight"] = r(D, s=0.25)
            t[p + "post_feedforward_layernorm.weight"] = r(D, s=0.25)
        if arch == "phi3":  # the gate's FF rows, then the up projection's
            t[p + "mlp.gate_up_proj.weight"] = r(2 * FF, D)
        else:
            t[p + "mlp.gate_proj.weight"] = r(FF, D)
            t[p + "mlp.up_proj.weight"] = r(FF, D)
        t[p + "mlp.down_proj.weight"] = r(D, FF)
    t["model.norm.weight"] = one + r(D, s=0.25)
    config = family_config(arch, n_vocab, hd)
    if not config["tie_word_embeddings"]:
        t["lm_head.weight"] = r(n_vocab, D, s=1.0)
    write_safetensors(os.path.join(directory, "model.safetensors"), t)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    return t, config, tok


# ---- the GGUF twin, as convert_hf_to_gguf.py writes it --------------------------------------------

GGUF_NAMES = [("model.embed_tokens", "token_embd"), ("model.norm", "output_norm"), ("lm_head", "output"),
              ("input_layernorm", "attn_norm"), ("self_attn.q_proj", "attn_q"), ("self_attn.k_proj", "attn_k"),
              ("self_attn.v_proj", "attn_v"), ("self_attn.o_proj", "attn_output"), ("self_attn.q_norm", "attn_q_norm"),
              ("self_attn.k_norm", "attn_k_norm"), ("self_attn.qkv_proj", "attn_qkv"), ("mlp.gate_up_proj", "ffn_up"),
              ("pre_feedforward_layernorm", "ffn_norm"), ("post_feedforward_layernorm", "post_ffw_norm"),
              ("post_attention_layernorm", "ffn_norm"), ("mlp.gate_proj", "ffn_gate"),
              ("mlp.up_proj", "ffn_up"), ("mlp.down_proj", "ffn_down")]


def gguf_name(name, arch=""):
    name = name.replace("model.layers.", "blk.")
    if arch in GEMMA:  # Gemma's post_attention_layernorm is the attention's own norm after it
        name = name.replace("post_attention_layernorm", "post_attention_norm")
    for hf, gg in GGUF_NAMES:
        name = name.replace(hf, gg)
    return name


def permute(w, heads):
    """LlamaModel.permute: each head's rows as pairs (i, i + half) side by side, llama.cpp's RoPE layout."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama3_factors(config):
    """convert_hf_to_gguf.py's rope_factors for rope_type llama3: float32 frequencies, a factor each."""
    s, base = config["rope_scaling"], config["rope_theta"]
    dim = config.get("head_dim", config["hidden_size"] // config["num_attention_heads"])
    freqs = (1.0 / (np.float32(base) ** (np.arange(0, dim, 2, dtype=np.float32) / np.float32(dim)))).astype(np.float32)
    old = s["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old / s["low_freq_factor"], old / s["high_freq_factor"]
    factors = []
    for freq in freqs:
        wavelen = 2 * math.pi / float(freq)
        if wavelen < high_wavelen:
            factors.append(1)
        elif wavelen > low_wavelen:
            factors.append(s["factor"])
        else:
            smooth = (old / wavelen - s["low_freq_factor"]) / (s["high_freq_factor"] - s["low_freq_factor"])
            factors.append(1 / ((1 - smooth) / s["factor"] + smooth))
    return np.array(factors, dtype=np.float32)


def write_gguf(arch, tensors, config, tok, path, pre):
    gg = GGUF_ARCH[arch]
    hd = config.get("head_dim", D // HEADS)
    out = {}
    for name, w in tensors.items():
        if gg == "llama" and name.endswith("q_proj.weight"):
            w = permute(w, config["num_attention_heads"])
        if gg == "llama" and name.endswith("k_proj.weight"):
            w = permute(w, config["num_key_value_heads"])
        if arch in GEMMA and name.endswith("norm.weight"):
            w = w + 1  # convert_hf_to_gguf.py's Gemma: the norms written as the 1 + w they apply
        out[gguf_name(name, arch)] = w
    if arch == "llama3":
        out["rope_freqs.weight"] = llama3_factors(config)
    vocab = tok["model"]["vocab"]
    added = {a["id"]: a["content"] for a in tok["added_tokens"]}
    size = config["vocab_size"]
    tokens, types = [f"<unused{i}>" for i in range(size)], [1] * size
    for t, i in vocab.items():
        tokens[i] = t
    for i, t in added.items():
        tokens[i], types[i] = t, 3
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    meta = [string("general.architecture", gg), u32(f"{gg}.block_count", config["num_hidden_layers"]),
            u32(f"{gg}.embedding_length", config["hidden_size"]), u32(f"{gg}.feed_forward_length", config["intermediate_size"]),
            u32(f"{gg}.attention.head_count", config["num_attention_heads"]),
            u32(f"{gg}.attention.head_count_kv", config["num_key_value_heads"]),
            u32(f"{gg}.context_length", config["max_position_embeddings"]),
            f32(f"{gg}.attention.layer_norm_rms_epsilon", config["rms_norm_eps"]), f32(f"{gg}.rope.freq_base", config["rope_theta"]),
            u32(f"{gg}.rope.dimension_count", hd),
            string("tokenizer.ggml.model", "gpt2"), string("tokenizer.ggml.pre", pre), strings("tokenizer.ggml.tokens", tokens),
            i32s("tokenizer.ggml.token_type", types), strings("tokenizer.ggml.merges", merges)]
    if arch in ("qwen3",) + GEMMA:
        meta += [u32(f"{gg}.attention.key_length", hd), u32(f"{gg}.attention.value_length", hd)]
    if arch in GEMMA and config.get("sliding_window_pattern") != 1:  # the converter: no window when every layer is global
        meta += [u32(f"{gg}.attention.sliding_window", config["sliding_window"])]
    if arch == "gemma2":
        meta += [f32(f"{gg}.attn_logit_softcapping", config["attn_logit_softcapping"]),
                 f32(f"{gg}.final_logit_softcapping", config["final_logit_softcapping"])]
    if arch == "gemma3":
        meta += [string(f"{gg}.rope.scaling.type", "linear"), f32(f"{gg}.rope.scaling.factor", config["rope_scaling"]["factor"]),
                 f32(f"{gg}.rope.freq_base_swa", config["rope_local_base_freq"])]
        if config["sliding_window_pattern"] not in (1, 6):  # llama.cpp reads it (others' converters write it)
            meta += [u32(f"{gg}.attention.sliding_window_pattern", config["sliding_window_pattern"])]
    if arch == "phi3":
        meta += [u32(f"{gg}.attention.sliding_window", config["sliding_window"])]
    write_gguf_file(path, meta, out)


def write_gguf_file(path, meta, tensors):
    infos, blobs, offset = [], [], 0
    for name, w in tensors.items():
        blob = np.ascontiguousarray(w, dtype="<f4").tobytes()
        ne = list(reversed(w.shape))
        infos.append(gguf_string(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
                     + struct.pack("<IQ", 0, offset))
        blobs.append(blob + b"\0" * (-len(blob) % ALIGN))
        offset += len(blobs[-1])
    head = b"GGUF" + struct.pack("<IQQ", 3, len(infos), len(meta)) + b"".join(meta) + b"".join(infos)
    head += b"\0" * (-len(head) % ALIGN)
    with open(path, "wb") as f:
        f.write(head + b"".join(blobs))
