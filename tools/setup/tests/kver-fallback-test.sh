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

# 6. Debian 13: the archive has only +deb13 ABIs (trixie's package names,
# as its lists had them on 2026-12-04: linux-headers-6.12.N+deb13-amd64,
# linux-image-6.12.N+deb13-amd64-unsigned, linux-source-6.12 6.12.N-1) and
# the +deb12 pin is neither installed nor offered: the newest +deb13 ABI is
# taken. A private apt (APT_CONFIG) over a local flat repository and an
# empty dpkg status stands for that machine; nothing of the system's apt
# is used or changed.
deb13() { # ABI debversion: one ABI's stanzas
	printf 'Package: linux-headers-%s\nVersion: %s\nArchitecture: amd64\nDescription: h\n\n' "$1" "$2"
	printf 'Package: linux-image-%s-unsigned\nVersion: %s\nArchitecture: amd64\nDescription: i\n\n' "$1" "$2"
	printf 'Package: linux-source-6.12\nVersion: %s\nArchitecture: all\nDescription: s\n\n' "$2"
}
a=$tmp/apt13
mkdir -p "$a/repo" "$a/lists/partial" "$a/cache/archives/partial" "$a/etc/parts"
{ deb13 6.12.107+deb13-amd64 6.12.107-1; deb13 6.12.117+deb13-amd64 6.12.117-1; } >"$a/repo/Packages"
echo "deb [trusted=yes] file:$a/repo ./" >"$a/etc/sources.list"
: >"$a/status"
cat >"$a/apt.conf" <<EOF
Dir::Etc::SourceList "$a/etc/sources.list";
Dir::Etc::SourceParts "$a/etc/parts";
Dir::State::Lists "$a/lists";
Dir::State::status "$a/status";
Dir::Cache "$a/cache";
APT::Architecture "amd64";
APT::Sandbox::User "root";
EOF
if ! APT_CONFIG=$a/apt.conf apt-get -q update >"$a/update.log" 2>&1; then
	fail "deb13: apt-get update of the local repository: $(tail -n 3 "$a/update.log")"
else
	out=$(APT_CONFIG=$a/apt.conf SPYRE_KVER=6.12.118+deb12-amd64 SPYRE_CACHE=$tmp/cache13 \
		"$setup" --dry-run kver 2>"$tmp/err6")
	[ "$out" = "KVER=6.12.117+deb13-amd64" ] ||
		fail "deb13: got '$out', expected KVER=6.12.117+deb13-amd64: $(cat "$tmp/err6")"
	grep -q "Falling back to the newest ABI it offers: 6.12.117+deb13-amd64" "$tmp/err6" ||
		fail "deb13: no loud notice: $(cat "$tmp/err6")"
	echo "# deb13: 6.12.118+deb12-amd64 -> ${out#KVER=}"
fi

[ $rc -eq 0 ] && echo "$name: ok (fallback $gone -> $newest)"
exit $rc
