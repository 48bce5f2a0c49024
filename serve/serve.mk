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
# The tokenizer (tokenizer.h) is a library of its own, on util/json only. Its
# Unicode tables are generated at build time from python3's unicodedata
# (gen-unicode.py); the agreement test's references come from Hugging Face
# tokenizers in the venv (tests/tokref.py), when the venv has it.
TOK_SRCS := $(addprefix $(SERVE_DIR)/,tokenizer.c tokenizer_text.c tokenizer_model.c tokenizer_unicode.c)
TOK_HDRS := $(SERVE_DIR)/tokenizer.h $(SERVE_DIR)/tokenizer_impl.h $(UTIL_DIR)/json.h $(UTIL_DIR)/utf8.h \
	$(B)/serve/tokenizer_unicode_tables.h
TOK_OBJS := $(patsubst $(SERVE_DIR)/%.c,$(B)/serve/%.o,$(TOK_SRCS))
TOK_LIB := $(B)/serve/libspyre-tokenizer.a
TOK_CFLAGS := $(SERVE_CFLAGS) -I$(B)/serve
TOK_VENV_PY := $(SPYRE_CACHE)/venv/bin/python
TOK_REF := $(if $(wildcard $(TOK_VENV_PY)),$(B)/serve/tokref/index.txt)
TOK_TEST_HDRS := $(SERVE_DIR)/tests/tokenizer-util.h $(SERVE_TEST_HDRS)

serve-all: $(TOK_LIB) $(B)/tests/serve-tokenizer-test $(B)/tests/serve-tokenizer-mutate-test
host-tests: $(B)/tests/serve-tokenizer-test $(B)/tests/serve-tokenizer-mutate-test

$(B)/serve/tokenizer_unicode_tables.h: $(SERVE_DIR)/gen-unicode.py
	@mkdir -p $(@D)
	python3 $< $@.tmp && mv $@.tmp $@

$(TOK_OBJS): $(B)/serve/%.o: $(SERVE_DIR)/%.c $(TOK_HDRS)
	@mkdir -p $(@D)
	$(CC) $(TOK_CFLAGS) -c $< -o $@

$(TOK_LIB): $(TOK_OBJS) $(B)/util/json.o
	rm -f $@ && ar rcs $@ $^

# The tiny model's tokenizer.json as its generator writes it now (the test compares it with the committed one).
$(B)/serve/tiny-tokenizer.json: $(SERVE_DIR)/gen-tiny-tokenizer.py
	@mkdir -p $(@D)
	python3 $< $@

$(B)/serve/tokref/index.txt: $(SERVE_DIR)/tests/tokref.py $(SERVE_DIR)/tests/tokenizer-corpus.jsonl \
		$(MODEL_DIR)/configs/tiny/tokenizer.json
	@mkdir -p $(@D)
	HF_HUB_OFFLINE=1 $(TOK_VENV_PY) $< $(SERVE_DIR)/tests/tokenizer-corpus.jsonl \
		$(MODEL_DIR)/configs/tiny/tokenizer.json $(@D)

$(B)/tests/serve-tokenizer-test: $(SERVE_DIR)/tests/tokenizer-test.c $(TOK_LIB) $(TOK_HDRS) $(TOK_TEST_HDRS) \
		$(B)/serve/tiny-tokenizer.json $(TOK_REF)
	@mkdir -p $(@D)
	$(CC) $(TOK_CFLAGS) $< -o $@ $(TOK_LIB) -lpthread

# The loader and the pipeline under AddressSanitizer and UBSan, on damaged tokenizer.json files.
$(B)/tests/serve-tokenizer-mutate-test: $(SERVE_DIR)/tests/tokenizer-mutate-test.c $(TOK_SRCS) $(UTIL_DIR)/json.c \
		$(TOK_HDRS) $(TOK_TEST_HDRS)
	@mkdir -p $(@D)
	$(CC) $(TOK_CFLAGS) $(SERVE_SAN) $< $(TOK_SRCS) $(UTIL_DIR)/json.c -o $@

