#!/bin/sh
# Description: serve-bench (bench/serve-bench.c) against spyre-serve (the CPU
# runner, the seeded tiny model) on a free loopback port: 8 prompts of 16
# tokens in, 8 out, at concurrency 1 and 4: exit 0, every request succeeded,
# the table's rows, the JSON has every level and field, output tokens total =
# prompts x output-len, TTFT <= E2EL; a bad --url or option exits 2, an
# unreachable server exits 2. TAP, plan last.

top=$(cd "$(dirname "$0")/../.." && pwd) || exit 1
bin=${SPYRE_BIN:-$top/build/bin}
bench=$top/build/bench/serve-bench
get=$bin/spyre-json-get
tmp=$(mktemp -d "${TMPDIR:-/tmp}/serve-bench-test.XXXXXX") || exit 1
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
tap_out=$tmp/out
. "$top/tests/tap.sh"

for f in "$bin/spyre-serve" "$bench" "$get"; do
	[ -x "$f" ] || tap_bail "$f is not built"
done

"$bin/spyre-serve" --port 0 >"$tmp/port" 2>"$tmp/err" &
pid=$!
i=0
while [ $i -lt 100 ] && ! grep -q 'http://' "$tmp/port" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
port=$(head -n 1 "$tmp/port" | sed 's/.*://')
[ -n "$port" ] || { cat "$tmp/err"; tap_bail "spyre-serve did not start"; }
tap_diag "spyre-serve on port $port"

json=$tmp/out.json
tap_expect "8 prompts at concurrency 1 and 4: exit 0" 0 "^successful requests  *8  *8$" \
	"$bench" --url "http://127.0.0.1:$port" --model tiny --num-prompts 8 --input-len 16 --output-len 8 \
	--concurrency 1,4 --json "$json"
cat "$tmp/out" 2>/dev/null | sed 's/^/# /'

for row in "failed requests  *0  *0$" "^duration (s)" "^request throughput" "^output token throughput" \
	"^total token throughput" "^TTFT mean" "^TTFT p50" "^TTFT p99" "^TPOT mean" "^ITL p99" "^E2EL p50"; do
	grep -q "$row" "$tap_out" 2>/dev/null || tap_fail "no table row '$row'"
done
tap_point "the table's rows"

[ "$("$get" "$json" levels.#)" = 2 ] || tap_fail "levels: $("$get" "$json" levels.# 2>&1)"
for c in 1 4; do
	for f in completed failed duration request_throughput output_throughput total_token_throughput \
		total_input_tokens total_output_tokens mean_ttft_ms median_ttft_ms p99_ttft_ms mean_tpot_ms \
		median_tpot_ms p99_tpot_ms mean_itl_ms median_itl_ms p99_itl_ms mean_e2el_ms median_e2el_ms \
		p99_e2el_ms; do
		"$get" "$json" "levels.max_concurrency=$c.$f" >/dev/null 2>&1 || tap_fail "c=$c: no $f"
	done
done
tap_point "the JSON has both levels and every field"

for c in 1 4; do
	v=$("$get" "$json" "levels.max_concurrency=$c.completed" "levels.max_concurrency=$c.failed" \
		"levels.max_concurrency=$c.total_output_tokens" "levels.max_concurrency=$c.total_input_tokens" | tr '\n' ' ')
	[ "$v" = "8 0 64 128 " ] || tap_fail "c=$c: completed failed output input = $v, not 8 0 64 128"
	awk -v t="$("$get" "$json" "levels.max_concurrency=$c.p99_ttft_ms")" \
		-v e="$("$get" "$json" "levels.max_concurrency=$c.p99_e2el_ms")" \
		-v o="$("$get" "$json" "levels.max_concurrency=$c.output_throughput")" \
		'BEGIN { exit !(t > 0 && t <= e && o > 0) }' || tap_fail "c=$c: TTFT, E2EL or throughput off"
done
tap_point "every request succeeded; output tokens = 8 prompts x 8"

tap_expect "a non-loopback --url exits 2" 2 "loopback only" "$bench" --url http://10.0.0.1:80
tap_expect "a bad option exits 2" 2 "unknown option" "$bench" --frobnicate 1
tap_expect "a bad concurrency exits 2" 2 "not a number" "$bench" --concurrency 1,x
kill "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
pid=
tap_expect "no server: exit 2" 2 "no healthy server" "$bench" --url "http://127.0.0.1:$port" --num-prompts 1
tap_done
