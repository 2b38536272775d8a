#!/usr/bin/env python3
"""A small Llama written twice: OUT_DIR/model.gguf, its weights ggml's quantized blocks (the types
a Q4_K_M file mixes: Q4_K, Q6_K, Q8_0, Q5_K, Q5_0, Q5_1, and F32 norms), Q and K rows permuted
as llama.cpp's converter does, with a byte-level vocabulary in its metadata; and OUT_DIR/st/, a
safetensors directory (config.json, model.safetensors, vocab.json, merges.txt) holding every
weight in F64 as its block's formula gives it from the codes. The codes are drawn at random
(seeded); d and dmin are binary16 numbers of 3 significant bits, so that ggml's float arithmetic
is exact and the F64 values are the very weights. Written from ggml's docs/gguf.md and the block
layouts of ggml-common.h with numpy alone, sharing nothing with ffn-trace or its C++ tests.

    quantized.py OUT_DIR
"""
import json
import os
import struct
import sys

import numpy as np

D_MODEL, D_FF, HEADS, KV_HEADS, HEAD_DIM, VOCAB, POSITIONS, LAYERS = 256, 512, 4, 2, 64, 16, 16, 2
EPS = float(np.float32(1e-5))
TYPE_ID = {"F32": 0, "Q5_0": 6, "Q5_1": 7, "Q8_0": 8, "Q4_K": 12, "Q5_K": 13, "Q6_K": 14}
BLOCK = {"Q5_0": 32, "Q5_1": 32, "Q8_0": 32, "Q4_K": 256, "Q5_K": 256, "Q6_K": 256}
# the scale exponent of each type's blocks: weights of at most a few units
EXPONENT = {"Q8_0": 9, "Q5_0": 6, "Q5_1": 7, "Q4_K": 12, "Q5_K": 13, "Q6_K": 13}
# layer 0 as Q4_K_M stores one; layer 1 in the other types
MIX = [dict(q="Q4_K", k="Q4_K", v="Q6_K", o="Q4_K", gate="Q4_K", up="Q4_K", down="Q6_K"),
       dict(q="Q5_K", k="Q5_0", v="Q8_0", o="Q5_1", gate="Q5_K", up="Q8_0", down="Q6_K")]
TOKENS = [chr(ord("a") + i) for i in range(14)] + ["\u0120", "ab"]

rng = np.random.default_rng(34)


def scales(e, n):
    """n numbers ± (4…7)·2^−(e + 0…3): binary16 numbers of 3 significant bits."""
    return rng.choice([-1, 1], size=n) * rng.integers(4, 8, size=n) * 2.0 ** -(e + rng.integers(0, 4, size=n))


def half(v):
    """(n,) values binary16 holds → (n, 2) bytes."""
    return v.astype(np.float16).view(np.uint8).reshape(-1, 2)


def codes(n, k, lo, hi):
    return rng.integers(lo, hi + 1, size=(n, k))


def nibbles(lo, hi):
    return (lo | (hi << 4)).astype(np.uint8)


def k_scales(sc, m):
    """Q4_K's and Q5_K's 8 scales and 8 mins of 6 bits, (n, 8) each, in (n, 12) bytes."""
    s = np.zeros((sc.shape[0], 12), dtype=np.int64)
    s[:, 0:4] = sc[:, 0:4] | ((sc[:, 4:8] >> 4) << 6)
    s[:, 4:8] = m[:, 0:4] | ((m[:, 4:8] >> 4) << 6)
    s[:, 8:12] = (sc[:, 4:8] & 15) | ((m[:, 4:8] & 15) << 4)
    return s.astype(np.uint8)


