#!/usr/bin/env bash
# spyre set-up: installs every Debian package the stack needs, Debian's Linux 6.12
# headers and image, extracts the kselftest harness and lint scripts from
# linux-source-6.12, and builds QEMU 7.2 (Debian's source package) with the
# spyre device wired in. Idempotent: each step checks before it acts, and the
# QEMU build is incremental (only device files whose content changed rebuild).
#
# Usage: tools/setup/setup.sh [packages|kernel|ksrc|qemu|all]...
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

export DEBIAN_FRONTEND=noninteractive

PACKAGES=(
	build-essential pkg-config kmod cpio xz-utils busybox-static file
	libdrm-dev libudev-dev sparse perl python3 groff-base
	dpkg-dev ninja-build meson libglib2.0-dev libpixman-1-dev flex bison
	python3-venv libfdt-dev zlib1g-dev seabios qemu-system-data
	libopenblas-dev clang libclang-rt-14-dev
)

need_root() { [ "$(id -u)" -eq 0 ] || die "set-up needs root (apt-get, /var/cache): run as root"; }

apt_updated=0
apt_update_once() {
	if [ "$apt_updated" -eq 0 ]; then
		run_logged "apt-get update" "$SPYRE_CACHE/apt-update.log" apt-get update
		apt_updated=1
	fi
}

