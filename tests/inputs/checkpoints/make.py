# Writes the tiny checkpoints the CLI tests trace (tests/cli_tests.cmake, "Real models:
# checkpoints"): one directory per architecture with its config.json, model.safetensors and, for
# GPT-2, a vocab.json; an input file; and a few broken ones.
# Run from anywhere with a python3 that has numpy: /usr/bin/python3 make.py
# The safetensors files are written here byte by byte (an 8-byte little-endian header length, the
# JSON header, the data), so the script needs numpy only. Seeded: running it again writes the
# same bytes.
import json
import os
import struct

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(20261130)


def rand(*shape):
    # float32 values in [-1, 1), the dtype checkpoints are saved in
    return rng.uniform(-1, 1, size=shape).astype("<f4")


def safetensors(tensors):
    header, data = {}, b""
    for name, array in tensors.items():
        raw = np.ascontiguousarray(array).tobytes()
        dtype = {"float32": "F32", "float16": "F16", "float64": "F64"}[str(array.dtype)]
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(text)) + text + data


def write(directory, name, content):
    path = os.path.join(here, directory, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb" if isinstance(content, bytes) else "w") as f:
        f.write(content)


def config(directory, values):
    write(directory, "config.json", json.dumps(values, indent=2) + "\n")


d_model, d_ff, layers, vocab = 4, 8, 2, 8

# GPT-2 (GPT2LMHeadModel's names): Conv1D weights stored in × out, LayerNorm ln_2, tied wte.
tokens = ["!", "hello", "Paris", "ĠParis", "Ġthe", "Ġcapital", "ĠLondon", "<|endoftext|>"]
gpt2 = {"transformer.wte.weight": rand(vocab, d_model)}
for i in range(layers):
    gpt2[f"transformer.h.{i}.ln_2.weight"] = 1 + rand(d_model) / 4
    gpt2[f"transformer.h.{i}.ln_2.bias"] = rand(d_model) / 4
    gpt2[f"transformer.h.{i}.mlp.c_fc.weight"] = rand(d_model, d_ff)
    gpt2[f"transformer.h.{i}.mlp.c_fc.bias"] = rand(d_ff) / 4
    gpt2[f"transformer.h.{i}.mlp.c_proj.weight"] = rand(d_ff, d_model)
    gpt2[f"transformer.h.{i}.mlp.c_proj.bias"] = rand(d_model) / 4
write("gpt2", "model.safetensors", safetensors(gpt2))
config("gpt2", {"model_type": "gpt2", "n_embd": d_model, "n_layer": layers, "n_inner": d_ff,
                "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new", "vocab_size": vocab})
write("gpt2", "vocab.json", json.dumps({t: i for i, t in enumerate(tokens)}, ensure_ascii=False) + "\n")
# The tokenizer of vocab.json is GPT-2's byte-level BPE, whose merges.txt may hold no merges.
write("gpt2", "merges.txt", "#version: 0.2\n")

# Llama (LlamaForCausalLM's names): nn.Linear weights stored out × in, RMSNorm, SwiGLU.
llama = {"model.embed_tokens.weight": rand(vocab, d_model), "lm_head.weight": rand(vocab, d_model)}
for i in range(layers):
    llama[f"model.layers.{i}.post_attention_layernorm.weight"] = 1 + rand(d_model) / 4
    llama[f"model.layers.{i}.mlp.gate_proj.weight"] = rand(d_ff, d_model)
    llama[f"model.layers.{i}.mlp.up_proj.weight"] = rand(d_ff, d_model)
    llama[f"model.layers.{i}.mlp.down_proj.weight"] = rand(d_model, d_ff)
write("llama", "model.safetensors", safetensors(llama))
config("llama", {"model_type": "llama", "hidden_size": d_model, "intermediate_size": d_ff,
                 "num_hidden_layers": layers, "rms_norm_eps": 1e-6, "hidden_act": "silu", "vocab_size": vocab})

# Mixtral (MixtralForCausalLM's names): a router over 4 experts, 2 per token.
experts = 4
mixtral = {"model.embed_tokens.weight": rand(vocab, d_model), "lm_head.weight": rand(vocab, d_model)}
for i in range(layers):
    mixtral[f"model.layers.{i}.post_attention_layernorm.weight"] = 1 + rand(d_model) / 4
    mixtral[f"model.layers.{i}.block_sparse_moe.gate.weight"] = 2 * rand(experts, d_model)
    for j in range(experts):
        mixtral[f"model.layers.{i}.block_sparse_moe.experts.{j}.w1.weight"] = rand(d_ff, d_model)
        mixtral[f"model.layers.{i}.block_sparse_moe.experts.{j}.w3.weight"] = rand(d_ff, d_model)
        mixtral[f"model.layers.{i}.block_sparse_moe.experts.{j}.w2.weight"] = rand(d_model, d_ff)
write("mixtral", "model.safetensors", safetensors(mixtral))
config("mixtral", {"model_type": "mixtral", "hidden_size": d_model, "intermediate_size": d_ff,
                   "num_hidden_layers": layers, "num_local_experts": experts, "num_experts_per_tok": 2,
                   "rms_norm_eps": 1e-5, "hidden_act": "silu", "vocab_size": vocab})

# BERT (BertForMaskedLM's names): nn.Linear weights, post-norm output.LayerNorm, exact GELU.
bert = {"bert.embeddings.word_embeddings.weight": rand(vocab, d_model)}
for i in range(layers):
    bert[f"bert.encoder.layer.{i}.intermediate.dense.weight"] = rand(d_ff, d_model)
    bert[f"bert.encoder.layer.{i}.intermediate.dense.bias"] = rand(d_ff) / 4
    bert[f"bert.encoder.layer.{i}.output.dense.weight"] = rand(d_model, d_ff)
    bert[f"bert.encoder.layer.{i}.output.dense.bias"] = rand(d_model) / 4
    bert[f"bert.encoder.layer.{i}.output.LayerNorm.weight"] = 1 + rand(d_model) / 4
    bert[f"bert.encoder.layer.{i}.output.LayerNorm.bias"] = rand(d_model) / 4
write("bert", "model.safetensors", safetensors(bert))
config("bert", {"model_type": "bert", "hidden_size": d_model, "intermediate_size": d_ff,
                "num_hidden_layers": layers, "layer_norm_eps": 1e-12, "hidden_act": "gelu", "vocab_size": vocab})

# Inputs: two tokens of the right width, and one of the wrong width.
np.save(os.path.join(here, "x.npy"), rand(2, d_model).astype("<f8"))
np.save(os.path.join(here, "x_width3.npy"), rand(2, 3).astype("<f8"))

# Broken: a header length that runs past the end of the file (the file cut short).
whole = safetensors({"model.layers.0.mlp.gate_proj.weight": rand(d_ff, d_model)})
write("truncated", "model.safetensors", whole[:40])
config("truncated", {"model_type": "llama"})

# Zero sizes read off the tensors, whatever config.json says (or without one): a GPT-2 layer of
# d_ff 0 with no config.json (give --arch gpt2), a Llama whose config.json agrees with its d_ff 0,
# a Mixtral whose experts have d_ff 0, and a GPT-2 of d_model 0. Each must be refused when the
# checkpoint opens, never traced.
zero = {"wte.weight": rand(vocab, d_model), "h.0.ln_2.weight": 1 + rand(d_model) / 4, "h.0.ln_2.bias": rand(d_model) / 4,
        "h.0.mlp.c_fc.weight": rand(d_model, 0), "h.0.mlp.c_fc.bias": rand(0),
        "h.0.mlp.c_proj.weight": rand(0, d_model), "h.0.mlp.c_proj.bias": rand(d_model) / 4}
write("zero_gpt2", "model.safetensors", safetensors(zero))
zero = {"model.embed_tokens.weight": rand(vocab, d_model), "model.layers.0.post_attention_layernorm.weight": 1 + rand(d_model),
        "model.layers.0.mlp.gate_proj.weight": rand(0, d_model), "model.layers.0.mlp.up_proj.weight": rand(0, d_model),
        "model.layers.0.mlp.down_proj.weight": rand(d_model, 0)}
write("zero_llama", "model.safetensors", safetensors(zero))
config("zero_llama", {"model_type": "llama", "hidden_size": d_model, "intermediate_size": 0, "num_hidden_layers": 1})
zero = {"model.embed_tokens.weight": rand(vocab, d_model), "model.layers.0.post_attention_layernorm.weight": 1 + rand(d_model),
        "model.layers.0.block_sparse_moe.gate.weight": rand(2, d_model)}
for j in range(2):
    zero[f"model.layers.0.block_sparse_moe.experts.{j}.w1.weight"] = rand(0, d_model)
    zero[f"model.layers.0.block_sparse_moe.experts.{j}.w3.weight"] = rand(0, d_model)
    zero[f"model.layers.0.block_sparse_moe.experts.{j}.w2.weight"] = rand(d_model, 0)
write("zero_mixtral", "model.safetensors", safetensors(zero))
config("zero_mixtral", {"model_type": "mixtral", "num_local_experts": 2, "num_experts_per_tok": 1})
zero = {"wte.weight": rand(vocab, 0), "h.0.ln_2.weight": rand(0), "h.0.ln_2.bias": rand(0),
        "h.0.mlp.c_fc.weight": rand(0, d_ff), "h.0.mlp.c_fc.bias": rand(d_ff),
        "h.0.mlp.c_proj.weight": rand(d_ff, 0), "h.0.mlp.c_proj.bias": rand(0)}
write("zero_width", "model.safetensors", safetensors(zero))
config("zero_width", {"model_type": "gpt2"})
# An example file naming the d_ff 0 layer (quiz, run and check read it through the loader).
write("zero_llama", "example.json", json.dumps({"title": "A layer of d_ff 0", "checkpoint": ".", "layer": 0,
                                                "input": [[1.0, 2.0, 3.0, 4.0]]}, indent=1) + "\n")

# A tokenizer with spare entries: GPT-2's 8-row layer beside a vocab.json that also names ids the
# embedding lacks (" Rome" is 16,777,216). The checkpoint opens; only a word of those is refused.
write("spare", "model.safetensors", safetensors(gpt2))
config("spare", {"model_type": "gpt2", "n_embd": d_model, "n_layer": layers, "n_inner": d_ff, "vocab_size": vocab})
write("spare", "vocab.json", json.dumps({**{t: i for i, t in enumerate(tokens)}, "ĠRome": 16777216, "ĠBerlin": 9},
                                        ensure_ascii=False) + "\n")
write("spare", "merges.txt", "#version: 0.2\n")

# A whole Mixtral with a tokenizer (ffn-trace edit --expert and grad --prompt on an MoE layer):
# attention with RoPE and 2 query heads sharing 1 key/value head, 4 experts, 2 per token; one
# token a character of "abcdefg" and the space. Its own generator, so the files above stay as
# they were.
moe_rng = np.random.default_rng(20261202)


def moe_rand(*shape):
    return moe_rng.uniform(-1, 1, size=shape).astype("<f4")


md, mf, heads, head_dim = 8, 8, 2, 4
letters = ["a", "b", "c", "d", "e", "f", "g", "Ġ"]
whole = {"model.embed_tokens.weight": moe_rand(vocab, md), "lm_head.weight": moe_rand(vocab, md),
         "model.norm.weight": 1 + moe_rand(md) / 4}
for i in range(layers):
    at = f"model.layers.{i}."
    whole[at + "input_layernorm.weight"] = 1 + moe_rand(md) / 4
    whole[at + "self_attn.q_proj.weight"] = moe_rand(heads * head_dim, md)
    whole[at + "self_attn.k_proj.weight"] = moe_rand(head_dim, md)
    whole[at + "self_attn.v_proj.weight"] = moe_rand(head_dim, md)
    whole[at + "self_attn.o_proj.weight"] = moe_rand(md, heads * head_dim)
    whole[at + "post_attention_layernorm.weight"] = 1 + moe_rand(md) / 4
    whole[at + "block_sparse_moe.gate.weight"] = 2 * moe_rand(experts, md)
    for j in range(experts):
        whole[at + f"block_sparse_moe.experts.{j}.w1.weight"] = moe_rand(mf, md)
        whole[at + f"block_sparse_moe.experts.{j}.w3.weight"] = moe_rand(mf, md)
        whole[at + f"block_sparse_moe.experts.{j}.w2.weight"] = moe_rand(md, mf)
write("mixtral_whole", "model.safetensors", safetensors(whole))
config("mixtral_whole", {"model_type": "mixtral", "hidden_size": md, "intermediate_size": mf, "num_hidden_layers": layers,
                         "num_attention_heads": heads, "num_key_value_heads": 1, "max_position_embeddings": 16,
                         "rope_theta": 100.0, "num_local_experts": experts, "num_experts_per_tok": 2, "rms_norm_eps": 1e-5,
                         "hidden_act": "silu", "vocab_size": vocab, "tie_word_embeddings": False})
write("mixtral_whole", "vocab.json", json.dumps({t: i for i, t in enumerate(letters)}, ensure_ascii=False) + "\n")
write("mixtral_whole", "merges.txt", "#version: 0.2\n")
write("mixtral_whole", "corpus.txt", "abcdefg\nbadcfe\ngfedcba\ncab fed\nfaded\nbeef\ndecade\nace\nbead\ncafe\nbag\n"
                                     "dab\nface\ngab\nfed a cab\n")
