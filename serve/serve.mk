# serve/serve.mk - serving (issue 22): the tokenizer, the engine (continuous
# batching over a paged KV cache), its runners (CPU reference, card), and
# spyre-serve, the OpenAI-compatible server. Included by the top-level
# Makefile after model/model.mk (uses B, CC, CFLAGS, WARNFLAGS, MODEL_*,
# UTIL_DIR). Each part adds its rules below its heading.

SERVE_DIR := serve
SERVE_CFLAGS := $(CFLAGS) -std=gnu11 $(WARNFLAGS) -D_GNU_SOURCE -I$(SERVE_DIR) -I$(UTIL_DIR) \
	-I$(MODEL_DIR) -I$(ISA_DIR) -Iuapi -Ilibspyre/include
SERVE_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
SERVE_TEST_HDRS := tests/tap.h

.PHONY: serve-all
all: serve-all

# ---- tokenizer ---------------------------------------------------------------

# ---- engine and runners ------------------------------------------------------

# ---- spyre-serve -------------------------------------------------------------

# ---- the card runner -------------------------------------------------------

# The card runner (runner_card.h): an object the engine's users link with
# MODEL_LIB, libspyre and ISA_LIB; its test runs in the VM (build/selftests/:
# tools/check runs every program there on a card).
SERVE_CARD_OBJ := $(B)/serve/runner_card.o
# with the CPU runner in the tree (the engine's library), the VM test checks against it too
ifneq ($(wildcard $(SERVE_DIR)/runner_cpu.c),)
SERVE_CARD_CPU := -DSERVE_CARD_WITH_CPU
SERVE_CARD_CPU_LIB := $(SERVE_ENGINE_LIB)
SERVE_CARD_CPU_SRCS := $(SERVE_DIR)/runner_cpu.c
endif
SERVE_CARD_TEST := $(B)/selftests/serve_runner_card_test
# the same under ASan and UBSan (the runner checks every batch an engine hands it)
SERVE_CARD_SAN_TEST := $(B)/selftests/serve_runner_card_asan_test
serve-all: $(SERVE_CARD_OBJ) $(SERVE_CARD_TEST) $(SERVE_CARD_SAN_TEST)
$(SERVE_CARD_OBJ): $(SERVE_DIR)/runner_card.c $(SERVE_DIR)/runner_card.h $(SERVE_DIR)/runner.h $(MODEL_HDRS) \
		libspyre/include/spyre.h libspyre/include/spyre_kernels.h
	@mkdir -p $(@D)
	$(CC) $(SERVE_CFLAGS) -c $< -o $@
$(SERVE_CARD_TEST): $(SERVE_DIR)/tests/runner-card-test.c $(SERVE_CARD_OBJ) $(SERVE_CARD_CPU_LIB) $(MODEL_LIB) \
		$(ISA_LIB) $(B)/lib/libspyre.so $(SERVE_TEST_HDRS)
	@mkdir -p $(@D)
	$(CC) $(SERVE_CFLAGS) $(SERVE_CARD_CPU) $< $(SERVE_CARD_OBJ) -o $@ $(SERVE_CARD_CPU_LIB) $(MODEL_LIB) \
		-L$(B)/lib -lspyre \
		-Wl,-rpath,'$$ORIGIN/../lib' $(ISA_LIB) -lm
$(SERVE_CARD_SAN_TEST): $(SERVE_DIR)/tests/runner-card-test.c $(SERVE_DIR)/runner_card.c $(SERVE_DIR)/runner_card.h \
		$(SERVE_DIR)/runner.h $(SERVE_CARD_CPU_SRCS) $(MODEL_SRCS) $(MODEL_ISA_SRCS) $(MODEL_HDRS) \
		$(B)/lib/libspyre.so $(SERVE_TEST_HDRS)
	@mkdir -p $(@D)
	$(CC) $(SERVE_CFLAGS) $(SERVE_SAN) $(SERVE_CARD_CPU) $< $(SERVE_DIR)/runner_card.c $(SERVE_CARD_CPU_SRCS) \
		$(MODEL_SRCS) $(MODEL_ISA_SRCS) -o $@ \
		-L$(B)/lib -lspyre -Wl,-rpath,'$$ORIGIN/../lib' $(ISA_LIB) -lm
