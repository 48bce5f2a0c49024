# spyre: top-level build. `make demo` and `make check` do everything, set-up included.
# Run `make help` for the targets.

include tools/versions.conf

SPYRE_CACHE ?= /var/cache/spyre
export SPYRE_CACHE
# The kernel ABI: pinned in versions.conf (SPYRE_KVER overrides it), or what the
# set-up resolved it to when Debian no longer offers it (tools/setup/common.sh).
KVER_PINNED := $(or $(SPYRE_KVER),$(KVER))
KVER := $(or $(shell head -n 1 '$(SPYRE_CACHE)/kver.$(KVER_PINNED)' 2>/dev/null),$(KVER_PINNED))
KDIR ?= /lib/modules/$(KVER)/build
# The debug kernel's build tree (tools/setup/setup.sh debug-kernel) and the
# directory its spyre.ko is built in, apart from the release build's driver/*.o.
DEBUG_KBUILD := $(SPYRE_CACHE)/linux-debug/build
DBG_MOD := build/dbg-module
KSRC := $(SPYRE_CACHE)/linux-$(KVER)
KSELFTEST := $(KSRC)/tools/testing/selftests
SPYRE_QEMU_CACHE ?= $(SPYRE_CACHE)/qemu
QEMU_BIN := $(SPYRE_QEMU_CACHE)/build/qemu-system-x86_64

B := build
CC ?= gcc
CFLAGS ?= -O2 -g
WARNFLAGS := -Wall -Wextra -Wshadow -Wformat=2 -Wstrict-prototypes -Wmissing-prototypes
DRM_CFLAGS = $(shell pkg-config --cflags libdrm)
DRM_LIBS = $(shell pkg-config --libs libdrm)
UDEV_LIBS = $(shell pkg-config --libs libudev)

LIBSPYRE_VERSION := 0.11.0
LIBSPYRE_SONAME := libspyre.so.0
LIB_CFLAGS := $(CFLAGS) $(WARNFLAGS) -fPIC -fvisibility=hidden -Ilibspyre/include -Ilibspyre/src -Iuapi -Iisa $(DRM_CFLAGS)
APP_CFLAGS := $(CFLAGS) $(WARNFLAGS) -Ilibspyre/include -Iuapi $(DRM_CFLAGS)

