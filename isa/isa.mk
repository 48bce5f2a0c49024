# isa/isa.mk - the ISA library (codec and validator, dtype conversions,
# program builder and relocation, assembler/disassembler), its tests and the
# spyre-as/spyre-objdump tools. Included by the top-level Makefile before the
# engine's rules (uses B, CC, CFLAGS, WARNFLAGS).
#
# Who links what: the engine (qemu-device/engine/) depends on this library;
# libspyre takes its position-independent objects (ISA_PIC_LIB, hidden
# inside libspyre.so); tools, tests and benchmarks link ISA_LIB, and only
# what runs programs on the host links the engine as well.

ISA_DIR := isa
ISA_SRCS := $(addprefix $(ISA_DIR)/,decode.c dtype.c progbuild.c asm.c timing.c)
# The part the QEMU device compiles with the engine (qemu-device/meson.build).
ISA_DEVICE_SRCS := $(addprefix $(ISA_DIR)/,decode.c dtype.c timing.c)
ISA_HDRS := $(wildcard $(ISA_DIR)/*.h) uapi/spyre_isa.h uapi/spyre_hw.h
ISA_CFLAGS := $(CFLAGS) -std=gnu11 $(WARNFLAGS) -fno-strict-aliasing -fwrapv -Iuapi -I$(ISA_DIR)
ISA_LIB := $(B)/isa/libspyre-isa.a
ISA_OBJS := $(patsubst $(ISA_DIR)/%.c,$(B)/isa/%.o,$(ISA_SRCS))
# For libspyre: PIC, hidden, as an archive so the .so takes only what it uses.
ISA_PIC_LIB := $(B)/isa/pic/libspyre-isa-pic.a
ISA_PIC_OBJS := $(patsubst $(ISA_DIR)/%.c,$(B)/isa/pic/%.o,$(ISA_SRCS))

ISA_TESTS := $(patsubst $(ISA_DIR)/tests/%.c,$(B)/tests/%,$(wildcard $(ISA_DIR)/tests/*-test.c))
ISA_TOOLS := $(B)/bin/spyre-as $(B)/bin/spyre-objdump

.PHONY: isa-all

all: isa-all
host-tests: $(ISA_TESTS)
isa-all: $(ISA_LIB) $(ISA_PIC_LIB) $(ISA_TESTS) $(ISA_TOOLS)

$(B)/isa/%.o: $(ISA_DIR)/%.c $(ISA_HDRS)
	@mkdir -p $(@D)
	$(CC) $(ISA_CFLAGS) -c $< -o $@

$(B)/isa/pic/%.o: $(ISA_DIR)/%.c $(ISA_HDRS)
	@mkdir -p $(@D)
	$(CC) $(ISA_CFLAGS) -fPIC -fvisibility=hidden -c $< -o $@

$(ISA_LIB): $(ISA_OBJS)
	rm -f $@ && ar rcs $@ $^

$(ISA_PIC_LIB): $(ISA_PIC_OBJS)
	rm -f $@ && ar rcs $@ $^

$(ISA_TESTS): $(B)/tests/%: $(ISA_DIR)/tests/%.c tests/tap.h $(ISA_HDRS) $(ISA_LIB)
	@mkdir -p $(@D)
	$(CC) $(ISA_CFLAGS) -D_GNU_SOURCE $< $(ISA_LIB) -lm -o $@

# asm-test runs the command-line tools too
$(B)/tests/asm-test: $(ISA_TOOLS)

$(ISA_TOOLS): $(B)/bin/%: tools/spyre-as/%.c $(ISA_HDRS) $(ISA_LIB)
	@mkdir -p $(@D)
	$(CC) $(ISA_CFLAGS) -D_GNU_SOURCE $< $(ISA_LIB) -lm -o $@
