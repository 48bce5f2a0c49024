// SPDX-License-Identifier: MIT
/*
 * ops_reduce.cpp - the row-wise ops on the card: softmax and log_softmax
 * over the last dimension (SOFTMAX, SPYRE_KF_LOG), layer_norm and
 * torch.spyre.rms_norm (LAYERNORM, RMSNORM), sum / mean / amax over the
 * trailing dimensions (REDUCE; keepdim either way), argmax over the last
 * dimension or all of them (ARGMAX). Anything else falls back.
 */
#include <algorithm>

#include <ATen/ops/_log_softmax.h>
#include <ATen/ops/_softmax.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/argmax.h>
#include <ATen/ops/layer_norm.h>
#include <ATen/ops/layer_norm_native.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/native_layer_norm.h>
#include <ATen/ops/sum.h>
#include <torch/library.h>

#include "ops.h"

namespace spyre_torch {

namespace {

/* ---- softmax ----------------------------------------------------------------------- */

at::Tensor softmax_card(const at::Tensor &x, int64_t dim, bool half_to_float, uint32_t flags, const char *name)
{
	uint32_t dt = 0;

	if (!card_float(x, &dt) || half_to_float || x.dim() < 1 || c10::maybe_wrap_dim(dim, x.dim()) != x.dim() - 1)
		return at::Tensor();
	uint64_t n = x.size(-1), m = x.numel() / n;
	at::Tensor xc = x.contiguous(), y = at::empty(x.sizes(), x.options());
	struct spyre_kdesc d = {};

	d.op = SPYRE_KOP_SOFTMAX;
	d.flags = flags;
	d.dtype = dt;
	d.m = m;
	d.n = n;
	return run(d, { { xc, m, n, dt } }, { y, m, n, dt }, name) ? y : at::Tensor();
}

at::Tensor softmax(const at::Tensor &x, int64_t dim, bool half_to_float)
{
	at::Tensor y = softmax_card(x, dim, half_to_float, 0, "softmax");

	return y.defined() ? y : FALLBACK(_softmax, x, dim, half_to_float);
}

at::Tensor log_softmax(const at::Tensor &x, int64_t dim, bool half_to_float)
{
	at::Tensor y = softmax_card(x, dim, half_to_float, SPYRE_KF_LOG, "log_softmax");

	return y.defined() ? y : FALLBACK(_log_softmax, x, dim, half_to_float);
}

/* ---- norms -------------------------------------------------------------------------- */

/* Y = norm(X) * w (+ b) over the last dimension with RMSNORM or LAYERNORM; w, b [n] in X's dtype. */
at::Tensor norm(uint32_t kop, const at::Tensor &x, const at::Tensor &w, const at::Tensor &b, double eps,
		const char *name)
{
	uint32_t dt = 0;

	kernel_dtype(x.scalar_type(), &dt);
	c10::DeviceGuard g(x.device());
	uint64_t n = x.size(-1), m = x.numel() / n;
	at::Tensor xc = x.contiguous(), y = at::empty(x.sizes(), x.options());
	at::Tensor wx = (w.defined() ? w : at::ones({ (int64_t)n }, x.options())).to(x.scalar_type()).contiguous();
	std::vector<Slot> in{ { xc, m, n, dt }, { wx.reshape({ 1, (int64_t)n }), 1, n, dt } };
	struct spyre_kdesc d = {};

	if (kop == SPYRE_KOP_LAYERNORM) {
		at::Tensor bx = (b.defined() ? b : at::zeros({ (int64_t)n }, x.options())).to(x.scalar_type()).contiguous();

		in.push_back({ bx.reshape({ 1, (int64_t)n }), 1, n, dt });
	}
	d.op = kop;
	d.dtype = dt;
	d.m = m;
	d.n = n;
	d.eps = (float)eps;
	return run(d, in, { y, m, n, dt }, name) ? y : at::Tensor();
}

bool norm_ok(const at::Tensor &x, at::IntArrayRef shape, const at::Tensor &w, const at::Tensor &b)
{
	return card_float(x) && shape.size() == 1 && x.dim() >= 1 && x.size(-1) == shape[0] &&
	       (!w.defined() || (on_card(w) && w.numel() == shape[0])) &&
	       (!b.defined() || (on_card(b) && b.numel() == shape[0]));
}

at::Tensor layer_norm(const at::Tensor &x, at::IntArrayRef shape, const std::optional<at::Tensor> &w,
		      const std::optional<at::Tensor> &b, double eps, bool cudnn)
{
	at::Tensor ww = w ? *w : at::Tensor(), bb = b ? *b : at::Tensor(), y;

	if (norm_ok(x, shape, ww, bb))
		y = norm(SPYRE_KOP_LAYERNORM, x, ww, bb, eps, "layer_norm");
	return y.defined() ? y : std::get<0>(at::native_layer_norm(x, shape, w, b, eps));
}

/* With autograd in the way (no inference mode): Y on the card, mean and rstd from the CPU. */
std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm(const at::Tensor &x, at::IntArrayRef shape,
								 const std::optional<at::Tensor> &w,
								 const std::optional<at::Tensor> &b, double eps)
{
	at::Tensor ww = w ? *w : at::Tensor(), bb = b ? *b : at::Tensor(), y;

	if (norm_ok(x, shape, ww, bb))
		y = norm(SPYRE_KOP_LAYERNORM, x, ww, bb, eps, "native_layer_norm");
	if (!y.defined())
		return FALLBACK(native_layer_norm, x, shape, w, b, eps);
	at::Tensor h = x.cpu().to(at::kFloat);
	std::vector<int64_t> st(x.sizes().begin(), x.sizes().end());
	st.back() = 1;
	at::Tensor mean = h.mean(-1, true), rstd = (h.var(-1, false, true) + eps).rsqrt();

	return { y, mean.to(x.device()).reshape(st), rstd.to(x.device()).reshape(st) };
}

at::Tensor rms_norm(const at::Tensor &x, const at::Tensor &w, double eps)
{
	TORCH_CHECK(card_float(x) && on_card(w) && x.dim() >= 1 && w.numel() == x.size(-1),
		    "spyre::rms_norm: x on the card (fp32/fp16/bf16) and w [", x.dim() ? x.size(-1) : 0,
		    "] on the card");
	at::Tensor y = norm(SPYRE_KOP_RMSNORM, x, w, at::Tensor(), eps, "rms_norm");

	TORCH_CHECK(y.defined(), "spyre::rms_norm: the kernel library cannot build RMSNORM for ", x.sizes());
	return y;
}

/* ---- reductions ------------------------------------------------------------------------ */

/*
 * Whether @dims (none or empty: all) are the trailing dimensions of @x; then
 * @x is [m x n] with n their product, and *@out the result's shape.
 */
bool trailing(const at::Tensor &x, at::OptionalIntArrayRef dims, bool keepdim, uint64_t *m, uint64_t *n,
	      std::vector<int64_t> *out)
{
	int64_t nd = x.dim();
	std::vector<int64_t> ds;

	if (dims && !dims->empty()) {
		for (int64_t d : *dims)
			ds.push_back(c10::maybe_wrap_dim(d, std::max<int64_t>(nd, 1)));
	} else {
		for (int64_t d = 0; d < nd; d++)
			ds.push_back(d);
	}
	std::sort(ds.begin(), ds.end());
	if (std::adjacent_find(ds.begin(), ds.end()) != ds.end())
		return false;
	int64_t first = nd - (int64_t)ds.size();

	for (size_t i = 0; i < ds.size(); i++)
		if (ds[i] != first + (int64_t)i)
			return false;
	*n = 1;
	out->clear();
	for (int64_t d = 0; d < nd; d++) {
		if (d < first)
			out->push_back(x.size(d));
		else if (keepdim)
			out->push_back(1);
		if (d >= first)
			*n *= x.size(d);
	}
	*m = x.numel() / std::max<uint64_t>(*n, 1);
	return true;
}

at::Tensor reduce_card(uint32_t fn, const at::Tensor &x, at::OptionalIntArrayRef dims, bool keepdim,
		       std::optional<at::ScalarType> dtype, const char *name)
{
	uint32_t dt = 0;
	uint64_t m, n;
	std::vector<int64_t> out;

	if (!card_float(x, &dt) || (dtype && *dtype != x.scalar_type()) || !trailing(x, dims, keepdim, &m, &n, &out))
		return at::Tensor();
	at::Tensor xc = x.contiguous(), y = at::empty(out, x.options());
	struct spyre_kdesc d = {};

	d.op = SPYRE_KOP_REDUCE;
	d.fn = fn;
	d.dtype = dt;
	d.m = m;
	d.n = n;
	return run(d, { { xc, m, n, dt } }, { y, 1, m, dt }, name) ? y : at::Tensor();
}

at::Tensor sum(const at::Tensor &x, at::OptionalIntArrayRef dims, bool keepdim, std::optional<at::ScalarType> dtype)
{
	at::Tensor y = reduce_card(SPYRE_KFN_SUM, x, dims, keepdim, dtype, "sum");

	return y.defined() ? y : FALLBACK(sum_dim_IntList, x, dims, keepdim, dtype);
}

at::Tensor mean(const at::Tensor &x, at::OptionalIntArrayRef dims, bool keepdim, std::optional<at::ScalarType> dtype)
{
	at::Tensor y = reduce_card(SPYRE_KFN_MEAN, x, dims, keepdim, dtype, "mean");

	return y.defined() ? y : FALLBACK(mean_dim, x, dims, keepdim, dtype);
}

at::Tensor amax(const at::Tensor &x, at::IntArrayRef dims, bool keepdim)
{
	at::Tensor y = reduce_card(SPYRE_KFN_RMAX, x, dims, keepdim, std::nullopt, "amax");

	return y.defined() ? y : FALLBACK(amax, x, dims, keepdim);
}

/*
 * ARGMAX per row of [m x n] (the last dimension, or every element as one
 * row) gives int32 indices on the card; torch's int64 result is made from
 * them on the host (m * 4 bytes back, m * 8 bytes to the card): the card has
 * no int64 kernel.
 */
at::Tensor argmax(const at::Tensor &x, std::optional<int64_t> dim, bool keepdim)
{
	uint32_t dt = 0;
	at::Tensor y;

	if (card_float(x, &dt) && (!dim || (x.dim() >= 1 && c10::maybe_wrap_dim(*dim, x.dim()) == x.dim() - 1))) {
		uint64_t n = dim ? x.size(-1) : x.numel(), m = x.numel() / n;
		std::vector<int64_t> out;
		struct spyre_kdesc d = {};

		if (dim) {
			out.assign(x.sizes().begin(), x.sizes().end() - 1);
			if (keepdim)
				out.push_back(1);
		} else if (keepdim) {
			out.assign(x.dim(), 1);
		}
		at::Tensor y32 = at::empty({ (int64_t)m }, x.options().dtype(at::kInt));

		d.op = SPYRE_KOP_ARGMAX;
		d.dtype = dt;
		d.m = m;
		d.n = n;
		if (run(d, { { x.contiguous(), m, n, dt } }, { y32, 1, m, SPYRE_DT_INT32 }, "argmax"))
			y = y32.cpu().to(at::kLong).reshape(out).to(x.device());
	}
	return y.defined() ? y : FALLBACK(argmax, x, dim, keepdim);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("_softmax", softmax);
	m.impl("_log_softmax", log_softmax);
	m.impl("layer_norm", layer_norm);
	m.impl("native_layer_norm", native_layer_norm);
	m.impl("sum.dim_IntList", sum);
	m.impl("mean.dim", mean);
	m.impl("amax", amax);
	m.impl("argmax", argmax);
}

/*
 * layer_norm is CompositeImplicitAutograd: with a PrivateUse1 kernel
 * registered, autograd needs one too: with gradients possible it is the
 * composite (native_layer_norm, above); in inference mode the PrivateUse1
 * kernel runs directly.
 */
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m)
{
	m.impl("layer_norm", at::native::layer_norm_symint);
}

TORCH_LIBRARY_FRAGMENT(spyre, m)
{
	m.def("rms_norm(Tensor x, Tensor w, float eps) -> Tensor");
	m.impl("rms_norm", c10::DispatchKey::PrivateUse1, TORCH_FN(rms_norm));
	m.impl("rms_norm", c10::DispatchKey::AutogradPrivateUse1, TORCH_FN(rms_norm));	/* inference only */
}

}  // namespace spyre_torch
