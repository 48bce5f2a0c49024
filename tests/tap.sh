# SPDX-License-Identifier: MIT
# tap.sh - the harness of the host tests written in shell, sourced:
# TAP version 13 on stdout, as tests/tap.h prints it for the tests in C.
#
#   . "$top/tests/tap.sh"
#   tap_plan 2                          # or none: tap_done prints "1..N" last
#   tap_check "a description" cmd args  # ok when cmd exits 0, else its output
#   tap_expect "a description" 2 "regex" cmd args   # exit status and output
#   tap_fail "what is wrong"            # a failed check of the running point
#   tap_point "a description"           # ok, or not ok after a tap_fail
#   tap_skip "a description" "reason"
#   tap_done                            # exits: 0, 1 (a point failed or the
#                                       # count differs from the plan), 77 (all skipped)
#
# tap_skip_all REASON prints "1..0 # SKIP REASON" and exits 77; tap_bail
# REASON prints "Bail out! REASON" and exits 1. POSIX sh; names start tap_.

tap_n=0 tap_failed=0 tap_skipped=0 tap_planned= tap_point_failed=0
tap_out=${tap_out:-${TMPDIR:-/tmp}/tap-sh.$$}
echo "TAP version 13"

tap_plan() { tap_planned=$1; echo "1..$1"; }
tap_diag() { echo "# $*"; }
tap_skip_all() { echo "1..0 # SKIP $*"; exit 77; }
tap_bail() { echo "Bail out! $*"; exit 1; }

# A point's result: tap_result ok|fail DESCRIPTION.
tap_result() {
	tap_n=$((tap_n + 1))
	if [ "$1" = ok ]; then
		echo "ok $tap_n - $2"
	else
		echo "not ok $tap_n - $2"
		tap_failed=$((tap_failed + 1))
	fi
}

tap_skip() { # description reason
	tap_n=$((tap_n + 1))
	tap_skipped=$((tap_skipped + 1))
	echo "ok $tap_n - $1 # SKIP $2"
}

tap_fail() { echo "#   $*"; tap_point_failed=1; }

tap_point() { # description: the checks since the last point, by tap_fail
	if [ "$tap_point_failed" -eq 0 ]; then tap_result ok "$1"; else tap_result fail "$1"; fi
	tap_point_failed=0
}

tap_check() { # description command...
	_tap_desc=$1
	shift
	if "$@" >"$tap_out" 2>&1; then
		tap_result ok "$_tap_desc"
	else
		sed 's/^/#   /' "$tap_out"
		tap_result fail "$_tap_desc"
	fi
	rm -f "$tap_out"
}

# tap_expect description status regex command...: the command exits with
# exactly that status and its output (stdout and stderr) matches the
# extended regular expression. $tap_out keeps the output until the next check.
tap_expect() {
	_tap_desc=$1 _tap_want=$2 _tap_msg=$3
	shift 3
	"$@" >"$tap_out" 2>&1
	_tap_rc=$?
	if [ "$_tap_rc" -eq "$_tap_want" ] && grep -qE -- "$_tap_msg" "$tap_out"; then
		tap_result ok "$_tap_desc"
	else
		echo "#   exit status $_tap_rc (want $_tap_want), output (want /$_tap_msg/):"
		sed 's/^/#   /' "$tap_out"
		tap_result fail "$_tap_desc"
	fi
}

tap_done() {
	rm -f "$tap_out"
	if [ -z "$tap_planned" ]; then
		echo "1..$tap_n"
	elif [ "$tap_n" -ne "$tap_planned" ]; then
		echo "# planned $tap_planned, ran $tap_n"
		exit 1
	fi
	echo "# $tap_n points: $((tap_n - tap_failed - tap_skipped)) passed, $tap_failed failed, $tap_skipped skipped"
	[ "$tap_failed" -eq 0 ] || exit 1
	[ "$tap_n" -eq 0 ] || [ "$tap_skipped" -ne "$tap_n" ] || exit 77
	exit 0
}
