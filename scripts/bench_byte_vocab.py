#!/usr/bin/python3
"""A byte-level GPT-2 vocabulary without merges for a benchmark's checkpoint, so that a prompt of
N letters is N tokens: GPT-2's byte-to-unicode table as the first 256 ids (id b for byte b), the
rest of config.json's vocab_size as unused names.

    bench_byte_vocab.py CHECKPOINT_DIR      writes CHECKPOINT_DIR/vocab.json and merges.txt
"""
import json
import os
import sys

d = sys.argv[1]
vocab_size = json.load(open(os.path.join(d, "config.json")))["vocab_size"]
keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
table, n = {}, 0
for b in range(256):
    table[b] = chr(b) if b in keep else chr(256 + n)
    n += b not in keep
vocab = {table[b]: b for b in range(256)}
for i in range(256, vocab_size):
    vocab[f"<unused{i}>"] = i
json.dump(vocab, open(os.path.join(d, "vocab.json"), "w"), ensure_ascii=False)
open(os.path.join(d, "merges.txt"), "w").write("#version: 0.2\n")