# ---- engine and runners ------------------------------------------------------
# The engine (blocks, sampling, scheduler, requests/threads) and the CPU runner
# form one library; its tests link it with the model library. The thread test
# is built twice: plain and under ThreadSanitizer (everything from source).

SERVE_ENGINE_SRCS := $(addprefix $(SERVE_DIR)/,blocks.c sample.c sched.c engine.c runner_cpu.c)
SERVE_ENGINE_HDRS := $(addprefix $(SERVE_DIR)/,blocks.h sample.h engine.h engine_int.h runner.h runner_cpu.h)
SERVE_ENGINE_OBJS := $(patsubst %.c,$(B)/%.o,$(SERVE_ENGINE_SRCS))
SERVE_ENGINE_LIB := $(B)/serve/libspyre-engine.a
SERVE_ENGINE_LIBS := $(SERVE_ENGINE_LIB) $(MODEL_LIB) $(ISA_LIB) -lpthread -lm
SERVE_ENGINE_TEST_HDRS := $(SERVE_TEST_HDRS) $(SERVE_DIR)/tests/engine-test-util.h
SERVE_ENGINE_TESTS := $(addprefix $(B)/tests/serve-,blocks-test sample-test sched-test engine-cpu-test engine-threads-test)
SERVE_ENGINE_TSAN_TESTS := $(B)/tests/serve-engine-threads-tsan-test

serve-all: $(SERVE_ENGINE_LIB) $(SERVE_ENGINE_TESTS) $(SERVE_ENGINE_TSAN_TESTS)
host-tests: $(SERVE_ENGINE_TESTS) $(SERVE_ENGINE_TSAN_TESTS)

$(B)/serve/%.o: $(SERVE_DIR)/%.c $(SERVE_ENGINE_HDRS) $(MODEL_HDRS)
	@mkdir -p $(@D)
	$(CC) $(SERVE_CFLAGS) -c $< -o $@

$(SERVE_ENGINE_LIB): $(SERVE_ENGINE_OBJS)
	rm -f $@ && ar rcs $@ $^

$(SERVE_ENGINE_TESTS): $(B)/tests/serve-%-test: $(SERVE_DIR)/tests/%-test.c $(SERVE_ENGINE_LIB) $(MODEL_LIB) $(ISA_LIB) \
		$(SERVE_ENGINE_HDRS) $(MODEL_HDRS) $(SERVE_ENGINE_TEST_HDRS)
	@mkdir -p $(@D)
	$(CC) $(SERVE_CFLAGS) $(SERVE_SAN) $< -o $@ $(SERVE_ENGINE_LIBS)

$(B)/tests/serve-engine-threads-tsan-test: $(SERVE_DIR)/tests/engine-threads-test.c $(SERVE_ENGINE_SRCS) $(MODEL_SRCS) \
		$(MODEL_ISA_SRCS) $(SERVE_ENGINE_HDRS) $(MODEL_HDRS) $(SERVE_ENGINE_TEST_HDRS)
	@mkdir -p $(@D)
	$(CC) $(SERVE_CFLAGS) -fsanitize=thread $< $(SERVE_ENGINE_SRCS) $(MODEL_SRCS) $(MODEL_ISA_SRCS) -o $@ -lpthread -lm

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
$(SERVE_CARD_TEST): $(SERVE_DIR)/tests/runner-card-test.c $(SERVE_CARD_OBJ) $(MODEL_CARD_SRCS) $(SERVE_CARD_CPU_LIB) $(MODEL_LIB) \
		$(ISA_LIB) $(B)/lib/libspyre.so $(SERVE_TEST_HDRS)
	@mkdir -p $(@D)
	$(CC) $(SERVE_CFLAGS) $(SERVE_CARD_CPU) $< $(SERVE_CARD_OBJ) $(MODEL_CARD_SRCS) -o $@ $(SERVE_CARD_CPU_LIB) $(MODEL_LIB) \
		-L$(B)/lib -lspyre \
		-Wl,-rpath,'$$ORIGIN/../lib' $(ISA_LIB) -lm
