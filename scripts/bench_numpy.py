#!/usr/bin/env python3
"""The benchmark's NumPy float64 route: one checkpoint FFN layer, the same arithmetic as ffn-trace.

    bench_numpy.py CHECKPOINT_DIR --layer N --input X.npy [--out residual.npy] [--top 10]
                   [--hold-all] [--vocab-json FILE]

Reads config.json and the safetensors header (a single model.safetensors or a sharded
model.safetensors.index.json), np.memmaps each tensor it needs and converts it alone to float64
(BF16: uint16 → uint32 << 16 → float32 → float64), then
  gpt2     LayerNorm → x·W1 + b1 → GELU (tanh form) → ·W2 + b2 → + x, and the vocabulary view:
           the top units by activation per token and, for each, the tokens its W2 row promotes most
           and least (v · wteᵀ), and the tokens each token's whole FFN update promotes;
  llama    RMSNorm → SiLU(x·Wgᵀ) ⊙ (x·Wuᵀ) → ·Wdᵀ → + x;
  mixtral  RMSNorm → router softmax → top-k, renormalised → only the chosen experts converted,
           each a SwiGLU as above, weighted and summed → + x.
By default each weight matrix is converted just before its product and freed right after (the
memory-light route); --hold-all converts all the needed matrices first and holds them.
Prints one line of JSON (wall seconds, BLAS, a summary); --out writes the residual (.npy).
"""

import argparse
import ctypes
import json
import os
import struct
import sys
import time

T0 = time.perf_counter()

import numpy as np  # noqa: E402  (imported after T0 so the wall time includes it)

NP_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2"}
ROWS_AT_ONCE = 1 << 20  # elements converted at a time, so no full-size temporary is made


class Checkpoint:
    def __init__(self, path):
        self.dir = path if os.path.isdir(path) else os.path.dirname(path)
        self.where = {}  # name → (file, data start, entry)
        index = os.path.join(self.dir, "model.safetensors.index.json")
        if os.path.isdir(path) and os.path.exists(index):
            with open(index) as f:
                files = sorted(set(json.load(f)["weight_map"].values()))
        else:
            files = [os.path.basename(path) if os.path.isfile(path) else "model.safetensors"]
        for name in files:
            p = os.path.join(self.dir, name)
            with open(p, "rb") as f:
                (n,) = struct.unpack("<Q", f.read(8))
                header = json.loads(f.read(n))
            header.pop("__metadata__", None)
            for k, v in header.items():
                self.where[k] = (p, 8 + n, v)
        with open(os.path.join(self.dir, "config.json")) as f:
            self.config = json.load(f)

    def has(self, name):
        return self.find(name, required=False) is not None

    def find(self, name, required=True):
        for prefix in ("", "transformer.", "model.", "bert."):
            if prefix + name in self.where:
                return prefix + name
        if name.startswith("model.") and name[6:] in self.where:
            return name[6:]
        if required:
            sys.exit(f"error: no tensor {name}")
        return None

    def f64(self, name):
        """The tensor as float64, converted chunk by chunk from a memmap of its bytes alone."""
        path, start, e = self.where[self.find(name)]
        shape = tuple(e["shape"])
        a, b = e["data_offsets"]
        raw = np.memmap(path, dtype=NP_DTYPES[e["dtype"]], mode="r", offset=start + a, shape=shape)
        flat_in = raw.reshape(-1)
        out = np.empty(shape, dtype=np.float64)
        flat_out = out.reshape(-1)
        for i in range(0, flat_in.size, ROWS_AT_ONCE):
            chunk = flat_in[i : i + ROWS_AT_ONCE]
            if e["dtype"] == "BF16":
                flat_out[i : i + ROWS_AT_ONCE] = (chunk.astype(np.uint32) << 16).view(np.float32)
            else:
                flat_out[i : i + ROWS_AT_ONCE] = chunk
        del raw, flat_in  # unmaps the tensor's pages
        return out


def gelu_tanh(h):
    return 0.5 * h * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (h + 0.044715 * h * h * h)))


def silu(g):
    return g / (1.0 + np.exp(-g))


def layer_norm(x, w, b, eps):
    mu = x.mean(axis=1, keepdims=True)
    c = x - mu
    var = (c * c).mean(axis=1, keepdims=True)
    return c / np.sqrt(var + eps) * w + b


def rms_norm(x, w, eps):
    return x / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps) * w


