#!/usr/bin/env python3
"""Writes the tokenizer.json files of the tokenizer tests, one per kind of pipeline, with small
vocabularies whose merges the tests work by hand. Run from this folder; the files are committed."""
import json

def byte_chars():
    """GPT-2's byte-to-unicode table, written out independently of the C++ one."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, n = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + n)
            n += 1
    return [table[b] for b in range(256)]

def with_merges(vocab, merges, joiner=lambda a, b: a + b):
    for a, b in merges:
        for t in (a, b, joiner(a, b)):
            if t not in vocab:
                vocab[t] = len(vocab)
    return vocab

def tokenizer(model, normalizer=None, pre_tokenizer=None, post_processor=None, added=(), decoder=None):
    return {"version": "1.0", "truncation": None, "padding": None,
            "added_tokens": [dict(id=i, content=c, single_word=False, lstrip=False, rstrip=False,
                                  normalized=False, special=True) for c, i in added],
            "normalizer": normalizer, "pre_tokenizer": pre_tokenizer, "model": model,
            "post_processor": post_processor, "decoder": decoder or {"type": "Fuse"}}

def bpe(vocab, merges, pairs=False, **extra):
    m = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
         "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
         "vocab": vocab, "merges": [[a, b] for a, b in merges] if pairs else [f"{a} {b}" for a, b in merges]}
    m.update(extra)
    return m

def write(name, t):
    with open(name, "w", encoding="utf-8") as f:
        json.dump(t, f, ensure_ascii=False, indent=1)
        f.write("\n")

G = "\u0120"  # Ġ, the space byte
# Byte-level: every byte a token, then merges in this order (the tests work " the" by hand:
# h e first, then t he, so Ġ t never gets its turn and " the" ends as Ġ + the).
byte_merges = [("h", "e"), ("t", "he"), (G, "t"), (G + "t", "he"), ("a", "p"), ("c", "ap"), ("i", "t"),
               ("cap", "it"), ("a", "l"), ("capit", "al"), (G, "capital"), ("'", "s"), (G, "P"), (G + "P", "a"),
               ("r", "i"), ("ri", "s"), (G + "Pa", "ris"), ("1", "2"), ("12", "3"), (G, G), (G + G, G + G)]
vocab = {c: i for i, c in enumerate(byte_chars())}
with_merges(vocab, byte_merges)
eot = len(vocab)
byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
write("gpt2_like.json", tokenizer(bpe(dict(vocab), byte_merges), pre_tokenizer=byte_level,
      post_processor={"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
      added=[("<|endoftext|>", eot)], decoder={"type": "ByteLevel"}))
# The same merges in tokenizer.json's pair form, with a prefix space, and RoBERTa's <s> … </s>.
roberta_vocab = dict(vocab)
roberta_vocab["<s>"] = eot
roberta_vocab["</s>"] = eot + 1
write("roberta_like.json", tokenizer(bpe(roberta_vocab, byte_merges, pairs=True),
      pre_tokenizer=dict(byte_level, add_prefix_space=True),
      post_processor={"type": "RobertaProcessing", "sep": ["</s>", eot + 1], "cls": ["<s>", eot],
                      "trim_offsets": True, "add_prefix_space": True},
      added=[("<s>", eot), ("</s>", eot + 1)], decoder={"type": "ByteLevel"}))

# Llama 3's and Qwen2's: a Split with their regex, then ByteLevel without its own regex.
llama3_regex = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
qwen2_regex = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
def split_then_bytes(pattern):
    return {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
        dict(byte_level, use_regex=False)]}
bos = len(vocab)
write("llama3_like.json", tokenizer(bpe(dict(vocab), byte_merges, ignore_merges=True),
      pre_tokenizer=split_then_bytes(llama3_regex),
      post_processor={"type": "Sequence", "processors": [
          dict(byte_level, type="ByteLevel", trim_offsets=False),
          {"type": "TemplateProcessing",
           "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
           "pair": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                    {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
           "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [bos], "tokens": ["<|begin_of_text|>"]}}}]},
      added=[("<|begin_of_text|>", bos), ("<|end_of_text|>", bos + 1)], decoder={"type": "ByteLevel"}))
write("qwen2_like.json", tokenizer(bpe(dict(vocab), byte_merges), normalizer={"type": "NFC"},
      pre_tokenizer=split_then_bytes(qwen2_regex), post_processor=None,
      added=[("<|endoftext|>", eot), ("<|im_start|>", eot + 1)], decoder={"type": "ByteLevel"}))
# Mistral's Tekken and GPT-4o's (o200k): letters cut where lower case turns upper, as their
# tokenizer.json spell it (llama.cpp spells the letter classes as lookaheads: the GGUF side).
tekken_regex = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
                r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|"
                r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
write("tekken_like.json", tokenizer(bpe(dict(vocab), byte_merges, ignore_merges=True),
      pre_tokenizer=split_then_bytes(tekken_regex), decoder={"type": "ByteLevel"}))

# SentencePiece's BPE: <unk> <s> </s>, the 256 <0xNN> tokens, then pieces with ▁.
S = "\u2581"
sp_merges = [(S, "t"), ("h", "e"), (S + "t", "he"), ("a", "p"), ("c", "ap"), (S, "c"), (S + "c", "ap"),
             ("i", "t"), (S + "cap", "it"), ("a", "l"), (S + "capit", "al"), (S, "P"), ("r", "i"), (S + "P", "a"),
             (S + "Pa", "ri"), (S + "Pari", "s"), (S, S)]
sp_vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
for b in range(256):
    sp_vocab[f"<0x{b:02X}>"] = len(sp_vocab)
for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,!?'" + S + "éè":
    sp_vocab.setdefault(c, len(sp_vocab))
with_merges(sp_vocab, sp_merges)
bos_template = {"type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                         {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
                "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}}
sp_added = [("<unk>", 0), ("<s>", 1), ("</s>", 2)]
sp_decoder = {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": S}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"},
    {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
write("llama2_prepend.json", tokenizer(
    bpe(dict(sp_vocab), sp_merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True),
    normalizer={"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": S},
                                                    {"type": "Replace", "pattern": {"String": " "}, "content": S}]},
    post_processor=bos_template, added=sp_added, decoder=sp_decoder))
write("metaspace_first.json", tokenizer(
    bpe(dict(sp_vocab), sp_merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True),
    pre_tokenizer={"type": "Metaspace", "replacement": S, "prepend_scheme": "first", "split": False},
    post_processor=bos_template, added=sp_added,
    decoder={"type": "Metaspace", "replacement": S, "prepend_scheme": "first", "split": False}))
write("metaspace_always_split.json", tokenizer(
    bpe(dict(sp_vocab), sp_merges, unk_token="<unk>", fuse_unk=False, byte_fallback=False),
    pre_tokenizer={"type": "Metaspace", "replacement": S, "prepend_scheme": "always", "split": True},
    post_processor=None, added=sp_added,
    decoder={"type": "Metaspace", "replacement": S, "prepend_scheme": "always", "split": True}))

# BERT's WordPiece: lowercased, accents stripped, CJK characters apart, [CLS] … [SEP].
wp = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list("abcdefghijklmnopqrstuvwxyz0123456789.,!?'-") + \
     ["##" + c for c in "abcdefghijklmnopqrstuvwxyz0123456789"] + \
     ["the", "capital", "cap", "##ital", "##it", "##al", "paris", "is", "of", "france", "un", "##aff", "##able",
      "aff", "cafe", "naive", "中", "国", "##s", "play", "##ing", "##in"]
wp_vocab = {t: i for i, t in enumerate(dict.fromkeys(wp))}
wordpiece = {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
             "max_input_chars_per_word": 100, "vocab": wp_vocab}
bert_added = [("[PAD]", 0), ("[UNK]", 1), ("[CLS]", 2), ("[SEP]", 3), ("[MASK]", 4)]
write("bert_uncased.json", tokenizer(wordpiece,
      normalizer={"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                  "strip_accents": None, "lowercase": True},
      pre_tokenizer={"type": "BertPreTokenizer"},
      post_processor={"type": "TemplateProcessing",
                      "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                 {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                      "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                               {"SpecialToken": {"id": "[SEP]", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}},
                               {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
                      "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                                         "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}},
      added=bert_added, decoder={"type": "WordPiece", "prefix": "##", "cleanup": True}))
write("bert_cased_short.json", tokenizer(dict(wordpiece, max_input_chars_per_word=8),
      normalizer={"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": False,
                  "strip_accents": False, "lowercase": False},
      pre_tokenizer={"type": "BertPreTokenizer"},
      post_processor={"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]},
      added=bert_added, decoder={"type": "WordPiece", "prefix": "##", "cleanup": True}))

# Normalizers and pre-tokenizers in sequences, over a character vocabulary.
chars = {"[UNK]": 0}
for c in "abcdefghijklmnopqrstuvwxyz0123456789.,!?'-_ ":
    chars[c] = len(chars)
char_merges = [("t", "h"), ("th", "e"), ("1", "2")]
with_merges(chars, char_merges)
write("normalizer_sequence.json", tokenizer(bpe(dict(chars), char_merges, unk_token="[UNK]"),
      normalizer={"type": "Sequence", "normalizers": [
          {"type": "NFKD"}, {"type": "StripAccents"}, {"type": "Lowercase"}, {"type": "Strip", "strip_left": True, "strip_right": True},
          {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "}, {"type": "NFC"}]},
      pre_tokenizer={"type": "Sequence", "pretokenizers": [
          {"type": "WhitespaceSplit"}, {"type": "Punctuation", "behavior": "Isolated"}, {"type": "Digits", "individual_digits": True}]}))
write("whitespace_digits.json", tokenizer(bpe(dict(chars), char_merges, unk_token="[UNK]"),
      normalizer={"type": "NFKC"},
      pre_tokenizer={"type": "Sequence", "pretokenizers": [
          {"type": "Whitespace"}, {"type": "Digits", "individual_digits": False}]}))
