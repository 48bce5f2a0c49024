#!/bin/sh
# Description: the command-line tools on the host, no card needed: spyre-run
# and spyre-smi refuse bad arguments (a stray argument, an unknown activation,
# example or launch path, a number that is not one or out of range, NAME=FILE
# without a name, spyre-smi's -c without -l and -q with --json) with exit
# status 2 and a message naming the problem, and
# with no card exit 1 saying why (spyre-smi: no device, and which of driver,
# card, binding is missing); spyre-as and spyre-objdump take programs with 17,
# 64 and 256 symbols (the container's limit; counts read from the text and the
# image size every array) and refuse a 257th symbol and a too-long name with a
# message. TAP, the plan last (tests/tap.sh).

top=$(cd "$(dirname "$0")/../.." && pwd) || exit 1
bin=${SPYRE_BIN:-$top/build/bin}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cli-test.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
tap_out=$tmp/out
. "$top/tests/tap.sh"

for t in spyre-run spyre-smi spyre-as spyre-objdump; do
	[ -x "$bin/$t" ] || tap_bail "$bin/$t is not built"
done

# ---- spyre-run ---------------------------------------------------------------
run=$bin/spyre-run
tap_expect "spyre-run: a stray argument" 2 "unexpected argument 'extra'" "$run" -e relu extra
tap_expect "spyre-run: an unknown activation, with the valid ones" 2 \
	"--act: unknown activation 'tanh' \(valid: gelu, silu\)" "$run" -a tanh
tap_expect "spyre-run: an unknown example" 2 "--example: unknown example 'nope' \(valid: mlp, relu\)" \
	"$run" -e nope
tap_expect "spyre-run: an unknown launch path" 2 \
	"--path: unknown launch path 'slow' \(valid: patch, fast, both\)" "$run" -P slow
tap_expect "spyre-run: -d -1" 2 "--device: '-1' is not a number from 0 to" "$run" -d -1
tap_expect "spyre-run: -d abc" 2 "--device: 'abc' is not a number from 0 to" "$run" -d abc
tap_expect "spyre-run: -n 0" 2 "--iters: '0' is not a number from 1 to 1000000" "$run" -n 0
tap_expect "spyre-run: -n 5x" 2 "--iters: '5x' is not a number" "$run" -n 5x
tap_expect "spyre-run: -c 33" 2 "--cores: '33' is not a number from 1 to 32" "$run" -c 33
tap_expect "spyre-run: rows not a multiple of cores" 2 "--rows 256 is not a multiple of --cores 7" \
	"$run" -c 7
tap_expect "spyre-run: -o without NAME=" 2 "--output: want NAME=FILE, not 'y.bin'" "$run" -o y.bin
tap_expect "spyre-run: -i with an empty name" 2 "--input: want NAME=FILE, not '=x.bin'" "$run" -i =x.bin
tap_expect "spyre-run: an unknown option" 2 "usage: spyre-run" "$run" --bogus
tap_expect "spyre-run: --help documents the exit status" 0 "exit status: 0 every run passed its check" "$run" --help

# ---- spyre-smi ---------------------------------------------------------------
smi=$bin/spyre-smi
tap_expect "spyre-smi: -d -1" 2 "-d: '-1' is not a device index" "$smi" -d -1
tap_expect "spyre-smi: -d abc" 2 "-d: 'abc' is not a device index" "$smi" -d abc
tap_expect "spyre-smi: -d 1x" 2 "-d: '1x' is not a device index" "$smi" -d 1x
tap_expect "spyre-smi: -d 99999999999" 2 "-d: '99999999999' is not a device index" "$smi" -d 99999999999
tap_expect "spyre-smi: a stray argument" 2 "unexpected argument 'extra'" "$smi" extra
tap_expect "spyre-smi: an unknown option" 2 "usage: spyre-smi" "$smi" -x
tap_expect "spyre-smi: -h documents the exit status" 0 "exit status: 0 devices shown, 1 no spyre device" \
	"$smi" -h
