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
