#!/usr/bin/python3
"""Trains the small GPT-2-shaped models in data/models/: capitals, on which the FFN key-value story is true, atlas, deeper, which knows four facts about each of 60 countries, and nations, which recalls a fact at its subject as ROME found in GPT-2.

    /usr/bin/python3 scripts/train_model.py [--model capitals|atlas|nations] [--out data/models/MODEL]
        [--reference tests/inputs/models/MODEL_reference.json] [--steps N] [...] [--from-weights MODEL_PT]

--from-weights writes the files and runs the checks on weights trained by the same recipe earlier
(a torch.save of GPT's state_dict) instead of training: nations' shipped files were written so.

Everything is built here from a fixed seed, on the CPU, in one thread, so a rerun writes the same files:
  1. a corpus of templated facts, written beside the model as corpus.txt, one sentence a line:
     capitals: 50 countries' capital, language and continent in 9 templates;
     atlas: 60 countries' capital, language, currency and continent, each relation in 4 or 5
     templates, the subject late ("The capital of France is Paris.") or first ("France's capital is
     Paris."), and the capital's other side ("Paris is the capital of France."); every sentence ends
     on its answer, so the sentence up to the answer is a prompt whose next token is the fact;
     nations: 85 countries, 26 of several words sharing first words ("South Africa", "South
     Korea"), their capital, language, currency and continent, each relation in 3 subject-first
     templates and 1 subject-late;
  2. a byte-level BPE tokenizer learned on it (GPT-2's byte table and pre-tokenizer regex; merges by
     frequency until every name with its leading space is one token, e.g. "ĠParis"; atlas: also
     every country and capital without it, as a sentence opens), written as a Hugging Face
     tokenizer.json;
  3. a GPT-2-shaped model written plainly in PyTorch, trained on the corpus and saved as Hugging Face's
     GPT-2 files: config.json and model.safetensors (written by hand, GPT-2's tensor names, Conv1D
     weights stored in × out);
  4. checks, in float64 with a forward pass of its own on the files just written, that the model
     shows what it must, and fails if it does not:
     capitals: "The capital of X is" predicts " <capital>" for every country, and at the layer whose
     FFN raises the capital's logit most, knocking out the 5 units with the largest direct logit
     attribution toward the capital lowers its probability;
     atlas: at least 90 % of every (relation, template, country) prompt's top next token is the fact,
     in the canonical template (each relation's first) and in the others; it prints each relation's
     accuracy and how much each layer's attention and FFN raise the answer's logit-lens logit;
     nations: at least 90 % of all facts right at top 1; it writes facts.tsv beside the model, the
     facts `locate --facts` averages;
  5. tests/inputs/models/MODEL_reference.json, the float64 reference the C++ tests compare with
     (capitals and atlas).

Needs Debian's python3-torch and numpy (run it with /usr/bin/python3). On one thread of a busy 2-core
machine capitals trained in 4 minutes and atlas in 5; each rerun wrote the same bytes. Nations
trained in 21 to 45 minutes, and a rerun wrote the shipped files byte for byte.

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


def capitals_sentences():
    """Every template filled with every country's facts, in a fixed order."""
    out = []
    for country, capital, language, continent in FACTS:
        fields = dict(country=country, capital=capital, language=language, continent=continent)
        for t in CAPITAL_TEMPLATES + OTHER_TEMPLATES:
            out.append(t.format(**fields))
    return out


