# Shared helpers of the guest's shell tests (sourced, not run): TAP lines
# numbered in $n, each test's output echoed as comments.
#   check DESCRIPTION COMMAND...        ok when COMMAND exits 0
#   expect DESCRIPTION STATUS REGEX COMMAND...
#                                       ok when COMMAND exits STATUS and its
#                                       output matches the extended REGEX
n=0
out=${TAP_OUT:-/tmp/tap-lib.out}
check() {
	n=$((n + 1))
	desc=$1; shift
	if "$@" >$out 2>&1; then echo "ok $n $desc"; else echo "not ok $n $desc"; fi
	sed 's/^/# /' $out
}
expect() {
	n=$((n + 1))
	desc=$1 want=$2 msg=$3; shift 3
	"$@" >$out 2>&1
	rc=$?
	if [ "$rc" -eq "$want" ] && grep -qE -- "$msg" $out; then
		echo "ok $n $desc"
	else
		echo "not ok $n $desc"
		echo "# exit status $rc (want $want), output (want /$msg/):"
	fi
	sed 's/^/# /' $out
}
