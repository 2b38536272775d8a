#!/usr/bin/env python3
"""Round seven's hostile inputs, against the surfaces round five's fixes added: MEMIT's facts files
and options (`edit --facts`: NUL bytes, byte order marks, CRLF, 100,000 lines, a 1 MB line,
targets of no or several tokens, --layers spelled every wrong way, --show, --sequential, --save
and -o traps), averaged tracing (`locate --facts` and `--prompts` with the single prompt's
options), Gemma 2 and 3 (config.json's soft caps, windows, query scalars and head sizes, and
their GGUF twins' metadata) and `transcoder train`'s options and corpora. Run through harness.py:
each case one error line, exit 2, nothing on stdout, no hang, no input changed; a case marked
"runs" must exit 0 and print no inf or NaN. The model API's hostile requests are unit tests
(tests/hooks_test.cpp, tests/transformer_test.cpp).

    round7.py FFN_TRACE REPO_DIR FAMILY     (FAMILY: memit, locate, gemma-config, gemma-gguf, train)
"""
import json
import os
import shutil
import sys

ft, repo, family = sys.argv[1], sys.argv[2], sys.argv[3]
if family.startswith("gemma"):
    try:
        import numpy as np
    except ImportError:
        print("skipped: no python3-numpy")
        sys.exit(77)