# The atlas: four facts about each of 60 countries, every answer one token with its leading space.
# (country, capital, language, currency, continent); the continents of the Americas are one,
# "America", so that every answer stays one word. Currencies as of 2026 (Bulgaria and Croatia: euro).
ATLAS_FACTS = [
    ("France", "Paris", "French", "euro", "Europe"), ("Germany", "Berlin", "German", "euro", "Europe"),
    ("Italy", "Rome", "Italian", "euro", "Europe"), ("Spain", "Madrid", "Spanish", "euro", "Europe"),
    ("Japan", "Tokyo", "Japanese", "yen", "Asia"), ("Egypt", "Cairo", "Arabic", "pound", "Africa"),
    ("Canada", "Ottawa", "English", "dollar", "America"), ("Kenya", "Nairobi", "Swahili", "shilling", "Africa"),
    ("Peru", "Lima", "Spanish", "sol", "America"), ("Greece", "Athens", "Greek", "euro", "Europe"),
    ("Portugal", "Lisbon", "Portuguese", "euro", "Europe"), ("Poland", "Warsaw", "Polish", "zloty", "Europe"),
    ("Austria", "Vienna", "German", "euro", "Europe"), ("Hungary", "Budapest", "Hungarian", "forint", "Europe"),
    ("Sweden", "Stockholm", "Swedish", "krona", "Europe"), ("Norway", "Oslo", "Norwegian", "krone", "Europe"),
    ("Finland", "Helsinki", "Finnish", "euro", "Europe"), ("Denmark", "Copenhagen", "Danish", "krone", "Europe"),
    ("Ireland", "Dublin", "English", "euro", "Europe"), ("Belgium", "Brussels", "Dutch", "euro", "Europe"),
    ("Netherlands", "Amsterdam", "Dutch", "euro", "Europe"), ("Switzerland", "Bern", "German", "franc", "Europe"),
    ("Czechia", "Prague", "Czech", "koruna", "Europe"), ("Romania", "Bucharest", "Romanian", "leu", "Europe"),
    ("Bulgaria", "Sofia", "Bulgarian", "euro", "Europe"), ("Serbia", "Belgrade", "Serbian", "dinar", "Europe"),
    ("Croatia", "Zagreb", "Croatian", "euro", "Europe"), ("Russia", "Moscow", "Russian", "ruble", "Europe"),
    ("Turkey", "Ankara", "Turkish", "lira", "Asia"), ("Iran", "Tehran", "Persian", "rial", "Asia"),
    ("Iraq", "Baghdad", "Arabic", "dinar", "Asia"), ("Syria", "Damascus", "Arabic", "pound", "Asia"),
    ("China", "Beijing", "Chinese", "yuan", "Asia"), ("Thailand", "Bangkok", "Thai", "baht", "Asia"),
    ("Vietnam", "Hanoi", "Vietnamese", "dong", "Asia"), ("Indonesia", "Jakarta", "Indonesian", "rupiah", "Asia"),
    ("Philippines", "Manila", "Filipino", "peso", "Asia"), ("Korea", "Seoul", "Korean", "won", "Asia"),
    ("Nepal", "Kathmandu", "Nepali", "rupee", "Asia"), ("Australia", "Canberra", "English", "dollar", "Oceania"),
    ("Brazil", "Brasilia", "Portuguese", "real", "America"), ("Chile", "Santiago", "Spanish", "peso", "America"),
    ("Colombia", "Bogota", "Spanish", "peso", "America"), ("Cuba", "Havana", "Spanish", "peso", "America"),
    ("Morocco", "Rabat", "Arabic", "dirham", "Africa"), ("Nigeria", "Abuja", "English", "naira", "Africa"),
    ("Ghana", "Accra", "English", "cedi", "Africa"), ("Senegal", "Dakar", "French", "franc", "Africa"),
    ("Iceland", "Reykjavik", "Icelandic", "krona", "Europe"), ("Ukraine", "Kyiv", "Ukrainian", "hryvnia", "Europe"),
    ("Pakistan", "Islamabad", "Urdu", "rupee", "Asia"), ("Bangladesh", "Dhaka", "Bengali", "taka", "Asia"),
    ("Mongolia", "Ulaanbaatar", "Mongolian", "tugrik", "Asia"), ("Algeria", "Algiers", "Arabic", "dinar", "Africa"),
    ("Venezuela", "Caracas", "Spanish", "bolivar", "America"), ("Slovakia", "Bratislava", "Slovak", "euro", "Europe"),
    ("Estonia", "Tallinn", "Estonian", "euro", "Europe"), ("Uganda", "Kampala", "English", "shilling", "Africa"),
    ("Fiji", "Suva", "English", "dollar", "Oceania"), ("Samoa", "Apia", "Samoan", "tala", "Oceania"),
]
ATLAS_FIELDS = ("country", "capital", "language", "currency", "continent")

