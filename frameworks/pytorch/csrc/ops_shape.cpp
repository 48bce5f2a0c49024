// SPDX-License-Identifier: MIT
/*
 * ops_shape.cpp - ops that move data on the card: cat (device copies when
 * each piece is whole sticks of the output, the CAT kernel for up to 8
 * pieces of one width), embedding (EMBEDDING: token ids as launch scalars).
 */
#include <ATen/ops/cat.h>
#include <ATen/ops/embedding.h>
#include <torch/library.h>

#include "ops.h"

namespace spyre_torch {

namespace {

/* ---- cat ------------------------------------------------------------------------------ */

constexpr uint64_t kMaxCatCopies = 256;	/* device copies per cat before the CPU is the better place */

at::Tensor cat_card(const at::ITensorListRef &tensors, int64_t dim)
{
	std::vector<at::Tensor> ts;
	const at::Tensor *first = nullptr;

	for (const at::Tensor &t : tensors) {
		if (!on_card(t))
			return at::Tensor();
		if (!first && !(t.dim() == 1 && t.numel() == 0))	/* torch skips 1-D empty tensors */
			first = &t;
	}
	if (!first)
		return at::Tensor();
	int64_t nd = first->dim(), d = c10::maybe_wrap_dim(dim, nd);
	std::vector<int64_t> out(first->sizes().begin(), first->sizes().end());

	out[d] = 0;
	for (const at::Tensor &t : tensors) {
		if (t.dim() == 1 && t.numel() == 0)
			continue;
		if (t.device() != first->device() || t.scalar_type() != first->scalar_type())
			return at::Tensor();
		TORCH_CHECK(t.dim() == nd, "Tensors must have same number of dimensions: got ", nd, " and ", t.dim());
		for (int64_t i = 0; i < nd; i++)
			TORCH_CHECK(i == d || t.size(i) == first->size(i), "Sizes of tensors must match except in dimension ",
				    d, ". Expected size ", first->size(i), " but got size ", t.size(i), " for tensor number ",
				    ts.size(), " in the list.");
		out[d] += t.size(d);
		if (t.numel())
			ts.push_back(t.contiguous());
	}
	at::Tensor y = at::empty(out, first->options());

	if (ts.empty() || !y.numel())
		return y;
	c10::DeviceGuard g(y.device());
	int dev = y.device().index();
	uint64_t es = y.element_size(), outer = 1, rest = 1, row = 0;
	bool equal = true, aligned = dptr(y) % kStick == 0;

	for (int64_t i = 0; i < d; i++)
		outer *= out[i];
	for (int64_t i = d + 1; i < nd; i++)
		rest *= out[i];
	for (const at::Tensor &t : ts) {
		uint64_t inner = t.size(d) * rest;

		equal = equal && inner == ts[0].size(d) * rest;
		aligned = aligned && dptr(t) % kStick == 0 && (outer == 1 || (inner * es) % kStick == 0) &&
			  (row * es) % kStick == 0;
		row += inner;
	}
	uint32_t dt = 0;

	if (outer > 1 && equal && ts.size() >= 2 && ts.size() <= 8 && kernel_dtype(y.scalar_type(), &dt)) {
		/* [outer x inner] pieces side by side: CAT (pieces not whole sticks are staged) */
		uint64_t inner = ts[0].size(d) * rest;
		std::vector<Slot> in;
		struct spyre_kdesc kd = {};

		for (const at::Tensor &t : ts)
			in.push_back({ t, outer, inner, dt });
		kd.op = SPYRE_KOP_CAT;
		kd.dtype = dt;
		kd.m = outer;
		kd.n = inner;
		kd.k = ts.size();
		if (run(kd, in, { y, outer, row, dt }, "cat"))
			return y;
		forget_kernel_error();
	}
	if (!aligned || outer * ts.size() > kMaxCatCopies)
		return at::Tensor();
	/*
	 * Device copies: piece i's rows into each output row at its offset. Every
	 * copy is whole sticks (rounded up: what it writes past its piece the next
	 * copy overwrites; allocations are whole sticks), in order on one stream.
	 */
	count_card("cat");
	for (uint64_t o = 0; o < outer; o++) {
		uint64_t off = 0;

		for (const at::Tensor &t : ts) {
			uint64_t bytes = t.size(d) * rest * es;

			copy_d2d(dev, dptr(y) + (o * row + off) * es, dptr(t) + o * bytes, stick_up(bytes));
			off += t.size(d) * rest;
		}
	}
	return y;
}

at::Tensor cat(const at::ITensorListRef &tensors, int64_t dim)
{
	at::Tensor y = cat_card(tensors, dim);

	return y.defined() ? y : FALLBACK(cat, tensors, dim);
}

/* ---- embedding ------------------------------------------------------------------------ */

at::Tensor embedding(const at::Tensor &w, const at::Tensor &idx, int64_t pad, bool scale, bool sparse)
{
	uint32_t dt = 0;

	if (!card_float(w, &dt) || w.dim() != 2 || sparse || !idx.numel())
		return FALLBACK(embedding, w, idx, pad, scale, sparse);
	c10::DeviceGuard g(w.device());
	int dev = w.device().index();
	uint64_t vocab = w.size(0), hidden = w.size(1), count = idx.numel();
	at::Tensor ids = idx.cpu().to(at::kInt).contiguous().reshape({ -1 });
	std::vector<int64_t> out(idx.sizes().begin(), idx.sizes().end());
	out.push_back((int64_t)hidden);
	at::Tensor y = at::empty({ (int64_t)count, (int64_t)hidden }, w.options());
	at::Tensor wc = w.contiguous();
	const int32_t *tok = ids.data_ptr<int32_t>();
	uint64_t pitch = spyre_kernel_pitch(hidden, dt);

	for (uint64_t i = 0; i < count; i++)
		TORCH_CHECK(tok[i] >= 0 && (uint64_t)tok[i] < vocab, "spyre: embedding index ", tok[i],
			    " is out of range (", vocab, " rows)");
	Operand wo = operand(wc, vocab, hidden, dt);
	Output yo(y, count, hidden, dt);

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
		Kernel k(dev, d);

		TORCH_CHECK(k, "spyre: the kernel library cannot build EMBEDDING ", vocab, "x", hidden);
		k.launch({ wo.ptr, yo.o.ptr + i0 * pitch }, sc.data(), (uint32_t)m);
	}
	yo.finish();
	return y.reshape(out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("cat", cat);
	m.impl("embedding", embedding);
}

}  // namespace spyre_torch
