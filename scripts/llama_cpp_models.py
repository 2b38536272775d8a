#!/usr/bin/python3
"""Small random GGUF models of the families that extend the Llama block, with real tokenizers, for
scripts/compare-llama-cpp.sh: Llama 3 (rope scaling "llama3" as the rope_freqs tensor the converter
writes), Qwen3 (a norm on each head's queries and keys), Phi-3 (fused qkv and gate/up) and Gemma 2;
and for scripts/compare-node-llama-cpp.sh, Gemma 3 and variants of it and of Qwen3 (see VARIANTS),
with F16 and Q8_0 copies (COPIES).

Written with llama.cpp's own gguf-py (from its source tree: LLAMA_CPP_SRC), sharing nothing with
ffn-trace. The tokenizers are llama.cpp's test vocabularies (models/ggml-vocab-*.gguf): Phi-3's
SentencePiece vocabulary as it is, and GPT-2's byte-level BPE (50257 tokens, 50000 merges) split by
Llama 3's and Qwen2's pre-tokenizers, with their special tokens added.

The llama.cpp this was written against (February 2025) has no "qwen3" architecture, but its
"openelm" graph is Qwen3's arithmetic (per-head RMSNorm of q and k, NeoX RoPE, SwiGLU, a tied
head) with q, k and v fused into one tensor: each Qwen3 file gets an openelm twin holding the same
numbers, which llama.cpp runs while ffn-trace runs the qwen3 file.

  llama_cpp_models.py make OUT_DIR [FAMILY...]   the F32 models (and qwen3's openelm twin, and the
                                                 copies of COPIES)
  llama_cpp_models.py split-qkv TWIN QWEN3  a quantized openelm twin back to a qwen3 file
"""
import os
import sys
import types

import numpy as np

SRC = os.environ.get("LLAMA_CPP_SRC", "/work/llama.cpp-src")
# gguf-py imports sentencepiece for a converter class this script does not use.
sys.modules.setdefault("sentencepiece", types.SimpleNamespace(SentencePieceProcessor=None))
sys.path.insert(0, os.path.join(SRC, "gguf-py"))
import gguf  # noqa: E402

VOCABS = os.path.join(SRC, "models")

# Shapes as the real models have them, scaled down: GQA everywhere, heads of 32 to 128, Qwen3's
# wider than d_model / heads. d_model and d_ff are multiples of 256 so that llama-quantize's K-quants
# (blocks of 256 along a row) quantize every matrix instead of falling back to Q5_0 or Q8_0.
FAMILIES = {
    # Llama 3.1's scaling over a small original context, so that it changes positions 1 to 10
    "llama3": dict(arch="llama", d=256, ff=768, layers=3, heads=8, kv=2, hd=32, theta=10000.0, eps=1e-5,
                   tied=False, vocab="gpt-2", pre="llama-bpe", ctx=131072,
                   scaling=dict(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                original_max_position_embeddings=16)),
    "qwen3": dict(arch="qwen3", d=256, ff=768, layers=3, heads=4, kv=2, hd=128, theta=1000000.0, eps=1e-6,
                  tied=True, vocab="gpt-2", pre="qwen2", ctx=40960),
    "phi3": dict(arch="phi3", d=256, ff=512, layers=3, heads=8, kv=4, hd=32, theta=10000.0, eps=1e-5,
                 tied=False, vocab="phi-3", pre="default", ctx=4096, window=2047),
    # Gemma 2 2B's shape cut down: llama.cpp b4747 runs Gemma 2 only with 26, 42 or 46 layers (it
    # picks the query scale by size); the attention's soft cap and the window small enough to matter, the
    # final cap Gemma 2's own (30: a smaller one flattens these random logits into ties)
    "gemma2": dict(arch="gemma2", d=256, ff=512, layers=26, heads=4, kv=2, hd=128, theta=10000.0, eps=1e-6,
                   tied=True, vocab="llama-spm", pre="default", ctx=8192, window=4, attn_cap=2.0, final_cap=30.0),
    # Gemma 3 4B's shape cut down (a later llama.cpp than b4747 runs it): every sixth layer global,
    # the others within a window small enough to matter and with RoPE base 10000 (the key the
    # converter writes), each head's query and key RMSNormed, the global layers' RoPE scaled
    # linearly by 8 as 4B and up have it; no soft caps
    "gemma3": dict(arch="gemma3", d=256, ff=768, layers=8, heads=4, kv=2, hd=128, theta=1000000.0, eps=1e-6,
                   tied=True, vocab="llama-spm", pre="default", ctx=32768, window=4, swa_theta=10000.0,
                   rope_scaling=("linear", 8.0), embd=0.05),
}
# VARIANTS, each one setting changed from its family's (its own seed, after the families'):
# - qwen3-spread: embeddings of std 0.05 as trained models have; the qwen3 file's std 1 makes its
#   tied head give the last token's own id a probability of 1 - 1e-33, which float32 cannot tell apart
# - gemma3-gate: gate weights 1000 times larger, so that almost every gate is beyond ±10, where
#   llama.cpp's CPU GELU is exact (x or 0) instead of its f16 table's value (about 5e-4 off)
# - gemma3-global: gemma3-gate without the sliding window key, as the converter writes a Gemma 3
#   whose every layer is global (sliding_window_pattern 1): llama.cpp then runs every layer global,
#   with RoPE base freq_base
# - gemma3-base: gemma3-gate with the sliding layers' RoPE base 100000 instead of 10000
#   (rope.freq_base_swa)
FAMILIES["qwen3-spread"] = dict(FAMILIES["qwen3"], embd=0.05)
FAMILIES["gemma3-gate"] = dict(FAMILIES["gemma3"], gate=1000.0)
FAMILIES["gemma3-global"] = {k: v for k, v in FAMILIES["gemma3-gate"].items() if k != "window"}
FAMILIES["gemma3-base"] = dict(FAMILIES["gemma3-gate"], swa_theta=100000.0)

