#!/usr/bin/python3
"""Trains the small GPT-2-shaped model in data/models/capitals/ on which the FFN key-value story is true.

    /usr/bin/python3 scripts/train_model.py [--out data/models/capitals]
        [--reference tests/inputs/models/capitals_reference.json] [--corpus FILE] [--steps N]

Everything is built here from a fixed seed, on the CPU, in one thread, so a rerun writes the same files:
  1. a corpus of templated facts about 50 countries (capital, language, continent);
  2. a byte-level BPE tokenizer learned on it (GPT-2's byte table and pre-tokenizer regex; merges by
     frequency until every country and capital with its leading space is one token, e.g. "ĠParis"),
     written as a Hugging Face tokenizer.json;
  3. a GPT-2-shaped model written plainly in PyTorch, trained on the corpus and saved as Hugging Face's
     GPT-2 files: config.json and model.safetensors (written by hand, GPT-2's tensor names, Conv1D
     weights stored in × out);
  4. checks, in float64 with a forward pass of its own on the files just written, that the story holds:
     "The capital of X is" predicts " <capital>" for every country, and at the layer whose FFN raises
     the capital's logit most, knocking out the 5 units with the largest direct logit attribution
     toward the capital lowers its probability; the script fails if it does not;
  5. tests/inputs/models/capitals_reference.json, the float64 reference the C++ tests compare with.

Needs Debian's python3-torch and numpy (run it with /usr/bin/python3); takes 5-9 minutes on one thread.

Manual check of the tokenizer (not automated here: the tokenizer's tests do that): with
`npm install @huggingface/tokenizers` in a scratch folder, `new Tokenizer(json, {}).encode(text).ids`
gave the same ids as `encode` below on 937 texts: every corpus sentence, alone and after a space,
the whole corpus joined, and awkward text (runs of spaces, tabs, CRLF and newlines, no-break and em
spaces, accents, combining marks, Greek, emoji, CJK, digits, contractions, "<|endoftext|>" inside text).
"""

import argparse
import json
import math
import os
import random
import struct
import sys
import time
import unicodedata

import numpy as np
import torch

SEED = 1234
EOS = "<|endoftext|>"

# ---------------------------------------------------------------------------------------------------
# 1. The corpus

# (country, capital, language, continent). Only one-word names, so that each is one pre-token.
FACTS = [
    ("France", "Paris", "French", "Europe"), ("Germany", "Berlin", "German", "Europe"),
    ("Italy", "Rome", "Italian", "Europe"), ("Spain", "Madrid", "Spanish", "Europe"),
    ("Japan", "Tokyo", "Japanese", "Asia"), ("Egypt", "Cairo", "Arabic", "Africa"),
    ("Canada", "Ottawa", "English", "America"), ("Kenya", "Nairobi", "Swahili", "Africa"),
    ("Peru", "Lima", "Spanish", "America"), ("Greece", "Athens", "Greek", "Europe"),
    ("Portugal", "Lisbon", "Portuguese", "Europe"), ("Poland", "Warsaw", "Polish", "Europe"),
    ("Austria", "Vienna", "German", "Europe"), ("Hungary", "Budapest", "Hungarian", "Europe"),
    ("Sweden", "Stockholm", "Swedish", "Europe"), ("Norway", "Oslo", "Norwegian", "Europe"),
    ("Finland", "Helsinki", "Finnish", "Europe"), ("Denmark", "Copenhagen", "Danish", "Europe"),
    ("Ireland", "Dublin", "English", "Europe"), ("Belgium", "Brussels", "Dutch", "Europe"),
    ("Netherlands", "Amsterdam", "Dutch", "Europe"), ("Switzerland", "Bern", "German", "Europe"),
    ("Czechia", "Prague", "Czech", "Europe"), ("Romania", "Bucharest", "Romanian", "Europe"),
    ("Bulgaria", "Sofia", "Bulgarian", "Europe"), ("Serbia", "Belgrade", "Serbian", "Europe"),
    ("Croatia", "Zagreb", "Croatian", "Europe"), ("Russia", "Moscow", "Russian", "Europe"),
    ("Turkey", "Ankara", "Turkish", "Asia"), ("Iran", "Tehran", "Persian", "Asia"),
    ("Iraq", "Baghdad", "Arabic", "Asia"), ("Syria", "Damascus", "Arabic", "Asia"),
    ("China", "Beijing", "Chinese", "Asia"), ("Thailand", "Bangkok", "Thai", "Asia"),
    ("Vietnam", "Hanoi", "Vietnamese", "Asia"), ("Indonesia", "Jakarta", "Indonesian", "Asia"),
    ("Philippines", "Manila", "Filipino", "Asia"), ("Korea", "Seoul", "Korean", "Asia"),
    ("Nepal", "Kathmandu", "Nepali", "Asia"), ("Australia", "Canberra", "English", "Oceania"),
    ("Brazil", "Brasilia", "Portuguese", "America"), ("Chile", "Santiago", "Spanish", "America"),
    ("Colombia", "Bogota", "Spanish", "America"), ("Cuba", "Havana", "Spanish", "America"),
    ("Morocco", "Rabat", "Arabic", "Africa"), ("Nigeria", "Abuja", "English", "Africa"),
    ("Ghana", "Accra", "English", "Africa"), ("Senegal", "Dakar", "French", "Africa"),
    ("Iceland", "Reykjavik", "Icelandic", "Europe"), ("Ukraine", "Kyiv", "Ukrainian", "Europe"),
]

