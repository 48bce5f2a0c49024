#!/bin/sh
# Description: the figures the README and docs/model.md quote from a command
# are what that command prints now: the modeled device time of Granite 3.3 8B
# (`spyre-generate --config granite-3.3-8b --estimate`, which `make demo`
# prints first) appears verbatim in both. A change of the kernel library's
# cost model that moves the estimate fails here until the docs say the new
# figure. TAP, two points.

top=$(cd "$(dirname "$0")/../.." && pwd) || exit 1
. "$top/tests/tap.sh"

tap_plan 2
gen=$top/build/bin/spyre-generate
[ -x "$gen" ] || tap_bail "$gen is not built (make all)"
line=$("$gen" --config granite-3.3-8b --estimate | grep '^modeled device time') ||
	tap_bail "spyre-generate --estimate printed no 'modeled device time' line"
tap_diag "$line"
for doc in README.md docs/model.md; do
	grep -qxF "    $line" "$top/$doc" || tap_fail "$doc does not quote it (as an indented line)"
	tap_point "$doc quotes spyre-generate --estimate's modeled device time as it prints it"
done
tap_done