def sort_part(scores, part, descending):
    """part (indices into scores' last axis) ordered by score, ties by the lower index."""
    vals = np.take_along_axis(scores, part, -1)
    order = np.lexsort((part, -vals if descending else vals), axis=-1)
    return np.take_along_axis(part, order, -1)


def largest(scores, k):
    """Indices of the k largest along the last axis, largest first (ties: the lower index first)."""
    n = scores.shape[-1]
    k = min(k, n)
    return sort_part(scores, np.argpartition(scores, n - k, axis=-1)[..., n - k :], True)


def top_and_bottom(scores, k):
    """The k largest (descending) and the k smallest (ascending) along the last axis: one
    partition with two pivots finds both ends."""
    n = scores.shape[-1]
    k = min(k, n)
    if 2 * k > n:
        return largest(scores, k), sort_part(scores, np.argpartition(scores, k - 1, axis=-1)[..., :k], False)
    part = np.argpartition(scores, [k - 1, n - k], axis=-1)
    return sort_part(scores, part[..., n - k :], True), sort_part(scores, part[..., :k], False)


def swiglu(ck, p, xn, hold):
    """down(silu(gate(xn)) ⊙ up(xn)); p names the three weights (gate, up, down)."""
    if hold:
        wg, wu, wd = ck.f64(p[0]), ck.f64(p[1]), ck.f64(p[2])
        return (silu(xn @ wg.T) * (xn @ wu.T)) @ wd.T
    w = ck.f64(p[0])
    g = xn @ w.T
    del w
    w = ck.f64(p[1])
    a = silu(g) * (xn @ w.T)
    del w, g
    w = ck.f64(p[2])
    return a @ w.T


def run_gpt2(ck, i, x, args, summary):
    cfg = ck.config
    eps = cfg.get("layer_norm_epsilon", 1e-5)
    p = f"h.{i}."
    xn = layer_norm(x, ck.f64(p + "ln_2.weight"), ck.f64(p + "ln_2.bias"), eps)
    if args.hold_all:
        w1, b1, w2, b2 = (ck.f64(p + n) for n in ("mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"))
        act = gelu_tanh(xn @ w1 + b1)
    else:
        w1 = ck.f64(p + "mlp.c_fc.weight")
        act = gelu_tanh(xn @ w1 + ck.f64(p + "mlp.c_fc.bias"))
        del w1
        w2, b2 = ck.f64(p + "mlp.c_proj.weight"), ck.f64(p + "mlp.c_proj.bias")
    update = act @ w2 + b2
    residual = x + update
    if args.vocab and ck.has("wte.weight"):
        k = args.top
        top_units = largest(act, k)  # (tokens, k)
        units = np.unique(top_units)
        wte = ck.f64("wte.weight")  # (vocab, d_model): the tied unembedding
        promoted, suppressed = {}, {}
        for s in range(0, units.size, 128):  # 128 units' logits at a time (128 × vocab doubles)
            u = units[s : s + 128]
            logits = w2[u] @ wte.T
            hi, lo = top_and_bottom(logits, k)
            for r, unit in enumerate(u):
                promoted[int(unit)] = hi[r].tolist()
                suppressed[int(unit)] = lo[r].tolist()
        upd_hi, upd_lo = top_and_bottom(update @ wte.T, k)
        del wte
        vocab = None
        vocab_path = args.vocab_json or os.path.join(ck.dir, "vocab.json")
        if args.print_tokens and os.path.exists(vocab_path):
            with open(vocab_path, encoding="utf-8") as f:
                vocab = {v: t for t, v in json.load(f).items()}
        name = (lambda j: vocab.get(j, j)) if vocab else (lambda j: j)
        u0 = int(top_units[0, 0])
        summary["vocab"] = {
            "distinct_top_units": int(units.size),
            "token0_top_units": top_units[0].tolist(),
            "token0_unit0_promotes": [name(j) for j in promoted[u0]],
            "token0_unit0_suppresses": [name(j) for j in suppressed[u0]],
            "token0_update_promotes": [name(int(j)) for j in upd_hi[0]],
            "token0_update_suppresses": [name(int(j)) for j in upd_lo[0]],
        }
        if args.vocab_out:
            with open(args.vocab_out, "w") as f:
                json.dump({"top_units": top_units.tolist(), "promotes": promoted, "suppresses": suppressed,
                           "update_promotes": upd_hi.tolist(), "update_suppresses": upd_lo.tolist()}, f)
    return residual


def run_llama(ck, i, x, args, summary):
    eps = ck.config.get("rms_norm_eps", 1e-6)
    p = f"model.layers.{i}."
    xn = rms_norm(x, ck.f64(p + "post_attention_layernorm.weight"), eps)
    names = [p + f"mlp.{n}_proj.weight" for n in ("gate", "up", "down")]
    return x + swiglu(ck, names, xn, args.hold_all)