SPECIALS = {  # added after GPT-2's vocabulary, as control tokens (type 3)
    "llama3": ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
    "qwen3": ["<|im_start|>", "<|im_end|>"],
}


def read_vocab(name):
    r = gguf.GGUFReader(os.path.join(VOCABS, f"ggml-vocab-{name}.gguf"))
    out = {}
    for key, f in r.fields.items():
        if not key.startswith("tokenizer.ggml."):
            continue
        t = f.types[-1]
        values = [bytes(f.parts[i]).decode("utf-8") if t == gguf.GGUFValueType.STRING else f.parts[i][0] for i in f.data]
        out[key] = values if f.types[0] == gguf.GGUFValueType.ARRAY else values[0]
    return out


def tokenizer(family, c):
    family = family.split("-")[0]  # a variant's tokenizer is its family's
    v = read_vocab(c["vocab"])
    if family in SPECIALS:
        v["tokenizer.ggml.tokens"] = v["tokenizer.ggml.tokens"] + SPECIALS[family]
        v["tokenizer.ggml.token_type"] = list(v["tokenizer.ggml.token_type"]) + [3] * len(SPECIALS[family])
        ids = {t: i for i, t in enumerate(v["tokenizer.ggml.tokens"])}
        if family == "llama3":
            v["tokenizer.ggml.bos_token_id"] = ids["<|begin_of_text|>"]
            v["tokenizer.ggml.eos_token_id"] = ids["<|end_of_text|>"]
            v["tokenizer.ggml.add_bos_token"] = True
        else:
            v["tokenizer.ggml.bos_token_id"] = ids["<|endoftext|>"]
            v["tokenizer.ggml.eos_token_id"] = ids["<|im_end|>"]
            v["tokenizer.ggml.add_bos_token"] = False
    v["tokenizer.ggml.pre"] = c["pre"]
    return v


def write_metadata(w, arch, c, vocab, n_vocab):
    w.add_uint32(f"{arch}.block_count", c["layers"])
    w.add_uint32(f"{arch}.context_length", c["ctx"])
    w.add_uint32(f"{arch}.embedding_length", c["d"])
    w.add_uint32(f"{arch}.feed_forward_length", c["ff"])
    w.add_uint32(f"{arch}.attention.head_count", c["heads"])
    w.add_uint32(f"{arch}.attention.head_count_kv", c["kv"])
    w.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", c["eps"])
    w.add_float32(f"{arch}.rope.freq_base", c["theta"])
    w.add_uint32(f"{arch}.rope.dimension_count", c["hd"])
    if c["hd"] * c["heads"] != c["d"]:
        w.add_uint32(f"{arch}.attention.key_length", c["hd"])
        w.add_uint32(f"{arch}.attention.value_length", c["hd"])
    if "window" in c:
        w.add_uint32(f"{arch}.attention.sliding_window", c["window"])
    if "swa_theta" in c:
        w.add_float32(f"{arch}.rope.freq_base_swa", c["swa_theta"])
    if "rope_scaling" in c:
        w.add_string(f"{arch}.rope.scaling.type", c["rope_scaling"][0])
        w.add_float32(f"{arch}.rope.scaling.factor", c["rope_scaling"][1])
    if "attn_cap" in c:
        w.add_float32(f"{arch}.attn_logit_softcapping", c["attn_cap"])
        w.add_float32(f"{arch}.final_logit_softcapping", c["final_cap"])
    w.add_uint32(f"{arch}.vocab_size", n_vocab)
    for key, value in vocab.items():
        if isinstance(value, list):
            if key == "tokenizer.ggml.scores":
                w.add_array(key, [float(x) for x in value])
            elif key == "tokenizer.ggml.token_type":
                w.add_array(key, [int(x) for x in value])
            else:
                w.add_array(key, value)
        elif isinstance(value, str):
            w.add_string(key, value)
        elif isinstance(value, (bool, np.bool_)):
            w.add_bool(key, bool(value))
        else:
            w.add_uint32(key, int(value))


