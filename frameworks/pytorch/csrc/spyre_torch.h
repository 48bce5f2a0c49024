// SPDX-License-Identifier: MIT
/*
 * spyre_torch.h - the PrivateUse1 backend "spyre" over libspyre: what
 * runtime.cpp (devices, allocator, device guard, streams, events, copy
 * primitives), copy.cpp (tensors: factories, views, copies), hooks.cpp (PyTorch's PrivateUse1 hooks: generators, pinned memory) and
 * ops.cpp (compute through the kernel library, the CPU fallback) share.
 *
 * Tensors on the card are PyTorch's own dense layout in device memory (a
 * device VA in the DataPtr, like CUDA's); kernels of the kernel library read
 * and write the stick layout (rows padded to 128 bytes), which is the same
 * bytes when a row is a whole number of sticks. Otherwise the op stages its
 * operands in stick-layout device buffers (counted: relayouts()).
 */
#ifndef SPYRE_TORCH_H
#define SPYRE_TORCH_H

#include <cstdint>
#include <memory>
#include <string>

#include <ATen/ATen.h>
#include <ATen/core/Generator.h>
#include <c10/core/Stream.h>

extern "C" {
#include "spyre.h"
#include "spyre_isa.h"
#include "spyre_kernels.h"
}

namespace spyre_torch {

constexpr int kMaxDevices = 16;
constexpr uint64_t kStick = 128;

/* An error from libspyre as a RuntimeError naming @what and libspyre's detail. */
[[noreturn]] void fail(const std::string &what, int rc);
#define SPYRE_CHECK(call, what)                                 \
	do {                                                    \
		int rc_ = (call);                               \
		if (rc_)                                        \
			::spyre_torch::fail((what), rc_);       \
	} while (0)

/* RuntimeError unless 0 <= @index < device_count(). */
void check_index(int index);
/* The device of @index, opened on first use (RuntimeError if there is none). */
spyre_device_t *device(int index);
spyre_kcache_t *kcache(int index);
int device_count();
bool device_opened(int index);
int current_device();
void set_current_device(int index);	/* RuntimeError for an index out of range */

/* The current stream of device @index (libspyre handle) and its torch id. */
spyre_stream_t *current_stream(int index);
spyre_stream_t *stream_of(int index, int64_t id);

/* Device addresses of a tensor on the card. */
inline uint64_t dptr(const at::Tensor &t)
{
	return reinterpret_cast<uint64_t>(t.data_ptr());
}

/* Copies with any alignment: whole sticks where libspyre needs them. */
void copy_h2d(int dev, uint64_t dst, const void *src, size_t bytes);
void copy_d2h(int dev, void *dst, uint64_t src, size_t bytes, bool wait = true);
void copy_d2d(int dev, uint64_t dst, uint64_t src, size_t bytes);

/* The device allocator (runtime.cpp); a buffer of it for scratch use: freed when the DataPtr dies. */
c10::Allocator *allocator();
at::DataPtr alloc_scratch(int dev, size_t bytes);

/* Allocations and device copies are whole sticks. */
inline uint64_t stick_down(uint64_t a)
{
	return a & ~(kStick - 1);
}

inline uint64_t stick_up(uint64_t a)
{
	return (a + kStick - 1) & ~(kStick - 1);
}

/* Pinned host memory (spyre_malloc_host), and the device's default generator (hooks.cpp). */
bool is_pinned(const void *p);
const at::Generator &default_generator(int index);

/*
 * Graphs (graphs.cpp): while @s captures, the graph takes over the caller's
 * reference to kernel @k its launch named (true), so its program outlives
 * the graph's replays; false when @s captures no graph of ours.
 */
bool graph_keep_kernel(spyre_stream_t *s, spyre_kernel_t *k);

/*
 * The allocator's side of a graph (runtime.cpp): every block allocated on
 * stream @stream of @dev while it captures, and every block of @dev freed
 * meanwhile, belongs to the graph's pool until graph_pool_release(): freed,
 * it is reused only by a later capture into the same pool, never by other
 * tensors, since a replay still reads and writes it.
 */
struct GraphPool;
std::shared_ptr<GraphPool> graph_pool_begin(int dev, int64_t stream);
void graph_pool_end(const std::shared_ptr<GraphPool> &p);	/* capture over: no more allocations from it */
void graph_pool_release(const std::shared_ptr<GraphPool> &p);	/* the graph is gone: its blocks go back */

/* Counters read by the tests: ops that fell back to the CPU, stick relayouts. */
void count_fallback(const std::string &op);
void count_relayout();

}  // namespace spyre_torch

#endif
