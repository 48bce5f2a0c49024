// SPDX-License-Identifier: MIT
/*
 * ops_matmul.cpp - the matmuls on the card: mm, addmm and linear with the
 * LINEAR kernel (nn.Linear's W [n, k] read as it is, SPYRE_KF_WEIGHT_NK),
 * bmm with BMM, baddbmm as BMM and a scaled (broadcast) add. matmul is
 * PyTorch's composite: for 3-D and 4-D operands it folds the batch
 * dimensions into bmm, making a transposed operand contiguous on the card
 * (copy.cpp's PERMUTE).
 */
#include <ATen/ops/addmm.h>
#include <ATen/ops/baddbmm.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/linear_native.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/mm.h>
#include <torch/library.h>

#include "ops.h"

namespace spyre_torch {

namespace {

/*
 * Y [m, n] = X [m, k] B (+ bias [n]) with the LINEAR kernel; B given as
 * @w [k, n], or with @nk as W [n, k] (nn.Linear's weight, B = W^T: the
 * kernel reads it as it is, SPYRE_KF_WEIGHT_NK). Undefined when the library
 * cannot build it.
 */
at::Tensor linear_w(const at::Tensor &x2, const at::Tensor &w, bool nk, const at::Tensor &bias, uint32_t dt,
		    const char *name)
{
	uint64_t m = x2.size(0), k = x2.size(1), n = nk ? w.size(0) : w.size(1);
	at::Tensor y = at::empty({ (int64_t)m, (int64_t)n }, x2.options());
	struct spyre_kdesc d = {};
	std::vector<Slot> in{ { x2, m, k, dt }, nk ? Slot{ w, n, k, dt } : Slot{ w, k, n, dt } };

	d.op = SPYRE_KOP_LINEAR;
	d.dtype = dt;
	d.m = m;
	d.n = n;
	d.k = k;
	if (nk)
		d.flags |= SPYRE_KF_WEIGHT_NK;
	if (bias.defined()) {
		at::Tensor b32 = (bias.scalar_type() == at::kFloat ? bias : bias.to(at::kFloat)).contiguous();

		in.push_back({ b32.reshape({ 1, (int64_t)n }), 1, n, SPYRE_DT_FP32 });
		d.flags |= SPYRE_KF_BIAS;
	}
	return run(d, in, { y, m, n, dt }, name) ? y : at::Tensor();
}

bool matmul_ok(const at::Tensor &a, const at::Tensor &b, uint32_t *dt)
{
	return card_float(a, dt) && card_float(b) && a.device() == b.device() && a.scalar_type() == b.scalar_type();
}

/* @b [k, n] as the B of linear_w(): W [n, k] itself when @b is W.t(), else @b made contiguous. */
bool b_is_wt(const at::Tensor &b)
{
	return b.dim() == 2 && !b.is_contiguous() && b.t().is_contiguous();
}

at::Tensor mm(const at::Tensor &a, const at::Tensor &b)
{
	uint32_t dt = 0;
	at::Tensor y;

	if (matmul_ok(a, b, &dt) && a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0)) {
		bool nk = b_is_wt(b);

		y = linear_w(a.contiguous(), nk ? b.t() : b.contiguous(), nk, at::Tensor(), dt, "mm");
	}
	return y.defined() ? y : FALLBACK(mm, a, b);
}

at::Tensor addmm(const at::Tensor &bias, const at::Tensor &a, const at::Tensor &b, const at::Scalar &beta,
		 const at::Scalar &alpha)
{
	uint32_t dt = 0;
	at::Tensor y;

	if (matmul_ok(a, b, &dt) && a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0) && on_card(bias) &&
	    bias.device() == a.device() && beta.toDouble() == 1.0 && alpha.toDouble() == 1.0 &&
	    bias.numel() == b.size(1) && bias.dim() >= 1 && bias.dim() <= 2 && (bias.dim() == 1 || bias.size(0) == 1)) {
		bool nk = b_is_wt(b);

		y = linear_w(a.contiguous(), nk ? b.t() : b.contiguous(), nk, bias.reshape({ -1 }), dt, "addmm");
	}
	return y.defined() ? y : FALLBACK(addmm, bias, a, b, beta, alpha);
}

