// SPDX-License-Identifier: MIT
/*
 * hooks.cpp - what PyTorch asks a PrivateUse1 device through
 * at::PrivateUse1HooksInterface: whether it is there (isAvailable,
 * deviceCount, hasPrimaryContext), its random number generators, and pinned
 * host memory.
 *
 * Generators: the card has no random number kernel. A spyre generator wraps a
 * CPU generator (PyTorch's own, mt19937); the random ops
 * (normal_, uniform_, random_, bernoulli_, ..., randperm) run on the CPU with
 * it and the values are copied to the card. So torch.manual_seed(s) followed
 * by torch.randn(n, device="spyre") gives the values torch.randn(n) gives
 * after the same seed on the CPU: reproducible, and checkable.
 *
 * Pinned memory: libspyre's spyre_malloc_host() (the current device's), which
 * copies use in place: a copy from or to it with non_blocking=True returns
 * before the card is done (runtime.cpp). Freeing a pinned block first waits
 * for the device, as a queued copy may still read or write it.
 */
#include <map>
#include <mutex>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include "spyre_torch.h"

namespace spyre_torch {

/* ---- generators ------------------------------------------------------------------ */

namespace {

struct SpyreGenerator final : c10::GeneratorImpl {
	at::Generator cpu;

	SpyreGenerator(c10::DeviceIndex index, uint64_t seed)
		: c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, index),
				     c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
		  cpu(at::make_generator<at::CPUGeneratorImpl>(seed))
	{
	}
	static c10::DeviceType device_type()
	{
		return c10::DeviceType::PrivateUse1;
	}
	void set_current_seed(uint64_t seed) override
	{
		std::lock_guard<std::mutex> g(cpu.mutex());

		cpu.set_current_seed(seed);
	}
	uint64_t current_seed() const override
	{
		return cpu.current_seed();
	}
	uint64_t seed() override
	{
		std::lock_guard<std::mutex> g(cpu.mutex());

		return cpu.seed();
	}
	void set_offset(uint64_t) override
	{
		TORCH_CHECK(false, "spyre: a spyre generator (a CPU generator inside) has no offset");
	}
	uint64_t get_offset() const override
	{
		TORCH_CHECK(false, "spyre: a spyre generator (a CPU generator inside) has no offset");
	}
	void set_state(const c10::TensorImpl &state) override
	{
		std::lock_guard<std::mutex> g(cpu.mutex());

		cpu.unsafeGetGeneratorImpl()->set_state(state);
	}
	c10::intrusive_ptr<c10::TensorImpl> get_state() const override
	{
		return cpu.unsafeGetGeneratorImpl()->get_state();
	}

private:
	SpyreGenerator *clone_impl() const override
	{
		auto *g = new SpyreGenerator(device().index(), 0);

		g->cpu = cpu.clone();
		return g;
	}
};

/* The CPU generator inside a spyre generator. */
at::Generator inner(const at::Generator &g)
{
	auto *sg = dynamic_cast<SpyreGenerator *>(g.unsafeGetGeneratorImpl());

	TORCH_CHECK(sg, "spyre: a ", g.device(), " generator passed to an op on the spyre device");
	return sg->cpu;
}

struct DefaultGenerators {
	std::once_flag once[kMaxDevices];
	at::Generator gen[kMaxDevices];
};
DefaultGenerators &g_gens = *new DefaultGenerators;	/* never destroyed, as every global here */

}  // namespace

const at::Generator &default_generator(int index)
{
	if (index < 0)
		index = current_device();
	TORCH_CHECK(index >= 0 && index < device_count(), "spyre: device index ", index,
		    " is out of range (", device_count(), " devices)");
	std::call_once(g_gens.once[index], [index] {
		/* seeded as PyTorch seeds the CPU's default generator */
		g_gens.gen[index] = at::make_generator<SpyreGenerator>((c10::DeviceIndex)index,
								       c10::detail::getNonDeterministicRandom());
	});
	return g_gens.gen[index];
}

