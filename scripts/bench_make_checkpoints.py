#!/usr/bin/env python3
"""Writes the benchmark's checkpoints: one FFN layer of real shape with random (seeded) weights.

    bench_make_checkpoints.py OUT_DIR [--only gpt2,llama,mixtral] [--small] [--seed N]

Makes OUT_DIR/gpt2, OUT_DIR/llama and OUT_DIR/mixtral, each a Hugging Face style directory:
config.json, model.safetensors (written here by hand, tensor by tensor, so memory stays small)
and input.npy (float64, tokens × d_model). gpt2 also has vocab.json ({token: id}) and an empty
merges.txt, the tokenizer that `run --checkpoint` reads the token names from; with --small
llama and mixtral have one too (SentencePiece-style "▁" tokens), with model.embed_tokens.weight
and lm_head.weight, so that --word and the vocabulary view can be tried on every family.

  gpt2     GPT-2 small, layer 0: 768 → 3072, F32, wte.weight 50257 × 768 (tied unembedding), 64 tokens
  llama    Llama-2-7B, layer 0: 4096 → 11008 SwiGLU, BF16, 16 tokens
  mixtral  Mixtral 8x7B, layer 0: 8 experts of 4096 → 14336, top-2, BF16, 1 token (about 2.8 GB)

and, for the forward pass (scripts/bench_forward.sh), whole models with attention and embeddings:

  gpt2-forward   GPT-2 small: 12 layers of 768 (12 heads), F32, wpe 1024 × 768, tied wte (about 0.5 GB)
  llama-forward  Llama-2-7B cut to 2 layers: 4096 (32 heads), 11008 SwiGLU, BF16, lm_head (about 1.3 GB)

--small (or BENCH_SMALL=1) shrinks every width (d_model 64) and the vocabulary (1000) for
testing the scripts themselves. A directory whose files are all there is left as it is.
Needs python3 and numpy only.
"""

import argparse
import json
import os
import shutil
import struct
import sys

import numpy as np

FULL = {
    "gpt2-forward": {"d_model": 768, "d_ff": 3072, "vocab": 50257, "heads": 12, "layers": 12, "positions": 1024},
    "llama-forward": {"d_model": 4096, "d_ff": 11008, "vocab": 32000, "heads": 32, "layers": 2, "positions": 4096},
    "gpt2": {"d_model": 768, "d_ff": 3072, "vocab": 50257, "tokens": 64},
    "llama": {"d_model": 4096, "d_ff": 11008, "tokens": 16},
    "mixtral": {"d_model": 4096, "d_ff": 14336, "experts": 8, "top_k": 2, "tokens": 1},
}
SMALL = {
    "gpt2-forward": {"d_model": 64, "d_ff": 256, "vocab": 1000, "heads": 4, "layers": 12, "positions": 1024},
    "llama-forward": {"d_model": 64, "d_ff": 172, "vocab": 1000, "heads": 4, "layers": 2, "positions": 4096},
    "gpt2": {"d_model": 64, "d_ff": 256, "vocab": 1000, "tokens": 64, "heads": 4},
    "llama": {"d_model": 64, "d_ff": 172, "tokens": 16, "vocab": 1000},
    "mixtral": {"d_model": 64, "d_ff": 224, "experts": 8, "top_k": 2, "tokens": 1, "vocab": 1000},
}
ITEMSIZE = {"F32": 4, "BF16": 2, "F64": 8, "F16": 2}
CHUNK_ELEMENTS = 1 << 22  # numbers generated and written at a time (16 MB of float32)


def to_bf16(f32):
    """The high 16 bits of each float32, rounded to nearest even (NaN kept a quiet NaN)."""
    u = f32.view(np.uint32)
    rounded = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    out = rounded.astype(np.uint16)
    nan = np.isnan(f32)
    if nan.any():
        out[nan] = ((u[nan] >> np.uint32(16)) | np.uint32(0x0040)).astype(np.uint16)
    return out


class Tensor:
    """A tensor to be written: name, dtype, shape and how to make its values (float32 rows)."""

    def __init__(self, name, dtype, shape, make):
        self.name, self.dtype, self.shape, self.make = name, dtype, tuple(shape), make

    @property
    def nbytes(self):
        n = ITEMSIZE[self.dtype]
        for d in self.shape:
            n *= d
        return n


def normal(seed, std, mean=0.0):
    """A maker of float32 values N(mean, std²), drawn chunk by chunk from one seeded stream."""

    def make(rng_state, count):
        if "rng" not in rng_state:
            rng_state["rng"] = np.random.default_rng(seed)
        v = rng_state["rng"].standard_normal(count, dtype=np.float32)
        v *= np.float32(std)
        if mean:
            v += np.float32(mean)
        return v

    return make


