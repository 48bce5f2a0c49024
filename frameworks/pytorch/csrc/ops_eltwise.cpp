// SPDX-License-Identifier: MIT
/*
 * ops_eltwise.cpp - elementwise ops on the card: arithmetic (add, sub, mul,
 * div, rsub, maximum, minimum) with broadcasting and Python scalars, the
 * activations and math functions (UNARY, RELU, SILU, GELU), pow by a
 * scalar, where, masked_fill, tril / triu; their in-place and out= forms.
 *
 * A contiguous tensor is seen as rows of whole sticks, or as one row, so an
 * elementwise kernel binds it as it is. Broadcasting is flattened to
 * [outer x inner]: an operand that is the other's trailing dimensions (a
 * bias [n], a mask [1, 1, s, s]) is BINARY's SPYRE_KF_BCAST_ROW, one that is
 * its leading dimensions (x * [.., 1]) SPYRE_KF_BCAST_COL, either on the
 * left side SPYRE_KF_REVERSE (which scales the full one by alpha, as torch);
 * any other broadcast falls back. A Python
 * number (a CPU 0-dim tensor) on either side is UNARY SCALE (alpha x + beta).
 *
 * In-place and out= forms compute the functional op, then copy the result
 * into the tensor given (a device copy): one extra pass over the output,
 * but every form then takes the same checks and the same kernels.
 */
#include <cmath>

#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/add.h>
#include <ATen/ops/div.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/log.h>
#include <ATen/ops/masked_fill.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/minimum.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/neg.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/reciprocal.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/rsqrt.h>
#include <ATen/ops/rsub.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/silu.h>
#include <ATen/ops/sqrt.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/tanh.h>
#include <ATen/ops/tril.h>
#include <ATen/ops/triu.h>
#include <ATen/ops/where.h>
#include <torch/library.h>

#include "ops.h"