/*
 * The random ops: on the CPU (the boxed CPU fallback, uncounted: this is how
 * spyre makes random numbers), each Generator argument replaced by the CPU
 * generator inside it, none by the one inside the device's default generator.
 */
static void random_on_cpu(const c10::OperatorHandle &op, torch::jit::Stack *stack)
{
	const auto &args = op.schema().arguments();
	size_t base = stack->size() - args.size();
	int dev = -1;

	for (size_t i = 0; i < args.size() && dev < 0; i++) {
		const c10::IValue &v = (*stack)[base + i];

		if (v.isTensor() && v.toTensor().device().type() == c10::DeviceType::PrivateUse1)
			dev = v.toTensor().device().index();
	}
	for (size_t i = 0; i < args.size(); i++) {
		c10::IValue &v = (*stack)[base + i];
		auto t = args[i].type();

		if (t->kind() == c10::TypeKind::OptionalType)
			t = t->castRaw<c10::OptionalType>()->getElementType();
		if (t->kind() != c10::TypeKind::GeneratorType)
			continue;
		v = c10::IValue(v.isNone() ? inner(default_generator(dev)) : inner(v.toGenerator()));
	}
	at::native::cpu_fallback(op, stack);
}

/* ---- pinned host memory -------------------------------------------------------------- */

namespace {

struct Pinned {
	std::mutex mu;
	std::map<uintptr_t, std::pair<size_t, int>> blocks;	/* start -> (size, device) */
};
Pinned &g_pinned = *new Pinned;

void free_pinned(void *p)
{
	int dev;
	{
		std::lock_guard<std::mutex> g(g_pinned.mu);
		auto it = g_pinned.blocks.find((uintptr_t)p);

		if (it == g_pinned.blocks.end())
			return;
		dev = it->second.second;
		g_pinned.blocks.erase(it);
	}
	/* a queued asynchronous copy may still use the block */
	spyre_device_synchronize(device(dev));
	spyre_free_host(device(dev), p);
}

struct PinnedAllocator final : c10::Allocator {
	at::DataPtr allocate(size_t n) override
	{
		int dev = current_device();
		void *p = nullptr;
		int rc;

		if (!n)
			return at::DataPtr(nullptr, c10::Device(c10::DeviceType::CPU));
		rc = spyre_malloc_host(device(dev), n, &p);
		if (rc)
			fail("cannot allocate " + std::to_string(n) + " bytes of pinned host memory", rc);
		{
			std::lock_guard<std::mutex> g(g_pinned.mu);

			g_pinned.blocks[(uintptr_t)p] = { n, dev };
		}
		return at::DataPtr(p, p, &free_pinned, c10::Device(c10::DeviceType::CPU));
	}
	c10::DeleterFnPtr raw_deleter() const override
	{
		return &free_pinned;
	}
	void copy_data(void *dst, const void *src, size_t n) const override
	{
		default_copy_data(dst, src, n);
	}
};
PinnedAllocator g_pinned_alloc;

}  // namespace

bool is_pinned(const void *p)
{
	std::lock_guard<std::mutex> g(g_pinned.mu);
	auto it = g_pinned.blocks.upper_bound((uintptr_t)p);

	if (it == g_pinned.blocks.begin())
		return false;
	--it;
	return (uintptr_t)p < it->first + it->second.first;
}

/* ---- the hooks ------------------------------------------------------------------------ */

