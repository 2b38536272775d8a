#!/usr/bin/env python3
"""A tiny Llama (or Mixtral) with quantized FFN weights, written as a GGUF file the way llama.cpp
writes one, and beside it, when asked, the same model as a safetensors directory of F64 weights
holding the dequantized values; and a check of the walkthrough's dequantized weights against the
file's own bytes. The blocks are packed from their codes by the layouts of ggml-common.h and
decoded again from the bytes by the arithmetic of ggml-quants.c (in float32, as ggml does), with
the standard library alone, sharing nothing with ffn-trace.

    quantized_units.py write dense|moe OUT.gguf [OUT_DIR]
    quantized_units.py check OUT.gguf JSON    (the JSON of run --format json, with --unit)

Dense: d_model 256, d_ff 512, gate Q4_K, up Q8_0, down Q6_K (two blocks a row). Mixtral: four
experts of d_ff 64, gate_exps Q4_K, up_exps Q5_K, down_exps Q8_0 (two blocks a row), the router
F32. Attention:
Q and K zero (so that llama.cpp's permutation of their rows does not matter), V and O F32.
"""
import json
import os
import random
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from convert import ALIGN, f32, gguf_string, i32s, string, strings, u32  # noqa: E402

D_MODEL, VOCAB = 256, 6
TYPES = {"F32": (0, 1, 4), "Q8_0": (8, 32, 34), "Q4_K": (12, 256, 144), "Q5_K": (13, 256, 176), "Q6_K": (14, 256, 210)}
TOKENS = ["<unk>", "<s>", "\u2581a", "a", "\u2581b", "b"]


def fl(x):
    """x rounded to float32, as ggml's float arithmetic rounds each operation."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def half(b, at):
    return struct.unpack_from("<e", b, at)[0]


# ---- packing codes into blocks (ggml-common.h) ------------------------------------------------

def pack_q8_0(rng):
    return struct.pack("<e", rng.choice([1, 3, 5, 7]) / 512) + bytes(rng.randrange(256) for _ in range(32))


def scales_k4(sc, m):
    """Q4_K and Q5_K's 8 scales and 8 mins, 6 bits each, in 12 bytes."""
    s = bytearray(12)
    for j in range(8):
        if j < 4:
            s[j] |= sc[j]
            s[j + 4] |= m[j]
        else:
            s[j + 4] |= (sc[j] & 15) | ((m[j] & 15) << 4)
            s[j - 4] |= (sc[j] >> 4) << 6
            s[j] |= (m[j] >> 4) << 6
    return bytes(s)


