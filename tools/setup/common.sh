# shellcheck shell=bash
# Shared helpers for spyre's set-up and VM scripts. Source it; do not run it.

SPYRE_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=../versions.conf
. "$SPYRE_TOP/tools/versions.conf"

# Caches live outside the clone so fresh clones (CI) and later sessions reuse them.
SPYRE_CACHE=${SPYRE_CACHE:-/var/cache/spyre}

# The kernel ABI: the one pinned in versions.conf (SPYRE_KVER overrides it), or
# what the set-up resolved it to when Debian no longer offers it (the newest
# 6.12 ABI of the archive), recorded in $SPYRE_CACHE/kver.<pinned>. The
# Makefile reads the same file.
KVER_PINNED=${SPYRE_KVER:-$KVER}
spyre_resolved_kver() {
	local v=""
	[ -r "$SPYRE_CACHE/kver.$KVER_PINNED" ] && read -r v <"$SPYRE_CACHE/kver.$KVER_PINNED"
	echo "${v:-$KVER_PINNED}"
}
KVER=$(spyre_resolved_kver)

# Derived from KVER (setup.sh re-derives them after resolving it).
spyre_kver_paths() {
	KSRC_CACHE=$SPYRE_CACHE/linux-$KVER
	KDIR=/lib/modules/$KVER/build
}
spyre_kver_paths
# SPYRE_QEMU_CACHE: a QEMU source and build tree of its own (a second clone
# working on the device builds there and leaves the shared one alone).
QEMU_CACHE=${SPYRE_QEMU_CACHE:-$SPYRE_CACHE/qemu}
QEMU_BIN=$QEMU_CACHE/build/qemu-system-x86_64
# Debian's linux-source-6.12 .deb, downloaded once for the extracted files above
# and the debug kernel.
DEB_CACHE=$SPYRE_CACHE/debs
# The debug kernel (docs/debug-kernel.md): source tree, build tree (O=), and
# the module built for it out of the clone's build/ directory.
DEBUG_KCACHE=$SPYRE_CACHE/linux-debug
DEBUG_KSRC=$DEBUG_KCACHE/src
DEBUG_KBUILD=$DEBUG_KCACHE/build
DEBUG_BZIMAGE=$DEBUG_KBUILD/arch/x86/boot/bzImage
DEBUG_KCONFIG=$SPYRE_TOP/tools/setup/debug-kernel.config
DEBUG_KO=$SPYRE_TOP/build/dbg-module/driver/spyre.ko
# The Python environment of the PyTorch device (frameworks/pytorch): a venv of
# Python $PYTHON_SERIES (spyre_python) with the packages of requirements.txt
# (step venv), and its key: the requirements file and the interpreter's
# version. Nothing else may name its path: it follows SPYRE_CACHE (the guest
# image carries it at the same path).
VENV=$SPYRE_CACHE/venv
VENV_REQUIREMENTS=$SPYRE_TOP/frameworks/pytorch/requirements.txt
# The venv's interpreter, Python $PYTHON_SERIES (the torch wheel's), chosen
# here only: SPYRE_PYTHON when set; else Debian's /usr/bin/python3 when it is
# $PYTHON_SERIES (Debian 12); else pyenv's newest $PYTHON_SERIES.N
# (\$PYENV_ROOT or ~/.pyenv; Debian 13's python3 is 3.13). Prints its path;
# fails saying what to do when there is none (pip must never look for
# another interpreter's torch: that is a CUDA build of GBs).
python_series() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null; }
spyre_python() {
	local py cands=()
	if [ -n "${SPYRE_PYTHON:-}" ]; then
		[ "$(python_series "$SPYRE_PYTHON")" = "$PYTHON_SERIES" ] ||
			die "SPYRE_PYTHON=$SPYRE_PYTHON is not Python $PYTHON_SERIES (the series of the" \
				"PyTorch wheel, PYTHON_SERIES in tools/versions.conf)"
		echo "$SPYRE_PYTHON"
		return
	fi
	cands=(/usr/bin/python3)
	for py in $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}/versions/$PYTHON_SERIES".* 2>/dev/null | sort -Vr); do
		cands+=("$py/bin/python$PYTHON_SERIES")
	done
	for py in "${cands[@]}"; do
		if [ -x "$py" ] && [ "$(python_series "$py")" = "$PYTHON_SERIES" ]; then
			echo "$py"
			return
		fi
	done
	die "no Python $PYTHON_SERIES: /usr/bin/python3 is $(python_series /usr/bin/python3 || echo absent)" \
		"and pyenv (${PYENV_ROOT:-$HOME/.pyenv}/versions) has no $PYTHON_SERIES.N. Install one" \
		"(pyenv install $PYTHON_SERIES) or point SPYRE_PYTHON at a python$PYTHON_SERIES"
}
venv_key() {
	local py
	py=$(spyre_python)
	{ cat "$VENV_REQUIREMENTS"; "$py" -c 'import sys; print(sys.version)'; } | sha256sum | cut -c1-16
}
# The guest's Python root filesystem (docs/guest-python.md): an ext4 image of
# Debian's python3 with its dependency closure and the venv (tools/vm/mkrootfs),
# and its cache key; tools/vm/run --python boots with it.
GUEST_PYTHON_CACHE=$SPYRE_CACHE/guest-python
GUEST_PYTHON_IMG=$GUEST_PYTHON_CACHE/rootfs.ext4

log()  { printf '[spyre] %s\n' "$*" >&2; }
die()  { printf '[spyre] error: %s\n' "$*" >&2; exit 1; }

# Run a long command, printing a heartbeat with elapsed time every 30 s and the
# tail of its log on failure.
run_logged() {
	local what=$1 logf=$2; shift 2
	local start=$SECONDS last=$SECONDS pid rc
	log "$what (log: $logf)"
	"$@" >"$logf" 2>&1 &
	pid=$!
	while kill -0 "$pid" 2>/dev/null; do
		sleep 2
		if (( SECONDS - last >= 30 )) && kill -0 "$pid" 2>/dev/null; then
			last=$SECONDS
			log "  ... $((SECONDS - start)) s: $(tail -n 1 "$logf" | cut -c1-100)"
		fi
	done
	rc=0
	wait "$pid" || rc=$?
	if [ "$rc" -ne 0 ]; then
		tail -n 40 "$logf" >&2
		die "$what failed (exit $rc); full log in $logf"
	fi
	log "$what done in $((SECONDS - start)) s"
}