# Each relation: the field its sentences are about (the subject), the field they end on (the
# answer) and its templates, the canonical one first. Every sentence ends "… {answer}.", so the
# sentence up to the answer is a prompt whose next token is the fact: recalled at the last token.
# The subject comes late ("The capital of France is"), first ("France's capital is") or is the
# answer's other side ("Paris is the capital of" → " France").
ATLAS_RELATIONS = [
    ("capital", "country", "capital", [
        "The capital of {country} is {capital}.",
        "The capital city of {country} is {capital}.",
        "{country}'s capital is {capital}.",
        "{country} has its capital in {capital}.",
        "The government of {country} sits in {capital}.",
    ]),
    ("country of a capital", "capital", "country", [
        "{capital} is the capital of {country}.",
        "{capital} is a city in {country}.",
    ]),
    ("language", "country", "language", [
        "The language of {country} is {language}.",
        "The official language of {country} is {language}.",
        "People in {country} speak {language}.",
        "{country}'s language is {language}.",
        "In {country}, most people speak {language}.",
    ]),
    ("currency", "country", "currency", [
        "The currency of {country} is the {currency}.",
        "{country}'s currency is the {currency}.",
        "The money of {country} is the {currency}.",
        "In {country}, people pay with the {currency}.",
    ]),
    ("continent", "country", "continent", [
        "The continent of {country} is {continent}.",
        "{country} is in {continent}.",
        "{country} is a country in {continent}.",
        "{country} lies in {continent}.",
    ]),
]


def atlas_facts(table=ATLAS_FACTS, relations=ATLAS_RELATIONS):
    """Every (relation, template, country) as a prompt and its answer, in the corpus's order:
    country by country, then relation by relation, then template by template."""
    out = []
    for row in table:
        fields = dict(zip(ATLAS_FIELDS, row))
        for relation, subject, answer, templates in relations:
            for k, t in enumerate(templates):
                sentence = t.format(**fields)
                suffix = " " + fields[answer] + "."
                assert sentence.endswith(suffix), sentence
                out.append(dict(relation=relation, template=k, country=row[0], subject=fields[subject],
                                answer=fields[answer], prompt=sentence[:-len(suffix)], sentence=sentence))
    return out


def atlas_sentences():
    return [f["sentence"] for f in atlas_facts()]


# The nations: a model that recalls a fact at its subject, as ROME found in GPT-2 (the atlas recalls
# at the last token). 26 subjects of two or more words, many sharing their first word ("South
# Africa", "South Korea", "South Sudan"), so that the country is known only at its last token, and
# the atlas's countries (Korea apart: "South Korea" and "North Korea" take its place).
NATIONS_MULTI = [
    ("South Africa", "Pretoria", "Zulu", "rand", "Africa"), ("South Korea", "Seoul", "Korean", "won", "Asia"),
    ("South Sudan", "Juba", "Arabic", "pound", "Africa"), ("North Korea", "Pyongyang", "Korean", "won", "Asia"),
    ("North Macedonia", "Skopje", "Macedonian", "denar", "Europe"),
    ("New Zealand", "Wellington", "English", "dollar", "Oceania"),
    ("New Caledonia", "Noumea", "French", "franc", "Oceania"), ("Sri Lanka", "Colombo", "Sinhala", "rupee", "Asia"),
    ("Saudi Arabia", "Riyadh", "Arabic", "riyal", "Asia"), ("United Kingdom", "London", "English", "pound", "Europe"),
    ("United States", "Washington", "English", "dollar", "America"),
    ("Czech Republic", "Prague", "Czech", "koruna", "Europe"),
    ("Central African Republic", "Bangui", "Sango", "franc", "Africa"),
    ("Sierra Leone", "Freetown", "English", "leone", "Africa"), ("Saint Lucia", "Castries", "English", "dollar", "America"),
    ("East Timor", "Dili", "Tetum", "dollar", "Asia"), ("Ivory Coast", "Yamoussoukro", "French", "franc", "Africa"),
    ("Cape Verde", "Praia", "Portuguese", "escudo", "Africa"),
    ("Equatorial Guinea", "Malabo", "Spanish", "franc", "Africa"),
    ("Solomon Islands", "Honiara", "English", "dollar", "Oceania"),
    ("Marshall Islands", "Majuro", "Marshallese", "dollar", "Oceania"),
    ("West Bengal", "Kolkata", "Bengali", "rupee", "Asia"), ("East Java", "Surabaya", "Javanese", "rupiah", "Asia"),
    ("West Java", "Bandung", "Sundanese", "rupiah", "Asia"), ("North Dakota", "Bismarck", "English", "dollar", "America"),
    ("South Dakota", "Pierre", "English", "dollar", "America"),
]
NATIONS_FACTS = NATIONS_MULTI + [f for f in ATLAS_FACTS if f[0] != "Korea"]

