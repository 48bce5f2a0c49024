#!/bin/sh
# serve-bench.sh OUTDIR [spyre-serve options...]: start spyre-serve on a free
# loopback port with the given options, run serve-bench (vLLM's serving
# metrics, docs/serve.md) at concurrency $SERVE_BENCH_LEVELS with
# $SERVE_BENCH_PROMPTS prompts of $SERVE_BENCH_IN tokens in and
# $SERVE_BENCH_OUT out, print the table and the output-token throughput of
# concurrency 16 over concurrency 1. The one driver of `make bench-serve`
# (host, CPU runner) and of the card's run in the VM (timed mode). Writes
# OUTDIR/serve-bench.out and OUTDIR/serve-bench.json; exits non-zero when the
# server does not start or a request fails.
out=$1
shift
[ -n "$out" ] || { echo "usage: serve-bench.sh OUTDIR [spyre-serve options...]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
bin=${SPYRE_BIN:-$here/../bin}
[ -x "$bin/spyre-serve" ] || bin=/usr/bin # in the VM: the tools are in /usr/bin
bench=$here/serve-bench
levels=${SERVE_BENCH_LEVELS:-1,4,16,32}
mkdir -p "$out" || exit 1
rm -f "$out/serve.port"

"$bin/spyre-serve" --port 0 "$@" >"$out/serve.port" 2>"$out/serve.err" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null' EXIT
i=0
while [ $i -lt 600 ] && ! grep -q 'http://' "$out/serve.port" 2>/dev/null; do
	kill -0 $pid 2>/dev/null || break
	sleep 0.1
	i=$((i + 1))
done
port=$(head -n 1 "$out/serve.port" 2>/dev/null | sed -n 's|.*http://[^:]*:\([0-9]*\).*|\1|p')
[ -n "$port" ] || { echo "spyre-serve did not start:"; cat "$out/serve.err"; exit 1; }

echo "spyre-serve $*: $SERVE_BENCH_PROMPTS prompts, ${SERVE_BENCH_IN:-32} tokens in, ${SERVE_BENCH_OUT:-32} out, concurrency $levels"
"$bench" --url "http://127.0.0.1:$port" --model tiny --num-prompts "${SERVE_BENCH_PROMPTS:-64}" \
	--input-len "${SERVE_BENCH_IN:-32}" --output-len "${SERVE_BENCH_OUT:-32}" --concurrency "$levels" \
	--json "$out/serve-bench.json" >"$out/serve-bench.out"
rc=$?
cat "$out/serve-bench.out"
[ $rc -eq 0 ] || { echo "serve-bench failed (exit $rc)"; cat "$out/serve.err"; exit 1; }
get="$bin/spyre-json-get"
c1=$("$get" "$out/serve-bench.json" levels.max_concurrency=1.output_throughput 2>/dev/null)
c16=$("$get" "$out/serve-bench.json" levels.max_concurrency=16.output_throughput 2>/dev/null)
if [ -n "$c1" ] && [ -n "$c16" ]; then
	awk -v a="$c16" -v b="$c1" 'BEGIN { printf "output throughput c16 / c1: %.2fx\n", a / b }' |
		tee -a "$out/serve-bench.out"
fi