def write_safetensors(path, tensors, metadata=None):
    header = {}
    if metadata:
        header["__metadata__"] = metadata
    offset = 0
    for t in tensors:
        header[t.name] = {"dtype": t.dtype, "shape": list(t.shape), "data_offsets": [offset, offset + t.nbytes]}
        offset += t.nbytes
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)  # pad with spaces so the data starts 8-aligned
    tmp = path + ".part"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for t in tensors:
            count = t.nbytes // ITEMSIZE[t.dtype]
            state = {}
            done = 0
            while done < count:
                n = min(CHUNK_ELEMENTS, count - done)
                v = t.make(state, n)
                if t.dtype == "F32":
                    f.write(v.astype("<f4", copy=False).tobytes())
                elif t.dtype == "BF16":
                    f.write(to_bf16(v).astype("<u2", copy=False).tobytes())
                elif t.dtype == "F64":
                    f.write(v.astype("<f8").tobytes())
                else:
                    f.write(v.astype("<f2").tobytes())
                done += n
    os.replace(tmp, path)
    return 8 + len(text) + offset


def made_up_vocab(n, space="\u0120"):
    """n distinct made-up tokens: about half with a leading space, written `space` (GPT-2's Ġ or
    SentencePiece's ▁)."""
    onsets = ["", "b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z",
              "br", "ch", "st", "th", "tr", "pl"]
    vowels = ["a", "e", "i", "o", "u", "ai", "ou", "ee"]
    codas = ["", "n", "s", "t", "r", "l", "m", "ng", "ck", "x"]
    syllables = [o + v + c for o in onsets for v in vowels for c in codas]  # 1920 of them
    vocab = {}
    i = 0
    while len(vocab) < n:
        a, b = divmod(i, len(syllables))
        word = syllables[b] if a == 0 else syllables[(a - 1) % len(syllables)] + syllables[b]
        if a >= len(syllables) + 1:
            word += str(a)
        token = (space + word) if i % 2 == 0 else word
        if token not in vocab:
            vocab[token] = len(vocab)
        i += 1
    return vocab