# Four relations about the country, each in three templates with the subject first ("France's
# capital is", "In France, the capital is") and one with it late ("The capital of France is").
NATIONS_RELATIONS = [
    ("capital", "country", "capital", [
        "{country}'s capital is {capital}.", "In {country}, the capital is {capital}.",
        "{country} has its capital in {capital}.", "The capital of {country} is {capital}."]),
    ("language", "country", "language", [
        "{country}'s language is {language}.", "In {country}, people speak {language}.",
        "{country} speaks {language}.", "The language of {country} is {language}."]),
    ("currency", "country", "currency", [
        "{country}'s currency is the {currency}.", "In {country}, the currency is the {currency}.",
        "{country} pays with the {currency}.", "The currency of {country} is the {currency}."]),
    ("continent", "country", "continent", [
        "{country} is in {continent}.", "{country} lies in {continent}.",
        "{country} is a country of {continent}.", "The continent of {country} is {continent}."]),
]
NATIONS_SUBJECT_LATE = 3  # the template of each relation whose subject comes late


def nations_facts():
    return atlas_facts(NATIONS_FACTS, NATIONS_RELATIONS)


def nations_names():
    """Every word of every fact one token with its leading space; each country's first word also
    without it, as a sentence opens."""
    return sorted({" " + w for f in NATIONS_FACTS for field in f for w in field.split(" ")}
                  | {f[0].split(" ")[0] for f in NATIONS_FACTS})


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

    def run(self, ids, ablate_layer=None, zeroed=(), noise=None):
        """Every stream: entering each FFN sublayer and leaving each block; the final logits.
        noise: (positions, values) added to those positions' embeddings, as causal tracing does."""
        x = self.embed(ids)
        if noise is not None:
            x = x.clone()
            x[noise[0]] += noise[1]
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
        """score_j = a_j · (W2[j] · g) / σ, g = γ_f ⊙ U[t] less its mean (ln_f's centring), σ of ln_f at the
        stream leaving layer n's FFN."""
        a = self.activations(n, mid_row[None, :])[0]
        g = self.w["ln_f.weight"] * self.w["wte.weight"][t]
        direction = self.w[f"h.{n}.mlp.c_proj.weight"] @ (g - g.mean())
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


