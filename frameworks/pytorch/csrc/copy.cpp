// SPDX-License-Identifier: MIT
/*
 * copy.cpp - tensors on the card: the factories (empty, empty_strided), views
 * and resize over the allocator (runtime.cpp), and copies in every direction
 * over runtime.cpp's primitives: contiguous ones at once, the contiguous
 * copy of a view on the card that swaps two dimensions (a transpose, heads
 * and tokens) with the PERMUTE kernel, one made of whole-stick blocks (an
 * expanded tensor) as device copies of the blocks, other strided ones
 * through the host.
 * A copy between pinned memory (hooks.cpp) and the card
 * with non_blocking=True, contiguous and of one dtype, returns before the
 * card is done (counted: torch.spyre.async_copies()).
 */
#include <atomic>
#include <vector>

#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <torch/library.h>

#include "ops.h"

namespace spyre_torch {

/* ---- factories, views, resize ------------------------------------------------------ */

namespace {

c10::Device resolve(std::optional<c10::Device> d)
{
	int i = d && d->has_index() ? d->index() : current_device();

	check_index(i);
	return c10::Device(c10::DeviceType::PrivateUse1, (c10::DeviceIndex)i);
}

at::Tensor empty_memory_format(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
			       std::optional<at::Layout> layout, std::optional<at::Device> dev,
			       std::optional<bool> pin, std::optional<at::MemoryFormat> fmt)
{
	TORCH_CHECK(!layout || *layout == at::kStrided, "spyre: only strided tensors");
	c10::DeviceGuard g(resolve(dev));

	return at::detail::empty_generic(size, allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
					 c10::dtype_or_default(dtype), fmt);
}

at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride, std::optional<at::ScalarType> dtype,
			 std::optional<at::Layout> layout, std::optional<at::Device> dev, std::optional<bool> pin)
{
	TORCH_CHECK(!layout || *layout == at::kStrided, "spyre: only strided tensors");
	c10::DeviceGuard g(resolve(dev));

	return at::detail::empty_strided_generic(size, stride, allocator(),
						 c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
						 c10::dtype_or_default(dtype));
}

const at::Tensor &resize_(const at::Tensor &self, at::IntArrayRef size, std::optional<at::MemoryFormat> fmt)
{
	c10::TensorImpl *impl = self.unsafeGetTensorImpl();
	int d = self.device().index();
	c10::DeviceGuard g(self.device());

	impl->set_sizes_contiguous(size);
	if (fmt && *fmt != at::MemoryFormat::Contiguous && *fmt != at::MemoryFormat::Preserve)
		impl->empty_tensor_restride(*fmt);
	size_t need = at::detail::computeStorageNbytesContiguous(size, self.dtype().itemsize(),
								  self.storage_offset());
	if (self.numel() && need > self.storage().nbytes()) {
		c10::StorageImpl *st = self.storage().unsafeGetStorageImpl();
		at::DataPtr fresh = allocator()->allocate(need);
		size_t old = st->nbytes();

		if (old)
			copy_d2d(d, reinterpret_cast<uint64_t>(fresh.get()), reinterpret_cast<uint64_t>(st->data()),
				 stick_up(old));
		st->set_data_ptr_noswap(std::move(fresh));
		st->set_nbytes(need);
	}
	return self;
}

/* The bytes a strided tensor spans: from its first element to its last. */
size_t span_bytes(const at::Tensor &t)
{
	int64_t last = 0;

	if (!t.numel())
		return 0;
	for (int64_t i = 0; i < t.dim(); i++) {
		TORCH_CHECK(t.stride(i) >= 0, "spyre: negative strides are not supported");
		last += (t.size(i) - 1) * t.stride(i);
	}
	return (size_t)(last + 1) * t.element_size();
}

/* A CPU tensor with @t's values (any strides). */
at::Tensor to_host(const at::Tensor &t)
{
	c10::DeviceGuard g(t.device());
	size_t span = span_bytes(t);
	at::Tensor buf = at::empty({ (int64_t)span }, at::TensorOptions().dtype(at::kByte));

	copy_d2h(t.device().index(), buf.data_ptr(), dptr(t), span);
	return at::from_blob(buf.data_ptr(), t.sizes(), t.strides(), [buf](void *) {},
			     at::TensorOptions().dtype(t.dtype()))
		.clone();
}

/* Write CPU tensor @src (same shape) into device tensor @dst (any strides). */
void from_host(const at::Tensor &dst, const at::Tensor &src)
{
	c10::DeviceGuard g(dst.device());
	int d = dst.device().index();

	if (dst.is_contiguous()) {
		at::Tensor s = src.to(dst.scalar_type()).contiguous();

		copy_h2d(d, dptr(dst), s.data_ptr(), s.nbytes());
		return;
	}
	/* strided: read the span, write the elements into it on the host, write it back */
	size_t span = span_bytes(dst);
	at::Tensor buf = at::empty({ (int64_t)span }, at::TensorOptions().dtype(at::kByte));

	copy_d2h(d, buf.data_ptr(), dptr(dst), span);
	at::from_blob(buf.data_ptr(), dst.sizes(), dst.strides(), at::TensorOptions().dtype(dst.dtype()))
		.copy_(src);
	copy_h2d(d, dptr(dst), buf.data_ptr(), span);
}

/*
 * @t's dimensions as (size, stride) pairs, outermost first: size-1 ones
 * dropped, neighbours that are contiguous with each other merged.
 */
std::vector<std::pair<int64_t, int64_t>> merged_dims(const at::Tensor &t)
{
	std::vector<std::pair<int64_t, int64_t>> dims;

	for (int64_t i = 0; i < t.dim(); i++) {
		if (t.size(i) == 1)
			continue;
		if (!dims.empty() && dims.back().second == t.size(i) * t.stride(i)) {
			dims.back().first *= t.size(i);
			dims.back().second = t.stride(i);
		} else {
			dims.push_back({ t.size(i), t.stride(i) });
		}
	}
	return dims;
}

/*
 * @src (a view on the card) as X.transpose(1, 2) of a dense X [batch x m x
 * n x k] at its data pointer: its dimensions, size-1 ones dropped and
 * contiguous neighbours merged, are [batch] n (stride k) m (stride n k)
 * [k (stride 1)].
 */
bool swap_of(const at::Tensor &src, uint64_t *batch, uint64_t *m, uint64_t *n, uint64_t *k)
{
	std::vector<std::pair<int64_t, int64_t>> dims = merged_dims(src);

	*k = 1;
	if (!dims.empty() && dims.back().second == 1) {
		*k = dims.back().first;
		dims.pop_back();
	}
	if (dims.size() < 2 || dims.size() > 3)
		return false;
	size_t j = dims.size() - 2;
	int64_t nn = dims[j].first, mm = dims[j + 1].first, kk = (int64_t)*k;

	if (dims[j].second != kk || dims[j + 1].second != nn * kk || (j && dims[0].second != mm * nn * kk))
		return false;
	*batch = j ? dims[0].first : 1;
	*m = mm;
	*n = nn;
	return true;
}

/* @dst (contiguous) = @src (same device, dtype and shape) with PERMUTE; false when it does not apply. */
bool permute_copy(const at::Tensor &dst, const at::Tensor &src)
{
	uint64_t batch, m, n, k;
	uint32_t dt = 0;
	struct spyre_kdesc d = {};

	if (!kernel_dtype(src.scalar_type(), &dt) || !dst.is_contiguous() || dptr(dst) % kStick ||
	    dptr(src) % kStick || !swap_of(src, &batch, &m, &n, &k) || (k > 1 && (k * src.element_size()) % kStick))
		return false;
	c10::DeviceGuard g(dst.device());
	d.op = SPYRE_KOP_PERMUTE;
	d.dtype = dt;
	d.batch = (uint32_t)batch;
	d.m = m;
	d.n = n;
	d.k = k;
	Kernel kern(dst.device().index(), d);

	if (!kern) {
		forget_kernel_error();	/* the host copies it */
		return false;
	}
	count_card("permute");
	kern.launch({ dptr(src), dptr(dst) });
	return true;
}

/*
 * @dst (contiguous) = @src (same device, dtype and shape) as device copies of
 * whole-stick blocks: @src's innermost run of contiguous elements is whole
 * sticks and every block starts on a stick (an expanded tensor, HF's
 * repeat_kv; a slice of whole rows); false when it does not apply.
 */
constexpr int64_t kMaxBlockCopies = 256;

bool block_copy(const at::Tensor &dst, const at::Tensor &src)
{
	std::vector<std::pair<int64_t, int64_t>> dims = merged_dims(src);
	int64_t es = src.element_size();

	if (!dst.is_contiguous() || dptr(dst) % kStick || dptr(src) % kStick)
		return false;
	if (dims.size() < 2 || dims.back().second != 1 || (dims.back().first * es) % (int64_t)kStick)
		return false;
	int64_t blk = dims.back().first, nblk = src.numel() / blk;

	dims.pop_back();
	for (const auto &d : dims)
		if ((d.second * es) % (int64_t)kStick)
			return false;
	if (nblk > kMaxBlockCopies)
		return false;
	c10::DeviceGuard g(dst.device());
	std::vector<int64_t> idx(dims.size(), 0);

	count_card("block_copy");
	for (int64_t b = 0; b < nblk; b++) {
		int64_t off = 0;

		for (size_t i = 0; i < dims.size(); i++)
			off += idx[i] * dims[i].second;
		copy_d2d(dst.device().index(), dptr(dst) + b * blk * es, dptr(src) + off * es, blk * es);
		for (size_t i = dims.size(); i-- > 0;) {	/* the next block, innermost index first */
			if (++idx[i] < dims[i].first)
				break;
			idx[i] = 0;
		}
	}
	return true;
}

/*
 * Copies that returned before the card was done: non_blocking from or to
 * pinned memory, contiguous, same dtype (torch.spyre.async_copies()).
 */
std::atomic<int64_t> g_async_copies{ 0 };

at::Tensor copy_from(const at::Tensor &self, const at::Tensor &dst, bool non_blocking)
{
	TORCH_CHECK(self.sizes() == dst.sizes() || self.numel() == dst.numel(),
		    "spyre: copy between mismatched shapes ", self.sizes(), " and ", dst.sizes());
	if (!self.numel())
		return dst;
	if (self.is_cpu() && dst.device().type() == c10::DeviceType::PrivateUse1) {
		/* from pinned memory libspyre reads in place, later (copy_h2d) */
		g_async_copies += non_blocking && self.is_contiguous() && dst.is_contiguous() &&
				  self.dtype() == dst.dtype() && self.sizes() == dst.sizes() && is_pinned(self.data_ptr());
		from_host(dst, self.expand_as(dst));
	} else if (self.device().type() == c10::DeviceType::PrivateUse1 && dst.is_cpu()) {
		if (self.is_contiguous() && dst.is_contiguous() && self.dtype() == dst.dtype()) {
			c10::DeviceGuard g(self.device());
			bool async = non_blocking && dptr(self) % kStick == 0 && is_pinned(dst.data_ptr());

			copy_d2h(self.device().index(), dst.data_ptr(), dptr(self), self.nbytes(), !async);
			g_async_copies += async;
		} else {
			dst.copy_(to_host(self));
		}
	} else if (self.device() == dst.device() && self.dtype() == dst.dtype() && self.is_contiguous() &&
		   dst.is_contiguous() && self.sizes() == dst.sizes()) {
		c10::DeviceGuard g(dst.device());

		copy_d2d(dst.device().index(), dptr(dst), dptr(self), self.nbytes());
	} else if (self.device() == dst.device() && self.dtype() == dst.dtype() && self.sizes() == dst.sizes() &&
		   (permute_copy(dst, self) || block_copy(dst, self))) {
	} else {
		TORCH_CHECK(self.device().type() == c10::DeviceType::PrivateUse1 &&
				    dst.device().type() == c10::DeviceType::PrivateUse1,
			    "spyre: copy from ", self.device(), " to ", dst.device(), " is not supported");
		from_host(dst, to_host(self).expand_as(dst));
	}
	return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor &self, const at::Tensor &dst)
{
	if (dst.sizes() != self.sizes())
		resize_(dst, self.sizes(), std::nullopt);
	return copy_from(self, dst, false);
}

at::Tensor &fill_scalar(at::Tensor &self, const at::Scalar &value)
{
	at::Tensor host = at::empty(self.sizes(), self.options().device(at::kCPU)).fill_(value);

	from_host(self, host);
	return self;
}

at::Tensor &zero_(at::Tensor &self)
{
	if (self.is_contiguous() && dptr(self) % kStick == 0 && self.nbytes() % kStick == 0) {
		c10::DeviceGuard g(self.device());

		SPYRE_CHECK(spyre_memset_async(current_stream(self.device().index()), dptr(self), 0, self.nbytes()),
			    "zero_");
		return self;
	}
	return fill_scalar(self, 0);
}

at::Scalar local_scalar_dense(const at::Tensor &self)
{
	return to_host(self).item();
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("empty.memory_format", empty_memory_format);
	m.impl("empty_strided", empty_strided);
	m.impl("resize_", resize_);
	m.impl("_copy_from", copy_from);
	m.impl("_copy_from_and_resize", copy_from_and_resize);
	m.impl("fill_.Scalar", fill_scalar);
	m.impl("zero_", zero_);
	m.impl("_local_scalar_dense", local_scalar_dense);
	m.impl("view", at::native::view);
	m.impl("as_strided", at::native::as_strided_tensorimpl);
	m.impl("_reshape_alias", at::native::_reshape_alias);
}

TORCH_LIBRARY_FRAGMENT(spyre, m)
{
	m.def("async_copies() -> int", [] { return g_async_copies.load(); });
}

}  // namespace spyre_torch
