// SPDX-License-Identifier: MIT
/*
 * runtime.cpp - the card as PyTorch's PrivateUse1 device "spyre": devices
 * opened on first use, the allocator (libspyre's caching allocator; tensors
 * stay resident; a c10::DeviceAllocator, so torch.accelerator's memory
 * statistics see it), the device guard (current device and stream per
 * thread, a pool of streams for torch.Stream, events with synchronize and
 * elapsed time, device synchronize), the copy primitives (any alignment;
 * tensors' copies are copy.cpp's), and the spyre:: ops the Python module
 * calls (devices, streams of its own, the cache).
 */
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>

#include "spyre_torch.h"

namespace spyre_torch {

[[noreturn]] void fail(const std::string &what, int rc)
{
	const char *detail = spyre_last_error();

	TORCH_CHECK(false, "spyre: ", what, ": ", (detail && *detail) ? detail : spyre_strerror(rc));
}

/* ---- devices and streams --------------------------------------------------- */

namespace {

/* torch.Stream's streams: a pool per priority (low, normal, high), handed out round robin, as CUDA's. */
constexpr int kPoolStreams = 4;

struct Dev {
	std::once_flag once;
	spyre_device_t *dev = nullptr;
	spyre_kcache_t *kc = nullptr;
	std::mutex mu;
	std::vector<spyre_stream_t *> streams;	/* id 0: the default stream */
	int64_t pool[3][kPoolStreams] = {};	/* stream ids, 0 until made */
	unsigned next[3] = {};
};

/*
 * The globals are never destroyed: at interpreter shutdown Python frees tensors
 * and streams in no particular order relative to C++ static destructors.
 */
Dev *const g_devs = new Dev[kMaxDevices];
thread_local int t_dev = 0;
thread_local int64_t t_stream[kMaxDevices];

}  // namespace

void check_index(int index)
{
	int n = device_count();

	TORCH_CHECK(index >= 0 && index < n, "spyre: device index ", index, " is out of range (",
		    n, n == 1 ? " device" : " devices", n ? ": spyre:0..spyre:" + std::to_string(n - 1) : "", ")");
}

namespace {

Dev &dev_state(int index)
{
	check_index(index);
	Dev &d = g_devs[index];

	std::call_once(d.once, [&d, index] {
		spyre_stream_t *s = nullptr;

		SPYRE_CHECK(spyre_device_open(index, &d.dev), "cannot open device " + std::to_string(index));
		SPYRE_CHECK(spyre_kcache_create(d.dev, 256, &d.kc), "cannot create the kernel cache");
		SPYRE_CHECK(spyre_stream_create(d.dev, SPYRE_STREAM_PRIORITY_NORMAL, &s),
			    "cannot create the default stream");
		d.streams.push_back(s);
	});
	TORCH_CHECK(d.dev, "spyre: device ", index, " failed to open earlier");
	return d;
}

}  // namespace

int device_count()
{
	static int n = -1;
	static std::once_flag once;

	std::call_once(once, [] {
		int c = spyre_device_count();

		n = c < 0 ? 0 : std::min(c, kMaxDevices);
	});
	return n;
}

int current_device()
{
	return t_dev;
}

void set_current_device(int index)
{
	check_index(index);
	t_dev = index;
}

bool device_opened(int index)
{
	return index >= 0 && index < kMaxDevices && g_devs[index].dev;
}

spyre_device_t *device(int index)
{
	return dev_state(index).dev;
}

spyre_kcache_t *kcache(int index)
{
	return dev_state(index).kc;
}

spyre_stream_t *stream_of(int index, int64_t id)
{
	Dev &d = dev_state(index);
	std::lock_guard<std::mutex> g(d.mu);

	TORCH_CHECK(id >= 0 && id < (int64_t)d.streams.size() && d.streams[id], "spyre: no stream ", id,
		    " on device ", index, id > 0 && id < (int64_t)d.streams.size() ? " (destroyed)" : "");
	return d.streams[id];
}

spyre_stream_t *current_stream(int index)
{
	return stream_of(index, t_stream[index]);
}

/* The next stream of priority @prio's pool on device @index (made on first use). */
static int64_t pool_stream(int index, int prio)
{
	Dev &d = dev_state(index);
	std::lock_guard<std::mutex> g(d.mu);
	int64_t &id = d.pool[prio][d.next[prio]++ % kPoolStreams];

	if (!id) {
		spyre_stream_t *s = nullptr;

		SPYRE_CHECK(spyre_stream_create(d.dev, prio, &s), "cannot create a stream");
		d.streams.push_back(s);
		id = (int64_t)d.streams.size() - 1;
	}
	return id;
}

/* ---- copies ------------------------------------------------------------------ */

/* @wait false: return once queued (@dst is pinned memory the caller keeps alive). */
void copy_d2h(int dev, void *dst, uint64_t src, size_t bytes, bool wait)
{
	spyre_stream_t *s = current_stream(dev);

	if (!bytes)
		return;
	if (src % kStick) {
		/* whole sticks from the aligned start, then the part asked for */
		std::vector<uint8_t> tmp(stick_up(src + bytes) - stick_down(src));

		copy_d2h(dev, tmp.data(), stick_down(src), tmp.size());
		memcpy(dst, tmp.data() + (src - stick_down(src)), bytes);
		return;
	}
	SPYRE_CHECK(spyre_memcpy_async(s, (uint64_t)(uintptr_t)dst, src, bytes, SPYRE_MEMCPY_D2H),
		    "copy of " + std::to_string(bytes) + " bytes from the device");
	if (wait)
		SPYRE_CHECK(spyre_stream_synchronize(s), "copy from the device");
}

void copy_h2d(int dev, uint64_t dst, const void *src, size_t bytes)
{
	spyre_stream_t *s = current_stream(dev);

	if (!bytes)
		return;
	if (dst % kStick) {
		/* read-modify-write of the sticks it touches (allocations are whole sticks) */
		std::vector<uint8_t> tmp(stick_up(dst + bytes) - stick_down(dst));

		copy_d2h(dev, tmp.data(), stick_down(dst), tmp.size());
		memcpy(tmp.data() + (dst - stick_down(dst)), src, bytes);
		copy_h2d(dev, stick_down(dst), tmp.data(), tmp.size());
		return;
	}
	/*
	 * pageable host memory is staged: the call returns once @src is consumed;
	 * pinned memory is read in place later (its deleter waits for the device)
	 */
	SPYRE_CHECK(spyre_memcpy_async(s, dst, (uint64_t)(uintptr_t)src, bytes, SPYRE_MEMCPY_H2D),
		    "copy of " + std::to_string(bytes) + " bytes to the device");
}

void copy_d2d(int dev, uint64_t dst, uint64_t src, size_t bytes)
{
	if (!bytes)
		return;
	if (dst % kStick == 0 && src % kStick == 0 && bytes % kStick == 0) {
		SPYRE_CHECK(spyre_memcpy_async(current_stream(dev), dst, src, bytes, SPYRE_MEMCPY_D2D),
			    "device-to-device copy of " + std::to_string(bytes) + " bytes");
		return;
	}
	std::vector<uint8_t> tmp(bytes);

	copy_d2h(dev, tmp.data(), src, bytes);
	copy_h2d(dev, dst, tmp.data(), bytes);
}

/* ---- the allocator ------------------------------------------------------------ */

namespace {

/*
 * Stream-ordered reuse, as CUDA's caching allocator: a freed block goes back
 * to the free list of the stream it was allocated on and is handed out again
 * only to that stream, whose later work runs after everything that used it
 * there. Giving it to another stream at once (libspyre's allocator is per
 * device) would let that stream overwrite data a queued kernel still reads.
 * Blocks go back to libspyre after a device synchronize (empty_cache, or an
 * allocation that found the card full). A tensor used on another stream than
 * its own is recorded there (Tensor.record_stream): its block waits for that
 * stream when it is freed.
 */
struct Alloc {
	spyre_dptr_t p;
	size_t size;
	int dev;
	int64_t stream;
	std::vector<int64_t> used_on;	/* other streams (record_stream) */
	std::shared_ptr<GraphPool> graph;	/* allocated while a graph captured: its pool's */
};

struct Pool {
	std::mutex mu;
	std::multimap<std::pair<int64_t, size_t>, spyre_dptr_t> free;	/* (stream, size) */
	uint64_t in_use = 0, peak = 0, cached = 0;
	/* torch.accelerator.memory_stats(): live and peak blocks, bytes ever allocated and freed */
	int64_t blocks = 0, peak_blocks = 0, allocs = 0, frees = 0, bytes_allocated = 0, bytes_freed = 0;
	int64_t retries = 0, ooms = 0;
	std::vector<std::shared_ptr<GraphPool>> capturing;	/* graphs being captured on this device */
};
Pool *const g_pools = new Pool[kMaxDevices];

}  // namespace

/* A graph's blocks (spyre_torch.h): guarded by the device's Pool::mu. */
struct GraphPool {
	int dev;
	int64_t stream;
	bool capturing = true, released = false;
	std::multimap<size_t, std::pair<int64_t, spyre_dptr_t>> free;	/* size -> (stream, block) */
};

namespace {

/* The graph capturing on @stream of @pl's device, or null (pl.mu held). */
std::shared_ptr<GraphPool> capture_pool(Pool &pl, int64_t stream)
{
	for (auto &gp : pl.capturing)
		if (gp->stream == stream)
			return gp;
	return nullptr;
}

void free_alloc(void *ctx)
{
	auto *a = static_cast<Alloc *>(ctx);
	Pool &pl = g_pools[a->dev];

	for (int64_t id : a->used_on) {	/* its work there must be done before the block is reused */
		Dev &d = g_devs[a->dev];
		spyre_stream_t *s = nullptr;
		{
			std::lock_guard<std::mutex> g(d.mu);

			if (id != a->stream && id < (int64_t)d.streams.size())
				s = d.streams[id];
		}
		if (s)
			spyre_stream_synchronize(s);
	}
	std::lock_guard<std::mutex> g(pl.mu);
	/* a block freed while a graph captures may be one the graph reads: the graph keeps it */
	std::shared_ptr<GraphPool> gp = a->graph ? a->graph : (pl.capturing.empty() ? nullptr : pl.capturing[0]);

	if (gp && !gp->released)
		gp->free.emplace(a->size, std::make_pair(a->stream, a->p));
	else
		pl.free.emplace(std::make_pair(a->stream, a->size), a->p);
	pl.in_use -= a->size;
	pl.cached += a->size;
	pl.blocks--;
	pl.frees++;
	pl.bytes_freed += a->size;
	delete a;
}

}  // namespace

/*
 * Give every cached block back to libspyre: take them off the free lists
 * first, then synchronize the device (the work that used them is done), then
 * free. A block freed by another thread meanwhile stays cached.
 */
static void release_cached(int d)
{
	Pool &pl = g_pools[d];
	std::vector<spyre_dptr_t> ptrs;

	{
		std::lock_guard<std::mutex> g(pl.mu);

		for (auto &kv : pl.free)
			ptrs.push_back(kv.second);
		pl.free.clear();
		pl.cached = 0;
	}
	spyre_device_synchronize(device(d));
	for (spyre_dptr_t p : ptrs)
		spyre_free(device(d), p);
}

static uint64_t bytes_in_use(int d, bool peak)
{
	Pool &pl = g_pools[d];
	std::lock_guard<std::mutex> g(pl.mu);

	return peak ? pl.peak : pl.in_use;
}

static void empty_cache(int d)
{
	release_cached(d);
	SPYRE_CHECK(spyre_empty_cache(device(d)), "empty_cache");
}

namespace {

struct SpyreAllocator final : c10::DeviceAllocator {
	at::DataPtr allocate(size_t n) override
	{
		int d = current_device();
		spyre_device_t *dev = device(d);
		c10::Device where(c10::DeviceType::PrivateUse1, (c10::DeviceIndex)d);
		/* whole sticks: copies and kernels may touch the last one entirely */
		size_t sz = stick_up(n);
		int64_t stream = t_stream[d];
		Pool &pl = g_pools[d];
		spyre_dptr_t p = 0;
		int rc;

		std::shared_ptr<GraphPool> gp;

		if (!n)
			return at::DataPtr(nullptr, where);
		{
			std::lock_guard<std::mutex> g(pl.mu);

			gp = pl.capturing.empty() ? nullptr : capture_pool(pl, stream);
			/* a graph being captured reuses its own blocks first (its work is ordered on its stream) */
			auto git = gp ? gp->free.find(sz) : decltype(gp->free.end()){};

			if (gp && git != gp->free.end() && git->second.first == stream) {
				p = git->second.second;
				gp->free.erase(git);
				pl.cached -= sz;
			} else {
				auto it = pl.free.find(std::make_pair(stream, sz));

				if (it != pl.free.end()) {
					p = it->second;
					pl.free.erase(it);
					pl.cached -= sz;
				}
			}
		}
		if (!p) {
			rc = spyre_malloc(dev, sz, &p);
			if (rc == -ENOMEM) {	/* the cache may hold what is missing */
				release_cached(d);
				rc = spyre_malloc(dev, sz, &p);
				std::lock_guard<std::mutex> g(pl.mu);
				pl.retries++;
				pl.ooms += rc == -ENOMEM;
			}
			if (rc) {
				struct spyre_mem_stats st = {};
				std::string detail = spyre_last_error() ? spyre_last_error() : "";

				st.size = sizeof(st);
				spyre_mem_get_stats(dev, &st);
				TORCH_CHECK(false, "spyre: ", rc == -ENOMEM ? "out of device memory: " : "",
					    "cannot allocate ", n, " bytes on spyre:", d, " (",
					    bytes_in_use(d, false), " bytes in tensors, ", st.reserved, " reserved",
					    rc == -ENOMEM ? "; free tensors, then torch.spyre.empty_cache()" : "", "): ",
					    detail.empty() ? spyre_strerror(rc) : detail);
			}
		}
		{
			std::lock_guard<std::mutex> g(pl.mu);

			pl.in_use += sz;
			pl.peak = std::max(pl.peak, pl.in_use);
			pl.blocks++;
			pl.peak_blocks = std::max(pl.peak_blocks, pl.blocks);
			pl.allocs++;
			pl.bytes_allocated += sz;
		}
		return at::DataPtr(reinterpret_cast<void *>(p), new Alloc{ p, sz, d, stream, {}, gp }, &free_alloc,
				   where);
	}

