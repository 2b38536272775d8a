#!/usr/bin/env bash
# A checkpoint's config.json whose sizes the tensors do not hold (a d_ff of 0, more experts or
# layers than there are, no layers) is refused when the checkpoint is opened, on every route that
# opens one: run, quiz and worksheet of an example naming it, and run --checkpoint with --unit 0.
# Each must exit 2 with one error line naming the field, quickly and without a signal.
#
#   config_sizes.sh FFN_TRACE INPUTS_DIR
set -u
ft=$1 inputs=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

# broken NAME FROM KEY VALUE: a copy of checkpoints/FROM whose config.json says KEY: VALUE.
broken() {
    local name=$1 from=$2 key=$3 value=$4
    cp -r "$inputs/checkpoints/$from" "$work/$name"
    sed -i -E "s/\"$key\": *[^,}]*/\"$key\": $value/" "$work/$name/config.json"
    grep -q "\"$key\": $value" "$work/$name/config.json" || { echo "FAIL: $from/config.json has no $key"; exit 1; }
    printf '{"checkpoint": "%s", "layer": 0, "input": [[0.5, -1.0, 0.25, 2.0]]}\n' "$name" >"$work/$name.json"
}

expect_error() {
    local field=$1
    shift
    local out err status
    out=$(cd "$work" && timeout "${FFN_TRACE_TEST_TIMEOUT:-10}" "$ft" "$@" 2>"$work/stderr" </dev/null)
    status=$?
    err=$(cat "$work/stderr")
    if [ $status -ne 2 ] || [ -n "$out" ] || [ "$(wc -l <"$work/stderr")" -ne 1 ] ||
        ! grep -Eq "^error: .*config.json: $field: " <<<"$err"; then
        echo "FAIL: $*: exit $status, stderr: $err"
        failures=$((failures + 1))
    fi
}

every_route() {
    local name=$1 field=$2
    expect_error "$field" run "$name.json"
    expect_error "$field" run "$name.json" --unit 0
    expect_error "$field" quiz "$name.json"
    expect_error "$field" worksheet "$name.json"
    expect_error "$field" run --checkpoint "$name" --layer 0 --embedding 1,2 --unit 0
}

broken gpt2_n_inner_0 gpt2 n_inner 0 && every_route gpt2_n_inner_0 n_inner
broken llama_d_ff_0 llama intermediate_size 0 && every_route llama_d_ff_0 intermediate_size
broken mixtral_d_ff_0 mixtral intermediate_size 0 && every_route mixtral_d_ff_0 intermediate_size
broken mixtral_1e9_experts mixtral num_local_experts 1000000000 && every_route mixtral_1e9_experts num_local_experts
broken mixtral_1e7_experts mixtral num_local_experts 10000000 && every_route mixtral_1e7_experts num_local_experts
broken mixtral_0_experts mixtral num_local_experts 0 && every_route mixtral_0_experts num_local_experts
broken mixtral_top_0 mixtral num_experts_per_tok 0 && every_route mixtral_top_0 num_experts_per_tok
broken llama_0_layers llama num_hidden_layers 0 && every_route llama_0_layers num_hidden_layers
broken gpt2_9_layers gpt2 n_layer 9 && every_route gpt2_9_layers n_layer
broken llama_d_model_0 llama hidden_size 0 && every_route llama_d_model_0 hidden_size
broken bert_d_ff_wrong bert intermediate_size 9 && every_route bert_d_ff_wrong intermediate_size

[ $failures -eq 0 ] && echo "every broken config refused on every route"
exit $((failures > 0))