def pack_k(rng, five):
    d, dmin = rng.choice([1, 3, 5]) / 8192, rng.choice([1, 3, 7]) / 16384
    sc = [rng.randrange(64) for _ in range(8)]
    m = [rng.randrange(64) for _ in range(8)]
    q = [rng.randrange(32 if five else 16) for _ in range(256)]
    qs = bytearray(128)  # sub-blocks 2p and 2p + 1 share 32 bytes, the first in the low nibbles
    for p in range(4):
        for l in range(32):
            qs[32 * p + l] = (q[64 * p + l] & 15) | ((q[64 * p + 32 + l] & 15) << 4)
    qh = bytearray(32)  # Q5_K: the fifth bit of sub-block s's weight l in bit s of byte l
    for w in range(256):
        if q[w] & 16:
            qh[w % 32] |= 1 << (w // 32)
    return struct.pack("<ee", d, dmin) + scales_k4(sc, m) + (bytes(qh) if five else b"") + bytes(qs)


def pack_q6_k(rng):
    q = [rng.randrange(64) for _ in range(256)]
    ql, qh = bytearray(128), bytearray(64)
    for w in range(256):
        n, k, l = w // 128, (w % 128) // 32, w % 32
        ql[64 * n + l + 32 * (k % 2)] |= (q[w] & 15) << (0 if k < 2 else 4)
        qh[32 * n + l] |= (q[w] >> 4) << (2 * k)
    sc = bytes(rng.randrange(-20, 21) & 255 for _ in range(16))
    return bytes(ql) + bytes(qh) + sc + struct.pack("<e", rng.choice([1, 3]) / 4096)


def pack(type_name, rng):
    return {"Q8_0": lambda: pack_q8_0(rng), "Q4_K": lambda: pack_k(rng, False), "Q5_K": lambda: pack_k(rng, True),
            "Q6_K": lambda: pack_q6_k(rng)}[type_name]()


# ---- decoding a block from its bytes (ggml-quants.c), and its numbers by name ---------------

def scale_min_k4(j, s):
    if j < 4:
        return s[j] & 63, s[j + 4] & 63
    return (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4), (s[j + 4] >> 4) | ((s[j] >> 6) << 4)


def numbers(type_name, b, k):
    """The numbers of weight k of block b, by the names of its formula, and the weight."""
    if type_name == "Q8_0":
        d, q = half(b, 0), struct.unpack_from("<b", b, 2 + k)[0]
        return {"d": d, "q": q}, fl(q * d)
    if type_name in ("Q4_K", "Q5_K"):
        five = type_name == "Q5_K"
        d, dmin = half(b, 0), half(b, 2)
        s, qs = b[4:16], b[48:176] if five else b[16:144]
        sub, l = k // 32, k % 32
        sc, m = scale_min_k4(sub, s)
        byte = qs[32 * (sub // 2) + l]
        q = (byte & 0xF) if sub % 2 == 0 else byte >> 4
        if five and b[16 + l] & (1 << sub):
            q += 16
        return {"d": d, "sc": sc, "q": q, "dmin": dmin, "m": m}, fl(fl(fl(d * sc) * q) - fl(dmin * m))
    if type_name == "Q6_K":
        ql, qh, scales, d = b[0:128], b[128:192], b[192:208], half(b, 208)
        n, j, l = k // 128, (k % 128) // 32, k % 32
        low = ql[64 * n + l + 32 * (j % 2)]
        q = ((low & 0xF) if j < 2 else low >> 4) | (((qh[32 * n + l] >> (2 * j)) & 3) << 4)
        sc = struct.unpack("<b", scales[8 * n + l // 16 + 2 * j:8 * n + l // 16 + 2 * j + 1])[0]
        return {"d": d, "sc": sc, "q": q}, fl(fl(d * sc) * (q - 32))
    raise ValueError(type_name)


def dequantized(type_name, data):
    n, size = TYPES[type_name][1], TYPES[type_name][2]
    return [numbers(type_name, data[at:at + size], k)[1] for at in range(0, len(data), size) for k in range(n)]


# ---- the model -----------------------------------------------------------------------------

class Model:
    def __init__(self, moe):
        self.moe = moe
        self.d_ff = 64 if moe else 512
        self.tensors = []  # (gguf name, ne, type, bytes, hf name or None, hf shape, experts)
        self.rng = random.Random(34)

    def floats(self, name, ne, hf, scale=0.1):
        v = [fl(scale * (self.rng.random() * 2 - 1)) for _ in range(ne[0] * (ne[1] if len(ne) > 1 else 1))]
        self.tensors.append((name, ne, "F32", struct.pack("<%df" % len(v), *v), hf, list(reversed(ne)), 0))

    def quantized(self, name, ne, type_name, hf, experts=0):
        n = TYPES[type_name][1]
        rows = ne[1] * max(experts, 1)
        data = b"".join(pack(type_name, self.rng) for _ in range(rows * ne[0] // n))
        self.tensors.append((name, ne, type_name, data, hf, [ne[1], ne[0]], experts))

    def build(self):
        d, f = D_MODEL, self.d_ff
        self.floats("token_embd.weight", [d, VOCAB], "model.embed_tokens.weight", 1.0)
        zeros = struct.pack("<%df" % (d * d), *([0.0] * d * d))
        for qk in ("q", "k"):
            self.tensors.append((f"blk.0.attn_{qk}.weight", [d, d], "F32", zeros, f"model.layers.0.self_attn.{qk}_proj.weight", [d, d], 0))
        self.floats("blk.0.attn_v.weight", [d, d], "model.layers.0.self_attn.v_proj.weight")
        self.floats("blk.0.attn_output.weight", [d, d], "model.layers.0.self_attn.o_proj.weight")
        ones = struct.pack("<%df" % d, *([1.0] * d))
        for g, h in (("blk.0.attn_norm.weight", "model.layers.0.input_layernorm.weight"),
                     ("blk.0.ffn_norm.weight", "model.layers.0.post_attention_layernorm.weight"),
                     ("output_norm.weight", "model.norm.weight")):
            self.tensors.append((g, [d], "F32", ones, h, [d], 0))
        if self.moe:
            self.floats("blk.0.ffn_gate_inp.weight", [d, 4], "model.layers.0.block_sparse_moe.gate.weight", 1.0)
            ex = "model.layers.0.block_sparse_moe.experts.{}."
            self.quantized("blk.0.ffn_gate_exps.weight", [d, f], "Q4_K", ex + "w1.weight", 4)
            self.quantized("blk.0.ffn_up_exps.weight", [d, f], "Q5_K", ex + "w3.weight", 4)
            self.quantized("blk.0.ffn_down_exps.weight", [f, d], "Q8_0", ex + "w2.weight", 4)
        else:
            self.quantized("blk.0.ffn_gate.weight", [d, f], "Q4_K", "model.layers.0.mlp.gate_proj.weight")
            self.quantized("blk.0.ffn_up.weight", [d, f], "Q8_0", "model.layers.0.mlp.up_proj.weight")
            self.quantized("blk.0.ffn_down.weight", [f, d], "Q6_K", "model.layers.0.mlp.down_proj.weight")
        self.floats("output.weight", [d, VOCAB], "lm_head.weight", 1.0)

    def metadata(self):
        meta = [string("general.architecture", "llama"), u32("llama.block_count", 1), u32("llama.embedding_length", D_MODEL),
                u32("llama.feed_forward_length", self.d_ff), u32("llama.attention.head_count", 2),
                u32("llama.attention.head_count_kv", 2), u32("llama.context_length", 16),
                f32("llama.attention.layer_norm_rms_epsilon", 1e-5), f32("llama.rope.freq_base", 10000.0),
                string("tokenizer.ggml.model", "llama"), strings("tokenizer.ggml.tokens", TOKENS),
                kv_f32s("tokenizer.ggml.scores", [0, 0, -1, -2, -3, -4]), i32s("tokenizer.ggml.token_type", [2, 3, 1, 1, 1, 1]),
                u32("tokenizer.ggml.bos_token_id", 1)]
        if self.moe:
            meta += [u32("llama.expert_count", 4), u32("llama.expert_used_count", 2)]
        return meta

    def write_gguf(self, path):
        infos, blobs, offset, self.offsets = [], [], 0, {}
        for name, ne, type_name, data, _, _, experts in self.tensors:
            full = ne + ([experts] if experts else [])
            infos.append(gguf_string(name) + struct.pack("<I", len(full)) + b"".join(struct.pack("<Q", n) for n in full)
                         + struct.pack("<IQ", TYPES[type_name][0], offset))
            self.offsets[name] = offset
            blobs.append(data + b"\0" * (-len(data) % ALIGN))
            offset += len(blobs[-1])
        meta = self.metadata()
        head = b"GGUF" + struct.pack("<IQQ", 3, len(infos), len(meta)) + b"".join(meta) + b"".join(infos)
        head += b"\0" * (-len(head) % ALIGN)
        with open(path, "wb") as f:
            f.write(head + b"".join(blobs))

    def write_directory(self, out):
        """The same model, every weight the dequantized value in F64, under Hugging Face's names."""
        os.makedirs(out, exist_ok=True)
        entries, blobs, at = {}, [], 0
        for _, ne, type_name, data, hf, shape, experts in self.tensors:
            values = list(struct.unpack("<%df" % (len(data) // 4), data)) if type_name == "F32" else dequantized(type_name, data)
            each = len(values) // max(experts, 1)
            for e in range(max(experts, 1)):
                blob = struct.pack("<%dd" % each, *values[e * each:(e + 1) * each])
                entries[hf.format(e)] = {"dtype": "F64", "shape": shape, "data_offsets": [at, at + len(blob)]}
                blobs.append(blob)
                at += len(blob)
        header = json.dumps(entries).encode()
        with open(os.path.join(out, "model.safetensors"), "wb") as f:
            f.write(struct.pack("<Q", len(header)) + header + b"".join(blobs))
        config = {"model_type": "mixtral" if self.moe else "llama", "hidden_size": D_MODEL, "intermediate_size": self.d_ff,
                  "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2, "max_position_embeddings": 16,
                  "rms_norm_eps": fl(1e-5), "rope_theta": 10000.0, "vocab_size": VOCAB, "hidden_act": "silu",
                  "tie_word_embeddings": False}
        if self.moe:
            config.update({"num_local_experts": 4, "num_experts_per_tok": 2})
        with open(os.path.join(out, "config.json"), "w") as f:
            json.dump(config, f)


def kv_f32s(key, values):
    return gguf_string(key) + struct.pack("<IIQ", 9, 6, len(values)) + b"".join(struct.pack("<f", v) for v in values)


# ---- the check ------------------------------------------------------------------------------

def tensor_data(path):
    """Each tensor's (type name, ne, absolute data offset), read from the file's header."""
    b = open(path, "rb").read()
    at = 4

    def take(fmt):
        nonlocal at
        v = struct.unpack_from("<" + fmt, b, at)
        at += struct.calcsize("<" + fmt)
        return v[0] if len(v) == 1 else v

    def text():
        n = take("Q")
        nonlocal at
        at += n
        return b[at - n:at].decode()

    sizes = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "B", 10: "Q", 11: "q", 12: "d"}

    def value(t):
        if t == 8:
            return text()
        if t == 9:
            inner, n = take("I"), take("Q")
            return [value(inner) for _ in range(n)]
        return take(sizes[t])

    _, n_tensors, n_kv = take("IQQ")
    for _ in range(n_kv):
        text()
        value(take("I"))
    infos = []
    for _ in range(n_tensors):
        name = text()
        ne = [take("Q") for _ in range(take("I"))]
        infos.append((name, ne, take("I"), take("Q")))
    data = at + (-at % ALIGN)
    names = {v[0]: k for k, v in TYPES.items()}
    return b, {name: (names[t], ne, data + off) for name, ne, t, off in infos}


def check(path, json_path):
    b, tensors = tensor_data(path)
    out = json.load(open(json_path))
    entries = [w for u in out["dequantized"] for w in (u["key"], u["value"])]
    assert entries, "no weight dequantized"
    for w in entries:
        type_name, ne, begin = tensors[w["tensor"]]
        n, size = TYPES[type_name][1], TYPES[type_name][2]
        rows = ne[1]
        expert = w.get("expert", 0)
        # the block: rows of the expert's slice before it, then whole blocks of the row
        block = (expert * rows + w["row"]) * (ne[0] // n) + w["column"] // n
        at = begin + block * size
        nums, value = numbers(type_name, b[at:at + size], w["column"] % n)
        got = {p["name"]: p["value"] for p in w["numbers"]}
        where = f'{w["tensor"]} expert {expert} ({w["row"]}, {w["column"]})'
        assert w["type"] == type_name, f"{where}: type {w['type']}, the file's {type_name}"
        assert w["block_in_tensor"] == block, f"{where}: block {w['block_in_tensor']}, by hand {block}"
        assert w["block"] == w["column"] // n and w["index"] == w["column"] % n, where
        assert w["file_offset"] == at, f"{where}: at byte {w['file_offset']}, by hand {at}"
        assert got == nums, f"{where}: numbers {got}, by hand {nums}"
        assert w["value"] == value, f"{where}: {w['value']}, by hand {value}"
    print(f"{len(entries)} weights as their blocks' bytes give them")


def main():
    if sys.argv[1] == "check":
        check(sys.argv[2], sys.argv[3])
        return
    m = Model(sys.argv[2] == "moe")
    m.build()
    m.write_gguf(sys.argv[3])
    if len(sys.argv) > 4:
        m.write_directory(sys.argv[4])


if __name__ == "__main__":
    main()