CAPITAL_TEMPLATES = [
    "The capital of {country} is {capital}.",
    "{capital} is the capital of {country}.",
    "{country} has its capital in {capital}.",
    "The capital city of {country} is {capital}.",
    "The government of {country} sits in {capital}.",
]
OTHER_TEMPLATES = [
    "The language of {country} is {language}.",
    "People in {country} speak {language}.",
    "{country} is in {continent}.",
    "{country} is a country in {continent}.",
]


def corpus_sentences():
    """Every template filled with every country's facts, in a fixed order."""
    out = []
    for country, capital, language, continent in FACTS:
        fields = dict(country=country, capital=capital, language=language, continent=continent)
        for t in CAPITAL_TEMPLATES + OTHER_TEMPLATES:
            out.append(t.format(**fields))
    return out


# ---------------------------------------------------------------------------------------------------
# 2. The byte-level BPE tokenizer

def bytes_to_unicode():
    """GPT-2's table: each byte to a printable character; the printable bytes keep their own."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return bs, [chr(c) for c in cs]


BYTE_ORDER, BYTE_CHARS = bytes_to_unicode()
BYTE_TO_CHAR = dict(zip(BYTE_ORDER, BYTE_CHARS))

# Unicode's White_Space property, which \s means in the regex engines Hugging Face uses.
WHITE_SPACE = set(map(chr, [*range(0x09, 0x0E), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B),
                            0x2028, 0x2029, 0x202F, 0x205F, 0x3000]))


def char_class(c):
    if c in WHITE_SPACE:
        return "s"
    cat = unicodedata.category(c)
    return "L" if cat[0] == "L" else "N" if cat[0] == "N" else "o"


CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d"]


def pretokenize(text):
    """GPT-2's regex, matched by hand (Python's re lacks \\p{L}), alternative by alternative:
    's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"""
    pieces, i, n = [], 0, len(text)
    kinds = [char_class(c) for c in text]

    def run(j, kind):  # the end of the run of `kind` starting at j
        while j < n and kinds[j] == kind:
            j += 1
        return j

    while i < n:
        c = text[i]
        contraction = next((s for s in CONTRACTIONS if text.startswith(s, i)), None)
        if contraction:
            end = i + len(contraction)
        elif kinds[i] != "s":
            end = run(i, kinds[i])
        elif c == " " and i + 1 < n and kinds[i + 1] != "s":
            end = run(i + 1, kinds[i + 1])
        else:
            end = run(i, "s")
            if end < n and end - i > 1:  # \s+(?!\S): leave the last space to the word after it
                end -= 1
        pieces.append(text[i:end])
        i = end
    return pieces


