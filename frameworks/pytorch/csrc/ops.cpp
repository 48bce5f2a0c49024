// SPDX-License-Identifier: MIT
/*
 * ops.cpp - compute on the card through libspyre's kernel library, and the
 * CPU fallback for every other op (counted per op, warned once).
 *
 * Each op checks what its kernel supports (fp32/fp16/bf16, the shapes and
 * broadcasting it implements); anything else goes to the CPU fallback, so a
 * model always runs and the counters say what did not run on the card.
 * Kernel operands use the stick layout: a contiguous tensor whose rows are a
 * whole number of sticks is bound as it is; another is staged (relayouts()).
 * Elementwise ops see a contiguous tensor as rows of one stick, or as one row
 * (the allocation is whole sticks, so the padding of its last stick is ours).
 * Weight layout and device scratch are the kernel library's: LINEAR reads
 * nn.Linear's W [n, k] as it is (SPYRE_KF_WEIGHT_NK) and kernels with a work
 * slot get it from spyre_kernel_launch().
 */
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <vector>

#include <ATen/Operators.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/_softmax.h>
#include <ATen/ops/add.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/embedding.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/layer_norm.h>
#include <ATen/ops/layer_norm_native.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/linear_native.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/native_layer_norm.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/silu.h>
#include <torch/library.h>

#include "spyre_torch.h"

namespace spyre_torch {

/* ---- counters ------------------------------------------------------------------ */

namespace {
/* Never destroyed (as every global here): tensors freed during interpreter shutdown still find them. */
std::mutex &g_count_mu = *new std::mutex;
std::map<std::string, int64_t> &g_fallbacks = *new std::map<std::string, int64_t>;
int64_t g_relayouts;
std::map<std::string, int64_t> &g_on_card = *new std::map<std::string, int64_t>;	/* launches per op */
}  // namespace

void count_fallback(const std::string &op)
{
	bool first;
	{
		std::lock_guard<std::mutex> g(g_count_mu);

		first = g_fallbacks[op]++ == 0;
	}
	if (first)
		TORCH_WARN("spyre: ", op, " is not implemented on the card; it runs on the CPU (reported once per op)");
}

void count_relayout()
{
	std::lock_guard<std::mutex> g(g_count_mu);

	g_relayouts++;
}

static void count_card(const char *op)
{
	std::lock_guard<std::mutex> g(g_count_mu);

	g_on_card[op]++;
}

/* ---- the fallback ------------------------------------------------------------- */

static void fallback(const c10::OperatorHandle &op, torch::jit::Stack *stack)
{
	const auto &s = op.schema();

	count_fallback(s.overload_name().empty() ? s.name() : s.name() + "." + s.overload_name());
	at::native::cpu_fallback(op, stack);
}

#define FALLBACK(op, ...) at::native::call_fallback_fn<&fallback, ATEN_OP(op)>::call(__VA_ARGS__)

/* ---- kernel operands -------------------------------------------------------------- */

namespace {

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

/*
 * A device tensor's values as a stick-layout matrix [rows x cols]: bound in
 * place when it already is one, else staged (one relayout, via the host).
 */
struct Operand {
	uint64_t ptr = 0;
	at::DataPtr staged;
};

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

/* The output: @y (fresh, contiguous) itself, or a stick-layout buffer unpacked into it by finish(). */
struct Output {
	at::Tensor y;
	uint64_t rows, cols;
	uint32_t dt = 0;
	Operand o;