ATLAS = os.path.join(repo, "data", "models", "atlas")
FACTS = os.path.join(repo, "tests", "edit", "facts")
TOKENIZERS = os.path.join(repo, "tests", "inputs", "tokenizers")
sys.path.insert(0, os.path.join(repo, "tests", "families"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

harness.start(ft, "hostile7.")
from harness import case, put, results, work  # noqa: E402

FACT = "The capital of France is\tFrance\t Rome"


# ---- MEMIT: edit --facts ---------------------------------------------------------------------------

def memit_cases():
    corpus = put("corpus.txt", "The capital of France is Paris.\nThe capital of Germany is Berlin.\n")
    base = ["edit", "--checkpoint", ATLAS, "--at", "last", "--corpus", corpus]
    one = put("one.tsv", FACT + "\n")

    def facts(name, data, pattern, layers="1-3", extra=(), status=2):
        path = put(f"facts_{len(results)}.tsv", data)
        case(f"edit --facts: {name}", base + ["--layers", layers, "--facts", path, "--detail", "summary"] + list(extra), pattern,
             status=status)

    # the file
    facts("a BOM and CRLF line ends (runs)", "\ufeff" + FACT + "\r\n", "", layers="3-3", status=0)
    facts("NUL bytes in the target", b"The capital of France is\tFrance\t \x00\n", "line 1: the target")
    facts("NUL as the subject", b"The capital of France is\t\x00\t Rome\n", "line 1: the subject")
    facts("a line of 1 MB", "word " * 200000 + "France is\tFrance\t Rome\n", r"facts_\d+\.tsv: line 1: the prompt is [0-9,]+ tokens; the model reads at most 64")
    facts("100,000 lines, the last without tabs", (FACT + "\n") * 99999 + "no tabs at all\n", "line 100000")
    facts("100,000 blank lines", "\n" * 100000, "no prompt|blank")
    facts("the target empty", "The capital of France is\tFrance\t\n", "line 1: the target")
    facts("the target of two tokens", "The capital of France is\tFrance\t Rome Paris\n", "line 1: the target: .*not one token")
    facts("a tab in the target", "The capital of France is\tFrance\t Ro\tme\n", "line 1: the target")
    facts("one prompt and subject, two targets", FACT + "\nThe capital of France is\tFrance\t Cairo\n", "line 2: the same prompt")
    facts("the subject absent", "The capital of France is\tSpain\t Rome\n", "line 1: the subject")
    facts("the subject the whole prompt", "The capital of France is\tThe capital of France is\t Rome\n", "line 1: the subject")
    facts("not UTF-8", b"The capital of Fr\xffance is\tFrance\t Rome\n", "line 1|UTF-8")
    case("edit --facts: a folder", base + ["--layers", "1-3", "--facts", work], "folder|directory")
    case("edit --facts: /dev/null", base + ["--layers", "1-3", "--facts", "/dev/null"], "/dev/null")
    os.mkfifo(os.path.join(work, "facts.fifo"))
    case("edit --facts: a FIFO", base + ["--layers", "1-3", "--facts", "facts.fifo"], "facts.fifo")
    # --layers
    for layers, pattern in [("3-", "--layers"), ("-1-2", "--layers"), ("2-1", "--layers: 2-1 is reversed"), ("", "--layers"),
                            ("1 - 3", "--layers"), ("0x1-3", "--layers"), ("1-99999999999999999999", "--layers"),
                            ("18446744073709551615-18446744073709551615", "--layers"), ("3-4", "--layers: layer 4 is out of range")]:
        case(f"edit --facts --layers {layers!r}", base + ["--layers", layers, "--facts", one], pattern)
    # the other options
    for name, extra, pattern in [
        ("--show 2 of 1 fact", ["--show", "2"], "--show: fact 2 is past the 1 facts"),
        ("--show 0", ["--show", "0"], "--show"),
        ("--at 2 (a token's index)", ["--at", "2"], "--at: each fact has its own prompt"),
        ("--ridge nan", ["--ridge", "nan"], "--ridge"),
        ("--ridge -1", ["--ridge", "-1"], "--ridge"),
        ("--ridge inf", ["--ridge", "inf"], "--ridge"),
        ("--dtype f16", ["--dtype", "f16"], "--dtype"),
        ("with --layer", ["--layer", "1"], "--layer"),
        ("with --subject", ["--subject", "France"], "--subject"),
        ("with --paraphrase", ["--paraphrase", "x"], "--paraphrase"),
        ("-o the facts file", ["-o", one], "-o"),
        ("-o the corpus", ["-o", corpus], "-o"),
        ("-o /proc/self/status", ["-o", "/proc/self/status"], "-o"),
        ("-o a folder", ["-o", work], "-o"),
    ]:
        at = [] if "--at" in extra else ["--at", "last"]
        case(f"edit --facts {name}", ["edit", "--checkpoint", ATLAS, "--corpus", corpus, "--layers", "1-3", "--facts", one] + at + extra,
             pattern)
    case("edit --facts --sequential, 0 facts", base + ["--layers", "1-3", "--facts", os.path.join(FACTS, "empty.tsv"), "--sequential"],
         "empty")
    case("edit --facts --sequential, 100,000 blank lines", base + ["--layers", "1-3", "--facts", put("blank.tsv", "\n" * 100000),
                                                                 "--sequential"], "no prompt|blank")
    case("edit --facts: an empty corpus", ["edit", "--checkpoint", ATLAS, "--at", "last", "--corpus", put("empty.txt", ""), "--layers",
                                           "1-3", "--facts", one], "empty")
    # --save
    os.mkdir(os.path.join(work, "exists"))
    os.symlink(ATLAS, os.path.join(work, "atlas_link"))
    for name, folder, pattern in [("a folder that exists", "exists", "exists: --save: already exists"),
                                  ("the checkpoint", ATLAS, "--save: is the checkpoint's folder"),
                                  ("inside the checkpoint", os.path.join(ATLAS, "new"), "--save: is the checkpoint's folder"),
                                  ("inside the checkpoint through a link", "atlas_link/new", "--save: is the checkpoint's folder"),
                                  ("the facts file", one, "--save"),
                                  ("/proc/self/new", "/proc/self/new", "--save|/proc")]:
        case(f"edit --facts --save {name}", base + ["--layers", "1-3", "--facts", one, "--save", folder], pattern)


# ---- averaged tracing: locate --facts and --prompts -------------------------------------------------

def locate_cases():
    base = ["locate", "--checkpoint", ATLAS, "--samples", "1"]
    two = put("two.tsv", "The capital of France is\tFrance\t Paris\nThe capital of Germany is\tGermany\t Berlin\n")
    prompts = put("prompts.txt", "The capital of France is\tFrance\nThe capital of Germany is\tGermany\n")
    for name, extra, pattern in [
        ("--subject (one prompt's)", ["--facts", two, "--subject", "France"], "--subject"),
        ("--target (one prompt's)", ["--facts", two, "--target", " Paris"], "--target"),
        ("--metric logit-diff --versus (runs)", ["--facts", two, "--metric", "logit-diff", "--versus", " Rome"], ""),
        ("--metric logit-diff --versus a fact's own target", ["--facts", two, "--metric", "logit-diff", "--versus", " Berlin"],
         "--versus: .*the target itself"),
        ("--metric logit-diff without --versus", ["--facts", two, "--metric", "logit-diff"], "--versus"),
        ("--versus of two tokens", ["--facts", two, "--metric", "logit-diff", "--versus", " Rome Paris"], "--versus"),
        ("--versus without logit-diff", ["--facts", two, "--versus", " Rome"], "--versus"),
        ("--atp --sever attn (runs)", ["--facts", two, "--atp", "--sever", "attn"], ""),
        ("--noising --sever attn", ["--facts", two, "--noising", "--sever", "attn"], "--sever"),
        ("--layer", ["--facts", two, "--atp", "--layer", "1"], "--layer"),
        ("-o the facts file", ["--facts", two, "-o", two], "-o"),
        ("--prompts --metric logit-diff --versus (runs)", ["--prompts", prompts, "--target", " Paris", "--metric", "logit-diff",
                                                           "--versus", " Rome"], ""),
        ("--prompts --versus of two tokens", ["--prompts", prompts, "--metric", "logit-diff", "--versus", " Rome Paris"], "--versus"),
    ]:
        case(f"locate {name}", base + extra, pattern, status=0 if pattern == "" else 2)

    def facts(name, data, pattern, status=2):
        case(f"locate --facts: {name}", base + ["--facts", put(f"facts_{len(results)}.tsv", data)], pattern, status=status)

    facts("the same fact twice (runs)", "The capital of France is\tFrance\t Paris\n" * 2, "", status=0)
    facts("the subject twice in its prompt (runs)", "France, France: the capital of France is\tFrance\t Paris\n", "", status=0)
    facts("the subject its first token (runs)", "France is\tFrance\t Paris\n", "", status=0)
    facts("the subject a space", "The capital of France is\t \t Paris\n", "line 1: .*subject")
    facts("the subject and prompt one token", "is\tis\t Paris\n", "line 1: .*whole prompt")
    os.mkfifo(os.path.join(work, "facts.fifo"))
    case("locate --facts: a FIFO", base + ["--facts", "facts.fifo"], "facts.fifo")
    case("locate --facts -: empty standard input", base + ["--facts", "-"], "stdin")


# ---- Gemma 2 and 3: config.json and the GGUF twin ------------------------------------------------------

def made_gemma():
    import models
    return models, {arch: models.write(arch, 6, os.path.join(work, "src_" + arch), TOKENIZERS) for arch in ("gemma2", "gemma3")}


def run_args(checkpoint):
    return ["run", "--checkpoint", checkpoint, "--layer", "0", "--prompt", "The capital of France is", "--detail", "summary"]


def gemma_config_cases():
    made_gemma()

    def c(name, arch, edit, pattern, status=2, text=None):
        d = os.path.join(work, f"c{len(results)}_{arch}")
        shutil.copytree(os.path.join(work, "src_" + arch), d)
        path = os.path.join(d, "config.json")
        with open(path) as f:
            config = json.load(f)
        edit(config)
        with open(path, "w") as f:
            f.write(text(config) if text else json.dumps(config))
        case(f"{arch} config: {name}", run_args(d), pattern, status=status)

    put_key = lambda k, v: (lambda c: c.update({k: v}))
    for arch in ("gemma2", "gemma3"):
        for v in (0, -1, "8", True, None):
            c(f"query_pre_attn_scalar {v!r}", arch, put_key("query_pre_attn_scalar", v), "config.json: query_pre_attn_scalar")
        c("query_pre_attn_scalar NaN", arch, put_key("query_pre_attn_scalar", 1), "config.json",
          text=lambda cf: json.dumps(cf).replace('"query_pre_attn_scalar": 1', '"query_pre_attn_scalar": NaN'))
        for v in (1e-300, 1e308):
            c(f"query_pre_attn_scalar {v} (runs)", arch, put_key("query_pre_attn_scalar", v), "", status=0)
        for key in ("attn_logit_softcapping", "final_logit_softcapping"):
            for v in (0, -1, "2"):
                c(f"{key} {v!r}", arch, put_key(key, v), f"config.json: {key}")
            c(f"{key} 1e308 (runs)", arch, put_key(key, 1e308), "", status=0)
        for v in (0, -1, 1.5, 1e20, None):
            c(f"sliding_window {v!r}", arch, put_key("sliding_window", v), "config.json: sliding_window")
        c("sliding_window_pattern 0", arch, put_key("sliding_window_pattern", 0), "sliding_window_pattern")
        c("layer_types too short", arch, put_key("layer_types", ["sliding_attention"]), "layer_types")
        c("layer_types naming no kind", arch, lambda cf: cf.update(layer_types=["local"] * cf["num_hidden_layers"]), r"layer_types\[0\]")
        for v, pattern in [(7, "head_dim: .*even"), (0, "head_dim"), (2**62, "head_dim"), (6, "q_proj")]:
            c(f"head_dim {v}", arch, put_key("head_dim", v), pattern)
        c("hidden_size 15 (head_dim's heads disagree)", arch, put_key("hidden_size", 15), "hidden_size")
        c("hidden_activation relu", arch, put_key("hidden_activation", "relu"), "hidden_activation")
    c("rope_local_base_freq 0", "gemma3", put_key("rope_local_base_freq", 0), "rope_local_base_freq")
    c("rope_scaling factor 0", "gemma3", put_key("rope_scaling", {"rope_type": "linear", "factor": 0}), "rope_scaling.factor")


def gemma_gguf_cases():
    models, made = made_gemma()
    from convert import f32 as gf32, string as gstring, u32 as gu32

    def g(name, arch, pattern, meta_edit=None, tensor_edit=None, status=2):
        t, c, tok = made[arch]
        path = os.path.join(work, f"g{len(results)}_{arch}.gguf")
        real = models.write_gguf_file

        def capture(p, meta, tensors):
            if tensor_edit:
                tensor_edit(tensors)
            real(p, meta_edit(meta) if meta_edit else meta, tensors)
        models.write_gguf_file = capture
        try:
            models.write_gguf(arch, dict(t), c, tok, path, "llama-bpe")
        finally:
            models.write_gguf_file = real
        case(f"{arch} GGUF: {name}", run_args(path), pattern, status=status)

    def drop(key):
        return lambda meta: [m for m in meta if key.encode() not in m[:8 + len(key)]]

    def replace(key, new):
        return lambda meta: drop(key)(meta) + [new]

    for arch in ("gemma2", "gemma3"):
        for key in ("attn_logit_softcapping", "final_logit_softcapping"):
            k = f"{arch}.{key}"
            for v in (0.0, -1.0, float("nan"), float("inf")):
                g(f"{key} {v}", arch, k.replace(".", r"\."), meta_edit=replace(k, gf32(k, v)))
            g(f"{key} a string", arch, k.replace(".", r"\.") + ": expected an f32", meta_edit=replace(k, gstring(k, "2")))
            g(f"{key} a u32", arch, k.replace(".", r"\.") + ": expected an f32", meta_edit=replace(k, gu32(k, 2)))
            g(f"{key} 3e38 (runs)", arch, "", meta_edit=replace(k, gf32(k, 3e38)), status=0)
        k = f"{arch}.attention.sliding_window"
        g("sliding_window 0", arch, "sliding_window: expected a whole number ≥ 1, got 0", meta_edit=replace(k, gu32(k, 0)))
        g("sliding_window missing (llama.cpp's 4096: runs)", arch, "", meta_edit=drop(k), status=0)
        g("sliding_window 2^32-1 (runs)", arch, "", meta_edit=replace(k, gu32(k, 2**32 - 1)), status=0)
        g("sliding_window an f32", arch, "sliding_window: expected an unsigned integer", meta_edit=replace(k, gf32(k, 3.0)))
        k = f"{arch}.attention.key_length"
        for v, pattern in [(0, "key_length"), (7, "key_length: .*even"), (6, r"blk\.0\.attn_q"), (2**32 - 1, "key_length")]:
            g(f"key_length {v}", arch, pattern, meta_edit=replace(k, gu32(k, v)))
        k = f"{arch}.attention.value_length"
        # the values are read as wide as the keys, the tensors' shapes checked against that: the key is not read
        for v in (0, 2**32 - 1):
            g(f"value_length {v} (not read: runs)", arch, "", meta_edit=replace(k, gu32(k, v)), status=0)
        g("embedding_length 15", arch, "embedding_length", meta_edit=replace(f"{arch}.embedding_length", gu32(f"{arch}.embedding_length", 15)))
        g("head_count 0", arch, "head_count", meta_edit=replace(f"{arch}.attention.head_count", gu32(f"{arch}.attention.head_count", 0)))
        g("post_ffw_norm missing", arch, r"blk\.0\.post_ffw_norm.*missing.*layer 0's RMSNorm of the FFN's output",
          tensor_edit=lambda t: t.pop("blk.0.post_ffw_norm.weight"))
        g("post_attention_norm missing", arch, r"blk\.1\.post_attention_norm", tensor_edit=lambda t: t.pop("blk.1.post_attention_norm.weight"))
        g("post_ffw_norm NaN", arch, r"blk\.0\.post_ffw_norm.*NaN",
          tensor_edit=lambda t: t.update({"blk.0.post_ffw_norm.weight": np.full(16, np.nan, dtype=np.float32)}))
    g("rope.scaling.factor 0", "gemma3", "rope.scaling.factor",
      meta_edit=replace("gemma3.rope.scaling.factor", gf32("gemma3.rope.scaling.factor", 0.0)))
    g("attn_q_norm missing", "gemma3", r"blk\.0\.attn_q_norm", tensor_edit=lambda t: t.pop("blk.0.attn_q_norm.weight"))


# ---- transcoder train ----------------------------------------------------------------------------------

def train_cases():
    corpus = put("corpus.txt", "The capital of France is Paris.\n" * 20)
    base = ["transcoder", "train", "--checkpoint", ATLAS, "--layer", "1", "--epochs", "1"]

    def tr(name, extra, pattern, out="tcout", corpus_file=corpus):
        case(f"transcoder train: {name}", base + ["--corpus", corpus_file, "-o", out] + extra, pattern)
        if os.path.exists(os.path.join(work, "tcout")):
            shutil.rmtree(os.path.join(work, "tcout"))
            results[-1] = (results[-1][0], "FAIL: wrote tcout", results[-1][2])

    for lr in ("nan", "0", "-1", "-inf"):
        tr(f"--lr {lr}", ["--features", "8", "--k", "2", "--lr", lr], "--lr")
    tr("--l1 inf", ["--features", "8", "--l1", "inf"], "--l1")
    tr("--k and --l1", ["--features", "8", "--k", "2", "--l1", "0.1"], "--k|--l1")
    tr("--epochs 100001", ["--features", "8", "--k", "2", "--epochs", "100001"], "--epochs")
    tr("--features 1048577", ["--features", "1048577", "--k", "2"], "--features")
    tr("a corpus of one token", ["--features", "8", "--k", "2"], "--corpus: the corpus gives 1 activation",
       corpus_file=put("one.txt", "Paris\n"))
    tr("a corpus of blank lines", ["--features", "8", "--k", "2"], "blank", corpus_file=put("blank.txt", "\n\n\n"))
    tr("a corpus larger than --max-file-size", ["--features", "8", "--k", "2", "--max-file-size", "10"], "--max-file-size")
    os.symlink(ATLAS, os.path.join(work, "atlas_link"))
    tr("-o inside the checkpoint through a link", ["--features", "8", "--k", "2"], "checkpoint's folder", out="atlas_link/tc")
    tr("-o /dev/null", ["--features", "8", "--k", "2"], "/dev/null", out="/dev/null")
    tr("-o the scratch folder itself", ["--features", "8", "--k", "2"], "already exists", out=".")
    tr("-o the corpus", ["--features", "8", "--k", "2"], "corpus.txt|-o|--output", out="corpus.txt")


{"memit": memit_cases, "locate": locate_cases, "gemma-config": gemma_config_cases, "gemma-gguf": gemma_gguf_cases,
 "train": train_cases}[family]()
harness.finish()
