# Each line: name, exit status, stdout pattern, stderr pattern, then the command.
set(FT $<TARGET_FILE:ffn-trace>)

# run --format json
cli_test("run prints the walkthrough's steps as JSON" 0
  "\"activation\": \"gelu\", \"layout\": \"out_in\", \"d_model\": 4, \"d_ff\": 8, \"d_out\": 4, \"tokens\": 2" EMPTY
  -- ${FT} run ${DATA}/walkthrough.json --format json)
cli_test("run's JSON has the lesson's output and residual" 0
  "\"name\": \"contract\", \"value\": \\[ ?5.0, 4.0 ?\\] }, \\{ \"name\": \"residual\", \"value\": \\[ ?7.0, 5.0 ?\\]" EMPTY
  -- ${FT} run ${DATA}/lesson_hand.json --format json)
cli_test("run reads standard input given as -" 0 "\"activation\": \"relu\"" EMPTY
  --stdin ${DATA}/memory.json -- ${FT} run - --format json)

# check
cli_test("check passes the lesson's hand example" 0 "lesson_hand.json: all 12 claims hold" EMPTY
  -- ${FT} check ${DATA}/lesson_hand.json)
cli_test("check passes every correct example together" 0 "5 files, 68 claims, 0 failed" EMPTY
  -- ${FT} check ${DATA}/lesson_hand.json ${DATA}/abs_relu.json ${DATA}/abs_identity.json ${DATA}/memory.json ${DATA}/swiglu.json)
cli_test("check points at the walkthrough's slipped hidden[1]" 1
  "walkthrough.json: 41 of 52 claims fail expand\\[1\\]\\[0\\]: claimed 0.17, computed 0.16" EMPTY
  -- ${FT} check ${DATA}/walkthrough.json)
cli_test("check points at the walkthrough's slipped outputs" 1
  "contract\\[0\\]\\[0\\]: claimed 0.498, computed 0.421467" EMPTY
  -- ${FT} check ${DATA}/walkthrough.json)
cli_test("check leaves the walkthrough's correct gelu(0.43) alone" 1 "!activate\\[0\\]\\[0\\]" EMPTY
  -- ${FT} check ${DATA}/walkthrough.json)
cli_test("check reports the files it read when one of several cannot be read, and exits 2" 2
  "^.*lesson_hand.json: all 12 claims hold 1 file, 12 claims, 0 failed\; 1 could not be read$"
  "^error: .*missing.json: cannot open the file"
  -- ${FT} check ${DATA}/lesson_hand.json ${INPUTS}/missing.json)
# A model's config.json handed over as an example file: said as such, not as a misspelt "activation".
cli_test("check of a model's config.json says it is a config, to open as a checkpoint" 2 EMPTY
  "^error: .*capitals/config\\.json: model_type: this file is a model's config\\.json, not an example file: open the folder that holds it as a checkpoint$"
  -- ${FT} check ${DATA}/models/capitals/config.json)
cli_test("check reads every file, each one it cannot read an error line of its own, in order" 2
  "^abs_relu.json: all [0-9]+ claims hold memory.json: all [0-9]+ claims hold 2 files, [0-9]+ claims, 0 failed\; 3 could not be read$"
  "^error: .*missing.json: cannot open the file.* error: .*truncated.json: line [0-9]+, column [0-9]+: malformed JSON.* error: .*missing_activation.json: activation: required key is missing"
  --error-lines 3
  -- bash -c "cd \"$1\" && exec \"$0\" check \"$2\"/missing.json abs_relu.json \"$2\"/truncated.json memory.json \"$3\"/009_missing_activation.json"
     ${FT} ${DATA} ${INPUTS} ${CMAKE_CURRENT_SOURCE_DIR}/corpus)
cli_test("check data/*.json checks every example and skips the JSON Schema with a note" 1
  "ffn-trace.schema.json: skipped: a JSON Schema, not an example .*walkthrough.json: [0-9]+ of [0-9]+ claims fail.* 10 files, [0-9]+ claims, [0-9]+ failed\; 1 skipped$"
  EMPTY -- bash -c "cd \"$1\" && exec \"$0\" check *.json" ${FT} ${DATA})
cli_test("check of the JSON Schema alone skips it and checks nothing" 0
  "^ffn-trace.schema.json: skipped: a JSON Schema" EMPTY -- bash -c "cd \"$1\" && exec \"$0\" check ffn-trace.schema.json" ${FT} ${DATA})
cli_test("run names a JSON Schema for what it is" 2 EMPTY
  "^error: .*ffn-trace.schema.json: \\$schema: names the JSON Schema meta-schema: this file is a schema, not an example file$"
  -- ${FT} run ${DATA}/ffn-trace.schema.json)

# usage and input errors: one line on stderr, exit 2, nothing on stdout
cli_test("no subcommand is a usage error" 2 EMPTY "^error: A subcommand is required" -- ${FT})
cli_test("an unknown subcommand is a usage error" 2 EMPTY "^error: " -- ${FT} trace x.json)
cli_test("an unknown subcommand's error points at the program's help" 2 EMPTY "^error: .*\; see ffn-trace --help$" -- ${FT} trace x.json)
cli_test("a misspelt subcommand is named with the nearest one" 2 EMPTY
  "^error: unknown command \"rnu\" \\(did you mean run\\?\\)\; the commands are run, check, .*, serve\; see ffn-trace --help$" -- ${FT} rnu x.json)
cli_test("a word far from every subcommand gets no guess" 2 EMPTY "^error: unknown command \"trace\"\; the commands are run, " -- ${FT} trace x.json)
cli_test("help prints the program's help" 0 "^ffn-trace: trace every number.*Usage: ffn-trace" EMPTY -- ${FT} help)
cli_test("help with a subcommand prints that subcommand's help" 0 "Usage: ffn-trace run \\[OPTIONS\\]" EMPTY -- ${FT} help run)
cli_test("a misspelt option is named with the nearest its subcommand has" 2 EMPTY
  "^error: run has no option --layers \\(did you mean --layer\\?\\)\; see ffn-trace run --help$"
  -- ${FT} run --checkpoint ${CKPT}/llama --layers 0 --embedding 1)
cli_test("a misspelt option given with = is named alone" 2 EMPTY "^error: units has no option --uint \\(did you mean --unit\\?\\)\; see ffn-trace units --help$"
  -- ${FT} units --checkpoint ${CKPT}/llama --layer 0 --uint=3)
cli_test("a misspelt option of a subcommand's own subcommand names both" 2 EMPTY
  "^error: transcoder train has no option --featurs \\(did you mean --features\\?\\)\; see ffn-trace transcoder --help$"
  -- ${FT} transcoder train --checkpoint ${DATA}/models/atlas --layer 0 --featurs 8 -o nowhere)
cli_test("an option far from every one gets no guess" 2 EMPTY "^error: run has no option --zzzqqq\; see ffn-trace run --help$"
  -- ${FT} run ${DATA}/walkthrough.json --zzzqqq)
cli_test("a missing required option points at its subcommand's help" 2 EMPTY "^error: --target is required\; see ffn-trace edit --help$"
  -- ${FT} edit --checkpoint x --prompt p --subject s)
cli_test("an empty list item points at its subcommand's help" 2 EMPTY "\; see ffn-trace gelu-table --help$" -- ${FT} gelu-table --at 1,,2)
cli_test("run without a file is a usage error" 2 EMPTY "^error: give an example file, or --checkpoint" -- ${FT} run)
cli_test("an unknown format is a usage error" 2 EMPTY "^error: --format" -- ${FT} run ${DATA}/walkthrough.json --format xml)
cli_test("a missing file is an input error" 2 EMPTY "^error: .*nope.json: cannot open the file: No such file" -- ${FT} run nope.json)
cli_test("a directory is an input error" 2 EMPTY "^error: .*data: is a directory" -- ${FT} run ${DATA})
cli_test("a file over the size limit is refused" 2 EMPTY "larger than the limit of 100 bytes\; raise it with --max-file-size"
  -- ${FT} run ${DATA}/walkthrough.json --max-file-size 100)
cli_test("a misspelled key names the nearest" 2 EMPTY "^error: .*misspelled_key.json: activaton: unknown key\; did you mean \"activation\"\\?"
  -- ${FT} run ${INPUTS}/misspelled_key.json)
cli_test("a suggestion ignores case: GELU is gelu" 2 EMPTY
  "^error: .*activation_upper.json: activation: unknown activation \"GELU\"\; did you mean \"gelu\"\?"
  -- ${FT} run ${INPUTS}/activation_upper.json)
cli_test("a ragged weight row names the row and the layout's shape" 2 EMPTY
  "^error: .*ragged_w1.json: weights.W1\\[3\\]: expected 4 numbers \\(layout out_in: W1 is d_ff × d_model = 8 × 4\\), got 5$"
  -- ${FT} run ${INPUTS}/ragged_w1.json)
cli_test("malformed JSON gives line and column" 2 EMPTY "^error: .*truncated.json: line [0-9]+, column [0-9]+: malformed JSON"
  -- ${FT} check ${INPUTS}/truncated.json)
cli_test("an overflow names the step and the element" 2 EMPTY "^error: .*overflow.json: contract\\[0\\]: the value overflowed to inf"
  -- ${FT} run ${INPUTS}/overflow.json --format json)
cli_test("help goes to stdout and exits 0" 0 "Usage: ffn-trace" EMPTY -- ${FT} --help)

# run: the text walkthrough and its options
cli_test("run prints the text walkthrough by default" 0
  "Step 1 · Expand hidden = x · W1 \\+ b1 \\(2 × 4\\)·\\(4 × 8\\) → \\(2 × 8\\)" EMPTY
  -- ${FT} run ${DATA}/walkthrough.json)
cli_test("run flags the walkthrough's slipped number where it occurs" 0
  "hidden\\[1\\]\\[0\\] = 0.1×0.2 \\+ 0.2×\\(-0.4\\) \\+ 0.3×0.6 \\+ 0.4×0.1 \\+ 0 = 0.1600 ✗ claimed 0.17" EMPTY
  -- ${FT} run ${DATA}/walkthrough.json --color never)
cli_test("run --format markdown writes headings and tables" 0 "## Step 2 · Activate \\(ReLU\\)" EMPTY
  -- ${FT} run ${DATA}/memory.json --format markdown)
cli_test("run --color always colours a failed claim red" 0 "\\[31m✗ claimed 0.17" EMPTY
  -- ${FT} run ${DATA}/walkthrough.json --color always)
cli_test("run --token out of range is an input error" 2 EMPTY
  "^error: .*walkthrough.json: --token: token 2 is out of range: the input has 2 tokens \\(indices 0 to 1\\)$"
  -- ${FT} run ${DATA}/walkthrough.json --token 2)
cli_test("run --detail takes only its three levels" 2 EMPTY "^error: --detail" -- ${FT} run ${DATA}/walkthrough.json --detail all)
cli_test("run --precision beyond 17 is a usage error" 2 EMPTY "^error: --precision" -- ${FT} run ${DATA}/walkthrough.json --precision 40)
cli_test("run --precision that is not a number is a usage error" 2 EMPTY "^error: --precision" -- ${FT} run ${DATA}/walkthrough.json --precision x)

# gelu-table
cli_test("gelu-table reproduces the seed's table" 0 "-2.000 -0.045 0.000 -1.000 -0.159 0.000 -0.500 -0.154 0.000 0.000 0.000 0.000 0.500 0.346 0.500 1.000 0.841 1.000 2.000 1.955 2.000" EMPTY
  -- ${FT} gelu-table)
cli_test("gelu-table at precision 12 matches the C library at x = 1" 0 "1.000000000000 0.841191990608" EMPTY
  -- ${FT} gelu-table --at 1 --precision 12)
cli_test("gelu-table refuses a zero step" 2 EMPTY "^error: --step: expected a finite number > 0, got 0$" -- ${FT} gelu-table --from 0 --to 1 --step 0)
cli_test("gelu-table refuses a negative step" 2 EMPTY "^error: --step: expected a finite number > 0" -- ${FT} gelu-table --from 0 --to 1 --step -1)
cli_test("gelu-table refuses a NaN step" 2 EMPTY "^error: --step" -- ${FT} gelu-table --from 0 --to 1 --step nan)
cli_test("gelu-table refuses a step that makes billions of rows" 2 EMPTY "more than 100000 rows" -- ${FT} gelu-table --from 0 --to 1 --step 1e-12)
cli_test("gelu-table refuses from above to" 2 EMPTY "^error: --from: 2 is above --to 1" -- ${FT} gelu-table --from 2 --to 1)
cli_test("gelu-table refuses a non-number" 2 EMPTY "^error: --from: expected a number, got \"abc\"" -- ${FT} gelu-table --from abc --to 1)
cli_test("gelu-table refuses --from without --to" 2 EMPTY "^error: --from requires --to" -- ${FT} gelu-table --from 1)
cli_test("gelu-table refuses --at with a range" 2 EMPTY "^error: --from excludes --at" -- ${FT} gelu-table --at 1 --from 0 --to 2)
cli_test("gelu-table refuses an infinite point" 2 EMPTY "^error: --at: expected finite numbers" -- ${FT} gelu-table --at 1,inf)
cli_test("gelu-table --plot draws text only" 2 EMPTY "^error: --plot: draws text" -- ${FT} gelu-table --plot --format csv)

# params
cli_test("params counts the walkthrough's 128 → 512 layer" 0
  "Linear 1 \\(W1\\) d_model × d_ff \\+ d_ff = 128 × 512 \\+ 512 = 66,048 Linear 2 \\(W2\\) d_ff × d_model \\+ d_model = 512 × 128 \\+ 128 = 65,664 total W1 \\+ W2 = 66,048 \\+ 65,664 = 131,712.* total Q \\+ K \\+ V \\+ O = 4 × 16,512 = 66,048" EMPTY
  -- ${FT} params --d-model 128 --d-ff 512)
cli_test("params shows the lesson's Llama 2 layer: 67.1M, 135.3M, 67%" 0 "total Wg \\+ Wu \\+ W2 = 3 × 45,088,768 = 135,266,304 135.3M .* total Q \\+ K \\+ V \\+ O = 4 × 16,777,216 = 67,108,864 67.1M .*the FFN is 67% of the layer" EMPTY
  -- ${FT} params --d-model 4096 --d-ff 11008 --gated --no-bias)
cli_test("params shows 33.6M against 16.8M" 0 "total W1 \\+ W2 = 2 × 16,777,216 = 33,554,432 33.6M .* total Q \\+ K \\+ V \\+ O = 4 × 4,194,304 = 16,777,216 16.8M" EMPTY
  -- ${FT} params --d-model 2048 --d-ff 8192 --no-bias)
cli_test("params prints the gated d_ff rounding" 0 "d_ff = 8/3 × d_model = 8/3 × 4,096 = 10,922, rounded up to a multiple of 256 = 11,008" EMPTY
  -- ${FT} params --d-model 4096 --gated)
cli_test("params writes out what Mixtral's active parameters add" 0
  "active \\(top-2\\) 2 experts \\+ the rest = \\(below\\) 394,305,536 .*active per token = 32 × 394,305,536 \\+ 262,144,000 \\+ 4,096 = 12,879,925,248"
  EMPTY -- ${FT} params --model mixtral-8x7b --width 120)
cli_test("params --experts without --top-k says what top-k means" 2 EMPTY
  "^error: --experts: give --top-k too: top-k is how many of the 8 experts each token is routed to"
  -- ${FT} params --d-model 512 --experts 8)
cli_test("params --model llama2-7b totals 6.74B" 0 "total the rows above = \\(below\\) 6,738,415,616 6.74B .*total = 6,476,267,520 \\+ 262,144,000 \\+ 4,096 = 6,738,415,616" EMPTY -- ${FT} params --model llama2-7b)
cli_test("params flags after --model override the preset" 0 "\"d_model\": 4096, \"d_ff\": 11008, .*\"layers\": 2," EMPTY
  -- ${FT} params --model llama2-7b --layers 2 --format json)
cli_test("params --format json has the counts as integers" 0 "\"total\": 46702792704, \"active\": 12879925248" EMPTY
  -- ${FT} params --model mixtral-8x7b --format json)
# capitals by hand: a GPT-2 of d_model 128, d_ff 256, 2 layers, vocab 729, 64 positions. A layer is
# c_attn 128·384 + 384, c_proj 128·128 + 128, c_fc 128·256 + 256, mlp c_proj 256·128 + 128 and two
# LayerNorms 2·2·128: 132,480; the model 2 · 132,480 + wte 729·128 + wpe 64·128 + ln_f 2·128 = 366,720.
cli_test("params --checkpoint counts a real model from its config, and its 28 tensors agree" 0
  "Parameters of capitals.*d_model 128 · d_ff 256 · biases · 4 heads · 2 layers · vocab 729.*total the rows above = \\(below\\) 366,720 .*the checkpoint's 28 weight tensors hold 366,720 numbers: the count agrees"
  EMPTY -- ${FT} params --checkpoint ${DATA}/models/capitals)
cli_test("params --checkpoint with a flag that changes the model counts the change: 4 × 132,480 + 101,760" 0
  "\"layers\": 4,.*\"total\": 631680," EMPTY -- ${FT} params --checkpoint ${DATA}/models/capitals --layers 4 --format json)
cli_test("params --checkpoint with a flag that changes the model sets no file's numbers beside the count" 0
  "!checkpoint's" EMPTY -- ${FT} params --checkpoint ${DATA}/models/capitals --layers 4)
cli_test("params --checkpoint of an FFN-only checkpoint names the weights it lacks" 0
  "hold 200 numbers: 144 fewer than the count .*it lacks 3 weights that the count includes: h.0.ln_1.weight, h.0.attn.c_attn.weight, h.0.attn.c_proj.weight"
  EMPTY -- ${FT} params --checkpoint ${INPUTS}/checkpoints/gpt2 --width 200)
cli_test("params --checkpoint of a missing folder names it" 2 EMPTY "^error: .*no-such-model"
  -- ${FT} params --checkpoint ${INPUTS}/no-such-model)
cli_test("params --arch without --checkpoint says what it is for" 2 EMPTY
  "^error: --arch: names a checkpoint's architecture: give --checkpoint too$" -- ${FT} params --arch gpt2 --d-model 8)
cli_test("params --checkpoint excludes --model" 2 EMPTY "^error: --model excludes --checkpoint\\; see ffn-trace params --help$"
  -- ${FT} params --checkpoint ${DATA}/models/capitals --model gpt2)
cli_test("params --format html leaves its counts uncoloured: they are sizes, not signed values" 0 "!--a:[0-9]" EMPTY
  -- ${FT} params --d-model 8 --format html)
cli_test("params --dtype shows one width" 0 "int4 4 bits × 6,738,415,616 = 3.37 GB" "EMPTY"
  -- ${FT} params --model llama2-7b --dtype int4)
cli_test("params refuses a zero size" 2 EMPTY "^error: --d-model: expected a whole number from 1 to 18446744073709551615 in decimal digits, got \"0\"" -- ${FT} params --d-model 0)
cli_test("params refuses a negative size" 2 EMPTY "^error: " -- ${FT} params --d-model -5)
cli_test("params refuses a non-numeric size" 2 EMPTY "^error: --d-model: expected a whole number from 1 to .*got \"big\"" -- ${FT} params --d-model big)
cli_test("params refuses a size beyond 64 bits" 2 EMPTY "^error: " -- ${FT} params --d-model 99999999999999999999999)
cli_test("params refuses a count that overflows 64 bits" 2 EMPTY "^error: the parameter count is beyond 64-bit integers" -- ${FT} params --d-model 4294967296 --d-ff 4294967296)
cli_test("params refuses heads that do not divide d_model" 2 EMPTY "^error: --heads: 7 heads do not divide d_model = 512$" -- ${FT} params --d-model 512 --heads 7)
cli_test("params refuses kv-heads that do not divide heads" 2 EMPTY "^error: --kv-heads: 3 KV heads do not divide 8 heads$" -- ${FT} params --d-model 512 --heads 8 --kv-heads 3)
cli_test("params refuses top-k above experts" 2 EMPTY "^error: --top-k: 3 is more than the 2 experts$" -- ${FT} params --d-model 512 --experts 2 --top-k 3)
cli_test("params names the presets for an unknown model" 2 EMPTY "^error: --model: unknown model \"gpt3\"\\; the presets are transformer-base, gpt2, bert-base, llama2-7b, llama2-70b, llama3-8b, mixtral-8x7b, phi3-mini, qwen3-0.6b, gemma-2-2b, gemma-3-1b$" -- ${FT} params --model gpt3)
cli_test("params needs a size" 2 EMPTY "^error: --d-model: required" -- ${FT} params)

# files that cannot be read as example files
cli_test("an unreadable file is an input error" 2 EMPTY "^error: /proc/self/mem: cannot read the file: Input/output error$" -- ${FT} run /proc/self/mem)
cli_test("an endless file is read only up to the limit" 2 EMPTY "^error: /dev/zero: the file is larger than the limit of 1000 bytes\\; raise it with --max-file-size$"
  -- ${FT} run /dev/zero --max-file-size 1000)
cli_test("an empty standard input is an input error" 2 EMPTY "^error: <stdin>: the file is empty" -- ${FT} check -)
cli_test("-0.0, subnormals and ±1e308 trace without NaN" 0 "hidden\\[1\\]\\[1\\] = 1.0000e\\+308×1e-300 \\+ \\(-1.0000e\\+308\\)×1 = -1.0000e\\+308" EMPTY
  -- ${FT} run ${INPUTS}/edges.json)
cli_test("-0.0 never prints as a negative zero" 0 "!(-0\\.0000|NaN|nan)" EMPTY -- ${FT} run ${INPUTS}/edges.json)

# grad
cli_test("grad traces the lesson's backward pass by hand" 0
  "L = ½·\\(\\(7 − 6\\)² \\+ \\(5 − 5\\)²\\) = 0.5000 .*d_activated\\[3\\] = 1×2 \\+ 0×\\(-1\\) = 2.0000 .*dL/dx = g \\(through the residual\\) \\+ dx_ffn \\(2\\) dL/dx x₁ x₂ the token 3.0000 1.0000" EMPTY
  -- ${FT} grad ${DATA}/lesson_hand.json --color never)
cli_test("grad --lr shows the loss going down" 0 "loss 0.5000 → 0.2920 ✓ down" EMPTY -- ${FT} grad ${DATA}/lesson_hand.json --lr 0.01 --color never)
cli_test("grad checks every data example by finite differences" 0 "largest relative error [0-9.e-]+( at [^ ]+)? ✓" EMPTY
  -- ${FT} grad ${DATA}/walkthrough.json --detail summary --color never)
cli_test("grad --format json gives gradients in the file's layout" 0 "\"loss_kind\": \"upstream\", \"loss\": .*\"gradients\": \\{ \"W1\": \\[ ?\\[ ?[-0-9.e]+, [-0-9.e]+, [-0-9.e]+, [-0-9.e]+ ?\\]," EMPTY
  -- ${FT} grad ${DATA}/walkthrough.json --format json)
cli_test("grad --format json with --lr has updated weights and the new loss" 0 "\"updated\": \\{ \"Wg\": .*\"new_loss\": 0.0" EMPTY
  -- ${FT} grad ${DATA}/swiglu.json --format json --lr 0.1)
cli_test("grad without target or upstream says what to add" 2 EMPTY "^error: .*ragged_w1.json: weights.W1\\[3\\]" -- ${FT} grad ${INPUTS}/ragged_w1.json)
cli_test("grad needs a loss" 2 EMPTY "^error: .*large_gelu.json: grad needs a loss: add \"target\"" -- ${FT} grad ${INPUTS}/large_gelu.json)
cli_test("grad refuses a learning rate of zero" 2 EMPTY "^error: --lr: expected a finite learning rate > 0, got 0$" -- ${FT} grad ${DATA}/lesson_hand.json --lr 0)
cli_test("grad refuses a NaN learning rate" 2 EMPTY "^error: --lr: expected a finite learning rate > 0" -- ${FT} grad ${DATA}/lesson_hand.json --lr nan)

# Mixture of Experts
cli_test("run's MoE JSON has each token's experts and the experts' own steps" 0
  "\"routing\": \\[ ?\\{ \"token\": 0, \"experts\": \\[ ?0, 3 ?\\], \"tie\": false \\}, \\{ \"token\": 1, \"experts\": \\[ ?1, 0 ?\\], \"tie\": true \\}.*\"experts\": \\[ ?\\{ \"expert\": 0, \"tokens\": \\[ ?0, 1 ?\\]" EMPTY
  -- ${FT} run ${DATA}/moe_mixtral.json --format json)
cli_test("check passes both MoE examples" 0 "2 files, 88 claims, 0 failed" EMPTY
  -- ${FT} check ${DATA}/moe_mixtral.json ${DATA}/moe_switch.json)
cli_test("the MoE walkthrough names the idle expert" 0 "Idle: expert 2 — no token chose it, so it was never computed" EMPTY
  -- ${FT} run ${DATA}/moe_switch.json --color never)
cli_test("the MoE walkthrough says where a tie was decided" 0 "token \"the\" chooses expert 1 .grammar. with p = 0.7112 and expert 0 .geography. with p = 0.0963 a tie" EMPTY
  -- ${FT} run ${DATA}/moe_mixtral.json --color never)
cli_test("grad through an MoE layer passes its gradient check and counts the skipped routing changes" 0
  "largest relative error [0-9.e-]+ at .* ✓. [0-9]+ values were skipped: their step of ε changes which experts a token chooses" EMPTY
  -- ${FT} grad ${DATA}/moe_mixtral.json --color never)
cli_test("grad's MoE JSON names gradients by their file paths" 0 "\"gradients\": \\{ \"router.W\": .*\"experts\\[3\\].W2\":.*\"input\":" EMPTY
  -- ${FT} grad ${DATA}/moe_mixtral.json --format json)
cli_test("run --token details one token of an MoE layer" 0 "Expert 0 .geography. · Gate" EMPTY
  -- ${FT} run ${DATA}/moe_mixtral.json --token 1 --color never)
cli_test("run --token shows only the experts that token chose" 0 "!Expert 1 .grammar. ·" EMPTY
  -- ${FT} run ${DATA}/moe_mixtral.json --token 0 --color never)
cli_test("run --token names the experts it leaves out, and why" 0
  "Not shown: expert 1 .grammar., expert 2 .arithmetic. ran only for tokens other than those --token asks for" EMPTY
  -- ${FT} run ${DATA}/moe_mixtral.json --token 0 --color never)
# Errors that are one line: values from the command line are escaped and cut, never echoed raw
cli_test("a format holding a newline is echoed escaped" 2 EMPTY "^error: --format: te[\\]nxt not in"
  -- ${FT} run ${DATA}/walkthrough.json --format "te\nxt")
cli_test("a model name holding a newline is echoed escaped" 2 EMPTY "^error: --model: unknown model \"gpt[\\]n2\""
  -- ${FT} params --model "gpt\n2")
cli_test("a point holding a newline is echoed escaped" 2 EMPTY "^error: --at: expected numbers separated by commas, got \"1[\\]n2\""
  -- ${FT} gelu-table --at "1\n2")
cli_test("a file name holding a newline is echoed escaped" 2 EMPTY "^error: .*no[\\]nsuch.json: cannot open the file"
  -- ${FT} run "${INPUTS}/no\nsuch.json")
cli_test("a file name holding a forged error line stays one line" 2 EMPTY "^error: .*x[\\]t[\\]nerror: forged: cannot open the file"
  -- ${FT} check "${INPUTS}/x\t\nerror: forged")
cli_test("an unexpected argument of any length is cut" 2 EMPTY "^error: The following argument was not expected: y{100}.*…\; see ffn-trace run --help$"
  -- ${FT} run ${DATA}/walkthrough.json yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy)

# Options that take a count, a size or an index: decimal digits only, range-checked, the option named
set(WHOLE "expected a whole number from")
cli_test("run --token refuses a negative that would wrap to a valid token" 2 EMPTY
  "^error: --token: ${WHOLE} 0 to 18446744073709551615 in decimal digits, got \"-18446744073709551615\""
  -- ${FT} run ${DATA}/walkthrough.json --token -18446744073709551615)
cli_test("run --token refuses 2^64 rather than reading it as 2^64 − 1" 2 EMPTY
  "^error: --token: ${WHOLE} 0 to 18446744073709551615 in decimal digits, got \"18446744073709551616\""
  -- ${FT} run ${DATA}/walkthrough.json --token 18446744073709551616)
cli_test("run --token refuses a leading zero" 2 EMPTY "^error: --token: ${WHOLE} 0 to .*got \"01\"" -- ${FT} run ${DATA}/walkthrough.json --token 01)
cli_test("params --vocab refuses -1" 2 EMPTY "^error: --vocab: ${WHOLE} 0 to 18446744073709551615 in decimal digits, got \"-1\"" -- ${FT} params --d-model 64 --vocab -1)
cli_test("params --vocab takes 0 for no embeddings" 0 "total" EMPTY -- ${FT} params --d-model 64 --vocab 0)
cli_test("params --d-model refuses -1 and names the option" 2 EMPTY "^error: --d-model: ${WHOLE} 1 to 18446744073709551615 in decimal digits, got \"-1\"" -- ${FT} params --d-model -1)
cli_test("params --d-model refuses a negative that would wrap to 64" 2 EMPTY "^error: --d-model: ${WHOLE} 1 to .*got \"-18446744073709551552\"" -- ${FT} params --d-model -18446744073709551552)
cli_test("params --d-model refuses octal-looking 010" 2 EMPTY "^error: --d-model: ${WHOLE} 1 to .*got \"010\"" -- ${FT} params --d-model 010)
cli_test("params --d-model refuses hexadecimal 0x40" 2 EMPTY "^error: --d-model: ${WHOLE} 1 to .*got \"0x40\"" -- ${FT} params --d-model 0x40)
cli_test("params --d-model refuses 2^64" 2 EMPTY "^error: --d-model: ${WHOLE} 1 to .*got \"2\\^64\"" -- ${FT} params --d-model 2^64)
cli_test("params --d-model refuses an exponent" 2 EMPTY "^error: --d-model: ${WHOLE} 1 to .*got \"1e3\"" -- ${FT} params --d-model 1e3)
cli_test("params --experts refuses a sign" 2 EMPTY "^error: --experts: ${WHOLE} 1 to .*got \"\\+8\"" -- ${FT} params --d-model 64 --experts +8)
cli_test("--max-file-size refuses -1 without a 309-digit range" 2 EMPTY
  "^error: --max-file-size: ${WHOLE} 1 to 18446744073709551615 in decimal digits, got \"-1\"\; see ffn-trace run --help$"
  -- ${FT} run ${DATA}/walkthrough.json --max-file-size -1)
cli_test("--max-file-size refuses 0" 2 EMPTY "^error: --max-file-size: ${WHOLE} 1 to .*got \"0\"" -- ${FT} check ${DATA}/walkthrough.json --max-file-size 0)
cli_test("--precision refuses octal-looking 010" 2 EMPTY "^error: --precision: ${WHOLE} 0 to 17 in decimal digits, got \"010\"" -- ${FT} run ${DATA}/walkthrough.json --precision 010)
cli_test("gelu-table --width refuses 0x40" 2 EMPTY "^error: --width: ${WHOLE} 10 to 400 in decimal digits, got \"0x40\"" -- ${FT} gelu-table --plot --width 0x40)
cli_test("gelu-table --height refuses -10" 2 EMPTY "^error: --height: ${WHOLE} 5 to 200 in decimal digits, got \"-10\"" -- ${FT} gelu-table --plot --height -10)

