#!/usr/bin/env python3
"""Writes a Llama-2-7B of full shape with random (seeded) weights, sharded as the real one is.

    bench_make_7b.py OUT_DIR [--small] [--seed N]

Makes OUT_DIR/llama-7b: config.json (LlamaForCausalLM: 32 layers of 4096, 32 heads, 11008
SwiGLU, a 32,000 × 4096 lm_head, BF16), model-00001-of-00002.safetensors and
model-00002-of-00002.safetensors (a shard ends before it would pass 10 GB, as Hugging Face's
save_pretrained cuts the real checkpoint) with model.safetensors.index.json naming each
tensor's shard, and a tokenizer.json of Llama 2's kind (SentencePiece BPE: <unk> <s> </s>, the
256 byte tokens, pieces with ▁; a <s> before the text) over 32,000 made-up pieces. 13.5 GB of
weights; a directory whose files are all there is left as it is. --small (or BENCH_SMALL=1):
d_model 64, 4 heads, shards of at most half the weights (three), a vocabulary of 1000, for
testing the scripts.

The tensors are made by bench_make_checkpoints.py's llama-forward maker with 32 layers instead
of 2 (so its embedding and first two layers hold the same numbers). Needs python3 and numpy only.
"""

import argparse
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_make_checkpoints import (SEEDS, config_for, llama_forward_tensors,  # noqa: E402
                                    made_up_vocab, write_safetensors)

FULL = {"d_model": 4096, "d_ff": 11008, "vocab": 32000, "heads": 32, "layers": 32, "positions": 4096}
SMALL = {"d_model": 64, "d_ff": 172, "vocab": 1000, "heads": 4, "layers": 32, "positions": 4096}
SHARD_BYTES = 10_000_000_000  # save_pretrained's max_shard_size="10GB"
S = "\u2581"  # SentencePiece's ▁, a space


def shards(tensors, most):
    """The tensors in order, cut into shards each at most `most` bytes (or one tensor alone)."""
    out, size = [[]], 0
    for t in tensors:
        if out[-1] and size + t.nbytes > most:
            out.append([])
            size = 0
        out[-1].append(t)
        size += t.nbytes
    return out


def tokenizer_json(vocab_size):
    """A Llama 2 tokenizer.json: Prepend ▁ and spaces as ▁, BPE with byte fallback, <s> first.
    Its pieces are made-up words with ▁, each reached by merging its prefix with its last character."""
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for c in "abcdefghijklmnopqrstuvwxyz" + S:
        vocab.setdefault(c, len(vocab))
    merges = []
    for word in made_up_vocab(vocab_size * 2, S):
        for n in range(2, len(word) + 1):
            piece = word[:n]
            if piece not in vocab and len(vocab) < vocab_size:
                merges.append(f"{word[:n - 1]} {word[n - 1]}")
                vocab[piece] = len(vocab)
        if len(vocab) >= vocab_size:
            break
    added = [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for c, i in (("<unk>", 0), ("<s>", 1), ("</s>", 2))]
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
            "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": S},
                                                               {"type": "Replace", "pattern": {"String": " "}, "content": S}]},
            "pre_tokenizer": None,
            "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "vocab": vocab,
                      "merges": merges},
            "post_processor": {"type": "TemplateProcessing",
                               "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                               "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                        {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
                               "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
            "decoder": {"type": "Sequence", "decoders": [
                {"type": "Replace", "pattern": {"String": S}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"},
                {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--small", action="store_true", default=os.environ.get("BENCH_SMALL", "") not in ("", "0"))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    s = SMALL if args.small else FULL
    d = os.path.join(args.out_dir, "llama-7b")
    tensors = llama_forward_tensors(s, args.seed + SEEDS["llama-forward"])
    parts = shards(tensors, SHARD_BYTES if not args.small else sum(t.nbytes for t in tensors) // 2 + 1)
    names = [f"model-{i + 1:05d}-of-{len(parts):05d}.safetensors" for i in range(len(parts))]
    files = ["config.json", "tokenizer.json", "model.safetensors.index.json"] + names
    if all(os.path.exists(os.path.join(d, f)) for f in files):
        print(f"llama-7b: already there ({d})", file=sys.stderr)
        return
    os.makedirs(d, exist_ok=True)
    need = sum(t.nbytes for t in tensors) - sum(os.path.getsize(os.path.join(d, f)) for f in names
                                                if os.path.exists(os.path.join(d, f)))
    free = shutil.disk_usage(d).free
    if free < need + (1 << 30):
        sys.exit(f"error: llama-7b needs {need / 1e9:.2f} GB more on disk and {d} has {free / 1e9:.2f} GB free")
    print(f"llama-7b: writing {need / 1e9:.2f} GB of weights in {len(parts)} shards to {d} ({free / 1e9:.0f} GB free)",
          file=sys.stderr)
    config = dict(config_for("llama-forward", s), num_hidden_layers=s["layers"], bos_token_id=1, eos_token_id=2)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_json(s["vocab"]), f, ensure_ascii=False)
    for name, part in zip(names, parts):  # a shard that is there (renamed from .part once whole) is kept
        if not os.path.exists(os.path.join(d, name)):
            print(f"  {name}: {len(part)} tensors, {sum(t.nbytes for t in part) / 1e9:.2f} GB", file=sys.stderr)
            write_safetensors(os.path.join(d, name), part, {"format": "pt"})
    # The index last: the directory reads as a checkpoint only once every shard is whole.
    index = {"metadata": {"total_size": sum(t.nbytes for t in tensors)},
             "weight_map": {t.name: name for name, part in zip(names, parts) for t in part}}
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
