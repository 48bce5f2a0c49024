# qemu-device/engine/engine.mk - the compute engine (execution, numerics,
# timing), its tests, fuzzer and benchmark. Included by the top-level Makefile
# after isa/isa.mk (uses B, CC, CFLAGS, WARNFLAGS and the ISA_* variables):
# the engine depends on the ISA library, so whatever links ENGINE_LIB links
# ISA_LIB after it. The engine is plain C: it also builds with QEMU's warning
# set (ENGINE_QEMU_WARN), checked by the engine-qemu-flags target.

ENGINE_DIR := qemu-device/engine
ENGINE_SRCS := $(addprefix $(ENGINE_DIR)/,spyre_engine.c spyre_exec.c spyre_lpddr.c spyre_gemm.c spyre_defer.c)
ENGINE_HDRS := $(wildcard $(ENGINE_DIR)/*.h) $(ISA_HDRS)
ENGINE_OBJS := $(patsubst $(ENGINE_DIR)/%.c,$(B)/engine/%.o,$(ENGINE_SRCS))
ENGINE_LIB := $(B)/engine/libspyre-engine.a
ENGINE_CFLAGS := $(CFLAGS) -std=gnu11 $(WARNFLAGS) -fno-strict-aliasing -fwrapv -Iuapi -I$(ENGINE_DIR) \
	-I$(ISA_DIR)
ENGINE_QEMU_WARN := -std=gnu11 -Wall -Wundef -Wwrite-strings -Wmissing-prototypes \
	-Wstrict-prototypes -Wredundant-decls -Wold-style-declaration -Wold-style-definition \
	-Wtype-limits -Wformat-security -Winit-self -Wignored-qualifiers -Wempty-body \
	-Wnested-externs -Wendif-labels -Wimplicit-fallthrough=2 -fno-strict-aliasing -fwrapv

ENGINE_TEST_LIB := $(ENGINE_DIR)/tests/flatmem.c
ENGINE_TEST_HDRS := $(ENGINE_DIR)/tests/flatmem.h tests/tap.h
ENGINE_TESTS := $(patsubst $(ENGINE_DIR)/tests/%.c,$(B)/tests/%,$(wildcard $(ENGINE_DIR)/tests/*-test.c))
ENGINE_FUZZ := $(B)/fuzz/spyre-prog-fuzz
# threads-test again, engine and all, under ThreadSanitizer and AddressSanitizer (no
# target_clones: an ifunc resolver runs before the sanitizer runtime is up)
ENGINE_SAN_TESTS := $(B)/tests/engine-threads-tsan-test $(B)/tests/engine-threads-asan-test
ENGINE_HAVE_CLANG := $(shell command -v clang >/dev/null 2>&1 && echo yes)

.PHONY: engine-all engine-qemu-flags fuzz bench-engine

all: engine-all
host-tests: $(ENGINE_TESTS) $(ENGINE_SAN_TESTS)
engine-all: $(ENGINE_LIB) $(ENGINE_TESTS) $(ENGINE_SAN_TESTS) $(if $(ENGINE_HAVE_CLANG),$(ENGINE_FUZZ))

$(B)/engine/%.o: $(ENGINE_DIR)/%.c $(ENGINE_HDRS)
	@mkdir -p $(@D)
	$(CC) $(ENGINE_CFLAGS) -c $< -o $@

$(ENGINE_LIB): $(ENGINE_OBJS)
	rm -f $@ && ar rcs $@ $^

# QEMU's flags, as the device build will use them (objects discarded)
engine-qemu-flags: $(ENGINE_SRCS) $(ISA_DEVICE_SRCS) $(ENGINE_HDRS)
	@mkdir -p $(B)/engine/qemu
	for f in $(ENGINE_SRCS) $(ISA_DEVICE_SRCS); do $(CC) -O2 $(ENGINE_QEMU_WARN) -Werror -Iuapi \
		-I$(ENGINE_DIR) -I$(ISA_DIR) -c $$f -o $(B)/engine/qemu/$$(basename $$f .c).o || exit 1; done

$(ENGINE_TESTS): $(B)/tests/%: $(ENGINE_DIR)/tests/%.c $(ENGINE_TEST_LIB) $(ENGINE_TEST_HDRS) $(ENGINE_LIB) \
		$(ISA_LIB)
	@mkdir -p $(@D)
	$(CC) $(ENGINE_CFLAGS) -D_GNU_SOURCE -I$(ENGINE_DIR)/tests $< $(ENGINE_TEST_LIB) $(ENGINE_LIB) $(ISA_LIB) \
		-lm -pthread -o $@

$(B)/tests/fuzz-run-test: tests/fuzz-run.h

$(B)/tests/engine-threads-%san-test: $(ENGINE_DIR)/tests/threads-test.c $(ENGINE_SRCS) $(ISA_SRCS) $(ENGINE_HDRS) \
		$(ENGINE_TEST_LIB) $(ENGINE_TEST_HDRS)
	@mkdir -p $(@D)
	$(CC) $(ENGINE_CFLAGS) -fsanitize=$(if $(filter t,$*),thread,address,undefined) -DSPYRE_NO_CLONES -D_GNU_SOURCE \
		-I$(ENGINE_DIR)/tests $< $(ENGINE_SRCS) $(ISA_SRCS) $(ENGINE_TEST_LIB) -lm -pthread -o $@

# libFuzzer target: validator, decoder, disassembler/assembler (the ISA
# library) and the engine itself on arbitrary images
fuzz: $(ENGINE_FUZZ)
$(ENGINE_FUZZ): $(ENGINE_DIR)/tests/prog-fuzz.c $(ENGINE_SRCS) $(ISA_SRCS) $(ENGINE_HDRS) $(ENGINE_TEST_LIB)
	@mkdir -p $(@D)
	clang -O1 -g -std=gnu11 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		-fno-strict-aliasing -fwrapv -DSPYRE_NO_CLONES -Iuapi -I$(ENGINE_DIR) -I$(ENGINE_DIR)/tests \
		-I$(ISA_DIR) $< $(ENGINE_SRCS) $(ISA_SRCS) $(ENGINE_TEST_LIB) -lm -pthread -o $@

# ---- benchmark: engine fp32 matmul vs single-threaded OpenBLAS sgemm ----
$(B)/bench/matmul-bench: bench/matmul-bench.c $(ENGINE_TEST_LIB) $(ENGINE_TEST_HDRS) $(ENGINE_LIB) $(ISA_LIB)
	@mkdir -p $(@D)
	$(CC) $(ENGINE_CFLAGS) -D_GNU_SOURCE -I$(ENGINE_DIR)/tests $< $(ENGINE_TEST_LIB) $(ENGINE_LIB) $(ISA_LIB) \
		-lopenblas -lm -pthread -o $@

bench-engine: $(B)/bench/matmul-bench
	$(B)/bench/matmul-bench
bench: bench-engine