	c10::DeleterFnPtr raw_deleter() const override
	{
		return nullptr;	/* the context is not the pointer: no raw_allocate */
	}

	void copy_data(void *dst, const void *src, size_t n) const override
	{
		copy_d2d(current_device(), reinterpret_cast<uint64_t>(dst), reinterpret_cast<uint64_t>(src), n);
	}

	/* ---- c10::DeviceAllocator: torch.accelerator.memory_* and torch.spyre's ---- */
	bool initialized() override
	{
		return true;
	}
	void emptyCache(c10::MempoolId_t) override
	{
		for (int d = 0; d < device_count(); d++)
			if (device_opened(d))
				empty_cache(d);
	}
	void recordStream(const c10::DataPtr &ptr, c10::Stream s) override
	{
		if (ptr.get_deleter() != &free_alloc || !ptr.get_context())
			return;
		std::lock_guard<std::mutex> g(g_pools[s.device_index()].mu);
		static_cast<Alloc *>(ptr.get_context())->used_on.push_back(s.id());
	}
	c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex d) override
	{
		c10::CachingDeviceAllocator::DeviceStats ds;
		struct spyre_mem_stats st = {};
		Pool &pl = g_pools[d];
		auto all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);

		check_index(d);
		if (device_opened(d)) {
			st.size = sizeof(st);
			SPYRE_CHECK(spyre_mem_get_stats(device(d), &st), "memory statistics");
		}
		std::lock_guard<std::mutex> g(pl.mu);
		ds.allocation[all] = { pl.blocks, pl.peak_blocks, pl.allocs, pl.frees };
		ds.active[all] = ds.allocation[all];
		ds.allocated_bytes[all] = { (int64_t)pl.in_use, (int64_t)pl.peak, pl.bytes_allocated, pl.bytes_freed };
		ds.active_bytes[all] = ds.allocated_bytes[all];
		ds.requested_bytes[all] = ds.allocated_bytes[all];
		ds.reserved_bytes[all].current = (int64_t)st.reserved;
		ds.reserved_bytes[all].peak = (int64_t)st.reserved;
		ds.segment[all].current = (int64_t)st.bo_creates;
		ds.num_alloc_retries = pl.retries;
		ds.num_ooms = pl.ooms;
		ds.num_device_alloc = (int64_t)st.alloc_calls;
		return ds;
	}
	void resetAccumulatedStats(c10::DeviceIndex d) override
	{
		Pool &pl = g_pools[d];
		std::lock_guard<std::mutex> g(pl.mu);

		pl.allocs = pl.frees = pl.bytes_allocated = pl.bytes_freed = pl.retries = pl.ooms = 0;
	}
	void resetPeakStats(c10::DeviceIndex d) override
	{
		Pool &pl = g_pools[d];
		std::lock_guard<std::mutex> g(pl.mu);

		pl.peak = pl.in_use;
		pl.peak_blocks = pl.blocks;
	}
};

