#!/bin/sh
# Description: what `make install` gives a user is enough on its own: every
# public header it installs compiles alone, as C (-std=c11) and as C++
# (-std=c++17), with -Wall -Wextra -Werror; the headers it installs are
# exactly the Makefile's PUBLIC_HDRS, spyre_kernels.h included, and the
# dtype constants its structures take come with them; a program built
# against the installed tree only (pkg-config's flags from the installed
# libspyre.pc, nothing from the source tree) links the installed libspyre.so
# and runs (no card on the host: spyre_device_count() is 0, and opening
# device 0 fails with -ENODEV and a detail); the installed spyre-as and
# spyre-objdump assemble the ISA reference's worked example and print it
# back so that it assembles to the same bytes. TAP, five points.

top=$(cd "$(dirname "$0")/../.." && pwd) || exit 1
. "$top/tests/tap.sh"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/install-test.XXXXXX") || tap_bail "mktemp failed"
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root
pfx=/usr/local
tap_plan 5
make -s -C "$top" install DESTDIR="$root" PREFIX="$pfx" >"$tmp/install.log" 2>&1 ||
	{ sed 's/^/#   /' "$tmp/install.log"; tap_bail "make install DESTDIR=$root failed"; }
inc=$root$pfx/include

# 1: exactly the public headers
want=$(make -s -C "$top" --no-print-directory -f Makefile -f - print-public-hdrs <<'EOF' | tr ' ' '\n' | sed 's|.*/||' | sort
print-public-hdrs: ; @echo $(PUBLIC_HDRS)
EOF
)
got=$(ls "$inc" | sort)
[ -n "$want" ] || tap_fail "PUBLIC_HDRS is empty"
[ "$want" = "$got" ] || tap_fail "installed: $(echo $got); PUBLIC_HDRS: $(echo $want)"
for h in spyre.h spyre_kernels.h; do
	echo "$want" | grep -qx "$h" || tap_fail "$h is not installed"
done
tap_point "make install puts exactly the public headers in PREFIX/include, spyre_kernels.h among them"

# 2: each alone, C and C++ (the uapi headers need libdrm's drm.h, as libspyre.pc says)
cflags="-I$inc $(pkg-config --cflags libdrm)"
for h in $got; do
	echo "#include <$h>" >"$tmp/one.c"
	cc -std=c11 -Wall -Wextra -Werror $cflags -fsyntax-only "$tmp/one.c" >"$tmp/cc.log" 2>&1 ||
		{ sed 's/^/#   /' "$tmp/cc.log"; tap_fail "$h alone does not compile as C"; }
	c++ -std=c++17 -Wall -Wextra -Werror $cflags -fsyntax-only -x c++ "$tmp/one.c" >"$tmp/cc.log" 2>&1 ||
		{ sed 's/^/#   /' "$tmp/cc.log"; tap_fail "$h alone does not compile as C++"; }
done
tap_point "each installed header compiles alone as C and as C++ (-Wall -Wextra -Werror)"

# 3: a program against the installed tree only
cat >"$tmp/prog.c" <<'EOF'
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <spyre_kernels.h>

int main(void)
{
	spyre_device_t *dev = NULL;
	int n = spyre_device_count(), ret;

	if (n != 0)
		return printf("spyre_device_count() = %d on a host with no card\n", n), 1;
	ret = spyre_device_open(0, &dev);
	if (ret != -ENODEV || dev || !strstr(spyre_last_error(), "no spyre device 0"))
		return printf("open(0) = %d, detail '%s'\n", ret, spyre_last_error()), 1;
	printf("dtype fp16 %d, open(0): %s\n", SPYRE_DT_FP16, spyre_last_error());
	return 0;
}
EOF
pc=$root$pfx/lib/pkgconfig
if ! flags=$(PKG_CONFIG_PATH=$pc pkg-config --define-variable=prefix="$root$pfx" --cflags --libs libspyre \
	2>"$tmp/pc.log"); then
	sed 's/^/#   /' "$tmp/pc.log"
	tap_fail "pkg-config does not find the installed libspyre.pc"
elif ! cc -std=c11 -Wall -Werror "$tmp/prog.c" -o "$tmp/prog" $flags >"$tmp/cc.log" 2>&1; then
	sed 's/^/#   /' "$tmp/cc.log"
	tap_fail "the program does not build against the installed tree ($flags)"
else
	lib=$(LD_LIBRARY_PATH=$root$pfx/lib ldd "$tmp/prog" | awk '/libspyre/ { print $3 }')
	[ "$lib" = "$root$pfx/lib/libspyre.so.0" ] || tap_fail "libspyre resolved to '$lib', not the installed one"
	LD_LIBRARY_PATH=$root$pfx/lib "$tmp/prog" >"$tmp/run.log" 2>&1 ||
		{ sed 's/^/#   /' "$tmp/run.log"; tap_fail "the program failed"; }
	sed 's/^/# /' "$tmp/run.log"
fi
tap_point "a program built with the installed libspyre.pc links the installed library and runs"

# 4, 5: the installed assembler tools
sed -n '/^## 9\. Worked example/,/^The runtime writes/p' "$top/docs/spyre-isa.md" |
	sed -n '/^```$/,/^```$/p' | sed '1d;$d' >"$tmp/ex.s"
[ -s "$tmp/ex.s" ] || tap_bail "no worked example in docs/spyre-isa.md section 9"
tap_check "the installed spyre-as assembles the ISA reference's worked example" \
	"$root$pfx/bin/spyre-as" "$tmp/ex.s" -o "$tmp/ex.bin"
tap_check "the installed spyre-objdump prints it back, and that assembles to the same bytes" \
	sh -c "'$root$pfx/bin/spyre-objdump' '$tmp/ex.bin' >'$tmp/ex2.s' &&
		'$root$pfx/bin/spyre-as' '$tmp/ex2.s' -o '$tmp/ex2.bin' && cmp '$tmp/ex.bin' '$tmp/ex2.bin'"
tap_done