# Two wings (docs/libspyre.md): the runtime (device, memory, programs,
# streams, tracing) and the kernel library, which sees the runtime only
# through the public spyre.h; libspyre/src/common.h is what both share.
LIB_SRCS := $(wildcard libspyre/src/runtime/*.c libspyre/src/kernels/*.c)
LIB_OBJS := $(patsubst libspyre/src/%.c,$(B)/libspyre/%.o,$(LIB_SRCS))
# The ISA library (isa/isa.mk) is inside libspyre: its position-independent,
# hidden objects, ISA_PIC_LIB in the .so's link (what libspyre uses: the
# container parser, the kernel library's builder and dtype conversions) and
# every one of them in libspyre.a.
LIB_HDRS := libspyre/include/spyre.h libspyre/include/spyre_kernels.h libspyre/src/common.h \
	libspyre/src/runtime/internal.h libspyre/src/kernels/kern.h libspyre/src/kernels/coll.h libspyre/src/kernels/coll_rank.h uapi/spyre_accel.h uapi/spyre_hw.h uapi/spyre_isa.h $(wildcard isa/*.h)

TOOLS := $(B)/bin/spyre-smi $(B)/bin/spyre-run $(B)/bin/spyre-trace-check $(B)/bin/spyre-coredump
SELFTESTS := $(patsubst selftests/%.c,$(B)/selftests/%,$(wildcard selftests/*_test.c)) \
	$(B)/selftests/spyre_runtime_test $(B)/selftests/spyre_kcache_test $(B)/selftests/spyre_graph_test \
	$(B)/selftests/spyre_peer_test $(B)/selftests/spyre_coll_test $(B)/selftests/spyre_comm_rank_test
# The qtest client speaks QMP through util/qmp.c (the one QMP client, shared
# with tools/vm/migrate.c), which parses with util/json.c.
QTEST_LIB := qemu-device/tests/qtest-client.c qemu-device/tests/spyre-dev.c util/qmp.c util/json.c
QTEST_HDRS := qemu-device/tests/qtest-client.h qemu-device/tests/spyre-dev.h uapi/spyre_hw.h util/qmp.h util/json.h
QTESTS := $(patsubst qemu-device/tests/%.c,$(B)/tests/%,$(wildcard qemu-device/tests/*-test.c))
HOST_TESTS := $(QTESTS) $(B)/tests/uapi-abi-test $(B)/tests/api-errors-test $(B)/tests/patch-test \
	$(B)/tests/man-pages-test $(B)/tests/kver-fallback-test $(B)/tests/install-test \
	$(B)/tests/docs-figures-test $(B)/tests/props-help-test

.PHONY: serve all setup debug-kernel guest-python module module-debug lib tools selftests host-tests bench bench-run demo check boot-soak lint vm-shell clean help install

# module-debug only where the debug kernel is built (`make check` builds both).
all: module lib tools selftests host-tests $(if $(wildcard $(DEBUG_KBUILD)/.spyre-key),module-debug)

help:
	@echo "make demo        set up if needed, build, boot a VM with a spyre card, run spyre-smi"
	@echo "make check       set up if needed, build, run host and VM tests"
	@echo "make serve       set up if needed, build, boot a VM running spyre-serve on a card, port 8000 on 127.0.0.1 (SPYRE_MODEL=dir)"
	@echo "make setup       install packages, Linux $(KVER), QEMU with the device (idempotent)"
	@echo "make all         build spyre.ko, libspyre, tools, selftests, host tests"
	@echo "make debug-kernel  build the KASAN/lockdep/kmemleak kernel make check boots (cached)"
	@echo "make guest-python  the venv (PyTorch 2.13, frameworks/pytorch/requirements.txt) and the guest's Python root filesystem (tools/vm/run --python; cached)"
	@echo "make module-debug  spyre.ko for the debug kernel, in $(DBG_MOD)"
	@echo "make bench       benchmarks (ratios against a same-run baseline): COPY bandwidth vs memcpy, engine matmul vs OpenBLAS, launch paths, kernel strategies, model dispatch a/b/c/d (the tiny model, and the 1 B model: make bench-1b, which ends with make bench-1b-speed: the emulator's decode steps per wall second at engine-threads 1 and 2), serving (make bench-serve: spyre-serve under serve-bench, CPU runner on the host and the card in timed mode)"
	@echo "make lint        checkpatch --strict, sparse (C=1), W=1 and kernel-doc on the driver and uapi"
	@echo "make vm-shell    interactive shell in a VM with one spyre card"
	@echo "make boot-soak   boot each kind of test VM N times (N=100 KINDS=... TCG=single|multi), report the failure rate"

setup:
	tools/setup/setup.sh all

debug-kernel:
	tools/setup/setup.sh debug-kernel

guest-python:
	tools/setup/setup.sh guest-python

# ---- the ISA library and the compute engine (plain C; their own rules) ----------
include isa/isa.mk
include qemu-device/engine/engine.mk
include model/model.mk
include serve/serve.mk
include frameworks/pytorch/pytorch.mk

# ---- kernel module -------------------------------------------------------
module:
	$(MAKE) -C $(KDIR) M=$(CURDIR) W=1 modules

# The same sources, built the normal way against the debug kernel's tree, in a
# copy (content-synced) so the two builds never share objects. With -g, so a
# report's spyre_x+0x12/0x40 resolves to a line:
#   $(SPYRE_CACHE)/linux-debug/src/scripts/faddr2line $(DBG_MOD)/driver/spyre.ko spyre_x+0x12/0x40
module-debug:
	@test -f '$(DEBUG_KBUILD)/.spyre-key' || \
		{ echo "no debug kernel in $(DEBUG_KBUILD): run 'make debug-kernel'" >&2; exit 1; }
	tools/setup/sync-module-src $(DBG_MOD)
	$(MAKE) -C $(DEBUG_KBUILD) M=$(CURDIR)/$(DBG_MOD) W=1 KCFLAGS=-g modules
	@# Kbuild found it current for this tree: tools/vm/mkinitramfs refuses a module older than the tree's last build
	@touch $(DBG_MOD)/driver/spyre.ko

# ---- libspyre --------------------------------------------------------------
lib: $(B)/lib/libspyre.so $(B)/lib/libspyre.a $(B)/lib/pkgconfig/libspyre.pc

$(B)/libspyre/%.o: libspyre/src/%.c $(LIB_HDRS)
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) -c $< -o $@

$(B)/lib/libspyre.so.$(LIBSPYRE_VERSION): $(LIB_OBJS) $(ISA_PIC_LIB) libspyre/libspyre.map
	@mkdir -p $(@D)
	$(CC) -shared -Wl,-soname,$(LIBSPYRE_SONAME) -Wl,--version-script=libspyre/libspyre.map \
		-Wl,--no-undefined -o $@ $(LIB_OBJS) $(ISA_PIC_LIB) $(DRM_LIBS) $(UDEV_LIBS) -lm

$(B)/lib/libspyre.so: $(B)/lib/libspyre.so.$(LIBSPYRE_VERSION)
	ln -sf libspyre.so.$(LIBSPYRE_VERSION) $(B)/lib/$(LIBSPYRE_SONAME)
	ln -sf $(LIBSPYRE_SONAME) $@

$(B)/lib/libspyre.a: $(LIB_OBJS) $(ISA_PIC_OBJS)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(B)/lib/pkgconfig/libspyre.pc: libspyre/libspyre.pc.in
	@mkdir -p $(@D)
	sed -e 's|@PREFIX@|/usr/local|' -e 's|@VERSION@|$(LIBSPYRE_VERSION)|' $< >$@

# ---- tools -----------------------------------------------------------------
tools: $(TOOLS)

$(B)/bin/spyre-smi: tools/spyre-smi/spyre-smi.c $(B)/lib/libspyre.so libspyre/include/spyre.h
	@mkdir -p $(@D)
	$(CC) $(APP_CFLAGS) $< -o $@ -L$(B)/lib -lspyre -Wl,-rpath,'$$ORIGIN/../lib'

$(B)/bin/spyre-run: tools/spyre-run/spyre-run.c $(B)/lib/libspyre.so libspyre/include/spyre.h $(ISA_LIB)
	@mkdir -p $(@D)
	$(CC) $(APP_CFLAGS) -I$(ISA_DIR) $< -o $@ -L$(B)/lib -lspyre -Wl,-rpath,'$$ORIGIN/../lib' \
		$(ISA_LIB) -lm

# Decodes a device coredump (docs/coredump.md).
$(B)/bin/spyre-coredump: tools/spyre-coredump/spyre-coredump.c uapi/spyre_devcoredump.h uapi/spyre_hw.h \
		uapi/spyre_accel.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(WARNFLAGS) -Iuapi $(DRM_CFLAGS) $< -o $@

# Checks a trace of libspyre (spyre_trace_start()) with the strict JSON parser (util/).
TRACE_CHECK_HDRS := tools/spyre-trace-check/trace-check.h util/json.h
$(B)/bin/spyre-trace-check: tools/spyre-trace-check/spyre-trace-check.c tools/spyre-trace-check/trace-check.c \
		$(TRACE_CHECK_HDRS) $(B)/util/json.o
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(WARNFLAGS) -Itools/spyre-trace-check -Iutil $< tools/spyre-trace-check/trace-check.c \
		-o $@ $(B)/util/json.o -lm

# Test helpers, not installed (build/bin goes into the VM): values out of JSON
# with the strict parser (util/), for guest tests (selftests/guest/spyre-smi-test).
tools: $(B)/bin/spyre-json-get
$(B)/bin/spyre-json-get: tools/tests/json-get.c util/json.c util/json.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -std=c11 $(WARNFLAGS) -D_POSIX_C_SOURCE=200809L -Iutil $< util/json.c -o $@ -lm
# A workload with known memory, utilization and one fault, for the same test.
tools: $(B)/bin/spyre-busy-load
$(B)/bin/spyre-busy-load: tools/tests/busy-load.c selftests/spyre_test.h uapi/spyre_accel.h uapi/spyre_hw.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(WARNFLAGS) -Wno-format-nonliteral -D_GNU_SOURCE -Iselftests -Iuapi $(DRM_CFLAGS) $< -o $@

# A copy workload checking every byte, for the live migration test (tools/vm/migrate).
tools: $(B)/bin/spyre-copy-loop
$(B)/bin/spyre-copy-loop: tools/tests/copy-loop.c $(B)/lib/libspyre.so libspyre/include/spyre.h
	@mkdir -p $(@D)
	$(CC) $(APP_CFLAGS) $< -o $@ -L$(B)/lib -lspyre -Wl,-rpath,'$$ORIGIN/../lib'

# The VM runner's live migration launcher (tools/vm/run --migrate), a host
# program kept out of build/bin, which goes into the VM.
tools: $(B)/tools/vm/migrate
$(B)/tools/vm/migrate: tools/vm/migrate.c util/qmp.c util/qmp.h util/json.c util/json.h util/jsonw.c util/jsonw.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(WARNFLAGS) -Iutil $< util/qmp.c util/json.c util/jsonw.c -o $@ -lm

# Its host test: this program stands in for QEMU (tools/tests/vm-migrate-test.c).
host-tests: $(B)/tests/vm-migrate-test
$(B)/tests/vm-migrate-test: tools/tests/vm-migrate-test.c tests/tap.h $(B)/tools/vm/migrate
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(WARNFLAGS) $< -o $@

# ---- VM selftests (kselftest harness from linux-source-6.12) ----------------
selftests: $(SELFTESTS)

$(B)/selftests/%: selftests/%.c selftests/spyre_test.h uapi/spyre_accel.h uapi/spyre_hw.h uapi/spyre_devcoredump.h \
		$(ISA_LIB)
	@test -f $(KSELFTEST)/kselftest_harness.h || { echo "kselftest harness missing: run 'make setup'"; exit 1; }
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Wall -Werror -D_GNU_SOURCE -I$(KSELFTEST) -Iuapi -I$(ISA_DIR) $(DRM_CFLAGS) \
		$< -o $@ $(ISA_LIB) -lpthread -lm

# libspyre's own tests run in the VM too (they need cards), with the harness.
$(B)/selftests/spyre_runtime_test: libspyre/tests/spyre_runtime_test.c libspyre/tests/spyre_inject.h $(B)/lib/libspyre.so \
		libspyre/include/spyre.h $(ISA_LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Wall -Werror -D_GNU_SOURCE -I$(KSELFTEST) -Ilibspyre/include -Iuapi -I$(ISA_DIR) \
		$(DRM_CFLAGS) $< -o $@ -L$(B)/lib -lspyre -Wl,-rpath,'$$ORIGIN/../lib' $(ISA_LIB) -lpthread -lm

# Launch graphs on real cards: capture, replay, update, errors, threads.
$(B)/selftests/spyre_graph_test: libspyre/tests/spyre_graph_test.c libspyre/tests/spyre_inject.h $(B)/lib/libspyre.so \
		libspyre/include/spyre.h libspyre/include/spyre_kernels.h $(ISA_LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Wall -Werror -D_GNU_SOURCE -I$(KSELFTEST) -Ilibspyre/include -Iuapi -I$(ISA_DIR) \
		$(DRM_CFLAGS) $< -o $@ -L$(B)/lib -lspyre -Wl,-rpath,'$$ORIGIN/../lib' $(ISA_LIB) -lpthread -lm

# The kernel library and its cache on real cards, from several threads and streams.
$(B)/selftests/spyre_kcache_test: libspyre/tests/spyre_kcache_test.c $(B)/lib/libspyre.so \
		libspyre/include/spyre.h libspyre/include/spyre_kernels.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Wall -Werror -D_GNU_SOURCE -I$(KSELFTEST) -Ilibspyre/include -Iuapi \
		$(DRM_CFLAGS) $< -o $@ -L$(B)/lib -lspyre -Wl,-rpath,'$$ORIGIN/../lib' -lpthread -lm

# Peer-to-peer copies between the VM's two cards.
$(B)/selftests/spyre_peer_test: libspyre/tests/spyre_peer_test.c $(B)/lib/libspyre.so \
		libspyre/include/spyre.h uapi/spyre_hw.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Wall -Werror -D_GNU_SOURCE -I$(KSELFTEST) -Ilibspyre/include -Iuapi \
		$(DRM_CFLAGS) $< -o $@ -L$(B)/lib -lspyre -Wl,-rpath,'$$ORIGIN/../lib' -lpthread -lm

# Collectives over the VM's cards against a CPU reference.
$(B)/selftests/spyre_coll_test: libspyre/tests/spyre_coll_test.c libspyre/tests/coll-ref.h libspyre/tests/spyre_inject.h $(B)/lib/libspyre.so \
		libspyre/include/spyre.h libspyre/include/spyre_kernels.h $(ISA_LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Wall -Werror -D_GNU_SOURCE -I$(KSELFTEST) -Ilibspyre/include -Iuapi -I$(ISA_DIR) \
		$(DRM_CFLAGS) $< -o $@ -L$(B)/lib -lspyre -Wl,-rpath,'$$ORIGIN/../lib' $(ISA_LIB) -lpthread -lm

# Communicators of one card per process: a forked process per card.
$(B)/selftests/spyre_comm_rank_test: libspyre/tests/spyre_comm_rank_test.c libspyre/tests/coll-ref.h \
		$(B)/lib/libspyre.so libspyre/include/spyre.h libspyre/include/spyre_kernels.h $(ISA_LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Wall -Werror -D_GNU_SOURCE -I$(KSELFTEST) -Ilibspyre/include -Iuapi -I$(ISA_DIR) \
		$(DRM_CFLAGS) $< -o $@ -L$(B)/lib -lspyre -Wl,-rpath,'$$ORIGIN/../lib' $(ISA_LIB) -lpthread -lm

# ---- the kernel library's host tests: generated programs on the engine ---------
KERN_TESTS := $(patsubst libspyre/tests/kern/%.c,$(B)/tests/%,$(wildcard libspyre/tests/kern/kern-*-test.c))
host-tests: $(KERN_TESTS)
$(KERN_TESTS): $(B)/tests/%: libspyre/tests/kern/%.c libspyre/tests/kern/harness.c libspyre/tests/kern/harness.h \
		$(B)/lib/libspyre.a $(ENGINE_LIB) $(ISA_LIB) $(ENGINE_TEST_LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(WARNFLAGS) -D_GNU_SOURCE -Ilibspyre/include -Iuapi -I$(ENGINE_DIR) -I$(ISA_DIR) \
		-I$(ENGINE_DIR)/tests -Ilibspyre/tests/kern $(KERN_EXTRA) $< libspyre/tests/kern/harness.c $(ENGINE_TEST_LIB) \
		$(B)/lib/libspyre.a $(ENGINE_LIB) $(ISA_LIB) $(DRM_LIBS) $(UDEV_LIBS) -lpthread -lm -o $@
# the paged kernels check against the model's CPU reference (model/ref.c: one home of attention)
$(B)/tests/kern-paged-test: KERN_EXTRA := -Imodel -Iutil model/ref.c model/config.c util/json.c
$(B)/tests/kern-paged-test: model/ref.c model/ref.h model/config.c util/json.c

# ---- host tests --------------------------------------------------------------
host-tests: $(HOST_TESTS)

# The host tests in C (and the qtest client) are built on the harness tests/tap.h.
$(QTESTS) $(B)/bench/copy-bw $(B)/tests/uapi-abi-test $(B)/tests/api-errors-test \
	$(B)/tests/patch-test $(B)/tests/stream-race-test $(B)/tests/stream-race-tsan-test: tests/tap.h

$(QTESTS): $(B)/tests/%: qemu-device/tests/%.c $(QTEST_LIB) $(QTEST_HDRS) $(ISA_LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(WARNFLAGS) -D_GNU_SOURCE -Iuapi -Iqemu-device/tests -Iutil -I$(ISA_DIR) \
		$< $(QTEST_LIB) -o $@ $(ISA_LIB) -lm

# The uapi headers are C++-clean too (no C++ keywords or alternative tokens).
$(B)/tests/uapi-abi-test: uapi/tests/uapi-abi-test.c uapi/spyre_accel.h uapi/spyre_hw.h \
		uapi/spyre_devcoredump.h uapi/spyre_isa.h
	@mkdir -p $(@D)
	printf '#include "%s"\n' spyre_accel.h spyre_hw.h spyre_isa.h spyre_devcoredump.h | \
		$(CXX) -std=c++11 -Wall -Wextra -pedantic -Werror -fsyntax-only -Iuapi $(DRM_CFLAGS) -x c++ -
	$(CC) $(CFLAGS) $(WARNFLAGS) -Iuapi $(DRM_CFLAGS) $< -o $@

$(B)/tests/api-errors-test: libspyre/tests/api-errors-test.c $(B)/lib/libspyre.so libspyre/include/spyre.h
	@mkdir -p $(@D)
	$(CC) $(APP_CFLAGS) $< -o $@ -L$(B)/lib -lspyre -Wl,-rpath,'$$ORIGIN/../lib' -lpthread

$(B)/tests/patch-test: libspyre/tests/patch-test.c $(B)/lib/libspyre.a $(ISA_LIB) $(LIB_HDRS)
	@mkdir -p $(@D)
	$(CC) $(APP_CFLAGS) -Ilibspyre/src -I$(ISA_DIR) $< -o $@ $(B)/lib/libspyre.a $(ISA_LIB) \
		$(DRM_LIBS) $(UDEV_LIBS) -lpthread -lm

$(B)/tests/man-pages-test: libspyre/tests/man-pages-test.sh
	@mkdir -p $(@D)
	install -m 0755 $< $@

$(B)/tests/kver-fallback-test: tools/setup/tests/kver-fallback-test.sh
	@mkdir -p $(@D)
	install -m 0755 $< $@

$(B)/tests/install-test: libspyre/tests/install-test.sh
	@mkdir -p $(@D)
	install -m 0755 $< $@

$(B)/tests/docs-figures-test: model/tests/docs-figures-test.sh
	@mkdir -p $(@D)
	install -m 0755 $< $@

$(B)/tests/props-help-test: qemu-device/tests/props-help-test.sh
	@mkdir -p $(@D)
	install -m 0755 $< $@

# ---- libspyre under sanitizers, linked into the test (not libspyre.so) --------
# stream-race-test: stream lifetimes against device-wide walks over a fake
# driver, on the host (AddressSanitizer; the -tsan build: ThreadSanitizer).
# spyre_runtime_asan_test: the runtime test in the VM under AddressSanitizer
# (the initramfs takes libasan with each binary's ldd closure).
SAN_CFLAGS_asan := -fsanitize=address -fno-omit-frame-pointer
SAN_CFLAGS_tsan := -fsanitize=thread
LIB_ASAN_OBJS := $(patsubst libspyre/src/%.c,$(B)/libspyre-asan/%.o,$(LIB_SRCS))
LIB_TSAN_OBJS := $(patsubst libspyre/src/%.c,$(B)/libspyre-tsan/%.o,$(LIB_SRCS))
LIB_SAN_OBJS_asan := $(LIB_ASAN_OBJS)
LIB_SAN_OBJS_tsan := $(LIB_TSAN_OBJS)

host-tests: $(B)/tests/stream-race-test $(B)/tests/stream-race-tsan-test
selftests: $(B)/selftests/spyre_runtime_asan_test $(B)/selftests/spyre_graph_asan_test \
	$(B)/selftests/spyre_graph_tsan_test

$(B)/libspyre-asan/%.o: libspyre/src/%.c $(LIB_HDRS)
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) $(SAN_CFLAGS_asan) -c $< -o $@

$(B)/libspyre-tsan/%.o: libspyre/src/%.c $(LIB_HDRS)
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) $(SAN_CFLAGS_tsan) -c $< -o $@

$(B)/tests/stream-race-test: libspyre/tests/stream-race-test.c libspyre/tests/fake-udev.h $(LIB_ASAN_OBJS) $(LIB_HDRS) $(ISA_LIB)
	@mkdir -p $(@D)
	$(CC) $(APP_CFLAGS) $(SAN_CFLAGS_asan) -D_GNU_SOURCE -I$(ISA_DIR) $< $(LIB_ASAN_OBJS) -o $@ \
		$(ISA_LIB) -lpthread -lm

$(B)/tests/stream-race-tsan-test: libspyre/tests/stream-race-test.c libspyre/tests/fake-udev.h $(LIB_TSAN_OBJS) $(LIB_HDRS) $(ISA_LIB)
	@mkdir -p $(@D)
	$(CC) $(APP_CFLAGS) $(SAN_CFLAGS_tsan) -D_GNU_SOURCE -I$(ISA_DIR) $< $(LIB_TSAN_OBJS) -o $@ \
		$(ISA_LIB) -lpthread -lm

# libspyre's traces over a fake driver, checked as spyre-trace-check does (-tsan: ThreadSanitizer).
TRACE_TEST_SRCS := tools/spyre-trace-check/trace-check.c util/json.c
host-tests: $(B)/tests/trace-test $(B)/tests/trace-tsan-test
$(B)/tests/trace-test: libspyre/tests/trace-test.c libspyre/tests/fake-udev.h $(LIB_ASAN_OBJS) $(LIB_HDRS) $(ISA_LIB) $(TRACE_TEST_SRCS) \
		$(TRACE_CHECK_HDRS) tests/tap.h
	@mkdir -p $(@D)
	$(CC) $(APP_CFLAGS) $(SAN_CFLAGS_asan) -D_GNU_SOURCE -I$(ISA_DIR) -Itools/spyre-trace-check -Iutil $< \
		$(TRACE_TEST_SRCS) $(LIB_ASAN_OBJS) -o $@ $(ISA_LIB) -lpthread -lm

$(B)/tests/trace-tsan-test: libspyre/tests/trace-test.c libspyre/tests/fake-udev.h $(LIB_TSAN_OBJS) $(LIB_HDRS) $(ISA_LIB) $(TRACE_TEST_SRCS) \
		$(TRACE_CHECK_HDRS) tests/tap.h
	@mkdir -p $(@D)
	$(CC) $(APP_CFLAGS) $(SAN_CFLAGS_tsan) -D_GNU_SOURCE -I$(ISA_DIR) -Itools/spyre-trace-check -Iutil $< \
		$(TRACE_TEST_SRCS) $(LIB_TSAN_OBJS) -o $@ $(ISA_LIB) -lpthread -lm

$(B)/selftests/spyre_runtime_asan_test: libspyre/tests/spyre_runtime_test.c libspyre/tests/spyre_inject.h $(LIB_ASAN_OBJS) \
		libspyre/include/spyre.h $(ISA_LIB)
	@test -f $(KSELFTEST)/kselftest_harness.h || { echo "kselftest harness missing: run 'make setup'"; exit 1; }
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(SAN_CFLAGS_asan) -Wall -Werror -D_GNU_SOURCE -I$(KSELFTEST) -Ilibspyre/include -Iuapi \
		-I$(ISA_DIR) $(DRM_CFLAGS) $< $(LIB_ASAN_OBJS) -o $@ $(ISA_LIB) $(DRM_LIBS) $(UDEV_LIBS) \
		-lpthread -lm

# The graph test in the VM under AddressSanitizer and ThreadSanitizer.
$(B)/selftests/spyre_graph_%san_test: libspyre/tests/spyre_graph_test.c libspyre/tests/spyre_inject.h $(LIB_ASAN_OBJS) $(LIB_TSAN_OBJS) \
		libspyre/include/spyre.h libspyre/include/spyre_kernels.h $(ISA_LIB)
	@test -f $(KSELFTEST)/kselftest_harness.h || { echo "kselftest harness missing: run 'make setup'"; exit 1; }
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(SAN_CFLAGS_$*san) -Wall -Werror -D_GNU_SOURCE -I$(KSELFTEST) -Ilibspyre/include -Iuapi \
		-I$(ISA_DIR) $(DRM_CFLAGS) $< $(LIB_SAN_OBJS_$*san) -o $@ $(ISA_LIB) \
		$(DRM_LIBS) $(UDEV_LIBS) -lpthread -lm

# The command-line tools' host test (arguments, no card, assembler limits).
host-tests: $(B)/tests/tools-cli-test

$(B)/tests/tools-cli-test: tools/tests/cli-test.sh
	@mkdir -p $(@D)
	install -m 0755 $< $@

# ---- benchmarks (not tests: they print same-run ratios) -----------------------
BENCHES := $(B)/bench/copy-bw $(B)/bench/launch-bench $(B)/bench/dma-bench $(B)/bench/p2p-bench $(B)/bench/coll-bench

$(B)/bench/copy-bw: bench/copy-bw.c $(QTEST_LIB) $(QTEST_HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(WARNFLAGS) -D_GNU_SOURCE -Iuapi -Iqemu-device/tests -Iutil $< $(QTEST_LIB) -o $@ -lm

$(B)/bench/launch-bench: bench/launch-bench.c $(B)/lib/libspyre.so libspyre/include/spyre.h $(ISA_LIB)
	@mkdir -p $(@D)
	$(CC) $(APP_CFLAGS) -I$(ISA_DIR) $< -o $@ -L$(B)/lib -lspyre -Wl,-rpath,'$$ORIGIN/../lib' \
		$(ISA_LIB) $(DRM_LIBS) -lm

# spyre_memcpy through the whole stack (in the VM)
$(B)/bench/dma-bench: bench/dma-bench.c bench/bench-vm.h $(B)/lib/libspyre.so libspyre/include/spyre.h
	@mkdir -p $(@D)
	$(CC) $(APP_CFLAGS) $< -o $@ -L$(B)/lib -lspyre -Wl,-rpath,'$$ORIGIN/../lib' $(DRM_LIBS) -lm

$(B)/bench/p2p-bench: bench/p2p-bench.c bench/bench-vm.h $(B)/lib/libspyre.so libspyre/include/spyre.h
	@mkdir -p $(@D)
	$(CC) $(APP_CFLAGS) $< -o $@ -L$(B)/lib -lspyre -Wl,-rpath,'$$ORIGIN/../lib' $(DRM_LIBS) -lm

$(B)/bench/coll-bench: bench/coll-bench.c bench/bench-vm.h $(B)/lib/libspyre.so libspyre/include/spyre.h libspyre/include/spyre_kernels.h
	@mkdir -p $(@D)
	$(CC) $(APP_CFLAGS) $< -o $@ -L$(B)/lib -lspyre -Wl,-rpath,'$$ORIGIN/../lib' $(DRM_LIBS) -lm

# The kernel library's strategies in modeled device time (host: the engine runs them)
$(B)/bench/kernels-bench: bench/kernels-bench.c $(B)/lib/libspyre.a $(ENGINE_LIB) $(ISA_LIB) $(ENGINE_TEST_LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(WARNFLAGS) -D_GNU_SOURCE -Ilibspyre/include -Iuapi -I$(ENGINE_DIR) -I$(ISA_DIR) \
		-I$(ENGINE_DIR)/tests $< $(ENGINE_TEST_LIB) $(B)/lib/libspyre.a $(ENGINE_LIB) $(ISA_LIB) \
		$(DRM_LIBS) $(UDEV_LIBS) -lpthread -lm -o $@
BENCHES += $(B)/bench/kernels-bench

# The serving client with `vllm bench serve`'s metrics (docs/serve.md, "serve-bench"):
# plain loopback sockets (serve/tests/http-client.h), the SSE chunks parsed with util/json.c
$(B)/bench/serve-bench: bench/serve-bench.c serve/tests/http-client.h util/json.c util/json.h
	@mkdir -p $(@D)
	$(CC) $(SERVE_CFLAGS) -Iserve/tests $< util/json.c -o $@ -lpthread -lm
BENCHES += $(B)/bench/serve-bench

$(B)/bench/serve-bench.sh: bench/serve-bench.sh
	@mkdir -p $(@D)
	install -m 0755 $< $@
BENCHES += $(B)/bench/serve-bench.sh

# Tensor parallel decode, --tp 1, 2, 4 (docs/model.md, "Tensor parallel"; run in the VM by bench-run)
$(B)/bench/tp-bench.sh: bench/tp-bench.sh
	@mkdir -p $(@D)
	install -m 0755 $< $@
BENCHES += $(B)/bench/tp-bench.sh

# Its host test: spyre-serve (CPU runner, tiny model) on a free port, 8 prompts at 1 and 4
host-tests: $(B)/tests/serve-bench-test $(B)/bench/serve-bench
$(B)/tests/serve-bench-test: serve/tests/serve-bench-test.sh $(B)/bench/serve-bench $(B)/bin/spyre-serve \
		$(B)/bin/spyre-json-get
	@mkdir -p $(@D)
	install -m 0755 $< $@

# make bench-serve: spyre-serve under serve-bench (bench/serve-bench.sh: the levels 1, 4, 16 and 32
# in flight, SERVE_BENCH_PROMPTS prompts of SERVE_BENCH_IN tokens in, SERVE_BENCH_OUT out; the table,
# the engine's steps, and output throughput c16 / c1): on the host's CPU runner, then on the card in
# the VM in timed mode (docs/serve.md, "serve-bench"), server and client sharing the guest's one CPU,
# with launch graphs (the default) and without (--no-graphs).
SERVE_BENCH_PROMPTS ?= 64
SERVE_BENCH_CARD_PROMPTS ?= 256
SERVE_BENCH_IN ?= 32
SERVE_BENCH_OUT ?= 32
.PHONY: bench-serve
bench-serve: $(B)/bin/spyre-serve $(B)/bench/serve-bench $(B)/bench/serve-bench.sh $(B)/bin/spyre-json-get
	@mkdir -p $(B)/bench-out
	@echo "== serving: spyre-serve (CPU runner, tiny model) under serve-bench (host)"
	SERVE_BENCH_PROMPTS=$(SERVE_BENCH_PROMPTS) SERVE_BENCH_IN=$(SERVE_BENCH_IN) SERVE_BENCH_OUT=$(SERVE_BENCH_OUT) \
		$(B)/bench/serve-bench.sh $(B)/bench-out/serve-cpu
	@echo "== serving: spyre-serve on the card (tiny model, fp32) under serve-bench (in the VM, timed)"
	tools/vm/run -q --timed --timeout 1800 --copy $(B)/bench --copy model/configs/tiny \
		--out $(B)/bench-out/serve-card--timed.out -- env SERVE_BENCH_PROMPTS=$(SERVE_BENCH_CARD_PROMPTS) \
		SERVE_BENCH_IN=$(SERVE_BENCH_IN) SERVE_BENCH_OUT=$(SERVE_BENCH_OUT) /spyre/bench/serve-bench.sh /tmp/serve \
		--runner card --tokenizer /spyre/tiny/tokenizer.json
	tr -d '\r' <$(B)/bench-out/serve-card--timed.out
	@echo "== serving: the same with every step launched one by one (--no-graphs)"
	tools/vm/run -q --timed --timeout 1800 --copy $(B)/bench --copy model/configs/tiny \
		--out $(B)/bench-out/serve-card-nographs--timed.out -- env SERVE_BENCH_PROMPTS=$(SERVE_BENCH_CARD_PROMPTS) \
		SERVE_BENCH_IN=$(SERVE_BENCH_IN) SERVE_BENCH_OUT=$(SERVE_BENCH_OUT) /spyre/bench/serve-bench.sh /tmp/serve \
		--runner card --no-graphs --tokenizer /spyre/tiny/tokenizer.json
	tr -d '\r' <$(B)/bench-out/serve-card-nographs--timed.out

# make bench-tp: tensor parallel decode over 1, 2 and 4 identical cards in the VM in timed mode
# (bench/tp-bench.sh: the tiny model, model/configs/small-gqa and gqa-100m; decode time per token
# and the busiest card's modeled time as ratios to one card; every --tp's tokens equal one card's)
.PHONY: bench-tp
bench-tp: $(B)/bin/spyre-generate $(B)/bench/tp-bench.sh
	@mkdir -p $(B)/bench-out
	@echo "== tensor parallel: spyre-generate --tp 1, 2, 4 (fp16, dispatch c, 32 tokens; in the VM, timed, 4 cards)"
	tools/vm/run -q --timed --timeout 2400 --devices 4 --copy $(B)/bench --copy model/configs/small-gqa \
		--copy model/configs/gqa-100m --out $(B)/bench-out/tp--timed.out -- /spyre/bench/tp-bench.sh
	tr -d '\r' <$(B)/bench-out/tp--timed.out

# make bench-1b: the 1 B model (model/configs/granite-1b, fp16, a 512-token prompt drawn from the
# seed) through dispatch a, b, c and d in the VM in timed mode, its tokens against the CPU
# reference run on the host (docs/model.md, "A 1 B model on the card"). About an hour on 2 cores:
# the guest makes and packs 1.18 B weights under TCG, the reference takes ~10 minutes.
BENCH_1B_TOKENS ?= 8
.PHONY: bench-1b
bench-1b: $(B)/bin/spyre-generate
	@mkdir -p $(B)/bench-out
	@echo "== the 1 B model: CPU reference on the host, then dispatch a/b/c/d on an 8 GiB card (in the VM, timed)"
	$(B)/bin/spyre-generate --model model/configs/granite-1b --dtype fp16 --prompt-len 512 \
		-n $(BENCH_1B_TOKENS) -q >$(B)/bench-out/1b-ref.out
	tools/vm/run -q --timed --mem 8G --props mem-size=8G --timeout 7200 --copy model/configs/granite-1b \
		--out $(B)/bench-out/1b--timed.out -- spyre-generate --device 0 --model /spyre/granite-1b \
		--dtype fp16 --prompt-len 512 -n $(BENCH_1B_TOKENS) --dispatch all -q
	tr -d '\r' <$(B)/bench-out/1b--timed.out | grep -vE '^(model|  multipliers|parameters|prompt):'
	@ref=$$(grep '^generated:' $(B)/bench-out/1b-ref.out); echo "CPU reference: $$ref"; \
	n=$$(tr -d '\r' <$(B)/bench-out/1b--timed.out | grep -c '^generated:'); \
	[ "$$n" = 4 ] || { echo "bench-1b: $$n of the 4 dispatch configurations generated tokens"; exit 1; }; \
	tr -d '\r' <$(B)/bench-out/1b--timed.out | grep '^generated:' | while read -r l; do \
		[ "$$l" = "$$ref" ] || { echo "bench-1b: the card generated other tokens than the reference: $$l"; exit 1; }; \
	done
	$(MAKE) bench-1b-speed

# make bench-1b-speed: the emulator's own speed on the 1 B model, decode steps per wall second at
# engine-threads 1 and 2 (docs/model.md, "The emulator's speed"). Timed mode (no job timeout can fire
# on a loaded host; the guest's clock is virtual), so the wall time comes from QEMU's spyre_launch trace
# event, stamped with the host's clock (-msg timestamp=on): the last steps x launches-per-step
# launches are the decode's, timed from the prefill's last launch to the decode's last. A 32-token
# prompt (a step's cost is the weights'), dispatch c. 9-20 minutes a thread count on this 2-core machine.
BENCH_1B_SPEED_THREADS ?= 1 2
BENCH_1B_SPEED_STEPS ?= 4
.PHONY: bench-1b-speed
bench-1b-speed: $(B)/bin/spyre-generate
	@mkdir -p $(B)/bench-out
	@for t in $(BENCH_1B_SPEED_THREADS); do \
		o=$(B)/bench-out/1b-speed-t$$t; rm -f $$o.trace; \
		tools/vm/run -q --timed --mem 8G --props mem-size=8G,engine-threads=$$t --timeout 3600 \
			--qemu-arg -msg --qemu-arg timestamp=on --qemu-arg -trace \
			--qemu-arg "enable=spyre_launch,file=$$PWD/$$o.trace" \
			--copy model/configs/granite-1b --out $$o.out -- spyre-generate --device 0 \
			--model /spyre/granite-1b --dtype fp16 --prompt-len 32 -n $$(($(BENCH_1B_SPEED_STEPS) + 1)) \
			--dispatch c -q || exit $$?; \
		l=$$(tr -d '\r' <$$o.out | sed -n 's/^decode (.* core use, \([0-9]*\) launches;.*/\1/p'); \
		[ -n "$$l" ] || { echo "bench-1b-speed: no decode line at engine-threads=$$t"; exit 1; }; \
		sed -n 's/.*@\([0-9.]*\):spyre_launch .*/\1/p' $$o.trace | \
			awk -v n=$(BENCH_1B_SPEED_STEPS) -v l=$$l -v t=$$t '{ ts[NR] = $$1 } END { \
				if (NR <= n * l) { print "bench-1b-speed: " NR " launches traced"; exit 1 } \
				w = (ts[NR] - ts[NR - n * l]) / n; \
				printf "emulator speed, 1 B model, engine-threads=%d: %.2f s of wall time a decode step, " \
				       "%.3f steps per second (%d launches a step)\n", t, w, 1 / w, l }' || exit 1; \
	done

bench: setup
	$(MAKE) bench-run

bench-run: all $(BENCHES) bench-engine
	@# outputs apart from build/bench, which the VM runs copy in: the same bytes boot every run (timed mode)
	@mkdir -p $(B)/bench-out
	@echo "== device COPY bandwidth (qtest, host)"
	SPYRE_QEMU=$(QEMU_BIN) $(B)/bench/copy-bw
	@echo "== launch paths (in the VM; functional, then timed: deterministic, docs/timed-mode.md)"
	for m in "" --timed; do \
		tools/vm/run -q $$m --timeout 600 --copy $(B)/bench --out $(B)/bench-out/launch$$m.out -- /spyre/bench/launch-bench || exit $$?; \
		tr -d '\r' <$(B)/bench-out/launch$$m.out; \
	done
	@echo "== DMA through the whole stack: spyre_memcpy 256 MiB, pinned and pageable (in the VM: functional vs memcpy, timed vs the modeled link)"
	for m in "" --timed; do \
		tools/vm/run -q $$m --timeout 900 --copy $(B)/bench --out $(B)/bench-out/dma$$m.out -- /spyre/bench/dma-bench || exit $$?; \
		tr -d '\r' <$(B)/bench-out/dma$$m.out; \
	done
	@echo "== peer-to-peer: spyre_memcpy_peer 64 MiB between two cards below a PCIe switch vs D2D within a card (in the VM: functional, then timed)"
	for m in "" --timed; do \
		tools/vm/run -q $$m --timeout 900 --devices 2 --copy $(B)/bench --out $(B)/bench-out/p2p$$m.out -- /spyre/bench/p2p-bench || exit $$?; \
		tr -d '\r' <$(B)/bench-out/p2p$$m.out; \
	done
	@echo "== collectives over two cards: time, algbw and busbw as nccl-tests defines them, busbw vs the peer copy (in the VM: functional, then timed)"
	for m in "" --timed; do \
		tools/vm/run -q $$m --timeout 900 --devices 2 --copy $(B)/bench --out $(B)/bench-out/coll$$m.out -- /spyre/bench/coll-bench || exit $$?; \
		tr -d '\r' <$(B)/bench-out/coll$$m.out; \
	done
	@echo "== kernel library strategies vs the published Spyre figures (host, modeled device time)"
	$(B)/bench/kernels-bench >$(B)/bench-out/kernels.out
	cat $(B)/bench-out/kernels.out
	@echo "== a real model's dispatch: kernels built every step (a) / cached + patching (b) / cached + patch-free (c) / graph replay with device-side feedback (d); functional, then timed"
	for m in "" --timed; do \
		tools/vm/run -q $$m --timeout 900 --dev "mem-size=4G" --out $(B)/bench-out/dispatch$$m.out -- \
			spyre-generate --device 0 --dtype fp16 --dispatch all -q -n 32 || exit $$?; \
		echo "-- dispatch$$m"; \
		tr -d '\r' <$(B)/bench-out/dispatch$$m.out | grep -vE '^(model|  multipliers|parameters|weights):'; \
	done
	$(MAKE) bench-tp
	$(MAKE) bench-serve
	$(MAKE) bench-1b
	$(if $(wildcard $(TORCH_HDR)),$(MAKE) bench-torch,@echo "== PyTorch bench skipped: no venv")
	bench/published $(B)/bench-out

# ---- the two commands ------------------------------------------------------------
# Set-up first, then a fresh make: what the build finds (clang, pkg-config
# files, the kselftest harness) is decided after the set-up installed it.
demo:
	tools/setup/setup.sh all
	$(MAKE) all
	tools/demo

# spyre-serve on a card in a VM, its port 8000 on the host's 127.0.0.1:8000 (docs/serve.md)
serve:
	tools/setup/setup.sh all
	$(MAKE) all
	tools/serve

# check's build runs on every core (CHECK_JOBS=N to change): nothing else runs yet
CHECK_JOBS ?= $(shell nproc)
check:
	tools/setup/setup.sh all debug-kernel guest-python
	$(MAKE) -j$(CHECK_JOBS) all module-debug
	tools/check

# make boot-soak N=100 KINDS="release python debug timed" TCG=multi: boot each
# kind N times, report the rate of boots that died (docs/vm.md).
N ?= 100
KINDS ?= release python debug timed
boot-soak:
	tools/setup/setup.sh all debug-kernel guest-python
	$(MAKE) all module-debug
	tools/vm/boot-soak -n $(N) $(if $(TCG),--tcg $(TCG)) $(KINDS)

# make vm-shell VM_KERNEL=debug: the same on the debug kernel.
VM_KERNEL ?= release
vm-shell: all
	tools/vm/run --kernel $(VM_KERNEL) --shell

lint:
	tools/lint

# make install [DESTDIR=...] [PREFIX=/usr/local]: libspyre, headers, pkg-config,
# tools, man pages and the udev rule (spyre.ko: `make -C $(KDIR) M=$$PWD modules_install`).
PREFIX ?= /usr/local
# What `make install` puts in PREFIX/include: each compiles alone, in C and
# C++ (libspyre/tests/install-test.sh).
PUBLIC_HDRS := libspyre/include/spyre.h libspyre/include/spyre_kernels.h uapi/spyre_accel.h \
	uapi/spyre_hw.h uapi/spyre_isa.h
install: lib tools $(ISA_TOOLS)
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/bin \
		$(DESTDIR)$(PREFIX)/share/man/man3 $(DESTDIR)$(PREFIX)/share/man/man7 \
		$(DESTDIR)/etc/udev/rules.d
	install -m 0755 $(B)/lib/libspyre.so.$(LIBSPYRE_VERSION) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libspyre.so.$(LIBSPYRE_VERSION) $(DESTDIR)$(PREFIX)/lib/$(LIBSPYRE_SONAME)
	ln -sf $(LIBSPYRE_SONAME) $(DESTDIR)$(PREFIX)/lib/libspyre.so
	install -m 0644 $(B)/lib/libspyre.a $(DESTDIR)$(PREFIX)/lib/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(LIBSPYRE_VERSION)|' libspyre/libspyre.pc.in \
		>$(DESTDIR)$(PREFIX)/lib/pkgconfig/libspyre.pc
	install -m 0644 $(PUBLIC_HDRS) $(DESTDIR)$(PREFIX)/include/
	install -m 0755 $(TOOLS) $(ISA_TOOLS) $(DESTDIR)$(PREFIX)/bin/
	if [ -d libspyre/man ]; then \
		install -m 0644 libspyre/man/*.3 $(DESTDIR)$(PREFIX)/share/man/man3/; \
		install -m 0644 libspyre/man/*.7 $(DESTDIR)$(PREFIX)/share/man/man7/; \
	fi
	install -m 0644 tools/udev/70-spyre.rules $(DESTDIR)/etc/udev/rules.d/

clean:
	rm -rf $(B)
	$(MAKE) -C $(KDIR) M=$(CURDIR) clean