SpyreAllocator g_alloc;

}  // namespace

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_alloc);

namespace {

}  // namespace

std::shared_ptr<GraphPool> graph_pool_begin(int dev, int64_t stream)
{
	Pool &pl = g_pools[dev];
	auto gp = std::make_shared<GraphPool>();

	gp->dev = dev;
	gp->stream = stream;
	std::lock_guard<std::mutex> g(pl.mu);
	TORCH_CHECK(!capture_pool(pl, stream), "spyre: stream ", stream, " of spyre:", dev, " already captures a graph");
	pl.capturing.push_back(gp);
	return gp;
}

void graph_pool_end(const std::shared_ptr<GraphPool> &gp)
{
	Pool &pl = g_pools[gp->dev];
	std::lock_guard<std::mutex> g(pl.mu);

	gp->capturing = false;
	pl.capturing.erase(std::remove(pl.capturing.begin(), pl.capturing.end(), gp), pl.capturing.end());
}

/* The graph's replays are done (its exec was destroyed): its free blocks are everyone's again. */
void graph_pool_release(const std::shared_ptr<GraphPool> &gp)
{
	graph_pool_end(gp);
	Pool &pl = g_pools[gp->dev];
	std::lock_guard<std::mutex> g(pl.mu);

	gp->released = true;
	for (auto &kv : gp->free)
		pl.free.emplace(std::make_pair(kv.second.first, kv.first), kv.second.second);
	gp->free.clear();
}

