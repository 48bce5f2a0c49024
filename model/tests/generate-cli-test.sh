#!/bin/sh
# Description: spyre-generate on the host (the CPU reference): the default
# run generates 32 tokens, the same ones every time, with per-token times and
# a summary; fp16/bf16/dl16 runs; Granite 3.3 8B is refused (too large for
# host fp32 weights) unless --estimate, which prints parameters, weight and
# KV-cache bytes and FLOPs; --save then --model reproduces the generated
# tokens (F32; BF16 files load too); a directory without model.safetensors
# falls back to generated weights; bad input exits 1 naming the file, field
# or tensor (a truncated safetensors, a config without vocab_size, a token
# id or length beyond the model); --prompt-len draws a prompt from the seed;
# bad command lines exit 2. TAP, plan last.

top=$(cd "$(dirname "$0")/../.." && pwd) || exit 1
gen=${SPYRE_BIN:-$top/build/bin}/spyre-generate
tmp=$(mktemp -d "${TMPDIR:-/tmp}/generate-test.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
tap_out=$tmp/out
. "$top/tests/tap.sh"

[ -x "$gen" ] || tap_bail "$gen is not built"

# ---- runs ----------------------------------------------------------------------
tap_expect "default run: tiny, 32 tokens" 0 "^generated: 32 tokens:" "$gen"
first=$(grep '^generated:' "$tap_out")
grep -q "^token 32: [0-9]*  ([0-9.]* ms, margin [0-9.]*)" "$tap_out" || tap_fail "no per-token line"
grep -q "^summary: prefill .* 31 decode steps .* ms per token" "$tap_out" || tap_fail "no summary"
grep -q "^parameters: 434816 " "$tap_out" || tap_fail "parameter count"
tap_point "per-token lines, parameters and the summary"
tap_expect "the same tokens again (--cpu)" 0 "^generated:" "$gen" --cpu
[ "$(grep '^generated:' "$tap_out")" = "$first" ] || tap_fail "tokens differ: $first"
tap_point "deterministic"
tap_expect "the default prompt and seed, spelled out" 0 "^prompt: 8 tokens: 1 2 3 4 5 6 7 8" \
	"$gen" --seed 1 --prompt 1,2,3,4,5,6,7,8 -n 32 -q
[ "$(grep '^generated:' "$tap_out")" = "$first" ] || tap_fail "tokens differ"
tap_point "explicit defaults give the same tokens"
for d in fp16 bf16 dl16; do
	tap_expect "--dtype $d" 0 "backend: cpu reference, $d activations" "$gen" --dtype $d -n 8 -q
done
tap_expect "another seed, other tokens" 0 "^generated:" "$gen" --seed 2
[ "$(grep '^generated:' "$tap_out")" != "$first" ] || tap_fail "seed 2 gives seed 1's tokens"
tap_point "the seed matters"
tap_expect "--prompt-len 5: ids drawn from the seed" 0 "^prompt: 5 tokens: 325 379 1 60 3$" \
	"$gen" --prompt-len 5 -n 2 -q
tap_expect "--prompt-len with another seed" 0 "^prompt: 5 tokens: 319 56 102 293 132$" \
	"$gen" --prompt-len 5 --seed 3 -n 2 -q
tap_expect "-n 1" 0 "summary: prefill .* 0 decode steps" "$gen" -n 1
tap_expect "a config file by path" 0 "^model: .*tiny/config.json \(granite\)" \
	"$gen" --config "$top/model/configs/tiny/config.json" -n 2

# ---- large models ----------------------------------------------------------------
tap_expect "granite-3.3-8b refused without --estimate" 1 \
	"granite-3.3-8b: 8.17 B parameters do not fit the 8 GiB limit of host fp32 weights .*use --estimate" \
	"$gen" --config granite-3.3-8b
tap_expect "granite-3.3-8b --estimate" 0 "^parameters: 8170864640 \(8.17 B\)" "$gen" --config granite-3.3-8b --estimate
grep -q "^weights: fp32 30.44 GiB (32683458560 bytes), fp16/bf16/dl16 15.22 GiB (16341729280 bytes)" "$tap_out" ||
	tap_fail "weight bytes"
grep -q "^KV cache for 1024 positions: fp32 320.00 MiB, fp16/bf16/dl16 160.00 MiB" "$tap_out" || tap_fail "KV cache"
grep -q "^FLOPs: prefill of 1024 tokens .* per token); decode at position 1024 .* per token" "$tap_out" ||
	tap_fail "FLOPs"
grep -qE "^modeled device time \(fp16, 32 cores, kernel library cost model\): prefill of 1024 tokens [0-9.]+ ms \([0-9.]+ us per token\), decode at position 1024 [0-9.]+ ms per token" "$tap_out" ||
	tap_fail "modeled device time"
tap_point "estimate: weights, KV cache, FLOPs, the modeled device time"
tap_expect "granite config file --estimate" 0 "^parameters: 8170864640" \
	"$gen" --config "$top/model/configs/granite-3.3-8b/config.json" --estimate

# ---- save and load -----------------------------------------------------------------
tap_expect "--save" 0 "^saved: $tmp/m/config.json, $tmp/m/model.safetensors \(F32\)" "$gen" --save "$tmp/m"
[ "$(grep '^generated:' "$tap_out")" = "$first" ] || tap_fail "tokens differ while saving"
tap_point "saving does not change the run"
tap_expect "--model DIR reads the saved weights" 0 "^weights: $tmp/m/model.safetensors" "$gen" --model "$tmp/m"
[ "$(grep '^generated:' "$tap_out")" = "$first" ] || tap_fail "tokens differ from the saved model"
tap_point "the saved model gives the same tokens"
tap_expect "--save-dtype bf16, -n 0 (save only)" 0 "\(BF16\)" "$gen" --save "$tmp/b" --save-dtype bf16 -n 0
grep -q "^generated" "$tap_out" && tap_fail "-n 0 generated tokens"
tap_point "-n 0 only saves"
tap_expect "a BF16 model runs" 0 "^generated: 32 tokens" "$gen" --model "$tmp/b"
mkdir "$tmp/c" && cp "$tmp/m/config.json" "$tmp/c/"
tap_expect "a directory without weights: generated ones" 0 \
	"^weights: generated, seed 1 \(no model.safetensors\)" "$gen" --model "$tmp/c"

# ---- bad input: exit 1, named -----------------------------------------------------
mkdir "$tmp/t" && cp "$tmp/m/config.json" "$tmp/t/" && head -c 5000 "$tmp/m/model.safetensors" >"$tmp/t/model.safetensors"
tap_expect "a truncated safetensors" 1 "$tmp/t/model.safetensors: tensor '.*': data_offsets .* run past the data area" \
	"$gen" --model "$tmp/t"
mkdir "$tmp/v" && grep -v vocab_size "$tmp/m/config.json" >"$tmp/v/config.json"
tap_expect "a config without vocab_size" 1 "$tmp/v/config.json: missing field 'vocab_size'" "$gen" --model "$tmp/v"
mkdir "$tmp/s" && sed 's/"intermediate_size": 352/"intermediate_size": 354/' "$tmp/m/config.json" >"$tmp/s/config.json" &&
	cp "$tmp/m/model.safetensors" "$tmp/s/"
tap_expect "weights of another shape" 1 \
	"$tmp/s/model.safetensors: tensor 'model.layers.0.mlp.gate_proj.weight' has shape \[352,128\], expected \[354,128\]" \
	"$gen" --model "$tmp/s"
mkdir "$tmp/x" && cp "$tmp/m/config.json" "$tmp/x/" && echo '{}' >"$tmp/x/model.safetensors.index.json"
tap_expect "a sharded checkpoint" 1 "model.safetensors.index.json: sharded checkpoints are not supported yet" \
	"$gen" --model "$tmp/x"
tap_expect "no such model directory" 1 "$tmp/nothing/config.json: No such file or directory" \
	"$gen" --model "$tmp/nothing"
tap_expect "a config file that is not there" 1 "/nonexistent/config.json: No such file or directory" \
	"$gen" --config /nonexistent/config.json
tap_expect "a token id beyond the vocabulary" 1 "--prompt: token 2 \(512\) is not below vocab_size \(512\)" \
	"$gen" --prompt 1,512
tap_expect "more positions than the model has" 1 \
	"the prompt \(8 tokens\) and 300 generated tokens need 307 positions; tiny has max_position_embeddings 256" \
	"$gen" -n 300

# ---- bad command lines: exit 2 -----------------------------------------------------
tap_expect "--prompt-len 0" 2 "--prompt-len: a prompt has at least 1 token" "$gen" --prompt-len 0
tap_expect "--prompt and --prompt-len" 2 "--prompt and --prompt-len both give the prompt; give one" \
	"$gen" --prompt 1,2 --prompt-len 4
tap_expect "--prompt-len beyond the positions" 1 "the prompt \(300 tokens\) and 32 generated tokens need 331 positions" \
	"$gen" --prompt-len 300
tap_expect "an unknown option" 2 "unknown option '--fast'" "$gen" --fast
tap_expect "an unknown dtype" 2 "--dtype: unknown dtype 'fp8' \(valid: fp32, fp16, bf16, dl16\)" "$gen" --dtype fp8
tap_expect "an unknown save dtype" 2 "--save-dtype: unknown dtype 'f64'" "$gen" --save-dtype f64
tap_expect "-n abc" 2 "-n: 'abc' is not a number from 0 to 1048576" "$gen" -n abc
tap_expect "-n -1" 2 "-n: '-1' is not a number" "$gen" -n -1
tap_expect "a bad prompt" 2 "--prompt: '1,,2' is not a comma-separated list of token ids" "$gen" --prompt 1,,2
tap_expect "a prompt with a word" 2 "--prompt: 'x' is not a number" "$gen" --prompt 1,x
tap_expect "a missing value" 2 "--seed needs a value" "$gen" --seed
tap_expect "an unknown preset" 2 "--config: 'huge' is neither a preset \(tiny, granite-3.3-8b\) nor a file" \
	"$gen" --config huge
tap_expect "--model and --config" 2 "--model and --config both name a config" "$gen" --model "$tmp/m" --config tiny
tap_expect "--device without a number" 2 "--device needs a value" "$gen" --device
tap_expect "--device with a word" 2 "--device: 'x' is not a number" "$gen" --device x
tap_expect "--dispatch without --device" 2 "--dispatch, --cores, --sync-every and --check need --device" "$gen" --dispatch all
tap_expect "--sync-every without --device" 2 "--dispatch, --cores, --sync-every and --check need --device" \
	"$gen" --sync-every 4
tap_expect "an unknown dispatch" 2 "--dispatch: 'slow' is not build, patch, fast, graph or all" "$gen" --device 0 --dispatch slow
tap_expect "--sync-every not a number" 2 "--sync-every: 'x' is not a number" "$gen" --device 0 --sync-every x
tap_expect "--device on a host without a card" 1 "--device 0: " "$gen" --device 0 -n 2
tap_expect "--tp without --device" 2 "--tp needs --device" "$gen" --tp 2
tap_expect "--tp 0" 2 "--tp: 0 cards; tensor parallel runs over 1 to 64 cards" "$gen" --device 0 --tp 0
tap_expect "--tp 65" 2 "--tp: '65' is not a number from 0 to 64" "$gen" --device 0 --tp 65
tap_expect "--tp 2 with dispatch d" 2 "--tp 2: dispatch graph: d \\(graph replay\\) does not run with tensor parallelism" \
	"$gen" --device 0 --tp 2 --dispatch graph
tap_expect "--tp 2 with --dispatch all" 2 "dispatch all includes d" "$gen" --device 0 --tp 2 --dispatch all
tap_expect "--tp 3 does not divide the tiny model's heads (before any card is opened)" 1 \
	"--tp 3: tiny: tensor parallel over 3 cards: 3 does not divide num_attention_heads \\(4\\)" "$gen" --device 0 --tp 3 -n 2
tap_expect "--tp 4 does not divide the tiny model's KV heads" 1 "4 does not divide num_key_value_heads \\(2\\)" \
	"$gen" --device 0 --tp 4 -n 2
tap_expect "--tp 2 on a host without cards" 1 "--tp 2 from card 0 needs cards 0..1; this machine has 0 cards" \
	"$gen" --device 0 --tp 2 -n 2
tap_expect "--help" 0 "usage: spyre-generate" "$gen" --help

tap_done