def run_mixtral(ck, i, x, args, summary):
    cfg = ck.config
    eps = cfg.get("rms_norm_eps", 1e-5)
    top_k = cfg.get("num_experts_per_tok", 2)
    p = f"model.layers.{i}."
    xn = rms_norm(x, ck.f64(p + "post_attention_layernorm.weight"), eps)
    logits = xn @ ck.f64(p + "block_sparse_moe.gate.weight").T  # (tokens, n_experts)
    z = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs = z / z.sum(axis=1, keepdims=True)
    chosen = np.argsort(-probs, axis=1, kind="stable")[:, :top_k]  # ties: the lower index first
    w = np.take_along_axis(probs, chosen, 1)
    w = w / w.sum(axis=1, keepdims=True)
    out = np.zeros_like(x)
    experts = sorted(set(chosen.ravel().tolist()))
    if args.hold_all:  # every chosen expert converted before any is used
        held = {e: [ck.f64(p + f"block_sparse_moe.experts.{e}.{n}.weight") for n in ("w1", "w3", "w2")] for e in experts}
    for e in experts:
        rows, slot = np.nonzero(chosen == e)
        names = [p + f"block_sparse_moe.experts.{e}.{n}.weight" for n in ("w1", "w3", "w2")]
        if args.hold_all:
            w1, w3, w2 = held[e]
            y = (silu(xn[rows] @ w1.T) * (xn[rows] @ w3.T)) @ w2.T
        else:
            y = swiglu(ck, names, xn[rows], False)
        out[rows] += w[rows, slot][:, None] * y
    summary["routing"] = [{"token": t, "experts": chosen[t].tolist(), "weights": w[t].tolist()} for t in range(x.shape[0])]
    summary["experts_converted"] = experts
    return x + out


def blas_info():
    """Which BLAS numpy runs on, asked of the loaded library itself."""
    libs = []
    with open("/proc/self/maps") as f:
        for line in f:
            p = line.split()[-1]
            if "blas" in p and p not in libs:
                libs.append(p)
    libs.sort(key=lambda p: "libblas" not in p)  # numpy's libblas.so.3 first
    for p in libs:
        try:
            lib = ctypes.CDLL(p)
            core = lib.openblas_get_corename
            core.restype = ctypes.c_char_p
            return {"library": p, "openblas_core": core().decode(),
                    "threads": lib.openblas_get_num_threads()}
        except (OSError, AttributeError):
            continue
    return {"library": libs[0] if libs else None, "openblas_core": None}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--layer", type=int, default=0)
    ap.add_argument("--input", required=True)
    ap.add_argument("--out", help="write the residual here (.npy, float64)")
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--hold-all", action="store_true", help="convert every needed matrix first and hold it")
    ap.add_argument("--no-vocab", dest="vocab", action="store_false", help="skip gpt2's vocabulary view")
    ap.add_argument("--vocab-json", help="vocabulary ({token: id}); default: the checkpoint's vocab.json")
    ap.add_argument("--vocab-out", help="write the vocabulary view here (JSON, token ids)")
    ap.add_argument("--print-tokens", action="store_true", help="name tokens in the summary (reads vocab.json)")
    args = ap.parse_args()

    ck = Checkpoint(args.checkpoint)
    x = np.load(args.input)
    if x.ndim == 1:
        x = x[None, :]
    x = np.ascontiguousarray(x.reshape(-1, x.shape[-1]), dtype=np.float64)
    kind = ck.config.get("model_type")
    run = {"gpt2": run_gpt2, "llama": run_llama, "mistral": run_llama, "qwen2": run_llama, "mixtral": run_mixtral}.get(kind)
    if run is None:
        sys.exit(f"error: model_type {kind!r} is not one this route knows")
    summary = {}
    residual = run(ck, args.layer, x, args, summary)
    wall = time.perf_counter() - T0
    if args.out:
        np.save(args.out, residual)
    line = {"model_type": kind, "layer": args.layer, "tokens": int(x.shape[0]), "d_model": int(x.shape[1]),
            "wall_seconds": round(wall, 4), "hold_all": args.hold_all, "blas": blas_info(),
            "residual_sum": float(residual.sum()), "residual_absmax": float(np.abs(residual).max()), **summary}
    print(json.dumps(line, ensure_ascii=False))


if __name__ == "__main__":
    main()