c10::Allocator *allocator()
{
	return &g_alloc;
}

at::DataPtr alloc_scratch(int dev, size_t bytes)
{
	c10::DeviceGuard g(c10::Device(c10::DeviceType::PrivateUse1, (c10::DeviceIndex)dev));

	return g_alloc.allocate(bytes);
}

/* ---- the device guard ---------------------------------------------------------- */

namespace {

struct SpyreGuardImpl final : c10::impl::DeviceGuardImplInterface {
	c10::DeviceType type() const override
	{
		return c10::DeviceType::PrivateUse1;
	}
	c10::Device exchangeDevice(c10::Device d) const override
	{
		c10::Device old = getDevice();

		if (d.index() >= 0 && d.index() != old.index())
			setDevice(d);
		return old;
	}
	c10::Device getDevice() const override
	{
		return c10::Device(c10::DeviceType::PrivateUse1, (c10::DeviceIndex)t_dev);
	}
	void setDevice(c10::Device d) const override
	{
		check_index(d.index());
		t_dev = d.index();
	}
	void uncheckedSetDevice(c10::Device d) const noexcept override
	{
		if (d.index() >= 0 && d.index() < kMaxDevices)
			t_dev = d.index();
	}
	c10::Stream getStream(c10::Device d) const noexcept override
	{
		int i = d.index() < 0 || d.index() >= kMaxDevices ? t_dev : d.index();

		return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, (c10::DeviceIndex)i),
				   t_stream[i]);
	}
	c10::Stream getDefaultStream(c10::Device d) const override
	{
		return c10::Stream(c10::Stream::UNSAFE, d, 0);
	}
	c10::Stream exchangeStream(c10::Stream s) const noexcept override
	{
		c10::Stream old = getStream(s.device());

		if (s.device_index() >= 0 && s.device_index() < kMaxDevices)
			t_stream[s.device_index()] = s.id();
		return old;
	}
	c10::DeviceIndex deviceCount() const noexcept override
	{
		return (c10::DeviceIndex)device_count();
	}
	void record(void **event, const c10::Stream &stream, const c10::DeviceIndex device_index,
		    const c10::EventFlag) const override
	{
		int i = device_index < 0 ? stream.device_index() : device_index;
		auto **e = reinterpret_cast<spyre_event_t **>(event);

		if (!*e)
			SPYRE_CHECK(spyre_event_create(device(i), e), "cannot create an event");
		SPYRE_CHECK(spyre_event_record(*e, stream_of(i, stream.id())), "event record");
	}
	void block(void *event, const c10::Stream &stream) const override
	{
		if (event)
			SPYRE_CHECK(spyre_stream_wait_event(stream_of(stream.device_index(), stream.id()),
							    static_cast<spyre_event_t *>(event)),
				    "stream wait for an event");
	}
	bool queryEvent(void *event) const override
	{
		int rc;

		if (!event)
			return true;
		rc = spyre_event_query(static_cast<spyre_event_t *>(event));
		if (rc == -EBUSY)
			return false;
		if (rc && rc != -EINVAL)	/* -EINVAL: never recorded, as CUDA: complete */
			fail("event query", rc);
		return true;
	}
	void destroyEvent(void *event, const c10::DeviceIndex) const noexcept override
	{
		if (event)
			spyre_event_destroy(static_cast<spyre_event_t *>(event));
	}
	bool queryStream(const c10::Stream &s) const override
	{
		int rc = spyre_stream_query(stream_of(s.device_index(), s.id()));

		if (rc == -EBUSY)
			return false;
		if (rc)
			fail("stream query", rc);
		return true;
	}
	void synchronizeStream(const c10::Stream &s) const override
	{
		SPYRE_CHECK(spyre_stream_synchronize(stream_of(s.device_index(), s.id())), "stream synchronize");
	}
	/* torch.Stream(device="spyre", priority=p): p < 0 high, 0 normal, > 0 low (CUDA's sense) */
	c10::Stream getNewStream(c10::Device d, int priority) const override
	{
		int i = d.has_index() ? d.index() : t_dev;

		return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, (c10::DeviceIndex)i),
				   pool_stream(i, priority < 0 ? SPYRE_STREAM_PRIORITY_HIGH :
						  priority > 0 ? SPYRE_STREAM_PRIORITY_LOW : SPYRE_STREAM_PRIORITY_NORMAL));
	}
	c10::Stream getStreamFromGlobalPool(c10::Device d, bool high) const override
	{
		return getNewStream(d, high ? -1 : 0);
	}
	void synchronizeEvent(void *event) const override
	{
		if (event)
			SPYRE_CHECK(spyre_event_synchronize(static_cast<spyre_event_t *>(event)), "event synchronize");
	}
	void synchronizeDevice(c10::DeviceIndex i) const override
	{
		SPYRE_CHECK(spyre_device_synchronize(device(i < 0 ? t_dev : i)), "device synchronize");
	}
	/* device time from @a to @b in ms (both recorded and reached; c10::Event checks) */
	double elapsedTime(void *a, void *b, c10::DeviceIndex) const override
	{
		float ms = 0;

		TORCH_CHECK(a && b, "spyre: elapsed time between events that were never recorded");
		SPYRE_CHECK(spyre_event_elapsed_ms(static_cast<spyre_event_t *>(a), static_cast<spyre_event_t *>(b), &ms),
			    "elapsed time");
		return ms;
	}
	void recordDataPtrOnStream(const c10::DataPtr &p, const c10::Stream &s) const override
	{
		g_alloc.recordStream(p, s);
	}
};

}  // namespace