$(SERVE_CARD_SAN_TEST): $(SERVE_DIR)/tests/runner-card-test.c $(SERVE_DIR)/runner_card.c $(MODEL_CARD_SRCS) $(SERVE_DIR)/runner_card.h \
		$(SERVE_DIR)/runner.h $(SERVE_CARD_CPU_SRCS) $(MODEL_SRCS) $(MODEL_ISA_SRCS) $(MODEL_HDRS) \
		$(ISA_LIB) $(B)/lib/libspyre.so $(SERVE_TEST_HDRS)
	@mkdir -p $(@D)
	$(CC) $(SERVE_CFLAGS) $(SERVE_SAN) $(SERVE_CARD_CPU) $< $(SERVE_DIR)/runner_card.c $(MODEL_CARD_SRCS) $(SERVE_CARD_CPU_SRCS) \
		$(MODEL_SRCS) $(MODEL_ISA_SRCS) -o $@ \
		-L$(B)/lib -lspyre -Wl,-rpath,'$$ORIGIN/../lib' $(ISA_LIB) -lm

# The OpenAI-compatible server on GNU libmicrohttpd (pkg-config libmicrohttpd):
# http.c (the library's glue), openai.c (requests, responses, errors, stop
# strings), metrics.c (Prometheus text), server.c (the routes), util/jsonw.c
# (the JSON writer). spyre-serve links the engine and the tokenizer; it and
# its end-to-end tests. The ASan+UBSan server compiles everything
# from source.

SRV_SRCS := $(addprefix $(SERVE_DIR)/,http.c openai.c metrics.c server.c) $(UTIL_DIR)/jsonw.c
SRV_HDRS := $(addprefix $(SERVE_DIR)/,http.h openai.h metrics.h server.h engine.h runner.h tokenizer.h) \
	$(UTIL_DIR)/jsonw.h $(UTIL_DIR)/json.h $(UTIL_DIR)/utf8.h
SERVE_MHD_CFLAGS := $(shell pkg-config --cflags libmicrohttpd 2>/dev/null)
SERVE_MHD_LIBS := $(or $(shell pkg-config --libs libmicrohttpd 2>/dev/null),-lmicrohttpd)

# The request/response layer alone, under ASan+UBSan: no engine, no socket.
serve-all: $(B)/tests/serve-openai-test
host-tests: $(B)/tests/serve-openai-test
$(B)/tests/serve-openai-test: $(SERVE_DIR)/tests/openai-test.c $(SERVE_DIR)/openai.c $(UTIL_DIR)/jsonw.c \
		$(UTIL_DIR)/json.c $(SRV_HDRS) $(SERVE_TEST_HDRS)
	@mkdir -p $(@D)
	$(CC) $(SERVE_CFLAGS) $(SERVE_SAN) $< $(SERVE_DIR)/openai.c $(UTIL_DIR)/jsonw.c $(UTIL_DIR)/json.c -o $@ -lm

SERVE_TOOLS := $(B)/bin/spyre-serve $(B)/serve/spyre-serve-asan
SERVE_E2E_TESTS := $(B)/tests/serve-server-test $(B)/tests/serve-server-asan-test
serve-all: $(SERVE_TOOLS) $(SERVE_E2E_TESTS)
host-tests: $(SERVE_E2E_TESTS)

# The official OpenAI Python client (the venv's pinned openai) against spyre-serve on the host
host-tests: $(B)/tests/serve-openai-client-test
$(B)/tests/serve-openai-client-test: $(SERVE_DIR)/tests/openai-client-test.sh $(SERVE_DIR)/tests/openai_client_test.py \
		$(B)/bin/spyre-serve
	@mkdir -p $(@D)
	install -m 0755 $< $@

