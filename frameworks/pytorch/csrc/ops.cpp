// SPDX-License-Identifier: MIT
/*
 * ops.cpp - what every op file uses (ops.h): the counters (card_report(),
 * fallback_report(), relayouts()), the CPU fallback for every op without a
 * kernel (counted per op, warned once), kernel operands in the stick layout
 * and launches through libspyre's kernel library. The ops themselves live by
 * room: ops_matmul.cpp (mm, addmm, linear, bmm, baddbmm), ops_eltwise.cpp
 * (arithmetic with broadcasting and scalars, activations, where, masks),
 * ops_reduce.cpp (softmax, norms, sums, argmax), ops_shape.cpp (cat,
 * embedding); copy.cpp does the copies (relayouts of views with PERMUTE).
 *
 * Each op checks what its kernel supports (fp32/fp16/bf16, the shapes and
 * broadcasting it implements); anything else goes to the CPU fallback, so a
 * model always runs and the counters say what did not run on the card.
 * Kernel operands use the stick layout: a contiguous tensor whose rows are a
 * whole number of sticks is bound as it is; another is staged (relayouts()).
 * Elementwise ops see a contiguous tensor as rows of whole sticks, or as one
 * row (the allocation is whole sticks, so the padding of its last stick is
 * ours). Weight layout and device scratch are the kernel library's.
 */
#include <cerrno>
#include <map>
#include <mutex>

#include <torch/library.h>

#include "ops.h"

