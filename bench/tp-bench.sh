#!/bin/sh
# Tensor parallel decode (docs/model.md, "Tensor parallel"): spyre-generate
# --tp 1, 2, 4 on the cards of the VM (make bench runs it in timed mode with
# four identical cards), fp16, dispatch c, an 8-token prompt and 32 tokens,
# for each model given as "CONFIG [OPTIONS...]" (default: the tiny preset,
# /spyre/small-gqa and /spyre/gqa-100m with seed 3: seed 1's fp16 reference
# has a tie at token 5, which one more rounding of the partial sums decides
# the other way); a --tp the model's heads do not allow is skipped. Per run: the decode step's time per token on the host
# (in timed mode the guest's virtual clock: dispatch, the cards' modeled
# time and the all-reduces' records and waits, ordered by the cards), the busiest card's modeled
# device time per token and all cards' together, each as a ratio to --tp 1.
# Every --tp must generate --tp 1's tokens (exit 1 otherwise).
# Usage: tp-bench.sh ["CONFIG [OPTIONS...]"...]
out=/tmp/tp-bench
mkdir -p $out
[ $# -gt 0 ] || set -- tiny /spyre/small-gqa/config.json "/spyre/gqa-100m/config.json --seed 3"
cards=$(ls -d /sys/class/accel/accel* 2>/dev/null | wc -l)
rc=0
printf '%-28s %4s %14s %8s %16s %8s %16s\n' "model" "tp" "decode ms/tok" "vs tp1" "busiest card us" "vs tp1" "all cards us"
for spec in "$@"; do
	set -- $spec
	m=$1
	shift
	name=$(basename "$(dirname "$m")")
	[ "$m" = tiny ] && name=tiny
	host1= dev1= tok1=
	for tp in 1 2 4; do
		[ "$tp" -le "$cards" ] || continue
		f=$out/$name-tp$tp.out
		if ! spyre-generate --device 0 --tp $tp --config "$m" "$@" --dtype fp16 -n 32 -q >$f 2>&1; then
			if grep -q "does not divide" $f; then
				printf '%-28s %4s %s\n' "$name" "$tp" "(skipped: $(grep -o '[0-9]* does not divide [a-z_]* ([0-9]*)' $f))"
				continue
			fi
			cat $f
			rc=1
			continue
		fi
		tok=$(grep '^generated:' $f)
		# decode (31 steps, per token): host X ms (...), device Y us modeled, ...
		host=$(sed -n 's/^decode (.*per token): host \([0-9.]*\) ms.*/\1/p' $f)
		dev=$(sed -n 's/^decode (.*), device \([0-9.]*\) us modeled.*/\1/p' $f)
		all=$(sed -n 's/^tensor parallel .* decode device time per token [0-9.]* us on the busiest card, \([0-9.]*\) us on all.*/\1/p' $f)
		[ -n "$all" ] || all=$dev
		if [ "$tp" = 1 ]; then
			host1=$host dev1=$dev tok1=$tok
		elif [ "$tok" != "$tok1" ]; then
			echo "tp-bench: $name --tp $tp generated other tokens than --tp 1:"
			echo "  $tok1"
			echo "  $tok"
			rc=1
		fi
		awk -v n="$name" -v tp="$tp" -v h="$host" -v d="$dev" -v a="$all" -v h1="$host1" -v d1="$dev1" \
			'BEGIN { printf "%-28s %4d %14.3f %7.2fx %16.1f %7.2fx %16.1f\n", n, tp, h, h / h1, d, d / d1, a }'
	done
	echo "$name: $tok1"
done
exit $rc
