#!/usr/bin/python3
"""Compares ffn-trace's trace of a GGUF model with llama.cpp's forward pass on the same prompt:
every FFN node of every layer, the logits and the token ids. Called by scripts/compare-llama-cpp.sh.

  compare_llama_cpp.py FFN_TRACE CHECKPOINT DUMP PROMPT [LABEL [EVAL_CALLBACK_OUTPUT]]

DUMP is what scripts/llama_cpp_dump.cpp wrote for the same prompt (on CHECKPOINT, or on a twin of
it holding the same numbers). One line per layer and node kind: the largest difference over the
node's numbers divided by its largest magnitude, max|ffn-trace - llama.cpp| / max|llama.cpp|.
With llama-eval-callback's output on the same file and prompt, its printed numbers (the first three
of a node's first row, to four decimals) are checked against the dump's.
"""
import json
import re
import struct
import subprocess
import sys

import numpy as np

# ffn-trace's steps (its --format json) and llama.cpp's names for the same node ("-<layer>" after).
NODES = [("input", "ffn_inp"), ("norm", "ffn_norm"), ("split", "ffn_silu"), ("gate", "ffn_gate"), ("up", "ffn_up"),
         ("activate", "ffn_silu"), ("multiply", "ffn_gate_par"), ("contract", "ffn_out"), ("out_norm", "ffn_post_norm"), ("residual", "l_out")]


def read_dump(path):
    """The dump's tensors in the order written, as (name, rows): several nodes may share a name."""
    nodes, raw = [], open(path, "rb").read()
    at = 0
    while at < len(raw):
        (n,) = struct.unpack_from("<I", raw, at)
        name = raw[at + 4:at + 4 + n].decode()
        ne = struct.unpack_from("<4q", raw, at + 4 + n)
        at += 4 + n + 32
        count = int(np.prod(ne))
        data = np.frombuffer(raw, dtype="<f4", count=count, offset=at).reshape(tuple(reversed(ne)))
        at += 4 * count
        nodes.append((name, data.reshape(-1, ne[0]) if ne[0] > 0 else data))  # (tokens, width)
    return nodes


def llama_node(nodes, step, name, layer, d_ff):
    """(label, llama.cpp's rows) for one of ffn-trace's steps, or None when its graph does not name it."""
    if step == "input" and f"ffn_inp-{layer}" not in nodes:
        if f"sa_out-{layer}" in nodes:  # Gemma 2's name for it
            return "sa_out", nodes[f"sa_out-{layer}"]
        # Phi-3's graph leaves the FFN's input unnamed: it is what the block's output adds to the FFN's
        return "l_out - ffn_out", nodes[f"l_out-{layer}"] - nodes[f"ffn_out-{layer}"]
    if step == "out_norm" and f"sa_out-{layer}" in nodes:  # Gemma 2's names it without its layer
        return "l_out - sa_out", nodes[f"l_out-{layer}"] - nodes[f"sa_out-{layer}"]
    if step == "activate" and f"ffn_gelu-{layer}" in nodes:
        return "ffn_gelu", nodes[f"ffn_gelu-{layer}"]
    for glu in ("ffn_swiglu", "ffn_geglu"):  # a later llama.cpp's fused activation and product
        if step == "multiply" and f"{glu}-{layer}" in nodes:
            return glu, nodes[f"{glu}-{layer}"]
    fused = nodes.get(f"ffn_silu-{layer}")
    if fused is not None and fused.shape[-1] == 2 * d_ff:
        # A fused gate/up (Phi-3): llama.cpp's name for the [gate | up] product ends as ffn_silu, the
        # activation is left unnamed, the product of the halves is ffn_mul.
        fused_nodes = {"split": ("ffn_silu", fused), "gate": ("ffn_silu[:d_ff]", fused[:, :d_ff]), "up": ("ffn_silu[d_ff:]", fused[:, d_ff:]),
                       "activate": None, "multiply": ("ffn_mul", nodes.get(f"ffn_mul-{layer}"))}
        if step in fused_nodes:
            return fused_nodes[step]
    return (name, nodes[f"{name}-{layer}"]) if f"{name}-{layer}" in nodes else None


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def rel(ours, theirs):
    ours, theirs = np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    if ours.shape != theirs.shape:
        return f"shape {ours.shape} vs {theirs.shape}"
    return float(np.max(np.abs(ours - theirs)) / max(np.max(np.abs(theirs)), 1e-30))