def blocks(kind, n):
    """n random blocks of the type: their bytes (n, block bytes) and weights (n, block weights),
    each weight by the type's formula."""
    e = EXPONENT[kind]
    d, m = scales(e, n), scales(e, n)
    col = lambda v: v[:, None]
    if kind == "Q8_0":
        q = codes(n, 32, -128, 127)
        return np.hstack([half(d), q.astype(np.int8).view(np.uint8)]), col(d) * q
    if kind in ("Q5_0", "Q5_1"):
        q = codes(n, 32, 0, 31)
        qh = (((q >> 4) & 1) << np.arange(32)).sum(axis=1).astype("<u4").view(np.uint8).reshape(n, 4)
        body = np.hstack([qh, nibbles(q[:, :16] & 15, q[:, 16:] & 15)])
        if kind == "Q5_0":
            return np.hstack([half(d), body]), col(d) * (q - 16)
        return np.hstack([half(d), half(m), body]), col(d) * q + col(m)
    if kind in ("Q4_K", "Q5_K"):
        dmin = np.abs(m)
        sc, mn = codes(n, 8, 0, 63), codes(n, 8, 0, 63)
        q = codes(n, 256, 0, 15 if kind == "Q4_K" else 31)
        w = col(d) * np.repeat(sc, 32, axis=1) * q - col(dmin) * np.repeat(mn, 32, axis=1)
        pairs = q.reshape(n, 4, 2, 32) & 15  # sub-blocks 2p (low nibbles) and 2p + 1 (high)
        qs = nibbles(pairs[:, :, 0, :], pairs[:, :, 1, :]).reshape(n, 128)
        head = np.hstack([half(d), half(dmin), k_scales(sc, mn)])
        if kind == "Q4_K":
            return np.hstack([head, qs]), w
        # the fifth bit of sub-block s's weight l: bit s of qh[l]
        qh = (((q.reshape(n, 8, 32) >> 4) & 1) << np.arange(8)[None, :, None]).sum(axis=1).astype(np.uint8)
        return np.hstack([head, qh, qs]), w
    # Q6_K: 16 sub-blocks of 16, w = d·sc·(q − 32); in half h, weight 32k + l
    sc, q = codes(n, 16, -128, 127), codes(n, 256, 0, 63)
    w = col(d) * np.repeat(sc, 16, axis=1) * (q - 32)
    h = q.reshape(n, 2, 4, 32)
    ql = np.concatenate([(h[:, :, 0] & 15) | ((h[:, :, 2] & 15) << 4), (h[:, :, 1] & 15) | ((h[:, :, 3] & 15) << 4)], axis=2)
    qh = (h[:, :, 0] >> 4) | ((h[:, :, 1] >> 4) << 2) | ((h[:, :, 2] >> 4) << 4) | ((h[:, :, 3] >> 4) << 6)
    return np.hstack([ql.reshape(n, 128).astype(np.uint8), qh.reshape(n, 64).astype(np.uint8),
                      sc.astype(np.int8).view(np.uint8), half(d)]), w