def write_merges(d):
    """GPT-2's tokenizer is vocab.json and merges.txt: no merges, so each token is one of the vocabulary's."""
    with open(os.path.join(d, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")


def write_input(path, tokens, d_model, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((tokens, d_model))  # float64, C order
    np.save(path, x.astype("<f8"))


def gpt2_tensors(s, seed):
    d, f, v = s["d_model"], s["d_ff"], s["vocab"]
    return [
        Tensor("h.0.ln_2.weight", "F32", (d,), normal(seed + 1, 0.1, 1.0)),
        Tensor("h.0.ln_2.bias", "F32", (d,), normal(seed + 2, 0.02)),
        Tensor("h.0.mlp.c_fc.weight", "F32", (d, f), normal(seed + 3, 0.02)),
        Tensor("h.0.mlp.c_fc.bias", "F32", (f,), normal(seed + 4, 0.02)),
        Tensor("h.0.mlp.c_proj.weight", "F32", (f, d), normal(seed + 5, 0.02)),
        Tensor("h.0.mlp.c_proj.bias", "F32", (d,), normal(seed + 6, 0.02)),
        Tensor("wte.weight", "F32", (v, d), normal(seed + 7, 0.02)),
    ]


def llama_tensors(s, seed):
    d, f = s["d_model"], s["d_ff"]
    p = "model.layers.0."
    return [
        Tensor(p + "post_attention_layernorm.weight", "BF16", (d,), normal(seed + 1, 0.1, 1.0)),
        Tensor(p + "mlp.gate_proj.weight", "BF16", (f, d), normal(seed + 2, 0.02)),
        Tensor(p + "mlp.up_proj.weight", "BF16", (f, d), normal(seed + 3, 0.02)),
        Tensor(p + "mlp.down_proj.weight", "BF16", (d, f), normal(seed + 4, 0.02)),
    ] + vocabulary_tensors(s, seed)


def mixtral_tensors(s, seed):
    d, f, e = s["d_model"], s["d_ff"], s["experts"]
    p = "model.layers.0."
    out = [
        Tensor(p + "post_attention_layernorm.weight", "BF16", (d,), normal(seed + 1, 0.1, 1.0)),
        Tensor(p + "block_sparse_moe.gate.weight", "BF16", (e, d), normal(seed + 2, 0.02)),
    ]
    for j in range(e):
        q = p + f"block_sparse_moe.experts.{j}."
        out += [
            Tensor(q + "w1.weight", "BF16", (f, d), normal(seed + 10 + 3 * j, 0.02)),
            Tensor(q + "w3.weight", "BF16", (f, d), normal(seed + 11 + 3 * j, 0.02)),
            Tensor(q + "w2.weight", "BF16", (d, f), normal(seed + 12 + 3 * j, 0.02)),
        ]
    return out + vocabulary_tensors(s, seed)


def vocabulary_tensors(s, seed):
    """A Llama-family layer's embedding and unembedding, when the sizes give a vocabulary."""
    if "vocab" not in s:
        return []
    v, d = s["vocab"], s["d_model"]
    return [Tensor("model.embed_tokens.weight", "BF16", (v, d), normal(seed + 90, 0.02)),
            Tensor("lm_head.weight", "BF16", (v, d), normal(seed + 91, 0.02))]


def gpt2_forward_tensors(s, seed):
    """Every tensor GPT2LMHeadModel reads (transformer. prefix, Conv1D weights in × out, tied head)."""
    d, f, v, n = s["d_model"], s["d_ff"], s["vocab"], seed
    out = [Tensor("transformer.wte.weight", "F32", (v, d), normal(n + 1, 0.02)),
           Tensor("transformer.wpe.weight", "F32", (s["positions"], d), normal(n + 2, 0.01))]
    for i in range(s["layers"]):
        p, n = f"transformer.h.{i}.", n + 20
        out += [
            Tensor(p + "ln_1.weight", "F32", (d,), normal(n + 1, 0.1, 1.0)),
            Tensor(p + "ln_1.bias", "F32", (d,), normal(n + 2, 0.02)),
            Tensor(p + "attn.c_attn.weight", "F32", (d, 3 * d), normal(n + 3, 0.02)),
            Tensor(p + "attn.c_attn.bias", "F32", (3 * d,), normal(n + 4, 0.02)),
            Tensor(p + "attn.c_proj.weight", "F32", (d, d), normal(n + 5, 0.02)),
            Tensor(p + "attn.c_proj.bias", "F32", (d,), normal(n + 6, 0.02)),
            Tensor(p + "ln_2.weight", "F32", (d,), normal(n + 7, 0.1, 1.0)),
            Tensor(p + "ln_2.bias", "F32", (d,), normal(n + 8, 0.02)),
            Tensor(p + "mlp.c_fc.weight", "F32", (d, f), normal(n + 9, 0.02)),
            Tensor(p + "mlp.c_fc.bias", "F32", (f,), normal(n + 10, 0.02)),
            Tensor(p + "mlp.c_proj.weight", "F32", (f, d), normal(n + 11, 0.02)),
            Tensor(p + "mlp.c_proj.bias", "F32", (d,), normal(n + 12, 0.02)),
        ]
    return out + [Tensor("transformer.ln_f.weight", "F32", (d,), normal(n + 13, 0.1, 1.0)),
                  Tensor("transformer.ln_f.bias", "F32", (d,), normal(n + 14, 0.02))]


def llama_forward_tensors(s, seed):
    """Every tensor LlamaForCausalLM reads (model. prefix, nn.Linear weights out × in, own lm_head)."""
    d, f, v, n = s["d_model"], s["d_ff"], s["vocab"], seed
    out = [Tensor("model.embed_tokens.weight", "BF16", (v, d), normal(n + 1, 0.02))]
    for i in range(s["layers"]):
        p, n = f"model.layers.{i}.", n + 20
        out += [
            Tensor(p + "input_layernorm.weight", "BF16", (d,), normal(n + 1, 0.1, 1.0)),
            Tensor(p + "self_attn.q_proj.weight", "BF16", (d, d), normal(n + 2, 0.02)),
            Tensor(p + "self_attn.k_proj.weight", "BF16", (d, d), normal(n + 3, 0.02)),
            Tensor(p + "self_attn.v_proj.weight", "BF16", (d, d), normal(n + 4, 0.02)),
            Tensor(p + "self_attn.o_proj.weight", "BF16", (d, d), normal(n + 5, 0.02)),
            Tensor(p + "post_attention_layernorm.weight", "BF16", (d,), normal(n + 6, 0.1, 1.0)),
            Tensor(p + "mlp.gate_proj.weight", "BF16", (f, d), normal(n + 7, 0.02)),
            Tensor(p + "mlp.up_proj.weight", "BF16", (f, d), normal(n + 8, 0.02)),
            Tensor(p + "mlp.down_proj.weight", "BF16", (d, f), normal(n + 9, 0.02)),
        ]
    return out + [Tensor("model.norm.weight", "BF16", (d,), normal(n + 10, 0.1, 1.0)),
                  Tensor("lm_head.weight", "BF16", (v, d), normal(n + 11, 0.02))]


def config_for(kind, s):
    if kind == "gpt2-forward":
        return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "activation_function": "gelu_new",
                "n_embd": s["d_model"], "n_inner": s["d_ff"], "n_layer": s["layers"], "n_head": s["heads"],
                "n_positions": s["positions"], "layer_norm_epsilon": 1e-5, "vocab_size": s["vocab"],
                "tie_word_embeddings": True, "torch_dtype": "float32"}
    if kind == "llama-forward":
        return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": s["d_model"],
                "intermediate_size": s["d_ff"], "num_hidden_layers": s["layers"], "num_attention_heads": s["heads"],
                "num_key_value_heads": s["heads"], "max_position_embeddings": s["positions"], "rope_theta": 10000.0,
                "rope_scaling": None, "rms_norm_eps": 1e-5, "hidden_act": "silu", "vocab_size": s["vocab"],
                "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
    if kind == "gpt2":
        return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "activation_function": "gelu_new",
                "n_embd": s["d_model"], "n_inner": s["d_ff"], "n_layer": 1, "n_head": s.get("heads", 12), "n_positions": 1024,
                "layer_norm_epsilon": 1e-5, "vocab_size": s["vocab"], "tie_word_embeddings": True,
                "torch_dtype": "float32"}
    common = {"hidden_size": s["d_model"], "intermediate_size": s["d_ff"], "num_hidden_layers": 1,
              "num_attention_heads": 32, "num_key_value_heads": 8 if kind == "mixtral" else 32,
              "rms_norm_eps": 1e-5, "hidden_act": "silu", "vocab_size": s.get("vocab", 32000), "tie_word_embeddings": False,
              "torch_dtype": "bfloat16"}
    if kind == "llama":
        return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", **common}
    return {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", **common,
            "num_local_experts": s["experts"], "num_experts_per_tok": s["top_k"]}


MAKERS = {"gpt2": gpt2_tensors, "llama": llama_tensors, "mixtral": mixtral_tensors,
          "gpt2-forward": gpt2_forward_tensors, "llama-forward": llama_forward_tensors}
SEEDS = {"gpt2": 1000, "llama": 2000, "mixtral": 3000, "gpt2-forward": 4000, "llama-forward": 5000}


def make(kind, out_dir, sizes, seed):
    s = sizes[kind]
    d = os.path.join(out_dir, kind)
    forward = kind.endswith("-forward")  # a whole model: the prompt's ids are the input
    vocabulary = not forward and "vocab" in s
    files = ["config.json", "model.safetensors"] + ([] if forward else ["input.npy"]) + (["vocab.json"] if vocabulary else [])
    if vocabulary and kind == "gpt2" and not os.path.exists(os.path.join(d, "merges.txt")):
        os.makedirs(d, exist_ok=True)
        write_merges(d)  # a folder made before merges.txt was written: its weights are kept
    if all(os.path.exists(os.path.join(d, f)) for f in files):
        print(f"{kind}: already there ({d})", file=sys.stderr)
        return
    os.makedirs(d, exist_ok=True)
    tensors = MAKERS[kind](s, seed + SEEDS[kind])
    need = sum(t.nbytes for t in tensors)
    free = shutil.disk_usage(d).free
    if free < need + (256 << 20):
        sys.exit(f"error: {kind} needs {need / 1e9:.2f} GB on disk and {d} has {free / 1e9:.2f} GB free")
    print(f"{kind}: writing {need / 1e9:.3f} GB of weights to {d} ({free / 1e9:.0f} GB free)", file=sys.stderr)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config_for(kind, s), f, indent=2)
        f.write("\n")
    if not forward:
        write_input(os.path.join(d, "input.npy"), s["tokens"], s["d_model"], seed + SEEDS[kind] + 999)
    if vocabulary:
        with open(os.path.join(d, "vocab.json"), "w", encoding="utf-8") as f:
            json.dump(made_up_vocab(s["vocab"], "\u0120" if kind == "gpt2" else "\u2581"), f, ensure_ascii=False)
        if kind == "gpt2":
            write_merges(d)
    # The weights last: model.safetensors appears (renamed from .part) only once complete.
    write_safetensors(os.path.join(d, "model.safetensors"), tensors, {"format": "pt"})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--only", default="gpt2,llama,mixtral", help="comma-separated: gpt2, llama, mixtral, gpt2-forward, llama-forward")
    ap.add_argument("--small", action="store_true", default=os.environ.get("BENCH_SMALL", "") not in ("", "0"))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    sizes = SMALL if args.small else FULL
    kinds = [k for k in args.only.split(",") if k]
    for k in kinds:
        if k not in MAKERS:
            sys.exit(f"error: unknown checkpoint {k!r} ({', '.join(MAKERS)})")
    os.makedirs(args.out_dir, exist_ok=True)
    for k in kinds:
        make(k, args.out_dir, sizes, args.seed)


if __name__ == "__main__":
    main()