def trace(ffn_trace, checkpoint, prompt, layer, top):
    """ffn-trace's run of one layer; its prediction lists the `top` highest logits at the last token."""
    out = subprocess.run([ffn_trace, "run", "--checkpoint", checkpoint, "--prompt", prompt, "--layer", str(layer),
                          "--format", "json", "--detail", "values", "--top", str(top)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def check_eval_callback(path, dumped):
    """How many of llama-eval-callback's printed nodes the dump holds, and those whose numbers differ."""
    seen, differ, name, nodes = 0, [], None, {}
    for node, rows in dumped:
        nodes.setdefault(node, []).append(rows)
    for line in open(path, errors="replace"):
        m = re.match(r"ggml_debug:\s+(\S+) = \(f32\)", line)
        if m:
            name = m.group(1)
            continue
        m = re.match(r"\s*\[\s*(-?[\d.]+(?:,\s*-?[\d.]+)*)", line)
        if not (m and name in nodes):
            continue
        printed = [float(x) for x in m.group(1).split(",")[:3]]
        seen += 1
        if not any(np.allclose(row[:len(printed)], printed, rtol=0, atol=6e-5 + 1e-6 * np.max(np.abs(printed)))
                   for rows in nodes[name] for row in (rows[0], rows[-1])):
            differ.append(name)
        name = None
    return seen, differ


def main():
    ffn_trace, checkpoint, dump, prompt = sys.argv[1:5]
    label = sys.argv[5] if len(sys.argv) > 5 else checkpoint
    dumped = read_dump(dump)
    nodes = dict(dumped)  # a name's last node: the FFN's "norm-L" comes after the attention's
    layers = sorted({int(k.rsplit("-", 1)[1]) for k in nodes if k.startswith("l_out-")})
    worst = {}
    rows = []
    for layer in layers:
        # --top lists as many tokens for every unit as well: 1000 once for the logits, 1 after
        t = trace(ffn_trace, checkpoint, prompt, layer, 1000 if layer == layers[0] else 1)
        if layer == layers[0]:
            ids = [int(x) for x in nodes["tokens"].ravel()]
            same = ids == t["prompt"]["token_ids"]
            rows.append(("tokens", "", "same" if same else f"DIFFER: llama.cpp {ids} ffn-trace {t['prompt']['token_ids']}"))
            # The logits at the last token: the (up to) 1000 ffn-trace ranks highest, by id in llama.cpp's
            top = t["prediction"]["top"]
            logits = nodes["result_output"][-1]
            d = rel([x["logit"] for x in top], [logits[x["id"]] for x in top])
            d = d if isinstance(d, str) else d * max(abs(x["logit"]) for x in top) / np.max(np.abs(logits))
            argmax = "same argmax" if int(np.argmax(logits)) == top[0]["id"] else "ARGMAX DIFFERS"
            rows.append(("logits", "", d, f"({len(top)} of {logits.size}, {argmax})"))
        steps = {s["name"]: s["value"] for s in t["steps"]}
        steps["input"] = t["input"]
        for step, name in NODES:
            if step not in steps:
                continue
            theirs = llama_node(nodes, step, name, layer, t["d_ff"])
            if theirs is not None and theirs[1] is not None:
                rows.append((theirs[0], layer, rel(steps[step], theirs[1])))
        if f"ffn_geglu-{layer}" in nodes and "multiply" in steps:
            # the fused GELU·up reads the same f16 table; the product computed in float64 from
            # llama.cpp's own gate and up shows ffn-trace's step
            g, u = (nodes[f"ffn_{n}-{layer}"].astype(np.float64) for n in ("gate", "up"))
            rows.append(("gelu_tanh(ffn_gate)·ffn_up in float64", layer, rel(steps["multiply"], gelu_tanh(g) * u)))
        if f"ffn_gelu-{layer}" in nodes and "activate" in steps:
            # ggml's CPU GELU rounds its input to f16 and reads a table (GGML_GELU_FP16), about 5e-4
            # off; the tanh form computed in float64 from llama.cpp's own gate shows ffn-trace's step
            rows.append(("gelu_tanh(ffn_gate) in float64", layer,
                         rel(steps["activate"], gelu_tanh(nodes[f"ffn_gate-{layer}"].astype(np.float64)))))
    for row in rows:
        name, layer, d = row[:3]
        text = d if isinstance(d, str) else f"{d:.2e}"
        print(f"{label}\t{name}\t{layer}\t{text}\t{' '.join(row[3:])}".rstrip())
        if not isinstance(d, str):
            worst[name] = max(worst.get(name, 0.0), d)
    print(f"{label}\tmax over layers: " + ", ".join(f"{k} {v:.1e}" for k, v in worst.items()))
    if len(sys.argv) > 6:
        seen, differ = check_eval_callback(sys.argv[6], dumped)
        print(f"{label}\tllama-eval-callback printed {seen} nodes the dump holds; "
              + (f"{len(differ)} differ: {' '.join(differ[:8])}" if differ else "the dump has the numbers it printed"))


if __name__ == "__main__":
    main()