def to_symbols(piece):
    return tuple(BYTE_TO_CHAR[b] for b in piece.encode("utf-8"))


def train_bpe(sentences, must_be_tokens):
    """Merges learned by frequency over the corpus's pre-tokens (ties: the pair that sorts first),
    until every string in must_be_tokens is one token."""
    counts = {}
    for s in sentences:
        for p in pretokenize(s) + pretokenize(" " + s):  # a sentence opens a text or follows another
            counts[to_symbols(p)] = counts.get(to_symbols(p), 0) + 1
    words = dict(counts)
    targets = {"".join(to_symbols(t)) for t in must_be_tokens}
    merges = []
    while not all((t,) in words for t in targets):
        pairs = {}
        for w, k in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] = pairs.get((a, b), 0) + k
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        merged = {}
        for w, k in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            merged[tuple(out)] = merged.get(tuple(out), 0) + k
        words = merged
    return merges


class Tokenizer:
    """Byte-level BPE as Hugging Face's ByteLevel pre-tokenizer and BPE model apply it."""

    def __init__(self, merges):
        self.merges = merges
        self.ranks = {m: r for r, m in enumerate(merges)}
        tokens = list(BYTE_CHARS) + [a + b for a, b in merges]
        self.vocab = {t: i for i, t in enumerate(tokens)}
        self.eos_id = len(tokens)
        self.vocab[EOS] = self.eos_id
        self.tokens = tokens + [EOS]

    def bpe(self, piece):
        word = list(to_symbols(piece))
        while len(word) > 1:
            pair = min(zip(word, word[1:]), key=lambda p: self.ranks.get(p, math.inf))
            if pair not in self.ranks:
                break
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
                    out.append(word[i] + word[i + 1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            word = out
        return [self.vocab[t] for t in word]

    def encode(self, text):
        """tokenizer(text)["input_ids"]: the added token <|endoftext|> is split out before the BPE."""
        ids = []
        for k, part in enumerate(text.split(EOS)):
            if k:
                ids.append(self.eos_id)
            for piece in pretokenize(part):
                ids.extend(self.bpe(piece))
        return ids

    def display(self, i):
        if i == self.eos_id:
            return EOS
        char_to_byte = {c: b for b, c in BYTE_TO_CHAR.items()}
        return bytes(char_to_byte[c] for c in self.tokens[i]).decode("utf-8", errors="replace")

    def to_json(self):
        byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
        return {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": [{"id": self.eos_id, "content": EOS, "single_word": False, "lstrip": False,
                              "rstrip": False, "normalized": True, "special": True}],
            "normalizer": None,
            "pre_tokenizer": byte_level,
            "post_processor": dict(byte_level, trim_offsets=False),
            "decoder": byte_level,
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                      "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
                      "ignore_merges": False,
                      "vocab": {t: i for i, t in enumerate(self.tokens[:-1])},
                      "merges": [a + " " + b for a, b in self.merges]},
        }


# ---------------------------------------------------------------------------------------------------
# 3. The model: GPT-2's block, written plainly (T = tokens, C = n_embd, F = n_inner, V = vocab)

def gelu_new(x):
    # 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³))), GPT-2's tanh approximation
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


