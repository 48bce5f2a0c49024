#!/bin/sh
# Description: `-device spyre,help` describes every property of the card:
# QEMU lists each of the properties docs/spyre-device.md's table names, and
# each with a description (unit and range). TAP, two points.

top=$(cd "$(dirname "$0")/../.." && pwd) || exit 1
. "$top/tests/tap.sh"

qemu=${SPYRE_QEMU:-${SPYRE_CACHE:-/var/cache/spyre}/qemu/build/qemu-system-x86_64}
[ -x "$qemu" ] || tap_skip_all "no QEMU at $qemu (make setup, or set SPYRE_QEMU)"
tap_plan 2
help=$("$qemu" -nodefaults -machine none -device spyre,help 2>&1) ||
	{ echo "$help" | sed 's/^/#   /'; tap_bail "$qemu -device spyre,help failed"; }
# the table's first column: | `name` | default | ...
props=$(sed -n '/^| property | default |/,/^$/p' "$top/docs/spyre-device.md" |
	sed -n 's/^| `\([a-z-]*\)` |.*/\1/p')
[ -n "$props" ] || tap_bail "no property table in docs/spyre-device.md"
for p in $props; do
	echo "$help" | grep -qE "^ +$p=" || tap_fail "$p is not listed"
done
tap_point "-device spyre,help lists every property of docs/spyre-device.md's table"
for p in $props; do
	line=$(echo "$help" | grep -E "^ +$p=") || continue
	echo "$line" | grep -qE "=<[A-Za-z0-9]+> +- [^ (]" || tap_fail "no description: $line"
done
tap_point "each of them has a description (the PCI bus's own properties are QEMU's)"
tap_done
