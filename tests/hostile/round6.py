#!/usr/bin/env python3
"""Round six's hostile inputs: locate's --facts files (line ends, byte order marks, huge lines,
tabs out of place, NUL bytes, 100,000 lines, absent subjects, targets of several tokens) and
--corrupt-with's lengths; --sever, --noising and --atp together; transcoder folders in the
circuit-tracer layout (wrong shapes, NaN, missing tensors, huge declared sizes, k above the
features); the Llama 3, Qwen3 and Phi-3 GGUF files (fused tensors' sizes, rope scaling of inf, 0
and below, q/k norms' shapes, missing keys); and GGUF tokenizer metadata (pre-tokenizer names,
special tokens, token type arrays). Run through harness.py: each case one error line, exit 2,
nothing on stdout, no hang, no input changed.

    round6.py FFN_TRACE REPO_DIR FAMILY     (FAMILY: facts, options, transcoder, gguf, tokenizer)
"""
import json
import os
import shutil
import struct
import sys

ft, repo, family = sys.argv[1], sys.argv[2], sys.argv[3]
if family in ("gguf", "tokenizer"):
    try:
        import numpy as np
    except ImportError:
        print("skipped: no python3-numpy")
        sys.exit(77)
ATLAS = os.path.join(repo, "data", "models", "atlas")
TC = os.path.join(repo, "tests", "inputs", "transcoder", "atlas_layer1")
TOKENIZERS = os.path.join(repo, "tests", "inputs", "tokenizers")
sys.path.insert(0, os.path.join(repo, "tests", "families"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

harness.start(ft, "hostile6.")
from harness import case, f32, put, results, safetensors, work  # noqa: E402

FACT = "The capital of France is\tFrance\t Paris"


# ---- locate --facts ------------------------------------------------------------------------------

def facts_cases():
    base = ["locate", "--checkpoint", ATLAS, "--samples", "1"]

    def facts(name, data, pattern, status=2, extra=()):
        case(f"locate --facts: {name}", base + ["--facts", put(f"facts_{len(results)}.tsv", data)] + list(extra), pattern,
             status=status)

    facts("CRLF line ends (runs)", (FACT + "\r\n") * 2, "", status=0)
    facts("a byte order mark (runs)", "\ufeff" + FACT + "\n", "", status=0)
    facts("a lone CR inside a line (a character: runs)", "The capital\r of France is\tFrance\t Paris\n", "", status=0)
    facts("a line of 4 MB", "word " * 800000 + "France is\tFrance\t Paris\n", "line 1|longer|max-file-size|prompt")
    facts("a tab first", "\t" + FACT + "\n", "line 1: has no prompt")
    facts("a tab last", FACT + "\t\n", "line 1|target")
    facts("two tabs together", "The capital of France is\t\tFrance\t Paris\n", "line 1|subject")
    facts("only tabs", "\t\t\n", "line 1|prompt|subject")
    facts("a tab in the target", "The capital of France is\tFrance\t Pa\tris\n", "line 1|target|tab")
    facts("NUL bytes between fields", b"The capital of France is\x00\tFrance\t Paris\n", "", status=0)
    facts("NUL as the subject", b"The capital of France is\t\x00\t Paris\n", "line 1|subject")
    facts("subject absent from the prompt", "The capital of France is\tSpain\t Paris\n", "line 1|Spain|subject")
    facts("subject of another case", "The capital of France is\tfrance\t Paris\n", "line 1|france|subject")
    facts("subject the whole prompt", "The capital of France is\tThe capital of France is\t Paris\n", "line 1|whole prompt")
    facts("target of several tokens", "The capital of France is\tFrance\t Paris France Paris\n", "line 1|target|token")
    facts("target empty", "The capital of France is\tFrance\t\n", "line 1|target")
    facts("100000 lines, the last bad", (FACT + "\n") * 99999 + "no tabs at all\n", "line 100000|tab|subject")
    facts("100000 blank lines", "\n" * 100000, "facts")
    facts("not UTF-8 in the target", b"The capital of France is\tFrance\t Par\xffis\n", "line 1|UTF-8")
    facts("--corrupt-with shorter than the subject", FACT + "\n", "--corrupt-with|token",
          extra=["--corrupt-with", ""])
    facts("--corrupt-with of 50 tokens", FACT + "\n", "--corrupt-with|token",
          extra=["--corrupt-with", "the " * 50])
    facts("--corrupt-with of 10,000 characters", FACT + "\n", "--corrupt-with|token",
          extra=["--corrupt-with", "x" * 10000])


# ---- locate's options together ---------------------------------------------------------------------

def options_cases():
    base = ["locate", "--checkpoint", ATLAS, "--samples", "1", "--prompt", "The capital of France is", "--subject", "France"]
    for name, extra, pattern in [
        ("--sever mlp --atp (both read: runs)", ["--sever", "mlp", "--atp"], ""),
        ("--sever attn --noising", ["--sever", "attn", "--noising"], "--sever|--noising"),
        ("--sever MLP (case)", ["--sever", "MLP"], "--sever"),
        ("--sever mlp,attn", ["--sever", "mlp,attn"], "--sever"),
        ("--sever given twice", ["--sever", "mlp", "--sever", "attn"], "--sever"),
        ("--noising twice (a flag: runs)", ["--noising", "--noising"], ""),
        ("--atp --window 0", ["--atp", "--window", "0"], "--window"),
        ("--atp --noise -1", ["--atp", "--noise", "-1"], "--noise"),
        ("--atp --noise inf", ["--atp", "--noise", "inf"], "--noise"),
        ("--noising --noise 1e308", ["--noising", "--noise", "1e308"], "--noise"),
        ("--atp --corrupt replace without --corrupt-with", ["--atp", "--corrupt", "replace"], "--corrupt"),
        ("--noising --corrupt-with longer", ["--noising", "--corrupt-with", "the United Kingdom of"], "--corrupt-with"),
        ("--atp --metric logit-diff without --versus", ["--atp", "--metric", "logit-diff"], "--versus"),
        ("--sever mlp --window 1000 (cut at the edges: runs)", ["--sever", "mlp", "--window", "1000"], ""),
        ("--samples 100001", ["--samples", "100001"], "--samples"),
        ("--seed -1", ["--seed", "-1"], "--seed"),
        ("--target of two tokens with --atp", ["--atp", "--target", " Paris France"], "--target"),
        ("--target empty with --noising", ["--noising", "--target", ""], "--target"),
    ]:
        status = 0 if pattern == "" else 2
        case(f"locate {name}", base + extra, pattern, status=status)


# ---- transcoder folders in the circuit-tracer layout ------------------------------------------------

def tc_folder(name, config=None, tensors=None, raw=None):
    d = os.path.join(work, name)
    shutil.copytree(TC, d)
    if config is not None:
        put(os.path.join(name, "config.json"), json.dumps(config))
    if tensors is not None:
        header, data = {}, b""
        for t, (dtype, shape, blob) in tensors.items():
            header[t] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
            data += blob
        put(os.path.join(name, "layer_1.safetensors"), safetensors(header, data))
    if raw is not None:
        put(os.path.join(name, "layer_1.safetensors"), raw)
    return name


def good(F=16, d=64, **over):
    t = {"W_enc": ("F32", [F, d], f32([0.01] * (F * d))), "b_enc": ("F32", [F], f32([0.0] * F)),
         "W_dec": ("F32", [F, d], f32([0.01] * (F * d))), "b_dec": ("F32", [d], f32([0.0] * d))}
    t.update(over)
    return {k: v for k, v in t.items() if v is not None}


def transcoder_cases():
    def two(name, folder, pattern):
        case(f"units --transcoder: {name}", ["units", "--checkpoint", ATLAS, "--layer", "1", "--transcoder", folder, "--top", "2"],
             pattern)
        case(f"run --transcoder: {name}", ["run", "--checkpoint", ATLAS, "--layer", "1", "--prompt", "The capital of France is",
                                           "--transcoder", folder, "--detail", "summary"], pattern)

    two("W_dec transposed (d_model, features)", tc_folder("t1", tensors=good(W_dec=("F32", [64, 16], f32([0.01] * 1024)))), "W_dec")
    two("W_enc of 17 rows, W_dec of 16", tc_folder("t2", tensors=good(W_enc=("F32", [17, 64], f32([0.01] * 1088)))), "W_enc|W_dec|b_enc")
    two("b_enc missing", tc_folder("t3", tensors=good(b_enc=None)), "b_enc")
    two("b_dec missing", tc_folder("t4", tensors=good(b_dec=None)), "b_dec")
    two("W_dec has NaN", tc_folder("t5", tensors=good(W_dec=("F32", [16, 64], f32([float("nan")] + [0.0] * 1023)))), "W_dec")
    two("b_dec has -inf", tc_folder("t6", tensors=good(b_dec=("F32", [64], f32([float("-inf")] * 64)))), "b_dec")
    huge = safetensors({"W_enc": {"dtype": "F32", "shape": [2**40, 64], "data_offsets": [0, 4096]},
                        "b_enc": {"dtype": "F32", "shape": [16], "data_offsets": [4096, 4160]}}, b"\0" * 4160)
    two("W_enc declares 2^40 rows", tc_folder("t7", raw=huge), "W_enc|layer_1.safetensors")
    huge = safetensors({"W_enc": {"dtype": "F32", "shape": [2**31, 2**31], "data_offsets": [0, 16]}}, b"\0" * 16)
    two("W_enc declares 2^62 elements", tc_folder("t8", raw=huge), "W_enc|layer_1.safetensors")
    two("W_enc 3-D", tc_folder("t9", tensors=good(W_enc=("F32", [16, 8, 8], f32([0.01] * 1024)))), "W_enc")
    two("W_enc F16 of the wrong length", tc_folder("t10", tensors=good(W_enc=("F16", [16, 64], b"\0" * 100))),
        "W_enc|layer_1.safetensors")
    two("k 17 of 16 features", tc_folder("t11", config={"layer": 1, "activation": "topk", "k": 17}), "config.json: k")
    two("k -1", tc_folder("t12", config={"layer": 1, "activation": "topk", "k": -1}), "k")
    two("k 2.5", tc_folder("t13", config={"layer": 1, "activation": "topk", "k": 2.5}), "k")
    two("k 1e300", tc_folder("t14", config={"layer": 1, "activation": "topk", "k": 1e300}), "k")
    two("d_transcoder 0", tc_folder("t15", config={"layer": 1, "activation": "relu", "d_transcoder": 0}), "d_transcoder")
    two("file escapes the folder", tc_folder("t16", config={"layer": 1, "activation": "relu", "file": "../../etc/passwd"}), "")


# ---- the Llama 3, Qwen3 and Phi-3 GGUF files --------------------------------------------------------

def made_families():
    import models
    made = {}
    for arch in ("llama3", "qwen3", "phi3"):
        made[arch] = models.write(arch, 6, os.path.join(work, "src_" + arch), TOKENIZERS)
    return models, made


def gguf_writer(models, made):
    def gg(name, arch, meta_edit=None, tensor_edit=None, pre=None):
        t, c, tok = made[arch]
        path = os.path.join(work, f"g{len(results)}_{arch}.gguf")
        real = models.write_gguf_file

        def capture(p, meta, tensors):
            if tensor_edit:
                tensor_edit(tensors)
            real(p, meta_edit(meta) if meta_edit else meta, tensors)
        models.write_gguf_file = capture
        try:
            models.write_gguf(arch, dict(t), c, tok, path, pre or ("gpt-2" if arch == "phi3" else "llama-bpe"))
        finally:
            models.write_gguf_file = real
        return path
    return gg


def with_value(w, at, value):
    """A copy of w with one value changed: the source checkpoint's arrays are shared by every case."""
    w = w.copy()
    w[at] = value
    return w


def drop(*keys):
    return lambda meta: [m for m in meta if not any(k.encode() in m[:8 + len(k)] for k in keys)]


def replace(key, new):
    return lambda meta: drop(key)(meta) + [new]


def gguf_cases():
    models, made = made_families()
    gg = gguf_writer(models, made)
    from convert import f32 as gf32, string as gstring, u32 as gu32
    run = lambda ck: ["run", "--checkpoint", ck, "--layer", "0", "--prompt", "The capital of France is", "--detail", "summary"]

    def g(name, arch, pattern, **kw):
        case(f"{arch} GGUF: {name}", run(gg(name, arch, **kw)), pattern)

    # fused tensors' sizes, named as the file names them
    g("attn_qkv one row short", "phi3", "blk.0.attn_qkv",
      tensor_edit=lambda t: t.update({"blk.0.attn_qkv.weight": np.zeros((31, 16), dtype=np.float32)}))
    g("attn_qkv 1-D", "phi3", "blk.0.attn_qkv", tensor_edit=lambda t: t.update({"blk.0.attn_qkv.weight": np.zeros(32 * 16, dtype=np.float32)}))
    g("ffn_up (gate and up) of 3 × d_ff rows", "phi3", "blk.1.ffn_up",
      tensor_edit=lambda t: t.update({"blk.1.ffn_up.weight": np.zeros((36, 16), dtype=np.float32)}))
    g("ffn_up (gate and up) missing", "phi3", "blk.1.ffn_up", tensor_edit=lambda t: t.pop("blk.1.ffn_up.weight"))
    g("ffn_up (gate and up) with inf in the gate half", "phi3", "blk.0.ffn_up.weight's gate half",
      tensor_edit=lambda t: t.update({"blk.0.ffn_up.weight": with_value(t["blk.0.ffn_up.weight"], (0, 0), np.inf)}))
    g("ffn_up (gate and up) with NaN in the up half", "phi3", "blk.0.ffn_up.weight's up half",
      tensor_edit=lambda t: t.update({"blk.0.ffn_up.weight": with_value(t["blk.0.ffn_up.weight"], (20, 3), np.nan)}))
    g("ffn_down missing", "llama3", "blk.1.ffn_down", tensor_edit=lambda t: t.pop("blk.1.ffn_down.weight"))
    g("attn_q missing", "llama3", "blk.0.attn_q", tensor_edit=lambda t: t.pop("blk.0.attn_q.weight"))
    g("output_norm missing", "qwen3", "output_norm", tensor_edit=lambda t: t.pop("output_norm.weight"))
    g("token_embd missing", "llama3", "token_embd", tensor_edit=lambda t: t.pop("token_embd.weight"))
    # rope scaling values
    for value in (float("inf"), 0.0, -2.0, float("nan")):
        g(f"rope.scaling.factor {value}", "llama3", "rope.scaling.factor",
          meta_edit=lambda m, v=value: m + [gstring("llama.rope.scaling.type", "linear"), gf32("llama.rope.scaling.factor", v)])
    g("rope.freq_base inf", "qwen3", "freq_base", meta_edit=replace("qwen3.rope.freq_base", gf32("qwen3.rope.freq_base", float("inf"))))
    g("rope.freq_base -1", "phi3", "freq_base", meta_edit=replace("phi3.rope.freq_base", gf32("phi3.rope.freq_base", -1.0)))
    g("rope_freqs inf", "llama3", "rope_freqs",
      tensor_edit=lambda t: t.update({"rope_freqs.weight": np.array([1, np.inf], dtype=np.float32)}))
    g("rope_freqs negative", "llama3", "rope_freqs",
      tensor_edit=lambda t: t.update({"rope_freqs.weight": np.array([1, -1], dtype=np.float32)}))
    g("rms epsilon 0", "llama3", "layer_norm_rms_epsilon",
      meta_edit=replace("llama.attention.layer_norm_rms_epsilon", gf32("llama.attention.layer_norm_rms_epsilon", 0.0)))
    g("rms epsilon inf", "qwen3", "layer_norm_rms_epsilon",
      meta_edit=replace("qwen3.attention.layer_norm_rms_epsilon", gf32("qwen3.attention.layer_norm_rms_epsilon", float("inf"))))
    # q/k norms' shapes
    g("attn_q_norm 2-D", "qwen3", "blk.0.attn_q_norm",
      tensor_edit=lambda t: t.update({"blk.0.attn_q_norm.weight": np.ones((2, 4), dtype=np.float32)}))
    g("attn_k_norm of d_model", "qwen3", "blk.2.attn_k_norm",
      tensor_edit=lambda t: t.update({"blk.2.attn_k_norm.weight": np.ones(16, dtype=np.float32)}))
    g("attn_k_norm missing", "qwen3", "blk.1.attn_k_norm", tensor_edit=lambda t: t.pop("blk.1.attn_k_norm.weight"))
    # missing keys
    for arch, key in [("llama3", "llama.block_count"), ("qwen3", "qwen3.embedding_length"), ("phi3", "phi3.attention.head_count"),
                      ("llama3", "llama.feed_forward_length"), ("qwen3", "qwen3.context_length")]:
        g(f"{key} missing", arch, key.split(".", 1)[1].replace(".", "\\."), meta_edit=drop(key))
    g("head_count_kv 3 of 4", "llama3", "head_count_kv",
      meta_edit=replace("llama.attention.head_count_kv", gu32("llama.attention.head_count_kv", 3)))
    g("block_count 2^32-1", "qwen3", "block_count", meta_edit=replace("qwen3.block_count", gu32("qwen3.block_count", 2**32 - 1)))


# ---- GGUF tokenizer metadata --------------------------------------------------------------------------

def tokenizer_cases():
    models, made = made_families()
    gg = gguf_writer(models, made)
    from convert import i32s as gi32s, string as gstring, strings as gstrings, u32 as gu32, kv as gkv
    prompt = ["--prompt", "The capital of France is"]
    n = made["llama3"][1]["vocab_size"]

    def t(name, pattern, arch="llama3", command="run", meta_edit=None, **kw):
        # the bos token llama-bpe starts every text with, <|begin_of_text|>, unless the case says otherwise
        with_bos = lambda m: (m if any(b"bos_token_id" in x[:40] for x in m) else m + [gu32("tokenizer.ggml.bos_token_id", 277)])
        path = gg(name, arch, meta_edit=lambda m: with_bos(meta_edit(m) if meta_edit else m), **kw)
        args = (["run", "--checkpoint", path, "--layer", "0"] + prompt if command == "run"
                else ["tokenize", "--checkpoint", path, "The capital"])
        case(f"{arch} tokenizer ({command}): {name}", args, pattern)

    for pre in ["unknown-pre", "LLAMA-BPE", "llama-bpe\0", "x" * 1000000]:
        t(f"pre {pre[:14]!r}", "tokenizer.ggml.pre", pre=pre)
    t("pre a list", "tokenizer.ggml.pre", meta_edit=replace("tokenizer.ggml.pre", gstrings("tokenizer.ggml.pre", ["llama-bpe"])))
    t("pre unknown (tokenize)", "tokenizer.ggml.pre", command="tokenize", pre="bogus")
    t("model unknown", "tokenizer.ggml.model", meta_edit=replace("tokenizer.ggml.model", gstring("tokenizer.ggml.model", "rwkv")))
    t("model missing", "tokenizer.ggml.model", meta_edit=drop("tokenizer.ggml.model"))
    t("token_type one longer", "token_type",
      meta_edit=replace("tokenizer.ggml.token_type", gi32s("tokenizer.ggml.token_type", [1] * (n + 1))))
    t("token_type empty", "token_type", meta_edit=replace("tokenizer.ggml.token_type", gi32s("tokenizer.ggml.token_type", [])))
    t("token_type strings", "token_type",
      meta_edit=replace("tokenizer.ggml.token_type", gstrings("tokenizer.ggml.token_type", ["1"] * n)))
    t("token_type 99 (no such type)", "token_type", meta_edit=replace("tokenizer.ggml.token_type", gi32s("tokenizer.ggml.token_type", [99] * n)))
    t("tokens fewer than the embedding's rows", "tokens|vocab",
      meta_edit=replace("tokenizer.ggml.tokens", gstrings("tokenizer.ggml.tokens", ["a", "b", "c"])))
    t("bos id past the vocabulary", "bos_token_id", meta_edit=lambda m: m + [gu32("tokenizer.ggml.bos_token_id", n + 5)])
    t("eos id 2^32-1", "eos_token_id", meta_edit=lambda m: m + [gu32("tokenizer.ggml.eos_token_id", 2**32 - 1)])
    t("bos id a string", "bos_token_id", meta_edit=lambda m: m + [gstring("tokenizer.ggml.bos_token_id", "1")])
    t("scores of the wrong length", "scores",
      meta_edit=lambda m: m + [gkv("tokenizer.ggml.scores", 9, struct.pack("<IQ", 6, 2) + struct.pack("<2f", 0, 0))])
    t("merges naming a token twice over", "merges",
      meta_edit=replace("tokenizer.ggml.merges", gstrings("tokenizer.ggml.merges", ["a b c"])))
    t("tokens all empty strings", "tokens|merges", meta_edit=replace("tokenizer.ggml.tokens", gstrings("tokenizer.ggml.tokens", [""] * n)))


{"facts": facts_cases, "options": options_cases, "transcoder": transcoder_cases, "gguf": gguf_cases,
 "tokenizer": tokenizer_cases}[family]()
harness.finish()