def stored(kind, rows, cols, offset=0.0):
    """A tensor of rows × cols as stored (row-major): its bytes and values."""
    if kind == "F32":
        v = (offset + rng.uniform(-0.25, 0.25, size=rows * cols)).astype(np.float32)
        return v.tobytes(), v.astype(np.float64).reshape(rows, cols)
    raw, w = blocks(kind, rows * cols // BLOCK[kind])
    return raw.tobytes(), w.reshape(rows, cols)


def unpermute(v, heads):
    """Stored row h·hd + 2i + s (llama.cpp's order for its RoPE) is Hugging Face's h·hd + s·hd/2 + i."""
    rows = v.shape[0]
    hd = rows // heads
    return v.reshape(heads, hd // 2, 2, -1).transpose(0, 2, 1, 3).reshape(rows, -1)


def gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def metadata():
    u32 = lambda k, v: gguf_string(k) + struct.pack("<II", 4, v)
    f32 = lambda k, v: gguf_string(k) + struct.pack("<If", 6, v)
    strings = lambda k, vs: gguf_string(k) + struct.pack("<IIQ", 9, 8, len(vs)) + b"".join(gguf_string(s) for s in vs)
    return [gguf_string("general.architecture") + struct.pack("<I", 8) + gguf_string("llama"),
            u32("llama.block_count", LAYERS), u32("llama.embedding_length", D_MODEL), u32("llama.feed_forward_length", D_FF),
            u32("llama.attention.head_count", HEADS), u32("llama.attention.head_count_kv", KV_HEADS),
            u32("llama.context_length", POSITIONS), f32("llama.attention.layer_norm_rms_epsilon", EPS),
            f32("llama.rope.freq_base", 10000.0), gguf_string("tokenizer.ggml.model") + struct.pack("<I", 8) + gguf_string("gpt2"),
            strings("tokenizer.ggml.tokens", TOKENS), strings("tokenizer.ggml.merges", ["a b"])]


def tensors():
    """(GGUF name, Hugging Face name, type, stored rows, cols, how the HF tensor is made, offset)."""
    out = [("token_embd.weight", "model.embed_tokens.weight", "Q8_0", VOCAB, D_MODEL, None, 0.0)]
    for i, t in enumerate(MIX):
        b, h = f"blk.{i}.", f"model.layers.{i}."
        out += [(b + "attn_norm.weight", h + "input_layernorm.weight", "F32", 1, D_MODEL, "vector", 1.0),
                (b + "attn_q.weight", h + "self_attn.q_proj.weight", t["q"], HEADS * HEAD_DIM, D_MODEL, HEADS, 0.0),
                (b + "attn_k.weight", h + "self_attn.k_proj.weight", t["k"], KV_HEADS * HEAD_DIM, D_MODEL, KV_HEADS, 0.0),
                (b + "attn_v.weight", h + "self_attn.v_proj.weight", t["v"], KV_HEADS * HEAD_DIM, D_MODEL, None, 0.0),
                (b + "attn_output.weight", h + "self_attn.o_proj.weight", t["o"], D_MODEL, HEADS * HEAD_DIM, None, 0.0),
                (b + "ffn_norm.weight", h + "post_attention_layernorm.weight", "F32", 1, D_MODEL, "vector", 1.0),
                (b + "ffn_gate.weight", h + "mlp.gate_proj.weight", t["gate"], D_FF, D_MODEL, None, 0.0),
                (b + "ffn_up.weight", h + "mlp.up_proj.weight", t["up"], D_FF, D_MODEL, None, 0.0),
                (b + "ffn_down.weight", h + "mlp.down_proj.weight", t["down"], D_MODEL, D_FF, None, 0.0)]
    return out + [("output_norm.weight", "model.norm.weight", "F32", 1, D_MODEL, "vector", 1.0),
                  ("output.weight", "lm_head.weight", "Q6_K", VOCAB, D_MODEL, None, 0.0)]


def main():
    out_dir = sys.argv[1]
    os.makedirs(os.path.join(out_dir, "st"), exist_ok=True)
    infos, data, f64, header = [], b"", [], {}
    for gguf_name, hf_name, kind, rows, cols, how, offset in tensors():
        raw, v = stored(kind, rows, cols, offset)
        data += b"\0" * (-len(data) % 32)
        ne = [cols] if how == "vector" else [cols, rows]
        infos.append(gguf_string(gguf_name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne) +
                     struct.pack("<IQ", TYPE_ID[kind], len(data)))
        data += raw
        if isinstance(how, int):
            v = unpermute(v, how)
        v = v.ravel() if how == "vector" else v
        at = sum(a.nbytes for a in f64)
        header[hf_name] = {"dtype": "F64", "shape": list(v.shape), "data_offsets": [at, at + v.nbytes]}
        f64.append(np.ascontiguousarray(v, dtype="<f8"))
    meta = metadata()
    head = b"GGUF" + struct.pack("<IQQ", 3, len(infos), len(meta)) + b"".join(meta) + b"".join(infos)
    with open(os.path.join(out_dir, "model.gguf"), "wb") as f:
        f.write(head + b"\0" * (-len(head) % 32) + data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(os.path.join(out_dir, "st", "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(a.tobytes() for a in f64))
    config = {"model_type": "llama", "hidden_size": D_MODEL, "intermediate_size": D_FF, "num_hidden_layers": LAYERS,
              "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "max_position_embeddings": POSITIONS,
              "rms_norm_eps": EPS, "rope_theta": 10000.0, "vocab_size": VOCAB, "hidden_act": "silu",
              "tie_word_embeddings": False}
    with open(os.path.join(out_dir, "st", "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(out_dir, "st", "vocab.json"), "w", encoding="utf-8") as f:
        json.dump({t: i for i, t in enumerate(TOKENS)}, f, ensure_ascii=False)
    with open(os.path.join(out_dir, "st", "merges.txt"), "w") as f:
        f.write("#version: 0.2\na b\n")


if __name__ == "__main__":
    main()