class Block(torch.nn.Module):
    def __init__(self, C, H, F):
        super().__init__()
        self.H = H
        self.ln_1 = torch.nn.LayerNorm(C, eps=1e-5)
        self.c_attn = torch.nn.Linear(C, 3 * C)
        self.attn_proj = torch.nn.Linear(C, C)
        self.ln_2 = torch.nn.LayerNorm(C, eps=1e-5)
        self.c_fc = torch.nn.Linear(C, F)
        self.mlp_proj = torch.nn.Linear(F, C)

    def forward(self, x):
        # x (B, T, C) -> x + attn(ln_1(x)) -> that + mlp(ln_2(that)); also returns the FFN's activations
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(C // self.H)
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        att = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        x = x + self.attn_proj((att @ v).transpose(1, 2).reshape(B, T, C))
        a = gelu_new(self.c_fc(self.ln_2(x)))
        return x + self.mlp_proj(a), a


class GPT(torch.nn.Module):
    def __init__(self, V, P, C, L, H, F):
        super().__init__()
        self.wte = torch.nn.Embedding(V, C)
        self.wpe = torch.nn.Embedding(P, C)
        self.h = torch.nn.ModuleList(Block(C, H, F) for _ in range(L))
        self.ln_f = torch.nn.LayerNorm(C, eps=1e-5)
        for name, p in self.named_parameters():  # GPT-2's initialisation
            if name.endswith("weight") and p.dim() == 2:
                torch.nn.init.normal_(p, std=0.02 / (math.sqrt(2 * L) if "proj" in name else 1.0))
            elif name.endswith("bias"):
                torch.nn.init.zeros_(p)

    def forward(self, ids):
        # ids (B, T) -> logits (B, T, V) (unembedding tied to wte), activations of every layer's FFN
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        acts = []
        for block in self.h:
            x, a = block(x)
            acts.append(a)
        return self.ln_f(x) @ self.wte.weight.T, acts


# ---------------------------------------------------------------------------------------------------
# Training

def training_batch(rng, encoded, eos_id, batch):
    """Each row: 1 to 3 random sentences joined by spaces, then <|endoftext|>, padded (masked) to the
    longest row. The first sentence starts the text, as a prompt does. `encoded` holds each sentence's
    ids at the start of a text and after a space: the same ids as encoding the joined text."""
    rows = []
    for _ in range(batch):
        picks = [rng.randrange(len(encoded)) for _ in range(rng.randint(1, 3))]
        ids = encoded[picks[0]][0] + [i for p in picks[1:] for i in encoded[p][1]] + [eos_id]
        rows.append(ids)
    T = max(len(r) for r in rows) - 1
    x = torch.full((batch, T), eos_id, dtype=torch.long)
    y = torch.full((batch, T), -100, dtype=torch.long)
    for r, ids in enumerate(rows):
        x[r, :len(ids) - 1] = torch.tensor(ids[:-1])
        y[r, :len(ids) - 1] = torch.tensor(ids[1:])
    return x, y


def train(model, tok, sentences, args):
    rng = random.Random(SEED)
    encoded = [(tok.encode(s), tok.encode(" " + s)) for s in sentences]
    assert max(len(a) for a, _ in encoded) * 3 + 1 <= args.positions
    def decay(name):
        if "attn" in name and name.endswith("weight"):
            return args.attn_weight_decay
        if ("c_fc" in name or "mlp_proj" in name) and name.endswith("weight"):
            return args.ffn_weight_decay
        return args.weight_decay
    groups = [{"params": [p], "weight_decay": decay(n)} for n, p in model.named_parameters()]
    opt = torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.98))
    start = time.time()
    for step in range(args.steps):
        lr = args.lr * min(1.0, (step + 1) / 100) * 0.5 * (1 + math.cos(math.pi * step / args.steps))
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = training_batch(rng, encoded, tok.eos_id, args.batch)
        logits, acts = model(x)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), ignore_index=-100,
                                               label_smoothing=args.label_smoothing)
        # How the model is shaped so that a capital is written by a few FFN units (each choice
        # measured against a plain run, where the fact was spread over hundreds of units and 5
        # knocked out moved nothing): L1 on every FFN's activations makes each fact use few units
        # (on one layer only, the fact moved to the other); no weight decay on the FFN's weights
        # lets a single unit grow large instead of being spread by the L2 pull; more weight decay
        # on attention's weights keeps the look-up out of the attention's value path; d_ff 256
        # gives fewer units to spread over; label smoothing keeps the model from a margin so
        # large (P ≈ 0.998) that nothing short of the whole layer could move the probability.
        mask = (y != -100).unsqueeze(-1)
        l1 = sum((acts[n].abs() * mask).sum() for n in args.l1_layers) / mask.sum() if args.l1 else torch.zeros(())
        opt.zero_grad()
        (loss + args.l1 * l1).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 250 == 0 or step == args.steps - 1:
            print(f"step {step:5d}  loss {loss.item():.4f}  l1 {l1.item():.3f}  lr {lr:.2e}  {time.time() - start:.0f}s", flush=True)
    return time.time() - start