def llama3_factors(c):
    """convert_hf_to_gguf.py's rope_freqs for rope_type llama3: one factor per frequency."""
    s, dim = c["scaling"], c["hd"]
    freqs = 1.0 / (c["theta"] ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
    old = s["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old / s["low_freq_factor"], old / s["high_freq_factor"]
    factors = []
    for freq in freqs:
        wavelen = 2 * np.pi / freq
        if wavelen < high_wavelen:
            factors.append(1.0)
        elif wavelen > low_wavelen:
            factors.append(s["factor"])
        else:
            smooth = (old / wavelen - s["low_freq_factor"]) / (s["high_freq_factor"] - s["low_freq_factor"])
            factors.append(1 / ((1 - smooth) / s["factor"] + smooth))
    return np.array(factors, dtype=np.float32)


def weights(family, c, n_vocab, seed):
    """GGUF tensor name -> float32 array (rows = outputs), as the converter names and lays them out."""
    rng = np.random.default_rng(seed)
    family = family.split("-")[0]  # a variant changes a setting, not the tensors
    d, ff, hd, h, kv = c["d"], c["ff"], c["hd"], c["heads"], c["kv"]
    r = lambda *shape, s: rng.normal(0, s, size=shape).astype(np.float32)
    t = {"token_embd.weight": r(n_vocab, d, s=c.get("embd", 1.0))}
    for l in range(c["layers"]):
        p = f"blk.{l}."
        t[p + "attn_norm.weight"] = 1 + r(d, s=0.1)
        q, k, v = r(h * hd, d, s=d ** -0.5), r(kv * hd, d, s=d ** -0.5), r(kv * hd, d, s=d ** -0.5)
        if family == "phi3":
            t[p + "attn_qkv.weight"] = np.concatenate([q, k, v])
        else:
            t[p + "attn_q.weight"], t[p + "attn_k.weight"], t[p + "attn_v.weight"] = q, k, v
        if family in ("qwen3", "gemma3"):
            t[p + "attn_q_norm.weight"] = 1 + r(hd, s=0.2)
            t[p + "attn_k_norm.weight"] = 1 + r(hd, s=0.2)
        t[p + "attn_output.weight"] = r(d, h * hd, s=(h * hd) ** -0.5)
        t[p + "ffn_norm.weight"] = 1 + r(d, s=0.1)
        gate, up = r(ff, d, s=c.get("gate", 1.0) * d ** -0.5), r(ff, d, s=d ** -0.5)
        if family == "phi3":
            t[p + "ffn_up.weight"] = np.concatenate([gate, up])  # the gate's rows first
        else:
            t[p + "ffn_gate.weight"], t[p + "ffn_up.weight"] = gate, up
        t[p + "ffn_down.weight"] = r(d, ff, s=ff ** -0.5)
        if family.startswith("gemma"):  # the norms after the attention and after the FFN (stored as 1 + w)
            t[p + "post_attention_norm.weight"] = 1 + r(d, s=0.1)
            t[p + "post_ffw_norm.weight"] = 1 + r(d, s=0.1)
    t["output_norm.weight"] = 1 + r(d, s=0.1)
    if not c["tied"]:
        t["output.weight"] = r(n_vocab, d, s=d ** -0.5)
    if family == "llama3":
        t["rope_freqs.weight"] = llama3_factors(c)
    return t


def fuse_qkv(tensors, layers):
    """The openelm twin's tensors: each layer's q, k and v rows stacked in that order."""
    out = dict(tensors)
    for l in range(layers):
        p = f"blk.{l}."
        out[p + "attn_qkv.weight"] = np.concatenate([out.pop(p + n) for n in ("attn_q.weight", "attn_k.weight", "attn_v.weight")])
    return out


def write(path, arch, c, vocab, n_vocab, tensors):
    """tensors: name -> float32 array, or (raw bytes as uint8 rows, shape as numpy gives it, ggml type)."""
    w = gguf.GGUFWriter(path, arch)
    write_metadata(w, arch, c, vocab, n_vocab)
    for name, x in tensors.items():
        if isinstance(x, tuple):
            data, shape, kind = x
            w.add_tensor(name, data, raw_shape=shape, raw_dtype=kind)
        else:
            w.add_tensor(name, x)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# The architectures the February 2025 llama-quantize does not know: their F16 and Q8_0 copies are
# written here by gguf-py (Q8_0 bit for bit as ggml-quants.c), each with an F32 copy of the numbers it
# holds (gguf-py's dequantization), which llama.cpp runs to compare with ffn-trace on the copy.
COPIES = {"gemma3": (gguf.GGMLQuantizationType.F16, gguf.GGMLQuantizationType.Q8_0),
          "qwen3-spread": (gguf.GGMLQuantizationType.F16, gguf.GGMLQuantizationType.Q8_0)}


def rounded(tensors, kind):
    """(the tensors with every matrix stored as `kind`, the same numbers widened back to float32);
    vectors (the norms) stay F32 as the converter keeps them."""
    stored, widened = {}, {}
    for name, x in tensors.items():
        if x.ndim < 2:
            stored[name] = widened[name] = x
            continue
        q = gguf.quants.quantize(x, kind)
        stored[name] = q if kind == gguf.GGMLQuantizationType.F16 else (q, q.shape, kind)
        widened[name] = gguf.quants.dequantize(q, kind).reshape(x.shape).astype(np.float32)
    return stored, widened


def make(out, only=None):
    os.makedirs(out, exist_ok=True)
    for seed, (family, c) in enumerate(FAMILIES.items()):
        if only and family not in only:
            continue
        vocab = tokenizer(family, c)
        n_vocab = len(vocab["tokenizer.ggml.tokens"])
        tensors = weights(family, c, n_vocab, seed)
        write(os.path.join(out, f"{family}-F32.gguf"), c["arch"], c, vocab, n_vocab, tensors)
        if family == "qwen3":
            write(os.path.join(out, f"{family}-F32.openelm.gguf"), "openelm", c, vocab, n_vocab,
                  fuse_qkv(tensors, c["layers"]))
        if family in COPIES:
            for kind in COPIES[family]:
                stored, widened = rounded(tensors, kind)
                write(os.path.join(out, f"{family}-{kind.name}.gguf"), c["arch"], c, vocab, n_vocab, stored)
                write(os.path.join(out, f"{family}-{kind.name}.f32.gguf"), c["arch"], c, vocab, n_vocab, widened)
        print(f"{family}: {n_vocab} tokens, {sum(x.size for x in tensors.values())} weights")


def split_qkv(twin, path):
    """A qwen3 file from its (quantized) openelm twin: qkv's rows cut back into q, k and v, each row's
    bytes untouched (a row is whole blocks), the metadata written again."""
    c = FAMILIES["qwen3"]
    r = gguf.GGUFReader(twin)
    vocab = tokenizer("qwen3", c)
    n_vocab = len(vocab["tokenizer.ggml.tokens"])
    tensors = {}
    for t in r.tensors:
        rows = t.data.reshape(int(np.prod(t.shape[1:])), -1)  # one row of bytes (or numbers) per output
        # gguf-py takes a quantized tensor's shape in bytes (uint8 data) and works out its elements
        raw = lambda data: (np.ascontiguousarray(data), data.shape, t.tensor_type)
        if t.name.endswith("attn_qkv.weight"):
            p = t.name[: -len("attn_qkv.weight")]
            q, k = c["heads"] * c["hd"], c["kv"] * c["hd"]
            for name, part in (("attn_q", rows[:q]), ("attn_k", rows[q:q + k]), ("attn_v", rows[q + k:])):
                tensors[p + name + ".weight"] = raw(part)
        else:
            tensors[t.name] = raw(rows if len(t.shape) > 1 else t.data)
    write(path, "qwen3", c, vocab, n_vocab, tensors)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) == 4 and sys.argv[1] == "split-qkv":
        split_qkv(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
