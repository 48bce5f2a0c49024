# frameworks/pytorch/pytorch.mk - the PyTorch device "spyre" (spyre_torch): a
# PrivateUse1 backend over libspyre for PyTorch 2.13, built with plain g++
# against the headers of the set-up's venv ($(SPYRE_CACHE)/venv, tools/setup
# step venv), linked against its libtorch_cpu and libc10 (their directory is
# the rpath: the guest image carries the venv at the same path), libspyre
# linked in statically (the guest has no libspyre.so path to find). Included
# by the top-level Makefile after libspyre's rules; skipped with a note when
# the venv is absent (make guest-python makes it).
#
# $(B)/frameworks/pytorch/ is a directory for sys.path: spyre_torch/
# (__init__.py, _C.so), spyre_torch-$(TORCH_PKG_VERSION).dist-info (its
# torch.backends entry point: `import torch` autoloads the device when the
# directory is on sys.path), and tests/. The guest image puts /spyre/pytorch,
# where the VM tests copy it, on the venv's sys.path.

TORCH_DIR := frameworks/pytorch
TORCH_OUT := $(B)/frameworks/pytorch
TORCH_VENV := $(SPYRE_CACHE)/venv
TORCH_SITE := $(firstword $(wildcard $(TORCH_VENV)/lib/python3*/site-packages))
TORCH_HDR := $(TORCH_SITE)/torch/include/torch/library.h
TORCH_LIB := $(TORCH_SITE)/torch/lib
TORCH_PKG_VERSION := 0.2.0
TORCH_SRCS := $(wildcard $(TORCH_DIR)/csrc/*.cpp)
TORCH_EXT := $(TORCH_OUT)/spyre_torch/_C.so
TORCH_DIST := $(TORCH_OUT)/spyre_torch-$(TORCH_PKG_VERSION).dist-info
TORCH_PY := $(patsubst $(TORCH_DIR)/%,$(TORCH_OUT)/%,$(wildcard $(TORCH_DIR)/spyre_torch/*.py)) $(TORCH_DIST)/METADATA $(TORCH_DIST)/entry_points.txt \
	$(patsubst $(TORCH_DIR)/tests/%,$(TORCH_OUT)/tests/%,$(wildcard $(TORCH_DIR)/tests/*.py)) \
	$(TORCH_OUT)/tests/spyre-torch-test $(TORCH_OUT)/tests/demo-torch $(TORCH_OUT)/demo.py \
	$(TORCH_OUT)/hf_ref.json
# The C++ ABI of the wheel's libraries (torch._C._GLIBCXX_USE_CXX11_ABI), read once per torch install.
TORCH_ABI := $(TORCH_OUT)/abi.flags
TORCH_CXXFLAGS := -std=c++17 -O2 -g -fPIC -Wall -Wextra -Wno-unused-parameter \
	-isystem $(TORCH_SITE)/torch/include -Ilibspyre/include -Iuapi

.PHONY: torch-ext
ifneq ($(wildcard $(TORCH_HDR)),)
all: torch-ext
torch-ext: $(TORCH_EXT) $(TORCH_PY)
else
torch-ext:
	@echo "torch-ext: no PyTorch in $(TORCH_VENV) (make guest-python, or tools/setup/setup.sh venv, makes it)"; exit 1
endif

$(TORCH_ABI): $(TORCH_SITE)/torch/version.py
	@mkdir -p $(@D)
	$(TORCH_VENV)/bin/python3 -c 'import torch; print("-D_GLIBCXX_USE_CXX11_ABI=%d" % torch._C._GLIBCXX_USE_CXX11_ABI)' >$@.tmp
	mv $@.tmp $@

# Each object through the object cache (tools/setup/cached-cxx: keyed by the compiler, the flags and
# the preprocessed source; a fresh clone of an unchanged tree compiles none of them).
# TORCH_OBJ_CACHE= compiles without it.
TORCH_OBJ_CACHE ?= $(SPYRE_CACHE)/torch-obj
$(TORCH_OUT)/obj/%.o: $(TORCH_DIR)/csrc/%.cpp $(wildcard $(TORCH_DIR)/csrc/*.h) libspyre/include/spyre.h \
		libspyre/include/spyre_kernels.h uapi/spyre_isa.h $(TORCH_ABI) tools/setup/cached-cxx
	@mkdir -p $(@D)
	tools/setup/cached-cxx '$(TORCH_OBJ_CACHE)' $< $@ -- g++ $(TORCH_CXXFLAGS) $$(cat $(TORCH_ABI))

$(TORCH_EXT): $(patsubst $(TORCH_DIR)/csrc/%.cpp,$(TORCH_OUT)/obj/%.o,$(TORCH_SRCS)) $(B)/lib/libspyre.a
	@mkdir -p $(@D)
	g++ -shared -o $@ $(filter %.o,$^) $(B)/lib/libspyre.a $(DRM_LIBS) $(UDEV_LIBS) \
		-L$(TORCH_LIB) -Wl,-rpath,$(TORCH_LIB) -ltorch_cpu -lc10 -lpthread

$(TORCH_OUT)/spyre_torch/%.py: $(TORCH_DIR)/spyre_torch/%.py
	@mkdir -p $(@D)
	cp $< $@

# The distribution's metadata: what importlib.metadata (torch's autoload) reads.
$(TORCH_DIST)/METADATA: $(TORCH_DIR)/pytorch.mk
	@mkdir -p $(@D)
	printf 'Metadata-Version: 2.1\nName: spyre_torch\nVersion: %s\nSummary: %s\n' $(TORCH_PKG_VERSION) \
		'the spyre card as a PyTorch device (frameworks/pytorch)' >$@

$(TORCH_DIST)/entry_points.txt: $(TORCH_DIR)/entry_points.txt
	@mkdir -p $(@D)
	cp $< $@

$(TORCH_OUT)/demo.py: $(TORCH_DIR)/demo.py
	@mkdir -p $(@D)
	cp $< $@

# test_hf's CPU references (hf_ref.py): the Hugging Face models' greedy tokens, logits and top-2 margins,
# MiniLM's embeddings, computed on the host with the venv the guest carries (the guest's CPU under TCG
# would take minutes per 12-layer generate); about 20 s of host time on one thread, again only when these change.
$(TORCH_OUT)/hf_ref.json: $(TORCH_DIR)/tests/hf_ref.py $(TORCH_DIR)/tests/hf_models.py $(TORCH_SITE)/torch/version.py
	@mkdir -p $(@D)
	TORCH_DEVICE_BACKEND_AUTOLOAD=0 HF_HUB_OFFLINE=1 $(TORCH_VENV)/bin/python3 $< $(TORCH_OUT)/hf_ref

$(TORCH_OUT)/tests/%: $(TORCH_DIR)/tests/%
	@mkdir -p $(@D)
	cp -p $< $@

# make demo-torch: Hugging Face models on the card in the VM (demo.py; after make demo's set-up)
.PHONY: demo-torch
demo-torch: setup
	tools/setup/setup.sh guest-python
	$(MAKE) all
	tools/vm/run --python --timeout 2400 --copy $(TORCH_OUT) -- /spyre/pytorch/tests/demo-torch

# make check-hf-full: test_hf's cases that make check leaves out (SPYRE_HF_FULL=1: the tiny models
# compiled in fp16 and with Inductor, the 12-layer Llama compiled and in fp16, the 12-layer Granite;
# an hour or more under TCG)
.PHONY: check-hf-full
check-hf-full: torch-ext
	tools/vm/run --python --timeout 7200 --copy $(TORCH_OUT) -- env SPYRE_HF_FULL=1 \
		/spyre/pytorch/tests/spyre-torch-test /spyre/pytorch hf_tiny_compiled hf_tiny_compiled_fp16 hf_llama_12l_fp32 hf_llama_12l_fp16 \
		hf_granite_12l_fp32 hf_granite_12l_fp16

# make bench-torch (part of make bench): eager vs torch.compile on test_hf's 12-layer Llama in the
# VM in timed mode (bench/torch-bench.py: a table of guest times and ratios, no assertions)
.PHONY: bench-torch
bench-torch: torch-ext $(B)/bench/torch-bench.py
	@echo "== PyTorch: a 12-layer Hugging Face Llama on the card, eager vs torch.compile (in the VM with Python, timed)"
	@mkdir -p $(B)/bench-out
	tools/vm/run -q --python --timed --timeout 5400 --copy $(B)/bench --copy $(TORCH_OUT) \
		--out $(B)/bench-out/torch--timed.out -- python3 /spyre/bench/torch-bench.py /spyre/pytorch
	tr -d '\r' <$(B)/bench-out/torch--timed.out

$(B)/bench/torch-bench.py: bench/torch-bench.py
	@mkdir -p $(@D)
	cp $< $@
