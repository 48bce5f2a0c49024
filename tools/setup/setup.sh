#!/usr/bin/env bash
# spyre set-up: installs every Debian package the stack needs, Debian's Linux 6.12
# headers and image, extracts the kselftest harness and lint scripts from
# linux-source-6.12, and builds Debian's QEMU source package (7.2 on Debian 12,
# 10.0 on Debian 13: QEMU_SERIES in tools/versions.conf) with the spyre device
# wired in. Idempotent: each step checks before it acts, and the
# QEMU build is incremental (only device files whose content changed rebuild).
# The debug kernel (step debug-kernel, docs/debug-kernel.md) is built from the
# same linux-source-6.12 with tools/setup/debug-kernel.config. The PyTorch
# device's Python packages (step venv) go into a venv of Python 3.11 (the
# PyTorch wheel's: Debian 12's python3, or pyenv's 3.11 on Debian 13, or
# SPYRE_PYTHON; tools/setup/common.sh) in $SPYRE_CACHE/venv; the guest's Python
# root filesystem (step guest-python, docs/guest-python.md) is an image of that
# interpreter and that venv for tools/vm/run --python.
#
# Usage: tools/setup/setup.sh [--dry-run] [packages|kver|kernel|ksrc|qemu|debug-kernel|venv|guest-python|all]...
#   all           packages kver kernel ksrc qemu (what `make demo` needs)
#   venv          $SPYRE_CACHE/venv: Python 3.11 with the pinned packages of
#                 frameworks/pytorch/requirements.txt (PyTorch 2.13.0 CPU first),
#                 re-created only when that file or the interpreter changes
#   guest-python  venv, then the guest's root filesystem image, again only when
#                 the installed packages or the venv change (what `make check` adds)
#   kver          resolve the kernel ABI: the pinned KVER, or the newest 6.12 ABI
#                 the archive offers when Debian dropped it (SPYRE_KVER overrides the pin)
#   --dry-run     with kver only: print "KVER=<resolved>", change nothing
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

export DEBIAN_FRONTEND=noninteractive

PACKAGES=(
	build-essential pkg-config kmod cpio xz-utils busybox-static file
	libdrm-dev libudev-dev sparse perl python3 groff-base
	dpkg-dev ninja-build meson libglib2.0-dev libpixman-1-dev flex bison
	python3-venv libfdt-dev zlib1g-dev seabios qemu-system-data
	libopenblas-dev clang
	libslirp-dev
	bc libelf-dev
	libmicrohttpd-dev
)
# Step venv: the interpreter and its venv module; g++ builds the extension
# against the venv's PyTorch headers on the host.
VENV_PACKAGES=(python3 python3-venv g++)
# Step guest-python: its root filesystem image is the closure of python3,
# busybox-static and the C++ runtime the venv's wheels link (tools/vm/mkrootfs)
# plus the venv; e2fsprogs makes the image.
GUEST_PYTHON_PACKAGES=(python3 e2fsprogs busybox-static)

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

# libFuzzer's runtime for Debian's default clang: libclang-rt-N-dev of the
# clang-N the clang package depends on (14 on Debian 12, 19 on Debian 13).
clang_rt_package() {
	local v
	v=$(apt-cache depends clang 2>/dev/null | sed -n 's/^ *Depends: clang-\([0-9][0-9]*\)$/\1/p' | head -n 1)
	[ -n "$v" ] || die "apt knows no clang package depending on a clang-N (apt-cache depends clang)"
	echo "libclang-rt-$v-dev"
}