# Work past the budget is refused before anything is allocated
cli_test("--max-elements refuses a trace past it and says what to lower" 2 EMPTY
  "^error: .*walkthrough.json: tracing 2 tokens through d_model 4 → d_ff 8 → d_out 4 would keep [0-9,]+ numbers, more than --max-elements 100\; use fewer tokens or a narrower layer, or raise --max-elements$"
  -- ${FT} run ${DATA}/walkthrough.json --max-elements 100)
cli_test("check and grad take --max-elements too" 2 EMPTY "more than --max-elements 10\;" -- ${FT} grad ${DATA}/lesson_hand.json --max-elements 10)
cli_test("check takes --max-elements" 2 EMPTY "more than --max-elements 10\;" -- ${FT} check ${DATA}/lesson_hand.json --max-elements 10)
cli_test("--max-elements refuses 0" 2 EMPTY "^error: --max-elements: expected a whole number from 1 to" -- ${FT} run ${DATA}/lesson_hand.json --max-elements 0)

# Output that cannot be written is an error; a reader that goes away is not
cli_test("a closed stdout is an error, not a silent success" 2 ANY "^error: cannot write the output: Bad file descriptor$"
  --stdout closed -- ${FT} run ${DATA}/walkthrough.json)
cli_test("a full disk is an error, not a silent success" 2 ANY "^error: cannot write the output: No space left on device$"
  --stdout /dev/full -- ${FT} run ${DATA}/walkthrough.json)
cli_test("a full disk is an error for a long output too" 2 ANY "^error: cannot write the output: No space left on device$"
  --stdout /dev/full -- ${FT} run ${INPUTS}/large_gelu.json --detail arithmetic --full)
cli_test("a full disk is an error for a long JSON output too" 2 ANY "^error: cannot write the output: No space left on device$"
  --stdout /dev/full -- ${FT} run ${INPUTS}/large_gelu.json --format json)
cli_test("a closed stdout is an error for a long JSON output too" 2 ANY "^error: cannot write the output: Bad file descriptor$"
  --stdout closed -- ${FT} run ${INPUTS}/large_gelu.json --format json)
cli_test("a full disk is an error for --help too" 2 ANY "^error: cannot write the output: No space left on device$"
  --stdout /dev/full -- ${FT} --help)
# Whether the program is still writing when head leaves is a race: it ends either way, and quietly.
cli_test("a reader that stops early ends the program quietly" 0 EMPTY EMPTY
  -- bash -c "\"$0\" run \"$1\" --detail arithmetic --full | head -c 10 >/dev/null\; s=\${PIPESTATUS[0]}\; [ $s = 0 ] || [ $s = 141 ]"
     ${FT} ${INPUTS}/large_gelu.json)
cli_test("a reader that stops early ends the program quietly even when SIGPIPE is ignored" 0 EMPTY EMPTY
  -- bash -c "trap '' PIPE\; \"$0\" run \"$1\" --detail arithmetic --full | head -c 10 >/dev/null\; s=\${PIPESTATUS[0]}\; [ $s = 0 ] || [ $s = 141 ]"
     ${FT} ${INPUTS}/large_gelu.json)

# What is read: a byte order mark, standard input that is a directory, a file measured before it is read
cli_test("a file that starts with a UTF-8 byte order mark is read" 0 "all 12 claims hold" EMPTY -- ${FT} check ${INPUTS}/bom.json)
cli_test("a directory on standard input is named so" 2 EMPTY "^error: <stdin>: standard input is a directory\; expected a JSON example file$"
  --stdin ${DATA} -- ${FT} run -)
cli_test("a regular file over the limit is refused by its size" 2 EMPTY
  "^error: .*walkthrough.json: the file is [0-9]+ bytes, larger than the limit of 100 bytes\; raise it with --max-file-size$"
  -- ${FT} run ${DATA}/walkthrough.json --max-file-size 100)

# Messages that blame what is to blame
cli_test("grad --lr that overflows the weights blames --lr" 2 EMPTY
  "^error: .*lesson_hand.json: --lr: the step η·dW1 takes W1 past double precision's range\; use a smaller learning rate$"
  -- ${FT} grad ${DATA}/lesson_hand.json --lr 1e308)
cli_test("grad with an upstream that overflows the loss blames the upstream" 2 EMPTY
  "^error: .*upstream_overflow.json: upstream: the loss Σ upstream ⊙ output overflowed in double precision\; the upstream gradient is too large"
  -- ${FT} grad ${INPUTS}/upstream_overflow.json)
cli_test("a claim's token 1.0 is the token 1" 0 "<stdin>: all 3 claims hold" EMPTY
  --stdin ${INPUTS}/token_float.json -- ${FT} check -)
cli_test("gelu-table --plot refuses a range wider than double precision" 2 EMPTY
  "^error: --at: the range from -1.7e\\+308 to 1.7e\\+308 is wider than double precision can hold" -- ${FT} gelu-table --plot --at -1.7e308,1.7e308)
cli_test("gelu-table refuses a --from/--to range wider than double precision" 2 EMPTY
  "^error: --from: the range from -1.7e\\+308 to 1.7e\\+308 is wider than double precision can hold" -- ${FT} gelu-table --plot --from -1.7e308 --to 1.7e308)
cli_test("gelu-table --plot near double's limit draws the curves" 0 "8e\\+307 ┤" EMPTY -- ${FT} gelu-table --plot --at -8e307,8e307)

cli_test("check keeps a note with a line break on its line, escaped" 1
  "1 of 2 claims fail expand\\[0\\]: claimed 3, computed 2, difference 1 \\(tolerance 0.0005\\) — wrong\\\\nerror: forged \\\\u001b\\[31mred$"
  EMPTY -- ${FT} check ${INPUTS}/note_forged.json)
cli_test("run keeps a note with a line break on its line, escaped" 0 "✗ wrong\\\\nerror: forged \\\\u001b\\[31mred"
  EMPTY -- ${FT} run ${INPUTS}/note_forged.json --color never)

# Real models: checkpoints
# Tiny checkpoints (d_model 4, d_ff 8, 2 layers) written by tests/inputs/checkpoints/make.py with
# each architecture's real tensor names; the numbers below are what the seeded script wrote.
set(CKPT ${INPUTS}/checkpoints)
cli_test("run --checkpoint traces a GPT-2 layer over a word of its vocab.json" 0
  "Layer 1 of a gpt2 checkpoint .*The input is the token embedding's row 3 \\(transformer.wte.weight\\).*layout in_out.*\" Paris\": \\[0.4769, -0.2363, 0.3517, 0.4561\\] → norm → expand → GELU → contract → \\+ x → \\[0.1720, 1.5558, -0.2520, 1.3374\\]"
  EMPTY -- ${FT} run --checkpoint ${CKPT}/gpt2 --layer 1 --word " Paris" --detail summary)
cli_test("run --checkpoint traces a Llama layer over an .npy input as JSON, step by step" 0
  "\"activation\": \"swiglu\", \"layout\": \"out_in\", \"d_model\": 4, \"d_ff\": 8, \"d_out\": 4, \"tokens\": 2.*\"name\": \"norm\".*\"name\": \"gate\".*\"name\": \"up\".*\"name\": \"activate\".*\"name\": \"multiply\".*\"name\": \"contract\".*\"name\": \"residual\""
  EMPTY -- ${FT} run --checkpoint ${CKPT}/llama --layer 0 --input ${CKPT}/x.npy --format json)
cli_test("run --checkpoint traces a Mixtral layer over embedding rows and shows the experts each token chose" 0
  "expert 0: 0, expert 1: 2, expert 2: 1, expert 3: 1 .*id 1: \\[0.3965, 0.0871, 0.5723, 0.3591\\] → expert 1 × 0.6604 \\+ expert 3 × 0.3396 → \\+ x .*id 2: \\[-0.9979, 0.756, 0.8374, -0.6454\\] → expert 2 × 0.9813 \\+ expert 1 × 0.0187 → \\+ x"
  EMPTY -- ${FT} run --checkpoint ${CKPT}/mixtral --layer 0 --embedding 1,2 --detail summary)
cli_test("a list of units that wraps keeps its commas and fits the width" 0
  "fired most 5 \\(1.9191\\), 1 \\(0.9967\\), 4 \\(0.6089\\), 3 \\(0.5335\\), 6 \\(0.1216\\) +\" Paris\": only 5 of 8 units fired"
  EMPTY -- ${FT} run --checkpoint ${CKPT}/gpt2 --layer 1 --word " Paris" --color never --width 60)
cli_test("run --checkpoint reads each Mixtral expert's units" 0
  "Expert 1 · steps at a glance .*Expert 1 · units that fired most, and what they wrote .*id 1: fired most [0-9]+ \\([0-9.-]+\\).*Expert 3 · units that fired most"
  EMPTY -- ${FT} run --checkpoint ${CKPT}/mixtral --layer 0 --embedding 1,2 --color never)
cli_test("run --checkpoint --format json gives each Mixtral expert's top units" 0
  "\"expert\": 1,.*\"top_units\": \\[ *\\[ *\\{ *\"unit\": [0-9]+, *\"value\": [0-9.e-]+"
  EMPTY -- ${FT} run --checkpoint ${CKPT}/mixtral --layer 0 --embedding 1,2 --format json)
cli_test("run --checkpoint traces a BERT layer with its post-norm" 0
  "layernorm after the residual \\(post-norm\\).*id 5: \\[-0.4102, 0.343, -0.9052, 0.3592\\] → expand → exact GELU → contract → \\+ x → norm → \\[-0.7434, 0.6991, -1.4488, 1.3215\\]"
  EMPTY -- ${FT} run --checkpoint ${CKPT}/bert --layer 1 --embedding 5 --detail summary)
cli_test("run --checkpoint takes the .safetensors file itself" 0 "Layer 0 of a llama checkpoint" EMPTY
  -- ${FT} run --checkpoint ${CKPT}/llama/model.safetensors --layer 0 --embedding 7 --detail summary)
cli_test("run --checkpoint --word not in the vocabulary lists the nearest tokens" 2 EMPTY
  "^error: .*gpt2: --[a-z]+: \"Londres\" is not one token of the vocabulary .*nearest: \"Paris\", \"ĠLondon\""
  -- ${FT} run --checkpoint ${CKPT}/gpt2 --layer 0 --word Londres)
cli_test("run --checkpoint --word without a vocabulary says to give --embedding" 2 EMPTY
  "^error: .*llama: --word: the checkpoint's directory has no vocab.json or tokenizer.json .*give --embedding with token ids$"
  -- ${FT} run --checkpoint ${CKPT}/llama --layer 0 --word " Paris")
cli_test("run --checkpoint --token with a word points to --word" 2 EMPTY
  "^error: --token: expected a whole number .*got \" Paris\". --token picks the tokens to detail by index. to trace a word of a checkpoint's vocabulary, give --word"
  -- ${FT} run --checkpoint ${CKPT}/llama --layer 0 --token " Paris")
cli_test("run --checkpoint checks that each token alone gives the numbers of all at once, in one more pass over the file" 0
  "position-wise each of the 2 tokens traced alone gives the same numbers as all traced at once: .*✓"
  EMPTY -- ${FT} run --checkpoint ${CKPT}/llama --layer 0 --input ${CKPT}/x.npy --detail summary --color never)
cli_test("run --checkpoint --layer out of range names --layer and the range" 2 EMPTY
  "^error: .*gpt2: --layer: layer 2 is out of range: the checkpoint has 2 layers \\(0 to 1\\)$"
  -- ${FT} run --checkpoint ${CKPT}/gpt2 --layer 2 --word " Paris")
cli_test("run --checkpoint --input of the wrong width names d_model" 2 EMPTY
  "^error: .*x_width3.npy: x_width3: expected d_model = 4 numbers per token for this layer, its shape is \\(2, 3\\)$"
  -- ${FT} run --checkpoint ${CKPT}/llama --layer 0 --input ${CKPT}/x_width3.npy)
cli_test("run --checkpoint --embedding past the vocabulary names the row" 2 EMPTY
  "^error: .*--embedding: row 9 is out of range: the tensor has 8 rows \\(0 to 7\\)$"
  -- ${FT} run --checkpoint ${CKPT}/mixtral --layer 0 --embedding 1,9)
cli_test("run --checkpoint to a missing path cannot open it" 2 EMPTY "^error: .*nowhere: cannot open the file: No such file or directory$"
  -- ${FT} run --checkpoint ${CKPT}/nowhere --layer 0 --embedding 1)
cli_test("a byte token of a prompt is quoted as the tokenizer's display writes it, not escaped twice" 0
  "      1  127  \"Ã\" +\"[\\]xC3\"\n.*\"[\\]xC3\": fired most" EMPTY
  -- ${FT} run --checkpoint ${DATA}/models/capitals --layer 0 --prompt Zürich --color never --width 200)
cli_test("run --checkpoint given a model's config.json says to give its folder" 2 EMPTY
  "^error: .*capitals/config.json: this is the model's config, not its weights: give the folder that holds it \\(.*capitals\\)$"
  -- ${FT} run --checkpoint ${DATA}/models/capitals/config.json --layer 0 --prompt x)
cli_test("run --layer that is neither a number nor all says what a layer is" 2 EMPTY
  "^error: --layer: .*got \"al\"\; a layer is its number from 0, or all for every layer of a prompt\; see ffn-trace run --help$"
  -- ${FT} run --checkpoint ${DATA}/models/capitals --layer al --prompt x)
cli_test("run with a file and --checkpoint together is a usage error" 2 EMPTY "^error: \".*walkthrough.json\" is read as the file argument, and file excludes --checkpoint"
  -- ${FT} run ${DATA}/walkthrough.json --checkpoint ${CKPT}/llama --layer 0 --embedding 1)
cli_test("a stray word beside --checkpoint is named as the file it was read as" 2 EMPTY
  "^error: \"extra\" is read as the file argument, and file excludes --checkpoint\; see ffn-trace run --help$"
  -- ${FT} run --checkpoint ${DATA}/models/capitals --layer 0 --prompt x extra)
cli_test("run --checkpoint with a truncated header is an input error" 2 EMPTY
  "^error: .*truncated/model.safetensors: header: the header length is [0-9]+ bytes, but only 32 bytes follow the 8-byte length$"
  -- ${FT} run --checkpoint ${CKPT}/truncated --layer 0 --embedding 1)
cli_test("run --checkpoint --arch that does not fit the tensors asks whether it is one" 2 EMPTY
  "^error: .*llama/model.safetensors: no tensor \"h.0.mlp.c_fc.weight\" .*is this a gpt2 checkpoint\\?$"
  -- ${FT} run --checkpoint ${CKPT}/llama/model.safetensors --arch gpt2 --layer 0 --embedding 1)
cli_test("run --checkpoint --arch takes only the known architectures" 2 EMPTY "^error: --arch: falcon not in"
  -- ${FT} run --checkpoint ${CKPT}/llama --arch falcon --layer 0 --embedding 1)

# Sizes of 0 read off the tensors are refused when the checkpoint opens, whatever config.json says
# (or without one): no layer of d_ff 0 or d_model 0 is ever traced, quizzed or explained.
cli_test("run --checkpoint refuses a GPT-2 layer of d_ff 0 without config.json, naming the tensor" 2 EMPTY
  "^error: .*zero_gpt2/model.safetensors: h.0.mlp.c_fc.weight: its shape \\(4, 0\\) \\(in × out\\) makes d_model = 4 and d_ff = 0. a layer needs at least one of each$"
  -- ${FT} run --checkpoint ${CKPT}/zero_gpt2 --arch gpt2 --layer 0 --embedding 1)
cli_test("run --checkpoint refuses a Llama layer of d_ff 0 that config.json agrees with" 2 EMPTY
  "^error: .*zero_llama/model.safetensors: model.layers.0.mlp.gate_proj.weight: its shape \\(0, 4\\) \\(out × in\\) makes d_model = 4 and d_ff = 0"
  -- ${FT} run --checkpoint ${CKPT}/zero_llama --layer 0 --embedding 1)
cli_test("run --checkpoint refuses a Mixtral whose experts have d_ff 0" 2 EMPTY
  "^error: .*zero_mixtral/model.safetensors: model.layers.0.block_sparse_moe.experts.0.w1.weight: its shape \\(0, 4\\) .*d_ff = 0"
  -- ${FT} run --checkpoint ${CKPT}/zero_mixtral --layer 0 --embedding 1)
cli_test("run --checkpoint refuses a layer of d_model 0" 2 EMPTY
  "^error: .*zero_width/model.safetensors: h.0.mlp.c_fc.weight: its shape \\(0, 8\\) \\(in × out\\) makes d_model = 0 and d_ff = 8"
  -- ${FT} run --checkpoint ${CKPT}/zero_width --layer 0 --embedding 1)
cli_test("run --checkpoint --unit on a layer of d_ff 0 is refused before any range is printed" 2 EMPTY
  "^error: .*d_ff = 0. a layer needs at least one of each$"
  -- ${FT} run --checkpoint ${CKPT}/zero_llama --layer 0 --embedding 1 --unit 0)
foreach(cmd run quiz check worksheet grad)
  cli_test("${cmd} refuses an example naming a checkpoint's layer of d_ff 0" 2 EMPTY
    "^error: .*example.json: checkpoint: .*d_ff = 0. a layer needs at least one of each$"
    -- ${FT} ${cmd} ${CKPT}/zero_llama/example.json)
endforeach()

# A tokenizer may carry entries the embedding lacks: the checkpoint opens and its other words are
# traced; only a word whose id has no row is refused, naming it.
cli_test("run --checkpoint traces a word of a tokenizer that has spare entries" 0 "Layer 0 of a gpt2 checkpoint" EMPTY
  -- ${FT} run --checkpoint ${CKPT}/spare --layer 0 --word " Paris" --detail summary)
cli_test("run --checkpoint --word whose id the embedding lacks is refused, naming the word and the rows" 2 EMPTY
  "^error: .*spare: --word: \" Rome\" is token 16777216 of the tokenizer, but the token embedding transformer.wte.weight has 8 rows$"
  -- ${FT} run --checkpoint ${CKPT}/spare --layer 0 --word " Rome")
cli_test("run --checkpoint --word just past the embedding's rows is refused" 2 EMPTY
  "^error: .*spare: --word: \" Berlin\" is token 9 of the tokenizer, but the token embedding transformer.wte.weight has 8 rows$"
  -- ${FT} run --checkpoint ${CKPT}/spare --layer 0 --word " Paris" --word " Berlin")

# An example file naming a checkpoint's layer: claims computed with NumPy from the file itself
cli_test("check verifies claims on a checkpoint's layer named by an example file" 0 "checkpoint_claims.json: all 32 claims hold" EMPTY
  -- ${FT} check ${INPUTS}/checkpoint_claims.json)
cli_test("grad traces the backward pass of a checkpoint's layer named by an example file" 0 "largest relative error [0-9.e-]+ at .* ✓" EMPTY
  -- ${FT} grad ${INPUTS}/checkpoint_claims.json --color never)

# --version and -V: the project's version, and the commit when built from a checkout
cli_test("--version prints the project's version" 0 "^ffn-trace ${PROJECT_VERSION}( \\(commit [0-9a-f]+(-dirty)?\\))?$" EMPTY
  -- ${FT} --version)
cli_test("-V is --version" 0 "^ffn-trace ${PROJECT_VERSION}" EMPTY -- ${FT} -V)

# new: a complete example file that check and run take as written
cli_test("new prints an example whose claim holds" 0 "<stdin>: all 6 claims hold" EMPTY
  -- bash -c "\"$0\" new | \"$0\" check -" ${FT})
cli_test("new --moe prints a Mixture of Experts that runs" 0 "Route" EMPTY
  -- bash -c "\"$0\" new --moe 4 --top-k 2 --gated --activation gelu --layout out_in | \"$0\" run - --color never" ${FT})
cli_test("new --gated names the gated activation" 0 "\"activation\": \"swiglu\"" EMPTY -- ${FT} new --gated --activation silu)
cli_test("new --zeros writes zeros" 0 "\"input\": \\[ \\[0.0, 0.0, 0.0\\], \\[0.0, 0.0, 0.0\\] \\]" EMPTY -- ${FT} new --zeros)
cli_test("new refuses a gated identity" 2 EMPTY "^error: --gated: \"identity\" has no gated form" -- ${FT} new --gated --activation identity)
cli_test("new refuses more experts per token than experts" 2 EMPTY "^error: --top-k: 3 experts per token" -- ${FT} new --moe 2 --top-k 3)
cli_test("new refuses --top-k without --moe" 2 EMPTY "^error: --top-k requires --moe" -- ${FT} new --top-k 1)
cli_test("new refuses --seed with --zeros" 2 EMPTY "^error: --seed excludes --zeros" -- ${FT} new --seed 3 --zeros)

# schema and generate
cli_test("schema prints the JSON Schema" 0 "^\\{ \"\\$schema\": \"https://json-schema.org/draft/2020-12/schema\"" EMPTY -- ${FT} schema)
cli_test("generate man prints the page with every subcommand" 0
  "^\\.\\\\\" .*\\.SS \"ffn\\\\-trace run .*\\.SS \"ffn\\\\-trace new .*\\.SS \"ffn\\\\-trace quiz .*\\.SS \"ffn\\\\-trace worksheet .*\\.SH EXIT STATUS" EMPTY -- ${FT} generate man)
cli_test("generate bash completes the subcommands" 0 "run\\|check\\|grad\\|gelu-table\\|sweep\\|params\\|new\\|schema\\|quiz\\|worksheet\\|tokenize\\|units\\|locate\\|edit\\|transcoder\\|generate\\|serve\\)" EMPTY
  -- ${FT} generate bash)
cli_test("generate refuses an unknown shell" 2 EMPTY "^error: what: tcsh not in" -- ${FT} generate tcsh)

# cmake --install: the stripped binary, the man page, the three completions and the examples with
# their schema, under the prefix given
cli_test("cmake --install puts everything under the prefix, the binary stripped, the library beside it" 0
  "^bin/ffn-trace include/ffn_trace/analysis/claims.hpp .*include/ffn_trace/model/transformer.hpp lib/cmake/ffn_trace/ffn_trace-config-version.cmake lib/cmake/ffn_trace/ffn_trace-config.cmake lib/cmake/ffn_trace/ffn_trace-targets-[a-z]+.cmake lib/cmake/ffn_trace/ffn_trace-targets.cmake lib/libffn_trace.a share/bash-completion/completions/ffn-trace share/ffn-trace/examples/abs_identity.json .*share/ffn-trace/examples/ffn-trace.schema.json .*share/ffn-trace/examples/walkthrough.json share/fish/vendor_completions.d/ffn-trace.fish share/man/man1/ffn-trace.1 share/zsh/site-functions/_ffn-trace stripped$"
  EMPTY
  -- bash -c [[
    set -e
    prefix=$(mktemp -d)
    trap 'rm -rf "$prefix"' EXIT
    "$0" --install "$1" --prefix "$prefix" >/dev/null
    (cd "$prefix" && find . -type f | sed 's|^\./||' | LC_ALL=C sort)
    nm "$prefix/bin/ffn-trace" 2>&1 | grep -q "no symbols" && echo stripped || echo "not stripped"]]
    ${CMAKE_COMMAND} ${PROJECT_BINARY_DIR})

