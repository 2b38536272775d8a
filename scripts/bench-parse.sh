#!/usr/bin/env bash
# Times reading example files whose "expect" list holds 50k, 100k and 400k claims (the array
# of objects that once cost time growing with the square of its length), then the checkpoint
# readers at 12k and 120k entries, tokenizer.json at 25k and 250k, an example's input of 800k and
# 8M one-number tokens, and the tokenizer's encode over 100 KB and 1 MB (10× the entries should
# cost about 10×). Linear parsing shows
# as seconds growing like the objects (about 2× from 50k to 100k, 4× from 100k to 400k).
# A benchmark for people, not a test: nothing here fails on a slow machine.
#
#   scripts/bench-parse.sh [COUNTS...]     (default: 50000 100000 400000)
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --build --preset default >/dev/null
counts=("$@")
[ ${#counts[@]} -gt 0 ] || counts=(50000 100000 400000)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# A 2 → 3 → 2 ReLU layer that copies its input [1, 2], so the residual is [1, 2] + [1, 2] = [2, 4];
# every claim states that residual, so all hold and check prints one line.
make_file() {  # count path
    awk -v n="$1" 'BEGIN {
        printf "{\"activation\": \"relu\", \"layout\": \"in_out\", \"input\": [1, 2],\n"
        printf " \"weights\": {\"W1\": [[1, 0, 0], [0, 1, 0]], \"W2\": [[1, 0], [0, 1], [0, 0]]},\n"
        printf " \"expect\": [\n"
        for (i = 0; i < n; ++i)
            printf "  {\"step\": \"residual\", \"value\": [2, 4], \"note\": \"claim %d\"}%s\n", i, i + 1 < n ? "," : ""
        printf "]}\n"
    }' >"$2"
}

printf '%10s %12s %10s\n' objects bytes seconds
for n in "${counts[@]}"; do
    file=$dir/claims_$n.json
    make_file "$n" "$file"
    start=$(date +%s.%N)
    build/ffn-trace check "$file" --max-file-size 1000000000 >/dev/null
    end=$(date +%s.%N)
    printf '%10d %12d %10.2f\n' "$n" "$(stat -c %s "$file")" "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')"
done

# The checkpoint readers: a safetensors header of n tensors, a __metadata__ block of n keys, an
# index of n weight_map entries, a config.json of n id2label entries and a vocab.json of n tokens,
# each beside the tiny GPT-2 checkpoint of the tests. The command fails or succeeds after reading; what is timed is the reading, which must grow like n.
make_checkpoint() {  # kind count folder
    python3 - "$@" <<'PY'
import json, os, shutil, struct, sys
kind, n, folder = sys.argv[1], int(sys.argv[2]), sys.argv[3]
shutil.copytree("tests/inputs/checkpoints/gpt2", folder)
if kind == "header":
    with open(os.path.join(folder, "model.safetensors"), "rb") as f:
        length = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(length))
        data = f.read()
    for i in range(n):
        header[f"extra.{i}"] = {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}
    text = json.dumps(header).encode()
    with open(os.path.join(folder, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)
elif kind == "index":
    # The shard holds the n extra tensors too, so that every entry of the index is looked up in it.
    shard = os.path.join(folder, "model-00001-of-00001.safetensors")
    with open(os.path.join(folder, "model.safetensors"), "rb") as f:
        length = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(length))
        data = f.read()
    os.remove(os.path.join(folder, "model.safetensors"))
    for i in range(n):
        header[f"extra.{i}"] = {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}
    text = json.dumps(header).encode()
    with open(shard, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)
    weight_map = {name: "model-00001-of-00001.safetensors" for name in header if name != "__metadata__"}
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)
elif kind == "metadata":
    with open(os.path.join(folder, "model.safetensors"), "rb") as f:
        length = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(length))
        data = f.read()
    header["__metadata__"] = {f"key.{i}": f"value {i}" for i in range(n)}
    text = json.dumps(header).encode()
    with open(os.path.join(folder, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)
elif kind == "vocab_array":
    # vocab.json as an array of n empty objects: refused as no vocabulary, after reading it.
    with open(os.path.join(folder, "vocab.json"), "w") as f:
        f.write("[" + ",".join(["{}"] * n) + "]")
elif kind == "vocab":
    # vocab.json maps each token to its id; ids past the embedding's rows are refused, after reading.
    with open(os.path.join(folder, "vocab.json")) as f:
        vocab = json.load(f)
    vocab.update({f"extra{i}": len(vocab) + i for i in range(n)})
    with open(os.path.join(folder, "vocab.json"), "w") as f:
        json.dump(vocab, f)
else:
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    config["id2label"] = {str(i): f"LABEL_{i}" for i in range(n)}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)
PY
}