namespace {

struct SpyreHooks final : at::PrivateUse1HooksInterface {
	bool isBuilt() const override
	{
		return true;
	}
	bool isAvailable() const override
	{
		return device_count() > 0;
	}
	c10::DeviceIndex deviceCount() const override
	{
		return (c10::DeviceIndex)device_count();
	}
	bool hasPrimaryContext(c10::DeviceIndex index) const override
	{
		return device_opened(index);
	}
	c10::DeviceIndex getCurrentDevice() const override
	{
		return (c10::DeviceIndex)current_device();
	}
	void setCurrentDevice(c10::DeviceIndex index) const override
	{
		set_current_device(index);
	}
	c10::DeviceIndex exchangeDevice(c10::DeviceIndex index) const override
	{
		c10::DeviceIndex old = (c10::DeviceIndex)current_device();

		if (index >= 0 && index != old)
			set_current_device(index);
		return old;
	}
	c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex index) const override
	{
		return exchangeDevice(index);
	}
	const at::Generator &getDefaultGenerator(c10::DeviceIndex index) const override
	{
		return default_generator(index);
	}
	at::Generator getNewGenerator(c10::DeviceIndex index) const override
	{
		return at::make_generator<SpyreGenerator>(index < 0 ? (c10::DeviceIndex)current_device() : index,
							  c10::default_rng_seed_val);
	}
	at::Device getDeviceFromPtr(void *data) const override
	{
		return c10::Device(c10::DeviceType::PrivateUse1, (c10::DeviceIndex)current_device());
	}
	bool isPinnedPtr(const void *data) const override
	{
		return is_pinned(data);
	}
	at::Allocator *getPinnedMemoryAllocator() const override
	{
		return &g_pinned_alloc;
	}
};

/* Registered once, at load (the interface keeps the pointer for the process). */
const bool g_hooks_registered = [] {
	at::RegisterPrivateUse1HooksInterface(new SpyreHooks());
	return true;
}();

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	for (const char *op : { "normal_", "uniform_", "random_", "random_.from", "random_.to", "bernoulli_.Tensor",
				"bernoulli_.float", "exponential_", "log_normal_", "cauchy_", "geometric_",
				"multinomial", "randperm.generator_out" })
		m.impl(op, torch::CppFunction::makeFromBoxedFunction<&random_on_cpu>());
}

/* The default generators' seeds and states, for torch.spyre.manual_seed & co. */
TORCH_LIBRARY_FRAGMENT(spyre, m)
{
	m.def("manual_seed(int d, int seed) -> ()", [](int64_t d, int64_t seed) {
		const at::Generator &g = default_generator((int)d);
		std::lock_guard<std::mutex> l(g.unsafeGetGeneratorImpl()->mutex_);

		g.unsafeGetGeneratorImpl()->set_current_seed((uint64_t)seed);
	});
	m.def("initial_seed(int d) -> int",
	      [](int64_t d) { return (int64_t)default_generator((int)d).current_seed(); });
	m.def("get_rng_state(int d) -> Tensor", [](int64_t d) {
		const at::Generator &g = default_generator((int)d);
		std::lock_guard<std::mutex> l(g.unsafeGetGeneratorImpl()->mutex_);

		return at::Tensor::wrap_tensor_impl(g.unsafeGetGeneratorImpl()->get_state());
	});
	m.def("set_rng_state(int d, Tensor state) -> ()", [](int64_t d, const at::Tensor &state) {
		const at::Generator &g = default_generator((int)d);
		std::lock_guard<std::mutex> l(g.unsafeGetGeneratorImpl()->mutex_);

		TORCH_CHECK(state.device().is_cpu() && state.scalar_type() == at::kByte,
			    "spyre: an RNG state is a CPU ByteTensor (from get_rng_state)");
		g.unsafeGetGeneratorImpl()->set_state(*state.unsafeGetTensorImpl());
	});
	m.def("is_pinned_by_libspyre(Tensor t) -> bool", [](const at::Tensor &t) {
		/* libspyre's own answer: the block is its pinned host memory */
		struct spyre_pointer_attributes a = {};

		if (!t.is_cpu() || !t.data_ptr() || !device_count())
			return false;
		a.size = sizeof(a);
		if (spyre_pointer_get_attributes(device(current_device()), (uint64_t)(uintptr_t)t.data_ptr(), &a))
			return false;
		return a.type == SPYRE_MEMORY_HOST;
	});
}

}  // namespace spyre_torch