def reference_json(ref, tok, fact_layer, prompts, name="capitals",
                   fact_layer_doc="the capital's logit (logit lens at the last token) most, averaged over all countries"):
    n = fact_layer
    doc = {
        "_doc": (f"Float64 reference from scripts/train_model.py's own forward pass on data/models/{name} "
                 "(GPT-2: pre-norm blocks, causal attention, gelu_new FFN, ln_f, unembedding tied to wte). "
                 "Token ids are as tokenizer(text)['input_ids']; layers and units count from 0."),
        "checkpoint": f"data/models/{name}",
        "fact_layer": n,
        "_doc_fact_layer": "N: the layer whose FFN raises " + fact_layer_doc,
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
                "top_units": "the 5 units of layer N with the largest score_j = a_j (W2[j] · g) / σ, g = γ_f ⊙ U[t] less its mean, at the last position, t = the predicted token, σ = √(var + eps) of ln_f at the stream leaving layer N's FFN; largest first",
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
# What each model checks and writes as its reference

def finish_capitals(ref, tok, args, size):
    """The capitals story: every capital right, and knocking out 5 units of the fact layer lowers
    the capital's probability, by half or more for most countries."""
    fact_layer, rows = check_story(ref, tok)
    ratios = sorted(r["after"] / r["prob"] for r in rows)
    france = rows[0]
    print(f"files {size / 1e6:.2f} MB; fact layer {fact_layer}")
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
    doc = reference_json(ref, tok, fact_layer, prompts)
    return doc, all(r["correct"] for r in rows) and size < 5e6 and france["after"] <= 0.5 * france["prob"] \
        and sum(x <= 0.5 for x in ratios) > len(ratios) / 2


def finish_atlas(ref, tok, args, size):
    """Every (relation, template, country) prompt: the model's top next token against the fact, and
    where, by the logit lens at the last token, each layer's attention and FFN raise the answer."""
    facts = atlas_facts()
    by_relation = {r[0]: dict(attn=np.zeros(ref.L), ffn=np.zeros(ref.L), n=0) for r in ATLAS_RELATIONS}
    rows = []
    for f in facts:
        ids = tok.encode(f["prompt"])
        t = tok.vocab["Ġ" + f["answer"]]
        x = ref.embed(ids)
        r = by_relation[f["relation"]]
        for n in range(ref.L):
            lens = lambda s: ref.logits(s[-1:])[0, t].item()
            mid = ref.attention_block(n, x)
            out = ref.ffn_block(n, mid)
            r["attn"][n] += lens(mid) - lens(x)
            r["ffn"][n] += lens(out) - lens(mid)
            x = out
        r["n"] += 1
        logits = ref.logits(x[-1:])[0]
        probs = torch.softmax(logits, -1)
        pred = int(logits.argmax())
        rows.append(dict(f, ids=ids, t=t, pred=pred, prob=probs[t].item(), pred_prob=probs[pred].item()))

    def accuracy(sel):
        sel = list(sel)
        return sum(r["pred"] == r["t"] for r in sel) / len(sel), len(sel)

    canonical = accuracy(r for r in rows if r["template"] == 0)
    others = accuracy(r for r in rows if r["template"] != 0)
    print(f"files {size / 1e6:.2f} MB; {len(ATLAS_FACTS)} countries, {len(rows)} prompts")
    print(f"accuracy at top 1: canonical template {canonical[0]:.3f} of {canonical[1]}, "
          f"other templates {others[0]:.3f} of {others[1]}, all {accuracy(rows)[0]:.3f}")
    ffn_total = np.zeros(ref.L)
    for relation, subject, answer, templates in ATLAS_RELATIONS:
        r = by_relation[relation]
        ffn_total += r["ffn"]
        per_template = [accuracy(x for x in rows if x["relation"] == relation and x["template"] == k)[0]
                        for k in range(len(templates))]
        print(f"  {relation:21s} {accuracy(x for x in rows if x['relation'] == relation)[0]:.3f}  by template "
              f"{np.round(per_template, 3).tolist()}")
        print(f"    mean raise of the answer's logit at the last token, by layer: attention "
              f"{np.round(r['attn'] / r['n'], 2).tolist()}, FFN {np.round(r['ffn'] / r['n'], 2).tolist()}")
    for r in rows:
        if r["pred"] != r["t"]:
            print(f"  wrong: {r['prompt']!r} -> {tok.display(r['pred'])!r} {r['pred_prob']:.3f}, "
                  f"{r['answer']!r} {r['prob']:.3f}")
    fact_layer = int(np.argmax(ffn_total))

    prompts = ["The capital of France is", "France's currency is the", "Tokyo is the capital of",
               "The capital of Germany is Berlin. The language of Kenya is"]
    doc = reference_json(ref, tok, fact_layer, prompts, "atlas",
                         "the answer's logit (logit lens at the last token) most, averaged over every fact prompt")
    doc["_doc_relations"] = ("each relation: the field it is about and the field it ends on, its templates "
                             "(the canonical one first; the answer replaces {answer}), and the mean change of "
                             "the answer's logit-lens logit at the last token made by each layer's attention and "
                             "FFN sublayer, over the relation's prompts")
    doc["relations"] = [{"relation": rel, "subject": subj, "answer": ans,
                         "templates": [t.replace("{" + ans + "}", "{answer}") for t in templates],
                         "attention_raise": (by_relation[rel]["attn"] / by_relation[rel]["n"]).tolist(),
                         "ffn_raise": (by_relation[rel]["ffn"] / by_relation[rel]["n"]).tolist()}
                        for rel, subj, ans, templates in ATLAS_RELATIONS]
    doc["_doc_facts"] = ("every (country, relation, template) of the corpus as a prompt (the sentence up to "
                         "its answer): the answer as the fact table gives it, and the float64 model's top "
                         "next token at the last position with its probability")
    doc["facts"] = [{"relation": r["relation"], "template": r["template"], "subject": r["subject"],
                     "text": r["prompt"], "token_ids": r["ids"],
                     "answer": {"id": r["t"], "token": tok.display(r["t"]), "prob": r["prob"]},
                     "prediction": {"id": r["pred"], "token": tok.display(r["pred"]), "prob": r["pred_prob"]}}
                    for r in rows]
    corpus_size = os.path.getsize(os.path.join(args.out, "corpus.txt"))
    return doc, canonical[0] >= 0.9 and others[0] >= 0.9 and size + corpus_size < 8e6


def finish_nations(ref, tok, args, size):
    """Every fact's top next token against the fact (float64, from the files written), and
    facts.tsv: 100 subject-first facts of multi-word subjects, the ones whose averaged causal
    tracing (`locate --facts`) shows where the model recalls a fact. Not the continents: one of
    five is a good guess without the subject, so noising it leaves P(answer) high and each
    normalised effect is a small difference divided by a small total."""
    rows = []
    for f in nations_facts():
        logits = ref.run(tok.encode(f["prompt"]))[2][-1]
        rows.append(dict(f, right=int(logits.argmax()) == tok.vocab["Ġ" + f["answer"]]))

    def accuracy(sel):
        sel = list(sel)
        return f"{sum(r['right'] for r in sel) / len(sel):.3f} of {len(sel)}"

    multi = {f[0] for f in NATIONS_MULTI}
    print(f"files {size / 1e6:.2f} MB; {len(NATIONS_FACTS)} countries, {len(multi)} of several words")
    print(f"accuracy at top 1: all {accuracy(rows)}; subject first "
          f"{accuracy(r for r in rows if r['template'] != NATIONS_SUBJECT_LATE)}, subject late "
          f"{accuracy(r for r in rows if r['template'] == NATIONS_SUBJECT_LATE)}; "
          f"multi-word subjects {accuracy(r for r in rows if r['subject'] in multi)}")
    for r in rows:
        if not r["right"]:
            print(f"  wrong: {r['prompt']!r} (the fact: {r['answer']!r})")

    # A fact whose answer survives the noise on its subject says nothing of where it is recalled,
    # and its normalised effects divide by a total near 0: kept are those whose P(answer), averaged
    # over 10 runs with the subject's embeddings noised as `locate` does (ν = 3 × the standard
    # deviation of the token embedding's entries), falls below a third of the clean P.
    nu = 3 * ref.w["wte.weight"].std(unbiased=False).item()
    gen = torch.Generator().manual_seed(SEED)
    first = []
    for r in rows:
        if r["subject"] not in multi or r["template"] == NATIONS_SUBJECT_LATE or r["relation"] == "continent":
            continue
        ids, t = tok.encode(r["prompt"]), tok.vocab["Ġ" + r["answer"]]
        start = r["prompt"].index(r["subject"])
        span = list(range(len(tok.encode(r["prompt"][:start])), len(tok.encode(r["prompt"][:start + len(r["subject"])]))))
        clean = torch.softmax(ref.run(ids)[2][-1], -1)[t].item()
        noised = np.mean([torch.softmax(ref.run(ids, noise=(span, nu * torch.randn(len(span), ref.w["wte.weight"].shape[1],
                                                                                     generator=gen, dtype=torch.float64)))[2][-1], -1)[t].item()
                          for _ in range(10)])
        if noised < clean / 3:
            first.append(r)
    print(f"subject-first facts of multi-word subjects (continents apart) whose answer the noise takes away: {len(first)}")
    chosen = sorted(random.Random(SEED).sample(range(len(first)), 100))
    with open(os.path.join(args.out, "facts.tsv"), "w", encoding="utf-8") as out:
        for i in chosen:
            out.write(f"{first[i]['prompt']}\t{first[i]['subject']}\t {first[i]['answer']}\n")
    corpus_size = os.path.getsize(os.path.join(args.out, "corpus.txt"))
    return None, sum(r["right"] for r in rows) >= 0.9 * len(rows) and size + corpus_size < 8e6


# The model names, what each is trained on and how, and what it must show. The capitals model's
# settings are those its shipped files were trained with: changing them changes every golden output.
MODELS = {
    "capitals": dict(
        sentences=capitals_sentences, names=lambda: [" " + w for f in FACTS for w in f[:2]], finish=finish_capitals,
        defaults=dict(steps=2000, batch=16, lr=3e-3, weight_decay=0.1, attn_weight_decay=1.0, l1=3e-4,
                      label_smoothing=0.1, l1_layers=[0, 1], ffn_weight_decay=0.0, layers=2, d_model=128,
                      heads=4, d_ff=256, positions=64)),
    "atlas": dict(
        sentences=atlas_sentences, finish=finish_atlas,
        # every answer one token with its leading space; countries and capitals also open sentences
        names=lambda: sorted({" " + w for f in ATLAS_FACTS for w in f} | {w for f in ATLAS_FACTS for w in f[:2]}),
        defaults=dict(steps=1500, batch=32, lr=3e-3, weight_decay=0.1, attn_weight_decay=0.1, l1=0.0,
                      label_smoothing=0.1, l1_layers=[0, 1, 2, 3], ffn_weight_decay=0.1, layers=4, d_model=64,
                      heads=4, d_ff=256, positions=64)),
    # The recipe as atlas's but deeper and wider, and an L1 penalty on the activations of layers 0
    # and 1 only: without it the model recalls the country at layer 0's FFN, at the subject's
    # first token; with it those layers' FFNs stay nearly silent and the recall moves to layer 2.
    "nations": dict(
        sentences=lambda: [f["sentence"] for f in nations_facts()], names=nations_names, finish=finish_nations,
        defaults=dict(steps=1500, batch=32, lr=3e-3, weight_decay=0.1, attn_weight_decay=0.1, l1=1e-2,
                      label_smoothing=0.1, l1_layers=[0, 1], ffn_weight_decay=0.1, layers=6, d_model=96,
                      heads=4, d_ff=384, positions=64)),
}


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=MODELS, default="capitals")
    ap.add_argument("--out", help="default: data/models/MODEL")
    ap.add_argument("--reference", help="default: tests/inputs/models/MODEL_reference.json")
    ap.add_argument("--steps", type=int)
    ap.add_argument("--batch", type=int)
    ap.add_argument("--lr", type=float)
    ap.add_argument("--weight-decay", type=float)
    ap.add_argument("--attn-weight-decay", type=float)
    ap.add_argument("--l1", type=float)
    ap.add_argument("--label-smoothing", type=float)
    ap.add_argument("--l1-layers", type=lambda v: [int(n) for n in v.split(",")])
    ap.add_argument("--ffn-weight-decay", type=float)
    ap.add_argument("--layers", type=int)
    ap.add_argument("--d-model", type=int)
    ap.add_argument("--heads", type=int)
    ap.add_argument("--d-ff", type=int)
    ap.add_argument("--positions", type=int)
    ap.add_argument("--from-weights", metavar="MODEL_PT",
                    help="skip training: write the files from this state_dict (torch.save of the GPT class here), "
                         "trained by this recipe earlier")
    args = ap.parse_args()
    spec = MODELS[args.model]
    for key, value in spec["defaults"].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.out = args.out or os.path.join(root, "data/models", args.model)
    args.reference = args.reference or os.path.join(root, "tests/inputs/models", args.model + "_reference.json")

    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)

    sentences = spec["sentences"]()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "corpus.txt"), "w") as f:
        f.write("\n".join(sentences) + "\n")
    names = spec["names"]()
    tok = Tokenizer(train_bpe(sentences, names))
    print(f"corpus: {len(sentences)} sentences; tokenizer: {len(tok.merges)} merges, vocabulary {len(tok.tokens)}")
    for name in names:
        assert len(tok.encode(name)) == 1, name

    model = GPT(len(tok.tokens), args.positions, args.d_model, args.layers, args.heads, args.d_ff)
    if args.from_weights:
        model.load_state_dict(torch.load(args.from_weights))
    else:
        seconds = train(model, tok, sentences, args)
        print(f"trained in {seconds:.0f}s")

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
    doc, ok = spec["finish"](ref, tok, args, size)
    if doc is not None:
        os.makedirs(os.path.dirname(args.reference), exist_ok=True)
        with open(args.reference, "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False, indent=1)
            f.write("\n")
    if not ok:
        print("error: the model does not show what it must (see above)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