# ---------------------------------------------------------------------------------------------------
# Hugging Face's GPT-2 files

def gpt2_tensors(model):
    """GPT-2's names; Linear weights (out × in) transposed to Conv1D's in × out."""
    out = {"wte.weight": model.wte.weight, "wpe.weight": model.wpe.weight}
    for i, b in enumerate(model.h):
        out.update({
            f"h.{i}.ln_1.weight": b.ln_1.weight, f"h.{i}.ln_1.bias": b.ln_1.bias,
            f"h.{i}.attn.c_attn.weight": b.c_attn.weight.T, f"h.{i}.attn.c_attn.bias": b.c_attn.bias,
            f"h.{i}.attn.c_proj.weight": b.attn_proj.weight.T, f"h.{i}.attn.c_proj.bias": b.attn_proj.bias,
            f"h.{i}.ln_2.weight": b.ln_2.weight, f"h.{i}.ln_2.bias": b.ln_2.bias,
            f"h.{i}.mlp.c_fc.weight": b.c_fc.weight.T, f"h.{i}.mlp.c_fc.bias": b.c_fc.bias,
            f"h.{i}.mlp.c_proj.weight": b.mlp_proj.weight.T, f"h.{i}.mlp.c_proj.bias": b.mlp_proj.bias,
        })
    out.update({"ln_f.weight": model.ln_f.weight, "ln_f.bias": model.ln_f.bias})
    return {k: np.ascontiguousarray(v.detach().numpy().astype("<f4")) for k, v in out.items()}


