#!/bin/sh
# Description: the set-up outlives the archive. When the kernel ABI pinned in
# tools/versions.conf is no longer offered (here: SPYRE_KVER names one that
# never existed), `setup.sh --dry-run kver` falls back, loudly, to the newest
# 6.12 ABI of the same flavour apt offers; a series the archive does not have
# at all is an error; the pinned ABI resolves to itself while it is offered.
# The choice the set-up records ($SPYRE_CACHE/kver.<pinned>) is what
# common.sh (tools/vm/*, tools/check) and the Makefile then use. No side
# effects: --dry-run neither updates apt's lists nor writes the cache, and the
# cache here is a scratch directory. Exit 0 pass, 1 fail, 77 skip (apt knows
# no 6.12 headers: its lists are empty).

top=$(cd "$(dirname "$0")/../.." && pwd) || exit 1
setup=$top/tools/setup/setup.sh
name="kver-fallback-test"
gone=6.12.999+deb12-amd64

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kver-fallback-test.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
export SPYRE_CACHE="$tmp/cache"
mkdir -p "$SPYRE_CACHE"
rc=0
fail() { echo "$name: FAIL: $*"; rc=1; }

offered=$(apt-cache search --names-only '^linux-headers-6[.]12[.][0-9]+[+]deb[0-9]+-amd64$' 2>/dev/null |
	awk '{ print $1 }' | sed 's/^linux-headers-//' | sort -V)
if [ -z "$offered" ]; then
	echo "$name: SKIP: apt offers no linux-headers-6.12.*-amd64 (empty lists?)"
	exit 77
fi
newest=$(echo "$offered" | tail -n 1)

# 1. A pinned ABI the archive does not have: fall back to the newest, say so.
out=$(SPYRE_KVER=$gone "$setup" --dry-run kver 2>"$tmp/err")
[ $? -eq 0 ] || fail "fallback: setup.sh --dry-run kver failed: $(cat "$tmp/err")"
[ "$out" = "KVER=$newest" ] || fail "fallback: got '$out', expected KVER=$newest"
grep -q "linux-headers-$gone .*" "$tmp/err" && grep -q "is not in the archive" "$tmp/err" &&
	grep -q "Falling back to the newest ABI it offers: $newest" "$tmp/err" ||
	fail "fallback: no loud notice on stderr: $(cat "$tmp/err")"
echo "# fallback: $gone -> $newest"
sed 's/^/#   /' "$tmp/err"

# 2. A series the archive does not have at all: an error, not a silent pick.
if SPYRE_KVER=6.99.1+deb12-amd64 "$setup" --dry-run kver >/dev/null 2>"$tmp/err2"; then
	fail "unknown series: resolved instead of failing"
fi
grep -q "not in the archive" "$tmp/err2" || fail "unknown series: no reason given: $(cat "$tmp/err2")"

# 3. The pinned ABI, while offered, resolves to itself, silently.
pinned=$(sed -n 's/^KVER=//p' "$top/tools/versions.conf")
if echo "$offered" | grep -qxF "$pinned"; then
	out=$(env -u SPYRE_KVER "$setup" --dry-run kver 2>"$tmp/err3")
	[ "$out" = "KVER=$pinned" ] || fail "pinned: got '$out', expected KVER=$pinned"
	[ ! -s "$tmp/err3" ] || fail "pinned: unexpected notice: $(cat "$tmp/err3")"
else
	echo "# pinned $pinned is not offered any more: case 3 skipped"
fi

# 4. --dry-run wrote nothing.
[ -z "$(ls -A "$SPYRE_CACHE")" ] || fail "--dry-run wrote into the cache: $(ls -A "$SPYRE_CACHE")"

# 5. A recorded choice is what the scripts and the Makefile use.
echo "$newest" >"$SPYRE_CACHE/kver.$gone"
got=$(SPYRE_KVER=$gone bash -c ". '$top/tools/setup/common.sh'; echo \"\$KVER \$KDIR\"")
[ "$got" = "$newest /lib/modules/$newest/build" ] || fail "common.sh: got '$got'"
got=$(SPYRE_KVER=$gone make -s --no-print-directory -C "$top" \
	--eval 'spyre-print-kver: ; @echo $(KVER) $(KDIR)' spyre-print-kver 2>&1)
[ "$got" = "$newest /lib/modules/$newest/build" ] || fail "Makefile: got '$got'"

[ $rc -eq 0 ] && echo "$name: ok (fallback $gone -> $newest)"
exit $rc