namespace spyre_torch {

/* ---- the kernels: UNARY (and the 0.4 activations), BINARY --------------------------- */

namespace {

/* Op @d (op, fn, scalars set) over @x elementwise: Y [rows x cols] of whole sticks, or one row. */
at::Tensor ew1(struct spyre_kdesc d, const at::Tensor &x, const char *name)
{
	uint32_t dt = 0;

	if (!card_float(x, &dt))
		return at::Tensor();
	at::Tensor xc = x.contiguous(), y = at::empty(x.sizes(), x.options());
	uint64_t rows, cols;

	ew_shape(xc.numel(), kStick / xc.element_size(), &rows, &cols);
	d.dtype = dt;
	d.m = rows;
	d.n = cols;
	return run(d, { { xc, rows, cols, dt } }, { y, rows, cols, dt }, name) ? y : at::Tensor();
}

at::Tensor ew_op(uint32_t kop, const at::Tensor &x, const char *name)
{
	struct spyre_kdesc d = {};

	d.op = kop;
	return ew1(d, x, name);
}

}  // namespace

at::Tensor unary(uint32_t fn, const at::Tensor &x, float alpha, float beta, const char *name)
{
	struct spyre_kdesc d = {};

	d.op = SPYRE_KOP_UNARY;
	d.fn = fn;
	d.alpha = alpha;
	d.beta = beta;
	return ew1(d, x, name);
}

namespace {

/* @t fn @s (@t_first) or @s fn @t for a Python number @s: UNARY SCALE (and RECIP for s / t). */
at::Tensor scalar_op(uint32_t fn, const at::Tensor &t, double s, bool t_first, double alpha, const char *name)
{
	switch (fn) {
	case SPYRE_KFN_ADD:
		return t_first ? unary(SPYRE_KFN_SCALE, t, 1, (float)(alpha * s), name) :
				 unary(SPYRE_KFN_SCALE, t, (float)alpha, (float)s, name);
	case SPYRE_KFN_SUB:
		return t_first ? unary(SPYRE_KFN_SCALE, t, 1, (float)(-alpha * s), name) :
				 unary(SPYRE_KFN_SCALE, t, (float)-alpha, (float)s, name);
	case SPYRE_KFN_MUL:
		return unary(SPYRE_KFN_SCALE, t, (float)s, 0, name);
	case SPYRE_KFN_DIV:
		if (t_first)
			return unary(SPYRE_KFN_SCALE, t, (float)(1.0 / s), 0, name);
		else {
			at::Tensor r = unary(SPYRE_KFN_RECIP, t, 0, 0, name);

			return s == 1.0 || !r.defined() ? r : unary(SPYRE_KFN_SCALE, r, (float)s, 0, name);
		}
	default:
		return at::Tensor();
	}
}

int64_t prod(at::IntArrayRef s, size_t from, size_t to)
{
	int64_t p = 1;

	for (size_t i = from; i < to; i++)
		p *= s[i];
	return p;
}

}  // namespace

at::Tensor binary(uint32_t fn, const at::Tensor &a, const at::Tensor &b, double alpha, const char *name)
{
	uint32_t dt = 0;

	if (!a.defined() || !b.defined())
		return at::Tensor();
	TORCH_CHECK(a.device() == b.device() || cpu_scalar(a) || cpu_scalar(b),
		    "Expected all tensors to be on the same device, but found at least two devices, ", a.device(),
		    " and ", b.device(), "!");
	at::ScalarType rt = at::result_type(a, b);

	if (!kernel_dtype(rt, &dt))
		return at::Tensor();
	if (cpu_scalar(b) && card_float(a) && a.scalar_type() == rt)
		return scalar_op(fn, a, b.item().toDouble(), true, alpha, name);
	if (cpu_scalar(a) && card_float(b) && b.scalar_type() == rt)
		return scalar_op(fn, b, a.item().toDouble(), false, alpha, name);
	if (!card_float(a) || !card_float(b) || a.scalar_type() != b.scalar_type() ||
	    (alpha == 0.0 && (fn == SPYRE_KFN_ADD || fn == SPYRE_KFN_SUB)))	/* the kernels take alpha 0 as 1 */
		return at::Tensor();
	std::vector<int64_t> S = at::infer_size(a.sizes(), b.sizes());	/* raises for shapes that do not broadcast */
	at::IntArrayRef s(S);
	at::Tensor y = at::empty(S, a.options());
	struct spyre_kdesc d = {};
	uint64_t rows, cols;

	d.dtype = dt;
	if (a.numel() == y.numel() && b.numel() == y.numel()) {
		/* the same elements (perhaps in fewer dimensions): one view for all three */
		ew_shape(y.numel(), kStick / y.element_size(), &rows, &cols);
		d.m = rows;
		d.n = cols;
		if (fn == SPYRE_KFN_ADD || fn == SPYRE_KFN_SUB) {
			d.op = SPYRE_KOP_ADD;
			d.alpha = (float)(fn == SPYRE_KFN_SUB ? -alpha : alpha);
		} else if (fn == SPYRE_KFN_MUL) {
			d.op = SPYRE_KOP_MUL;
		} else {
			d.op = SPYRE_KOP_BINARY;
			d.fn = fn;
		}
		return run(d, { { a.contiguous(), rows, cols, dt }, { b.contiguous(), rows, cols, dt } },
			   { y, rows, cols, dt }, name) ? y : at::Tensor();
	}
	bool a_full = a.sizes() == s;

	if (!a_full && b.sizes() != s)
		return at::Tensor();	/* both broadcast */
	const at::Tensor &full = a_full ? a : b, &bc = a_full ? b : a;
	size_t n = s.size();
	std::vector<int64_t> bs(n, 1);

	for (size_t i = 0; i < (size_t)bc.dim(); i++)
		bs[n - bc.dim() + i] = bc.size(i);
	/* row: bc is S's trailing dimensions [q, n) (ones before); column: S's leading [0, p) (ones after) */
	size_t q = n, p = 0;

	while (q > 0 && bs[q - 1] == s[q - 1])
		q--;
	while (p < n && bs[p] == s[p])
		p++;
	bool row_ok = prod(bs, 0, q) == 1, col_ok = prod(bs, p, n) == 1;
	uint64_t rc = prod(s, 0, p), cc = prod(s, p, n);
	bool col_aligned = rc == 1 || (cc * y.element_size()) % kStick == 0;

	if (col_ok && (col_aligned || !row_ok)) {
		rows = rc;
		cols = cc;
		d.flags = SPYRE_KF_BCAST_COL;
	} else if (row_ok) {
		rows = prod(s, 0, q);
		cols = prod(s, q, n);
		d.flags = SPYRE_KF_BCAST_ROW;
	} else {
		return at::Tensor();
	}
	if (!a_full)
		d.flags |= SPYRE_KF_REVERSE;	/* Y = B fn alpha A: the broadcast one first */
	d.op = SPYRE_KOP_BINARY;
	d.fn = fn;
	if (fn == SPYRE_KFN_ADD || fn == SPYRE_KFN_SUB)
		d.alpha = (float)alpha;	/* the library refuses a scalar its fn does not use */
	d.m = rows;
	d.n = cols;
	at::Tensor bv = bc.contiguous().reshape({ 1, -1 });
	uint64_t bn = d.flags & SPYRE_KF_BCAST_ROW ? cols : rows;

	return run(d, { { full.contiguous(), rows, cols, dt }, { bv, 1, bn, dt } }, { y, rows, cols, dt }, name) ?
		       y : at::Tensor();
}

namespace {

/* ---- arithmetic ---------------------------------------------------------------------- */

at::Tensor add(const at::Tensor &a, const at::Tensor &b, const at::Scalar &alpha)
{
	at::Tensor y = alpha.isComplex() ? at::Tensor() : binary(SPYRE_KFN_ADD, a, b, alpha.toDouble(), "add");

	return y.defined() ? y : FALLBACK(add_Tensor, a, b, alpha);
}

at::Tensor sub(const at::Tensor &a, const at::Tensor &b, const at::Scalar &alpha)
{
	at::Tensor y = alpha.isComplex() ? at::Tensor() : binary(SPYRE_KFN_SUB, a, b, alpha.toDouble(), "sub");

	return y.defined() ? y : FALLBACK(sub_Tensor, a, b, alpha);
}

/* rsub(a, b, alpha) = b - alpha a */
at::Tensor rsub(const at::Tensor &a, const at::Tensor &b, const at::Scalar &alpha)
{
	at::Tensor y = alpha.isComplex() ? at::Tensor() : binary(SPYRE_KFN_SUB, b, a, alpha.toDouble(), "rsub");

	return y.defined() ? y : FALLBACK(rsub_Tensor, a, b, alpha);
}

at::Tensor mul(const at::Tensor &a, const at::Tensor &b)
{
	at::Tensor y = binary(SPYRE_KFN_MUL, a, b, 1, "mul");

	return y.defined() ? y : FALLBACK(mul_Tensor, a, b);
}

at::Tensor div(const at::Tensor &a, const at::Tensor &b)
{
	at::Tensor y = binary(SPYRE_KFN_DIV, a, b, 1, "div");

	return y.defined() ? y : FALLBACK(div_Tensor, a, b);
}

at::Tensor maximum(const at::Tensor &a, const at::Tensor &b)
{
	at::Tensor y = cpu_scalar(a) || cpu_scalar(b) ? at::Tensor() : binary(SPYRE_KFN_MAX, a, b, 1, "maximum");

	return y.defined() ? y : FALLBACK(maximum, a, b);
}

at::Tensor minimum(const at::Tensor &a, const at::Tensor &b)
{
	at::Tensor y = cpu_scalar(a) || cpu_scalar(b) ? at::Tensor() : binary(SPYRE_KFN_MIN, a, b, 1, "minimum");

	return y.defined() ? y : FALLBACK(minimum, a, b);
}

/* ---- activations, math functions ------------------------------------------------------- */

at::Tensor relu(const at::Tensor &x)
{
	at::Tensor y = ew_op(SPYRE_KOP_RELU, x, "relu");

	return y.defined() ? y : FALLBACK(relu, x);
}

at::Tensor silu(const at::Tensor &x)
{
	at::Tensor y = ew_op(SPYRE_KOP_SILU, x, "silu");

	return y.defined() ? y : FALLBACK(silu, x);
}

at::Tensor gelu(const at::Tensor &x, c10::string_view approximate)
{
	at::Tensor y = approximate == "none" ? ew_op(SPYRE_KOP_GELU, x, "gelu") :
		       approximate == "tanh" ? unary(SPYRE_KFN_GELU_TANH, x, 0, 0, "gelu") : at::Tensor();

	return y.defined() ? y : FALLBACK(gelu, x, approximate);
}

#define UNARY_OP(op, fn, alpha, beta)                                        \
	at::Tensor op(const at::Tensor &x)                                    \
	{                                                                     \
		at::Tensor y = unary(fn, x, alpha, beta, #op);                \
									      \
		return y.defined() ? y : FALLBACK(op, x);                     \
	}

UNARY_OP(exp, SPYRE_KFN_EXP, 0, 0)
UNARY_OP(log, SPYRE_KFN_LOG, 0, 0)
UNARY_OP(sigmoid, SPYRE_KFN_SIGMOID, 0, 0)
UNARY_OP(tanh, SPYRE_KFN_TANH, 0, 0)
UNARY_OP(rsqrt, SPYRE_KFN_RSQRT, 0, 0)
UNARY_OP(sqrt, SPYRE_KFN_SQRT, 0, 0)
UNARY_OP(reciprocal, SPYRE_KFN_RECIP, 0, 0)
UNARY_OP(abs, SPYRE_KFN_ABS, 0, 0)
UNARY_OP(neg, SPYRE_KFN_SCALE, -1, 0)

/* x ^ e: e = 2 is x * x (MUL), +-0.5 and -1 their functions, else POW. */
at::Tensor pow(const at::Tensor &x, const at::Scalar &e)
{
	at::Tensor y;

	if (!e.isComplex() && card_float(x) && at::result_type(x, e) == x.scalar_type()) {
		double v = e.toDouble();

		y = v == 2.0 ? binary(SPYRE_KFN_MUL, x, x, 1, "pow") :
		    v == 0.5 ? unary(SPYRE_KFN_SQRT, x, 0, 0, "pow") :
		    v == -0.5 ? unary(SPYRE_KFN_RSQRT, x, 0, 0, "pow") :
		    v == -1.0 ? unary(SPYRE_KFN_RECIP, x, 0, 0, "pow") :
				unary(SPYRE_KFN_POW, x, (float)v, 0, "pow");
	}
	return y.defined() ? y : FALLBACK(pow_Tensor_Scalar, x, e);
}

/* ---- where, masked_fill, tril / triu --------------------------------------------------- */

/*
 * C ? A : B with WHERE: @cond bool on the card, A and B tensors of its
 * shape and of @type (the output's) or numbers (@sa, @sb; SPYRE_KF_SCALAR_A / _B).
 * Every tensor is seen as rows of 128 elements (a whole stick of int8, whole
 * sticks of the others) or one row.
 */
at::Tensor where_card(const at::Tensor &cond, const at::Tensor &a, std::optional<double> sa, const at::Tensor &b,
		      std::optional<double> sb, at::ScalarType type, const char *name)
{
	uint32_t dt = 0;

	if (!kernel_dtype(type, &dt) || !on_card(cond) || cond.scalar_type() != at::kBool || !cond.numel())
		return at::Tensor();
	for (const at::Tensor *t : { &a, &b })
		if (t->defined() && (!on_card(*t) || t->device() != cond.device() || t->sizes() != cond.sizes() ||
				     t->scalar_type() != type))
			return at::Tensor();
	at::Tensor c = cond.contiguous(), y = at::empty(cond.sizes(), cond.options().dtype(type));
	struct spyre_kdesc d = {};
	uint64_t rows, cols;

	if (dptr(c) % kStick)
		return at::Tensor();	/* an int8 operand is never staged */
	ew_shape(y.numel(), kStick, &rows, &cols);
	std::vector<Slot> in{ { c, rows, cols, SPYRE_DT_INT8 } };

	d.op = SPYRE_KOP_WHERE;
	d.dtype = dt;
	d.m = rows;
	d.n = cols;
	if (a.defined())
		in.push_back({ a.contiguous(), rows, cols, dt });
	else
		d.flags |= SPYRE_KF_SCALAR_A, d.alpha = (float)*sa;
	if (b.defined())
		in.push_back({ b.contiguous(), rows, cols, dt });
	else
		d.flags |= SPYRE_KF_SCALAR_B, d.beta = (float)*sb;
	return run(d, in, { y, rows, cols, dt }, name) ? y : at::Tensor();
}

/*
 * A number given as a 0-dim tensor: a Python number torch wrapped on the CPU,
 * or on the card (where(c, x, 0.0) wraps it on x's device: read back).
 */
std::optional<double> number(const at::Tensor &t)
{
	if (t.defined() && t.dim() == 0 && (t.is_cpu() || on_card(t)) && !t.is_complex())
		return t.item().toDouble();
	return std::nullopt;
}

at::Tensor where(const at::Tensor &cond, const at::Tensor &a, const at::Tensor &b)
{
	std::optional<double> sa = number(a), sb = number(b);
	at::Tensor y;

	/* the output: cond's shape (every tensor operand has it, else the CPU broadcasts), the operands' type */
	y = where_card(cond, sa ? at::Tensor() : a, sa, sb ? at::Tensor() : b, sb, at::result_type(a, b), "where");
	return y.defined() ? y : FALLBACK(where_self, cond, a, b);
}

at::Tensor masked_fill(const at::Tensor &x, const at::Tensor &mask, const at::Scalar &v)
{
	at::Tensor y = v.isComplex() ? at::Tensor() :
		       x.sizes() != mask.sizes() ? at::Tensor() :
		       where_card(mask, at::Tensor(), v.toDouble(), x, std::nullopt, x.scalar_type(), "masked_fill");

	return y.defined() ? y : FALLBACK(masked_fill_Scalar, x, mask, v);
}

/* value: a 0-dim tensor; one on the card is read back (a scalar of the launch) */
at::Tensor masked_fill_t(const at::Tensor &x, const at::Tensor &mask, const at::Tensor &v)
{
	at::Tensor y;

	TORCH_CHECK(v.dim() == 0, "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
		    v.dim(), " dimension(s).");
	if (!v.is_complex() && (v.is_cpu() || v.device() == x.device()) && x.sizes() == mask.sizes())
		y = where_card(mask, at::Tensor(), v.item().toDouble(), x, std::nullopt, x.scalar_type(), "masked_fill");
	return y.defined() ? y : FALLBACK(masked_fill_Tensor, x, mask, v);
}

/* TRIL over the last two dimensions: [m x n] as m / k matrices of k rows. */
at::Tensor tril_card(uint32_t fn, const at::Tensor &x, int64_t diag, const char *name)
{
	uint32_t dt = 0;

	if (!card_float(x, &dt) || x.dim() < 2)
		return at::Tensor();
	uint64_t n = x.size(-1), k = x.size(-2), m = x.numel() / n;
	at::Tensor xc = x.contiguous(), y = at::empty(x.sizes(), x.options());
	struct spyre_kdesc d = {};

	d.op = SPYRE_KOP_TRIL;
	d.fn = fn;
	d.dtype = dt;
	d.m = m;
	d.n = n;
	d.k = k;
	d.alpha = (float)diag;
	return run(d, { { xc, m, n, dt } }, { y, m, n, dt }, name) ? y : at::Tensor();
}

at::Tensor tril(const at::Tensor &x, int64_t diag)
{
	at::Tensor y = tril_card(SPYRE_KFN_TRIL, x, diag, "tril");

	return y.defined() ? y : FALLBACK(tril, x, diag);
}

at::Tensor triu(const at::Tensor &x, int64_t diag)
{
	at::Tensor y = tril_card(SPYRE_KFN_TRIU, x, diag, "triu");

	return y.defined() ? y : FALLBACK(triu, x, diag);
}

/* ---- in-place and out= forms ------------------------------------------------------------- */

/* @y (the functional op's result) into @self: same shape, as torch's in-place ops require. */
at::Tensor &into(at::Tensor &self, const at::Tensor &y)
{
	TORCH_CHECK(self.sizes() == y.sizes(), "output with shape ", self.sizes(),
		    " doesn't match the broadcast shape ", y.sizes());
	self.copy_(y);
	return self;
}

/* @y into @out, resized as torch's out= ops do. */
at::Tensor &into_out(at::Tensor &out, const at::Tensor &y)
{
	at::native::resize_output(out, y.sizes());
	out.copy_(y);
	return out;
}

at::Tensor &add_(at::Tensor &a, const at::Tensor &b, const at::Scalar &alpha)
{
	return into(a, ::spyre_torch::add(a, b, alpha));
}

at::Tensor &sub_(at::Tensor &a, const at::Tensor &b, const at::Scalar &alpha)
{
	return into(a, ::spyre_torch::sub(a, b, alpha));
}

at::Tensor &mul_(at::Tensor &a, const at::Tensor &b)
{
	return into(a, ::spyre_torch::mul(a, b));
}

at::Tensor &div_(at::Tensor &a, const at::Tensor &b)
{
	return into(a, ::spyre_torch::div(a, b));
}

at::Tensor &add_out(const at::Tensor &a, const at::Tensor &b, const at::Scalar &alpha, at::Tensor &out)
{
	return into_out(out, ::spyre_torch::add(a, b, alpha));
}

at::Tensor &sub_out(const at::Tensor &a, const at::Tensor &b, const at::Scalar &alpha, at::Tensor &out)
{
	return into_out(out, ::spyre_torch::sub(a, b, alpha));
}

at::Tensor &mul_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out)
{
	return into_out(out, ::spyre_torch::mul(a, b));
}

at::Tensor &div_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out)
{
	return into_out(out, ::spyre_torch::div(a, b));
}

at::Tensor &masked_fill_(at::Tensor &x, const at::Tensor &mask, const at::Scalar &v)
{
	return into(x, ::spyre_torch::masked_fill(x, mask, v));
}

at::Tensor &masked_fill_t_(at::Tensor &x, const at::Tensor &mask, const at::Tensor &v)
{
	return into(x, ::spyre_torch::masked_fill_t(x, mask, v));
}

at::Tensor &relu_(at::Tensor &x)
{
	return into(x, ::spyre_torch::relu(x));
}

at::Tensor &silu_(at::Tensor &x)
{
	return into(x, ::spyre_torch::silu(x));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("add.Tensor", add);
	m.impl("sub.Tensor", sub);
	m.impl("rsub.Tensor", rsub);
	m.impl("mul.Tensor", mul);
	m.impl("div.Tensor", div);
	m.impl("maximum", maximum);
	m.impl("minimum", minimum);
	m.impl("add_.Tensor", add_);
	m.impl("sub_.Tensor", sub_);
	m.impl("mul_.Tensor", mul_);
	m.impl("div_.Tensor", div_);
	m.impl("add.out", add_out);
	m.impl("sub.out", sub_out);
	m.impl("mul.out", mul_out);
	m.impl("div.out", div_out);
	m.impl("relu", relu);
	m.impl("relu_", relu_);
	m.impl("silu", silu);
	m.impl("silu_", silu_);
	m.impl("gelu", gelu);
	m.impl("exp", exp);
	m.impl("log", log);
	m.impl("sigmoid", sigmoid);
	m.impl("tanh", tanh);
	m.impl("rsqrt", rsqrt);
	m.impl("sqrt", sqrt);
	m.impl("reciprocal", reciprocal);
	m.impl("abs", abs);
	m.impl("neg", neg);
	m.impl("pow.Tensor_Scalar", pow);
	m.impl("where.self", where);
	m.impl("masked_fill.Scalar", masked_fill);
	m.impl("masked_fill.Tensor", masked_fill_t);
	m.impl("masked_fill_.Scalar", masked_fill_);
	m.impl("masked_fill_.Tensor", masked_fill_t_);
	m.impl("tril", tril);
	m.impl("triu", triu);
}

}  // namespace spyre_torch