printf '\n%-8s %10s %12s %10s\n' reader entries bytes seconds
for kind in header metadata index config vocab vocab_array; do
    for n in 12000 120000; do
        folder=$dir/${kind}_$n
        make_checkpoint "$kind" "$n" "$folder"
        file=$(ls -S "$folder"/* | head -n 1)
        start=$(date +%s.%N)
        build/ffn-trace run --checkpoint "$folder" --layer 0 --embedding 0 --detail summary >/dev/null 2>&1 || true
        end=$(date +%s.%N)
        printf '%-8s %10d %12d %10.2f\n' "$kind" "$n" "$(stat -c %s "$file")" "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')"
    done
done

# tokenizer.json: n added_tokens, and a vocabulary given as an array of n objects (refused, after
# reading it). Timed through `tokenize --tokenizer`.
make_tokenizer() {  # kind count path
    python3 - "$@" <<'PY'
import json, sys
kind, n, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
tokenizer = {"version": "1.0", "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}}
if kind == "added":
    tokenizer["added_tokens"] = [{"id": 3 + i, "content": f"<extra_{i}>", "special": True} for i in range(n)]
elif kind == "empty_added":
    # n entries without id or content: refused at the first, after reading them all.
    tokenizer["added_tokens"] = [{} for i in range(n)]
else:
    tokenizer["model"]["vocab"] = [{"token": f"t{i}", "id": i} for i in range(n)]
with open(path, "w") as f:
    json.dump(tokenizer, f)
PY
}

for kind in added empty_added array; do
    for n in 25000 250000; do
        file=$dir/tokenizer_${kind}_$n.json
        make_tokenizer "$kind" "$n" "$file"
        start=$(date +%s.%N)
        build/ffn-trace tokenize --tokenizer "$file" "ab a" >/dev/null 2>&1 || true
        end=$(date +%s.%N)
        printf '%-8s %10d %12d %10.2f\n' "$kind" "$n" "$(stat -c %s "$file")" "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')"
    done
done

# An example whose input is n tokens of one number each (d_model 1): the input is read into its
# matrix as the parser streams it. Timed through `check`, with the peak memory (KB) beside it.
printf '\n%-8s %10s %12s %10s %10s\n' input tokens bytes seconds peak_kb
for n in 800000 8000000; do
    file=$dir/input_$n.json
    awk -v n="$n" 'BEGIN {
        printf "{\"activation\": \"relu\", \"layout\": \"in_out\", \"weights\": {\"W1\": [[1]], \"W2\": [[1]]}, \"input\": [\n"
        for (i = 0; i < n; ++i) printf "[%d]%s\n", i % 10, i + 1 < n ? "," : ""
        printf "]}\n"
    }' >"$file"
    start=$(date +%s.%N)
    /usr/bin/time -f %M -o "$dir/peak" build/ffn-trace check "$file" --max-file-size 1000000000 >/dev/null 2>&1 || true
    end=$(date +%s.%N)
    printf '%-8s %10d %12d %10.2f %10d\n' input "$n" "$(stat -c %s "$file")" "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" "$(tail -n 1 "$dir/peak")"
done

# The tokenizer's encode over a prompt of n bytes: a Split stage with GPT-2's regex before
# byte-level BPE, and one word of n letters cut by WordPiece with no limit on a word's length.
# Timed through `run --prompt-file` on a copy of data/models/capitals with that tokenizer, which
# refuses the prompt for its length once it is encoded.
make_encode() {  # kind bytes folder
    python3 - "$@" <<'PY'
import json, os, shutil, sys
kind, n, folder = sys.argv[1], int(sys.argv[2]), sys.argv[3]
shutil.copytree("data/models/capitals", folder)
if kind == "split":
    pattern = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
    vocab = {chr(c): i for i, c in enumerate(range(32, 127))}
    tokenizer = {"pre_tokenizer": {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated"},
                 "model": {"type": "BPE", "vocab": vocab, "merges": []}}
    line = "The capital of France is Paris; it's 2,024 km   from here... isn't it?\n"
    text = (line * (n // len(line) + 1))[:n]
else:
    tokenizer = {"model": {"type": "WordPiece", "unk_token": "[UNK]", "max_input_chars_per_word": 10**9,
                           "vocab": {"[UNK]": 0, "a": 1, "##a": 2, "##aaa": 3}}}
    text = "a" * n
with open(os.path.join(folder, "tokenizer.json"), "w") as f:
    json.dump(tokenizer, f)
with open(os.path.join(folder, "prompt.txt"), "w") as f:
    f.write(text)
PY
}

printf '\n%-9s %10s %10s\n' encode bytes seconds
for kind in split wordpiece; do
    for n in 100000 1000000; do
        folder=$dir/encode_${kind}_$n
        make_encode "$kind" "$n" "$folder"
        start=$(date +%s.%N)
        build/ffn-trace run --checkpoint "$folder" --layer 0 --prompt-file "$folder/prompt.txt" >/dev/null 2>&1 || true
        end=$(date +%s.%N)
        printf '%-9s %10d %10.2f\n' "$kind" "$n" "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')"
    done
done
