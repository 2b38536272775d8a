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


def scale(e):
    """± (4…7)·2^−(e + 0…3): a binary16 number of 3 significant bits."""
    return float(rng.choice([-1, 1]) * rng.integers(4, 8) * 2.0 ** -(e + rng.integers(0, 4)))


def half(v):
    return np.float16(v).tobytes()


def codes(n, lo, hi):
    return rng.integers(lo, hi + 1, size=n)


def nibbles(lo, hi):
    return bytes((lo | (hi << 4)).astype(np.uint8))


def k_scales(sc, m):
    """Q4_K's and Q5_K's 8 scales and 8 mins of 6 bits in 12 bytes."""
    s = np.zeros(12, dtype=np.int64)
    s[0:4] = sc[0:4] | ((sc[4:8] >> 4) << 6)
    s[4:8] = m[0:4] | ((m[4:8] >> 4) << 6)
    s[8:12] = (sc[4:8] & 15) | ((m[4:8] & 15) << 4)
    return bytes(s.astype(np.uint8))


def block(kind):
    """One random block of the type: its bytes and its weights, w by the type's formula."""
    e = EXPONENT[kind]
    d, m = scale(e), scale(e)
    if kind == "Q8_0":
        q = codes(32, -128, 127)
        return half(d) + bytes(q.astype(np.int8).view(np.uint8)), d * q
    if kind in ("Q5_0", "Q5_1"):
        q = codes(32, 0, 31)
        qh = sum(int((q[j] >> 4) & 1) << j for j in range(32))
        body = struct.pack("<I", qh) + nibbles(q[:16] & 15, q[16:] & 15)
        if kind == "Q5_0":
            return half(d) + body, d * (q - 16)
        return half(d) + half(m) + body, d * q + m
    if kind in ("Q4_K", "Q5_K"):
        dmin = abs(m)
        sc, mn = codes(8, 0, 63), codes(8, 0, 63)
        q = codes(256, 0, 15 if kind == "Q4_K" else 31)
        w = d * np.repeat(sc, 32) * q - dmin * np.repeat(mn, 32)
        pairs = q.reshape(4, 2, 32) & 15  # sub-blocks 2p (low nibbles) and 2p + 1 (high)
        qs = nibbles(pairs[:, 0, :].ravel(), pairs[:, 1, :].ravel())
        head = half(d) + half(dmin) + k_scales(sc, mn)
        if kind == "Q4_K":
            return head + qs, w
        qh = np.zeros(32, dtype=np.int64)
        for s in range(8):
            qh |= ((q[32 * s:32 * s + 32] >> 4) & 1) << s
        return head + bytes(qh.astype(np.uint8)) + qs, w
    # Q6_K: 16 sub-blocks of 16, w = d·sc·(q − 32)
    sc, q = codes(16, -128, 127), codes(256, 0, 63)
    w = d * np.repeat(sc, 16) * (q - 32)
    half_q = q.reshape(2, 4, 32)  # half n, weight 32k + l
    ql = np.concatenate([np.concatenate([(h[0] & 15) | ((h[2] & 15) << 4), (h[1] & 15) | ((h[3] & 15) << 4)]) for h in half_q])
    qh = np.concatenate([(h[0] >> 4) | ((h[1] >> 4) << 2) | ((h[2] >> 4) << 4) | ((h[3] >> 4) << 6) for h in half_q])
    return bytes(ql.astype(np.uint8)) + bytes(qh.astype(np.uint8)) + bytes(sc.astype(np.int8).view(np.uint8)) + half(d), w


def stored(kind, rows, cols, offset=0.0):
    """A tensor of rows × cols as stored (row-major): its bytes and values."""
    if kind == "F32":
        v = (offset + rng.uniform(-0.25, 0.25, size=rows * cols)).astype(np.float32)
        return v.tobytes(), v.astype(np.float64).reshape(rows, cols)
    parts = [block(kind) for _ in range(rows * cols // BLOCK[kind])]
    return b"".join(p[0] for p in parts), np.concatenate([p[1] for p in parts]).reshape(rows, cols)


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