tap_expect "spyre-smi: -h names exit status 3, permission denied" 0 "3 permission denied" "$smi" -h
tap_expect "spyre-smi: -l 0" 2 "-l: '0' is not a number of seconds from 0.1 to 86400" "$smi" -l 0
tap_expect "spyre-smi: -l abc" 2 "-l: 'abc' is not a number of seconds" "$smi" -l abc
tap_expect "spyre-smi: -l 1x" 2 "-l: '1x' is not a number of seconds" "$smi" -l 1x
tap_expect "spyre-smi: -c without -l" 2 "-c needs -l" "$smi" -c 3
tap_expect "spyre-smi: -c 0" 2 "-c: '0' is not a count" "$smi" -l 1 -c 0
tap_expect "spyre-smi: -s -1" 2 "-s: '-1' is not a number of milliseconds from 0 to 60000" "$smi" -s -1
tap_expect "spyre-smi: -s 60001" 2 "-s: '60001' is not a number of milliseconds" "$smi" -s 60001
tap_expect "spyre-smi: -q with --json" 2 "-q goes with neither --json nor -l" "$smi" -q --json
if [ "$("$smi" -q 2>/dev/null)" = 0 ]; then
	tap_expect "spyre-smi without a card: exit 1, no device found" 1 "^spyre-smi: no spyre device found:$" \
		"$smi"
	cp "$tap_out" "$tmp/smi.out"
	tap_check "spyre-smi without a card: and why (driver, card or binding)" grep -qE \
		"^  (the spyre driver is not loaded|no spyre card \(PCI 1234:5350\)|spyre card .* is)" \
		"$tmp/smi.out"
	tap_expect "spyre-smi -q without a card: 0, exit 1" 1 "^0$" "$smi" -q
	tap_expect "spyre-run without a card: exit 1" 1 "open: no spyre device 0 \(0 present\)" "$run" -e relu
else
	tap_skip "spyre-smi and spyre-run without a card" "this host has a spyre device"
fi

# ---- spyre-as, spyre-objdump: symbol counts from the text and the image ----------
gen() { # N: y = x0 + ... + x(N-2), 1024 fp32 each, patch-free
	i=0
	while [ $i -lt $(($1 - 1)) ]; do
		echo ".sym x$i fp32 flags=0x1 size=4096 shape=1024"
		i=$((i + 1))
	done
	echo ".sym y fp32 flags=0x2 size=4096 shape=1024"
	echo ".core 0"
	echo "	load sp=0x2000 mem=0x0000000000000000 rows=1 row_bytes=4096 flags=0x1"
	i=1
	while [ $i -lt $(($1 - 1)) ]; do
		printf '\tload sp=0x0 mem=0x%04x000000000000 rows=1 row_bytes=4096 flags=0x1\n' $i
		echo "	add.fp32.fp32 d=0x2000 a=0x2000 b=0x0 rows=32 cols=32 ldd=1 lda=1 ldb=1"
		i=$((i + 1))
	done
	printf '\tstore sp=0x2000 mem=0x%04x000000000000 rows=1 row_bytes=4096 flags=0x1\n' $(($1 - 1))
}
roundtrip() { # N
	gen "$1" >"$tmp/p$1.s" &&
		"$bin/spyre-as" "$tmp/p$1.s" -o "$tmp/p$1.bin" &&
		"$bin/spyre-objdump" "$tmp/p$1.bin" >"$tmp/q$1.s" &&
		[ "$(grep -c '^\.sym ' "$tmp/q$1.s")" -eq "$1" ] &&
		! grep -q "invalid" "$tmp/q$1.s" &&
		"$bin/spyre-as" "$tmp/q$1.s" -o "$tmp/q$1.bin" &&
		cmp "$tmp/p$1.bin" "$tmp/q$1.bin"
}
for k in 17 64 256; do
	tap_check "spyre-as/spyre-objdump: $k symbols, valid, round trip exact" roundtrip $k
done
gen 257 >"$tmp/p257.s"
tap_expect "spyre-as: a 257th symbol is refused" 1 "line 257: too many symbols \(a program has at most 256\)" \
	"$bin/spyre-as" "$tmp/p257.s" -o "$tmp/p257.bin"
printf '.sym abcdefghijabcdefghijabcdefghijab fp32 size=128\n' >"$tmp/long.s"
tap_expect "spyre-as: a 32-character symbol name is refused" 1 "line 1: symbol name longer than 31 characters" \
	"$bin/spyre-as" "$tmp/long.s" -o "$tmp/long.bin"

tap_done
