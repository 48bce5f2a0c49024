#!/bin/sh
# Description: libspyre's man pages (libspyre/man/) cover its whole API and
# render cleanly: every symbol exported by libspyre.map has a page
# <symbol>.3 (the group page itself or a one-line ".so man3/<group>.3" alias)
# whose group page names it and shows its prototype exactly as spyre.h
# (or spyre_kernels.h, the kernel library's) declares it, spyre.7 refers to every group page, and every page renders
# with groff (or man) without a single warning. TAP, three points; the two
# that render skip when there is no groff or man to render with.

top=$(cd "$(dirname "$0")/../.." && pwd) || exit 1
. "$top/tests/tap.sh"
map=$top/libspyre/libspyre.map
hdr=$top/libspyre/include/spyre.h
khdr=$top/libspyre/include/spyre_kernels.h
man=$top/libspyre/man

tap_plan 3
for f in "$map" "$hdr" "$khdr" "$man/spyre.7"; do
	[ -f "$f" ] || tap_bail "$f is missing"
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/man-pages-test.XXXXXX") || tap_bail "mktemp failed"
trap 'rm -rf "$tmp"' EXIT
# Pages refer to each other as man3/<page>, relative to the current directory
# (as under /usr/share/man): render them from a directory where man3 and man7
# are the source directory.
ln -s "$man" "$tmp/man3"
ln -s "$man" "$tmp/man7"

# ---- check 1: every exported symbol has a page, and its group page names it --

# The spyre_* symbols of the global section of the version script.
awk '/global:/ { on = 1; next } /local:/ { on = 0 }
     on && $1 ~ /^spyre_[A-Za-z0-9_]*;$/ { sub(/;$/, "", $1); print $1 }' "$map" >"$tmp/symbols"
nsym=$(wc -l <"$tmp/symbols")
if [ "$nsym" -eq 0 ]; then
	tap_fail "no exported symbols found in $map"
fi

# The group page of a page: the target of its .so line, or the page itself.
group_of() {
	first=$(sed -n 1p "$1")
	case $first in
	".so man3/"*) echo "$man/${first#.so man3/}" ;;
	*) echo "$1" ;;
	esac
}

# Words of the NAME section of a page.
name_section() {
	awk '/^\.SH/ { on = ($2 == "NAME"); next } on' "$1" | sed 's/\\-.*//' | tr ',' ' ' | tr -s ' ' '\n'
}

groups=
while read -r sym; do
	page=$man/$sym.3
	if [ ! -f "$page" ]; then
		tap_fail "$sym has no man page (libspyre/man/$sym.3)"
		continue
	fi
	group=$(group_of "$page")
	if [ "$group" != "$page" ] && [ "$(wc -l <"$page")" -ne 1 ]; then
		tap_fail "alias page $sym.3 must hold only its .so line"
	fi
	if [ ! -f "$group" ]; then
		tap_fail "$sym.3 refers to ${group#"$man"/}, which does not exist"
		continue
	fi
	if ! name_section "$group" | grep -qx "$sym"; then
		tap_fail "group page ${group#"$man"/} does not name $sym in its NAME section"
	fi
	if ! awk '/^\.SH/ { on = ($2 == "DESCRIPTION"); next } on' "$group" | grep -qw "$sym"; then
		tap_fail "group page ${group#"$man"/} does not describe $sym in its DESCRIPTION"
	fi
	case " $groups " in
	*" ${group##*/} "*) ;;
	*) groups="$groups ${group##*/}" ;;
	esac
done <"$tmp/symbols"

for g in $groups; do
	if ! grep -q "^\.BR ${g%.3} (3)" "$man/spyre.7"; then
		tap_fail "spyre.7 does not refer to ${g%.3}(3)"
	fi
done
tap_point "check 1: all $nsym exported symbols have a page, named and described by their group page"

# ---- pick a formatter -----------------------------------------------------------

# groff if installed, else man; SPYRE_MAN_FORMATTER=groff|man forces one.
printf '.TH PROBE 7\n.SH NAME\nprobe \\- probe\n' >"$tmp/probe.7"
fmt=
for f in ${SPYRE_MAN_FORMATTER:-groff man}; do
	case $f in
	groff) groff -man -Tutf8 -z "$tmp/probe.7" >/dev/null 2>&1 && fmt="groff" ;;
	man) man -l -Tutf8 -Z "$tmp/probe.7" >/dev/null 2>&1 && fmt="man" ;;
	esac
	[ -n "$fmt" ] && break