C10_REGISTER_GUARD_IMPL(PrivateUse1, SpyreGuardImpl);

/* ---- the spyre:: ops of the Python module --------------------------------------- */

namespace {

/* A stream of its own for torch.spyre.Stream (@priority libspyre's: 0 low .. 2 high). */
int64_t stream_create(int64_t dev, int64_t priority)
{
	Dev &d = dev_state((int)dev);
	spyre_stream_t *s = nullptr;

	TORCH_CHECK(priority >= SPYRE_STREAM_PRIORITY_LOW && priority <= SPYRE_STREAM_PRIORITY_HIGH,
		    "spyre: stream priority ", priority, " is not 0 (low), 1 (normal) or 2 (high)");
	SPYRE_CHECK(spyre_stream_create(d.dev, (int)priority, &s), "cannot create a stream");
	std::lock_guard<std::mutex> g(d.mu);
	d.streams.push_back(s);
	return (int64_t)d.streams.size() - 1;
}

/* Destroy stream @id of @dev (waits for its work); its cached blocks go back to libspyre. */
void stream_destroy(int64_t dev, int64_t id)
{
	Dev &d = dev_state((int)dev);
	spyre_stream_t *s;

	TORCH_CHECK(id != 0, "spyre: the default stream cannot be destroyed");
	{
		std::lock_guard<std::mutex> g(d.mu);

		TORCH_CHECK(id > 0 && id < (int64_t)d.streams.size() && d.streams[id], "spyre: no stream ", id,
			    " on device ", dev);
		s = d.streams[id];
		d.streams[id] = nullptr;
	}
	spyre_stream_destroy(s);
	Pool &pl = g_pools[dev];
	std::vector<spyre_dptr_t> ptrs;
	{
		std::lock_guard<std::mutex> g(pl.mu);

		for (auto it = pl.free.begin(); it != pl.free.end();) {
			if (it->first.first == id) {
				ptrs.push_back(it->second);
				pl.cached -= it->first.second;
				it = pl.free.erase(it);
			} else {
				++it;
			}
		}
	}
	for (spyre_dptr_t p : ptrs)
		spyre_free(d.dev, p);
}

}  // namespace

TORCH_LIBRARY(spyre, m)
{
	m.def("device_count() -> int", [] { return (int64_t)device_count(); });
	m.def("device_type_id() -> int", [] { return (int64_t)c10::DeviceType::PrivateUse1; });
	m.def("set_device(int d) -> ()", [](int64_t d) {
		check_index((int)d);
		t_dev = (int)d;
	});
	m.def("current_device() -> int", [] { return (int64_t)t_dev; });
	m.def("synchronize(int d) -> ()",
	      [](int64_t d) { SPYRE_CHECK(spyre_device_synchronize(device((int)d)), "device synchronize"); });
	m.def("stream_create(int d, int priority) -> int", stream_create);
	m.def("stream_destroy(int d, int id) -> ()", stream_destroy);
	m.def("set_stream(int d, int id) -> ()", [](int64_t d, int64_t id) {
		stream_of((int)d, id);
		t_stream[d] = id;
	});
	m.def("empty_cache(int d) -> ()", [](int64_t d) { empty_cache((int)d); });
}

}  // namespace spyre_torch