at::Tensor linear(const at::Tensor &x, const at::Tensor &w, const std::optional<at::Tensor> &bias)
{
	uint32_t dt = 0;
	at::Tensor bb = bias ? *bias : at::Tensor(), y;

	if (matmul_ok(x, w, &dt) && w.dim() == 2 && x.dim() >= 1 && x.size(-1) == w.size(1) &&
	    (!bb.defined() || (on_card(bb) && bb.device() == x.device() && bb.dim() == 1 && bb.size(0) == w.size(0)))) {
		std::vector<int64_t> out(x.sizes().begin(), x.sizes().end());

		out.back() = w.size(0);
		/* W [n, k] as nn.Linear keeps it: the kernel reads it as it is */
		y = linear_w(x.contiguous().reshape({ -1, x.size(-1) }), w.contiguous(), true, bb, dt, "linear");
		if (y.defined())
			return y.reshape(out);
	}
	y = at::matmul(x, w.t());
	return bb.defined() ? y + bb : y;
}

/* Y [b, m, n] = A [b, m, k] B [b, k, n] with BMM; undefined when the card cannot. */
at::Tensor bmm_card(const at::Tensor &a, const at::Tensor &b)
{
	uint32_t dt = 0;

	if (!matmul_ok(a, b, &dt) || a.dim() != 3 || b.dim() != 3 || a.size(0) != b.size(0) || a.size(2) != b.size(1))
		return at::Tensor();
	uint64_t B = a.size(0), m = a.size(1), k = a.size(2), n = b.size(2);
	at::Tensor y = at::empty({ (int64_t)B, (int64_t)m, (int64_t)n }, a.options());
	struct spyre_kdesc d = {};

	d.op = SPYRE_KOP_BMM;
	d.dtype = dt;
	d.batch = (uint32_t)B;
	d.m = m;
	d.n = n;
	d.k = k;
	return run(d, { { a.contiguous(), B * m, k, dt }, { b.contiguous(), B * k, n, dt } }, { y, B * m, n, dt }, "bmm") ?
		       y : at::Tensor();
}

at::Tensor bmm(const at::Tensor &a, const at::Tensor &b)
{
	at::Tensor y = bmm_card(a, b);

	return y.defined() ? y : FALLBACK(bmm, a, b);
}

/* beta self + alpha (b1 @ b2): BMM, then UNARY SCALE by alpha (if not 1), then BINARY ADD of beta self. */
at::Tensor baddbmm(const at::Tensor &self, const at::Tensor &b1, const at::Tensor &b2, const at::Scalar &beta,
		   const at::Scalar &alpha)
{
	double be = beta.toDouble(), al = alpha.toDouble();
	at::Tensor y;

	if (on_card(self) && self.device() == b1.device() && self.scalar_type() == b1.scalar_type())
		y = bmm_card(b1, b2);
	if (y.defined() && al != 1.0)
		y = unary(SPYRE_KFN_SCALE, y, (float)al, 0, "baddbmm");
	if (y.defined() && be != 0.0) {
		TORCH_CHECK(at::infer_size(self.sizes(), y.sizes()) == y.sizes(), "spyre: baddbmm: self ",
			    self.sizes(), " does not broadcast to ", y.sizes());
		y = binary(SPYRE_KFN_ADD, y, self, be, "baddbmm");
	}
	return y.defined() ? y : FALLBACK(baddbmm, self, b1, b2, beta, alpha);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("mm", mm);
	m.impl("addmm", addmm);
	m.impl("linear", linear);
	m.impl("bmm", bmm);
	m.impl("baddbmm", baddbmm);
}

/*
 * linear is CompositeImplicitAutograd: with a PrivateUse1 kernel registered,
 * autograd (AutogradPrivateUse1) needs one too. With gradients possible it is
 * the composite decomposition (matmul, add), which records the graph and
 * reaches the card kernels above; in inference mode the PrivateUse1 kernel
 * runs directly.
 */
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m)
{
	m.impl("linear", at::native::linear);
}

}  // namespace spyre_torch
