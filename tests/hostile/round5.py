#!/usr/bin/env python3
"""Hostile inputs against the transcoder folders, locate's averaged tracing, the new families
(rope scaling, Qwen3, Phi-3 and their GGUF twins), GGUF pre-tokenizers and -o. Each case is made
in a scratch folder and run against the binary; every one must end in one stderr line starting
`error:` that matches the case's pattern, exit status 2, nothing on stdout, within a time bound,
and leave every file of the scratch folder as it was. Prints a table of the cases, and exits 1
if any failed.

    round5.py FFN_TRACE REPO_DIR FAMILY     (FAMILY: transcoder, train, locate, families, tokenizer, output)
"""
import json
import os
import shutil
import struct
import sys

ft, repo, family = sys.argv[1], sys.argv[2], sys.argv[3]
if family in ("families", "tokenizer"):
    try:
        import numpy  # noqa: F401  (tests/families/models.py writes the checkpoints with it)
    except ImportError:
        print("skipped: no python3-numpy")
        sys.exit(77)
ATLAS = os.path.join(repo, "data", "models", "atlas")
TC = os.path.join(repo, "tests", "inputs", "transcoder", "atlas_layer1")
TOKENIZERS = os.path.join(repo, "tests", "inputs", "tokenizers")
sys.path.insert(0, os.path.join(repo, "tests", "families"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

harness.start(ft, "hostile5.")
from harness import case, f32, put, results, safetensors, work  # noqa: E402


# ---- transcoder folders ----------------------------------------------------------------------------

def tc_folder(name, config=None, tensors=None, raw=None):
    """A copy of the shipped atlas_layer1 folder with its config or tensors replaced."""
    d = os.path.join(work, name)
    shutil.copytree(TC, d)
    if config is not None:
        put(os.path.join(name, "config.json"), config if isinstance(config, (str, bytes)) else json.dumps(config))
    if tensors is not None:
        header, data = {}, b""
        for t, (dtype, shape, blob) in tensors.items():
            header[t] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
            data += blob
        put(os.path.join(name, "layer_1.safetensors"), safetensors(header, data))
    if raw is not None:
        put(os.path.join(name, "layer_1.safetensors"), raw)
    return name


def good_tensors(F=16, d=64, **over):
    t = {"W_enc": ("F32", [F, d], f32([0.01] * (F * d))), "b_enc": ("F32", [F], f32([0.0] * F)),
         "W_dec": ("F32", [F, d], f32([0.01] * (F * d))), "b_dec": ("F32", [d], f32([0.0] * d))}
    t.update(over)
    return {k: v for k, v in t.items() if v is not None}


def transcoder_cases():
    def three(name, folder, pattern, status=2):
        case(f"run --transcoder: {name}", ["run", "--checkpoint", ATLAS, "--layer", "1", "--prompt", "The capital of France is",
                                           "--transcoder", folder, "--detail", "summary"], pattern, status=status)
        case(f"units --transcoder: {name}", ["units", "--checkpoint", ATLAS, "--layer", "1", "--transcoder", folder, "--top", "2"],
             pattern, status=status)
        case(f"units --split: {name}", ["units", "--checkpoint", ATLAS, "--layer", "1", "--unit", "5", "--split", folder,
                                        "--top", "2"], pattern, status=status)

    three("no such folder", "absent", "absent")
    put("plainfile", "x")
    three("a file for the folder", "plainfile", "plainfile")
    os.mkdir(os.path.join(work, "empty"))
    three("an empty folder", "empty", "config.json")
    three("layer 0 for layer 1", tc_folder("tc_layer0", {"model": "atlas", "layer": 0, "activation": "relu"}), "layer")
    case("run --transcoder: layer 7 of a 4-layer model", ["run", "--checkpoint", ATLAS, "--layer", "1", "--prompt", "The capital",
         "--transcoder", tc_folder("tc_layer7", {"layer": 7, "activation": "relu", "file": "layer_1.safetensors"})], "layer")
    three("config not JSON", tc_folder("tc_notjson", "{\"layer\": 1,"), "config.json")
    three("config a list", tc_folder("tc_list", "[1, 2]"), "config.json")
    three("config non-UTF-8", tc_folder("tc_latin1", b'{"layer": 1, "activation": "relu", "model": "\xe9t\xe9"}'), "config.json")
    three("layer negative", tc_folder("tc_neg", {"layer": -1, "activation": "relu"}), "layer")
    three("layer 1e30", tc_folder("tc_huge", {"layer": 1e30, "activation": "relu"}), "layer")
    three("activation gelu", tc_folder("tc_gelu", {"layer": 1, "activation": "gelu"}), "activation")
    three("topk without k", tc_folder("tc_nok", {"layer": 1, "activation": "topk"}), "k")
    three("k 0", tc_folder("tc_k0", {"layer": 1, "activation": "topk", "k": 0}), "k")
    three("k above features", tc_folder("tc_k99", {"layer": 1, "activation": "topk", "k": 99}), "k")
    three("duplicate layer keys", tc_folder("tc_dup", '{"layer": 1, "layer": 2, "activation": "relu"}'), "layer")
    three("d_transcoder wrong", tc_folder("tc_dtc", {"layer": 1, "activation": "relu", "d_transcoder": 17}), "d_transcoder")
    three("file names a folder", tc_folder("tc_filedir", {"layer": 1, "activation": "relu", "file": "."}), "tc_filedir")
    three("file names /dev/zero", tc_folder("tc_devzero", {"layer": 1, "activation": "relu", "file": "/dev/zero"}), "")
    tc_folder("tc_fifo", {"layer": 1, "activation": "relu", "file": "fifo"})
    os.mkfifo(os.path.join(work, "tc_fifo", "fifo"))
    three("file names a FIFO", "tc_fifo", "fifo")
    d = tc_folder("tc_loop", {"layer": 1, "activation": "relu", "file": "loop"})
    os.symlink("loop", os.path.join(work, d, "loop"))
    three("file a symlink loop", d, "loop")
    d = tc_folder("tc_noweights")
    os.remove(os.path.join(work, d, "layer_1.safetensors"))
    three("weights missing", d, "layer_1.safetensors")
    with open(os.path.join(TC, "layer_1.safetensors"), "rb") as f:
        whole = f.read()
    three("weights truncated", tc_folder("tc_trunc", raw=whole[:len(whole) // 2]), "layer_1.safetensors")
    three("weights empty", tc_folder("tc_zero", raw=b""), "layer_1.safetensors")
    three("W_dec missing", tc_folder("tc_nodec", tensors=good_tensors(W_dec=None)), "W_dec")
    three("W_enc 1-D", tc_folder("tc_enc1d", tensors=good_tensors(W_enc=("F32", [1024], f32([0.0] * 1024)))), "W_enc")
    three("d_model 32 for 64", tc_folder("tc_d32", tensors=good_tensors(d=32)), "64|32")
    three("b_dec too short", tc_folder("tc_bdec", tensors=good_tensors(b_dec=("F32", [63], f32([0.0] * 63)))), "b_dec")
    three("W_enc has NaN", tc_folder("tc_nan", tensors=good_tensors(W_enc=("F32", [16, 64], f32([float("nan")] * 1024)))), "W_enc")
    three("b_enc has inf", tc_folder("tc_inf", tensors=good_tensors(b_enc=("F32", [16], f32([float("inf")] * 16)))), "b_enc")
    three("W_dec of 3e38 (finite in double: runs)", tc_folder("tc_big", tensors=good_tensors(W_dec=("F32", [16, 64], f32([3e38] * 1024)))), "",
          status=0)
    three("W_enc I32", tc_folder("tc_i32", tensors=good_tensors(W_enc=("I32", [16, 64], b"\0" * 4096))), "W_enc")
    three("zero features", tc_folder("tc_f0", tensors=good_tensors(F=0)), "W_enc|feature")


# ---- transcoder train --------------------------------------------------------------------------

def train_cases():
    base = ["transcoder", "train", "--checkpoint", ATLAS, "--layer", "1", "--epochs", "1"]
    corpus = put("corpus.txt", "The capital of France is Paris.\n" * 20)

    def tr(name, extra, pattern, out="tcout"):
        args = base + extra + (["-o", out] if out is not None else [])
        case(f"transcoder train: {name}", args, pattern)
        if out and os.path.isdir(os.path.join(work, out)) and out == "tcout":
            shutil.rmtree(os.path.join(work, out))
            results[-1] = (results[-1][0], "FAIL: wrote " + out, results[-1][2])

    tr("--features 0", ["--features", "0", "--corpus", corpus], "--features")
    tr("--features -3", ["--features", "-3", "--corpus", corpus], "--features")
    tr("--features 1e12", ["--features", "1000000000000", "--corpus", corpus], "--features")
    tr("--k above --features", ["--features", "8", "--k", "9", "--corpus", corpus], "--k")
    tr("--k 0", ["--features", "8", "--k", "0", "--corpus", corpus], "--k")
    tr("--l1 negative", ["--features", "8", "--l1", "-1", "--corpus", corpus], "--l1")
    tr("--l1 nan", ["--features", "8", "--l1", "nan", "--corpus", corpus], "--l1")
    tr("--lr inf", ["--features", "8", "--k", "2", "--lr", "inf", "--corpus", corpus], "--lr")
    tr("--lr 1e300 (training diverges)", ["--features", "8", "--k", "2", "--lr", "1e300", "--corpus", corpus], "")
    tr("--batch 0", ["--features", "8", "--k", "2", "--batch", "0", "--corpus", corpus], "--batch")
    tr("--epochs 0", ["--features", "8", "--k", "2", "--epochs", "0", "--corpus", corpus], "--epochs")
    case("transcoder train: --layer 4 of 4", ["transcoder", "train", "--checkpoint", ATLAS, "--layer", "4", "--features", "8",
                                               "--k", "2", "--corpus", corpus, "-o", "tcout"], "--layer")
    tr("no -o", ["--features", "8", "--k", "2", "--corpus", corpus], "-o", out=None)
    tr("-o \"\"", ["--features", "8", "--k", "2", "--corpus", corpus], "-o", out="")
    os.mkdir(os.path.join(work, "exists"))
    tr("-o an existing folder", ["--features", "8", "--k", "2", "--corpus", corpus], "exists", out="exists")
    tr("-o the checkpoint", ["--features", "8", "--k", "2", "--corpus", corpus], "-o", out=ATLAS)
    tr("-o inside the checkpoint", ["--features", "8", "--k", "2", "--corpus", corpus], "-o", out=os.path.join(ATLAS, "tc"))
    tr("-o the corpus file", ["--features", "8", "--k", "2", "--corpus", corpus], "-o", out=corpus)
    tr("-o /proc/tc", ["--features", "8", "--k", "2", "--corpus", corpus], "-o", out="/proc/tc")
    tr("-o under a missing parent", ["--features", "8", "--k", "2", "--corpus", corpus], "-o", out="no/such/dir")
    tr("corpus too small for the features", ["--features", "4000", "--k", "2", "--corpus", corpus], "corpus|token")
    tr("corpus empty", ["--features", "8", "--k", "2", "--corpus", put("empty.txt", "")], "empty.txt")
    tr("corpus of blank lines and tabs", ["--features", "8", "--k", "2", "--corpus", put("blank.txt", "\n\t\n  \n\n")], "blank.txt")
    tr("corpus non-UTF-8", ["--features", "8", "--k", "2", "--corpus", put("latin1.txt", b"caf\xe9 \xff\xfe\n" * 30)], "latin1.txt")
    tr("corpus a folder", ["--features", "8", "--k", "2", "--corpus", work], "")
    tr("corpus /dev/zero", ["--features", "8", "--k", "2", "--corpus", "/dev/zero"], "/dev/zero")
    os.mkfifo(os.path.join(work, "corpus.fifo"))
    tr("corpus a FIFO", ["--features", "8", "--k", "2", "--corpus", "corpus.fifo"], "corpus.fifo")
    os.symlink("loop.txt", os.path.join(work, "loop.txt"))
    tr("corpus a symlink loop", ["--features", "8", "--k", "2", "--corpus", "loop.txt"], "loop.txt")
    tr("corpus missing", ["--features", "8", "--k", "2", "--corpus", "nosuch.txt"], "nosuch.txt")


# ---- locate ------------------------------------------------------------------------------------

def locate_cases():
    base = ["locate", "--checkpoint", ATLAS, "--samples", "1"]
    fact = ["--prompt", "The capital of France is", "--subject", "France"]

    def facts(name, text, pattern, status=2):
        case(f"locate --facts: {name}", base + ["--facts", put(f"facts_{len(results)}.tsv", text)], pattern, status=status)

    facts("empty file", "", "facts")
    facts("only blank lines", "\n\n\n", "facts")
    facts("no tab", "The capital of France is France\n", "tab|subject")
    facts("subject not in prompt", "The capital of France is\tGermany\t Paris\n", "Germany")
    facts("empty subject", "The capital of France is\t\t Paris\n", "subject")
    facts("empty prompt", "\tFrance\t Paris\n", "prompt")
    facts("four fields (the tab is the target's)", "The capital of France is\tFrance\t Paris\textra\n", "target")
    facts("non-UTF-8", b"The capital of Fr\xe9nce is\tFr\xe9nce\t Paris\n", "UTF-8|utf")
    facts("NUL inside (a character like another: runs)", b"The capital\x00 of France is\tFrance\t Paris\n", "", status=0)
    facts("target of two tokens", "The capital of France is\tFrance\t Parisian\n", "target|token")
    facts("prompt past the context", ("word " * 200) + "France is\tFrance\t Paris\n", "longer than")
    facts("100000 lines", "The capital of France is\tFrance\t Paris\n" * 50000 + "The capital of Spain is\tSpain\t Madrid\nbad line\n",
          "line|tab|subject")
    case("locate --facts: a folder", base + ["--facts", work], "")
    case("locate --facts: /dev/zero", base + ["--facts", "/dev/zero"], "/dev/zero")
    os.mkfifo(os.path.join(work, "facts.fifo"))
    case("locate --facts: a FIFO", base + ["--facts", "facts.fifo"], "facts.fifo")
    case("locate --facts with --prompt", base + ["--facts", os.path.join(ATLAS, "facts.tsv")] + fact, "--facts|--prompt")
    case("locate --corrupt-with empty", base + fact + ["--corrupt-with", ""], "--corrupt-with")
    case("locate --corrupt-with of another length", base + fact + ["--corrupt-with", "the United Kingdom of Great Britain"],
         "--corrupt-with")
    case("locate --corrupt-with non-UTF-8", base + fact + ["--corrupt-with", b"Fr\xe9nce".decode("latin1").encode("latin1").decode("utf-8", "surrogateescape")],
         "--corrupt-with")
    case("locate --corrupt-with and --corrupt noise", base + fact + ["--corrupt", "noise", "--corrupt-with", "Spain"], "--corrupt")
    case("locate --metric bogus", base + fact + ["--metric", "bogus"], "--metric")
    case("locate --metric empty", base + fact + ["--metric", ""], "--metric")
    case("locate --versus without logit-diff", base + fact + ["--versus", " Berlin"], "--versus")
    case("locate --versus of two tokens", base + fact + ["--metric", "logit-diff", "--versus", " Berlinian Xq"], "--versus")
    case("locate --versus the target itself", base + fact + ["--metric", "logit-diff", "--versus", " Paris"], "--versus")
    case("locate logit-diff, noise, no --versus", base + fact + ["--metric", "logit-diff"], "--versus")
    case("locate --sever bogus", base + fact + ["--sever", "both"], "--sever")
    case("locate --sever empty", base + fact + ["--sever", ""], "--sever")
    case("locate --noise nan", base + fact + ["--noise", "nan"], "--noise")
    case("locate --noise 1e308", base + fact + ["--noise", "1e308"], "--noise")
    case("locate --samples 0", ["locate", "--checkpoint", ATLAS, "--samples", "0"] + fact, "--samples")
    case("locate --window 0", base + fact + ["--window", "0"], "--window")
    case("locate --window 99 (cut at the edges: runs)", base + fact + ["--window", "99"], "", status=0)
    case("locate --atp --noising --samples 0", ["locate", "--checkpoint", ATLAS, "--samples", "0", "--atp", "--noising"] + fact,
         "--samples")
    case("locate -o itself (facts)", base + ["--facts", put("facts_o.tsv", "The capital of France is\tFrance\t Paris\n"),
                                            "-o", "facts_o.tsv"], "-o")
    case("locate -o the model", base + fact + ["-o", os.path.join(ATLAS, "model.safetensors")], "-o")
    case("locate -o \"\"", base + fact + ["-o", ""], "-o")
    case("locate -o /proc/self/x", base + fact + ["-o", "/proc/self/x"], "-o|/proc")
    case("locate -o a folder", base + fact + ["-o", work], "-o")


# ---- families ----------------------------------------------------------------------------------

def families_cases():
    import models
    import numpy as np
    made = {}
    for arch in ("llama3", "qwen3", "phi3"):
        d = os.path.join(work, "src_" + arch)
        t, c, tok = models.write(arch, 5, d, TOKENIZERS)
        made[arch] = (t, c, tok)
    run = lambda ck: ["run", "--checkpoint", ck, "--layer", "0", "--prompt", "The capital of France is", "--detail", "summary"]

    def st_case(name, arch, pattern, config=None, drop=None, reshape=None, fill=None):
        t, c, tok = made[arch]
        d = os.path.join(work, f"st{len(results)}")
        shutil.copytree(os.path.join(work, "src_" + arch), d)
        t = dict(t)
        if drop:
            del t[drop]
        if reshape:
            t[reshape[0]] = np.zeros(reshape[1], dtype=np.float32)
        if fill:
            w = t[fill[0]].copy()
            w.flat[0] = fill[1]
            t[fill[0]] = w
        from reference_model import write_safetensors
        write_safetensors(os.path.join(d, "model.safetensors"), t)
        if config is not None:
            cc = json.loads(json.dumps(c))
            config(cc)
            put(os.path.join(d, "config.json"), json.dumps(cc))
        case(f"{arch} safetensors: {name}", run(d), pattern)

    S = lambda **kw: (lambda c: c["rope_scaling"].update(kw))
    st_case("rope_scaling factor 0", "llama3", "factor", config=S(factor=0))
    st_case("rope_scaling factor -8", "llama3", "factor", config=S(factor=-8))
    st_case("rope_scaling factor 1e400 (inf)", "llama3", "factor", config=lambda c: None)  # replaced below
    results.pop()
    d = os.path.join(work, "st_inf")
    shutil.copytree(os.path.join(work, "src_llama3"), d)
    text = open(os.path.join(d, "config.json")).read().replace('"factor": 8.0', '"factor": 1e400')
    put(os.path.join(d, "config.json"), text)
    case("llama3 safetensors: rope_scaling factor 1e400", run(d), "factor")
    st_case("rope_scaling low = high freq factor", "llama3", "freq_factor", config=S(low_freq_factor=4.0))
    st_case("rope_scaling original_max 0", "llama3", "original_max_position_embeddings", config=S(original_max_position_embeddings=0))
    st_case("rope_scaling type yarn", "llama3", "rope_type|yarn", config=S(rope_type="yarn"))
    st_case("rope_scaling a string", "llama3", "rope_scaling", config=lambda c: c.update(rope_scaling="llama3"))
    st_case("rope_scaling linear factor missing", "llama3", "factor", config=lambda c: c.update(rope_scaling={"rope_type": "linear"}))
    st_case("rope_scaling linear factor string", "llama3", "factor",
            config=lambda c: c.update(rope_scaling={"type": "linear", "factor": "2"}))
    st_case("rope_theta 0", "llama3", "rope_theta", config=lambda c: c.update(rope_theta=0))
    st_case("q_norm missing", "qwen3", "q_norm", drop="model.layers.1.self_attn.q_norm.weight")
    st_case("k_norm wrong length", "qwen3", "k_norm", reshape=("model.layers.1.self_attn.k_norm.weight", (5,)))
    st_case("q_norm has NaN", "qwen3", "q_norm", fill=("model.layers.0.self_attn.q_norm.weight", float("nan")))
    st_case("head_dim 0", "qwen3", "head_dim", config=lambda c: c.update(head_dim=0))
    st_case("head_dim odd (RoPE needs pairs)", "qwen3", "head_dim", config=lambda c: c.update(head_dim=7))
    st_case("head_dim huge", "qwen3", "head_dim", config=lambda c: c.update(head_dim=2**40))
    st_case("qkv_proj missing", "phi3", "qkv_proj", drop="model.layers.0.self_attn.qkv_proj.weight")
    st_case("qkv_proj wrong rows", "phi3", "qkv_proj", reshape=("model.layers.0.self_attn.qkv_proj.weight", (31, 16)))
    st_case("gate_up_proj odd rows", "phi3", "gate_up_proj", reshape=("model.layers.2.mlp.gate_up_proj.weight", (23, 16)))
    # named as the file holds it: the fused tensor's gate half
    st_case("gate_up_proj has inf", "phi3", "gate_up_proj.weight's gate half", fill=("model.layers.0.mlp.gate_up_proj.weight", float("inf")))
    st_case("sliding_window 0", "phi3", "sliding_window", config=lambda c: c.update(sliding_window=0))
    st_case("sliding_window negative", "phi3", "sliding_window", config=lambda c: c.update(sliding_window=-4))
    st_case("num_key_value_heads 3 (does not divide 4)", "qwen3", "num_key_value_heads", config=lambda c: c.update(num_key_value_heads=3))

    from convert import f32 as gf32, string as gstring, u32 as gu32

    def gg_case(name, arch, pattern, meta_edit=None, tensor_edit=None, pre=None, args=None, status=2):
        t, c, tok = made[arch]
        pre = pre or ("gpt-2" if arch == "phi3" else "llama-bpe")
        path = os.path.join(work, f"g{len(results)}.gguf")
        captured = {}
        real = models.write_gguf_file

        def capture(p, meta, tensors):
            if meta_edit:
                meta = meta_edit(meta)
            if tensor_edit:
                tensor_edit(tensors)
            real(p, meta, tensors)
        models.write_gguf_file = capture
        try:
            models.write_gguf(arch, dict(t), c, tok, path, pre)
        finally:
            models.write_gguf_file = real
        case(f"{arch} GGUF: {name}", args(path) if args else run(path), pattern, status=status)

    def replace(key, new):
        def edit(meta):
            return [m for m in meta if key.encode() not in m[:8 + len(key)]] + [new]
        return edit

    def drop_key(key):
        return lambda meta: [m for m in meta if key.encode() not in m[:8 + len(key)]]

    gg_case("rope_freqs missing is fine? no: factors absent ok", "llama3", "", tensor_edit=lambda t: None)
    results.pop()  # the well-formed twin runs: not a hostile case
    gg_case("rope_freqs of the wrong length", "llama3", "rope_freqs",
            tensor_edit=lambda t: t.update({"rope_freqs.weight": np.ones(3, dtype=np.float32)}))
    gg_case("rope_freqs with a zero factor", "llama3", "rope_freqs",
            tensor_edit=lambda t: t.update({"rope_freqs.weight": np.array([1, 0, 2, 8], dtype=np.float32)}))
    gg_case("rope_freqs with NaN", "llama3", "rope_freqs",
            tensor_edit=lambda t: t.update({"rope_freqs.weight": np.array([1, np.nan, 2, 8], dtype=np.float32)}))
    gg_case("rope_freqs 2-D", "llama3", "rope_freqs",
            tensor_edit=lambda t: t.update({"rope_freqs.weight": np.ones((2, 2), dtype=np.float32)}))
    gg_case("rope.scaling.factor inf", "llama3", "rope.scaling.factor",
            meta_edit=lambda m: m + [gstring("llama.rope.scaling.type", "linear"), gf32("llama.rope.scaling.factor", float("inf"))])
    gg_case("rope.scaling.factor 0", "llama3", "rope.scaling.factor",
            meta_edit=lambda m: m + [gstring("llama.rope.scaling.type", "linear"), gf32("llama.rope.scaling.factor", 0.0)])
    gg_case("rope.scaling.type bogus", "llama3", "rope.scaling.type",
            meta_edit=lambda m: m + [gstring("llama.rope.scaling.type", "bogus"), gf32("llama.rope.scaling.factor", 2.0)])
    gg_case("rope.scaling.type a number", "llama3", "rope.scaling.type",
            meta_edit=lambda m: m + [gu32("llama.rope.scaling.type", 3)])
    gg_case("rope.freq_base NaN", "llama3", "freq_base", meta_edit=replace("llama.rope.freq_base", gf32("llama.rope.freq_base", float("nan"))))
    gg_case("key_length 0", "qwen3", "key_length", meta_edit=replace("qwen3.attention.key_length", gu32("qwen3.attention.key_length", 0)))
    gg_case("key_length 7", "qwen3", "key_length", meta_edit=replace("qwen3.attention.key_length", gu32("qwen3.attention.key_length", 7)))
    gg_case("key_length 2^31", "qwen3", "key_length",
            meta_edit=replace("qwen3.attention.key_length", gu32("qwen3.attention.key_length", 2**31)))
    gg_case("key_length a string", "qwen3", "key_length",
            meta_edit=replace("qwen3.attention.key_length", gstring("qwen3.attention.key_length", "8")))
    # a GGUF file's tensors named as it spells them, even one it lacks
    gg_case("attn_q_norm missing", "qwen3", "blk.1.attn_q_norm.weight", tensor_edit=lambda t: t.pop("blk.1.attn_q_norm.weight"))
    gg_case("attn_k_norm has inf", "qwen3", "attn_k_norm",
            tensor_edit=lambda t: t.update({"blk.0.attn_k_norm.weight": np.full(8, np.inf, dtype=np.float32)}))
    gg_case("sliding_window 0 (llama.cpp: no window; runs)", "phi3", "", status=0,
            meta_edit=replace("phi3.attention.sliding_window", gu32("phi3.attention.sliding_window", 0)))
    gg_case("sliding_window a float", "phi3", "sliding_window",
            meta_edit=replace("phi3.attention.sliding_window", gf32("phi3.attention.sliding_window", 4.5)))
    gg_case("attn_qkv wrong rows", "phi3", "attn_qkv",
            tensor_edit=lambda t: t.update({"blk.0.attn_qkv.weight": np.zeros((30, 16), dtype=np.float32)}))
    gg_case("ffn_up (fused) odd rows", "phi3", "blk.1.ffn_up.weight",
            tensor_edit=lambda t: t.update({"blk.1.ffn_up.weight": np.zeros((23, 16), dtype=np.float32)}))
    gg_case("duplicate key_length", "qwen3", "key_length", meta_edit=lambda m: m + [gu32("qwen3.attention.key_length", 8)])


# ---- GGUF pre-tokenizers and tokenizers read when needed ---------------------------------------------

def tokenizer_cases():
    import models
    t, c, tok = models.write("llama3", 5, os.path.join(work, "src"), TOKENIZERS)
    from convert import string as gstring, strings as gstrings, i32s as gi32s, kv as gkv, u32 as gu32

    def gg(name, pre="llama-bpe", meta_edit=None):
        path = os.path.join(work, f"{name}.gguf")
        real = models.write_gguf_file
        models.write_gguf_file = lambda p, meta, tensors: real(p, meta_edit(meta) if meta_edit else meta, tensors)
        try:
            models.write_gguf("llama3", dict(t), c, tok, path, pre)
        finally:
            models.write_gguf_file = real
        return path

    prompt = ["--prompt", "The capital of France is"]

    def drop(key):
        return lambda meta: [m for m in meta if key.encode() not in m[:8 + len(key)]]

    p = gg("pre_empty", pre="")
    case("pre '' (llama.cpp's default): run --prompt runs", ["run", "--checkpoint", p, "--layer", "0"] + prompt, "", status=0)
    for pre in ["bogus", "GPT-2", "llama-bpe\n", "qwen2 ", "x" * 5000]:
        p = gg(f"pre{len(results)}", pre=pre)
        case(f"pre {pre[:12]!r}: run --prompt", ["run", "--checkpoint", p, "--layer", "0"] + prompt, "tokenizer.ggml.pre")
    p = gg("pre_num", meta_edit=lambda m: drop("tokenizer.ggml.pre")(m) + [gu32("tokenizer.ggml.pre", 7)])
    case("pre a number: tokenize", ["tokenize", "--checkpoint", p, "The capital"], "tokenizer.ggml.pre")
    p = gg("pre_bad", pre="bogus")
    case("pre bogus: tokenize", ["tokenize", "--checkpoint", p, "The capital"], "tokenizer.ggml.pre")
    case("pre bogus: locate", ["locate", "--checkpoint", p, "--samples", "1"] + prompt + ["--subject", "France"], "tokenizer.ggml.pre")
    p = gg("no_tokens", meta_edit=drop("tokenizer.ggml.tokens"))
    case("tokens missing: run --prompt", ["run", "--checkpoint", p, "--layer", "0"] + prompt, "tokenizer.ggml.tokens|tokens")
    p = gg("short_types", meta_edit=lambda m: drop("tokenizer.ggml.token_type")(m) + [gi32s("tokenizer.ggml.token_type", [1, 1])])
    case("token_type shorter than tokens", ["run", "--checkpoint", p, "--layer", "0"] + prompt, "token_type")
    p = gg("bad_merge", meta_edit=lambda m: drop("tokenizer.ggml.merges")(m) + [gstrings("tokenizer.ggml.merges", ["nospace"])])
    case("merge without a space", ["run", "--checkpoint", p, "--layer", "0"] + prompt, "merges")
    p = gg("dup_tokens", meta_edit=lambda m: drop("tokenizer.ggml.tokens")(m) + [gstrings("tokenizer.ggml.tokens", ["a"] * c["vocab_size"])])
    case("every token the same string", ["run", "--checkpoint", p, "--layer", "0"] + prompt, "tokens")
    p = gg("latin1_tokens", meta_edit=lambda m: drop("tokenizer.ggml.tokens")(m)
           + [gkv("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, c["vocab_size"])
                        + b"".join(struct.pack("<Q", 2) + bytes([0xC3, 0x28 + (i % 50)]) for i in range(c["vocab_size"])))])
    case("tokens not UTF-8", ["run", "--checkpoint", p, "--layer", "0"] + prompt, "tokens|UTF-8")
    # A broken tokenizer is reported only by a command that tokenizes: these must run.
    st = os.path.join(work, "st_badtok")
    shutil.copytree(os.path.join(work, "src"), st)
    put(os.path.join(st, "tokenizer.json"), "{not json")
    case("broken tokenizer.json: run --prompt", ["run", "--checkpoint", st, "--layer", "0"] + prompt, "tokenizer.json")
    case("broken tokenizer.json: tokenize", ["tokenize", "--checkpoint", st, "The"], "tokenizer.json")
    case("broken tokenizer.json: run --embedding (no tokens needed) runs", ["run", "--checkpoint", st, "--layer", "0",
         "--embedding", "3", "--detail", "summary"], "", status=0)
    if results[-1][1].startswith("FAIL") and "stdout" in results[-1][1] and "exit" not in results[-1][1]:
        results[-1] = (results[-1][0], "ok", "(runs, as it should)")
    put(os.path.join(st, "tokenizer.json"), b"\xff\xfe{}")
    case("tokenizer.json not UTF-8: tokenize", ["tokenize", "--checkpoint", st, "The"], "tokenizer.json")
    os.remove(os.path.join(st, "tokenizer.json"))
    os.mkfifo(os.path.join(st, "tokenizer.json"))
    case("tokenizer.json a FIFO: tokenize", ["tokenize", "--checkpoint", st, "The"], "tokenizer.json")
    os.remove(os.path.join(st, "tokenizer.json"))
    os.symlink("tokenizer.json", os.path.join(st, "tokenizer.json"))
    case("tokenizer.json a symlink loop: tokenize", ["tokenize", "--checkpoint", st, "The"], "tokenizer.json")


# ---- -o --------------------------------------------------------------------------------------------

def output_cases():
    lesson = put("lesson.json", open(os.path.join(repo, "data", "lesson_hand.json")).read())
    for target, pattern in [("", "-o"), ("/proc/self/status", "-o|/proc"), ("/proc", "-o|/proc"), (".", "-o"), ("/", "-o"),
                            ("lesson.json", "-o"), ("./lesson.json", "-o"), ("sub/../lesson.json", "-o"), ("lesson.json/", "-o"),
                            ("/dev/null/x", "-o"), ("nodir/out.html", "-o|nodir")]:
        case(f"run -o {target!r}", ["run", "lesson.json", "--format", "html", "-o", target], pattern)
    os.symlink("selfloop", os.path.join(work, "selfloop"))
    case("run -o a symlink loop", ["run", "lesson.json", "-o", "selfloop"], "-o|selfloop")
    os.mkfifo(os.path.join(work, "out.fifo"))
    case("run -o a FIFO", ["run", "lesson.json", "-o", "out.fifo"], "-o|out.fifo")
    case("units -o the model", ["units", "--checkpoint", ATLAS, "--layer", "0", "-o", os.path.join(ATLAS, "model.safetensors")], "-o")
    case("units -o the corpus", ["units", "--checkpoint", ATLAS, "--layer", "0", "-o", os.path.join(ATLAS, "corpus.txt")], "-o")
    case("units -o the transcoder's weights", ["units", "--checkpoint", ATLAS, "--layer", "1", "--transcoder", TC,
         "-o", os.path.join(TC, "layer_1.safetensors")], "-o")


{"transcoder": transcoder_cases, "train": train_cases, "locate": locate_cases, "families": families_cases,
 "tokenizer": tokenizer_cases, "output": output_cases}[family]()
harness.finish()
