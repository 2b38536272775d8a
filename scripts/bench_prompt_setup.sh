# Sourced by scripts/bench_locate.sh and bench_grad.sh: their settings, the checks, GPT-2 small's
# checkpoint (made once by scripts/bench_make_checkpoints.py) in $dir with a byte-level
# vocabulary (scripts/bench_byte_vocab.py), and a prompt of $tokens letters, one token each.
small=${BENCH_SMALL:-0}; [ "$small" = 0 ] && small=""
tokens=${BENCH_TOKENS:-20}
bench_dir=${BENCH_DIR:-build/bench}
python=${PYTHON:-/usr/bin/python3}
ft=${FFN_TRACE:-build/ffn-trace}
cache=$bench_dir/cache${small:+-small}
out=$bench_dir/out${small:+-small}

"$python" -c 'import torch, numpy' 2>/dev/null \
    || { echo "error: $python cannot import torch and numpy (apt-get install python3-torch python3-numpy)" >&2; exit 2; }
[ -x "$ft" ] || { echo "error: $ft not built: cmake --build --preset default --target ffn-trace" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "error: /usr/bin/time not found (apt-get install time)" >&2; exit 2; }

mkdir -p "$cache" "$out"
BENCH_SMALL=${small:+1} "$python" scripts/bench_make_checkpoints.py "$cache" --only gpt2-forward ${small:+--small}
dir=$cache/gpt2-locate
mkdir -p "$dir"
ln -sf "$(cd "$cache/gpt2-forward" && pwd)/model.safetensors" "$dir/model.safetensors"
cp "$cache/gpt2-forward/config.json" "$dir/config.json"
"$python" scripts/bench_byte_vocab.py "$dir"
prompt=$(head -c "$tokens" < <(yes abcdefghijklmnopqrstuvwxyz | tr -d '\n'))
cat "$dir/model.safetensors" >/dev/null  # a warm page cache
