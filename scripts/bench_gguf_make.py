#!/usr/bin/env python3
"""Writes the GGUF benchmark's layer twice: one Llama-2-7B-shaped FFN layer (4096 → 11008 SwiGLU)
with random (seeded) weights, quantized as a Q4_K_M file stores such a layer — ffn_gate and
ffn_up Q4_K, ffn_down Q6_K, the norm F32 — and the same weights, dequantized, as BF16
safetensors.

    bench_gguf_make.py OUT_DIR [--small] [--seed N]

Makes OUT_DIR/model.gguf (architecture llama, one block, no vocabulary), OUT_DIR/bf16/
(config.json and model.safetensors: the dequantized weights rounded to BF16, the norm in BF16)
and OUT_DIR/input.npy (float64, 16 tokens × d_model). --small: d_model 256 and d_ff 512, to test
the script. The weights are N(0, 0.02²), quantized block by block with each sub-block's own
range (a plain quantizer, not llama.cpp's search for the best scales: the timing does not depend
on which codes are chosen), and packed as ggml-common.h lays the blocks out. Written from ggml's
docs/gguf.md with numpy alone, rows a slab at a time, so memory stays small. A directory whose
files are all there is left as it is.
"""

import argparse
import json
import os
import struct
import sys

import numpy as np

FULL = {"d_model": 4096, "d_ff": 11008, "tokens": 16}
SMALL = {"d_model": 256, "d_ff": 512, "tokens": 16}
ALIGN = 32
SLAB = 512  # rows quantized at a time
GGML_F32, GGML_Q4_K, GGML_Q6_K = 0, 12, 14
BLOCK_BYTES = {GGML_Q4_K: 144, GGML_Q6_K: 210}


def f16(x):
    return np.asarray(x, dtype=np.float32).astype(np.float16)


def quantize_q4_k(x):
    """(n, 256) float32 → (n, 144) uint8 blocks and the weights they dequantize to, as ggml does:
    8 sub-blocks of 32, w = (d·sc)·q − (dmin·m), sc, m 6-bit, q 4-bit."""
    n = x.shape[0]
    sub = x.reshape(n, 8, 32)
    lo = np.minimum(sub.min(axis=2), 0)
    hi = sub.max(axis=2)
    scale, mins = (hi - lo) / 15, -lo
    d = f16(np.maximum(scale.max(axis=1), 1e-8) / 63)
    dmin = f16(np.maximum(mins.max(axis=1), 1e-8) / 63)
    d32, dmin32 = d.astype(np.float32), dmin.astype(np.float32)
    sc = np.clip(np.rint(scale / d32[:, None]), 1, 63).astype(np.int32)
    m = np.clip(np.rint(mins / dmin32[:, None]), 0, 63).astype(np.int32)
    d1 = (d32[:, None] * sc.astype(np.float32))[:, :, None]
    m1 = (dmin32[:, None] * m.astype(np.float32))[:, :, None]
    q = np.clip(np.rint((sub + m1) / d1), 0, 15).astype(np.int32)
    w = (d1 * q.astype(np.float32) - m1).reshape(n, 256)
    out = np.zeros((n, 144), dtype=np.uint8)
    out[:, 0:2] = d.view(np.uint8).reshape(n, 2)
    out[:, 2:4] = dmin.view(np.uint8).reshape(n, 2)
    s = np.zeros((n, 12), dtype=np.int32)
    s[:, 0:4] = sc[:, 0:4] | ((sc[:, 4:8] >> 4) << 6)
    s[:, 4:8] = m[:, 0:4] | ((m[:, 4:8] >> 4) << 6)
    s[:, 8:12] = (sc[:, 4:8] & 15) | ((m[:, 4:8] & 15) << 4)
    out[:, 4:16] = s
    q = q.reshape(n, 4, 2, 32)  # pairs of sub-blocks: the first in the low nibbles
    out[:, 16:] = (q[:, :, 0, :] | (q[:, :, 1, :] << 4)).reshape(n, 128)
    return out, w