step_packages() {
	local missing
	PACKAGES+=("$(clang_rt_package)")
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

# ---- the kernel ABI --------------------------------------------------------------
# Debian drops old kernel ABIs from the archive. Use the pinned one while it is
# installed or installable; otherwise fall back, loudly, to the newest ABI of
# the same series and flavour (6.12.*+debN-amd64) the archive offers. The choice
# goes to $SPYRE_CACHE/kver.<pinned>, which common.sh and the Makefile read.
# Installed, or with an install candidate in apt's lists: apt's view either
# way (an installed version is its own candidate), so that an APT_CONFIG of
# another release's lists and dpkg status (kver-fallback-test) sees that
# release's machine.
kver_offered() {
	local cand
	cand=$(apt-cache policy "linux-headers-$1" 2>/dev/null | sed -n 's/^ *Candidate: //p')
	[ -n "$cand" ] && [ "$cand" != "(none)" ]
}

newest_kver() { # the newest linux-headers-<series>.N+debM-<flavour> in apt's lists
	local series flavour re
	series=$(echo "$KVER_PINNED" | cut -d. -f1,2)
	flavour=${KVER_PINNED#*+deb*-}
	re="^linux-headers-${series/./[.]}[.][0-9]+[+]deb[0-9]+-${flavour}\$"
	apt-cache search --names-only "$re" 2>/dev/null | awk '{ print $1 }' | sed 's/^linux-headers-//' |
		sort -V | tail -n 1
}

kver_resolved=0
step_kver() {
	local want=$KVER_PINNED got="" rec=$SPYRE_CACHE/kver.$KVER_PINNED
	[ "$kver_resolved" -eq 0 ] || return 0
	kver_resolved=1
	kver_offered "$want" && got=$want
	if [ -z "$got" ] && [ "$dry_run" -eq 0 ]; then
		need_root
		apt_update_once # the lists may just be stale
		kver_offered "$want" && got=$want
	fi
	if [ -z "$got" ]; then
		got=$(newest_kver)
		[ -n "$got" ] || die "linux-headers-$want is not in the archive, and no other" \
			"$(echo "$want" | cut -d. -f1,2) ABI of its flavour is (apt-cache search linux-headers-)"
		log "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
		log "!!! linux-headers-$want (KVER pinned in tools/versions.conf, or SPYRE_KVER)"
		log "!!! is not in the archive."
		log "!!! Falling back to the newest ABI it offers: $got."
		log "!!! spyre.ko is built for, and the VMs boot, $got. Update KVER in tools/versions.conf."
		log "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
	fi
	if [ "$dry_run" -eq 1 ]; then
		echo "KVER=$got"
		return
	fi
	if [ "$(spyre_resolved_kver)" != "$got" ] || [ ! -f "$rec" ]; then
		echo "$got" >"$rec.tmp" && mv "$rec.tmp" "$rec"
	fi
	KVER=$got
	spyre_kver_paths
	if [ "$got" = "$want" ]; then log "kernel ABI: $KVER"; else log "kernel ABI: $KVER (fallback for $want)"; fi
}

# The Debian version of the installed headers, which the source package must match.
kernel_deb_version() {
	local ver
	ver=$(dpkg-query -W -f='${Version}' "linux-headers-$KVER" 2>/dev/null || true)
	[ -n "$ver" ] || die "linux-headers-$KVER not installed (run the kernel step first)"
	echo "$ver"
}

# linux-source-6.12 of Debian version $1, downloaded once into $DEB_CACHE
# (older versions' .debs are removed). Prints the path of the .deb.
linux_source_deb() {
	local ver=$1 deb
	deb=$DEB_CACHE/linux-source-6.12_${ver/:/%3a}_all.deb
	if [ ! -s "$deb" ]; then
		need_root
		apt_update_once
		mkdir -p "$DEB_CACHE"
		rm -f "$DEB_CACHE"/linux-source-6.12_*.deb "$DEB_CACHE"/*.partial
		(cd "$DEB_CACHE" && run_logged "download linux-source-6.12=$ver" "$DEB_CACHE/download.log" \
			apt-get download "linux-source-6.12=$ver")
		[ -s "$deb" ] || die "download of linux-source-6.12=$ver did not produce $deb"
	fi
	echo "$deb"
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
	local stamp="$KSRC_CACHE/.extracted" ver tmp deb
	ver=$(kernel_deb_version)
	if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$ver" ]; then
		log "kernel source files: cached in $KSRC_CACHE"
		return
	fi
	need_root
	deb=$(linux_source_deb "$ver")
	rm -rf "$KSRC_CACHE"; mkdir -p "$KSRC_CACHE"
	tmp=$(mktemp -d "$SPYRE_CACHE/ksrc.XXXXXX")
	run_logged "extract kselftest harness, checkpatch, kernel-doc" "$tmp/x.log" bash -c "
		set -euo pipefail
		dpkg-deb --fsys-tarfile '$deb' |
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

# The qemu step's apt: the system's, or the configuration file SPYRE_QEMU_APT_CONFIG
# names (APT_CONFIG: e.g. another release's deb-src lists, docs/commands.md).
qemu_apt() {
	if [ -n "${SPYRE_QEMU_APT_CONFIG:-}" ]; then APT_CONFIG=$SPYRE_QEMU_APT_CONFIG "$@"; else "$@"; fi
}

# Enable deb-src entries derived from the machine's own deb entries (no host is
# written here): a copy of each Types: deb stanza as Types: deb-src.
ensure_deb_src() {
	local src=/etc/apt/sources.list.d/debian.sources dst=/etc/apt/sources.list.d/spyre-deb-src.sources
	# (no grep -q on a pipe: with pipefail its early exit fails the pipeline)
	if [ "$(qemu_apt apt-cache showsrc "$QEMU_SRCPKG" 2>/dev/null | grep -c '^Version:')" -gt 0 ]; then
		return
	fi
	[ -z "${SPYRE_QEMU_APT_CONFIG:-}" ] ||
		die "apt (APT_CONFIG=$SPYRE_QEMU_APT_CONFIG) has no $QEMU_SRCPKG source: its deb-src lists need an apt-get update"
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

# The QEMU series of a Debian version: 1:10.0.13+ds-0+deb13u1 -> 10.0.
qemu_series() { echo "$1" | sed -E 's/^[0-9]+://; s/^([0-9]+[.][0-9]+).*/\1/'; }

# The Debian version of QEMU to build: SPYRE_QEMU_VERSION, or the newest the
# archive has; its series (1:10.0.13+ds-0+deb13u1 -> 10.0) must be one the device
# supports (QEMU_SERIES in tools/versions.conf).
qemu_version() {
	local ver series
	if [ -n "${SPYRE_QEMU_VERSION:-}" ]; then
		ver=$SPYRE_QEMU_VERSION
		qemu_apt apt-cache showsrc "$QEMU_SRCPKG" | grep -qxF "Version: $ver" ||
			die "SPYRE_QEMU_VERSION=$ver: apt has no $QEMU_SRCPKG source of that version"
	else
		ver=$(qemu_apt apt-cache showsrc "$QEMU_SRCPKG" | sed -n 's/^Version: //p' | sort -V | tail -n 1)
	fi
	series=$(qemu_series "$ver")
	case ",$QEMU_SERIES," in
	*",$series,"*) ;;
	*) die "Debian's $QEMU_SRCPKG source is $ver (QEMU $series); the device supports QEMU $QEMU_SERIES" \
		"(QEMU_SERIES in tools/versions.conf; a new series needs qemu-device/spyre_compat.h first)" ;;
	esac
	echo "$ver"
}

# Copy $1/* into $2 only where content differs, so ninja rebuilds only what changed
# (a fresh clone has new mtimes on every file, but the same content). $3, if
# given, is a directory under $2 that another tree is synced into: left alone.
sync_tree() {
	local from=$1 to=$2 keep=${3:-} f rel
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
		[ -n "$keep" ] && case "$rel" in "$keep"/*) continue ;; esac
		[ -e "$from/$rel" ] || rm -f "$f"
	done < <(find "$to" -type f -print0)
}

append_once() { grep -qF "$2" "$1" || printf '%s\n' "$2" >>"$1"; }

step_qemu() {
	local ver src="$QEMU_CACHE/src" build="$QEMU_CACHE/build" cfgargs qemu_pypath
	mkdir -p "$QEMU_CACHE"
	ensure_deb_src
	ver=$(qemu_version)

	if [ ! -f "$src/.spyre-source" ] || [ "$(cat "$src/.spyre-source")" != "$QEMU_SRCPKG $ver" ]; then
		need_root
		log "qemu: fetching Debian source $QEMU_SRCPKG $ver (replaces any other cached source)"
		rm -rf "$src" "$build" "$QEMU_CACHE/dl"
		mkdir -p "$QEMU_CACHE/dl"
		(cd "$QEMU_CACHE/dl" && run_logged "apt-get source $QEMU_SRCPKG=$ver" "$QEMU_CACHE/source.log" \
			qemu_apt apt-get source "$QEMU_SRCPKG=$ver")
		mv "$(find "$QEMU_CACHE/dl" -mindepth 1 -maxdepth 1 -type d -name "$QEMU_SRCPKG-*" | head -n 1)" "$src"
		rm -rf "$QEMU_CACHE/dl"
		echo "$QEMU_SRCPKG $ver" >"$src/.spyre-source"
	fi

	# Wire the device in the way hw/misc/edu.c is: a subdir with meson.build + Kconfig;
	# the ISA library the engine depends on in its isa/ (the meson.build builds both).
	sync_tree "$SPYRE_TOP/qemu-device" "$src/hw/misc/spyre" isa
	sync_tree "$SPYRE_TOP/isa" "$src/hw/misc/spyre/isa"
	# The shared headers, beside the device, the engine and the ISA library.
	for h in spyre_hw.h spyre_isa.h; do
		for d in "$src/hw/misc/spyre" "$src/hw/misc/spyre/engine" "$src/hw/misc/spyre/isa"; do
			cmp -s "$SPYRE_TOP/uapi/$h" "$d/$h" || cp "$SPYRE_TOP/uapi/$h" "$d/$h"
		done
	done
	append_once "$src/hw/misc/meson.build" "subdir('spyre')"
	append_once "$src/hw/misc/Kconfig" "source spyre/Kconfig"
	grep -q "'hw/misc/spyre'" "$src/meson.build" ||
		sed -i "s|^\\([[:space:]]*\\)'hw/misc',$|&\\n\\1'hw/misc/spyre',|" "$src/meson.build"
	grep -q "'hw/misc/spyre'" "$src/meson.build" || die "could not add hw/misc/spyre to QEMU's trace_events_subdirs"

	# QEMU 10 configures with meson >= 1.5: Debian 13's meson package; Debian's
	# QEMU source carries no meson wheel. Elsewhere (Debian 12's meson is 1.0)
	# SPYRE_QEMU_PYTHONPATH names a directory holding a newer mesonbuild, e.g.
	# usr/lib/python3/dist-packages of Debian 13's meson .deb extracted.
	qemu_pypath=${SPYRE_QEMU_PYTHONPATH:-}
	cfgargs="--target-list=x86_64-softmmu --without-default-features --disable-docs --disable-werror \
--enable-tcg --enable-slirp --disable-install-blobs"
	# Nothing is fetched at build time: 7.2 ignores git submodules; 10.0 (no
	# submodules, meson wraps) downloads no subproject (the source has them).
	case "$(qemu_series "$ver")" in
	7.2) cfgargs="$cfgargs --with-git-submodules=ignore" ;;
	*) cfgargs="$cfgargs --disable-download" ;;
	esac
	if [ ! -f "$build/build.ninja" ] || [ "$(cat "$build/.spyre-config" 2>/dev/null)" != "$cfgargs" ]; then
		rm -rf "$build"; mkdir -p "$build"
		# shellcheck disable=SC2086
		# Debian's python3 and meson first: a pyenv python on PATH lacks the modules.
		(cd "$build" && run_logged "qemu: configure" "$QEMU_CACHE/configure.log" \
			env PATH="/usr/bin:/bin:$PATH" ${qemu_pypath:+PYTHONPATH="$qemu_pypath"} ../src/configure $cfgargs)
		echo "$cfgargs" >"$build/.spyre-config"
	fi
	# Always run ninja: a no-op when up to date, an incremental rebuild after a
	# device change, and a retry (never a silent reuse) after a failed build.
	run_logged "qemu: build qemu-system-x86_64 (first build takes ~6 min)" "$QEMU_CACHE/build.log" \
		env ${qemu_pypath:+PYTHONPATH="$qemu_pypath"} ninja -C "$build" qemu-system-x86_64
	# The device's own files must build without warnings.
	if grep -E '(hw/misc/spyre/[^ ]*: warning|hw/misc/spyre/[^ ]*:[0-9]+:[0-9]+: warning)' "$QEMU_CACHE/build.log"; then
		die "the spyre device compiles with warnings (see above)"
	fi
	[ "$("$QEMU_BIN" -device help 2>&1 | grep -c '"spyre"')" -gt 0 ] || die "built QEMU does not list the spyre device"
	log "qemu: $QEMU_BIN has the spyre device"
}

# ---- the debug kernel (docs/debug-kernel.md) ---------------------------------------
# Symbols the debug kernel builds in that have no Kconfig prompt (only drivers
# select them): file:symbol. add_kconfig_prompts gives each one a prompt in the
# cached source tree; nothing else in Debian's tree is changed.
DEBUG_KCONFIG_PROMPTS="drivers/gpu/Kconfig:GPU_BUDDY drivers/gpu/drm/Kconfig:DRM_BUDDY
drivers/gpu/drm/Kconfig:DRM_SCHED drivers/gpu/drm/Kconfig:DRM_GEM_SHMEM_HELPER
drivers/gpu/drm/Kconfig:DRM_EXEC drivers/gpu/drm/Kconfig:DRM_GPUVM
drivers/base/Kconfig:WANT_DEV_COREDUMP"

# Rewrite the bare "bool"/"tristate" line of "config SYM" as one with a prompt.
# Idempotent: a file is rewritten only when that changes it (so Kconfig's
# mtime, and with it the build, stay put on a second run); then every symbol
# must have a prompt.
add_kconfig_prompts() {
	local src=$1 e f sym
	for e in $DEBUG_KCONFIG_PROMPTS; do
		f=$src/${e%%:*} sym=${e##*:}
		[ -f "$f" ] || die "debug kernel: $f missing in the source tree"
		awk -v sym="$sym" '
			/^(menu)?config / { on = ($2 == sym) }
			/^(choice|endchoice|menu|endmenu|if|endif|source|comment)([ \t]|$)/ { on = 0 }
			on && /^[ \t]*(bool|tristate)[ \t]*$/ {
				sub(/[ \t]*$/, "")
				$0 = $0 " \"" sym " (prompt added by spyre'"'"'s debug-kernel set-up)\""
			}
			{ print }' "$f" >"$f.spyre-tmp"
		if cmp -s "$f" "$f.spyre-tmp"; then rm -f "$f.spyre-tmp"; else mv "$f.spyre-tmp" "$f"; fi
		awk -v sym="$sym" '
			/^(menu)?config / { on = ($2 == sym) }
			/^(choice|endchoice|menu|endmenu|if|endif|source|comment)([ \t]|$)/ { on = 0 }
			on && /^[ \t]*(bool|tristate)[ \t]+"/ { ok = 1 }
			END { exit !ok }' "$f" || die "debug kernel: could not give $sym a prompt in $f"
	done
}

# Every line of the fragment must be in the final .config: "CONFIG_X=v" exactly,
# "# CONFIG_X is not set" as not =y/=m/=v. Dies naming the ones that are not.
check_debug_config() {
	local frag=$1 cfg=$2 line sym have missing=()
	while IFS= read -r line; do
		case "$line" in
		CONFIG_*=*)
			grep -qxF -- "$line" "$cfg" && continue
			sym=${line%%=*}
			have=$(grep -E "^$sym=|^# $sym is not set" "$cfg" || echo "absent (unmet dependency)")
			missing+=("$line  -- got: $have") ;;
		"# CONFIG_"*" is not set")
			sym=${line#\# }; sym=${sym%% *}
			have=$(grep -E "^$sym=" "$cfg" || true)
			[ -z "$have" ] || missing+=("$line  -- got: $have") ;;
		esac
	done <"$frag"
	if [ ${#missing[@]} -gt 0 ]; then
		printf '[spyre]   %s\n' "${missing[@]}" >&2
		die "debug kernel: ${#missing[@]} option(s) of $frag did not make it into $cfg (see above)"
	fi
}

step_debug_kernel() {
	local ver key deb tmp start=$SECONDS
	ver=$(kernel_deb_version)
	key="linux-source-6.12 $ver; config $( { cat "$DEBUG_KCONFIG"; echo "$DEBUG_KCONFIG_PROMPTS"; } |
		sha256sum | cut -c1-16)"
	if [ -f "$DEBUG_BZIMAGE" ] && [ "$(cat "$DEBUG_KBUILD/.spyre-key" 2>/dev/null)" = "$key" ]; then
		log "debug kernel: cached in $DEBUG_KBUILD ($key)"
		return
	fi
	need_root
	mkdir -p "$DEBUG_KCACHE"
	# The source tree: one per Debian version (a new version replaces it and
	# the build tree).
	if [ "$(cat "$DEBUG_KSRC/.spyre-source" 2>/dev/null)" != "$ver" ]; then
		deb=$(linux_source_deb "$ver")
		rm -rf "$DEBUG_KSRC" "$DEBUG_KBUILD" "$DEBUG_KCACHE/src.tmp"
		tmp=$DEBUG_KCACHE/src.tmp
		mkdir -p "$tmp"
		run_logged "debug kernel: extract linux-source-6.12 $ver" "$DEBUG_KCACHE/extract.log" bash -c "
			set -euo pipefail
			dpkg-deb --fsys-tarfile '$deb' | tar -xO --wildcards '*/linux-source-6.12.tar.xz' |
				tar -xJ -C '$tmp' --strip-components=1"
		echo "$ver" >"$tmp/.spyre-source"
		mv "$tmp" "$DEBUG_KSRC"
	fi
	add_kconfig_prompts "$DEBUG_KSRC"
	# The build tree (O=): a changed fragment re-merges the config and rebuilds
	# what it affects; the key is written only after a successful build.
	mkdir -p "$DEBUG_KBUILD"
	rm -f "$DEBUG_KBUILD/.spyre-key"
	run_logged "debug kernel: config (allnoconfig + $(basename "$DEBUG_KCONFIG"))" "$DEBUG_KCACHE/config.log" \
		bash -c "cd '$DEBUG_KSRC' && scripts/kconfig/merge_config.sh -n -O '$DEBUG_KBUILD' '$DEBUG_KCONFIG' &&
			make -s O='$DEBUG_KBUILD' olddefconfig"
	check_debug_config "$DEBUG_KCONFIG" "$DEBUG_KBUILD/.config"
	run_logged "debug kernel: build with -j$(nproc) (cold: 15-30 min on 2 cores)" "$DEBUG_KCACHE/build.log" \
		make -C "$DEBUG_KSRC" O="$DEBUG_KBUILD" -j"$(nproc)" all
	[ -f "$DEBUG_BZIMAGE" ] || die "debug kernel: no $DEBUG_BZIMAGE after the build"
	echo "$key" >"$DEBUG_KBUILD/.spyre-key"
	log "debug kernel: $(cat "$DEBUG_KBUILD/include/config/kernel.release") in $DEBUG_KBUILD ($((SECONDS - start)) s)"
}

# ---- the PyTorch device's Python environment (frameworks/pytorch) --------------------
# apt_install_missing WHAT LOG PACKAGE...: install the ones not installed.
apt_install_missing() {
	local what=$1 logf=$2 missing
	shift 2
	missing=$(missing_packages "$@")
	[ -n "$missing" ] || return 0
	need_root
	log "$what: installing $(echo $missing)"
	apt_update_once
	# shellcheck disable=SC2086
	run_logged "$what: apt-get install" "$logf" apt-get install -y --no-install-recommends $missing
}

# vpip LOG WHAT ARGS...: pip of the venv, without progress bars in its log.
vpip() {
	local logf=$1 what=$2
	shift 2
	run_logged "venv: $what" "$SPYRE_CACHE/$logf" \
		"$VENV/bin/python3" -m pip install --no-input --progress-bar off "$@"
}

step_venv() {
	local key torch_pin py start=$SECONDS
	apt_install_missing venv "$SPYRE_CACHE/apt-venv.log" "${VENV_PACKAGES[@]}"
	key=$(venv_key)
	if [ -x "$VENV/bin/python3" ] && [ "$(cat "$VENV/.spyre-key" 2>/dev/null)" = "$key" ]; then
		log "venv: cached in $VENV (key $key)"
		return
	fi
	need_root
	py=$(spyre_python)
	# torch alone first, exactly as pinned (a bare or other version would be a CUDA build of GBs)
	torch_pin=$(grep -xE 'torch==[0-9.]+' "$VENV_REQUIREMENTS") ||
		die "$VENV_REQUIREMENTS pins no torch==X.Y.Z"
	rm -rf "$VENV"
	run_logged "venv: $py -m venv $VENV" "$SPYRE_CACHE/venv-create.log" "$py" -m venv "$VENV"
	vpip venv-torch.log "$torch_pin (the CPU build on disk, 190 MB; ~1 min)" "$torch_pin"
	vpip venv-install.log "the rest of $(basename "$VENV_REQUIREMENTS"), $torch_pin again (~1.3 GB installed; 2-4 min)" \
		"$torch_pin" -r "$VENV_REQUIREMENTS"
	# the CPU build, and every installed distribution pinned in the file at its version
	"$VENV/bin/python3" - "$VENV_REQUIREMENTS" <<-'EOF' || die "venv: fix $VENV_REQUIREMENTS, then run again"
		import importlib.metadata as md, re, sys
		norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
		pins = {}
		for line in open(sys.argv[1]):
		    line = line.split("#")[0].strip()
		    if line:
		        name, ver = line.split("==")
		        pins[norm(name)] = ver
		bad = []
		for d in md.distributions():
		    name, ver = norm(d.metadata["Name"]), d.version
		    if name == "pip":
		        continue
		    if pins.get(name) != ver.split("+")[0]:
		        bad.append(f"{name}=={ver} (pinned: {pins.get(name, 'no')})")
		import torch
		if torch.version.cuda or not torch.__version__.endswith("+cpu"):
		    bad.append(f"torch {torch.__version__} is not the CPU build")
		for b in bad:
		    print("[spyre] venv: not as pinned:", b, file=sys.stderr)
		sys.exit(1 if bad else 0)
	EOF
	echo "$key" >"$VENV/.spyre-key.tmp"
	mv "$VENV/.spyre-key.tmp" "$VENV/.spyre-key"
	log "venv: $VENV ($(du -sm "$VENV" | cut -f1) MiB, key $key; $((SECONDS - start)) s)"
}

# ---- the guest's Python root filesystem (docs/guest-python.md) ----------------------
step_guest_python() {
	local key start=$SECONDS
	apt_install_missing "guest python" "$SPYRE_CACHE/apt-guest-python.log" "${GUEST_PYTHON_PACKAGES[@]}"
	key=$("$SPYRE_TOP/tools/vm/mkrootfs" --key)
	if [ -f "$GUEST_PYTHON_IMG" ] && [ "$(cat "$GUEST_PYTHON_CACHE/rootfs.key" 2>/dev/null)" = "$key" ]; then
		log "guest python: cached in $GUEST_PYTHON_IMG (key $key)"
		return
	fi
	need_root
	mkdir -p "$GUEST_PYTHON_CACHE"
	rm -f "$GUEST_PYTHON_CACHE/rootfs.key"
	run_logged "guest python: build the root filesystem image (~1.8 GB; about 1 min)" \
		"$GUEST_PYTHON_CACHE/build.log" "$SPYRE_TOP/tools/vm/mkrootfs" "$GUEST_PYTHON_IMG"
	echo "$key" >"$GUEST_PYTHON_CACHE/rootfs.key.tmp"
	mv "$GUEST_PYTHON_CACHE/rootfs.key.tmp" "$GUEST_PYTHON_CACHE/rootfs.key"
	log "guest python: $GUEST_PYTHON_IMG ($(du -m "$GUEST_PYTHON_IMG" | cut -f1) MiB on disk," \
		"key $key; $((SECONDS - start)) s)"
}

main() {
	local steps=() s
	dry_run=0
	for s in "$@"; do
		case "$s" in
		--dry-run) dry_run=1 ;;
		*) steps+=("$s") ;;
		esac
	done
	[ ${#steps[@]} -gt 0 ] || steps=(all)
	if [ "$dry_run" -eq 1 ]; then
		[ "${steps[*]}" = kver ] || die "--dry-run applies to the kver step only"
		step_kver
		return
	fi
	mkdir -p "$SPYRE_CACHE" 2>/dev/null || need_root
	for s in "${steps[@]}"; do
		case "$s" in
		packages) step_packages ;;
		kver) step_kver ;;
		kernel) step_kver; step_kernel ;;
		ksrc) step_kver; step_ksrc ;;
		qemu) step_qemu ;;
		debug-kernel) step_kver; step_debug_kernel ;;
		venv) step_venv ;;
		guest-python) step_venv; step_guest_python ;;
		all) step_packages; step_kver; step_kernel; step_ksrc; step_qemu ;;
		*) die "unknown step '$s' (packages|kver|kernel|ksrc|qemu|debug-kernel|venv|guest-python|all)" ;;
		esac
	done
}
main "$@"