namespace spyre_torch {

/* ---- counters ------------------------------------------------------------------ */

namespace {
/* Never destroyed (as every global here): tensors freed during interpreter shutdown still find them. */
std::mutex &g_count_mu = *new std::mutex;
std::map<std::string, int64_t> &g_fallbacks = *new std::map<std::string, int64_t>;
int64_t g_relayouts;
std::map<std::string, int64_t> &g_on_card = *new std::map<std::string, int64_t>;	/* launches per op */
/* Why this thread's last kernel could not be built (libspyre's detail), for the fallback's warning. */
thread_local std::string t_why;
}  // namespace

void count_fallback(const std::string &op)
{
	bool first;
	std::string why;

	std::swap(why, t_why);
	{
		std::lock_guard<std::mutex> g(g_count_mu);

		first = g_fallbacks[op]++ == 0;
	}
	if (first)
		TORCH_WARN("spyre: ", op, " is not implemented on the card", why.empty() ? "" : " (" + why + ")",
			   "; it runs on the CPU (reported once per op)");
}

void count_relayout()
{
	std::lock_guard<std::mutex> g(g_count_mu);

	g_relayouts++;
}

void count_card(const char *op)
{
	std::lock_guard<std::mutex> g(g_count_mu);

	g_on_card[op]++;
}

/* ---- the fallback ------------------------------------------------------------- */

/*
 * cpu_fallback() puts the results on the device of the first tensor argument:
 * for `1 - x` (rsub: sub(1, x)) that is the CPU scalar torch wrapped the
 * number in. Then the results go to the card the other arguments are on.
 */
void fallback(const c10::OperatorHandle &op, torch::jit::Stack *stack)
{
	const auto &s = op.schema();
	size_t nargs = s.arguments().size(), nret = s.returns().size();
	std::optional<c10::Device> card;
	bool scalar_first = false, first = true;

	for (size_t i = stack->size() - nargs; i < stack->size(); i++) {
		const c10::IValue &v = (*stack)[i];

		if (!v.isTensor() || !v.toTensor().defined())
			continue;
		const at::Tensor &t = v.toTensor();

		if (first)
			scalar_first = cpu_scalar(t);
		first = false;
		if (on_card(t) && !card)
			card = t.device();
	}
	std::string name = s.overload_name().empty() ? s.name() : s.name() + "." + s.overload_name();

	if (card && spyre_stream_is_capturing(current_stream(card->index())) == 1)
		TORCH_CHECK(false, "spyre: ", name, " runs on the CPU (no kernel on the card), which a graph cannot "
			    "capture");
	count_fallback(name);
	at::native::cpu_fallback(op, stack);
	if (!scalar_first || !card)
		return;
	for (size_t i = stack->size() - nret; i < stack->size(); i++)
		if ((*stack)[i].isTensor() && (*stack)[i].toTensor().defined() && (*stack)[i].toTensor().is_cpu())
			(*stack)[i] = (*stack)[i].toTensor().to(*card);
}

/* ---- kernel operands -------------------------------------------------------------- */

bool kernel_dtype(at::ScalarType t, uint32_t *dt)
{
	switch (t) {
	case at::kFloat:
		*dt = SPYRE_DT_FP32;
		return true;
	case at::kHalf:
		*dt = SPYRE_DT_FP16;
		return true;
	case at::kBFloat16:
		*dt = SPYRE_DT_BF16;
		return true;
	default:
		return false;
	}
}

bool on_card(const at::Tensor &t)
{
	return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1;
}

bool card_float(const at::Tensor &t, uint32_t *dt)
{
	uint32_t d = 0;

	return on_card(t) && kernel_dtype(t.scalar_type(), dt ? dt : &d) && t.numel();
}

bool cpu_scalar(const at::Tensor &t)
{
	return t.defined() && t.is_cpu() && t.dim() == 0;
}

Operand operand(const at::Tensor &t, uint64_t rows, uint64_t cols, uint32_t dt)
{
	Operand o;
	uint64_t pitch = spyre_kernel_pitch(cols, dt);
	int d = t.device().index();

	if (t.is_contiguous() && dptr(t) % kStick == 0 && (rows == 1 || pitch == cols * t.element_size())) {
		o.ptr = dptr(t);
		return o;
	}
	count_relayout();
	at::Tensor h = t.cpu().contiguous().to(at::kFloat).reshape({ (int64_t)rows, (int64_t)cols });
	std::vector<uint8_t> buf(rows * pitch);

	spyre_kernel_pack(buf.data(), h.data_ptr<float>(), rows, cols, 0, dt);
	o.staged = alloc_scratch(d, buf.size());
	o.ptr = reinterpret_cast<uint64_t>(o.staged.get());
	copy_h2d(d, o.ptr, buf.data(), buf.size());
	return o;
}

Output::Output(const at::Tensor &t, uint64_t r, uint64_t c, uint32_t d) : y(t), rows(r), cols(c), dt(d)
{
	uint64_t pitch = spyre_kernel_pitch(cols, dt);

	if (dptr(y) % kStick == 0 && (rows == 1 || pitch == cols * y.element_size())) {
		o.ptr = dptr(y);
	} else {
		count_relayout();
		o.staged = alloc_scratch(y.device().index(), rows * pitch);
		o.ptr = reinterpret_cast<uint64_t>(o.staged.get());
	}
}

void Output::finish()
{
	if (!o.staged)
		return;
	uint64_t pitch = spyre_kernel_pitch(cols, dt);
	std::vector<uint8_t> buf(rows * pitch);
	at::Tensor h = at::empty({ (int64_t)rows, (int64_t)cols }, at::TensorOptions().dtype(at::kFloat));

	copy_d2h(y.device().index(), buf.data(), o.ptr, buf.size());
	spyre_kernel_unpack(h.data_ptr<float>(), buf.data(), rows, cols, 0, dt);
	y.copy_(h.to(y.scalar_type()).reshape(y.sizes()));
}

/* ---- kernels and launches ------------------------------------------------------------ */

Kernel::Kernel(int dev, struct spyre_kdesc d) : dev_(dev)
{
	d.size = sizeof(d);
	int rc = spyre_kernel_get(kcache(dev), &d, &k_);

	if (rc == -EINVAL) {
		const char *detail = spyre_last_error();

		k_ = nullptr;
		t_why = std::string(spyre_kernel_op_name(d.op)) + ": " +
			((detail && *detail) ? detail : spyre_strerror(rc));
		return;
	}
	if (rc)
		fail(std::string("kernel ") + spyre_kernel_op_name(d.op), rc);
}

void forget_kernel_error()
{
	t_why.clear();
}

Kernel::~Kernel()
{
	if (k_ && !kept_)
		spyre_kernel_put(k_);
}

void Kernel::launch(const std::vector<uint64_t> &slots, const uint64_t *scalars, uint32_t nscalars)
{
	spyre_stream_t *s = current_stream(dev_);
	int rc = spyre_kernel_launch(s, k_, slots.data(), (uint32_t)slots.size(), scalars, nscalars);

	/* a graph's launch names the kernel's program: the graph keeps it until it is destroyed */
	if (!rc && !kept_ && spyre_stream_is_capturing(s) == 1)
		kept_ = graph_keep_kernel(s, k_);

	if (rc) {
		struct spyre_kernel_info info = {};

		info.size = sizeof(info);
		spyre_kernel_get_info(k_, &info);
		fail(std::string("launch of ") + info.name, rc);
	}
}

bool run(const struct spyre_kdesc &d, const std::vector<Slot> &in, const Slot &out, const char *name)
{
	int dev = out.t.device().index();
	c10::DeviceGuard g(out.t.device());
	Kernel k(dev, d);

	if (!k)
		return false;
	std::vector<Operand> ops;
	std::vector<uint64_t> slots;

	for (const Slot &s : in) {
		ops.push_back(operand(s.t, s.rows, s.cols, s.dt));
		slots.push_back(ops.back().ptr);
	}
	Output yo(out.t, out.rows, out.cols, out.dt);

	slots.push_back(yo.o.ptr);
	count_card(name);
	k.launch(slots);
	yo.finish();
	return true;
}

void ew_shape(uint64_t numel, uint64_t per, uint64_t *rows, uint64_t *cols)
{
	if (numel % per == 0) {
		*rows = numel / per;
		*cols = per;
	} else {
		*rows = 1;
		*cols = numel;
	}
}

/* ---- the fallback for every other op, the counters ------------------------------------- */

TORCH_LIBRARY_IMPL(_, PrivateUse1, m)
{
	m.fallback(torch::CppFunction::makeFromBoxedFunction<&fallback>());
}

/* "name count" lines of a counter map, for spyre_torch's dicts. */
static std::string report(const std::map<std::string, int64_t> &counts)
{
	std::lock_guard<std::mutex> g(g_count_mu);
	std::string s;

	for (const auto &kv : counts)
		s += kv.first + " " + std::to_string(kv.second) + "\n";
	return s;
}

TORCH_LIBRARY_FRAGMENT(spyre, m)
{
	m.def("fallback_report() -> str", [] { return report(g_fallbacks); });
	m.def("card_report() -> str", [] { return report(g_on_card); });
	m.def("relayouts() -> int", [] {
		std::lock_guard<std::mutex> g(g_count_mu);

		return g_relayouts;
	});
	m.def("reset_counters() -> ()", [] {
		std::lock_guard<std::mutex> g(g_count_mu);

		g_fallbacks.clear();
		g_on_card.clear();
		g_relayouts = 0;
	});
}

}  // namespace spyre_torch