def quantize_q6_k(x):
    """(n, 256) float32 → (n, 210) uint8 blocks and their weights: 16 sub-blocks of 16,
    w = (d·sc)·(q − 32), sc signed 8-bit, q 6-bit."""
    n = x.shape[0]
    sub = x.reshape(n, 16, 16)
    scale = np.abs(sub).max(axis=2) / 31
    d = f16(np.maximum(scale.max(axis=1), 1e-8) / 127)
    d32 = d.astype(np.float32)
    sc = np.clip(np.rint(scale / d32[:, None]), 1, 127).astype(np.int32)
    d1 = (d32[:, None] * sc.astype(np.float32))[:, :, None]
    q = np.clip(np.rint(sub / d1) + 32, 0, 63).astype(np.int32)
    w = (d1 * (q - 32).astype(np.float32)).reshape(n, 256)
    q = q.reshape(n, 2, 4, 32)  # two halves of 128; in each, weight 32k + l
    ql = np.zeros((n, 2, 64), dtype=np.int32)
    ql[:, :, 0:32] = (q[:, :, 0] & 15) | ((q[:, :, 2] & 15) << 4)
    ql[:, :, 32:64] = (q[:, :, 1] & 15) | ((q[:, :, 3] & 15) << 4)
    qh = (q[:, :, 0] >> 4) | ((q[:, :, 1] >> 4) << 2) | ((q[:, :, 2] >> 4) << 4) | ((q[:, :, 3] >> 4) << 6)
    out = np.zeros((n, 210), dtype=np.uint8)
    out[:, 0:128] = ql.reshape(n, 128)
    out[:, 128:192] = qh.reshape(n, 64)
    out[:, 192:208] = sc.astype(np.int8).view(np.uint8)
    out[:, 208:210] = d.view(np.uint8).reshape(n, 2)
    return out, w


def to_bf16(f32):
    """float32 → bfloat16 bits, rounded to nearest even."""
    u = np.ascontiguousarray(f32, dtype=np.float32).view(np.uint32)
    return ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype("<u2")


class Weight:
    """One matrix (rows, cols) of N(0, 0.02²), quantized a slab of rows at a time."""

    def __init__(self, gguf, hf, rows, cols, ggml_type, seed):
        self.gguf, self.hf, self.rows, self.cols, self.type, self.seed = gguf, hf, rows, cols, ggml_type, seed

    def gguf_bytes(self):
        return self.rows * self.cols // 256 * BLOCK_BYTES[self.type]

    def slabs(self):
        """(blocks, dequantized float32) for each slab of rows, in order."""
        rng = np.random.default_rng(self.seed)
        quantize = quantize_q4_k if self.type == GGML_Q4_K else quantize_q6_k
        for r0 in range(0, self.rows, SLAB):
            n = min(SLAB, self.rows - r0)
            x = (rng.standard_normal((n, self.cols), dtype=np.float32) * np.float32(0.02)).reshape(-1, 256)
            blocks, w = quantize(x)
            yield blocks.tobytes(), w.reshape(n, self.cols)


def gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def metadata(d_model, d_ff):
    entries = [("general.architecture", 8, gguf_string("llama")), ("general.file_type", 4, struct.pack("<I", 15))]
    for key, v in [("block_count", 1), ("embedding_length", d_model), ("feed_forward_length", d_ff),
                   ("attention.head_count", 32), ("attention.head_count_kv", 32), ("context_length", 4096)]:
        entries.append(("llama." + key, 4, struct.pack("<I", v)))
    entries.append(("llama.attention.layer_norm_rms_epsilon", 6, struct.pack("<f", 1e-5)))
    entries.append(("llama.rope.freq_base", 6, struct.pack("<f", 10000.0)))
    return entries