missing_packages() {
	local p
	for p in "$@"; do
		[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || echo "$p"
	done
}

step_packages() {
	local missing
	missing=$(missing_packages "${PACKAGES[@]}")
	if [ -z "$missing" ]; then
		log "packages: all ${#PACKAGES[@]} present"
		return
	fi
	need_root
	log "packages: installing $(echo $missing)"
	apt_update_once
	# shellcheck disable=SC2086
	run_logged "apt-get install" "$SPYRE_CACHE/apt-install.log" \
		apt-get install -y --no-install-recommends $missing
}

step_kernel() {
	local missing
	missing=$(missing_packages "linux-headers-$KVER")
	# Debian names the 6.12 image package linux-image-<ver>-unsigned; the headers
	# package depends on it (or the signed one), so one install brings both.
	[ -f "/boot/vmlinuz-$KVER" ] || missing="$missing linux-image-$KVER-unsigned"
	if [ -n "$missing" ]; then
		need_root
		apt_update_once
		# shellcheck disable=SC2086
		run_logged "install Linux $KVER" "$SPYRE_CACHE/apt-kernel.log" \
			apt-get install -y --no-install-recommends $missing
	fi
	[ -f "/boot/vmlinuz-$KVER" ] || die "/boot/vmlinuz-$KVER missing after install"
	[ -d "$KDIR" ] || die "$KDIR missing after install"
	log "kernel: $KVER (headers and image) present"
}

# kselftest harness, checkpatch.pl and kernel-doc from linux-source-6.12 of the
# same Debian version as the pinned kernel.
step_ksrc() {
	local stamp="$KSRC_CACHE/.extracted" ver tmp
	ver=$(dpkg-query -W -f='${Version}' "linux-headers-$KVER" 2>/dev/null || true)
	[ -n "$ver" ] || die "linux-headers-$KVER not installed (run the kernel step first)"
	if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$ver" ]; then
		log "kernel source files: cached in $KSRC_CACHE"
		return
	fi
	need_root
	apt_update_once
	rm -rf "$KSRC_CACHE"; mkdir -p "$KSRC_CACHE"
	tmp=$(mktemp -d "$SPYRE_CACHE/ksrc.XXXXXX")
	(cd "$tmp" && run_logged "download linux-source-6.12=$ver" "$tmp/dl.log" \
		apt-get download "linux-source-6.12=$ver")
	run_logged "extract kselftest harness, checkpatch, kernel-doc" "$tmp/x.log" bash -c "
		set -euo pipefail
		dpkg-deb --fsys-tarfile '$tmp'/linux-source-6.12_*.deb |
			tar -xO --wildcards '*/linux-source-6.12.tar.xz' |
			tar -xJ -C '$KSRC_CACHE' --strip-components=1 --wildcards \
				'linux-source-6.12/tools/testing/selftests/kselftest_harness.h' \
				'linux-source-6.12/tools/testing/selftests/kselftest.h' \
				'linux-source-6.12/scripts/checkpatch.pl' \
				'linux-source-6.12/scripts/spelling.txt' \
				'linux-source-6.12/scripts/const_structs.checkpatch' \
				'linux-source-6.12/scripts/kernel-doc' \
				'linux-source-6.12/drivers/accel/*' \
				'linux-source-6.12/drivers/gpu/drm/scheduler/*' \
				'linux-source-6.12/include/uapi/drm/*'"
	rm -rf "$tmp"
	for f in tools/testing/selftests/kselftest_harness.h scripts/checkpatch.pl scripts/kernel-doc; do
		[ -f "$KSRC_CACHE/$f" ] || die "extraction lost $f"
	done
	echo "$ver" >"$stamp"
	log "kernel source files: extracted to $KSRC_CACHE"
}

# Enable deb-src entries derived from the machine's own deb entries (no host is
# written here): a copy of each Types: deb stanza as Types: deb-src.
ensure_deb_src() {
	local src=/etc/apt/sources.list.d/debian.sources dst=/etc/apt/sources.list.d/spyre-deb-src.sources
	# (no grep -q on a pipe: with pipefail its early exit fails the pipeline)
	if [ "$(apt-cache showsrc "$QEMU_SRCPKG" 2>/dev/null | grep -c '^Version:')" -gt 0 ]; then
		return
	fi
	need_root
	if [ -f "$src" ]; then
		sed -n 's/^Types:[[:space:]]*deb[[:space:]]*$/Types: deb-src/; p' "$src" >"$dst"
	elif [ -f /etc/apt/sources.list ]; then
		grep -E '^deb[[:space:]]' /etc/apt/sources.list | sed 's/^deb /deb-src /' \
			>/etc/apt/sources.list.d/spyre-deb-src.list
	else
		die "no apt sources found to derive deb-src entries from"
	fi
	apt_updated=0
	apt_update_once
}

# Copy $1/* into $2 only where content differs, so ninja rebuilds only what changed
# (a fresh clone has new mtimes on every file, but the same content).
sync_tree() {
	local from=$1 to=$2 f rel
	mkdir -p "$to"
	while IFS= read -r -d '' f; do
		rel=${f#"$from"/}
		mkdir -p "$to/$(dirname "$rel")"
		cmp -s "$f" "$to/$rel" || cp "$f" "$to/$rel"
	done < <(find "$from" -type f \( -name '*.c' -o -name '*.h' -o -name 'meson.build' \
		-o -name 'Kconfig' -o -name 'trace-events' \) -not -path '*/tests/*' -print0)
	# Drop files that no longer exist in the repo.
	while IFS= read -r -d '' f; do
		rel=${f#"$to"/}
		case "$(basename "$rel")" in spyre_hw.h | spyre_isa.h) continue ;; esac
		[ -e "$from/$rel" ] || rm -f "$f"
	done < <(find "$to" -type f -print0)
}

append_once() { grep -qF "$2" "$1" || printf '%s\n' "$2" >>"$1"; }

step_qemu() {
	local ver src="$QEMU_CACHE/src" build="$QEMU_CACHE/build" cfgargs
	mkdir -p "$QEMU_CACHE"
	ensure_deb_src
	ver=$(apt-cache showsrc "$QEMU_SRCPKG" | sed -n 's/^Version: //p' | sort -V | tail -n 1)
	case "$ver" in *"$QEMU_SERIES"*) ;; *) die "Debian's $QEMU_SRCPKG source is $ver, expected $QEMU_SERIES.x";; esac

	if [ ! -f "$src/.spyre-source" ] || [ "$(cat "$src/.spyre-source")" != "$QEMU_SRCPKG $ver" ]; then
		need_root
		log "qemu: fetching Debian source $QEMU_SRCPKG $ver (replaces any other cached source)"
		rm -rf "$src" "$build" "$QEMU_CACHE/dl"
		mkdir -p "$QEMU_CACHE/dl"
		(cd "$QEMU_CACHE/dl" && run_logged "apt-get source $QEMU_SRCPKG=$ver" "$QEMU_CACHE/source.log" \
			apt-get source "$QEMU_SRCPKG=$ver")
		mv "$(find "$QEMU_CACHE/dl" -mindepth 1 -maxdepth 1 -type d -name "$QEMU_SRCPKG-*" | head -n 1)" "$src"
		rm -rf "$QEMU_CACHE/dl"
		echo "$QEMU_SRCPKG $ver" >"$src/.spyre-source"
	fi

	# Wire the device in the way hw/misc/edu.c is: a subdir with meson.build + Kconfig.
	sync_tree "$SPYRE_TOP/qemu-device" "$src/hw/misc/spyre"
	# The shared headers, beside the device and beside the engine.
	for h in spyre_hw.h spyre_isa.h; do
		for d in "$src/hw/misc/spyre" "$src/hw/misc/spyre/engine"; do
			cmp -s "$SPYRE_TOP/uapi/$h" "$d/$h" || cp "$SPYRE_TOP/uapi/$h" "$d/$h"
		done
	done
	append_once "$src/hw/misc/meson.build" "subdir('spyre')"
	append_once "$src/hw/misc/Kconfig" "source spyre/Kconfig"
	grep -q "'hw/misc/spyre'" "$src/meson.build" ||
		sed -i "s|^\\([[:space:]]*\\)'hw/misc',$|&\\n\\1'hw/misc/spyre',|" "$src/meson.build"
	grep -q "'hw/misc/spyre'" "$src/meson.build" || die "could not add hw/misc/spyre to QEMU's trace_events_subdirs"

	cfgargs="--target-list=x86_64-softmmu --without-default-features --disable-docs --disable-werror \
--enable-tcg --disable-install-blobs --with-git-submodules=ignore"
	if [ ! -f "$build/build.ninja" ] || [ "$(cat "$build/.spyre-config" 2>/dev/null)" != "$cfgargs" ]; then
		rm -rf "$build"; mkdir -p "$build"
		# shellcheck disable=SC2086
		# Debian's python3 and meson first: a pyenv python on PATH lacks the modules.
		(cd "$build" && run_logged "qemu: configure" "$QEMU_CACHE/configure.log" \
			env PATH="/usr/bin:/bin:$PATH" ../src/configure $cfgargs)
		echo "$cfgargs" >"$build/.spyre-config"
	fi
	# Always run ninja: a no-op when up to date, an incremental rebuild after a
	# device change, and a retry (never a silent reuse) after a failed build.
	run_logged "qemu: build qemu-system-x86_64 (first build takes ~6 min)" "$QEMU_CACHE/build.log" \
		ninja -C "$build" qemu-system-x86_64
	# The device's own files must build without warnings.
	if grep -E '(hw/misc/spyre/[^ ]*: warning|hw/misc/spyre/[^ ]*:[0-9]+:[0-9]+: warning)' "$QEMU_CACHE/build.log"; then
		die "the spyre device compiles with warnings (see above)"
	fi
	[ "$("$QEMU_BIN" -device help 2>&1 | grep -c '"spyre"')" -gt 0 ] || die "built QEMU does not list the spyre device"
	log "qemu: $QEMU_BIN has the spyre device"
}

main() {
	local steps=("$@")
	[ ${#steps[@]} -gt 0 ] || steps=(all)
	mkdir -p "$SPYRE_CACHE" 2>/dev/null || need_root
	for s in "${steps[@]}"; do
		case "$s" in
		packages) step_packages ;;
		kernel) step_kernel ;;
		ksrc) step_ksrc ;;
		qemu) step_qemu ;;
		all) step_packages; step_kernel; step_ksrc; step_qemu ;;
		*) die "unknown step '$s' (packages|kernel|ksrc|qemu|all)" ;;
		esac
	done
}
main "$@"
