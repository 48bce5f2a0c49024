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
# The OpenAI-compatible server on GNU libmicrohttpd (pkg-config libmicrohttpd):
# http.c (the library's glue), openai.c (requests, responses, errors, stop
# strings), metrics.c (Prometheus text), server.c (the routes), util/jsonw.c
# (the JSON writer). spyre-serve links the engine and the tokenizer; it and
# its end-to-end tests are built once both are in the tree (ENGINE_LIB and
# TOKENIZER_LIB defined above). The ASan+UBSan server compiles everything
# from source.

SRV_SRCS := $(addprefix $(SERVE_DIR)/,http.c openai.c metrics.c server.c) $(UTIL_DIR)/jsonw.c
SRV_HDRS := $(addprefix $(SERVE_DIR)/,http.h openai.h metrics.h server.h engine.h runner.h tokenizer.h) \
	$(UTIL_DIR)/jsonw.h $(UTIL_DIR)/json.h
SERVE_MHD_CFLAGS := $(shell pkg-config --cflags libmicrohttpd 2>/dev/null)
SERVE_MHD_LIBS := $(or $(shell pkg-config --libs libmicrohttpd 2>/dev/null),-lmicrohttpd)

# The request/response layer alone, under ASan+UBSan: no engine, no socket.
serve-all: $(B)/tests/serve-openai-test
host-tests: $(B)/tests/serve-openai-test
$(B)/tests/serve-openai-test: $(SERVE_DIR)/tests/openai-test.c $(SERVE_DIR)/openai.c $(UTIL_DIR)/jsonw.c \
		$(UTIL_DIR)/json.c $(SRV_HDRS) $(SERVE_TEST_HDRS)
	@mkdir -p $(@D)
	$(CC) $(SERVE_CFLAGS) $(SERVE_SAN) $< $(SERVE_DIR)/openai.c $(UTIL_DIR)/jsonw.c $(UTIL_DIR)/json.c -o $@ -lm

ifneq ($(and $(ENGINE_LIB),$(TOKENIZER_LIB)),)
SERVE_TOOLS := $(B)/bin/spyre-serve $(B)/serve/spyre-serve-asan
SERVE_E2E_TESTS := $(B)/tests/serve-server-test $(B)/tests/serve-server-asan-test
serve-all: $(SERVE_TOOLS) $(SERVE_E2E_TESTS)
host-tests: $(SERVE_E2E_TESTS)

$(B)/bin/spyre-serve: $(SERVE_DIR)/spyre-serve.c $(SRV_SRCS) $(SRV_HDRS) $(SERVE_DIR)/runner_cpu.h \
		$(TOKENIZER_LIB) $(ENGINE_LIB) $(MODEL_LIB) $(ISA_LIB)
	@mkdir -p $(@D)
	$(CC) $(SERVE_CFLAGS) $(SERVE_MHD_CFLAGS) $< $(SRV_SRCS) -o $@ $(TOKENIZER_LIB) $(ENGINE_LIBS) \
		$(SERVE_MHD_LIBS)

# Not in build/bin (the guest image copies build/bin): the test starts it.
$(B)/serve/spyre-serve-asan: $(SERVE_DIR)/spyre-serve.c $(SRV_SRCS) $(SRV_HDRS) $(SERVE_DIR)/runner_cpu.h \
		$(TOKENIZER_SRCS) $(ENGINE_SRCS) $(MODEL_SRCS) $(MODEL_ISA_SRCS)
	@mkdir -p $(@D)
	$(CC) $(SERVE_CFLAGS) $(SERVE_MHD_CFLAGS) $(SERVE_SAN) $< $(SRV_SRCS) $(TOKENIZER_SRCS) $(ENGINE_SRCS) \
		$(MODEL_SRCS) $(MODEL_ISA_SRCS) -o $@ $(SERVE_MHD_LIBS) -lpthread -lm

# The end-to-end test: spyre-serve on a free loopback port, talked to over
# raw sockets; its greedy tokens checked against the CPU reference.
$(B)/tests/serve-server-test: $(SERVE_DIR)/tests/server-test.c $(SERVE_DIR)/tests/http-client.h \
		$(MODEL_LIB) $(ISA_LIB) $(MODEL_HDRS) $(SERVE_TEST_HDRS) $(B)/bin/spyre-serve
	@mkdir -p $(@D)
	$(CC) $(SERVE_CFLAGS) $< $(UTIL_DIR)/json.c -o $@ $(MODEL_LIBS) -lpthread

# The same cases and a bounded mixed load on the ASan+UBSan server; it must
# exit 0 on SIGTERM with nothing on its stderr from the sanitizers.
$(B)/tests/serve-server-asan-test: $(SERVE_DIR)/tests/server-test.c $(SERVE_DIR)/tests/http-client.h \
		$(MODEL_LIB) $(ISA_LIB) $(MODEL_HDRS) $(SERVE_TEST_HDRS) $(B)/serve/spyre-serve-asan
	@mkdir -p $(@D)
	$(CC) $(SERVE_CFLAGS) -DSERVE_TEST_ASAN $< $(UTIL_DIR)/json.c -o $@ $(MODEL_LIBS) -lpthread

endif