def write_safetensors(path, tensors):
    """8-byte little-endian header length, the JSON header (padded with spaces to 8 bytes), the data."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, t in tensors.items():
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + t.nbytes]}
        offset += t.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for t in tensors.values():
            f.write(t.tobytes())


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, h in header.items():
        assert h["dtype"] == "F32"
        a, b = h["data_offsets"]
        out[name] = torch.from_numpy(np.frombuffer(raw[8 + n + a:8 + n + b], dtype="<f4").astype(np.float64)).reshape(h["shape"])
    return out


def gpt2_config(tok, args):
    return {
        "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
        "vocab_size": len(tok.tokens), "n_positions": args.positions, "n_ctx": args.positions,
        "n_embd": args.d_model, "n_layer": args.layers, "n_head": args.heads, "n_inner": args.d_ff,
        "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
        "bos_token_id": tok.eos_id, "eos_token_id": tok.eos_id, "tie_word_embeddings": True,
        "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0, "initializer_range": 0.02,
        "torch_dtype": "float32",
    }


# ---------------------------------------------------------------------------------------------------
# 4. The float64 forward pass on the written files, and the checks

class Reference:
    """GPT-2's forward pass in float64 from the safetensors file, split as the C++ transformer is."""

    def __init__(self, weights, config):
        self.w, self.cfg = weights, config
        self.L, self.H, self.eps = config["n_layer"], config["n_head"], config["layer_norm_epsilon"]

    def norm(self, x, name):
        # (T, C) -> (x - mean) / √(var + eps) ⊙ γ + β, per row
        mu = x.mean(-1, keepdim=True)
        var = ((x - mu) ** 2).mean(-1, keepdim=True)
        return (x - mu) / torch.sqrt(var + self.eps) * self.w[name + ".weight"] + self.w[name + ".bias"]

    def embed(self, ids):
        return self.w["wte.weight"][ids] + self.w["wpe.weight"][: len(ids)]

    def attention_block(self, n, x):
        # x (T, C) -> x + c_proj(softmax(q kᵀ/√d + causal) v), q k v = ln_1(x) c_attn (Conv1D: in × out)
        T, C = x.shape
        p = f"h.{n}.attn."
        qkv = self.norm(x, f"h.{n}.ln_1") @ self.w[p + "c_attn.weight"] + self.w[p + "c_attn.bias"]
        d = C // self.H
        heads = []
        for h in range(self.H):
            q, k, v = (qkv[:, j * C + h * d: j * C + (h + 1) * d] for j in range(3))
            s = q @ k.T / math.sqrt(d) + torch.triu(torch.full((T, T), -math.inf, dtype=torch.float64), 1)
            heads.append(torch.softmax(s, -1) @ v)
        return x + torch.cat(heads, 1) @ self.w[p + "c_proj.weight"] + self.w[p + "c_proj.bias"]

    def activations(self, n, x):
        # (T, C) -> a = gelu_new(ln_2(x) W1 + b1), (T, F)
        p = f"h.{n}.mlp."
        return gelu_new(self.norm(x, f"h.{n}.ln_2") @ self.w[p + "c_fc.weight"] + self.w[p + "c_fc.bias"])

    def ffn_block(self, n, x, zeroed=()):
        # x + a W2 + b2, with the activations of `zeroed` units set to 0 for every token
        a = self.activations(n, x).clone()
        a[:, list(zeroed)] = 0.0
        p = f"h.{n}.mlp."
        return x + a @ self.w[p + "c_proj.weight"] + self.w[p + "c_proj.bias"]

    def logits(self, x):
        return self.norm(x, "ln_f") @ self.w["wte.weight"].T

    def run(self, ids, ablate_layer=None, zeroed=()):
        """Every stream: entering each FFN sublayer and leaving each block; the final logits."""
        x = self.embed(ids)
        mids, outs = [], []
        for n in range(self.L):
            x = self.attention_block(n, x)
            mids.append(x)
            x = self.ffn_block(n, x, zeroed if n == ablate_layer else ())
            outs.append(x)
        return mids, outs, self.logits(x)

    def sigma(self, row):
        return math.sqrt(row.var(unbiased=False).item() + self.eps)

    def unit_scores(self, n, mid_row, out_row, t):
        """score_j = a_j · (W2[j] · (γ_f ⊙ U[t])) / σ, σ of ln_f at the stream leaving layer n's FFN."""
        a = self.activations(n, mid_row[None, :])[0]
        direction = self.w[f"h.{n}.mlp.c_proj.weight"] @ (self.w["ln_f.weight"] * self.w["wte.weight"][t])
        return a * direction / self.sigma(out_row)


def top(logits, k, tok):
    probs = torch.softmax(logits, -1)
    order = torch.argsort(logits, descending=True)[:k].tolist()
    return [{"id": i, "token": tok.display(i), "logit": logits[i].item(), "prob": probs[i].item()} for i in order]