done
if [ -z "$fmt" ]; then
	why="neither groff nor man can render pages (apt-get install groff-base)"
	tap_skip "check 2: every page renders without warnings" "$why"
	tap_skip "check 3: the SYNOPSIS prototypes are those of spyre.h" "$why"
	tap_done
fi

# ---- check 2: every page renders without a warning ---------------------------------

for page in "$man"/*.3 "$man"/*.7; do
	rel=man3/${page##*/}
	if [ "$fmt" = groff ]; then
		(cd "$tmp" && groff -man -Tutf8 -ww -z "$rel") >"$tmp/render.out" 2>&1
	else
		(cd "$tmp" && man --warnings=w -l -Tutf8 -Z "$rel" >/dev/null) >"$tmp/render.out" 2>&1
	fi
	rc=$?
	if [ "$rc" -ne 0 ] || [ -s "$tmp/render.out" ]; then
		tap_fail "${page##*/} does not render cleanly with $fmt (exit $rc):"
		sed 's/^/#     /' "$tmp/render.out"
	fi
done
tap_point "check 2: every page renders with $fmt without warnings"

# ---- check 3: the SYNOPSIS prototypes are those of spyre.h ------------------------

# One normalized declaration per line, "name<TAB>declaration": whitespace
# collapsed, none around punctuation.
normalize='
function norm(s) {
	gsub(/[ \t]+/, " ", s)
	gsub(/ ?\( ?/, "(", s); gsub(/ ?\) ?/, ")", s); gsub(/ ?, ?/, ",", s)
	gsub(/ ?\* ?/, "*", s); gsub(/ ?; ?/, ";", s)
	sub(/^ /, "", s); sub(/ $/, "", s)
	return s
}
function emit(text,    i, st, m) {
	stmt = stmt " " text
	while ((i = index(stmt, ";")) > 0) {
		st = norm(substr(stmt, 1, i))
		stmt = substr(stmt, i + 1)
		if (st ~ /^typedef/ || !match(st, /[A-Za-z_][A-Za-z0-9_]*\(/))
			continue
		print substr(st, RSTART, RLENGTH - 1) "\t" st
	}
}'

# Declarations of spyre.h and spyre_kernels.h, comments and preprocessor lines dropped.
awk "$normalize"'
{
	s = $0; out = ""
	while (s != "") {
		if (incomment) {
			i = index(s, "*/")
			if (!i) { s = ""; break }
			s = substr(s, i + 2); incomment = 0
		} else {
			i = index(s, "/*")
			if (!i) { out = out s; s = "" }
			else { out = out substr(s, 1, i - 1); s = substr(s, i + 2); incomment = 1 }
		}
	}
	if (out ~ /^[ \t]*#/)
		next
	emit(out)
}' "$hdr" "$khdr" >"$tmp/header.protos"

render_text() {
	if [ "$fmt" = groff ]; then
		(cd "$tmp" && groff -man -Tascii -P-c -P-b -P-u "$1" 2>/dev/null)
	else
		bs=$(printf '\b')
		(cd "$tmp" && MANWIDTH=80 man -l -Tascii "$1" 2>/dev/null) | sed "s/.$bs//g"
	fi
}

checked=0
for page in "$man"/*.3; do
	[ "$(group_of "$page")" = "$page" ] || continue
	# The SYNOPSIS as rendered, without #include lines.
	render_text "man3/${page##*/}" |
		awk '/^[A-Z]/ { on = ($0 == "SYNOPSIS"); next } on && $1 !~ /^#/' |
		awk "$normalize"'{ emit($0) }' >"$tmp/page.protos"
	while IFS='	' read -r fn proto; do
		want=$(awk -F '\t' -v f="$fn" '$1 == f { print $2 }' "$tmp/header.protos")
		if [ -z "$want" ]; then
			tap_fail "${page##*/} shows $fn(), which spyre.h does not declare"
		elif [ "$want" != "$proto" ]; then
			tap_fail "${page##*/}: the prototype of $fn() differs from spyre.h:"
			tap_diag "    page:    $proto"
			tap_diag "    spyre.h: $want"
		fi
		checked=$((checked + 1))
	done <"$tmp/page.protos"
done
while read -r sym; do
	group=$(group_of "$man/$sym.3" 2>/dev/null)
	[ -f "$group" ] || continue
	if ! render_text "man3/${group##*/}" |
		awk '/^[A-Z]/ { on = ($0 == "SYNOPSIS"); next } on' | grep -q "[ *]$sym("; then
		tap_fail "the SYNOPSIS of ${group##*/} lacks a prototype of $sym()"
	fi
done <"$tmp/symbols"
tap_point "check 3: the SYNOPSIS prototypes are those of spyre.h ($checked checked)"
tap_done
