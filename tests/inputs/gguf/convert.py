#!/usr/bin/env python3
"""A GPT-2 safetensors directory (config.json, model.safetensors, tokenizer.json) written as one
GGUF file the way llama.cpp's converter writes it: tensor names blk.N.*, each weight as
nn.Linear's (out, in) so ne = [in, out] (GPT-2's Conv1D weights transposed), F32, and the
tokenizer in the metadata (tokenizer.ggml.model "gpt2", tokens, merges, token_type).
Written from ggml's docs/gguf.md with the standard library alone, sharing nothing with ffn-trace.

    convert.py MODEL_DIR OUT.gguf [PRE [BOS_ID]]

PRE is tokenizer.ggml.pre ("gpt-2" unless given); BOS_ID, tokenizer.ggml.bos_token_id when the
config gives none.
"""
import json
import struct
import sys

ALIGN = 32


def gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def kv(key, type_id, payload):
    return gguf_string(key) + struct.pack("<I", type_id) + payload


def u32(key, v):
    return kv(key, 4, struct.pack("<I", v))


def f32(key, v):
    return kv(key, 6, struct.pack("<f", v))


def string(key, v):
    return kv(key, 8, gguf_string(v))


def boolean(key, v):
    return kv(key, 7, struct.pack("<B", 1 if v else 0))


def strings(key, values):
    return kv(key, 9, struct.pack("<IQ", 8, len(values)) + b"".join(gguf_string(v) for v in values))


def i32s(key, values):
    return kv(key, 9, struct.pack("<IQ", 5, len(values)) + b"".join(struct.pack("<i", v) for v in values))


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "F32", name
        begin, end = t["data_offsets"]
        out[name] = (t["shape"], list(struct.unpack("<%df" % ((end - begin) // 4), data[begin:end])))
    return out


def transposed(shape, values):
    rows, cols = shape
    return [cols, rows], [values[r * cols + c] for c in range(cols) for r in range(rows)]


NAMES = [("wte", "token_embd"), ("wpe", "position_embd"), ("ln_1", "attn_norm"), ("attn.c_attn", "attn_qkv"),
         ("attn.c_proj", "attn_output"), ("ln_2", "ffn_norm"), ("mlp.c_fc", "ffn_up"), ("mlp.c_proj", "ffn_down"),
         ("ln_f", "output_norm")]


def gguf_name(name):
    name = name.removeprefix("transformer.")
    if name.startswith("h."):
        name = "blk." + name[2:]
    for hf, gg in NAMES:
        name = name.replace(hf, gg)
    return name


def main(model_dir, out_path, pre="gpt-2", bos=None):
    config = json.load(open(model_dir + "/config.json"))
    try:
        tok = json.load(open(model_dir + "/tokenizer.json"))
    except FileNotFoundError:  # GPT-2's vocab.json and merges.txt
        lines = [l for l in open(model_dir + "/merges.txt", encoding="utf-8").read().split("\n") if l and not l.startswith("#version")]
        tok = {"model": {"vocab": json.load(open(model_dir + "/vocab.json")), "merges": lines}, "added_tokens": []}
    tensors = read_safetensors(model_dir + "/model.safetensors")
    vocab = tok["model"]["vocab"]
    added = {t["id"]: t["content"] for t in tok["added_tokens"]}
    size = max(list(vocab.values()) + list(added)) + 1
    tokens = [""] * size
    types = [1] * size  # 1 normal, 3 control
    for t, i in vocab.items():
        tokens[i] = t
    for i, t in added.items():
        tokens[i] = t
        types[i] = 3
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    meta = [
        string("general.architecture", "gpt2"),
        u32("gpt2.block_count", config["n_layer"]),
        u32("gpt2.embedding_length", config["n_embd"]),
        u32("gpt2.feed_forward_length", config.get("n_inner") or 4 * config["n_embd"]),
        u32("gpt2.attention.head_count", config.get("n_head", 1)),
        u32("gpt2.context_length", config.get("n_positions", 1024)),
        f32("gpt2.attention.layer_norm_epsilon", config.get("layer_norm_epsilon", 1e-5)),
        string("tokenizer.ggml.model", "gpt2"),
        string("tokenizer.ggml.pre", pre),
        strings("tokenizer.ggml.tokens", tokens),
        i32s("tokenizer.ggml.token_type", types),
        strings("tokenizer.ggml.merges", merges),
    ]
    bos = config.get("bos_token_id", bos)
    meta += [u32("tokenizer.ggml.bos_token_id", int(bos))] if bos is not None else []
    infos, blobs, offset = [], [], 0
    for name in sorted(tensors):  # any order: the reader must not care
        shape, values = tensors[name]
        if len(shape) == 2 and name.endswith(".weight") and "wte" not in name and "wpe" not in name:
            shape, values = transposed(shape, values)
        blob = struct.pack("<%df" % len(values), *values)
        ne = list(reversed(shape))
        infos.append(gguf_string(gguf_name(name)) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
                     + struct.pack("<IQ", 0, offset))
        blobs.append(blob + b"\0" * (-len(blob) % ALIGN))
        offset += len(blobs[-1])
    head = b"GGUF" + struct.pack("<IQQ", 3, len(infos), len(meta)) + b"".join(meta) + b"".join(infos)
    head += b"\0" * (-len(head) % ALIGN)
    with open(out_path, "wb") as f:
        f.write(head + b"".join(blobs))


if __name__ == "__main__":
    main(*sys.argv[1:])