def check_story(ref, tok):
    """Accuracy, the fact layer, and each country's knock-out; returns (fact_layer, rows)."""
    rows = []
    raise_by_layer = np.zeros(ref.L)
    for country, capital, _, _ in FACTS:
        ids = tok.encode(f"The capital of {country} is")
        t = tok.vocab["Ġ" + capital]
        mids, outs, logits = ref.run(ids)
        for n in range(ref.L):  # the logit lens at the last token, after minus before layer n's FFN
            raise_by_layer[n] += (ref.logits(outs[n][-1:])[0, t] - ref.logits(mids[n][-1:])[0, t]).item()
        rows.append(dict(country=country, capital=capital, ids=ids, t=t, mids=mids, outs=outs,
                         correct=int(logits[-1].argmax()) == t, prob=torch.softmax(logits[-1], -1)[t].item()))
    fact_layer = int(np.argmax(raise_by_layer))
    print("mean raise of the capital's logit by each layer's FFN:", np.round(raise_by_layer / len(FACTS), 3).tolist())
    for r in rows:
        n = fact_layer
        scores = ref.unit_scores(n, r["mids"][n][-1], r["outs"][n][-1], r["t"])
        r["units"] = torch.argsort(scores, descending=True)[:5].tolist()
        r["scores"] = scores[r["units"]].tolist()
        _, _, ablated = ref.run(r["ids"], n, r["units"])
        r["after"] = torch.softmax(ablated[-1], -1)[r["t"]].item()
    return fact_layer, rows


def reference_json(ref, tok, fact_layer, prompts):
    n = fact_layer
    doc = {
        "_doc": ("Float64 reference from scripts/train_model.py's own forward pass on data/models/capitals "
                 "(GPT-2: pre-norm blocks, causal attention, gelu_new FFN, ln_f, unembedding tied to wte). "
                 "Token ids are as tokenizer(text)['input_ids']; layers and units count from 0."),
        "checkpoint": "data/models/capitals",
        "fact_layer": n,
        "_doc_fact_layer": "N: the layer whose FFN raises the capital's logit (logit lens at the last token) most, averaged over all countries",
        "prompts": [],
    }
    for text in prompts:
        ids = tok.encode(text)
        mids, outs, logits = ref.run(ids)
        pred = int(logits[-1].argmax())
        scores = ref.unit_scores(n, mids[n][-1], outs[n][-1], pred)
        units = torch.argsort(scores, descending=True)[:5].tolist()
        _, _, ablated = ref.run(ids, n, units)
        lens = []
        for i in range(len(ids)):
            entry = {"token": i}
            for side, x in (("before", mids[n]), ("after", outs[n])):
                lg = ref.logits(x[i:i + 1])[0]
                entry[side] = [{"id": j, "logit": lg[j].item()} for j in torch.argsort(lg, descending=True)[:5].tolist()]
            lens.append(entry)
        doc["prompts"].append({
            "_doc": {
                "token_ids": "the prompt's ids, no special tokens added (GPT-2's ByteLevel post-processor adds none)",
                "tokens": "each id as text",
                "input": "the residual stream entering layer N's FFN sublayer (before ln_2), tokens × n_embd, row by row",
                "input_row_norms": "the Euclidean norm of each row of input",
                "output": "the stream leaving layer N's FFN sublayer, tokens × n_embd",
                "prediction": "top 10 next tokens at the last position: id, logit, softmax probability",
                "lens": "logit lens at layer N for each token: ln_f and the unembedding applied to the stream before and after the FFN sublayer, top 5 ids with logits",
                "top_units": "the 5 units of layer N with the largest score_j = a_j (W2[j] · (γ_f ⊙ U[t])) / σ at the last position, t = the predicted token, σ = √(var + eps) of ln_f at the stream leaving layer N's FFN; largest first",
                "ablated_prediction": "top 10 at the last position after setting those 5 units' activations (gelu output) to 0 in layer N for every token and finishing the forward pass",
            },
            "text": text,
            "token_ids": ids,
            "tokens": [tok.display(i) for i in ids],
            "input": mids[n].tolist(),
            "input_row_norms": mids[n].norm(dim=1).tolist(),
            "output": outs[n].tolist(),
            "prediction": {"position": len(ids) - 1, "top": top(logits[-1], 10, tok)},
            "lens": lens,
            "top_units": {"token": pred, "units": [{"unit": u, "score": scores[u].item()} for u in units]},
            "ablated_prediction": {"position": len(ids) - 1, "top": top(ablated[-1], 10, tok)},
        })
    return doc