	Output(const at::Tensor &t, uint64_t r, uint64_t c, uint32_t d) : y(t), rows(r), cols(c), dt(d)
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
	void finish()
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
};

/*
 * Get the kernel of @d on @dev's cache and launch it with @slots; a kernel
 * that needs device scratch ("work") gets it from the kernel library.
 */
void launch(int dev, struct spyre_kdesc d, const std::vector<uint64_t> &slots, const uint64_t *scalars = nullptr,
	    uint32_t nscalars = 0)
{
	spyre_kernel_t *k = nullptr;
	struct spyre_kernel_info info = {};

	d.size = sizeof(d);
	SPYRE_CHECK(spyre_kernel_get(kcache(dev), &d, &k), std::string("kernel ") + spyre_kernel_op_name(d.op));
	info.size = sizeof(info);
	spyre_kernel_get_info(k, &info);
	int rc = spyre_kernel_launch(current_stream(dev), k, slots.data(), (uint32_t)slots.size(), scalars,
				     nscalars);

	spyre_kernel_put(k);
	if (rc)
		fail(std::string("launch of ") + info.name, rc);
}

/* An elementwise view of contiguous @t: rows of one stick, or one row. */
void ew_shape(const at::Tensor &t, uint64_t *rows, uint64_t *cols)
{
	uint64_t n = (uint64_t)t.numel(), per = kStick / t.element_size();

	if (n % per == 0) {
		*rows = n / per;
		*cols = per;
	} else {
		*rows = 1;
		*cols = n;
	}
}

/* ---- matmuls --------------------------------------------------------------------- */

/*
 * Y [m, n] = X [m, k] B (+ bias [n]) with the LINEAR kernel; B given as
 * @w [k, n], or with @nk as W [n, k] (nn.Linear's weight, B = W^T: the
 * kernel reads it as it is, SPYRE_KF_WEIGHT_NK).
 */
at::Tensor linear_w(const at::Tensor &x2, const at::Tensor &w, bool nk, const at::Tensor &bias, uint32_t dt)
{
	int dev = x2.device().index();
	uint64_t m = x2.size(0), k = x2.size(1), n = nk ? w.size(0) : w.size(1);
	at::Tensor y = at::empty({ (int64_t)m, (int64_t)n }, x2.options());
	struct spyre_kdesc d = {};
	Operand xo = operand(x2, m, k, dt), wo = nk ? operand(w, n, k, dt) : operand(w, k, n, dt), bo;
	Output yo(y, m, n, dt);
	std::vector<uint64_t> slots{ xo.ptr, wo.ptr };
	at::Tensor b32;		/* alive until the launch */

	d.op = SPYRE_KOP_LINEAR;
	d.dtype = dt;
	d.m = m;
	d.n = n;
	d.k = k;
	if (nk)
		d.flags |= SPYRE_KF_WEIGHT_NK;
	if (bias.defined()) {
		b32 = (bias.scalar_type() == at::kFloat ? bias : bias.to(at::kFloat)).contiguous();
		bo = operand(b32.reshape({ 1, (int64_t)n }), 1, n, SPYRE_DT_FP32);
		d.flags |= SPYRE_KF_BIAS;
		slots.push_back(bo.ptr);
	}
	slots.push_back(yo.o.ptr);
	launch(dev, d, slots);
	yo.finish();
	return y;
}

bool matmul_ok(const at::Tensor &a, const at::Tensor &b, uint32_t *dt)
{
	return on_card(a) && on_card(b) && a.device() == b.device() && a.scalar_type() == b.scalar_type() &&
	       kernel_dtype(a.scalar_type(), dt) && a.numel() && b.numel();
}

/* @b [k, n] as the B of linear_w(): W [n, k] itself when @b is W.t(), else @b made contiguous. */
bool b_is_wt(const at::Tensor &b)
{
	return b.dim() == 2 && !b.is_contiguous() && b.t().is_contiguous();
}

at::Tensor mm(const at::Tensor &a, const at::Tensor &b)
{
	uint32_t dt = 0;

	if (!matmul_ok(a, b, &dt) || a.dim() != 2 || b.dim() != 2 || a.size(1) != b.size(0))
		return FALLBACK(mm, a, b);
	c10::DeviceGuard g(a.device());
	count_card("mm");
	bool nk = b_is_wt(b);

	return linear_w(a.contiguous(), nk ? b.t() : b.contiguous(), nk, at::Tensor(), dt);
}

at::Tensor addmm(const at::Tensor &bias, const at::Tensor &a, const at::Tensor &b, const at::Scalar &beta,
		 const at::Scalar &alpha)
{
	uint32_t dt = 0;

	if (!matmul_ok(a, b, &dt) || a.dim() != 2 || b.dim() != 2 || a.size(1) != b.size(0) || !on_card(bias) ||
	    beta.toDouble() != 1.0 || alpha.toDouble() != 1.0 || bias.numel() != b.size(1) ||
	    (bias.dim() == 2 && bias.size(0) != 1) || bias.dim() > 2)
		return FALLBACK(addmm, bias, a, b, beta, alpha);
	c10::DeviceGuard g(a.device());
	count_card("addmm");
	bool nk = b_is_wt(b);

	return linear_w(a.contiguous(), nk ? b.t() : b.contiguous(), nk, bias.reshape({ -1 }), dt);
}

at::Tensor linear(const at::Tensor &x, const at::Tensor &w, const std::optional<at::Tensor> &bias)
{
	uint32_t dt = 0;
	at::Tensor bb = bias ? *bias : at::Tensor();

	if (!matmul_ok(x, w, &dt) || w.dim() != 2 || x.dim() < 1 || x.size(-1) != w.size(1) ||
	    (bb.defined() && (!on_card(bb) || bb.dim() != 1 || bb.size(0) != w.size(0)))) {
		at::Tensor y = at::matmul(x, w.t());

		return bb.defined() ? y + bb : y;
	}
	c10::DeviceGuard g(x.device());
	count_card("linear");
	std::vector<int64_t> out(x.sizes().begin(), x.sizes().end());
	out.back() = w.size(0);
	/* W [n, k] as nn.Linear keeps it: the kernel reads it as it is */
	at::Tensor y = linear_w(x.contiguous().reshape({ -1, x.size(-1) }), w.contiguous(), true, bb, dt);

	return y.reshape(out);
}

at::Tensor bmm(const at::Tensor &a, const at::Tensor &b)
{
	uint32_t dt = 0;

	if (!matmul_ok(a, b, &dt) || a.dim() != 3 || b.dim() != 3 || a.size(0) != b.size(0) ||
	    a.size(2) != b.size(1))
		return FALLBACK(bmm, a, b);
	c10::DeviceGuard g(a.device());
	int dev = a.device().index();
	uint64_t B = a.size(0), m = a.size(1), k = a.size(2), n = b.size(2);
	at::Tensor y = at::empty({ (int64_t)B, (int64_t)m, (int64_t)n }, a.options());
	at::Tensor ac = a.contiguous(), bc = b.contiguous();
	Operand ao = operand(ac, B * m, k, dt), bo = operand(bc, B * k, n, dt);
	Output yo(y, B * m, n, dt);
	struct spyre_kdesc d = {};

	count_card("bmm");
	d.op = SPYRE_KOP_BMM;
	d.dtype = dt;
	d.batch = (uint32_t)B;
	d.m = m;
	d.n = n;
	d.k = k;
	launch(dev, d, { ao.ptr, bo.ptr, yo.o.ptr });
	yo.finish();
	return y;
}

/* ---- elementwise -------------------------------------------------------------------- */

/* An elementwise kernel over same-shape inputs @in (1 or 2), seen as rows of one stick or one row. */
at::Tensor elementwise(uint32_t kop, const char *name, std::initializer_list<at::Tensor> in, float alpha)
{
	uint32_t dt = 0;
	const at::Tensor &x0 = *in.begin();

	c10::DeviceGuard g(x0.device());
	std::vector<at::Tensor> xs;	/* contiguous inputs, alive until the launch */
	std::vector<Operand> ops;
	std::vector<uint64_t> slots;
	uint64_t rows, cols;

	for (const at::Tensor &t : in)
		xs.push_back(t.contiguous());
	at::Tensor y = at::empty_like(xs[0]);

	kernel_dtype(x0.scalar_type(), &dt);
	ew_shape(xs[0], &rows, &cols);
	for (const at::Tensor &t : xs) {
		ops.push_back(operand(t, rows, cols, dt));
		slots.push_back(ops.back().ptr);
	}
	Output yo(y, rows, cols, dt);
	struct spyre_kdesc d = {};

	slots.push_back(yo.o.ptr);
	count_card(name);
	d.op = kop;
	d.dtype = dt;
	d.m = rows;
	d.n = cols;
	d.alpha = alpha;
	launch(x0.device().index(), d, slots);
	yo.finish();
	return y;
}

bool same_shape_ok(const at::Tensor &a, const at::Tensor &b)
{
	uint32_t dt = 0;

	return on_card(a) && on_card(b) && a.device() == b.device() && a.sizes() == b.sizes() &&
	       a.scalar_type() == b.scalar_type() && kernel_dtype(a.scalar_type(), &dt) && a.numel();
}

at::Tensor add(const at::Tensor &a, const at::Tensor &b, const at::Scalar &alpha)
{
	double al = alpha.toDouble();

	if (!same_shape_ok(a, b) || al == 0.0)
		return FALLBACK(add_Tensor, a, b, alpha);
	return elementwise(SPYRE_KOP_ADD, "add", { a, b }, (float)al);
}

at::Tensor mul(const at::Tensor &a, const at::Tensor &b)
{
	if (!same_shape_ok(a, b))
		return FALLBACK(mul_Tensor, a, b);
	return elementwise(SPYRE_KOP_MUL, "mul", { a, b }, 0);
}

bool unary_ok(const at::Tensor &x)
{
	uint32_t dt = 0;

	return on_card(x) && kernel_dtype(x.scalar_type(), &dt) && x.numel();
}

at::Tensor relu(const at::Tensor &x)
{
	return unary_ok(x) ? elementwise(SPYRE_KOP_RELU, "relu", { x }, 0) : FALLBACK(relu, x);
}

at::Tensor silu(const at::Tensor &x)
{
	return unary_ok(x) ? elementwise(SPYRE_KOP_SILU, "silu", { x }, 0) : FALLBACK(silu, x);
}

at::Tensor gelu(const at::Tensor &x, c10::string_view approximate)
{
	return unary_ok(x) && approximate == "none" ? elementwise(SPYRE_KOP_GELU, "gelu", { x }, 0) :
						      FALLBACK(gelu, x, approximate);
}

/* ---- softmax, norms ------------------------------------------------------------------ */

at::Tensor softmax(const at::Tensor &x, int64_t dim, bool half_to_float)
{
	uint32_t dt = 0;

	if (!unary_ok(x) || half_to_float || x.dim() < 1 || c10::maybe_wrap_dim(dim, x.dim()) != x.dim() - 1)
		return FALLBACK(_softmax, x, dim, half_to_float);
	kernel_dtype(x.scalar_type(), &dt);
	c10::DeviceGuard g(x.device());
	uint64_t n = x.size(-1), m = x.numel() / n;
	at::Tensor xc = x.contiguous(), y = at::empty_like(xc);
	Operand xo = operand(xc, m, n, dt);
	Output yo(y, m, n, dt);
	struct spyre_kdesc d = {};

	count_card("softmax");
	d.op = SPYRE_KOP_SOFTMAX;
	d.dtype = dt;
	d.m = m;
	d.n = n;
	launch(x.device().index(), d, { xo.ptr, yo.o.ptr });
	yo.finish();
	return y;
}

/* Y = norm(X) * w (+ b) over the last dimension with RMSNORM or LAYERNORM; w, b [n] in X's dtype. */
at::Tensor norm(uint32_t kop, const at::Tensor &x, const at::Tensor &w, const at::Tensor &b, double eps)
{
	uint32_t dt = 0;

	kernel_dtype(x.scalar_type(), &dt);
	c10::DeviceGuard g(x.device());
	uint64_t n = x.size(-1), m = x.numel() / n;
	at::Tensor xc = x.contiguous(), y = at::empty_like(xc);
	at::Tensor wx = (w.defined() ? w : at::ones({ (int64_t)n }, x.options())).to(x.scalar_type()).contiguous();
	at::Tensor bx = kop == SPYRE_KOP_LAYERNORM ?
		(b.defined() ? b : at::zeros({ (int64_t)n }, x.options())).to(x.scalar_type()).contiguous() : at::Tensor();
	Operand xo = operand(xc, m, n, dt), wo = operand(wx.reshape({ 1, (int64_t)n }), 1, n, dt), bo;
	Output yo(y, m, n, dt);
	std::vector<uint64_t> slots{ xo.ptr, wo.ptr };
	struct spyre_kdesc d = {};

	if (bx.defined()) {
		bo = operand(bx.reshape({ 1, (int64_t)n }), 1, n, dt);
		slots.push_back(bo.ptr);
	}
	slots.push_back(yo.o.ptr);
	d.op = kop;
	d.dtype = dt;
	d.m = m;
	d.n = n;
	d.eps = (float)eps;
	launch(x.device().index(), d, slots);
	yo.finish();
	return y;
}

bool norm_ok(const at::Tensor &x, at::IntArrayRef shape, const at::Tensor &w, const at::Tensor &b)
{
	return unary_ok(x) && shape.size() == 1 && x.dim() >= 1 && x.size(-1) == shape[0] &&
	       (!w.defined() || (on_card(w) && w.numel() == shape[0])) &&
	       (!b.defined() || (on_card(b) && b.numel() == shape[0]));
}

at::Tensor layer_norm(const at::Tensor &x, at::IntArrayRef shape, const std::optional<at::Tensor> &w,
		      const std::optional<at::Tensor> &b, double eps, bool cudnn)
{
	at::Tensor ww = w ? *w : at::Tensor(), bb = b ? *b : at::Tensor();

	if (!norm_ok(x, shape, ww, bb))
		return std::get<0>(at::native_layer_norm(x, shape, w, b, eps));
	count_card("layer_norm");
	return norm(SPYRE_KOP_LAYERNORM, x, ww, bb, eps);
}

/* With autograd in the way (no inference mode): Y on the card, mean and rstd from the CPU. */
std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm(const at::Tensor &x, at::IntArrayRef shape,
								 const std::optional<at::Tensor> &w,
								 const std::optional<at::Tensor> &b, double eps)
{
	at::Tensor ww = w ? *w : at::Tensor(), bb = b ? *b : at::Tensor();

	if (!norm_ok(x, shape, ww, bb))
		return FALLBACK(native_layer_norm, x, shape, w, b, eps);
	count_card("native_layer_norm");
	at::Tensor y = norm(SPYRE_KOP_LAYERNORM, x, ww, bb, eps);
	at::Tensor h = x.cpu().to(at::kFloat);
	std::vector<int64_t> st(x.sizes().begin(), x.sizes().end());
	st.back() = 1;
	at::Tensor mean = h.mean(-1, true), rstd = (h.var(-1, false, true) + eps).rsqrt();

	return { y, mean.to(x.device()).reshape(st), rstd.to(x.device()).reshape(st) };
}

at::Tensor rms_norm(const at::Tensor &x, const at::Tensor &w, double eps)
{
	TORCH_CHECK(unary_ok(x) && on_card(w) && x.dim() >= 1 && w.numel() == x.size(-1),
		    "spyre::rms_norm: x on the card (fp32/fp16/bf16) and w [", x.dim() ? x.size(-1) : 0,
		    "] on the card");
	count_card("rms_norm");
	return norm(SPYRE_KOP_RMSNORM, x, w, at::Tensor(), eps);
}

/* ---- embedding ------------------------------------------------------------------------ */

at::Tensor embedding(const at::Tensor &w, const at::Tensor &idx, int64_t pad, bool scale, bool sparse)
{
	uint32_t dt = 0;

	if (!on_card(w) || !kernel_dtype(w.scalar_type(), &dt) || w.dim() != 2 || sparse || !idx.numel())
		return FALLBACK(embedding, w, idx, pad, scale, sparse);
	c10::DeviceGuard g(w.device());
	int dev = w.device().index();
	uint64_t vocab = w.size(0), hidden = w.size(1), count = idx.numel();
	at::Tensor ids = idx.cpu().to(at::kInt).contiguous().reshape({ -1 });
	std::vector<int64_t> out(idx.sizes().begin(), idx.sizes().end());
	out.push_back((int64_t)hidden);
	at::Tensor y = at::empty({ (int64_t)count, (int64_t)hidden }, w.options());
	at::Tensor wc = w.contiguous();
	Operand wo = operand(wc, vocab, hidden, dt);
	Output yo(y, count, hidden, dt);
	const int32_t *tok = ids.data_ptr<int32_t>();
	uint64_t pitch = spyre_kernel_pitch(hidden, dt);

	for (uint64_t i = 0; i < count; i++)
		TORCH_CHECK(tok[i] >= 0 && (uint64_t)tok[i] < vocab, "spyre: embedding index ", tok[i],
			    " is out of range (", vocab, " rows)");
	count_card("embedding");
	for (uint64_t i0 = 0; i0 < count; i0 += 198) {	/* at most 198 tokens per launch */
		uint64_t m = std::min<uint64_t>(198, count - i0);
		struct spyre_kdesc d = {};
		std::vector<uint64_t> sc(m);

		d.size = sizeof(d);
		d.op = SPYRE_KOP_EMBEDDING;
		d.dtype = dt;
		d.m = m;
		d.n = vocab;
		d.k = hidden;
		SPYRE_CHECK(spyre_kernel_embedding_scalars(&d, tok + i0, sc.data()), "embedding scalars");
		launch(dev, d, { wo.ptr, yo.o.ptr + i0 * pitch }, sc.data(), (uint32_t)m);
	}
	yo.finish();
	return y.reshape(out);
}

}  // namespace

/* ---- registration ---------------------------------------------------------------- */

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("mm", mm);
	m.impl("addmm", addmm);
	m.impl("linear", linear);
	m.impl("bmm", bmm);
	m.impl("add.Tensor", add);
	m.impl("mul.Tensor", mul);
	m.impl("relu", relu);
	m.impl("silu", silu);
	m.impl("gelu", gelu);
	m.impl("_softmax", softmax);
	m.impl("layer_norm", layer_norm);
	m.impl("native_layer_norm", native_layer_norm);
	m.impl("embedding", embedding);
}

/*
 * linear and layer_norm are CompositeImplicitAutograd: with a PrivateUse1
 * kernel registered, autograd (AutogradPrivateUse1) needs one too. With
 * gradients possible it is the composite decomposition (matmul, add;
 * native_layer_norm), which records the graph and reaches the card kernels
 * above; in inference mode the PrivateUse1 kernels run directly.
 */
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m)
{
	m.impl("linear", at::native::linear);
	m.impl("layer_norm", at::native::layer_norm_symint);
}

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
	m.def("rms_norm(Tensor x, Tensor w, float eps) -> Tensor");
	m.impl("rms_norm", c10::DispatchKey::PrivateUse1, TORCH_FN(rms_norm));
	m.impl("rms_norm", c10::DispatchKey::AutogradPrivateUse1, TORCH_FN(rms_norm));	/* inference only */
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
