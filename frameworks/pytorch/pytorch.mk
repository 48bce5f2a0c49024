# frameworks/pytorch/pytorch.mk - the PyTorch device (spyre_torch): a
# PrivateUse1 backend over libspyre, built with plain g++ against Debian's
# PyTorch 1.13 headers (libtorch-dev; tools/setup installs it), libspyre
# linked in statically (the guest has no libspyre.so path to find). Included
# by the top-level Makefile after libspyre's rules; skipped with a note when
# the headers are absent (make setup installs them).
#
# $(B)/frameworks/pytorch/ is a Python package directory: spyre_torch/
# (__init__.py, _C.so) and tests/; the VM test puts it on PYTHONPATH.

TORCH_DIR := frameworks/pytorch
TORCH_OUT := $(B)/frameworks/pytorch
TORCH_HDR := /usr/include/torch/library.h
TORCH_SRCS := $(wildcard $(TORCH_DIR)/csrc/*.cpp)
TORCH_EXT := $(TORCH_OUT)/spyre_torch/_C.so
TORCH_PY := $(TORCH_OUT)/spyre_torch/__init__.py \
	$(patsubst $(TORCH_DIR)/tests/%,$(TORCH_OUT)/tests/%,$(wildcard $(TORCH_DIR)/tests/*.py)) \
	$(TORCH_OUT)/tests/spyre-torch-test $(TORCH_OUT)/tests/demo-torch $(TORCH_OUT)/demo.py
TORCH_CXXFLAGS := -std=c++17 -O2 -g -fPIC -Wall -Wextra -Wno-unused-parameter -D_GLIBCXX_USE_CXX11_ABI=1 \
	-Ilibspyre/include -Iuapi

.PHONY: torch-ext
ifneq ($(wildcard $(TORCH_HDR)),)
all: torch-ext
torch-ext: $(TORCH_EXT) $(TORCH_PY)
else
torch-ext:
	@echo "torch-ext: $(TORCH_HDR) is missing (make setup installs libtorch-dev)"; exit 1
endif

$(TORCH_OUT)/obj/%.o: $(TORCH_DIR)/csrc/%.cpp $(TORCH_DIR)/csrc/spyre_torch.h libspyre/include/spyre.h \
		libspyre/include/spyre_kernels.h uapi/spyre_isa.h
	@mkdir -p $(@D)
	g++ $(TORCH_CXXFLAGS) -c $< -o $@

$(TORCH_EXT): $(patsubst $(TORCH_DIR)/csrc/%.cpp,$(TORCH_OUT)/obj/%.o,$(TORCH_SRCS)) $(B)/lib/libspyre.a
	@mkdir -p $(@D)
	g++ -shared -o $@ $(filter %.o,$^) $(B)/lib/libspyre.a $(DRM_LIBS) $(UDEV_LIBS) -lc10 -ltorch_cpu -lpthread

$(TORCH_OUT)/spyre_torch/%.py: $(TORCH_DIR)/spyre_torch/%.py
	@mkdir -p $(@D)
	cp $< $@

$(TORCH_OUT)/demo.py: $(TORCH_DIR)/demo.py
	@mkdir -p $(@D)
	cp $< $@

$(TORCH_OUT)/tests/%: $(TORCH_DIR)/tests/%
	@mkdir -p $(@D)
	cp -p $< $@

# make demo-torch: the torch model on the card in the VM (after make demo's set-up)
.PHONY: demo-torch
demo-torch: setup
	$(MAKE) all
	tools/vm/run --python --timeout 900 --copy $(TORCH_OUT) -- /spyre/pytorch/tests/demo-torch