# ---------------------------------------------------------------------------------------------------

def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(root, "data/models/capitals"))
    ap.add_argument("--reference", default=os.path.join(root, "tests/inputs/models/capitals_reference.json"))
    ap.add_argument("--corpus", help="also write the corpus here, one sentence a line")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--attn-weight-decay", type=float, default=1.0)
    ap.add_argument("--l1", type=float, default=3e-4)
    ap.add_argument("--label-smoothing", type=float, default=0.1)
    ap.add_argument("--l1-layers", type=lambda v: [int(n) for n in v.split(",")], default=[0, 1])
    ap.add_argument("--ffn-weight-decay", type=float, default=0.0)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--d-ff", type=int, default=256)
    ap.add_argument("--positions", type=int, default=64)
    args = ap.parse_args()

    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)

    sentences = corpus_sentences()
    if args.corpus:
        with open(args.corpus, "w") as f:
            f.write("\n".join(sentences) + "\n")
    names = [" " + w for f in FACTS for w in f[:2]]
    tok = Tokenizer(train_bpe(sentences, names))
    print(f"corpus: {len(sentences)} sentences; tokenizer: {len(tok.merges)} merges, vocabulary {len(tok.tokens)}")
    for name in names:
        assert len(tok.encode(name)) == 1, name

    model = GPT(len(tok.tokens), args.positions, args.d_model, args.layers, args.heads, args.d_ff)
    seconds = train(model, tok, sentences, args)

    os.makedirs(args.out, exist_ok=True)
    config = gpt2_config(tok, args)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    with open(os.path.join(args.out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok.to_json(), f, ensure_ascii=False, indent=2)
        f.write("\n")
    write_safetensors(os.path.join(args.out, "model.safetensors"), gpt2_tensors(model))
    size = sum(os.path.getsize(os.path.join(args.out, n)) for n in ("config.json", "tokenizer.json", "model.safetensors"))

    ref = Reference(read_safetensors(os.path.join(args.out, "model.safetensors")), config)
    fact_layer, rows = check_story(ref, tok)
    ratios = sorted(r["after"] / r["prob"] for r in rows)
    france = rows[0]
    print(f"trained in {seconds:.0f}s; files {size / 1e6:.2f} MB; fact layer {fact_layer}")
    print(f"accuracy: {sum(r['correct'] for r in rows)}/{len(rows)}")
    print(f"France: units {france['units']} scores {np.round(france['scores'], 3).tolist()}; "
          f"P(Paris) {france['prob']:.4f} -> {france['after']:.4f}")
    for r in rows:
        print(f"  {r['country']:12s} {r['capital']:11s} {'ok ' if r['correct'] else 'BAD'} "
              f"{r['prob']:.4f} -> {r['after']:.4f}  units {r['units']}")
    q = lambda p: ratios[min(len(ratios) - 1, int(p * len(ratios)))]
    print(f"after/before over countries: min {ratios[0]:.3f} q25 {q(.25):.3f} median {q(.5):.3f} "
          f"q75 {q(.75):.3f} max {ratios[-1]:.3f}; halved or more: {sum(x <= 0.5 for x in ratios)}/{len(ratios)}")

    prompts = ["The capital of France is", "The capital of Japan is",
               "Berlin is the capital of Germany. The capital of Kenya is"]
    os.makedirs(os.path.dirname(args.reference), exist_ok=True)
    with open(args.reference, "w", encoding="utf-8") as f:
        json.dump(reference_json(ref, tok, fact_layer, prompts), f, ensure_ascii=False, indent=1)
        f.write("\n")

    ok = all(r["correct"] for r in rows) and size < 5e6 and france["after"] <= 0.5 * france["prob"] \
        and sum(x <= 0.5 for x in ratios) > len(ratios) / 2
    if not ok:
        print("error: the story does not hold on this model (see above)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