$(B)/bin/spyre-serve: $(SERVE_DIR)/spyre-serve.c $(SRV_SRCS) $(SRV_HDRS) $(SERVE_DIR)/runner_cpu.h \
		$(SERVE_DIR)/runner_card.h $(MODEL_DIR)/bert_device.c $(MODEL_CARD_SRCS) $(MODEL_DIR)/bert_device.h $(SERVE_CARD_OBJ) $(TOK_LIB) $(SERVE_ENGINE_LIB) $(MODEL_LIB) $(ISA_LIB) \
		$(B)/lib/libspyre.so
	@mkdir -p $(@D)
	$(CC) $(SERVE_CFLAGS) $(SERVE_MHD_CFLAGS) $< $(SRV_SRCS) $(SERVE_CARD_OBJ) $(MODEL_DIR)/bert_device.c $(MODEL_CARD_SRCS) -o $@ $(TOK_LIB) $(SERVE_ENGINE_LIB) \
		$(MODEL_LIB) -L$(B)/lib -lspyre -Wl,-rpath,'$$ORIGIN/../lib' $(ISA_LIB) $(SERVE_MHD_LIBS) -lpthread -lm

# Not in build/bin (the guest image copies build/bin): the test starts it.
$(B)/serve/spyre-serve-asan: $(SERVE_DIR)/spyre-serve.c $(SRV_SRCS) $(SRV_HDRS) $(SERVE_DIR)/runner_cpu.h $(TOK_HDRS) \
		$(SERVE_DIR)/runner_card.c $(SERVE_DIR)/runner_card.h $(MODEL_DIR)/bert_device.c $(MODEL_CARD_SRCS) $(MODEL_DIR)/bert_device.h $(TOK_SRCS) $(SERVE_ENGINE_SRCS) $(MODEL_SRCS) \
		$(MODEL_ISA_SRCS) $(B)/lib/libspyre.so
	@mkdir -p $(@D)
	$(CC) $(SERVE_CFLAGS) $(SERVE_MHD_CFLAGS) -I$(B)/serve $(SERVE_SAN) $< $(SRV_SRCS) $(SERVE_DIR)/runner_card.c $(MODEL_DIR)/bert_device.c $(MODEL_CARD_SRCS) \
		$(TOK_SRCS) $(SERVE_ENGINE_SRCS) $(MODEL_SRCS) $(MODEL_ISA_SRCS) -o $@ \
		-L$(B)/lib -lspyre -Wl,-rpath,'$$ORIGIN/../../build/lib' $(SERVE_MHD_LIBS) -lpthread -lm

# The end-to-end test: spyre-serve on a free loopback port, talked to over
# raw sockets; its greedy tokens checked against the CPU reference.
$(B)/tests/serve-server-test: $(SERVE_DIR)/tests/server-test.c $(SERVE_DIR)/tests/http-client.h $(TOK_LIB) \
		$(MODEL_LIB) $(ISA_LIB) $(MODEL_HDRS) $(SERVE_TEST_HDRS) $(B)/bin/spyre-serve
	@mkdir -p $(@D)
	$(CC) $(SERVE_CFLAGS) $< $(UTIL_DIR)/json.c -o $@ $(TOK_LIB) $(MODEL_LIBS) -lpthread

# The same cases and a bounded mixed load on the ASan+UBSan server; it must
# exit 0 on SIGTERM with nothing on its stderr from the sanitizers.
$(B)/tests/serve-server-asan-test: $(SERVE_DIR)/tests/server-test.c $(SERVE_DIR)/tests/http-client.h $(TOK_LIB) \
		$(MODEL_LIB) $(ISA_LIB) $(MODEL_HDRS) $(SERVE_TEST_HDRS) $(B)/serve/spyre-serve-asan
	@mkdir -p $(@D)
	$(CC) $(SERVE_CFLAGS) -DSERVE_TEST_ASAN $< $(UTIL_DIR)/json.c -o $@ $(TOK_LIB) $(MODEL_LIBS) -lpthread