# The generated bash completion, sourced and asked as bash asks it on TAB
cli_test("bash completes subcommands, an option's choices and new's activations" 0
  "^run check grad gelu-table sweep params new schema quiz worksheet tokenize units locate edit transcoder generate serve -h --help -V --version \\| text markdown json html \\| silu swiglu$" EMPTY
  -- bash -c [[
    source <("$0" generate bash)
    ask() { COMP_WORDS=("$@")
            COMP_CWORD=$(($# - 1))
            COMPREPLY=()
            _ffn_trace
            echo "${COMPREPLY[*]}"
          }
    echo "$(ask ffn-trace "") | $(ask ffn-trace run --format "") | $(ask ffn-trace new --activation s)"]] ${FT})
# ... and transcoder's own command, train, then train's options and their choices
cli_test("bash completes transcoder's train and train's options" 0 "^train \\| --features \\| text markdown json html \\| --help$" EMPTY
  -- bash -c [[
    source <("$0" generate bash)
    ask() { COMP_WORDS=("$@")
            COMP_CWORD=$(($# - 1))
            COMPREPLY=()
            _ffn_trace
            echo "${COMPREPLY[*]}"
          }
    echo "$(ask ffn-trace transcoder "") | $(ask ffn-trace transcoder train --fe) | $(ask ffn-trace transcoder train --format "") | $(ask ffn-trace transcoder --)"]] ${FT})
cli_test("generate man has a section for transcoder train" 0 "\\.SS \"ffn\\\\-trace transcoder train \\[options\\]\"" EMPTY -- ${FT} generate man)
# The width of the text view (the layouts at 60 and 120 columns are golden files)
cli_test("COLUMNS sets the width when stdout is not a terminal" 0 EMPTY EMPTY
  -- bash -c "COLUMNS=60 \"$0\" run \"$1\" --color never | grep -qx 'Each hidden unit j scores the token against its key, column'"
     ${FT} ${DATA}/walkthrough.json)
cli_test("--width overrides COLUMNS" 0 EMPTY EMPTY
  -- bash -c "COLUMNS=60 \"$0\" run \"$1\" --color never --width 120 | grep -qx '  layout      out_in: the file stores W as outputs × inputs (y = W·x + b)\; shown here in the math form x · W'"
     ${FT} ${DATA}/walkthrough.json)
cli_test("without a terminal or COLUMNS the text fits 80 columns" 0 EMPTY EMPTY
  -- bash -c "env -u COLUMNS \"$0\" run \"$1\" --color never | grep -qx 'Each hidden unit j scores the token against its key, column j of W1 (row j of'"
     ${FT} ${DATA}/walkthrough.json)
cli_test("a key-value table split into blocks names its matrix in each block" 0 "unit W2: \\[2\\] \\[3\\] \\[4\\] \\[5\\] unit 0 3\\.0000" EMPTY
  -- ${FT} run ${INPUTS}/wide_memory.json --color never --width 80)
cli_test("--width below 40 is refused" 2 EMPTY "^error: --width: expected a whole number from 40 to 1000"
  -- ${FT} run ${DATA}/walkthrough.json --width 20)
cli_test("--ascii writes 4 × 3 as 4 * 3, not 4x3 beside an input named x" 0 "shapes d_model 3 -> d_ff 2 -> d_out 2, 4 tokens \\(input 4 \\* 3\\)" EMPTY
  -- ${FT} run ${DATA}/memory.json --ascii)
cli_test("params --ascii spells out ×, ÷ and ≈" 0 "Linear 1 \\(W1\\) d_model \\* d_ff \\+ d_ff = 768 \\* 3,072 \\+ 3,072 =" EMPTY
  -- ${FT} params --model gpt2 --ascii --width 120)
cli_test("check --width 40 wraps a failing claim between words, its continuation indented" 0 EMPTY EMPTY
  -- bash -c "\"$0\" check \"$1\" --width 40 | grep -qx '      0.16, difference 0.01 (tolerance'"
     ${FT} ${DATA}/walkthrough.json)
cli_test("check --width below 40 is refused" 2 EMPTY "^error: --width: expected a whole number from 40 to 1000"
  -- ${FT} check ${DATA}/walkthrough.json --width 20)
cli_test("check --ascii spells out the notes' symbols" 1 "expand\\[1\\]\\[0\\]: claimed 0.17, computed 0.16, difference 0.01 \\(tolerance 0.005\\) -- Step 1" EMPTY
  -- ${FT} check ${DATA}/walkthrough.json --ascii)

# Colour: NO_COLOR counts only when set and not empty (no-color.org); the plot colours its curves
# (tests/cli/colour.sh; `script` gives the program a terminal for --color auto).
cli_test("an empty NO_COLOR leaves colour on in a terminal" 0 EMPTY EMPTY
  -- bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/colour.sh empty-no-color ${FT} ${DATA}/walkthrough.json)
cli_test("a set NO_COLOR turns colour off in a terminal" 0 EMPTY EMPTY
  -- bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/colour.sh set-no-color ${FT} ${DATA}/walkthrough.json)
cli_test("quiz: an empty NO_COLOR leaves colour on in a terminal" 0 EMPTY EMPTY
  -- bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/colour.sh quiz-empty-no-color ${FT} ${DATA}/lesson_hand.json)
cli_test("quiz: a set NO_COLOR turns colour off in a terminal" 0 EMPTY EMPTY
  -- bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/colour.sh quiz-set-no-color ${FT} ${DATA}/lesson_hand.json)
set_tests_properties("cli: an empty NO_COLOR leaves colour on in a terminal" "cli: a set NO_COLOR turns colour off in a terminal"
  "cli: quiz: an empty NO_COLOR leaves colour on in a terminal" "cli: quiz: a set NO_COLOR turns colour off in a terminal"
  PROPERTIES SKIP_RETURN_CODE 77)
cli_test("gelu-table --plot --color always draws each curve in its own colour" 0 EMPTY EMPTY
  -- bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/colour.sh plot ${FT})
cli_test("grad --lr with every gradient 0 says no step size can help, not to try a smaller one" 0
  "every gradient is 0, so the step leaves every weight as it was and no step size can help" EMPTY
  -- ${FT} grad ${DATA}/memory.json --lr 0.5 --width 200)
cli_test("grad --lr with every gradient 0 never suggests a smaller step" 0 "!try a smaller" EMPTY
  -- ${FT} grad ${DATA}/memory.json --lr 0.5)

# The page view (--format html; the browser test opens the pages, tests/browser/pages.sh)
cli_test("run --format html writes one page, starting with its doctype" 0 "^<!DOCTYPE html> <html lang=\"en\">" EMPTY
  -- ${FT} run ${DATA}/lesson_hand.json --format html)
cli_test("grad --format html writes the backward pass as a page" 0 "<h1>Backward pass" EMPTY
  -- ${FT} grad ${DATA}/lesson_hand.json --format html)
cli_test("gelu-table --format html draws the curves" 0 "<figure class=\"plot\"><figcaption>The curves from -3 to 3</figcaption>" EMPTY
  -- ${FT} gelu-table --format html)
cli_test("params --format html gives GPT-2's exact total" 0 ">124,439,808 \\(100.0%\\)<|124,439,808" EMPTY
  -- ${FT} params --model gpt2 --format html)
cli_test("-o refuses a folder that does not exist, printing nothing" 2 EMPTY
  "^error: -o: cannot write \"/nonexistent-folder/page.html\": No such file or directory$"
  -- ${FT} run ${DATA}/lesson_hand.json --format html -o /nonexistent-folder/page.html)
set(PAGE ${CMAKE_CURRENT_BINARY_DIR}/cli-page.html)
cli_test("-o writes the page to the file and nothing to stdout" 0 EMPTY EMPTY
  -- bash -c [[rm -f "$2" && "$0" run "$1" --format html -o "$2" && grep -q "^</html>$" "$2"]] ${FT} ${DATA}/memory.json ${PAGE})
cli_test("-o leaves no file behind when the input is bad" 2 EMPTY "^error: .*missing.json: cannot open the file"
  -- bash -c [[rm -f "$2" && "$0" run "$1" --format html -o "$2" || ( status=$? && test ! -e "$2" && exit $status )]]
  ${FT} ${INPUTS}/missing.json ${PAGE}.bad)

# The lesson's experiments: the file's activation, residual or any value changed on the command line
cli_test("run --activation identity makes the memory's Paris only write [-1, -3], as seed 003 shows" 0
  "changed activation = identity \\(--activation\\)\\; the file itself is unchanged.*Paris only: \\[1, 0, 0\\] → expand → identity → contract → \\[-1.0000, -3.0000\\]"
  EMPTY -- ${FT} run ${DATA}/memory.json --activation identity --detail summary --width 200)
cli_test("run --set changes one value, named in the heading" 0
  "changed weights.b1\\[1\\] = 0\\; input\\[3\\] = \\[0,1,1\\]\\; .*country\\? only: \\[0, 1, 1\\] → expand → ReLU → contract → \\[0.0000, 4.0000\\]"
  EMPTY -- ${FT} run ${DATA}/memory.json --set weights.b1[1]=0 --set input[3]=[0,1,1] --detail summary --width 200)
# The lesson's hidden labels describe W1's columns ("x₂ − x₁"): a change to W1 or b1 drops them and
# says so; a change to W2 leaves them.
cli_test("run --set on W1 leaves out the hidden units' labels, which described the weights before" 0
  "changed weights.W1\\[0\\]\\[3\\] = 5\\; the hidden units' labels are left out, as they may describe the weights changed"
  EMPTY -- ${FT} run ${DATA}/lesson_hand.json --set weights.W1[0][3]=5 --detail summary --width 200)
cli_test("run --set on W1 names no unit by its old label" 0 "!unit 2 \\(x₁ \\+ x₂\\)"
  EMPTY -- ${FT} run ${DATA}/lesson_hand.json --set weights.W1[0][3]=5 --width 200)
cli_test("run --set on W2 keeps the hidden units' labels" 0 "unit 2 \\(x₁ \\+ x₂\\)"
  EMPTY -- ${FT} run ${DATA}/lesson_hand.json --set weights.W2[3][0]=5 --width 200)
cli_test("run --set to a key the file cannot have gives the loader's error with its path" 2 EMPTY
  "^error: .*memory.json: weights.b3: unknown key\; did you mean \"b1\"\?" -- ${FT} run ${DATA}/memory.json --set weights.b3=1)
cli_test("run --set past the end of a list names the list and its size" 2 EMPTY
  "^error: .*memory.json: weights.W1: --set: has 3 entries \\(indices 0 to 2\\), so no \\[5\\]$" -- ${FT} run ${DATA}/memory.json --set weights.W1[5][0]=1)
cli_test("run --set without = says what it expects" 2 EMPTY
  "^error: .*memory.json: --set: expected PATH=VALUE, e.g. weights.b1\\[1\\]=-0.5" -- ${FT} run ${DATA}/memory.json --set b1)
# A --set value is read by the same strict reader as the file: a duplicate key, which nlohmann alone
# would take, is refused.
cli_test("run --set of a value with a duplicate key is refused" 2 EMPTY
  "^error: .*memory.json: labels: --set: expected a JSON value after =" -- ${FT} run ${DATA}/memory.json
  --set "labels={\"tokens\": [\"a\", \"b\", \"c\", \"d\"], \"tokens\": [\"e\", \"f\", \"g\", \"h\"]}")
cli_test("run --set of a value the loader refuses names its path" 2 EMPTY
  "^error: .*memory.json: weights.b1\\[1\\]: expected a number, got the string \"abc\"$" -- ${FT} run ${DATA}/memory.json --set weights.b1[1]=abc)
# What the change did. memory.json's b1 is [−1.5, −1.5]; x · W1 is [2, 1], [1, 2], [1, 0] and [1, 1] for its
# four tokens, so with b1 = [0, 0] every hidden number grows by exactly 1.5 (minus the old b1):
# Paris + country?'s hidden [0.5, −0.5] → [2, 1]. ReLU then passes [2, 1], [1, 2], [1, 0], [1, 1]
# where it passed [0.5, 0], [0, 0.5], [0, 0], [0, 0]: all but Paris only's unit 1 (0 → 0) move, 7
# of 8; the output, 2 × activated, moves the same 7. The file's 24 claims (3 steps × 4 tokens ×
# 2) describe the layer before the change: not checked, exit 0.
set(NO_BIAS ${FT} run ${DATA}/memory.json --set "weights.b1=[0,0]" --width 200 --color never)
cli_test("an experiment shows each hidden number was → now, moved by minus the old b1" 0
  "What the change did.*Step 1 · Expand \\(hidden\\): 8 of 8 numbers changed\\. +token +hidden +was +now +Δ +Paris \\+ country\\? +Paris and country +0\\.5000 +→ +2\\.0000 +\\(\\+1\\.5000\\) +Berlin and country +-0\\.5000 +→ +1\\.0000 +\\(\\+1\\.5000\\)"
  EMPTY -- ${NO_BIAS})
cli_test("an experiment counts the numbers it left alone" 0
  "Step 2 · Activate \\(activated\\): 7 of 8 numbers changed\; 1 did not\\..*Paris only +Paris and country +0\\.0000 +→ +1\\.0000 +\\(\\+1\\.0000\\).*Step 3 · Contract \\(output\\): 7 of 8 numbers changed\; 1 did not\\..*Unchanged: x \\(12 numbers\\)\\."
  EMPTY -- ${NO_BIAS})
cli_test("an experiment hides the file's claims behind one line, with no ✗" 0
  "claims +the file's 24 claimed numbers describe the layer before the change\; not checked \\(run without the change to check them\\)"
  EMPTY -- ${NO_BIAS})
cli_test("an experiment marks no number ✗, nor any claim" 0 "!(✗|claimed [0-9-])" EMPTY -- ${NO_BIAS})
cli_test("an experiment's JSON has what changed, and says why the claims are not checked" 0
  "\"claims\": \\[\\],.*\"what_changed\": \\{ *\"any\": true.*\"at\": \"expand\\[0\\]\\[0\\]\", \"was\": 0\\.5, \"now\": 2\\.0, \"delta\": 1\\.5 \\}.*\"claims_not_checked\": \\{ *\"count\": 24"
  EMPTY -- ${FT} run ${DATA}/memory.json --set "weights.b1=[0,0]" --format json)
cli_test("a change that moves no number leaves the claims checked" 0
  "What the change did +No number of the trace changed.*✓ all 24 claimed numbers hold"
  EMPTY -- ${FT} run ${DATA}/memory.json --set "title=renamed" --width 200 --color never)
# An experiment on an MoE file. moe_mixtral.json's router (out_in) is 2·I, so Paris = [1, 0, 0, 0.5] has
# logits [2, 0, 0, 1] and chooses experts 0, 3. With W[0][0] = −2 its logits are [−2, 0, 0, 1]: expert 3
# first, then 1 (of the tied 1 and 2, the lower index). Normalised over the chosen pair, the larger weight
# is e/(e + 1) = 0.7311 and the smaller 1/(e + 1) = 0.2689 both times, so Paris's weights move from
# expert 0 (0.7311 → 0), to expert 1 (0 → 0.2689), and expert 3 (0.2689 → 0.7311): 3 of the 12 weights.
# "the" and "42" have x[0] = 0 and keep their experts. The file's 54 claimed numbers are not checked.
set(MOE_REROUTE ${FT} run ${DATA}/moe_mixtral.json --set "moe.router.W[0][0]=-2" --width 200 --color never)
cli_test("an MoE experiment says which experts a token now chooses" 0
  "What the change did.*token \"Paris\" now chooses experts 3, 1 \\(was 0, 3\\)"
  EMPTY -- ${MOE_REROUTE})
cli_test("an MoE experiment shows each weight was → now" 0
  "Step 3 · Weights \\(w\\): 3 of 12 numbers changed\; 9 did not\\. +token +w +was +now +Δ +Paris +geography +0\\.7311 +→ +0\\.0000 +\\(-0\\.7311\\) +grammar +0\\.0000 +→ +0\\.2689 +\\(\\+0\\.2689\\) +code +0\\.2689 +→ +0\\.7311"
  EMPTY -- ${MOE_REROUTE})
cli_test("an MoE experiment hides the file's claims behind one line, with no ✗" 0
  "claims +the file's 54 claimed numbers describe the layer before the change\; not checked"
  EMPTY -- ${MOE_REROUTE})
cli_test("an MoE experiment marks no number ✗, nor any claim" 0 "!(✗|claimed [0-9-])" EMPTY -- ${MOE_REROUTE})
cli_test("an MoE experiment's JSON has the route changes, and says why the claims are not checked" 0
  "\"claims\": \\[\\],.*\"what_changed\": \\{ *\"any\": true.*\"at\": \"weights\\[0\\]\\[1\\]\", \"was\": 0\\.0, \"now\": 0\\.2689.*\"routes\": \\[ *\\{ \"token\": 0, \"was\": \\[ ?0, 3 ?\\], \"now\": \\[ ?3, 1 ?\\] \\} *\\].*\"claims_not_checked\": \\{ *\"count\": 54"
  EMPTY -- ${FT} run ${DATA}/moe_mixtral.json --set "moe.router.W[0][0]=-2" --format json)
# Expert 3 (code) ran Paris and 42 before the change and after: its own steps are compared over
# them. Its gate for Paris is x · Wg[0] = 2·0.5 = 1; with Wg[0][3] = 4 it is 4·0.5 = 2.
cli_test("an MoE experiment inside an expert compares that expert's steps over its tokens" 0
  "Every token chooses the same experts as before the change\\..*Expert 3 \\(code\\) · Gate \\(gate\\): 2 of 4 numbers changed\; 2 did not\\. +token +gate +was +now +Δ +Paris +\\[0\\] +1\\.0000 +→ +2\\.0000 +\\(\\+1\\.0000\\)"
  EMPTY -- ${FT} run ${DATA}/moe_mixtral.json --set "moe.experts[3].Wg[0][3]=4" --width 200 --color never)
cli_test("an experiment's page banner is not coloured as a result" 0
  "<p class=\"banner neutral\">The file&#39\;s claims describe the layer before the change: not checked</p>"
  EMPTY -- ${FT} run ${DATA}/moe_mixtral.json --set "moe.router.W[0][0]=-2" --format html)
cli_test("a page whose claims hold has the banner of a result" 0 "<p class=\"banner ok\">All 54 claims hold"
  EMPTY -- ${FT} run ${DATA}/moe_mixtral.json --format html)
# The summaries at a narrow width. An added token of zeros has logits [0, 0, 0, 0]: its top 2 are
# experts 0 and 1, each 0.5 after normalising — written 0.5000, as the weights' table writes it.
cli_test("the MoE summary writes a route's weights as the tables do" 0
  "z: \\[0, 0, 0, 0\\] → expert 0 × 0\\.5000 \\+ expert 1 × 0\\.5000 → \\+ x"
  EMPTY -- ${FT} run ${DATA}/moe_mixtral.json --add-token "z=[0,0,0,0]" --detail summary --width 200 --color never)
# (expect.sh folds the lines into one, so the layout is read with grep.)
cli_test("the MoE summary keeps each route term whole when it wraps" 0 EMPTY EMPTY
  -- bash -c "\"$0\" run \"$1\" --detail summary --width 40 --color never | grep -E 'expert [0-9]$|^ +× '\; test $? -eq 1"
     ${FT} ${DATA}/moe_mixtral.json)
cli_test("the MoE summary keeps its step labels in one column when a vector wraps" 0 EMPTY EMPTY
  -- bash -c "\"$0\" run \"$1\" --detail summary --width 40 --color never | grep -qx '    combine       .0.4621, 0.0000,'"
     ${FT} ${DATA}/moe_mixtral.json)
# A gated layer of d_model 64: its vectors are wider than 50 columns.
set(WIDE_GATED "\"$0\" new --activation swiglu --d-model 64 --d-ff 128 --residual | \"$0\" run - --detail summary --width 50 --color never")
cli_test("a gated layer's summary keeps its step labels in one column when a vector wraps" 0 EMPTY EMPTY
  -- bash -c "${WIDE_GATED} | grep -c -E '^    (gate     |up       ).[-0-9]' | grep -qx 4" ${FT})
cli_test("a gated layer's summary never splits \"gate, up\"" 0 EMPTY EMPTY
  -- bash -c "${WIDE_GATED} | grep 'gate,$'\; test $? -eq 1" ${FT})
cli_test("run --help says what --precision means in the vocabulary view" 0
  "--precision INT[^D]*Decimals shown\; the vocabulary view's scores show this many significant digits" EMPTY -- ${FT} run --help)
# The demo's knock-out: " Bern"'s logit changes sign (2.63 → -1.06) under " Paris"'s 9.24 → 5.44; every
# row's last arrow stands in one column.
cli_test("the knock-out table's arrows line up when a logit changes sign" 0 EMPTY EMPTY
  -- bash -c "\"$0\" run --checkpoint \"$1\" --layer 0 --prompt 'The capital of France is' --detail summary --ablate 172,84,28,168,203 --color never | sed -n '/^The knock-out/,$p' | awk -F'→' '/^  \"/ { n++\; k = length($1 FS $2)\; if (!(k in seen)) { seen[k]\; d++ } } END { exit !(n >= 5 && d == 1) }'"
     ${FT} ${DATA}/models/capitals)
# A value that is a bracketed list alone is one value, quoted whole in the error, not split at its commas.
cli_test("run --add-token without a name quotes the whole value it was given" 2 EMPTY
  "^error: .*memory\\.json: --add-token: expected NAME=\\[v1,v2,…\\].*got \"\\[1,1\\]\"$"
  -- ${FT} run ${DATA}/memory.json --add-token "[1,1]")
cli_test("run --set quotes the whole value it was given, brackets and all" 2 EMPTY
  "^error: .*memory\\.json: --set: expected PATH=VALUE.*got \"\\[1,2\\]\"$"
  -- ${FT} run ${DATA}/memory.json --set "[1,2]")
# --add-token: Berlin only = [0, 1, 0] gives hidden [0, 1] + b1 = [−1.5, −0.5], both off, output [0, 0].
# The layer is the file's: its 24 claims on its own four tokens still hold.
cli_test("run --add-token traces a new token after the file's, named by its label" 0
  "changed +token \"Berlin only\" = \\[0,1,0\\] added \\(--add-token\\).*Berlin only +-1\\.5000 +-0\\.5000.*✓ all 24 claimed numbers hold.*Berlin only: \\[0, 1, 0\\] → expand → ReLU → contract → \\[0\\.0000, 0\\.0000\\]"
  EMPTY -- ${FT} run ${DATA}/memory.json --add-token "Berlin only=[0,1,0]" --width 200 --color never)
cli_test("run --add-token is repeatable, and --set reaches the new tokens" 0
  "changed +token \"a\" = \\[1,1,1\\] added \\(--add-token\\)\; token \"b\" = \\[0,0,0\\] added \\(--add-token\\)\; input\\[5\\]\\[0\\] = 1.* b +1\\.0000 +0\\.0000 +0\\.0000"
  EMPTY -- ${FT} run ${DATA}/memory.json --add-token "a=[1,1,1]" --add-token "b=[0,0,0]" --set "input[5][0]=1" --width 200 --color never)
cli_test("run --add-token of the wrong length names the flag and d_model" 2 EMPTY
  "^error: .*memory.json: --add-token: \"Madrid\": expected \\[v1,v2,…\\], d_model = 3 numbers \\(one per input feature, as the file's tokens have\\), got 2 numbers$"
  -- ${FT} run ${DATA}/memory.json --add-token "Madrid=[1,0]")
cli_test("run --add-token without = says what it expects" 2 EMPTY
  "^error: .*memory.json: --add-token: expected NAME=\\[v1,v2,…\\]" -- ${FT} run ${DATA}/memory.json --add-token "[1,0,1]")
cli_test("run --add-token of no numbers names the flag" 2 EMPTY
  "^error: .*memory.json: --add-token: \"x\": expected \\[v1,v2,…\\], d_model = 3 numbers .*got \"abc\"$"
  -- ${FT} run ${DATA}/memory.json --add-token "x=abc")
# grad: the new token has no target of its own; its target is its own output, so its
# dL/d(output) is 0 and the file's tokens learn as they would alone.
cli_test("grad --add-token gives the new token no loss of its own" 0 "!nan" EMPTY
  -- ${FT} grad ${DATA}/memory.json --add-token "Berlin only=[0,1,0]" --format json)
cli_test("grad --add-token then --set gives the new token a target" 0 "Berlin only" EMPTY
  -- ${FT} grad ${DATA}/memory.json --add-token "Berlin only=[0,1,1]" --set "target[4]=[0,1]" --width 200)
# A value that is not a number: the option, what it expects and the value, not CLI11's "Could not convert".
cli_test("sweep --from abc says a number was expected" 2 EMPTY
  "^error: --from: expected a number, got \"abc\"\; see ffn-trace sweep --help$"
  -- ${FT} sweep ${DATA}/abs_relu.json --from abc --to 1)
cli_test("gelu-table --at with a word among its numbers says numbers were expected" 2 EMPTY
  "^error: --at: expected numbers separated by commas, got \"1,x\"\; see ffn-trace gelu-table --help$"
  -- ${FT} gelu-table --at 1,x)
cli_test("sweep offers no --add-token: it sweeps x, not the file's tokens" 2 EMPTY "^error: .*--add-token"
  -- ${FT} sweep ${DATA}/memory.json --from 0 --to 1 --add-token "a=[1,1,1]")
cli_test("grad --no-residual traces the backward pass without the residual, named in the heading" 0
  "changed residual = false \\(--no-residual\\).*output the contraction \\(no residual\\)" EMPTY
  -- ${FT} grad ${DATA}/lesson_hand.json --no-residual --width 200)
# The vocabulary view: each token with its score W2[j] · g_t; "promotes" only positive scores and
# "suppresses" only negative ones, so a token never appears in both lists.
cli_test("the vocabulary view prints each token's score" 0 "unit [0-9]+ promotes \" capital\" [0-9]|unit [0-9]+ promotes \"[^\"]*\" [0-9]" EMPTY
  -- ${FT} run --checkpoint ${INPUTS}/checkpoints/gpt2 --layer 1 --word " Paris")
cli_test("the vocabulary view's promotes lists no negative score" 0 "!promotes( \"[^\"]*\" [0-9][0-9.e+-]*,)* \"[^\"]*\" -" EMPTY
  -- ${FT} run --checkpoint ${INPUTS}/checkpoints/gpt2 --layer 1 --word " Paris")
cli_test("the vocabulary view's suppresses lists no positive score" 0 "!suppresses( \"[^\"]*\" -[0-9][0-9.e+-]*,)* \"[^\"]*\" [0-9]" EMPTY
  -- ${FT} run --checkpoint ${INPUTS}/checkpoints/gpt2 --layer 1 --word " Paris")
# The tiny GPT-2's vocab.json gives id 0 to "!" and id 2 to "Paris".
# One minus in a table: a row named "x₂ − x₁" beside "-1.0000" writes its minus as the numbers do.
cli_test("a table writes the minus of its names as its numbers write theirs" 0
  "W2 +\\[0\\] +\\[1\\] .* x₂ - x₁ +2\\.0000 +-1\\.0000 .*unit 3 \\(x₂ - x₁\\) +-1\\.0000 +1\\.0000"
  EMPTY -- ${FT} run ${DATA}/lesson_hand.json --no-residual --width 80 --color never)
cli_test("a unit's largest terms are written at the precision of their sum" 0
  "Unit 168 · \" is\" .*the largest terms +(\\[[0-9]+\\] \\(?-?[0-9]+\\.[0-9]{4}\\)? \\+ )+\\[[0-9]+\\] \\(?-?[0-9]+\\.[0-9]{4}\\)? … [0-9]+ more terms add "
  EMPTY -- ${FT} run --checkpoint ${DATA}/models/atlas --prompt "The capital of France is" --layer 1 --unit 168 --width 1000 --color never)
cli_test("run --embedding with a vocabulary names each token by its token" 0 "\"!\" \\(id 0\\): x\\[0\\] = .*\"Paris\" \\(id 2\\): x\\[1\\] =" EMPTY
  -- ${FT} run --checkpoint ${INPUTS}/checkpoints/gpt2 --layer 0 --embedding 0,2)
cli_test("run --activation on a checkpoint is refused" 2 EMPTY "^error: --activation: changes an example file"
  -- ${FT} run --checkpoint ${INPUTS}/checkpoints/gpt2 --layer 0 --word " Paris" --activation relu)
cli_test("check passes the memory without ReLU, whose Paris only writes [-1, -3]" 0 "memory_no_relu.json: all 10 claims hold" EMPTY
  -- ${FT} check ${DATA}/memory_no_relu.json)
# quiz: scripted sessions through standard input over the lesson's hand example. With seed 1 it
# asks hidden[1], activated[1], output[1] and y[1]; by hand (seed 003) they are 1, 1, 4 and 5.
set(QUIZ ${INPUTS}/quiz)
cli_test("quiz: all right is 4 of 4 with nothing to revisit" 0
  "hidden\\[1\\] = \\? > 1 ✓ right: hidden\\[1\\] = 2×0 \\+ 1×1 = 1.0000 .*Score: 4 of 4 right at the first try .*Nothing to revisit" EMPTY
  --stdin ${QUIZ}/all_right.txt -- ${FT} quiz ${DATA}/lesson_hand.json --color never)
cli_test("quiz: all wrong gives the formula, the numbers, then the answer with the slip" 0
  "✗ not 1. Hint 1 of 3, the formula: multiply each of the 4 entries of activated by the entry of W2\\[:, 1\\] .*Hint 2 of 3, the numbers: 2×0 \\+ 1×1 \\+ 3×1 \\+ 0×\\(-1\\) = 0 \\+ 1 \\+ 3 \\+ 0 .*The answer: output\\[1\\] = 2×0 \\+ 1×1 \\+ 3×1 \\+ 0×\\(-1\\) = 4.0000. Your 1: your sum dropped the term 3×1. .*Score: 0 of 4 right at the first try 4 missed .*Revisit: expand, activate, contract, residual" EMPTY
  --stdin ${QUIZ}/all_wrong.txt -- ${FT} quiz ${DATA}/lesson_hand.json --color never)
cli_test("quiz: ? gives the hints one at a time, the third the answer" 0
  "hidden\\[1\\] = \\? > \\? Hint 1 of 3, the formula: .* > \\? Hint 2 of 3, the numbers: 2×0 \\+ 1×1 = 0 \\+ 1 hidden\\[1\\] = \\? > \\? The answer: hidden\\[1\\] = 2×0 \\+ 1×1 = 1.0000. .*Score: 3 of 4 right at the first try 1 missed" EMPTY
  --stdin ${QUIZ}/hints.txt -- ${FT} quiz ${DATA}/lesson_hand.json --color never)
cli_test("quiz: s skips and shows the answer" 0
  "> s Skipped. hidden\\[1\\]: 2×0 \\+ 1×1 = 1.0000 .*Score: 3 of 4 right at the first try 1 skipped .*Revisit: expand\\;" EMPTY
  --stdin ${QUIZ}/skip.txt -- ${FT} quiz ${DATA}/lesson_hand.json --color never)
cli_test("quiz: q stops with the score so far" 0
  "> q Stopped. Score: 1 of 4 right at the first try 3 not answered" EMPTY
  --stdin ${QUIZ}/quit.txt -- ${FT} quiz ${DATA}/lesson_hand.json --color never)
cli_test("quiz: a malformed answer asks again" 0
  "> abc \"abc\" is not a number I can read: type a number such as 0.25, -1.5, 1/2 or 1e-3\\; .*hidden\\[1\\] = \\? > 1,0 \"1,0\" is not a number .*> 0x1 \"0x1\" is not a number .*An empty line is not a number .*Score: 4 of 4 right at the first try" EMPTY
  --stdin ${QUIZ}/malformed.txt -- ${FT} quiz ${DATA}/lesson_hand.json --color never)
cli_test("quiz: the input ending mid-way gives a clean summary and exit 0" 0
  "activated\\[1\\] = \\? > 1 ✓ right.* output\\[1\\] = \\? > The input ended. Score: 2 of 4 right at the first try 2 not answered" EMPTY
  --stdin ${QUIZ}/eof.txt -- ${FT} quiz ${DATA}/lesson_hand.json --color never)
cli_test("quiz: no input at all still ends cleanly" 0 "hidden\\[1\\] = \\? > The input ended. Score: 0 of 4 .*4 not answered" EMPTY
  -- ${FT} quiz ${DATA}/lesson_hand.json --color never)
cli_test("quiz: the Unicode minus is a minus" 0 "hidden\\[3\\] = \\? > −1 ✓ right: hidden\\[3\\] = 2×\\(-1\\) \\+ 1×1 = -1.0000" EMPTY
  --stdin ${QUIZ}/unicode_minus.txt -- ${FT} quiz ${DATA}/lesson_hand.json --steps expand --unit 3 --count 1 --color never)
cli_test("quiz: a fraction is a number" 0 "> 2/2 ✓ right: hidden\\[1\\]" EMPTY
  --stdin ${QUIZ}/fraction.txt -- ${FT} quiz ${DATA}/lesson_hand.json --steps expand --unit 1 --count 1 --color never)
cli_test("quiz: --ascii writes pure ASCII" 0 "!×|·|→|−|✓|✗" EMPTY
  --stdin ${QUIZ}/all_wrong.txt -- ${FT} quiz ${DATA}/moe_mixtral.json --ascii --count 4)
cli_test("quiz: --format json has the questions with their answers" 0
  "\"questions\": \\[ \\{ \"step\": \"expand\", \"token\": 0, \"index\": 1, \"target\": \"hidden\\[1\\]\", \"formula\": \"hidden\\[1\\] = x · W1\\[:, 1\\]\", .*\"answer\": 1.0," EMPTY
  -- ${FT} quiz ${DATA}/lesson_hand.json --format json)
cli_test("quiz: an MoE layer asks the router, the softmax, the weight, an expert and the combine" 0
  "\"step\": \"router\".*\"step\": \"probabilities\".*\"step\": \"weights\".*\"step\": \"expert\\[[0-9]\\].gate\".*\"step\": \"combine\"" EMPTY
  -- ${FT} quiz ${DATA}/moe_mixtral.json --format json)
cli_test("quiz: --tolerance widens what counts as right" 0 "> 1.04 ✓ right: hidden\\[1\\]" EMPTY
  --stdin ${QUIZ}/near.txt -- ${FT} quiz ${DATA}/lesson_hand.json --tolerance 0.05 --color never)
cli_test("quiz: an unknown step names the steps there are" 2 EMPTY
  "^error: .*lesson_hand.json: --steps: no step \"gate\" to ask about in this layer\\; its steps are expand, activate, contract, residual$"
  -- ${FT} quiz ${DATA}/lesson_hand.json --steps gate)
cli_test("quiz: --count 0 is a usage error" 2 EMPTY "^error: --count: expected a whole number from 1 to 1000" -- ${FT} quiz ${DATA}/lesson_hand.json --count 0)
cli_test("quiz: a negative --seed is a usage error" 2 EMPTY "^error: --seed: expected a whole number" -- ${FT} quiz ${DATA}/lesson_hand.json --seed -1)
cli_test("quiz: --tolerance 0 is a usage error" 2 EMPTY "^error: --tolerance: expected a finite number > 0, got \"0\"" -- ${FT} quiz ${DATA}/lesson_hand.json --tolerance 0)
cli_test("quiz: --tolerance that is not a number is a usage error" 2 EMPTY "^error: --tolerance: expected a finite number > 0" -- ${FT} quiz ${DATA}/lesson_hand.json --tolerance much)
cli_test("quiz: --token out of range is an input error" 2 EMPTY "^error: .*lesson_hand.json: --token: token 1 is out of range" -- ${FT} quiz ${DATA}/lesson_hand.json --token 1)
cli_test("quiz: --unit out of range is an input error" 2 EMPTY "^error: .*lesson_hand.json: --unit: unit 4 is out of range" -- ${FT} quiz ${DATA}/lesson_hand.json --unit 4)
cli_test("quiz: a big layer asks for --unit" 2 EMPTY "^error: .*large_gelu.json: --unit: this layer \\(d_model [0-9]+ → d_ff [0-9]+\\) is bigger than a sum worked by hand" -- ${FT} quiz ${INPUTS}/large_gelu.json)
cli_test("quiz: a big layer asks about the units chosen" 0 "\"target\": \"activated\\[[0-9]+\\]\\[3\\]\"" EMPTY -- ${FT} quiz ${INPUTS}/large_gelu.json --unit 3 --format json)
cli_test("quiz: the example cannot come from standard input" 2 EMPTY "^error: quiz: the answers are read from standard input" -- ${FT} quiz -)
cli_test("quiz: an unknown format is a usage error" 2 EMPTY "^error: --format" -- ${FT} quiz ${DATA}/lesson_hand.json --format markdown)
cli_test("quiz: a missing file is an input error" 2 EMPTY "^error: .*nope.json: cannot open the file" -- ${FT} quiz nope.json)

# worksheet
cli_test("worksheet: blanks in the steps, then the answer key on its own page" 0
  "^# Worksheet: The lesson's hand example.*\\| the token \\| 2.0000 \\| \\(1\\) ______ \\| \\(2\\) ______ \\| -1.0000 \\|.*<div style=\"break-before: page\"></div> # Answer key: .*\\| \\(1\\) \\| expand \\| hidden\\[1\\] \\| 1.0000 \\|" EMPTY
  -- ${FT} worksheet ${DATA}/lesson_hand.json)
cli_test("worksheet: --blanks and --steps" 0 "\\| \\(1\\) \\| contract \\| output\\[[01]\\]\\[[0-3]\\] \\| [-0-9.]+ \\| \\| \\(2\\) \\| contract .* \\| \\(3\\) \\| contract \\| output\\[[01]\\]\\[[0-3]\\] \\| [-0-9.]+ \\|$" EMPTY -- ${FT} worksheet ${DATA}/walkthrough.json --steps contract --blanks 3)
cli_test("worksheet: an unknown step is an input error" 2 EMPTY "^error: .*lesson_hand.json: --steps: no step \"up\" in this layer" -- ${FT} worksheet ${DATA}/lesson_hand.json --steps up)
cli_test("worksheet: --blanks 0 is a usage error" 2 EMPTY "^error: --blanks" -- ${FT} worksheet ${DATA}/lesson_hand.json --blanks 0)
cli_test("worksheet: a big layer is refused before anything is printed" 2 EMPTY
  "^error: .*large_gelu.json: a worksheet prints every weight, and this layer \\(d_model [0-9]+ → d_ff [0-9]+ → d_out [0-9]+\\) is bigger than a sheet worked by hand"
  -- ${FT} worksheet ${INPUTS}/large_gelu.json)
# A checkpoint's layer leaves its matrices in the file: the sheet reads them (the numbers are
# gate_proj.weight[:, 0] and experts.1.w1.weight[:, 0] read from the safetensors files with Python's struct)
cli_test("worksheet prints a checkpoint's weights read from the file" 0
  "\\| Wg \\| \\[0\\] .*\\| \\[0\\] \\| -0.4386 \\| -0.5817 \\| -0.2731 \\| -0.5260 \\| -0.5166 \\| 0.8029 \\| -0.8386 \\| 0.1355 \\|" EMPTY
  -- ${FT} worksheet ${INPUTS}/checkpoint_claims.json)
cli_test("worksheet of a checkpoint's MoE shows the chosen experts' weights and says the others are not read" 0
  "Expert 0: No token chose this expert.*Expert 1: \\| Wg .*\\| \\[0\\] \\| 0.2815 \\| 0.0337 \\| 0.3917 \\| -0.2496 \\|" EMPTY
  -- ${FT} worksheet ${INPUTS}/checkpoint_moe.json)
cli_test("worksheet: pdf is not a format" 2 EMPTY "^error: --format" -- ${FT} worksheet ${DATA}/lesson_hand.json --format pdf)
cli_test("worksheet --format html starts the answer key on a printed page of its own" 0
  "<header class=\"new-page\"> <h1>Answer key: The lesson&#39\\;s hand example" EMPTY
  -- ${FT} worksheet ${DATA}/lesson_hand.json --format html)

# sweep: a one-number layer's output against x
cli_test("sweep draws |x| with a bend for each ReLU unit at 0" 0
  "-3.0000 3.0000 .* 3.0000 3.0000 .*▲ bend of unit 0 \\(x > 0\\) at x = 0.*▲ bend of unit 1 \\(x < 0\\) at x = 0" EMPTY
  -- ${FT} sweep ${DATA}/abs_relu.json --from -3 --to 3)
cli_test("sweep of a layer the command line changed names its output by its step, not the file's name for it" 0
  "● output against x" EMPTY -- ${FT} sweep ${DATA}/abs_relu.json --from -2 --to 2 --activation identity)
cli_test("sweep refuses a layer of more than one input number" 2 EMPTY
  "^error: .*memory.json: sweep draws the output against one input number: the layer reads d_model = 3 numbers per token"
  -- ${FT} sweep ${DATA}/memory.json --from 0 --to 1)
cli_test("sweep needs --from and --to" 2 EMPTY "^error: --from is required" -- ${FT} sweep ${DATA}/abs_relu.json --to 1)
cli_test("sweep refuses from above to" 2 EMPTY "^error: --from: expected finite numbers with --from below --to" -- ${FT} sweep ${DATA}/abs_relu.json --from 2 --to 1)
# GELU(x) = x·Φ(x) is below 0 for every x < 0: position 1's two negative scores (units 2 and 5)
# stay small negatives after it, marked ▁, not drawn as on.
# A gated unit explained step by step: silu(-0.1441) = -0.1441 × σ(-0.1441) = -0.1441 × 0.4640 =
# -0.0669, and the product with up = -0.6006 is 0.0402, the value fed to W2.
cli_test("run --unit on a SwiGLU layer shows silu(gate), up and their product" 0
  "= -0.1441 activated\\[0\\]\\[5\\] = silu\\(gate\\[0\\]\\[5\\]\\) = silu\\(-0.1441\\) = -0.0669 up\\[0\\]\\[5\\] = normed · column 5 of Wu = -0.6006 product\\[0\\]\\[5\\] = activated × up = \\(-0.0669\\) × \\(-0.6006\\) = 0.0402 fed to W2: 0.0402" EMPTY
  -- ${FT} run --checkpoint ${INPUTS}/checkpoints/llama --layer 0 --input ${INPUTS}/checkpoints/x.npy --unit 5)
cli_test("run --bars marks GELU's small negatives apart from on and off" 0
  "▁ a small negative value that GELU passes.*position 1 +hidden +│▓▓░▓▓░▓▓│ +activated +│▓▓▁▓▓▁▓▓│" EMPTY
  -- ${FT} run ${DATA}/walkthrough.json --bars --detail values --color never)
cli_test("run --bars draws the memory's hidden vectors before and after ReLU" 0
  "Paris \\+ country\\? hidden │▓░│ activated │▓░│ .*Paris only hidden │░░│ activated │░░│" EMPTY
  -- ${FT} run ${DATA}/memory.json --bars --detail values --color never)
cli_test("run --format json names the command line's changes" 0
  "^\\{ \"title\": \"A key-value memory built by hand\", \"changes\": \\[ ?\"activation = gelu \\(--activation\\)\" ?\\]" EMPTY
  -- ${FT} run ${DATA}/memory.json --activation gelu --format json)
cli_test("sweep --format html marks each bend on the drawn curve" 0 "<title>unit 0 \\(x > 0\\)|<title>unit 0 at x = 0</title>" EMPTY
  -- ${FT} sweep ${DATA}/abs_relu.json --from -1 --to 1 --format html)
cli_test("quiz: a huge line and control bytes in the answers are echoed escaped and cut short" 0
  "hidden\\[1\\] = \\? > 7777777777[7]* ?… .*hidden\\[1\\] = \\? > \\\\u0000\\\\u001b\\[31m .*> 1 ✓ right" EMPTY
  --stdin ${INPUTS}/quiz/hostile.txt -- ${FT} quiz ${DATA}/lesson_hand.json --color never)
# By hand (seed 003's layer, target [6, 5]): g = y − target = [7, 5] − [6, 5] = [1, 0], so
# dW2[2][0] = activated[2] × g[0] = 3 × 1, and d_hidden[3] = d_activated[3] × relu'(−1) = 2 × 0.
cli_test("grad's page explains a gradient cell with the sum the text view writes" 0
  "data-how=\"dW2\\[2\\]\\[0\\] = 3×1 = 3.0000\".*data-how=\"d_hidden\\[3\\] = d_activated × act&#39\\;\\(-1\\) = 2 × 0 = 0.0000\"" EMPTY
  -- ${FT} grad ${DATA}/lesson_hand.json --format html)

# Robustness, round 3
cli_test("sweep names the range that overflowed, not a --step never given" 2 EMPTY
  "^error: --from: the range from -1e\\+308 to 1e\\+308 is wider than a double can hold\; narrow --from and --to$"
  -- ${FT} sweep ${DATA}/abs_relu.json --from -1e308 --to 1e308)
cli_test("--embedding refuses an empty item" 2 EMPTY "^error: --embedding: an empty item in \"1,,2\"\; separate the items by single commas"
  -- ${FT} run --checkpoint ${INPUTS}/checkpoints/gpt2 --layer 0 --embedding 1,,2)
cli_test("--at refuses a trailing comma" 2 EMPTY "^error: --at: an empty item in \"1,\""
  -- ${FT} gelu-table --at=1,)
# tokenize: the ids a model reads, and its errors
set(TOKENIZERS ${INPUTS}/tokenizers)
cli_test("tokenize lists each token's id, spelling and text" 0 "1 [0-9]+ Ġcapital \" capital\"" EMPTY
  -- ${FT} tokenize --tokenizer ${TOKENIZERS}/gpt2_like.json "the capital")
cli_test("tokenize --format json gives the text, the ids and the tokens" 0
  "\"tokens\": \\[[^]]*\"\\[CLS\\]\",[^]]*\"un\",[^]]*\"##aff\"" EMPTY
  -- ${FT} tokenize --tokenizer ${TOKENIZERS}/bert_uncased.json --format json "Unaffable")
cli_test("tokenize names a directory with no tokenizer" 2 EMPTY "^error: .*: no tokenizer: expected tokenizer.json, or vocab.json and merges.txt$"
  -- ${FT} tokenize --checkpoint ${INPUTS} "x")
cli_test("tokenize names an unsupported stage and its JSON path" 2 EMPTY "^error: .*bad_normalizer.json: normalizer.type: unsupported normalizer \"Precompiled\"$"
  -- ${FT} tokenize --tokenizer ${INPUTS}/bad_normalizer.json "x")
cli_test("tokenize refuses text that is not UTF-8" 2 EMPTY "^error: TEXT: the text is not UTF-8: byte 0 \\(0xFF\\) starts no character$"
  -- bash -c "exec \"$0\" tokenize --tokenizer \"$1\" $'\\xff'" ${FT} ${TOKENIZERS}/gpt2_like.json)
# A tokenizer file past 64 MiB is refused on its size alone (a sparse file costs no disk), and no
# option raises that limit, so the message names none; a directory is named for what was expected.
cli_test("tokenize refuses a tokenizer.json over 64 MiB before reading it" 2 EMPTY
  "^error: .*/big/tokenizer.json: the file is 67108865 bytes, larger than the limit of 67108864 bytes$"
  -- bash -c "mkdir -p \"$1/big\" && truncate -s 67108865 \"$1/big/tokenizer.json\" && exec \"$0\" tokenize --tokenizer \"$1/big/tokenizer.json\" x"
     ${FT} ${CMAKE_CURRENT_BINARY_DIR}/cli-tokenizer-limit)
cli_test("tokenize names a directory given as the tokenizer file" 2 EMPTY
  "^error: .*: is a directory\; expected a tokenizer.json file$"
  -- ${FT} tokenize --tokenizer ${INPUTS} "x")

# Prompts: the shipped model (data/models/capitals), a prompt run up to a layer, and what that
# layer's FFN did to the prediction. The bad inputs: one line, exit 2, nothing on stdout.
set(CAPITALS ${DATA}/models/capitals)
cli_test("run --prompt shows the tokens, the layer's FFN, the lens, the prediction and the units that wrote it" 0
  "The prompt's tokens .* 4 +259 +\"Ġis\" +\" is\" .*Layer 0's FFN on the prompt.*The logit lens.*The prediction .* 1 +\" Paris\" .*The units that wrote \" Paris\".*--ablate [0-9]+,[0-9]+,[0-9]+,[0-9]+,[0-9]+"
  EMPTY -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --detail summary --color never)
# The issue's learner's units: 172, 84 and 28 write " Paris" most; only 6 of layer 0's 256 fire at "The".
cli_test("run --prompt --unit adds the unit's value at every token, and the vocabulary view pins it and the top writers" 0
  "Unit 172 at every token +fed to W2 +\"The\" -0.0004, .* \" is\" 1.5736 .*\"The\": fired most 24 \\(4.2407\\), 215 \\(1.5606\\), 145 \\(0.4172\\), 185 \\(0.2166\\), +76 \\(0.0108\\), 198 \\(0.0078\\) +\"The\": only 6 of 256 units fired .*What the units say in the vocabulary .* unit 172 promotes \" F\" .* unit 84 promotes .* unit 28 promotes .*… [0-9]+ more of the units that fired \\(--full shows them all\\)"
  EMPTY -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --unit 172 --color never)
cli_test("run --prompt --unit adds the unit's attribution after the largest when it is not among them" 0
  "The units that wrote \" Paris\" .* unit 172 +1.5736 +\\+1.4030 .* unit 24 +0.0000 +\\+0.0000 .*To test it"
  EMPTY -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --unit 24 --detail summary --color never)
cli_test("run --prompt --ablate shows the prediction before and after the knock-out" 0
  "The knock-out Unit 1, unit 2 of layer 1, set to 0 for every token: .*token +probability +change +logit +change"
  EMPTY -- ${FT} run --checkpoint ${CAPITALS} --layer 1 --prompt "The capital of France is" --ablate 1 --ablate 2 --detail summary --color never)
# What a learner reads closely on the shipped model. Layer 0's units push " Paris" by 8.71 in all
# (run --layer 0 sums them); the layer named here is found from each FFN's output less b2, and agrees.
cli_test("run --prompt at a layer that does not write the prediction says so and names the layer that does" 0
  "All 256 units together push it by -0\\.27\; .*Layer 1's FFN does not write \" Paris\": its units together push it by -0\\.27, so knocking out its largest would test nothing\\. The FFN that pushes it most is layer 0's, by \\+8\\.71: see its units with --layer 0\\.$"
  EMPTY -- ${FT} run --checkpoint ${CAPITALS} --layer 1 --prompt "The capital of France is" --detail summary --color never)
cli_test("run --prompt at a layer that does not write the prediction suggests no knock-out" 0
  "!--ablate" EMPTY -- ${FT} run --checkpoint ${CAPITALS} --layer 1 --prompt "The capital of France is" --detail summary --color never)
cli_test("run --prompt names a position once, even where a token repeats" 0
  "\" is\" \\(token 7\\) +before .*its next token after \" is\" \\(token 7\\), by logit"
  EMPTY -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital is the capital of France is" --full --detail summary --color never)
cli_test("run --prompt --format markdown writes hidden > 0 as it reads, with no entity" 0
  "\\(hidden > 0\\)" EMPTY -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --detail summary --format markdown)
cli_test("the vocabulary view's JSON lists only positive scores under promotes and negative under suppresses" 0
  "!\"promotes\": \\[[^]]*\"score\": -|\"suppresses\": \\[[^]]*\"score\": [0-9]"
  EMPTY -- ${FT} run --checkpoint ${INPUTS}/checkpoints/gpt2 --layer 1 --word " Paris" --format json)
cli_test("the vocabulary view's JSON has scores under both lists on a small vocabulary" 0
  "\"promotes\": \\[ \\{ \"id\": [0-9]+, \"score\": 0\\.[0-9]+.*\"suppresses\": \\[ \\{ \"id\": [0-9]+, \"score\": -0\\.[0-9]+"
  EMPTY -- ${FT} run --checkpoint ${INPUTS}/checkpoints/gpt2 --layer 1 --word " Paris" --format json)
cli_test("--bars on a sparse real layer marks a group on when any unit is: \"The\" fires unit 24 (4.24), mark 4 of 6 units each" 0
  "\"The\" +hidden +│░░░░▓" EMPTY -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --bars --color never)
cli_test("--detail summary --bars keeps the bars" 0
  "Which units are on, before and after GELU .*one mark per 6 units, ▓ when any of them is on \"The\" +hidden +│░░░░▓"
  EMPTY -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --bars --detail summary --color never)
# docs/guide.md: for Indonesia layer 1's FFN pushes the capital about as hard as layer 0's; for Iraq nearly.
cli_test("the guide's numbers: layer 0's units push \" Jakarta\" by 3.92" 0 "\"total\": 3\\.918" EMPTY
  -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of Indonesia is" --format json)
cli_test("the guide's numbers: layer 1's units push \" Jakarta\" by 3.95" 0 "\"total\": 3\\.947" EMPTY
  -- ${FT} run --checkpoint ${CAPITALS} --layer 1 --prompt "The capital of Indonesia is" --format json)
cli_test("the guide's numbers: layer 1's units push \" Baghdad\" by 4.09" 0 "\"total\": 4\\.089" EMPTY
  -- ${FT} run --checkpoint ${CAPITALS} --layer 1 --prompt "The capital of Iraq is" --format json)
cli_test("run --prompt-file reads the prompt from a file, its last line break dropped" 0
  "\"The capital of France is\": 5 tokens"
  EMPTY -- ${FT} run --checkpoint ${CAPITALS} --layer 1 --prompt-file ${INPUTS}/prompt/france.txt --detail summary)
cli_test("run --prompt --format json has the prompt, input, steps, lens, prediction and baseline_prediction" 0
  "\"prompt\": \\{ \"text\": \"The capital of France is\", \"token_ids\": \\[267, 270, 263, 529, 259\\].*\"input\": \\[.*\"steps\": \\[.*\"lens\": \\[ \\{ \"token\": 0, \"before\": .*\"prediction\": \\{ \"position\": 4, \"top\": .*\"baseline_prediction\": "
  EMPTY -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --ablate 3 --format json)
cli_test("run --prompt --ablate's JSON says its steps are the unchanged layer's, and names the units set to 0" 0
  "\"ablated\": \\[ \\{ \"unit\": 3 \\}, \\{ \"unit\": 5 \\} \\], \"steps_of\": \"unchanged\""
  EMPTY -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --ablate 3,5 --format json)
cli_test("run --prompt --format markdown is the same walkthrough in Markdown" 0
  "^# \"The capital of France is\" through layer 0 of a gpt2 checkpoint .*## The logit lens.*## The prediction"
  EMPTY -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --format markdown --detail summary)
cli_test("run --prompt --format html is one page" 0 "^<!DOCTYPE html>.*The knock-out.*</html>$"
  EMPTY -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --ablate 3 --format html)
cli_test("run --prompt-file with only a line break is an empty prompt, refused" 2 EMPTY
  "^error: .*empty.txt: --prompt-file: the prompt is empty\; give some text"
  -- ${FT} run --checkpoint ${CAPITALS} --prompt-file ${INPUTS}/prompt/empty.txt)
cli_test("run --prompt longer than the position table is refused" 2 EMPTY
  "^error: .*capitals: --prompt: the prompt is [0-9]+ tokens\; the model reads at most 64\; shorten it$"
  -- ${FT} run --checkpoint ${CAPITALS} --prompt "a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a")
cli_test("run --prompt-file of 1 MB is refused for its length before its trace is sized" 2 EMPTY
  "^error: .*capitals: --prompt-file: the prompt is [0-9]{3},[0-9]{3} tokens\; the model reads at most 64\; shorten it$"
  -- bash -c "mkdir -p \"$2\" && yes 'The capital of France is Paris, and 1,234 people live there!' | head -c 1048576 >\"$2/long.txt\" && exec \"$0\" run --checkpoint \"$1\" --layer 0 --prompt-file \"$2/long.txt\""
     ${FT} ${CAPITALS} ${CMAKE_CURRENT_BINARY_DIR}/cli-long-prompt)
# Text that is not UTF-8, in each of its forms: the option and the offset of the first bad byte named.
foreach(bad "\\xff\\xfe|0|FF" "The \\xed\\xa0\\x80|4|ED" "ab\\xc0\\xaf|2|C0" "\\xe0\\x80\\x80|0|E0" "x\\xf4\\x90\\x80\\x80|1|F4"
            "Paris\\xf8\\x88\\x80\\x80\\x80|5|F8" "is \\xc3|3|C3")
  string(REPLACE "|" ";" parts "${bad}")
  list(GET parts 0 text)
  list(GET parts 1 offset)
  list(GET parts 2 byte)
  cli_test("run --prompt $'${text}' names the option and byte ${offset}" 2 EMPTY
    "^error: --prompt: the text is not UTF-8: byte ${offset} \\(0x${byte}\\) starts no character$"
    -- bash -c "exec \"$0\" run --checkpoint \"$1\" --layer 0 --prompt $'${text}'" ${FT} ${CAPITALS})
endforeach()
cli_test("run --prompt-file that is not UTF-8 names the file, the option and the byte" 2 EMPTY
  "^error: .*bad.txt: --prompt-file: the text is not UTF-8: byte 6 \\(0xC3\\) starts no character$"
  -- bash -c "mkdir -p \"$2\" && printf 'Paris \\303(\\n' >\"$2/bad.txt\" && exec \"$0\" run --checkpoint \"$1\" --layer 0 --prompt-file \"$2/bad.txt\""
     ${FT} ${CAPITALS} ${CMAKE_CURRENT_BINARY_DIR}/cli-bad-prompt)
# One rule for every whole number of the command line: no leading zero, whatever the option.
cli_test("run --ablate refuses a leading zero, as --layer does" 2 EMPTY
  "^error: --ablate: expected a unit as J, L:J for unit J of layer L, or L:\\* for layer L's whole FFN \\(E:J and L:E:J for unit J of expert E in a Mixture of Experts\\), in decimal digits with no leading zero, comma-separated\; got \"03\"$"
  -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --ablate=03)
cli_test("run --ablate refuses a leading zero in an expert's unit" 2 EMPTY "^error: --ablate: .*got \"1:07\"$"
  -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --ablate 2,1:07)
cli_test("run --layer refuses 00" 2 EMPTY "^error: --layer: expected a whole number from 0 to .*got \"00\""
  -- ${FT} run --checkpoint ${CAPITALS} --layer 00 --prompt "The capital of France is")
cli_test("run --set refuses an index with a leading zero" 2 EMPTY
  "^error: .*lesson_hand.json: input\\[01\\]: --set: expected a path such as .* an index is a whole number in brackets, with no leading zero$"
  -- ${FT} run ${DATA}/lesson_hand.json --set "input[01]=1")
# config.json sizes past any model's: the bound is stated.
cli_test("run --checkpoint states the bound num_attention_heads exceeds" 2 EMPTY
  "^error: .*/config.json: num_attention_heads: the number 4611686018427387904 is more than a size may be: at most 1,099,511,627,776 \\(2\\^40\\)$"
  -- bash -c "rm -rf \"$2\" && cp -r \"$1\" \"$2\" && sed -i 's/\"hidden_size\": 4,/\"hidden_size\": 4, \"num_attention_heads\": 4611686018427387904,/' \"$2/config.json\" && exec \"$0\" run --checkpoint \"$2\" --layer 0 --embedding 1"
     ${FT} ${CKPT}/llama ${CMAKE_CURRENT_BINARY_DIR}/cli-config-heads)
cli_test("run --checkpoint states the bound max_position_embeddings: 1e18 exceeds" 2 EMPTY
  "^error: .*/config.json: max_position_embeddings: the number 1e\\+18 is more than a size may be: at most 1,099,511,627,776 \\(2\\^40\\)$"
  -- bash -c "rm -rf \"$2\" && cp -r \"$1\" \"$2\" && sed -i 's/\"hidden_size\": 4,/\"hidden_size\": 4, \"max_position_embeddings\": 1e18,/' \"$2/config.json\" && exec \"$0\" run --checkpoint \"$2\" --layer 0 --embedding 1"
     ${FT} ${CKPT}/llama ${CMAKE_CURRENT_BINARY_DIR}/cli-config-positions)
cli_test("run --prompt with --layer past the last is refused" 2 EMPTY
  "^error: .*capitals: --layer: layer 2 is out of range: the checkpoint has 2 layers \\(0 to 1\\)$"
  -- ${FT} run --checkpoint ${CAPITALS} --layer 2 --prompt "The capital of France is")
cli_test("run --ablate past d_ff is refused" 2 EMPTY "^error: .*capitals: --ablate: unit 9999 is out of range: layer 0 has d_ff = [0-9]+ units"
  -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --ablate 9999)
cli_test("run --ablate that is not a unit is refused, naming every form a unit takes" 2 EMPTY "^error: --ablate: expected a unit as J, L:J for unit J of layer L, or L:\\* .* got \"x1\"$"
  -- ${FT} run --checkpoint ${CAPITALS} --prompt "The capital of France is" --ablate 3,x1)
cli_test("run --ablate with an expert on a dense layer is refused" 2 EMPTY "^error: .*--ablate: layer 1 is dense: name a unit as J, without an expert\; got 2:3$"
  -- ${FT} run --checkpoint ${CAPITALS} --prompt "The capital of France is" --ablate 1:2:3)
cli_test("run --layer all --ablate L:E:J on a dense model names the layer and the expert it lacks" 2 EMPTY
  "^error: .*capitals: --ablate: \"1:2:3\": layer 1 is dense: name a unit as J, without an expert\; got 2:3$"
  -- ${FT} run --checkpoint ${CAPITALS} --prompt "The capital of France is" --layer all --ablate 1:2:3)
cli_test("run --ablate without a prompt is refused" 2 EMPTY "^error: --ablate: knocks units out of a forward pass: give --prompt or --prompt-file too$"
  -- ${FT} run --checkpoint ${CAPITALS} --embedding 3 --ablate 1)
cli_test("run --prompt with --word is a usage error" 2 EMPTY "^error: --word excludes --prompt"
  -- ${FT} run --checkpoint ${CAPITALS} --word " Paris" --prompt "x")
cli_test("run --prompt-file that does not exist names it" 2 EMPTY "^error: .*nope.txt: cannot open the file"
  -- ${FT} run --checkpoint ${CAPITALS} --prompt-file ${INPUTS}/prompt/nope.txt)
cli_test("run --prompt --versus shows the attribution to the difference and the lens's terms" 0
  "units that wrote \" Paris\" − \" Tokyo\".*rescaling: .*the lens's change" EMPTY
  -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --versus " Tokyo" --detail summary)
cli_test("run --ablate-top 1 names the one unit it knocks out, not a list" 0 "The top unit by the push above knocked out \\(set to 0" EMPTY
  -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --ablate-top 1 --color never --width 200)
cli_test("run --ablate-top 2 names its two units" 0 "The top 1 and 2 units by the push above knocked out together" EMPTY
  -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --ablate-top 2 --color never --width 200)
cli_test("units of a layer above the first says the layers below have added the other tokens" 0
  "where attention and the layers below have added the other tokens" EMPTY
  -- ${FT} units --checkpoint ${DATA}/models/atlas --layer 2 --unit 5 --width 200)
cli_test("run --prompt --ablate-top shows the knock-out sweep as a curve" 0
  "The knock-out sweep.* 0 none 0\\.8862 .* 5 \\+ unit 203 0\\.2276 .* 10 \\+ unit 101 0\\.0646" EMPTY
  -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --ablate-top 10 --detail summary)
cli_test("run --prompt --ablate-top's text sweep gives each unit's own P without it and the top token at each step" 0
  "The knock-out sweep.* k knocked out P\\(\" Paris\"\\) alone top token then 0 none 0\\.8862 \" Paris\" 0\\.8862 .* 1 \\+ unit 172 0\\.7893 0\\.7893 \" Paris\" 0\\.7893 "
  EMPTY -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --ablate-top 3 --detail summary)
cli_test("run --prompt --ablate-top does not suggest --ablate: the sweep has knocked the units out" 0
  "!To test it, knock them out" EMPTY
  -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --ablate-top 3 --detail summary)
cli_test("run --prompt --ablate-top --format html draws the sweep as a curve" 0
  "The knock-out sweep.*<th scope=\"col\">alone</th>.*>units knocked out</text><polyline class=\"curve\""
  EMPTY -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --ablate-top 3 --format html)
cli_test("run --prompt --ablate-random gives the random baseline's median and quartiles beside the top K" 0
  "Against chance: 3 of layer 0's [0-9]+ active units \\(activation above 0 at the last token\\), drawn at random 4 times \\(seed 1\\).* the top 3 by push +0\\.[0-9]+ +3 random active \\(median\\) +0\\.[0-9]+ +0\\.[0-9]+ +0\\.[0-9]+"
  EMPTY -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --ablate-random 3 --samples 4 --detail summary --color never)
cli_test("run --prompt --ablate-random on a Mixtral layer draws the routed experts' active units" 0
  "3 random active \\(median\\) +0\\.[0-9]+ +0\\.[0-9]+ +0\\.[0-9]+" EMPTY
  -- ${FT} run --checkpoint ${INPUTS}/checkpoints/mixtral_whole --layer 1 --prompt abcde --ablate-random 3 --samples 4 --detail summary --color never)
cli_test("run --prompt --ablate-random more than the active units says both" 2 EMPTY
  "^error: --ablate-random: knocks out 200 random active units, but layer 0 has [0-9]+ active at the last token \\(of 256 units\\)$"
  -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --ablate-random 200)
cli_test("run --prompt --ablate with a layer out of range is refused" 2 EMPTY
  "^error: .*capitals: --ablate: layer 7 is out of range: the checkpoint has 2 layers \\(0 to 1\\)$"
  -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --ablate 7:5)
cli_test("run --prompt --ablate with a unit of another layer out of range is refused" 2 EMPTY
  "^error: .*capitals: --ablate: unit 999 is out of range: layer 1 has d_ff = 256 units \\(0 to 255\\)$"
  -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --ablate 1:999)
cli_test("run --prompt --ablate of a whole FFN beside one of its units is refused" 2 EMPTY
  "^error: .*capitals: --ablate: 1:\\* knocks out layer 1's whole FFN, and a unit of it is knocked out too\; give the layer or its units$"
  -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --ablate 1:*,1:44)
cli_test("run --prompt --ablate across layers names each layer's knock-out" 0
  "knocked out +unit 168 of layer 0\; unit 44 of layer 1\; layer 1's whole FFN|knocked out +unit 168 of layer 0\; layer 1's"
  EMPTY -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --ablate 168,1:* --detail summary --color never)
# The page: the stream's norms on a one-hue scale from 0; the units and the vocabulary as tables, not
# preformatted text (the written-out arithmetic may stay monospaced).
cli_test("run --prompt --format html colours the stream's norms from 0, one hue" 0
  "<th scope=\"col\">largest</th>.*<span>0</span><span class=\"ramp positive\"></span><span>[0-9.]+</span><span>each cell redder for a larger norm</span>"
  EMPTY -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --format html)
cli_test("run --prompt --format html shows the units and their vocabulary as tables" 0
  "<th scope=\"col\">fired most \\(value fed to W2\\)</th>.*<th scope=\"col\">promotes</th><th scope=\"col\">suppresses</th>.*<th scope=\"row\" class=\"row\">172</th>"
  EMPTY -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --format html)
cli_test("run --prompt --format html leaves no list of units or tokens as preformatted text" 0
  "!<pre class=\"arith\">[^<]*(promotes|fired most)"
  EMPTY -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --format html)
cli_test("run --ablate-top without a prompt is refused" 2 EMPTY "^error: --ablate-top: knocks units out of a forward pass"
  -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --embedding 3 --ablate-top 2)
cli_test("run --ablate-top beyond the layer's units is refused" 2 EMPTY
  "^error: .*capitals: --ablate-top: knocks out the top 999 units, but layer 0 has 256$"
  -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --ablate-top 999)
# Interventions at a position (--intervene): what was done and where, in every view; each bad input
# one line naming the option, exit 2, nothing on stdout.
cli_test("run --intervene names what was done and where in the heading and the knock-out" 0
  "changed +unit 172 at \" is\" \\(token 4\\) scaled by 0\\.5\; unit 84 at every token.*set to its mean over corpus\\.txt, 0\\.0120 \\(3,517 tokens\\), in layer 0.*The knock-out.*In layer 0, unit 172 at \" is\" \\(token 4\\) scaled by 0\\.5\;.*unchanged → changed\\. The top prediction stays \" Paris\" \\(0\\.8862 → 0\\.7423\\)"
  EMPTY -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --intervene 172@4*0.5 --intervene 84=mean --detail summary --color never)
cli_test("run --intervene at every token with a value of 0 is --ablate's knock-out" 0
  "The top prediction stays \" Paris\" \\(0\\.8862 → 0\\.7893\\)" EMPTY
  -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --intervene 172=0 --detail summary --color never)
cli_test("run --layer N --intervene takes a dense unit written with its layer, L:J, as --ablate does" 0
  "The top prediction stays \" Paris\" \\(0\\.8862 → 0\\.7893\\)" EMPTY
  -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --intervene 0:172=0 --detail summary --color never)
cli_test("run --intervene's JSON has each change, the corpus of a mean, and the changed prediction" 0
  "\"interventions\": \\[ \\{ \"unit\": 172, \"token\": 4, \"kind\": \"scale\", \"value\": 0\\.5, \"text\": \"172@last\\*0\\.5\" \\}, \\{ \"unit\": 84, \"token\": null, \"kind\": \"mean\", \"value\": 0\\.0119[0-9]+, \"mean_over\": \\{ \"corpus\": \"corpus\\.txt\", \"texts\": 450, \"tokens\": 3517 \\}, \"text\": \"84=mean\" \\} \\], \"steps_of\": \"unchanged\", \"changes\": "
  EMPTY -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --intervene 172@last*0.5 --intervene 84=mean --format json)
cli_test("run --intervene as Markdown and as a page names the change" 0 "scaled by 0\\.5.*</html>$"
  EMPTY -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --intervene 172@4*0.5 --format html)
cli_test("run --intervene --corpus takes the mean over the file given" 0 "set to its mean over .*france\\.txt, [-0-9.]+ \\(5 tokens\\)"
  EMPTY -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --intervene 172=mean --corpus ${INPUTS}/prompt/france.txt --detail summary --color never)
foreach(bad "172@9=0|\"172@9=0\": token 9 is out of range: the prompt has 5 tokens \\(0 to 4\\)"
            "9999@4=0|\"9999@4=0\": unit 9999 is out of range: layer 0 has d_ff = 256 units \\(0 to 255\\)"
            "1:2@4=0|\"1:2@4=0\": the unit is one of layer 1, and this run changes layer 0 alone"
            "0:1:2@4=0|\"0:1:2@4=0\": layer 0 is dense: name a unit as J"
            "172*inf|\"172\\*inf\": the factor \"inf\" is not a finite number"
            "172@4*1e999|\"172@4\\*1e999\": the factor \"1e999\" is not a finite number"
            "172=nan|\"172=nan\": the value \"nan\" is not a finite number"
            "172@4=abc|\"172@4=abc\": the value \"abc\" is not a number"
            "172@x=0|\"172@x=0\": the token \"x\" is not a position from 0 or last"
            "x@4=0|\"x@4=0\": the unit \"x\" is not J, E:J or L:E:J"
            "172@4|\"172@4\": expected UNIT\\[@TOKEN\\] then =VALUE, \\*FACTOR or =mean")
  string(REPLACE "|" ";" parts "${bad}")
  list(GET parts 0 spec)
  list(GET parts 1 message)
  cli_test("run --intervene ${spec} is refused in one line naming the option" 2 EMPTY "^error: (.*capitals: )?--intervene: ${message}"
    -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --intervene ${spec})
endforeach()
cli_test("run --intervene so large the run cannot go on names the change" 2 EMPTY
  "^error: --intervene: the run with the units changed failed: layer 1's FFN, norm\\[0\\]: the token's variance overflowed"
  -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --intervene 172=1e200)
cli_test("run --intervene without a prompt is refused" 2 EMPTY "^error: --intervene: changes units in a forward pass: give --prompt"
  -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --embedding 3 --intervene 1=0)
cli_test("run --corpus without --intervene is refused" 2 EMPTY "^error: --corpus: is what --intervene UNIT=mean takes its mean over"
  -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --corpus ${INPUTS}/prompt/france.txt)
cli_test("run --intervene UNIT=mean without a corpus beside the model says to give --corpus" 2 EMPTY
  "^error: .*no_corpus: --corpus: no corpus given to take a mean over, and the checkpoint has no corpus.txt beside it\; give a corpus file"
  -- bash -c "rm -rf \"$2\" && mkdir -p \"$2\" && cp \"$1\"/config.json \"$1\"/model.safetensors \"$1\"/tokenizer.json \"$2\" && exec \"$0\" run --checkpoint \"$2\" --layer 0 --prompt 'The capital of France is' --intervene 1=mean"
     ${FT} ${CAPITALS} ${CMAKE_CURRENT_BINARY_DIR}/cli-no_corpus)
cli_test("run --intervene UNIT=mean on a GGUF file finds the corpus.txt beside it, as units does" 0
  "unit 84 at every token.*set to its mean over corpus\\.txt, 0\\.0120 \\(3,517 tokens\\)" EMPTY
  -- bash -c "d=\"$3/cli-gguf_corpus\"\; rm -rf \"$d\" && mkdir -p \"$d\" && python3 \"$1\" \"$2\" \"$d/cap.gguf\" && cp \"$2/corpus.txt\" \"$d/\" && exec \"$0\" run --checkpoint \"$d/cap.gguf\" --layer 0 --prompt 'The capital of France is' --intervene 84=mean --detail summary --color never"
     ${FT} ${CMAKE_CURRENT_SOURCE_DIR}/inputs/gguf/convert.py ${CAPITALS} ${CMAKE_CURRENT_BINARY_DIR})
# Every layer in one view (--layer all).
cli_test("run --layer all shows every layer's lens, push and units at the last token, and the lens grid" 0
  "Every layer at \" is\" \\(token 4\\).* 0 +0\\.0075 +0\\.8787 +\\+8\\.71 +\" Paris\" 0\\.8787.* 1 +0\\.8789 +0\\.8862 +-0\\.27 .*Layer 0's FFN pushes \" Paris\" most, by \\+8\\.71 logits.*for +172 \\+1\\.40, 84 \\+1\\.35.*The lens at every token and layer.*\" is\" +\" Paris\" 0\\.88 +\" Paris\" 0\\.89.*The prediction"
  EMPTY -- ${FT} run --checkpoint ${CAPITALS} --layer all --prompt "The capital of France is" --color never)
cli_test("run --layer all's JSON has each layer's lens, target, push and units, and the lens grid" 0
  "\"target\": \\{ \"id\": 716, \"token\": \" Paris\" \\}.*\"layers\": \\[ \\{ \"layer\": 0, \"lens_before\": \\[.*\"lens_after\": \\[.*\"target_before\": \\{ \"logit\": .*\"target_after\": .*\"push\": 8\\.71.*\"units\": \\[ \\{ \"unit\": 172, .*\"lens_grid\": \\[ \\["
  EMPTY -- ${FT} run --checkpoint ${CAPITALS} --layer all --prompt "The capital of France is" --format json)
cli_test("run --layer all shows each layer's units that pushed against the prediction beside those that pushed for it" 0
  "Layer 3: P\\(\" Paris\"\\) 0\\.8320 → 0\\.8493, the FFN's push -1\\.19 .* for +78 \\+0\\.11, .* against +15 -0\\.53, [0-9]+ -0\\.[0-9]+, "
  EMPTY -- ${FT} run --checkpoint ${DATA}/models/atlas --layer all --prompt "The capital of France is" --color never --width 200)
cli_test("run --layer all's JSON lists each layer's units against the prediction, most negative first" 0
  "\"layer\": 3, .*\"push\": -1\\.19[0-9]*, \"units\": \\[ \\{ \"unit\": 78, .*\\], \"against\": \\[ \\{ \"unit\": 15, \"activation\": [0-9.e-]+, \"score\": -0\\.5[0-9]+ \\}"
  EMPTY -- ${FT} run --checkpoint ${DATA}/models/atlas --layer all --prompt "The capital of France is" --format json)
cli_test("run --layer N shows the units that pushed against the prediction after those that pushed for it" 0
  "All 256 units together push it by 8\\.71\; the largest: .*unit 172 +1\\.5736 +\\+1\\.4030 .*The units that pushed against \" Paris\" most: unit +a_j \\(fed to W2\\) +logit of \" Paris\" unit [0-9]+ +-?[0-9.]+ +-0\\.[0-9]+ "
  EMPTY -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --color never --width 200)
cli_test("run --layer all as Markdown and as a page" 0 "^<!DOCTYPE html>.*The lens at every token and layer.*</html>$"
  EMPTY -- ${FT} run --checkpoint ${DATA}/models/atlas --layer all --prompt "The capital of France is" --format html)
cli_test("run --layer all without a prompt is refused" 2 EMPTY "^error: --layer: all shows every layer of a prompt's forward pass"
  -- ${FT} run --checkpoint ${CAPITALS} --layer all --embedding 3)
cli_test("run --layer all with --prompts is refused: the view is one prompt's" 2 EMPTY "^error: --layer: all shows every layer of one prompt: give --prompt or --prompt-file, not --prompts$"
  -- ${FT} run --checkpoint ${CAPITALS} --layer all --prompts ${DATA}/models/capitals/corpus.txt)
cli_test("run --layer all --ablate L:J changes units of any layers, and the heading says what it did" 0
  "changed +layer 1 unit 168, layer 0 unit 172\\*0.5. every reading below is of the changed run: P\\(\" Paris\"\\) 0\\.[0-9]+ → 0\\.[0-9]+" EMPTY
  -- ${FT} run --checkpoint ${DATA}/models/atlas --layer all --prompt "The capital of France is" --ablate 1:168 --intervene 0:172*0.5 --width 400)
# A layer of one unit over one token: each index out of range is named as the one index there is.
cli_test("run --set past a list of one names its one index" 2 EMPTY "^error: .*one_unit.json: weights.b1: --set: has 1 entry \\(index 0\\), so no \\[1\\]$"
  -- ${FT} run ${INPUTS}/one_unit.json --set weights.b1[1]=1)
cli_test("run --token past one token names its one index" 2 EMPTY "^error: .*one_unit.json: --token: token 1 is out of range: the input has 1 token \\(index 0\\)$"
  -- ${FT} run ${INPUTS}/one_unit.json --token 1)
cli_test("quiz --unit past one unit names its one index" 2 EMPTY "^error: .*one_unit.json: --unit: unit 1 is out of range: the layer has d_ff = 1 hidden unit \\(0\\)$"
  -- ${FT} quiz ${INPUTS}/one_unit.json --unit 1)
cli_test("run --layer all --intervene L:J says the next token moved when it did" 0
  "changed +layer 1 unit 168=-20\\; every reading below is of the changed run: P\\(\" Paris\"\\) 0\\.8493 → 0\\.0008, the next token now \" language\"" EMPTY
  -- ${FT} run --checkpoint ${DATA}/models/atlas --layer all --prompt "The capital of France is" --intervene 1:168=-20 --width 400)
cli_test("run --layer all on a Mixtral writes each unit's push with its routing weight" 0
  "every unit's w · a_j · \\(W2\\[j\\] · g\\) / σ summed, g = γ ⊙ U, w its expert's routing weight and σ" EMPTY
  -- ${FT} run --checkpoint ${INPUTS}/checkpoints/mixtral_whole --layer all --prompt abcde --width 400 --color never)
cli_test("run --layer all on a dense model writes each unit's push without a routing weight" 0
  "every unit's a_j · \\(W2\\[j\\] · g\\) / σ summed, g = γ ⊙ U less its mean and σ" EMPTY
  -- ${FT} run --checkpoint ${DATA}/models/atlas --layer all --prompt "The capital of France is" --width 400)
cli_test("run --layer all --intervene L:E:J changes experts' units of any layers of a Mixtral" 0
  "changed +layer 0 unit 1:3\\*0\\.5, layer 1 unit 2:0=0\\; every reading below is of the changed run: P\\(\"g\"\\) 0\\.5556 → 0\\.6351, the next token still \"g\"" EMPTY
  -- ${FT} run --checkpoint ${INPUTS}/checkpoints/mixtral_whole --layer all --prompt abcde --intervene 0:1:3*0.5 --intervene 1:2:0=0 --width 400 --color never)
cli_test("run --layer all refuses an L:E:J whose expert the layer lacks" 2 EMPTY
  "^error: .*mixtral_whole: --intervene: \"1:9:3=0\": expert 9 is out of range: layer 1 has 4 experts \\(0 to 3\\)$"
  -- ${FT} run --checkpoint ${INPUTS}/checkpoints/mixtral_whole --layer all --prompt abcde --intervene 1:9:3=0)
cli_test("run --intervene refuses a unit of four parts" 2 EMPTY
  "^error: --intervene: \"1:2:3:4=0\": the unit \"1:2:3:4\" is not J, E:J or L:E:J\; expected UNIT"
  -- ${FT} run --checkpoint ${INPUTS}/checkpoints/mixtral_whole --layer all --prompt abcde --intervene 1:2:3:4=0)
cli_test("run --layer 1 refuses a unit L:E:J of another layer" 2 EMPTY
  "^error: .*mixtral_whole: --intervene: \"0:1:3=0\": the unit is one of layer 0, and this run changes layer 1 alone$"
  -- ${FT} run --checkpoint ${INPUTS}/checkpoints/mixtral_whole --layer 1 --prompt abcde --intervene 0:1:3=0)
cli_test("run --layer all --ablate L:E:J knocks out experts' units of any layers of a Mixtral" 0
  "changed +layer 0 unit 1:3, layer 1 unit 2:0\\; every reading below is of the changed run" EMPTY
  -- ${FT} run --checkpoint ${INPUTS}/checkpoints/mixtral_whole --layer all --prompt abcde --ablate 0:1:3 --ablate 1:2:0 --color never)
cli_test("run --layer all --ablate E:J on a Mixtral is refused: its unit names no layer" 2 EMPTY
  "^error: .*mixtral_whole: --ablate: unit 1:3 names no layer: in the view of every layer a unit is L:E:J, unit J of expert E of layer L \\(1:1:3\\)$"
  -- ${FT} run --checkpoint ${INPUTS}/checkpoints/mixtral_whole --layer all --prompt abcde --ablate 1:3)
cli_test("run --layer all --ablate L:* is refused: a whole FFN knocked out is one layer's view" 2 EMPTY
  "^error: --ablate: a whole FFN knocked out \\(L:\\*\\) is shown by one layer's view, not every layer's: give one layer for it$"
  -- ${FT} run --checkpoint ${CAPITALS} --layer all --prompt "The capital of France is" --ablate 1:*)
cli_test("run --layer all with --ablate of a unit without its layer is refused" 2 EMPTY
  "^error: .*capitals: --ablate: unit 3 names no layer: in the view of every layer a unit is L:J, unit J of layer L \\(1:3\\)$"
  -- ${FT} run --checkpoint ${CAPITALS} --layer all --prompt "The capital of France is" --ablate 3)
cli_test("run --layer all with --intervene on a unit without its layer is refused" 2 EMPTY "^error: .*capitals: --intervene: \"3=0\": the unit names no layer: in the view of every layer a unit is L:J, unit J of layer L \\(1:3\\)$"
  -- ${FT} run --checkpoint ${CAPITALS} --layer all --prompt "The capital of France is" --intervene 3=0)
cli_test("run --layer all with --ablate of a layer past the last is refused" 2 EMPTY "--ablate: \"2:3\": layer 2 is out of range"
  -- ${FT} run --checkpoint ${CAPITALS} --layer all --prompt "The capital of France is" --ablate 2:3)
# The pass traces each layer in turn and keeps its last row: the budget is one layer's trace, 5
# tokens × 1,283 numbers a token (GPT-2's x 64, norm 64 + mean, var, inv 3, expand 256, activate
# 256 + its z and tanh 512, contract 64, residual 64) = 6,415 of atlas's 4 layers.
cli_test("run --layer all's budget is one layer's trace, which its pass holds at a time" 2 EMPTY
  "^error: .*--prompt: tracing 5 tokens would keep 6,415 numbers, more than --max-elements 6,414;"
  -- ${FT} run --checkpoint ${DATA}/models/atlas --layer all --prompt "The capital of France is" --max-elements 6414)
cli_test("run --layer all runs within one layer's budget" 0 "Layer 3" EMPTY
  -- ${FT} run --checkpoint ${DATA}/models/atlas --layer all --prompt "The capital of France is" --max-elements 6415)
cli_test("run --layer takes a number or all, nothing else" 2 EMPTY "^error: --layer: expected a whole number from 0 to .*got \"every\""
  -- ${FT} run --checkpoint ${CAPITALS} --layer every --prompt "The capital of France is")
cli_test("run --versus that is not one token says how it splits" 2 EMPTY
  "^error: --versus: \" London\" is not one token: the tokenizer splits it into"
  -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --versus " London")
# " Paris" is the capitals model's prediction after the prompt (README's run): the difference is 0.
# A unit named twice is knocked out once: the whole output is --ablate 172's.
cli_test("run --ablate naming a unit twice knocks it out once, and names it once" 0 EMPTY EMPTY
  -- bash -c "diff <(\"$0\" run --checkpoint \"$1\" --layer 0 --prompt 'The capital of France is' --ablate 172,172 --detail summary) <(\"$0\" run --checkpoint \"$1\" --layer 0 --prompt 'The capital of France is' --ablate 172 --detail summary)"
  ${FT} ${CAPITALS})
# The prompt as given, two spaces and all: the tokenizer reads both (a lone "Ġ" token), so the
# heading must show both.
# (expect.sh folds runs of spaces: grep -F reads the line as printed)
cli_test("run --prompt shows the prompt with its own spaces" 0 EMPTY EMPTY
  -- bash -c "\"$0\" run --checkpoint \"$1\" --layer 0 --prompt 'The  capital of France is' --detail summary --color never | grep -qF 'prompt      \"The  capital of France is\": 6 tokens'"
  ${FT} ${CAPITALS})
cli_test("run --versus the prediction itself is refused" 2 EMPTY
  "^error: --versus: \" Paris\" is the prediction itself: z\\[target\\] − z\\[versus\\] would be 0"
  -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --versus " Paris")
cli_test("run --layer all --versus the prediction itself is refused" 2 EMPTY
  "^error: --versus: \" Paris\" is the prediction itself"
  -- ${FT} run --checkpoint ${CAPITALS} --layer all --prompt "The capital of France is" --versus " Paris")
cli_test("run --versus without a prompt is refused" 2 EMPTY "^error: --versus: compares two tokens' logits"
  -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --embedding 3 --versus " Tokyo")
cli_test("run --prompt without a tokenizer says what it looked for" 2 EMPTY
  "^error: .*no_tokenizer: no tokenizer: expected tokenizer.json, or vocab.json and merges.txt$"
  -- ${FT} run --checkpoint ${INPUTS}/prompt/no_tokenizer --prompt "The capital of France is")
# A tokenizer is read when a run needs one: the vocabulary names tokens for --input and --word
# whatever else is wrong with the tokenizer, and only a command that tokenizes reports it
# (tests/cli/tokenizer_case.sh writes each checkpoint, @CASE@ in the command).
set(CASE bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/tokenizer_case.sh)
set(CASES ${CMAKE_CURRENT_BINARY_DIR}/tokenizer_cases)
cli_test("run --input on a checkpoint whose vocab.json has no merges.txt names the vocabulary's tokens" 0
  "^Layer 1 of a gpt2 checkpoint.*What the units say in the vocabulary.* promotes .*\" Paris\"" EMPTY
  -- ${CASE} no_merges ${CASES}/input_no_merges ${INPUTS} ${FT} run --checkpoint @CASE@ --layer 1 --input ${INPUTS}/checkpoints/x.npy --color never)
cli_test("run --word on a checkpoint whose vocab.json has no merges.txt looks the word up" 0
  "The input is the token embedding's row 3 " EMPTY
  -- ${CASE} no_merges ${CASES}/word_no_merges ${INPUTS} ${FT} run --checkpoint @CASE@ --layer 1 --word " Paris" --color never)
cli_test("tokenize on a checkpoint whose vocab.json has no merges.txt names the missing file" 2 EMPTY
  "^error: .*word_no_merges_tokenize/merges.txt: missing: the merges of vocab.json's tokens are needed to split text \\(or a tokenizer.json\\)$"
  -- ${CASE} no_merges ${CASES}/word_no_merges_tokenize ${INPUTS} ${FT} tokenize --checkpoint @CASE@ Paris)
cli_test("run --input on a BERT whose WordPiece unk_token is not in its vocabulary names the vocabulary's tokens" 0
  "^Layer 0 of a bert checkpoint.*What the units say in the vocabulary.* promotes .*\"paris\"" EMPTY
  -- ${CASE} wordpiece_no_unk ${CASES}/input_no_unk ${INPUTS} ${FT} run --checkpoint @CASE@ --layer 0 --input ${INPUTS}/checkpoints/x.npy --color never)
cli_test("run --word on a BERT whose WordPiece unk_token is not in its vocabulary looks the word up" 0
  "The input is the token embedding's row 2 " EMPTY
  -- ${CASE} wordpiece_no_unk ${CASES}/word_no_unk ${INPUTS} ${FT} run --checkpoint @CASE@ --layer 0 --word paris --color never)
cli_test("tokenize with a WordPiece tokenizer.json whose unk_token is not in its vocabulary names the file and the key" 2 EMPTY
  "^error: .*tokenize_no_unk/tokenizer.json: model.unk_token: \"\\[UNK\\]\" is not in the vocabulary$"
  -- ${CASE} wordpiece_no_unk ${CASES}/tokenize_no_unk ${INPUTS} ${FT} tokenize --checkpoint @CASE@ paris)
cli_test("run --embedding on a Llama 3 GGUF (pre llama-bpe) runs and names the row's token" 0
  "^Layer 1 of a gpt2 checkpoint .*embedding_llama_bpe/ ?model.gguf\\).* \"Paris\" \\(id 2\\) " EMPTY
  -- ${CASE} gguf:llama-bpe ${CASES}/embedding_llama_bpe ${INPUTS} ${FT} run --checkpoint @CASE@ --layer 1 --embedding 2 --color never)
cli_test("tokenize on a Llama 3 GGUF (pre llama-bpe) adds the bos token and keeps whole-word tokens" 0
  "^3 tokens # +id +spelling +text 0 +7 +<\\|endoftext\\|> +\"<\\|endoftext\\|>\" 1 +1 +hello +\"hello\" 2 +3 +ĠParis +\" Paris\"$" EMPTY
  -- ${CASE} gguf:llama-bpe:7 ${CASES}/tokenize_llama_bpe ${INPUTS} ${FT} tokenize --checkpoint @CASE@ "hello Paris")
cli_test("run --word on a GGUF whose pre-tokenizer ffn-trace does not know runs" 0 "The input is the token embedding's row 3 " EMPTY
  -- ${CASE} gguf:no-such-pre ${CASES}/word_unknown_pre ${INPUTS} ${FT} run --checkpoint @CASE@ --layer 1 --word " Paris" --color never)
cli_test("tokenize on a GGUF whose pre-tokenizer ffn-trace does not know names it" 2 EMPTY
  "^error: .*model.gguf: tokenizer.ggml.pre: unknown pre-tokenizer \"no-such-pre\": ffn-trace splits text as llama.cpp's [0-9]+ pre-tokenizers do .*the nearest is \"[a-z0-9-]+\"$"
  -- ${CASE} gguf:no-such-pre ${CASES}/tokenize_unknown_pre ${INPUTS} ${FT} tokenize --checkpoint @CASE@ "hello Paris")
cli_test("run --embedding on a checkpoint whose tokenizer.json is malformed runs, its rows named by id" 0
  "^Layer 0 of a gpt2 checkpoint .* id 1 " EMPTY
  -- ${FT} run --checkpoint ${INPUTS}/prompt/bad_tokenizer --layer 0 --embedding 1 --color never)
cli_test("run --word on a checkpoint whose tokenizer.json is malformed names the file" 2 EMPTY "^error: .*bad_tokenizer/tokenizer.json: .*malformed JSON"
  -- ${FT} run --checkpoint ${INPUTS}/prompt/bad_tokenizer --layer 0 --word " Paris")
cli_test("run --prompt with a malformed tokenizer.json names the file" 2 EMPTY "^error: .*bad_tokenizer/tokenizer.json: .*malformed JSON"
  -- ${FT} run --checkpoint ${INPUTS}/prompt/bad_tokenizer --prompt "The capital of France is")
cli_test("run --prompt on a checkpoint without a tensor the forward pass needs names it" 2 EMPTY
  "^error: .*missing_tensor/model.safetensors: wpe.weight: missing: .*position embedding$"
  -- ${FT} run --checkpoint ${INPUTS}/prompt/missing_tensor --prompt "The capital of France is")
# locate: causal tracing on the shipped model. The bad inputs: one line, exit 2, nothing on stdout.
set(LOCATE ${FT} locate --checkpoint ${CAPITALS} --prompt "The capital of France is")
cli_test("locate shows the noise, three grids with the subject marked, and the strongest FFN cell in a sentence" 0
  "noise +ν · ε added to each subject token's embedding row, ν = 3σ = [0-9.]+, ε ~ N\\(0, I\\)\; σ = [0-9.]+ is the standard deviation of all 93,312 entries of the token embedding wte.weight .*Restoring the stream leaving each block \\(state\\).*\" France\" \\* .*Restoring each FFN's output \\(mlp\\).*Strongest: restoring layer 0's FFN output at \" is\" brings P\\(\" Paris\"\\) back from 0.[0-9]+ to 0.[0-9]+ \\(clean: 0.89\\)\\..*Restoring each attention's output \\(attn\\)"
  EMPTY -- ${LOCATE} --subject France --color never)
cli_test("locate --format json has the prompt, subject, target, probabilities, metric, direction, corruption, noise, window and grids" 0
  "^\\{ \"prompt\": \\{ \"text\": \"The capital of France is\", \"token_ids\": \\[267, 270, 263, 529, 259\\], \"tokens\": \\[\"The\", \" capital\", \" of\", \" France\", \" is\"\\] \\}, \"subject\": \\{ \"text\": \"France\", \"positions\": \\[3\\] \\}, \"target\": \\{ \"id\": [0-9]+, \"token\": \" Paris\" \\}, \"clean_prob\": 0.88[0-9]+, \"corrupted_prob\": [0-9.e-]+, \"metric\": \"prob\", \"clean_value\": 0.88[0-9]+, \"corrupted_value\": [0-9.e-]+, \"direction\": \"denoising\", \"corruption\": \\{ \"kind\": \"noise\" \\}, \"noise\": \\{ \"sigma\": [0-9.]+, \"scale\": 0.5, \"samples\": \\[ \\[ \\[[^]]+\\] \\], \\[ \\[[^]]+\\] \\] \\] \\}, \"window\": 3, \"grids\": \\{ \"state\": \\{ \"value\": \\[ \\[[^]]+\\], \\[[^]]+\\] \\], \"effect\": .*\"normalised\": .*\"mlp\": .*\"attn\": \\{ \"value\": .* \\}$"
  EMPTY -- ${LOCATE} --subject France --samples 2 --noise 0.5 --window 3 --format json)
cli_test("locate --target traces the token given" 0 "target +\" Tokyo\" \\(id [0-9]+\\), as --target gave it"
  EMPTY -- ${LOCATE} --subject France --samples 2 --target " Tokyo" --color never)
cli_test("locate --noise too large to normalise blames --noise and says what range works" 2 EMPTY
  "^error: --noise: ν = 1e\\+308 makes the subject's noised embeddings too large to normalise in double precision\; give a noise from 0 to [0-9.]+e\\+15[0-9] \\(the default is 3σ = [0-9.]+\\)$"
  -- ${LOCATE} --subject France --samples 2 --noise 1e308)
cli_test("locate --prompt-file reads the prompt from a file" 0 "prompt +\"The capital of France is\": 5 tokens"
  EMPTY -- ${FT} locate --checkpoint ${CAPITALS} --prompt-file ${INPUTS}/prompt/france.txt --subject France --samples 1)
cli_test("locate --format markdown has the three grids as tables" 0
  "^# Causal tracing of \" Paris\" after \"The capital of France is\" .*## Restoring each FFN's output \\(mlp\\) .*\\| token / layer \\| 0 \\| 1 \\|"
  EMPTY -- ${LOCATE} --subject France --samples 2 --format markdown)
cli_test("locate --format html is one page" 0 "^<!DOCTYPE html>.*<table class=\"grid\">.*data-how=\"value = .*effect = value − corrupted.*</html>$"
  EMPTY -- ${LOCATE} --subject France --samples 2 --format html)
cli_test("locate: a subject not in the prompt names both" 2 EMPTY
  "^error: --subject: \"Germany\" is not in the prompt \"The capital of France is\"$" -- ${LOCATE} --subject Germany)
cli_test("locate: a subject in the wrong case says so" 2 EMPTY
  "^error: --subject: \"france\" is not in the prompt \"The capital of France is\"\; it has \"France\": the case differs$"
  -- ${LOCATE} --subject france)
cli_test("locate: a subject whose leading space the prompt lacks says so" 2 EMPTY
  "^error: --subject: \" France\" is not in the prompt \"France is a country whose capital is\"\; it has \"France\" without the leading space$"
  -- ${FT} locate --checkpoint ${CAPITALS} --prompt "France is a country whose capital is" --subject " France")
cli_test("locate: a subject covering the whole prompt is refused" 2 EMPTY
  "^error: --subject: \"The capital of France is\" covers the whole prompt, which leaves no token after it"
  -- ${LOCATE} --subject "The capital of France is")
cli_test("locate: --samples 0 is refused" 2 EMPTY "^error: --samples: 0 corrupted runs leave nothing to restore\; give 1 or more"
  -- ${LOCATE} --subject France --samples 0)
cli_test("locate: a negative --noise is refused" 2 EMPTY "^error: --noise: the noise's scale ν is a size: expected 0 or more, got -1$"
  -- ${LOCATE} --subject France --noise -1)
cli_test("locate: --noise nan is refused" 2 EMPTY "^error: --noise: expected a finite number, got nan$"
  -- ${LOCATE} --subject France --noise nan)
cli_test("locate: --noise inf is refused" 2 EMPTY "^error: --noise: expected a finite number, got inf$"
  -- ${LOCATE} --subject France --noise inf)
cli_test("locate: --noise that is not a number is refused" 2 EMPTY "^error: --noise: expected a number, got \"lots\"\; see ffn-trace locate --help$"
  -- ${LOCATE} --subject France --noise lots)
# An empty value is refused as empty, naming its option, not read as the option missing.
cli_test("locate --subject given empty is refused as empty" 2 EMPTY
  "^error: --subject: is empty\; expected the words of the prompt to noise, such as \"France\"\; see ffn-trace locate --help$"
  -- bash -c "exec \"$0\" locate --checkpoint \"$1\" --prompt \"The capital of France is\" --subject \"\"" ${FT} ${CAPITALS})
cli_test("units --promotes given empty is refused as empty, not blamed on --layer" 2 EMPTY
  "^error: --promotes: is empty\; expected one token"
  -- bash -c "exec \"$0\" units --checkpoint \"$1\" --promotes \"\"" ${FT} ${CAPITALS})
cli_test("edit --subject given empty is refused as empty" 2 EMPTY
  "^error: --subject: is empty\; expected the words of the prompt the fact is about"
  -- bash -c "exec \"$0\" edit --checkpoint \"$1\" --layer 0 --prompt \"The capital of France is\" --subject \"\" --target \" Rome\"" ${FT} ${CAPITALS})
cli_test("run --versus given empty names versus, not the target" 2 EMPTY
  "^error: --versus: is empty\; give one token, with its leading space"
  -- bash -c "exec \"$0\" run --checkpoint \"$1\" --layer 0 --prompt \"The capital of France is\" --versus \"\"" ${FT} ${CAPITALS})
cli_test("locate: --window 0 is refused" 2 EMPTY "^error: --window: a window of 0 layers restores nothing\; give 1 or more$"
  -- ${LOCATE} --subject France --window 0)
cli_test("locate: a target of two tokens says how it splits" 2 EMPTY
  "^error: --target: \" Parisian\" is not one token: the tokenizer splits it into \" Paris\" \\+ \"ian\" \\(ids [0-9]+, [0-9]+\\)\; give one token, such as \" Paris\"$"
  -- ${LOCATE} --subject France --target " Parisian")
cli_test("locate: a target without the leading space it needs says so" 2 EMPTY
  "^error: --target: \"Paris\" is not one token, but \" Paris\" is \\(id [0-9]+\\): give it with its leading space$"
  -- ${LOCATE} --subject France --target Paris)
# locate --facts, --sever, --corrupt-with, --noising, --metric
set(FACTS ${INPUTS}/locate)
cli_test("locate --facts averages the grids by token role and names the strongest cell" 0
  "Causal tracing averaged over 4 facts .*The stream leaving each block \\(state\\) +role / layer +n +0 +1 +first subject token +4 .*middle subject tokens +1 .*last token +4 .*Strongest: layer [01] at the .*Each FFN's output \\(mlp\\)"
  EMPTY -- ${FT} locate --checkpoint ${CAPITALS} --facts ${FACTS}/facts.tsv --samples 2 --color never)
cli_test("locate --facts --format json has facts and averaged grids by role" 0
  "^\\{ \"metric\": \"prob\", \"direction\": \"denoising\", \"corruption\": \\{ \"kind\": \"noise\" \\}, \"window\": 1, \"averaged\": \\{ \"roles\": \\[\"first_subject\", \"middle_subject\", \"last_subject\", \"first_after\", \"further\", \"last\"\\], \"state\": \\{ \"effect\": .*\"stderr\": .*\"count\": \\[ \\[4, 4\\], \\[1, 1\\], \\[4, 4\\], \\[4, 4\\], \\[1, 1\\], \\[4, 4\\] \\].*\"severed_mlp\": .*\"facts\": \\[ \\{ \"prompt\""
  EMPTY -- ${FT} locate --checkpoint ${CAPITALS} --facts ${FACTS}/facts.tsv --samples 2 --sever mlp --format json)
cli_test("locate --sever shows the severed grid beside the state grid" 0
  "Restoring the stream leaving each block \\(state\\).*Restoring the stream with the later FFN outputs kept corrupted \\(severed mlp\\).*Restoring each FFN's output"
  EMPTY -- ${LOCATE} --subject France --samples 2 --sever mlp --color never)
cli_test("locate --corrupt-with replaces the subject and logit-diff takes the corrupted answer as versus" 0
  "corruption +the subject replaced by \"Germany\" \\(--corrupt-with\\), the same 1 token: +\"The capital of Germany is\".*against \" Berlin\" \\(the corrupted prompt's answer\\)"
  EMPTY -- ${LOCATE} --subject France --corrupt-with Germany --metric logit-diff --color never)
# P(" Berlin") after "The capital of Germany is" is 0.8923 (run's prediction table for that prompt)
# and 0.0000 after France's: the replacement raises it, which the summary says as added, not as
# "takes -0.8923 away".
cli_test("locate says a corruption that raises the target adds to it" 0
  "P\\(\" Berlin\"\\) +clean 0.0000, corrupted 0.8923: the replacement adds 0.8923 \\(the total effect is -0.8923\\)"
  EMPTY -- ${LOCATE} --subject France --corrupt-with Germany --target " Berlin" --color never)
cli_test("locate --noising patches the corrupted values into the clean run" 0
  "noising: each patch below puts each corrupted run's value into the clean run.*Patching the corrupted stream leaving each block into the clean run \\(state\\)"
  EMPTY -- ${LOCATE} --subject France --samples 2 --noising --color never)
cli_test("locate --atp shows AtP's estimate beside the exact change and flags where they disagree" 0
  "Attribution patching \\(AtP\\) estimates each cell's change .* layer +token +exact Δ +AtP .*✗ misses: saturation"
  EMPTY -- ${LOCATE} --subject France --samples 2 --atp --color never)
cli_test("locate --atp --format json gives each grid delta and atp" 0 "\"normalised\": .*\"delta\": .*\"atp\": "
  EMPTY -- ${LOCATE} --subject France --samples 1 --atp --format json)
cli_test("locate --atp --layer ranks the layer's units by AtP beside each one's exact patch" 0
  "The units of layer 0's FFN by attribution patching Each of layer 0's 256 units .* the 3 of largest estimate .* unit +AtP +exact Δ +172 +\\+0\\.1[0-9]+ +\\+0\\.0[0-9]+"
  EMPTY -- ${LOCATE} --subject France --samples 3 --atp --layer 0 --top 3 --color never)
cli_test("locate --atp --layer --format json lists units_atp with unit, atp and exact" 0
  "\"units_layer\": 1, +\"units_atp\": \\[ *\\{ *\"unit\": [0-9]+, +\"atp\": [-0-9.e]+, +\"exact\": [-0-9.e]+ *\\}, *\\{"
  EMPTY -- ${LOCATE} --subject France --samples 1 --atp --layer 1 --top 2 --format json)
cli_test("locate --atp --layer on a Mixture of Experts ranks its experts' units, each named E:J" 0
  "Each of layer 1's 32 units \\(its experts', unit J of expert E named E:J, at the tokens that chose E\\) .* unit +AtP +exact Δ +[0-3]:[0-7] +[-+]0\\.[0-9]+ +[-+]0\\.[0-9]+"
  EMPTY -- ${FT} locate --checkpoint ${INPUTS}/checkpoints/mixtral_whole --prompt abcde --subject bc --samples 2 --atp --layer 1 --top 4 --color never)
cli_test("locate --atp --layer --format json on a Mixture of Experts names each unit's expert" 0
  "\"units_atp\": \\[ *\\{ *\"expert\": [0-3], +\"unit\": [0-7], +\"atp\": [-0-9.e]+, +\"exact\": [-0-9.e]+ *\\}"
  EMPTY -- ${FT} locate --checkpoint ${INPUTS}/checkpoints/mixtral_whole --prompt abcde --subject bc --samples 1 --atp --layer 1 --top 2 --format json)
cli_test("locate --layer without --atp is refused" 2 EMPTY "^error: --layer ranks a layer's units by attribution patching\; give --atp with it$"
  -- ${LOCATE} --subject France --layer 0)
cli_test("locate --atp --layer out of range says the layers there are" 2 EMPTY "^error: --layer: layer 5 is out of range: the checkpoint has 2 layers \\(0 to 1\\)$"
  -- ${LOCATE} --subject France --atp --layer 5)
cli_test("locate --top without --layer is refused" 2 EMPTY "^error: --top is how many of --layer's units to show"
  -- ${LOCATE} --subject France --top 3)
cli_test("locate --facts: a subject not in its prompt names the line" 2 EMPTY
  "^error: .*subject_missing.tsv: line 2: \"Germany\" is not in the prompt \"The capital of Japan is\"$"
  -- ${FT} locate --checkpoint ${CAPITALS} --facts ${FACTS}/subject_missing.tsv --samples 1)
cli_test("locate --facts: an empty file is refused" 2 EMPTY "^error: .*empty.txt: the file of prompts is empty"
  -- ${FT} locate --checkpoint ${CAPITALS} --facts ${INPUTS}/prompt/empty.txt)
cli_test("locate --facts: a target of several tokens names the line" 2 EMPTY
  "^error: .*two_token_target.tsv: line 1: the target: \" Parisian\" is not one token: the tokenizer splits it into"
  -- ${FT} locate --checkpoint ${CAPITALS} --facts ${FACTS}/two_token_target.tsv --samples 1)
cli_test("locate --corrupt-with of another token length says both lengths" 2 EMPTY
  "^error: --corrupt-with: \"of Kenya\" is 2 tokens where the subject \"France\" is 1 token"
  -- ${LOCATE} --subject France --corrupt-with "of Kenya")
cli_test("locate --sever with --noising is refused" 2 EMPTY "^error: --sever: severing keeps a path at its corrupted values"
  -- ${LOCATE} --subject France --sever mlp --noising)
cli_test("locate --metric logit-diff with noise needs --versus" 2 EMPTY "^error: --versus: the metric logit-diff needs the token to subtract from the target: give it"
  -- ${LOCATE} --subject France --metric logit-diff --samples 1)
cli_test("locate on BERT says why it cannot" 2 EMPTY
  "^error: .*bert: a bert checkpoint is an encoder: it predicts no next token, so there is no probability for causal tracing"
  -- ${FT} locate --checkpoint ${INPUTS}/checkpoints/bert --prompt "The capital of France is" --subject France)
cli_test("locate without a prompt is refused" 2 EMPTY "^error: give the prompt with --prompt TEXT or --prompt-file FILE, or many with --prompts FILE$"
  -- ${FT} locate --checkpoint ${CAPITALS} --subject France)
cli_test("locate without a subject is a usage error" 2 EMPTY "^error: --subject is required"
  -- ${FT} locate --checkpoint ${CAPITALS} --prompt "The capital of France is")
cli_test("locate with an empty prompt file is refused" 2 EMPTY "^error: .*empty.txt: --prompt-file: the prompt is empty"
  -- ${FT} locate --checkpoint ${CAPITALS} --prompt-file ${INPUTS}/prompt/empty.txt --subject France)
cli_test("locate: a prompt longer than the positions is refused" 2 EMPTY
  "^error: .*capitals: --prompt: the prompt is [0-9]+ tokens\; the model reads at most 64\; shorten it$"
  -- ${FT} locate --checkpoint ${CAPITALS} --subject France --prompt "France a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a")
# --prompts FILE on run and locate: each line run on its own, one report; the bad inputs one line, exit 2.
set(PROMPTS ${CMAKE_CURRENT_SOURCE_DIR}/inputs/prompts)
set(RUN_PROMPTS ${FT} run --checkpoint ${CAPITALS} --layer 1)
cli_test("run --prompts shows a summary of every line's prediction and top units, then a section per prompt" 0
  "^3 prompts through layer 1 of a gpt2 checkpoint =+ checkpoint .*capitals prompts .*capitals.txt: 4 lines, 3 run, each run alone, as one prompt is skipped 1 blank line \\(2\\) The 3 prompts at a glance .* line prompt next token p top units 1 \"The capital of France is\" \" Paris\" 0.8862 [0-9]+, [0-9]+, [0-9]+ 3 \"The capital of Japan is\" \" Tokyo\" 0.[0-9]+ [0-9]+, [0-9]+, [0-9]+ 4 \"Paris is the capital of\" \" France\" 0.[0-9]+ [0-9]+, [0-9]+, [0-9]+ Line 1: \"The capital of France is\" through layer 1 of a gpt2 checkpoint checkpoint .*Line 3: \"The capital of Japan is\" through layer 1 .*The units that wrote \" Tokyo\" .*Line 4: \"Paris is the capital of\" through"
  "^warning: .*capitals.txt: line 2 is blank, skipped$"
  -- ${RUN_PROMPTS} --prompts ${PROMPTS}/capitals.txt --detail summary --color never)
cli_test("run --prompts with a knock-out adds each prediction's probability with the units knocked out" 0
  " line prompt next token p knocked out top units 1 \"The capital of France is\" \" Paris\" 0.8862 0.[0-9]+ [0-9]+, [0-9]+, [0-9]+ "
  ANY -- ${RUN_PROMPTS} --prompts ${PROMPTS}/capitals.txt --ablate 116 --detail summary --color never)
cli_test("run --prompts - reads the prompts from standard input" 0 "^\\[ \\{ \"title\": .*\"text\": \"The capital of France is\".* \\}, \\{ \"title\": .*\"text\": \"The capital of Japan is\".* \\} \\]$"
  ANY --stdin ${PROMPTS}/capitals.txt -- ${RUN_PROMPTS} --prompts - --format json)
cli_test("run --prompts --format markdown has the summary as a table and each prompt as a section" 0
  "^# 3 prompts through layer 1 of a gpt2 checkpoint .*## The 3 prompts at a glance .*\\| line \\| prompt \\| next token \\| p \\| top units \\| .*## Line 1: \"The capital of France is\" through layer 1"
  ANY -- ${RUN_PROMPTS} --prompts ${PROMPTS}/capitals.txt --detail summary --format markdown)
cli_test("run --prompts --format html is one page" 0 "^<!DOCTYPE html>.*The 3 prompts at a glance.*Line 4: .*</html>$"
  ANY -- ${RUN_PROMPTS} --prompts ${PROMPTS}/capitals.txt --detail summary --format html)
cli_test("run --prompts skips a line longer than the positions, with a warning naming it" 0
  "skipped 1 line longer than the model's 64 positions \\(2: 72 tokens\\) The prompt at a glance"
  "^warning: .*too_long.txt: line 2 is 72 tokens, more than the model's 64 positions, skipped$"
  -- ${RUN_PROMPTS} --prompts ${PROMPTS}/too_long.txt --detail summary --color never)
cli_test("run --prompts: an empty file is refused" 2 EMPTY "^error: .*empty.txt: the file of prompts is empty\; give one prompt a line$"
  -- ${RUN_PROMPTS} --prompts ${PROMPTS}/empty.txt)
cli_test("run --prompts: a file of blank lines is refused" 2 EMPTY "^error: .*blank.txt: the file has no prompt to run: its 3 lines are blank$"
  -- ${RUN_PROMPTS} --prompts ${PROMPTS}/blank.txt)
cli_test("run --prompts: a file of lines too long for the model is refused" 2 EMPTY
  "^error: <stdin>: the file has no prompt to run: of its 1 line, 0 blank and 1 longer than the model's 64 positions$"
  -- bash -c "tail -n 1 \"$1\" | exec \"$0\" run --checkpoint \"$2\" --layer 1 --prompts -" ${FT} ${PROMPTS}/too_long.txt ${CAPITALS})
cli_test("run --prompts: a line that is not UTF-8 is named" 2 EMPTY
  "^error: .*not_utf8.txt: line 2: not UTF-8\; the prompts must be UTF-8 text, one prompt a line$"
  -- ${RUN_PROMPTS} --prompts ${PROMPTS}/not_utf8.txt)
cli_test("run --prompts with --prompt is a usage error" 2 EMPTY "^error: --prompt excludes --prompts"
  -- ${RUN_PROMPTS} --prompts ${PROMPTS}/capitals.txt --prompt "The capital of France is")
cli_test("run --prompts with --prompt-file is a usage error" 2 EMPTY "^error: --prompt-file excludes --prompts"
  -- ${RUN_PROMPTS} --prompts ${PROMPTS}/capitals.txt --prompt-file ${INPUTS}/prompt/france.txt)
cli_test("run --prompts: the traces together are held to --max-elements, naming the line that passes it" 2 EMPTY
  "^error: .*capitals.txt: line 3: the traces of the prompts up to this line would keep 15,390 numbers, more than --max-elements 10,000\; use fewer or shorter prompts, or raise --max-elements$"
  -- ${RUN_PROMPTS} --prompts ${PROMPTS}/capitals.txt --max-elements 10000)
cli_test("run --prompts: a missing file is one error line" 2 EMPTY "^error: .*missing.txt: cannot open the file"
  -- ${RUN_PROMPTS} --prompts ${PROMPTS}/missing.txt)
cli_test("locate --prompts takes each line's subject after a tab, and sums up each prompt's strongest restores" 0
  "^Causal tracing of 2 prompts =+ .*prompts .*subjects.txt: 2 lines, 2 run, each run alone, as one prompt is The 2 prompts at a glance .* line prompt subject target clean corrupted 1 \"The capital of France is\" \"France\" \" Paris\" 0.8862 0.[0-9]+ 2 \"The capital of Japan is\" \"Japan\" \" Tokyo\" 0.8865 0.[0-9]+ line restore layer token P effect 1 state [01] \"[^\"]+\" 0.[0-9]+ \\+0.[0-9]+ mlp 0 \" is\" 0.[0-9]+ \\+0.[0-9]+ attn .* 2 state .*Line 1: Causal tracing of \" Paris\" after \"The capital of France is\" .*Line 2: Causal tracing of \" Tokyo\" after \"The capital of Japan is\""
  EMPTY -- ${FT} locate --checkpoint ${CAPITALS} --prompts ${PROMPTS}/subjects.txt --samples 2 --color never)
cli_test("locate --prompts gives --subject to every line that names none" 0
  "subject +\"France\": token 3 \\(\" France\"\\), marked .*subject +\"capital city\": tokens 1 \\(\" capital\"\\), 2 \\(\" city\"\\), marked"
  EMPTY -- ${FT} locate --checkpoint ${CAPITALS} --prompts ${PROMPTS}/france.txt --subject France --samples 1 --color never)
cli_test("locate --prompts: a line with no subject, and no --subject, is named" 2 EMPTY
  "^error: .*capitals.txt: line 1: has no subject: give it after a tab on the line, or --subject for every line$"
  -- ${FT} locate --checkpoint ${CAPITALS} --prompts ${PROMPTS}/capitals.txt --samples 1)
cli_test("locate --prompts: a line's subject not in its prompt names the line" 2 EMPTY
  "^error: <stdin>: line 1: \"Germany\" is not in the prompt \"The capital of France is\"$"
  -- bash -c "printf 'The capital of France is\\tGermany\\n' | exec \"$0\" locate --checkpoint \"$1\" --prompts -" ${FT} ${CAPITALS})
cli_test("locate --prompts with --prompt is a usage error" 2 EMPTY "^error: --prompt excludes --prompts"
  -- ${FT} locate --checkpoint ${CAPITALS} --prompts ${PROMPTS}/subjects.txt --prompt "The capital of France is")
cli_test("locate --prompts --format markdown and html have the summary and each prompt's grids" 0
  "^# Causal tracing of 2 prompts .*\\| line \\| restore \\| layer \\| token \\| P \\| effect \\| .*## Line 2: Causal tracing of"
  EMPTY -- ${FT} locate --checkpoint ${CAPITALS} --prompts ${PROMPTS}/subjects.txt --samples 1 --format markdown)
cli_test("locate --prompts --format html is one page" 0 "^<!DOCTYPE html>.*The 2 prompts at a glance.*Line 2: Causal tracing.*</html>$"
  EMPTY -- ${FT} locate --checkpoint ${CAPITALS} --prompts ${PROMPTS}/subjects.txt --samples 1 --format html)
cli_test("run --prompts's JSON is the list of the --prompt runs' JSON, byte for byte" 0 "^same$" EMPTY
  -- bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/prompts_same.sh ${FT} ${CAPITALS} run)
cli_test("locate --prompts's JSON is the list of the --prompt runs' JSON, byte for byte" 0 "^same$" EMPTY
  -- bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/prompts_same.sh ${FT} ${CAPITALS} locate)
# Markdown escapes the file's own text: a title holding HTML shows as text, never as markup.
cli_test("markdown escapes < and & in a title, which is enough that no tag forms" 0 "^# a &lt\;b>bold&lt\;/b> &amp\; title" EMPTY
  -- ${FT} run ${DATA}/lesson_hand.json --set "title=\"a <b>bold</b> & title\"" --format markdown)
# A closed stderr: the error cannot be written, and the exit status still says what happened.
add_test(NAME "cli: an error with stderr closed exits 2, not by a signal"
         COMMAND bash -c "\"$0\" run /nonexistent/example.json 2>&-; test $? -eq 2" ${FT})

# edit: the rank-one edit on the shipped model, each run writing a fresh folder; the bad inputs:
# one line, exit 2, nothing on stdout, and no folder written.
set(EDIT_OUT ${CMAKE_CURRENT_BINARY_DIR}/edit_cli)
file(MAKE_DIRECTORY ${EDIT_OUT})
set(EDIT_ARGS --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --subject France)
# bash -c "rm -rf OUT\; FT edit ARGS --save OUT; then: the status kept, and OUT absent when it is not 0"
set(EDIT_RUN "out=$1\; shift\; rm -rf \"$out\"\; \"$0\" edit \"\$@\" --save \"$out\"\; s=$?\; if [ $s != 0 ] && [ -e \"$out\" ]\; then echo written >&2\; exit 9\; fi\; exit $s")
cli_test("edit refuses a target that is already the prediction, naming it and its probability" 2 EMPTY
  "^error: --target: \" Paris\" is already the prediction after \"The capital of France is\" \\(p = 0\\.8862\\): there is nothing to edit\; give the token the prompt should lead to instead$"
  -- ${FT} edit --checkpoint ${DATA}/models/capitals --layer 0 --prompt "The capital of France is" --subject France --target " Paris" -o ${CMAKE_CURRENT_BINARY_DIR}/cli-edit-already)
cli_test("edit France to Rome at the last token: efficacy, the paraphrases follow, the neighbours keep theirs" 0
  "tensor +h.0.mlp.c_proj.weight \\(F32, stored as W2 \\(256, 128\\)\\).*edited token +token 4 \\(\" is\"\\), the prompt's last.*k\\* = \\[.*λ = [0-9.e-]+ is added to its diagonal \\(10⁻³ of C's mean diagonal, the default\\).*C⁻¹k\\* = \\[.*step +loss .*Λ\\[0\\] = \\(v\\*\\[0\\] − v₀\\[0\\]\\) / k\\*ᵀu = .*differs from v\\* by at most [0-9.]+e-1[0-9] \\(the check\\).*\"The capital of France is\" +\" Paris\" 0.886 → \" Rome\" 0.9[0-9]+.*1 of 1 now predict \" Rome\".*3 of 3 now predict \" Rome\".*(8|9|10) of 10 keep their top prediction.*Written to .*stored as F32"
  EMPTY -- bash -c "${EDIT_RUN}" ${FT} ${EDIT_OUT}/text ${EDIT_ARGS} --target " Rome" --at last --color never)
cli_test("edit --format json has the edit, efficacy, paraphrases and neighbours" 0
  "\"edit\": \\{ \"layer\": 0, \"position\": 4, .*\"key\": \\[.*\"u\": \\[.*\"old_value\": \\[.*\"value\": \\[.*\"lambda\": \\[.*\"delta_norm\": [0-9.]+, \"ridge\": [0-9.e-]+, .*\"steps\": \\[ \\{ \"loss\": [0-9.]+, \"prob\": [0-9.e-]+, .*\"efficacy\": \\{ \"text\": \"The capital of France is\", \"kind\": \"efficacy\", \"true\": \" Paris\", \"new\": \" Rome\", .*\"before\": \\{ \"token\": \" Paris\", \"prob\": 0.88[0-9]+, \"p_true\": 0.88[0-9]+, \"p_new\": [0-9.e-]+, .*\"after\": \\{ \"token\": \" Rome\", \"prob\": 0.9[0-9]+.*\"changed\": true.*\"paraphrases\": \\[ \\{ \"text\": \"France has its capital in\", \"kind\": \"paraphrase\", .*\"neighbours\": \\[ \\{ \"text\": \"The capital of Germany is\", \"kind\": \"neighbour\", \"true\": \" Berlin\", .*\"subject_facts\": \\[ \\{ \"text\": .*\"kind\": \"subject\", .*\"summary\": \\{ \"efficacy\": \\{ \"score\": 1(\\.0)?, \"magnitude\": 0\\.[0-9]+, \"accuracy\": 1(\\.0)?, \"count\": 1, .*\"neighbour\": \\{ \"score\": .*\"taken\": true, \"written\": \\{ \"directory\": "
  EMPTY -- bash -c "${EDIT_RUN}" ${FT} ${EDIT_OUT}/json ${EDIT_ARGS} --target " Rome" --at last --format json)
cli_test("edit --dtype f64 stores W2' as F64 and says the rounding moved nothing" 0
  "stored as F64\\. .*in float64 the edit gave 0.9516064, so storing W2' as F64 moved p\\(\" Rome\"\\) by (0|-?[0-9.]+e-1[0-9])\\.$"
  EMPTY -- bash -c "${EDIT_RUN}" ${FT} ${EDIT_OUT}/f64 ${EDIT_ARGS} --target " Rome" --at last --dtype f64 --color never)
cli_test("edit --prefix averages the key over the prompt and \"PREFIX. PROMPT\"" 0
  "\"The capital of France is\" +4 +3.3668 \"Here is a fact. The capital of France is\" +15 +[0-9.]+ .*2 prompts"
  EMPTY -- bash -c "${EDIT_RUN}" ${FT} ${EDIT_OUT}/prefix ${EDIT_ARGS} --target " Rome" --at last --prefix "Here is a fact" --color never)
cli_test("edit at the subject's token, where this model does not recall, fails: exit 1, nothing written, pointing to locate and --at last" 1
  "0 of 1 now predict \" Rome\"\\. Score: 0 of 1 give p\\(\" Rome\"\\) > p\\(\" Paris\"\\), by -0\\.[0-9]+ on average\\. ✗ 1 where the new token does not beat the old\\. The edit failed: after it p\\(\" Rome\"\\) = 0\\.000[0-9] does not beat p\\(\" Paris\"\\) = 0\\.[0-9]+ on the prompt, so the exit status is 1 and no checkpoint is written \\(--force writes it all the same\\)\\. The edit did not take\\. With δ at token 3 \\(\" France\"\\) the optimisation reached p\\(\" Rome\"\\) = 0\\.000[0-9]: .*`ffn-trace locate --checkpoint [^`]*--subject \"France\" --target \" Paris\"` .*with --at last or --at T\\."
  EMPTY -- bash -c "${EDIT_RUN}" ${FT} ${EDIT_OUT}/subject ${EDIT_ARGS} --target " Rome" --color never --width 400)
cli_test("edit --force writes a failed edit's checkpoint all the same, and exits 0" 0 "The edit failed: .*Written to "
  EMPTY -- bash -c "${EDIT_RUN}" ${FT} ${EDIT_OUT}/force ${EDIT_ARGS} --target " Rome" --force --color never)
# The issue's example on the atlas model: the edit takes, and what it breaks is marked and counted:
# Spain's capital becomes " Rome", France's language " Icelandic".
# Before the edit every neighbour keeps p(true) > p(" Rome"), its true token being its own top
# prediction and never " Rome" (Italy's prompt is left out): 1.00; after, Spain and Portugal turn to
# " Rome" (the two ✗ rows): 8 of 10.
cli_test("edit marks with ✗ and counts every neighbour and other fact of the subject whose top prediction changed" 0
  "\"The capital of Spain is\" +\" Madrid\" [0-9.]+ → \" Rome\" 0\\.620 .*✗.*keep their top prediction\\. Score: .* ✗ [1-9][0-9]* changed their top prediction\\..*subject's other facts.*\"The language of France is\" +\" French\" 0\\.876 → \" Icelandic\" 0\\.095 .*✗.*The evaluation, both ways.*Score \\(ROME's and MEMIT's\\).*Accuracy: .*neighbours +10 +1\\.00 → 0\\.80 "
  EMPTY -- ${FT} edit --checkpoint ${DATA}/models/atlas --layer 1 --at last --prompt "The capital of France is" --subject France --target " Rome" --color never --width 200)
# Without --layer the layer is locate's: a separate `locate --format json` run on atlas puts the
# largest mlp restore effect at the last token in layer 1 (0.5920), on capitals in layer 0 (0.8330).
cli_test("edit without --layer edits the layer causal tracing finds the recall in, and says so in one line" 0
  "layer +1, chosen by causal tracing \\(locate\\): restoring its FFN output at token 4 restores p\\(\" Paris\"\\) by 0\\.5920, the most of any layer's \\(--layer to choose another\\).*1 of 1 now predict \" Rome\""
  EMPTY -- ${FT} edit --checkpoint ${DATA}/models/atlas --at last --prompt "The capital of France is" --subject France --target " Rome" --color never --width 300)
cli_test("edit without --layer on capitals chooses layer 0, where locate finds the recall" 0
  "layer +0, chosen by causal tracing \\(locate\\): restoring its FFN output at token 4 restores p\\(\" Paris\"\\) by 0\\.8330"
  EMPTY -- ${FT} edit --checkpoint ${CAPITALS} --at last --prompt "The capital of France is" --subject France --target " Rome" --color never --width 300)
cli_test("edit says the update uses the key v* was optimised at" 0
  "The update uses the same key k\\* that v\\* was optimised at \\(r-ROME's correction\\; --key original"
  EMPTY -- ${FT} edit ${EDIT_ARGS} --target " Rome" --at last --color never --width 300)
cli_test("edit --key original divides by the prompt's own key, as ROME's code does" 0
  "Λ\\[0\\] = \\(v\\*\\[0\\] − v₀\\[0\\]\\) / k₀ᵀu = .*--key original: Λ = δ / \\(k₀ᵀu\\), k₀ the prompt's own key"
  EMPTY -- ${FT} edit ${EDIT_ARGS} --target " Rome" --at last --prefix "Here is a fact" --key original --color never --width 300)
cli_test("edit --key names what it expects" 2 EMPTY "^error: --key: .*(same|original)"
  -- ${FT} edit ${EDIT_ARGS} --target " Rome" --key new)
cli_test("edit --detail summary gives the norms without the vectors" 0
  "\"The capital of France is\" +4 +3\\.3668 ‖k\\*‖ = 3\\.3668 C and u.*‖C⁻¹k\\*‖ = [0-9.]+ k\\*ᵀu = Σ k\\*_i u_i = [0-9.]+ The value.* ‖v₀‖ = ‖W2ᵀk\\*‖ = [0-9.]+ ‖δ‖ = [0-9.]+ ‖v\\*‖ = ‖v₀ \\+ δ‖ = [0-9.]+ ‖Λ‖ = ‖δ‖ / k\\*ᵀu = [0-9.]+ W2' = W2 \\+ uΛᵀ"
  EMPTY -- bash -c "${EDIT_RUN}" ${FT} ${EDIT_OUT}/summary ${EDIT_ARGS} --target " Rome" --at last --detail summary --color never)
cli_test("edit --detail arithmetic writes k*ᵀu's sum and Λ's first and last entries out" 0
  "k\\*ᵀu = Σ k\\*_i u_i = \\(?-?[0-9.]+\\)?×\\(?-?[0-9.]+\\)? \\+ .* … .* = [0-9.]+ .*Λ\\[2\\] = .* … Λ\\[125\\] = .*Λ\\[127\\] = "
  EMPTY -- bash -c "${EDIT_RUN}" ${FT} ${EDIT_OUT}/arithmetic ${EDIT_ARGS} --target " Rome" --at last --detail arithmetic --color never)
# edit --expert on a whole tiny Mixtral (tests/inputs/checkpoints/make.py): at layer 1 the router sends
# "abcde"'s last token to experts 0 and 2.
set(MIXTRAL_WHOLE ${INPUTS}/checkpoints/mixtral_whole)
set(EDIT_MOE_ARGS --checkpoint ${MIXTRAL_WHOLE} --layer 1 --prompt abcde --subject c --at last --target f)
cli_test("edit --expert edits one expert's w2: its activations the key, C over its tokens, the edit written" 0
  "Editing layer 1's expert 0's W2 .*tensor +model\\.layers\\.1\\.block_sparse_moe\\.experts\\.0\\.w2\\.weight .*expert +0 of the MoE layer: .*routing weight w, 0\\.9751 at the edited token .*k\\* is expert 0's activations .*tokens routed to expert 0 .*\"abcde\" +\"g\" 0\\.556 → \"f\" 0\\.9[0-9]+ .*1 of 1 now predict \"f\".*Written to .*experts\\.0\\.w2\\.weight replaced by W2' stored as F32"
  EMPTY -- bash -c "${EDIT_RUN}" ${FT} ${EDIT_OUT}/expert ${EDIT_MOE_ARGS} --expert 0 --neighbour abfde --color never)
cli_test("edit --expert naming an expert the token is not routed to is refused, naming those it is" 2 EMPTY
  "^error: --at: expert 1 is not routed to at token 4 \\(\"e\"\\) of \"abcde\": the router sends the token to experts 0 and 2, so the expert's W2 never sees it"
  -- bash -c "${EDIT_RUN}" ${FT} ${EDIT_OUT}/expert_idle ${EDIT_MOE_ARGS} --expert 1)
cli_test("edit on an MoE layer without --expert asks for one" 2 EMPTY
  "^error: .*mixtral_whole: --expert: a mixtral layer is a Mixture of Experts of 4 experts: name the one whose W2 is edited \\(0 to 3\\)$"
  -- bash -c "${EDIT_RUN}" ${FT} ${EDIT_OUT}/expert_none ${EDIT_MOE_ARGS})
cli_test("edit --expert on a dense layer is refused" 2 EMPTY
  "^error: .*capitals: --expert: a gpt2 layer is one dense FFN: it has no experts to choose from$"
  -- bash -c "${EDIT_RUN}" ${FT} ${EDIT_OUT}/expert_dense ${EDIT_ARGS} --target " Rome" --expert 0)
cli_test("edit's edited checkpoint runs: run --checkpoint shows the new prediction" 0
  "\" Rome\""
  EMPTY -- bash -c "out=$1\; shift\; rm -rf \"$out\" && \"$0\" edit \"\$@\" --save \"$out\" >/dev/null && exec \"$0\" run --checkpoint \"$out\" --layer 1 --prompt \"The capital of France is\" --detail summary --color never"
     ${FT} ${EDIT_OUT}/run ${EDIT_ARGS} --target " Rome" --at last)
cli_test("edit: a target of two tokens names the pieces" 2 EMPTY
  "^error: --target: \" Parisian\" is not one token: the tokenizer splits it into \" Paris\" \\+ \"ian\""
  -- bash -c "${EDIT_RUN}" ${FT} ${EDIT_OUT}/bad ${EDIT_ARGS} --target " Parisian")
cli_test("edit: a subject not in the prompt is refused" 2 EMPTY
  "^error: --subject: \"Spain\" is not in the prompt \"The capital of France is\"$"
  -- bash -c "${EDIT_RUN}" ${FT} ${EDIT_OUT}/bad --checkpoint ${CAPITALS} --layer 0 --prompt "The capital of France is" --subject Spain --target " Rome")
cli_test("edit on BERT says why it cannot" 2 EMPTY
  "^error: .*bert: a bert checkpoint is an encoder: it predicts no next token, so there is no completion to edit"
  -- bash -c "${EDIT_RUN}" ${FT} ${EDIT_OUT}/bad --checkpoint ${INPUTS}/checkpoints/bert --layer 0 --prompt "The capital of France is" --subject France --target " Rome")
cli_test("edit: a negative --ridge is refused" 2 EMPTY
  "^error: --ridge: the ridge λ is added to C's diagonal to make it invertible: expected 0 or more, got -1$"
  -- bash -c "${EDIT_RUN}" ${FT} ${EDIT_OUT}/bad ${EDIT_ARGS} --target " Rome" --ridge -1)
cli_test("edit: a corpus too small for C without a ridge says the ridge that would do" 2 EMPTY
  "^error: .*one_line.txt: --ridge: the corpus gives 7 activations of the layer's 256 units, so C = \\(1/n\\) Σ k kᵀ has rank at most 7 and cannot be inverted\; give a ridge λ of [0-9.e-]+ \\(10⁻³ of C's mean diagonal\\) or more, or a longer corpus$"
  -- bash -c "${EDIT_RUN}" ${FT} ${EDIT_OUT}/bad ${EDIT_ARGS} --target " Rome" --ridge 0 --corpus ${INPUTS}/edit/one_line.txt)
cli_test("edit: --save naming an existing folder is refused" 2 EMPTY
  "^error: .*inputs/edit: --save: already exists\; give a folder that does not exist yet \\(nothing is written over\\)$"
  -- ${FT} edit ${EDIT_ARGS} --target " Rome" --save ${INPUTS}/edit)
cli_test("edit: --save naming the checkpoint's own folder, or one inside it, is refused" 2 EMPTY
  "^error: .*capitals/new: --save: is the checkpoint's folder .*capitals or inside it\; give a new folder elsewhere$"
  -- ${FT} edit ${EDIT_ARGS} --target " Rome" --save ${CAPITALS}/new)
cli_test("edit: --at past the prompt is refused" 2 EMPTY "^error: --at: token 9 is past the prompt's last token, 4$"
  -- bash -c "${EDIT_RUN}" ${FT} ${EDIT_OUT}/bad ${EDIT_ARGS} --target " Rome" --at 9)
cli_test("edit: --at that is not a position is refused" 2 EMPTY "^error: --at: expected subject, last or a token's index, got \"end\"$"
  -- bash -c "${EDIT_RUN}" ${FT} ${EDIT_OUT}/bad ${EDIT_ARGS} --target " Rome" --at end)
# each in a folder of its own, made afresh: the folder the -o names is new
foreach(out "new/" "./new2/" "new3/.")
  string(MAKE_C_IDENTIFIER "${out}" id)
  cli_test("edit --save ${out} writes the folder the path names" 0 "Written to .*new[0-9]*" EMPTY
    -- bash -c "d=\"$1/o_$2\" && rm -rf \"$d\" && mkdir -p \"$d\" && cd \"$d\" && shift 2 && exec \"$0\" \"$@\"" ${FT} ${EDIT_OUT}
       ${id} edit ${EDIT_ARGS} --target " Rome" --at last --color never --save ${out})
endforeach()
cli_test("edit --ridge 1e300 edits along the key's own direction" 0 "λ = 1[.0]*e\\+300 is added to its diagonal \\(--ridge\\)" EMPTY
  -- bash -c "${EDIT_RUN}" ${FT} ${EDIT_OUT}/ridge ${EDIT_ARGS} --target " Rome" --at last --ridge 1e300 --color never)
cli_test("edit without --save evaluates the edit in memory and writes no checkpoint" 0
  "1 of 1 now predict \" Rome\"" EMPTY
  -- bash -c "d=\"$1/nosave\" && rm -rf \"$d\" && mkdir -p \"$d\" && cd \"$d\" && shift && \"$0\" \"$@\" && test -z \"$(ls -A)\"" ${FT} ${EDIT_OUT}
     edit ${EDIT_ARGS} --target " Rome" --at last --color never)
cli_test("edit -o FILE writes the report there, as every command, and no checkpoint" 0 EMPTY EMPTY
  -- bash -c "d=\"$1/report\" && rm -rf \"$d\" && mkdir -p \"$d\" && cd \"$d\" && shift && \"$0\" \"$@\" -o edit.html && test -f edit.html && test \"$(ls -A)\" = edit.html && grep -q '<html' edit.html" ${FT} ${EDIT_OUT}
     edit ${EDIT_ARGS} --target " Rome" --at last --format html)
cli_test("edit -o naming a file of the checkpoint is refused" 2 EMPTY "^error: .*config.json"
  -- ${FT} edit ${EDIT_ARGS} --target " Rome" --at last -o ${CAPITALS}/config.json)
# A checkpoint whose weights file is a link (as a Hugging Face cache links its blobs): the new folder
# gets a file of its own under the link's name, and the linked file is left as it was.
cli_test("edit --save of a checkpoint whose weights are a link writes the new folder's own file under the link's name" 0
  "^linked ok$" EMPTY
  -- bash -c "d=\"$1/linked\" && rm -rf \"$d\" && mkdir -p \"$d/blobs\" \"$d/snapshot\" && cp \"$2\"/model.safetensors \"$d/blobs/w\" && for f in config.json tokenizer.json corpus.txt\; do cp \"$2/$f\" \"$d/snapshot/\"\; done && ln -s ../blobs/w \"$d/snapshot/model.safetensors\" && \"$0\" edit --checkpoint \"$d/snapshot\" --layer 0 --prompt 'The capital of France is' --subject France --target ' Rome' --at last --save \"$d/new\" >/dev/null && [ -f \"$d/new/model.safetensors\" ] && [ ! -L \"$d/new/model.safetensors\" ] && cmp -s \"$d/blobs/w\" \"$2/model.safetensors\" && [ ! -e \"$d/blobs/model.safetensors\" ] && echo linked ok"
  ${FT} ${EDIT_OUT} ${CAPITALS})
# edit --facts: MEMIT on the atlas model, three facts over layers 1-3 at the last token
# (tests/edit/facts); its numbers are checked against NumPy in tests/edit/memit_reference_test.py.
set(FACTS ${CMAKE_CURRENT_SOURCE_DIR}/edit/facts)
set(MEMIT_ARGS --checkpoint ${DATA}/models/atlas --layers 1-3 --at last --corpus ${FACTS}/corpus.txt)
cli_test("edit --facts writes every fact over the layers: the shown fact's optimisation, each layer's update, every fact's table" 0
  "MEMIT: 3 facts written into layers 1–3 .*shown +fact 1 \\(\"The capital of France is\" → \" Rome\".*step +loss .*layer +‖ΔW‖ +rank +λ +‖k‖ +‖r‖ +‖kᵀΔW‖ +‖kᵀΔW - r‖ +1 +[0-9.]+ +3 .*Every fact .*1 +\"The capital of France is\" +\" Rome\" +0\\.0000 → 0\\.8[0-9]+ +\" Rome\" 0\\.8[0-9]+ +✓ +2 +\"The capital of Germany is\" +\" Paris\" .*✓ +3 .*✓ 3 of 3 facts took.*Fact 1 before → after .*neighbourhood .*The evaluation over all facts, both ways .*efficacy +3 +0\\.00 → 1\\.00"
  EMPTY -- bash -c "${EDIT_RUN}" ${FT} ${EDIT_OUT}/memit ${MEMIT_ARGS} --facts ${FACTS}/three.tsv --detail summary --color never --width 300)
cli_test("edit --facts --format json names the layers with each update's norm and rank, and each fact's evaluation" 0
  "\"layers\": \\[ \\{ \"layer\": 1, \"tensor\": \"h\\.1\\.mlp\\.c_proj\\.weight\", \"norm\": [0-9.]+, \"rank\": 3, .*\"facts\": \\[ \\{ \"prompt\": \"The capital of France is\", .*\"efficacy\": \\{ \"text\": \"The capital of France is\", \"kind\": \"efficacy\", .*\"neighbours\": \\[ \\{ .*\"kind\": \"neighbour\", .*\"summary\": \\{ \"efficacy\": \\{ \"score\": 1(\\.0)?, .*\"taken\": true"
  EMPTY -- ${FT} edit ${MEMIT_ARGS} --facts ${FACTS}/three.tsv --format json)
cli_test("edit --facts --show 2 traces the second fact" 0 "shown +fact 2 \\(\"The capital of Germany is\" → \" Paris\".*Fact 2 before → after"
  EMPTY -- ${FT} edit ${MEMIT_ARGS} --facts ${FACTS}/three.tsv --show 2 --detail summary --color never --width 300)
# 37 unrelated prompts, counted from the corpus: the capitals that stand in each fact's place, the
# first 10 in the corpus's order less any fact's prompt and any whose answer is that fact's new one
# (Italy for " Rome", France for " Paris", Egypt for " Cairo"): Spain, Egypt, Canada, Kenya, Peru,
# Greece, Portugal and Poland, then Italy from Germany's, 9 once each; and the subjects' 28 other facts.
cli_test("edit --facts --sequential edits one fact after another and shows the unrelated prompts after each" 0
  "mode +sequential: .*Sequential: the unrelated prompts after each fact .*after fact +its p\\(new\\) +changed top +mean p\\(true\\) +1 +0\\.[0-9]+ +[0-9]+ of 37 .* 3 +0\\.[0-9]+ +[0-9]+ of 37"
  EMPTY -- ${FT} edit ${MEMIT_ARGS} --facts ${FACTS}/three.tsv --sequential --detail summary --color never --width 300)
cli_test("edit --facts --fluency continues subject prompts before → after with ROME's n-gram entropy" 0
  "Fluency: greedy continuations before → after .*\"France is a\" +\" country in Europe.*[0-9]\\.[0-9]{4} +[0-9]\\.[0-9]{4}"
  EMPTY -- ${FT} edit ${MEMIT_ARGS} --facts ${FACTS}/three.tsv --fluency --detail summary --color never --width 300)
cli_test("edit --facts at the subjects' tokens, where this model does not recall, fails: exit 1, nothing written, pointing to locate and --at last" 1
  "0 of 3 facts took: .* 3 of 3 facts did not take, so the exit status is 1 and no checkpoint is written \\(--force writes it all the same\\)\\. .*`ffn-trace locate --facts` shows at which token and layers\\; edit there with --at last or other --layers\\."
  EMPTY -- bash -c "${EDIT_RUN}" ${FT} ${EDIT_OUT}/memit_failed --checkpoint ${DATA}/models/atlas --layers 1-3 --corpus ${FACTS}/corpus.txt --facts ${FACTS}/three.tsv --detail summary --color never --width 300)
cli_test("edit --facts with a subject not in its prompt is refused, naming the line" 2 EMPTY
  "^error: .*subject_missing.tsv: line 2: the subject: \"Spain\" is not in the prompt \"The capital of Germany is\"$"
  -- bash -c "${EDIT_RUN}" ${FT} ${EDIT_OUT}/memit_bad ${MEMIT_ARGS} --facts ${FACTS}/subject_missing.tsv)
cli_test("edit --facts with an empty file is refused" 2 EMPTY "^error: .*empty.tsv: .*empty"
  -- bash -c "${EDIT_RUN}" ${FT} ${EDIT_OUT}/memit_bad ${MEMIT_ARGS} --facts ${FACTS}/empty.tsv)
cli_test("edit --facts with a target of several tokens says how it splits, naming the line" 2 EMPTY
  "^error: .*several_tokens.tsv: line 1: the target: \" Romeville\" is not one token: the tokenizer splits it into \" Rome\" \\+ \"v\" \\+ \"il\" \\+ \"le\""
  -- bash -c "${EDIT_RUN}" ${FT} ${EDIT_OUT}/memit_bad ${MEMIT_ARGS} --facts ${FACTS}/several_tokens.tsv)
cli_test("edit --layers past the model is refused" 2 EMPTY "^error: --layers: layer 4 is out of range: the checkpoint has 4 layers \\(0 to 3\\)$"
  -- bash -c "${EDIT_RUN}" ${FT} ${EDIT_OUT}/memit_bad --checkpoint ${DATA}/models/atlas --layers 1-4 --facts ${FACTS}/three.tsv)
cli_test("edit --layers reversed is refused" 2 EMPTY "^error: --layers: 3-1 is reversed: give the first layer, then the last \\(1-3\\)$"
  -- bash -c "${EDIT_RUN}" ${FT} ${EDIT_OUT}/memit_bad --checkpoint ${DATA}/models/atlas --layers 3-1 --facts ${FACTS}/three.tsv)
cli_test("edit --show past the facts is refused" 2 EMPTY "^error: --show: fact 4 is past the 3 facts of \".*three.tsv\"$"
  -- bash -c "${EDIT_RUN}" ${FT} ${EDIT_OUT}/memit_bad ${MEMIT_ARGS} --facts ${FACTS}/three.tsv --show 4)
cli_test("edit --sequential without --facts is refused" 2 EMPTY "^error: --sequential edits the facts of --facts one after another\\; give --facts FILE$"
  -- ${FT} edit ${EDIT_ARGS} --target " Rome" --sequential)
cli_test("edit --facts without --layers asks for them" 2 EMPTY "^error: --layers: --facts writes the facts over a range of layers: give --layers A-B$"
  -- ${FT} edit --checkpoint ${DATA}/models/atlas --facts ${FACTS}/three.tsv)
cli_test("edit --facts on a Mixtral is refused: MEMIT has no one W2 a layer, and the single edit in one expert is named" 2 EMPTY
  "^error: .*mixtral_whole: --layers: MEMIT solves for the one W2 of each layer's FFN, and a mixtral layer is a Mixture of Experts\\; edit one fact at a time, in one expert$"
  -- ${FT} edit --checkpoint ${INPUTS}/checkpoints/mixtral_whole --facts ${FACTS}/three.tsv --layers 0-1)


# units: a layer's units over a corpus, and the search of value vectors by token, on the shipped
# model. The bad inputs: one line, exit 2, nothing on stdout; skipped lines are warned of and counted.
set(UNITS ${INPUTS}/units)
cli_test("units --unit shows the unit's card: its contexts, quantiles, histogram, value and key scores" 0
  "Unit 172 of layer 0 +max +1\\.[0-9]+ .*1 +1\\.[0-9]+ +text 6, token 5 +The capital city of Senegal \\[is\\] Dakar\\. .*quantiles +activations +samples +0\\.99 – 0\\.999 .*promotes +\" F\" [0-9.]+, .*suppresses .*bare tokens "
  "^warning: .*small.txt: 2 blank lines skipped \\(lines 3, 5\\)$"
  -- ${FT} units --checkpoint ${CAPITALS} --layer 0 --corpus ${UNITS}/small.txt --unit 172 --width 80)
cli_test("units without --unit is a table of every unit, sorted as asked" 0
  "Every unit, by its mean activation .*unit +max +mean +active +fires most at +promotes"
  ANY -- ${FT} units --checkpoint ${CAPITALS} --layer 0 --corpus ${UNITS}/small.txt --sort mean)
cli_test("units --format json has the layer, the corpus and each unit's readings by their names" 0
  "^\\{ \"layer\": 1, .*\"corpus\": \\{ \"file\": \"[^\"]*small.txt\", \"texts\": 5, \"tokens\": 42, .*\"units\": \\[ \\{ \"layer\": 1, \"unit\": 3, \"max_activating\": \\[ \\{ \"text\": [0-9]+, \"token\": [0-9]+, \"activation\": .*\"tokens\": \\[.*\"mean\": .*\"fraction_active\": .*\"quantiles\": \\[ \\{ \"from\": 0.99, \"to\": 0.999, .*\"promotes\": \\[ \\{ \"id\": [0-9]+, \"token\": .*\"score\": .*\"suppresses\": "
  ANY -- ${FT} units --checkpoint ${CAPITALS} --layer 1 --corpus ${UNITS}/small.txt --unit 3 --format json)
cli_test("units --format markdown is the same card in Markdown" 0 "^# Layer 0's units over .*## Unit 24 of layer 0 .*```text"
  ANY -- ${FT} units --checkpoint ${CAPITALS} --layer 0 --corpus ${UNITS}/small.txt --unit 24 --format markdown)
cli_test("units --format html is one page with a card per unit" 0 "^<!DOCTYPE html>.*Unit 255 of layer 0.*</html>$"
  ANY -- ${FT} units --checkpoint ${CAPITALS} --layer 0 --corpus ${UNITS}/small.txt --format html)
cli_test("units --skip-first leaves position 0 of every text out" 0 "\"read\": 37, \"blank\": \\[ ?2, 4 ?\\], .*\"skip_first\": true"
  ANY -- ${FT} units --checkpoint ${CAPITALS} --layer 0 --corpus ${UNITS}/small.txt --unit 24 --skip-first --format json)
cli_test("units reads corpus.txt beside the model when no --corpus is given" 0 "corpus +corpus.txt beside the checkpoint: 5 texts, 42 tokens"
  ANY -- bash -c "d=\"$2/units_default\"\; rm -rf \"$d\" && mkdir -p \"$d\" && for f in \"$1\"/*\; do case \"$f\" in */corpus.txt) \;\; *) ln -s \"$f\" \"$d/\"\;\; esac\; done && cp \"$3\" \"$d/corpus.txt\" && exec \"$0\" units --checkpoint \"$d\" --layer 0 --unit 1"
     ${FT} ${CAPITALS} ${CMAKE_CURRENT_BINARY_DIR} ${UNITS}/small.txt)
cli_test("units --promotes lists the units whose value vectors push the token most, each with its contexts" 0
  "The units that push up \" Paris\" .* rank +layer +unit +score +max +fires most at +1 +[01] +[0-9]+ +\\+[0-9.]+ .*Unit [0-9]+ of layer [01] "
  ANY -- ${FT} units --checkpoint ${CAPITALS} --corpus ${UNITS}/small.txt --promotes " Paris" --top 3)
cli_test("units --suppresses --format json has each unit's layer, unit and score" 0
  "\"direction\": \"suppresses\", .*\"units\": \\[ \\{ \"layer\": 1, \"unit\": [0-9]+, \"score\": -[0-9.]+"
  ANY -- ${FT} units --checkpoint ${CAPITALS} --layer 1 --corpus ${UNITS}/small.txt --suppresses " Paris" --top 2 --format json)
# --top with --promotes counts the units found; each unit's lists stay at 10, so the output grows
# with --top and not with its square.
cli_test("units --promotes --top 30 finds 30 units, each with its 10 best contexts" 0
  "rank +layer +unit .* 30 +[01] +[0-9]+ .*Where it fires most: the 10 largest activations"
  ANY -- ${FT} units --checkpoint ${CAPITALS} --promotes " Paris" --top 30)
cli_test("units --promotes --top 30 does not give each unit 30 contexts" 0 "!the 30 largest activations"
  ANY -- ${FT} units --checkpoint ${CAPITALS} --promotes " Paris" --top 30)
cli_test("units skips a line longer than the position table, naming it, and counts it" 0
  "2 texts, 14 tokens\; 1 longer than the position table skipped \\(line 2\\)"
  "^warning: .*long.txt: 1 line longer than the model's position table skipped \\(line 2\; the first is 71 tokens\\)$"
  -- ${FT} units --checkpoint ${CAPITALS} --layer 0 --corpus ${UNITS}/long.txt --unit 1 --width 200)
cli_test("units refuses an empty corpus" 2 EMPTY "^error: .*empty.txt: the corpus is empty\; give one text a line$"
  -- ${FT} units --checkpoint ${CAPITALS} --layer 0 --corpus ${UNITS}/empty.txt)
cli_test("units refuses a corpus of blank lines, counting them" 2 EMPTY
  "^error: .*blank.txt: the corpus has no text to run: of its 3 lines, 3 blank and 0 longer than the model's 64 positions$"
  -- ${FT} units --checkpoint ${CAPITALS} --layer 0 --corpus ${UNITS}/blank.txt)
cli_test("units refuses a corpus whose every line is too long" 2 EMPTY
  "^error: .*all_long.txt: the corpus has no text to run: of its 1 line, 0 blank and 1 longer than the model's 64 positions$"
  -- ${FT} units --checkpoint ${CAPITALS} --layer 0 --corpus ${UNITS}/all_long.txt)
cli_test("units refuses a corpus that is not UTF-8, naming the line" 2 EMPTY
  "^error: .*latin1.txt: line 2: not UTF-8\; the corpus must be UTF-8 text, one text a line$"
  -- ${FT} units --checkpoint ${CAPITALS} --layer 0 --corpus ${UNITS}/latin1.txt)
cli_test("units refuses --top 0" 2 EMPTY "^error: --top: expected a whole number from 1 to 1000"
  -- ${FT} units --checkpoint ${CAPITALS} --layer 0 --corpus ${UNITS}/small.txt --top 0)
cli_test("units refuses a --unit past d_ff" 2 EMPTY "^error: .*capitals: --unit: unit 256 is out of range: layer 0 has d_ff = 256 units \\(0 to 255\\)$"
  -- ${FT} units --checkpoint ${CAPITALS} --layer 0 --corpus ${UNITS}/small.txt --unit 3,256)
cli_test("units refuses an expert's unit in a dense layer" 2 EMPTY "^error: .*--unit: layer 0 is dense: name a unit as J, without an expert\; got 1:3$"
  -- ${FT} units --checkpoint ${CAPITALS} --layer 0 --corpus ${UNITS}/small.txt --unit 1:3)
cli_test("units refuses a --layer past the last" 2 EMPTY "^error: .*--layer: layer 2 is out of range: the checkpoint has 2 layers \\(0 to 1\\)$"
  -- ${FT} units --checkpoint ${CAPITALS} --layer 2 --corpus ${UNITS}/small.txt)
cli_test("units --promotes of a word of several tokens names the pieces" 2 EMPTY
  "^error: --promotes: \"Paris\" is 2 tokens, \"P\" \\+ \"aris\"\; a value vector scores one token: give one\; \" Paris\" with its leading space is one$"
  -- ${FT} units --checkpoint ${CAPITALS} --corpus ${UNITS}/small.txt --promotes Paris)
cli_test("units --promotes of a word without its space says which token it searched and names the spaced one" 0
  "The units whose value vectors promote \"Paris\" .*\"Paris\" is token [0-9]+ \\(the word at the start of a text.*the word inside a sentence, after a space, is \" Paris\", token [0-9]+: --promotes \" Paris\" searches that one\\."
  ANY -- ${FT} units --checkpoint ${DATA}/models/atlas --corpus ${UNITS}/small.txt --promotes Paris --top 1 --width 400)
# A Llama-style tokenizer (Prepend "▁", <s> first) beside the whole tiny Mixtral: as text " capital"
# would be "<s>" + "▁" + "▁capital"; the vocabulary's "▁capital" is the one token searched.
cli_test("units --promotes finds a word the vocabulary holds as one token before tokenizing it as text" 0
  "The units whose value vectors promote \" capital\" .*token id 4\\)"
  ANY -- bash -c "d=\"$2/units_llama_words\"\; rm -rf \"$d\" && mkdir -p \"$d\" && ln -s \"$1\"/model.safetensors \"$1\"/config.json \"$d/\" && cp \"$3\"/llama_tokenizer.json \"$d\"/tokenizer.json && exec \"$0\" units --checkpoint \"$d\" --corpus \"$3\"/llama_corpus.txt --promotes \" capital\" --top 2 --width 400"
     ${FT} ${MIXTRAL_WHOLE} ${CMAKE_CURRENT_BINARY_DIR} ${UNITS})
# A copy of the model's folder without its corpus.txt (links to the other files: nothing is written through them).
cli_test("units without a corpus beside the model asks for --corpus" 2 EMPTY
  "^error: .*units_no_corpus: --corpus: no corpus given, and the checkpoint has no corpus.txt beside it\; give a corpus file, one text a line$"
  -- bash -c "d=\"$2/units_no_corpus\"\; rm -rf \"$d\" && mkdir -p \"$d\" && for f in \"$1\"/*\; do case \"$f\" in */corpus.txt) \;\; *) ln -s \"$f\" \"$d/\"\;\; esac\; done && exec \"$0\" units --checkpoint \"$d\" --layer 0"
     ${FT} ${CAPITALS} ${CMAKE_CURRENT_BINARY_DIR})
cli_test("units without --layer or --promotes says what to give" 2 EMPTY "^error: --layer: give the layer whose units to read, or --promotes TOKEN"
  -- ${FT} units --checkpoint ${CAPITALS} --corpus ${UNITS}/small.txt)
cli_test("units --skip-first over texts of one token each is refused" 2 EMPTY
  "^error: <stdin>: --skip-first: leaves no token to read: every text of the corpus is one token long$"
  --stdin ${UNITS}/one_token.txt -- ${FT} units --checkpoint ${CAPITALS} --layer 0 --corpus - --skip-first)
cli_test("units reads the corpus from standard input given as -, CR LF and all" 0 "corpus +<stdin>: 5 texts, 42 tokens"
  ANY --stdin ${UNITS}/small_crlf.txt -- ${FT} units --checkpoint ${CAPITALS} --layer 0 --corpus - --unit 3)
# A units page for the units asked is headed by them, not "Every unit".
cli_test("units --format html for two units heads their table with the units asked" 0
  "<h2>The 2 units asked, by its largest activation</h2>.*Unit 3 of layer 0.*Unit 24 of layer 0"
  ANY -- ${FT} units --checkpoint ${CAPITALS} --layer 0 --corpus ${UNITS}/small.txt --unit 3,24 --format html)
# The histogram's axis ends at the largest activation read, as the card prints it, even when its
# counts are a sample's (atlas's unit 168: 2.5144, its sample of 1,000 reaching 2.3454 before).
cli_test("units --format html labels the histogram's right end with the unit's max as printed" 0
  "max</dt><dd>([0-9.]+)</dd>.*<figcaption>How its activations spread[^<]*</figcaption><svg[^>]*>(<rect[^>]*><title>[^<]*</title></rect>)*<text[^>]*>[^<]*</text><text[^>]*>\\1</text></svg>"
  ANY -- ${FT} units --checkpoint ${DATA}/models/atlas --layer 1 --unit 168 --sample 1000 --format html)

# quiz and worksheet on a real prompt: the shipped model, "The capital of France is", layer 0.
set(CAPITALS ${DATA}/models/capitals)
set(FRANCE --prompt "The capital of France is")
cli_test("quiz on a prompt: seven questions, one of each kind, all right with seed 1" 0
  "Quiz: \"The capital of France is\" through layer 0 of .*capitals 7 questions.*Which unit writes the prediction.*172 ✓ right: unit = 172.*the other 124 products sum to.*activated\\[0\\]\\[24\\] = \\? > 4.2407 ✓ right.*σ = 0.3367.*Type 1 to 4.*set to 0 at every token\\. From their direct pushes alone.*✓ right: P\\(\" Paris\"\\) = .*The model run again without.*Which layer pushes most\\? .*Score: 7 of 7 right at the first try"
  EMPTY --stdin ${QUIZ}/prompt_all_right.txt -- ${FT} quiz --checkpoint ${CAPITALS} --layer 0 ${FRANCE} --color never)
cli_test("quiz on a prompt --format json gives the ids, the target and each question's answer" 0
  "\"token_ids\": \\[ 267, 270, 263, 529, 259 \\], \"target\": \\{ \"id\": [0-9]+, \"token\": \" Paris\" \\}, \"layer\": 0, \"seed\": 1, .*\"kind\": \"top-unit\".*\"answer\": 172.0.*\"kind\": \"knock-out\".*\"tolerance\": 0\\.[0-9]+.*\"kind\": \"layers\".*\"answer\": 0.0"
  EMPTY -- ${FT} quiz --checkpoint ${CAPITALS} --layer 0 ${FRANCE} --format json)
cli_test("quiz on a prompt: --seed chooses other units" 0 "\"kind\": \"expand\", \"layer\": 0, \"token\": 2, \"units\": \\[ 222 \\]" EMPTY
  -- ${FT} quiz --checkpoint ${CAPITALS} --layer 0 ${FRANCE} --format json --seed 2)
cli_test("quiz on a prompt read from a file" 0 "\"prompt\": \"The capital of France is\"" EMPTY
  -- ${FT} quiz --checkpoint ${CAPITALS} --layer 0 --prompt-file ${INPUTS}/prompt_france.txt --format json)
# (6), the knock-out: 0.8862 · e^(−2.9328) / (1 − 0.8862 + 0.8862 · e^(−2.9328)) = 0.2932, by hand.
cli_test("worksheet on a prompt: the questions with blanks, then the key on its own page" 0
  "^# Worksheet: \"The capital of France is\" through layer 0 of .*\\(1\\) unit = ______ .*\\(7\\) layer = ______ <div style=\"break-before: page\"></div> # Answer key: .*\\(1\\) \\| unit = 172 \\|.*\\(6\\) \\| P\\(\" Paris\"\\) = 0\\.2932 \\|"
  EMPTY -- ${FT} worksheet --checkpoint ${CAPITALS} --layer 0 ${FRANCE})
cli_test("worksheet on a prompt as a page" 0 "<!DOCTYPE html>.*Answer key" EMPTY
  -- ${FT} worksheet --checkpoint ${CAPITALS} --layer 0 ${FRANCE} --format html)
cli_test("worksheet on a prompt: --count asks more" 0 "\\(9\\) hidden\\[[0-9]\\]\\[[0-9]+\\] = ______" EMPTY
  -- ${FT} worksheet --checkpoint ${CAPITALS} --layer 0 ${FRANCE} --count 9)
cli_test("quiz on a prompt: a layer out of range is an input error" 2 EMPTY "^error: .*capitals.*: --layer: layer 7 is out of range"
  -- ${FT} quiz --checkpoint ${CAPITALS} --layer 7 ${FRANCE})
cli_test("quiz on a prompt: --checkpoint without a prompt is an input error" 2 EMPTY "^error: --checkpoint: asks about a prompt's run: give --prompt or --prompt-file too"
  -- ${FT} quiz --checkpoint ${CAPITALS} --layer 0)
cli_test("worksheet on a prompt: --checkpoint without a prompt is an input error" 2 EMPTY "^error: --checkpoint: asks about a prompt's run"
  -- ${FT} worksheet --checkpoint ${CAPITALS} --layer 0)
cli_test("quiz on a prompt: an empty prompt is an input error" 2 EMPTY "^error: .*--prompt-file: the prompt is empty"
  -- ${FT} quiz --checkpoint ${CAPITALS} --layer 0 --prompt-file /dev/null --format json)
cli_test("quiz on a prompt: a missing checkpoint is an input error" 2 EMPTY "^error: .*nowhere"
  -- ${FT} quiz --checkpoint nowhere --layer 0 ${FRANCE})
cli_test("quiz on a prompt: an example file as well is a usage error" 2 EMPTY "^error: .*excludes"
  -- ${FT} quiz ${DATA}/lesson_hand.json --checkpoint ${CAPITALS} ${FRANCE})
cli_test("quiz on a prompt: --unit is an example file's option" 2 EMPTY "^error: .*excludes"
  -- ${FT} quiz --checkpoint ${CAPITALS} ${FRANCE} --unit 3)
cli_test("worksheet on a prompt: --blanks is an example file's option" 2 EMPTY "^error: .*excludes"
  -- ${FT} worksheet --checkpoint ${CAPITALS} ${FRANCE} --blanks 3)
cli_test("quiz on a prompt: the prompt cannot come from standard input, which holds the answers" 2 EMPTY
  "^error: --prompt-file: the answers are read from standard input" -- ${FT} quiz --checkpoint ${CAPITALS} --prompt-file -)
cli_test("quiz: neither a file nor a checkpoint is an input error" 2 EMPTY "^error: give an example file, or --checkpoint" -- ${FT} quiz)
cli_test("worksheet: neither a file nor a checkpoint is an input error" 2 EMPTY "^error: give an example file, or --checkpoint" -- ${FT} worksheet)
cli_test("worksheet: a blank stays blank in the next table that would show it (memory.json --blanks 4)" 0
  "!\\| Berlin \\+ country\\? \\| -0.5000 \\| \\([0-9]\\) ______ \\|.*## Step 2.*\\| Berlin \\+ country\\? \\| 0.0000 \\| 0.5000 \\|" EMPTY
  -- ${FT} worksheet ${DATA}/memory.json --blanks 4)
# The knock-out asks for what the learner can work out: p' = p·e^(−Δ) / (1 − p + p·e^(−Δ)) from the
# numbers it gives, 0.8862 and Δ = 2.9328: 0.0472 / (0.1138 + 0.0472) = 0.2932. The model's own 0.6036
# (tests/quiz/reference_test.py checks it against NumPy) is wrong there, and shown after.
cli_test("quiz on a prompt: the knock-out asks for the direct pushes' estimate and shows the model run again after it" 0
  "what is the probability of \" Paris\" now\\?.*✗ not 0\\.6036\\..*✓ right: P\\(\" Paris\"\\) = 0\\.0472 / \\(0\\.1138 \\+ 0\\.0472\\) = 0\\.2932.*The model run again without units 28, 168, 172: P\\(\" Paris\"\\) 0\\.8862 → 0\\.6036"
  EMPTY --stdin ${QUIZ}/prompt_knock_out.txt -- ${FT} quiz --checkpoint ${CAPITALS} --layer 0 ${FRANCE} --color never --tolerance 0.001)
# grad --prompt: the model's own next-token loss, the upstream the later layers send back to
# layer N's FFN, that FFN's backward pass, and a step on its weights with the model run again.
cli_test("grad --prompt shows the target, the upstream by token and the model's loss" 0
  "target +\" Paris\", the next token after token 4 \\(\" is\"\\).*Upstream +g = dL/d\\(FFN output\\).*\" is\": ‖g‖ = [0-9.]+.*Loss +L = −log p\\(\" Paris\"\\) = [0-9.]+, p = 0\\.[0-9]+.*Gradient check .*✓.*Units +two estimates"
  EMPTY -- ${FT} grad --checkpoint ${DATA}/models/capitals --layer 0 --prompt "The capital of France is" --target " Paris" --detail summary --color never)
cli_test("grad --prompt on an MoE layer traces the experts' backward with the routing held, steps, and lists the routed experts' units" 0
  "Backward pass · Layer 1 of a mixtral checkpoint .*target +\"f\", the next token after token 4 .*routing +held fixed.*Upstream +g = dL/d\\(FFN output\\).*\"e\": ‖g‖ = 0\\.7040 .*experts 0, 2 → output .*Loss +L = −log p\\(\"f\"\\) = 5\\.2358, p = 0\\.0053 Gradient check .*✓\\. .*The model run again with the stepped layer: p\\(\"f\"\\) 0\\.0053 → 0\\.0[0-9]+, loss 5\\.2358 → [0-9.]+ ✓ down .*expert +unit +a +-Σ g·a +DLA 0 +7 "
  EMPTY -- ${FT} grad --checkpoint ${INPUTS}/checkpoints/mixtral_whole --layer 1 --prompt abcde --target f --lr 0.1 --detail summary --color never)
cli_test("grad --prompt --format json on an MoE layer has the target, the upstream and each unit's expert" 0
  "\"target\": \\{ \"text\": \"f\", .*\"prob\": 0\\.0053[0-9]*.*\"upstream\": \\[.*\"units\": \\[ \\{ \"expert\": 0, \"unit\": 7, \"activation\": "
  EMPTY -- ${FT} grad --checkpoint ${INPUTS}/checkpoints/mixtral_whole --layer 1 --prompt abcde --target f --format json)
cli_test("grad --prompt writes the forward pass's x, the residual stream, in the output's four decimals" 0
  "\" France\": x = \\[-0\\.0724, 0\\.0332, 0\\.0886, …, 0\\.0203, 0\\.1351, 0\\.0950\\]"
  EMPTY -- ${FT} grad --checkpoint ${DATA}/models/capitals --layer 0 --prompt "The capital of France is" --target " Paris" --detail summary --color never)
cli_test("grad --prompt --lr runs the model again with the stepped layer and shows p(target) go up" 0
  "The model run again with the stepped layer: p\\(\" Paris\"\\) (0\\.[0-9]+) → 0\\.[0-9]+, loss [0-9.]+ → [0-9.]+ +✓ down"
  EMPTY -- ${FT} grad --checkpoint ${DATA}/models/capitals --layer 1 --prompt "The capital of France is" --target " Paris" --lr 0.01 --detail summary --color never)
cli_test("grad --prompt --format json has today's names plus target, loss and upstream" 0
  "\"loss_kind\": \"upstream\", \"loss\": [0-9.e-]+, \"gradients\": \\{ \"norm.weight\": .*\"check\": .*\"target\": \\{ \"text\": \" Paris\", \"ids\": \\[ ?[0-9]+ ?\\], \"pieces\": \\[ ?\" Paris\" ?\\], \"position\": 4, \"prob\": 0\\.[0-9]+.*\"upstream\": \\[ ?\\[.*\"units\": \\[ ?\\{ \"unit\": [0-9]+, \"activation\":"
  EMPTY -- ${FT} grad --checkpoint ${DATA}/models/capitals --layer 0 --prompt "The capital of France is" --target " Paris" --format json)
cli_test("grad --prompt takes a target of several tokens and names its pieces" 0
  "target +\" Parisian\" = \"[^\"]+\" \\+ \"[^\"]+\""
  EMPTY -- ${FT} grad --checkpoint ${DATA}/models/capitals --layer 0 --prompt "The capital of France is" --target " Parisian" --detail summary --color never)
cli_test("grad --prompt refuses a target that gives no tokens" 2 EMPTY "^error: --target: the target gives no tokens"
  -- bash -c "exec \"$0\" grad --checkpoint \"$1\" --layer 0 --prompt \"The capital of France is\" --target ''" ${FT} ${DATA}/models/capitals)
cli_test("grad --prompt refuses a target of several tokens before the last position, naming the pieces" 2 EMPTY
  "^error: --target: is [0-9]+ tokens \\(\"[^\"]+\" \\+ \"[^\"]+\".*a position before the last takes a target of one token$"
  -- ${FT} grad --checkpoint ${DATA}/models/capitals --layer 0 --prompt "The capital of France is" --target " Parisian" --position 2)
cli_test("grad --prompt refuses a position past the prompt" 2 EMPTY "^error: --position: token 9 is out of range: the prompt has 5 tokens \\(0 to 4\\)$"
  -- ${FT} grad --checkpoint ${DATA}/models/capitals --layer 0 --prompt "The capital of France is" --target " Paris" --position 9)
cli_test("grad --prompt names the one token of a one-token prompt as 0" 2 EMPTY "^error: --position: token 3 is out of range: the prompt has 1 token \\(0\\)$"
  -- ${FT} grad --checkpoint ${DATA}/models/capitals --layer 0 --prompt "P" --target " Paris" --position 3)
cli_test("run --intervene names the one token of a one-token prompt as 0" 2 EMPTY "^error: .*capitals: --intervene: \"172@2=0\": token 2 is out of range: the prompt has 1 token \\(0\\)$"
  -- ${FT} run --checkpoint ${CAPITALS} --layer 0 --prompt "P" --intervene 172@2=0)
cli_test("grad --prompt refuses a layer the model lacks" 2 EMPTY "^error: .*capitals: --layer: layer 2 is out of range: the checkpoint has 2 layers \\(0 to 1\\)$"
  -- ${FT} grad --checkpoint ${DATA}/models/capitals --layer 2 --prompt "The capital of France is" --target " Paris")
cli_test("grad --prompt refuses a learning rate that is not finite" 2 EMPTY "^error: --lr: expected a finite learning rate > 0, got inf$"
  -- ${FT} grad --checkpoint ${DATA}/models/capitals --layer 0 --prompt "The capital of France is" --target " Paris" --lr inf)
cli_test("grad --prompt refuses BERT, which has no head to score a next token with" 2 EMPTY
  "^error: .*bert: a bert model is an encoder: it has no head, so no next-token loss to differentiate$"
  -- ${FT} grad --checkpoint ${INPUTS}/checkpoints/bert --layer 0 --prompt "The capital of France is" --target " Paris")
cli_test("grad --checkpoint without --prompt says what to add" 2 EMPTY "^error: --checkpoint: grad on a checkpoint differentiates a prompt's next-token loss"
  -- ${FT} grad --checkpoint ${DATA}/models/capitals --layer 0)
cli_test("grad on an example stored out_in says its weight tables are the transpose of the heading's shapes" 0
  "Contract +dW2 = activatedᵀ · g +\\(8 × 2\\)·\\(2 × 4\\) → \\(8 × 4\\) .*dW2 in the file's layout \\(out_in\\): the transpose of the math form, \\(4 × 8\\)\\."
  EMPTY -- ${FT} grad ${DATA}/walkthrough.json --color never)
# GGUF: the shipped model written as a GGUF file (and as an Ollama blob) gives what its directory gives
cli_test("the shipped model as a GGUF file gives its directory's JSON: the prompt's walkthrough (and on an Ollama blob)" 0 "^same$" ANY
  -- bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/gguf_same.sh ${FT} ${CMAKE_CURRENT_SOURCE_DIR}/inputs/gguf/convert.py ${CAPITALS}
     ${UNITS}/small.txt 0)
cli_test("the shipped model as a GGUF file gives its directory's JSON: a layer on embedding rows" 0 "^same$" ANY
  -- bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/gguf_same.sh ${FT} ${CMAKE_CURRENT_SOURCE_DIR}/inputs/gguf/convert.py ${CAPITALS}
     ${UNITS}/small.txt 1)
cli_test("the shipped model as a GGUF file gives its directory's JSON: a layer on a word" 0 "^same$" ANY
  -- bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/gguf_same.sh ${FT} ${CMAKE_CURRENT_SOURCE_DIR}/inputs/gguf/convert.py ${CAPITALS}
     ${UNITS}/small.txt 2)
cli_test("the shipped model as a GGUF file gives its directory's JSON: causal tracing" 0 "^same$" ANY
  -- bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/gguf_same.sh ${FT} ${CMAKE_CURRENT_SOURCE_DIR}/inputs/gguf/convert.py ${CAPITALS}
     ${UNITS}/small.txt 3)
cli_test("the shipped model as a GGUF file gives its directory's JSON: the units over a corpus" 0 "^same$" ANY
  -- bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/gguf_same.sh ${FT} ${CMAKE_CURRENT_SOURCE_DIR}/inputs/gguf/convert.py ${CAPITALS}
     ${UNITS}/small.txt 4)
# Again with the matrix library's own choice of kernels (the development machine's environment
# names Haswell's): a band's samples among equal activations must not depend on the kernel.
cli_test("the units over a corpus are the same from a GGUF file with the matrix library's own kernels" 0 "^same$" ANY
  -- env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/gguf_same.sh ${FT}
     ${CMAKE_CURRENT_SOURCE_DIR}/inputs/gguf/convert.py ${CAPITALS} ${UNITS}/small.txt 4)
cli_test("the shipped model as a GGUF file gives its directory's JSON: the tokens" 0 "^same$" ANY
  -- bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/gguf_same.sh ${FT} ${CMAKE_CURRENT_SOURCE_DIR}/inputs/gguf/convert.py ${CAPITALS}
     ${UNITS}/small.txt tokenize)
# GGUF of quantized weights (tests/inputs/gguf/quantized_units.py): the units explained, in the JSON
cli_test("run --unit on a quantized GGUF layer gives each weight's block, numbers and value in the JSON as the file's bytes give them" 0
  "^8 weights as their blocks' bytes give them$" EMPTY
  -- bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/gguf_dequantized.sh ${FT} ${CMAKE_CURRENT_SOURCE_DIR}/inputs/gguf/quantized_units.py layer)
cli_test("run --prompt --unit on a quantized GGUF layer gives each weight's dequantization in the JSON as the file's bytes give it" 0
  "^12 weights as their blocks' bytes give them$" EMPTY
  -- bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/gguf_dequantized.sh ${FT} ${CMAKE_CURRENT_SOURCE_DIR}/inputs/gguf/quantized_units.py prompt)
cli_test("a Mixtral of quantized experts traces as its F64 safetensors copy, and --unit E:J dequantizes in expert E's slice" 0
  "^[0-9]+ weights as their blocks' bytes give them$" EMPTY
  -- bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/gguf_dequantized.sh ${FT} ${CMAKE_CURRENT_SOURCE_DIR}/inputs/gguf/quantized_units.py moe)
cli_test("run --prompt --unit on a quantized GGUF layer writes the weights' dequantization out" 0
  "its largest number written, W2\\[300\\]\\[[0-9]+\\], is stored: blk.0.ffn_down.weight .*in block 1 of its row \\(columns 256–511\\).*w = d · sc · \\(q − 32\\) = " EMPTY
  -- bash -c "python3 \"$1\" write dense \"$2\"/prompt_q.gguf && exec \"$0\" run --checkpoint \"$2\"/prompt_q.gguf --layer 0 --prompt 'a b' --unit 300 --color never"
     ${FT} ${CMAKE_CURRENT_SOURCE_DIR}/inputs/gguf/quantized_units.py ${CMAKE_CURRENT_BINARY_DIR})
cli_test("run --unit beyond d_ff on a quantized GGUF layer is one error line" 2 EMPTY
  "^error: .*range_q.gguf: --unit: unit 512 is out of range: layer 0 has d_ff = 512 units \\(0 to 511\\)$"
  -- bash -c "python3 \"$1\" write dense \"$2\"/range_q.gguf && exec \"$0\" run --checkpoint \"$2\"/range_q.gguf --layer 0 --embedding 2 --unit 512 --format json"
     ${FT} ${CMAKE_CURRENT_SOURCE_DIR}/inputs/gguf/quantized_units.py ${CMAKE_CURRENT_BINARY_DIR})
cli_test("run --unit E:J beyond the experts of a quantized Mixtral is one error line" 2 EMPTY
  "^error: .*range_moe.gguf: --unit: expert 4 is out of range: layer 0 has 4 experts \\(0 to 3\\)$"
  -- bash -c "python3 \"$1\" write moe \"$2\"/range_moe.gguf && exec \"$0\" run --checkpoint \"$2\"/range_moe.gguf --layer 0 --embedding 2 --unit 4:7"
     ${FT} ${CMAKE_CURRENT_SOURCE_DIR}/inputs/gguf/quantized_units.py ${CMAKE_CURRENT_BINARY_DIR})
cli_test("run --unit J on a Mixtral layer asks for E:J" 2 EMPTY
  "^error: .*mixtral: --unit: layer 0 is a Mixture of Experts: name a unit as E:J, unit J of expert E\; got 3$"
  -- ${FT} run --checkpoint ${INPUTS}/checkpoints/mixtral --layer 0 --input ${INPUTS}/checkpoints/x.npy --unit 3)
cli_test("run --prompt --unit E:J on a Mixtral layer explains the expert's unit at the tokens routed to it" 0
  "Expert 1's unit 3 · \"[a-e]\"\n" EMPTY
  -- ${FT} run --checkpoint ${INPUTS}/checkpoints/mixtral_whole --layer 1 --prompt abcde --unit 1:3 --color never)
cli_test("run --prompt --unit J on a Mixtral layer asks for E:J" 2 EMPTY
  "^error: .*mixtral_whole: --unit: layer 1 is a Mixture of Experts: name a unit as E:J, unit J of expert E\; got 3$"
  -- ${FT} run --checkpoint ${INPUTS}/checkpoints/mixtral_whole --layer 1 --prompt abcde --unit 3)
cli_test("run --unit E:J on a dense layer is one error line" 2 EMPTY
  "^error: .*llama: --unit: layer 0 is dense: name a unit as J, without an expert\\; got 1:5$"
  -- ${FT} run --checkpoint ${INPUTS}/checkpoints/llama --layer 0 --input ${INPUTS}/checkpoints/x.npy --unit 1:5)
# A quantized Llama (Q4_K, Q6_K, Q8_0, Q5_K, Q5_0, Q5_1, F32) as GGUF and as its F64 weights in a directory
cli_test("a quantized GGUF Llama's prompt walkthrough is its F64 safetensors directory's JSON, every number to 1e-12" 0 "^same$" ANY
  -- bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/gguf_quantized_same.sh ${FT} ${CMAKE_CURRENT_SOURCE_DIR}/inputs/gguf/quantized.py)
cli_test("a GGUF file whose architecture ffn-trace does not run is one error naming the key" 2 EMPTY
  "^error: .*not_a_model.gguf: general.architecture: missing: the file does not say its architecture$"
  -- bash -c "printf 'GGUF\\003\\0\\0\\0' > \"$1\"/not_a_model.gguf && head -c 16 /dev/zero >> \"$1\"/not_a_model.gguf && exec \"$0\" run --checkpoint \"$1\"/not_a_model.gguf --layer 0 --embedding 1" ${FT} ${CMAKE_CURRENT_BINARY_DIR})
cli_test("params --quant Q4_K_M gives llama2-7b's bytes as llama.cpp's file of that type (4.08 GB), the FFN first" 0
  "Bytes as Q4_K_M +weights +stored as +bits/weight +bytes +FFN \\(32 layers\\) +4,328,521,728 +Q4_K, Q6_K +4.84 +2.62 GB +attention .* total +4.08 GB"
  EMPTY -- ${FT} params --model llama2-7b --quant Q4_K_M)
cli_test("params --quant Q8_0 --format json has each part's bytes by type" 0
  "\"quant\": \\{ \"type\": \"Q8_0\", \"parts\": \\[ \\{ \"part\": \"FFN \\(32 layers\\)\", \"weights\": 45097156608, \"types\": \\{ \"Q8_0\": 45097156608 \\}, \"bytes\": 47915728896 \\}"
  EMPTY -- ${FT} params --model mixtral-8x7b --quant Q8_0 --format json)
cli_test("params --model mixtral-8x7b at 80 columns keeps each formula beside its numbers and result" 0
  "Attention, one layer +formula +parameters +Q +d_model × d_model += 4,096 × 4,096 = +16,777,216 +K +d_model × kv_heads·head_dim += 4,096 × 1,024 = +4,194,304 .*One layer +formula +parameters +experts +experts × one expert += 8 × 176,160,768 = +1,409,286,144 +1.41B"
  EMPTY -- ${FT} params --model mixtral-8x7b --width 80)
cli_test("params --model mixtral-8x7b at 80 columns has no line wider than 80" 0 EMPTY EMPTY
  -- bash -c "\"$0\" params --model mixtral-8x7b --width 80 | LC_ALL=C.UTF-8 grep -P '^.{81,}' || true" ${FT})

# transcoder train: a small transcoder of the atlas model's layer 1 over the first 80 texts of its
# corpus, and each bad input refused in
# one line with nothing written. TC_RUN: rm -rf OUT; FT transcoder train ARGS -o OUT; then the
# status kept, and OUT absent when it is 2.
set(TC_OUT ${CMAKE_CURRENT_BINARY_DIR}/transcoder_cli)
file(MAKE_DIRECTORY ${TC_OUT})
set(TC_RUN "out=$1\; shift\; rm -rf \"$out\"\; \"$0\" transcoder train \"\$@\" -o \"$out\"\; s=$?\; if [ $s = 2 ] && [ -e \"$out\" ]\; then echo written >&2\; exit 9\; fi\; exit $s")
set(TC_ARGS --checkpoint ${DATA}/models/atlas --layer 1 --corpus ${INPUTS}/transcoder/corpus.txt)
cli_test("transcoder train shows each epoch and the replacement's losses" 0
  "A transcoder of layer 1's FFN, 64 features.*epoch +MSE +explained +L0 +dead +1 .* 2 .*clean +[0-9.]+ +FFN zeroed +[0-9.]+ +transcoder spliced +[0-9.]+ +loss recovered +\\(zeroed − spliced\\) / \\(zeroed − clean\\) = "
  EMPTY -- bash -c "${TC_RUN}" ${FT} ${TC_OUT}/text ${TC_ARGS} --features 64 --k 4 --epochs 2 --color never)
cli_test("transcoder train --format json has epochs and evaluation" 0
  "\"epochs\": \\[ \\{ \"mse\": [0-9.e-]+, \"explained_variance\": -?[0-9.e-]+, \"l0\": [0-9.]+, \"dead\": [0-9]+ \\}.*\"evaluation\": \\{ \"loss_clean\": [0-9.]+, \"loss_zeroed\": [0-9.]+, \"loss_spliced\": [0-9.]+, \"loss_recovered\": -?[0-9.e-]+, \"top1_agreement\": [0-9.]+"
  EMPTY -- bash -c "${TC_RUN}" ${FT} ${TC_OUT}/json ${TC_ARGS} --features 32 --l1 0.001 --epochs 1 --format json)
cli_test("transcoder train --features 0 is refused" 2 EMPTY "^error: --features: a transcoder needs at least 1 feature, got 0$"
  -- bash -c "${TC_RUN}" ${FT} ${TC_OUT}/bad ${TC_ARGS} --features 0)
cli_test("transcoder train --k larger than --features is refused" 2 EMPTY "^error: --k: TopK keeps 9 features a token, more than the 8 features asked"
  -- bash -c "${TC_RUN}" ${FT} ${TC_OUT}/bad ${TC_ARGS} --features 8 --k 9)
cli_test("transcoder train --l1 negative is refused" 2 EMPTY "^error: --l1: expected a finite number ≥ 0, got -0.5$"
  -- bash -c "${TC_RUN}" ${FT} ${TC_OUT}/bad ${TC_ARGS} --features 8 --l1=-0.5)
cli_test("transcoder train on a corpus too small for the features says how many activations are needed" 2 EMPTY
  "^error: --corpus: the corpus gives [0-9]+ activations. 100000 features need at least 100000, one a feature"
  -- bash -c "${TC_RUN}" ${FT} ${TC_OUT}/bad ${TC_ARGS} --features 100000 --k 4 --epochs 1)
cli_test("transcoder train -o naming an existing folder is refused" 2 EMPTY "^error: .*: --output: already exists. give a folder that does not exist yet"
  -- ${FT} transcoder train ${TC_ARGS} --features 8 --k 2 -o ${TC_OUT})
cli_test("transcoder train -o naming the checkpoint is refused" 2 EMPTY "^error: .*atlas.*: --output: is the checkpoint's folder"
  -- ${FT} transcoder train ${TC_ARGS} --features 8 --k 2 -o ${DATA}/models/atlas)
cli_test("transcoder train on a layer the model lacks is refused" 2 EMPTY "^error: .*--layer: layer 9 is out of range: the checkpoint has 4 layers \\(0 to 3\\)$"
  -- bash -c "${TC_RUN}" ${FT} ${TC_OUT}/bad --checkpoint ${DATA}/models/atlas --layer 9 --features 8 --k 2)
# run --transcoder with a folder written by hand (tests/inputs/transcoder/make_folder.py): 16 ReLU features of layer 1.
set(TC_HAND ${INPUTS}/transcoder/atlas_layer1)
set(TC_PROMPT --checkpoint ${DATA}/models/atlas --prompt "The capital of France is")
cli_test("run --transcoder shows each token's features, ŷ and error, and the FFN's push explained by units and by features" 0
  "The transcoder beside the units: 16 features.*Token 4 \\(\" is\"\\): [0-9]+ active features? +x̂ = \\[.*feature +pre +z = act\\(pre\\) +push.*ŷ = \\[.*e = y − ŷ = \\[.*At the last token, the FFN's direct push on \" Paris\" explained both ways: +FFN +y · g / σ = 7\\.2222 +units +Σ_j score_j = 7\\.1967, b2 · g / σ = 0\\.0254 +features +Σ_f push_f = "
  EMPTY -- ${FT} run ${TC_PROMPT} --layer 1 --transcoder ${TC_HAND} --detail summary --color never --width 200)
cli_test("run --transcoder --format json adds features with id, activation and push, and the error, at each token" 0
  "\"transcoder\": \\{ \"folder\": .*\"tokens\": \\[ \\{ \"x_hat\": \\[.*\"features\": \\[ \\{ \"id\": [0-9]+, \"pre\": -?[0-9.e-]+, \"activation\": [0-9.e-]+, \"push\": -?[0-9.e-]+ \\}.*\"error\": \\["
  EMPTY -- ${FT} run ${TC_PROMPT} --layer 1 --transcoder ${TC_HAND} --format json)
cli_test("run --transcoder --format html puts the transcoder's section in the prompt's one page" 0
  "^<!DOCTYPE html>.*The units that wrote &quot. Paris&quot..*The transcoder beside the units: 16 features.*Token 4 \\(&quot. is&quot.\\): [0-9]+ active features?.*explained both ways.*</html>\n$"
  EMPTY -- ${FT} run ${TC_PROMPT} --layer 1 --transcoder ${TC_HAND} --detail summary --format html)
cli_test("run --transcoder of another layer names both layers" 2 EMPTY
  "^error: .*atlas_layer1: --layer: the transcoder replaces layer 1 \\(its config.json\\), but --layer is 2$"
  -- ${FT} run ${TC_PROMPT} --layer 2 --transcoder ${TC_HAND})
cli_test("run --transcoder of another d_model names both sizes" 2 EMPTY
  "^error: .*atlas_layer1: W_enc: the transcoder reads d_model = 64 \\(W_enc \\(16, 64\\)\\), but layer 1 of .*capitals has d_model = 128$"
  -- ${FT} run --checkpoint ${DATA}/models/capitals --prompt "The capital of France is" --layer 1 --transcoder ${TC_HAND})
cli_test("run --transcoder on a folder without config.json is refused" 2 EMPTY "^error: .*config.json: missing: a transcoder's folder holds config.json$"
  -- ${FT} run ${TC_PROMPT} --layer 1 --transcoder ${INPUTS}/transcoder)
cli_test("run --transcoder without a prompt is refused" 2 EMPTY "^error: --transcoder: reads a transcoder beside one layer of a prompt"
  -- ${FT} run --checkpoint ${DATA}/models/atlas --layer 1 --embedding 3 --transcoder ${TC_HAND})
cli_test("units --transcoder gives a feature the unit page" 0
  "Layer 1's transcoder features over .*corpus.txt.*activation +a transcoder feature's z = act\\(x̂ · W_encᵀ \\+ b_enc\\).*Transcoder feature 3 of layer 1 +max +[0-9.]+ +mean +[0-9.]+ +active +[0-9.]+% of 564 tokens.*Where it fires most"
  EMPTY -- ${FT} units --checkpoint ${DATA}/models/atlas --transcoder ${TC_HAND} --corpus ${INPUTS}/transcoder/corpus.txt --unit 3 --width 200)
cli_test("units --transcoder --unit past the features is refused" 2 EMPTY "^error: --unit: feature 16 is out of range: the transcoder has 16 features \\(0 to 15\\)$"
  -- ${FT} units --checkpoint ${DATA}/models/atlas --transcoder ${TC_HAND} --unit 16)
cli_test("units --transcoder of another layer than --layer names both" 2 EMPTY "^error: .*atlas_layer1: --layer: the transcoder replaces layer 1 \\(its config.json\\), but --layer is 0$"
  -- ${FT} units --checkpoint ${DATA}/models/atlas --transcoder ${TC_HAND} --layer 0)
cli_test("units --unit J --split shows the features aligned with the unit and where each fires among its examples" 0
  "Unit 5 of layer 1 split into transcoder features.*The 8 features of .*atlas_layer1 whose decoder rows W_dec\\[f\\] point most along the unit's W2 row.*example +unit +f[0-9]+ \\(cos -?0\\.[0-9]+\\)"
  EMPTY -- ${FT} units --checkpoint ${DATA}/models/atlas --layer 1 --unit 5 --split ${TC_HAND} --corpus ${INPUTS}/transcoder/corpus.txt --width 300)
cli_test("units --split of two units is refused" 2 EMPTY "^error: --split: splits one unit: give one --unit, not 2$"
  -- ${FT} units --checkpoint ${DATA}/models/atlas --layer 1 --unit 5,6 --split ${TC_HAND} --corpus ${INPUTS}/transcoder/corpus.txt)

# serve's usage errors: each one line, exit 2, nothing on stdout, before it listens
# (its answers are tested in tests/serve/).
cli_test("serve refuses an address that is not this computer's" 2 EMPTY
  "^error: --host: could not listen on 203.0.113.7 port 0: it is taken, or not an address of this computer$"
  -- ${FT} serve --checkpoint ${PROJECT_SOURCE_DIR}/data/models/capitals --host 203.0.113.7 --port 0)
cli_test("serve refuses two checkpoints the page would name alike" 2 EMPTY
  "^error: .*capitals/: --checkpoint: is named \"capitals\" as .*capitals is: the page names models by their folder's name"
  -- ${FT} serve --checkpoint ${PROJECT_SOURCE_DIR}/data/models/capitals --checkpoint ${PROJECT_SOURCE_DIR}/data/models/capitals/)
cli_test("serve refuses a port beyond 65535" 2 EMPTY "^error: --port: .*from 0 to 65535"
  -- ${FT} serve --checkpoint ${PROJECT_SOURCE_DIR}/data/models/capitals --port 70000)
# A time limit that is not a number, or is out of range, is named with the range in plain numbers.
cli_test("serve refuses a time limit that is not a number" 2 EMPTY
  "^error: --time-limit: expected a number from 0.1 to 3600, got \"abc\"\; see ffn-trace serve --help$"
  -- ${FT} serve --checkpoint ${PROJECT_SOURCE_DIR}/data/models/capitals --time-limit abc)
cli_test("serve refuses a time limit of 0" 2 EMPTY
  "^error: --time-limit: expected a number from 0.1 to 3600, got \"0\"\; see ffn-trace serve --help$"
  -- ${FT} serve --checkpoint ${PROJECT_SOURCE_DIR}/data/models/capitals --time-limit 0)
cli_test("serve refuses an infinite time limit" 2 EMPTY
  "^error: --time-limit: expected a number from 0.1 to 3600, got \"inf\"\; see ffn-trace serve --help$"
  -- ${FT} serve --checkpoint ${PROJECT_SOURCE_DIR}/data/models/capitals --time-limit inf)
cli_test("serve needs a checkpoint" 2 EMPTY "^error: .*--checkpoint.*required"
  -- ${FT} serve)