def write_both(out_dir, s, seed):
    d, f = s["d_model"], s["d_ff"]
    p = "model.layers.0."
    weights = [Weight("blk.0.ffn_gate.weight", p + "mlp.gate_proj.weight", f, d, GGML_Q4_K, seed + 1),
               Weight("blk.0.ffn_up.weight", p + "mlp.up_proj.weight", f, d, GGML_Q4_K, seed + 2),
               Weight("blk.0.ffn_down.weight", p + "mlp.down_proj.weight", d, f, GGML_Q6_K, seed + 3)]
    norm = (np.random.default_rng(seed).standard_normal(d, dtype=np.float32) * np.float32(0.1) + np.float32(1)).astype("<f4")
    norm = norm.view(np.uint32) & np.uint32(0xFFFF0000)  # a value BF16 holds: both files the same norm
    norm = norm.view(np.float32)

    # GGUF: header, metadata, tensor infos, then the data, each tensor aligned.
    tensors = [("blk.0.ffn_norm.weight", [d], GGML_F32, 4 * d)] + [(w.gguf, [w.cols, w.rows], w.type, w.gguf_bytes()) for w in weights]
    meta = metadata(d, f)
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(meta))
    head += b"".join(gguf_string(k) + struct.pack("<I", t) + v for k, t, v in meta)
    offset = 0
    for name, ne, t, nbytes in tensors:
        offset = (offset + ALIGN - 1) // ALIGN * ALIGN
        head += gguf_string(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        head += struct.pack("<IQ", t, offset)
        offset += nbytes
    head += b"\0" * (-len(head) % ALIGN)

    # safetensors: the same layer, BF16.
    st = {"__metadata__": {"format": "pt"}}
    at = 0
    for name, shape in [(p + "post_attention_layernorm.weight", [d])] + [(w.hf, [w.rows, w.cols]) for w in weights]:
        n = 2 * int(np.prod(shape))
        st[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [at, at + n]}
        at += n
    st_head = json.dumps(st, separators=(",", ":")).encode()
    st_head += b" " * (-len(st_head) % 8)

    os.makedirs(os.path.join(out_dir, "bf16"), exist_ok=True)
    gguf_path, st_path = os.path.join(out_dir, "model.gguf"), os.path.join(out_dir, "bf16", "model.safetensors")
    with open(gguf_path + ".part", "wb") as g, open(st_path + ".part", "wb") as t:
        g.write(head)
        g.write(norm.tobytes())
        t.write(struct.pack("<Q", len(st_head)) + st_head)
        t.write(to_bf16(norm).tobytes())
        written = 4 * d
        for w in weights:
            g.write(b"\0" * (-written % ALIGN))
            written += -written % ALIGN
            for blocks, values in w.slabs():
                g.write(blocks)
                t.write(to_bf16(values).tobytes())
                written += len(blocks)
            print(f"  {w.gguf}: {w.rows} × {w.cols}, {'Q4_K' if w.type == GGML_Q4_K else 'Q6_K'}", file=sys.stderr)
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": d, "intermediate_size": f,
              "num_hidden_layers": 1, "num_attention_heads": 32, "num_key_value_heads": 32, "max_position_embeddings": 4096,
              "rms_norm_eps": float(np.float32(1e-5)), "rope_theta": 10000.0, "hidden_act": "silu", "vocab_size": 32000,
              "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
    with open(os.path.join(out_dir, "bf16", "config.json"), "w") as c:
        json.dump(config, c, indent=2)
    rng = np.random.default_rng(seed + 99)
    np.save(os.path.join(out_dir, "input.npy"), rng.standard_normal((s["tokens"], d)).astype("<f8"))
    # The weights last: each file appears (renamed from .part) only once complete.
    os.replace(st_path + ".part", st_path)
    os.replace(gguf_path + ".part", gguf_path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--seed", type=int, default=6000)
    args = ap.parse_args()
    files = ["model.gguf", "input.npy", "bf16/config.json", "bf16/model.safetensors"]
    if all(os.path.exists(os.path.join(args.out_dir, f)) for f in files):
        print(f"already there ({args.out_dir})", file=sys.stderr)
        return
    s = SMALL if args.small else FULL
    print(f"writing a {s['d_model']} → {s['d_ff']} layer as Q4_K_M GGUF and BF16 safetensors in {args.out_dir}", file=sys.stderr)
    write_both(args.out_dir, s, args.seed)


if __name__ == "__main__":
    main()
