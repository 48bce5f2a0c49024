// SPDX-License-Identifier: MIT
/*
 * dist.cpp - the ops under the c10d backend "spyreccl" (spyre_torch/
 * distributed.py): libspyre's communicators of one card per process
 * (spyre_comm_init_rank(3)) on spyre tensors, on the current stream of the
 * tensor's card, returning as soon as the work is enqueued. libspyre's
 * collectives move whole 128-byte sticks: a tensor whose bytes or address
 * are not is staged through a stick-padded scratch buffer of the same card.
 * Reductions (all_reduce, reduce_scatter): float32, float16 and bfloat16.
 * Data movement (all_gather, broadcast, send, recv) moves bytes, so any
 * dtype: the stick-padded bytes go as 16-bit elements (units()).
 * comm_group_start/comm_group_end are spyre_comm_group_start/end(3): the
 * sends and receives between them are queued by libspyre and run by the
 * end, so their staging buffers are kept (and a staged receive copied
 * out) until then.
 */
#include <mutex>
#include <vector>

#include <torch/library.h>

#include "spyre_torch.h"

namespace spyre_torch {

namespace {

std::mutex g_comm_lock;
std::vector<spyre_comm_t *> g_comms;	/* handle - 1 */

spyre_comm_t *comm_of(int64_t h)
{
	std::lock_guard<std::mutex> l(g_comm_lock);

	TORCH_CHECK(h >= 1 && h <= (int64_t)g_comms.size() && g_comms[h - 1],
		    "spyreccl: ", h, " is not a live communicator");
	return g_comms[h - 1];
}

uint32_t dtype_of(const at::Tensor &t)
{
	switch (t.scalar_type()) {
	case at::kFloat:
		return SPYRE_DT_FP32;
	case at::kHalf:
		return SPYRE_DT_FP16;
	case at::kBFloat16:
		return SPYRE_DT_BF16;
	default:
		TORCH_CHECK(false, "spyreccl: dtype ", t.scalar_type(),
			    " is not float32, float16 or bfloat16");
	}
}

int card_of(const at::Tensor &t, const char *what)
{
	TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, "spyreccl ", what,
		    ": the tensor is on ", t.device(), ", not a spyre card");
	TORCH_CHECK(t.is_contiguous(), "spyreccl ", what, ": the tensor is not contiguous");
	return t.device().index();
}

/* What data movement passes libspyre for @padded bytes (whole sticks): 16-bit units. */
constexpr uint32_t kMoveDtype = SPYRE_DT_FP16;

size_t units(size_t padded)
{
	return padded / 2;
}

bool whole(uint64_t p, size_t bytes)
{
	return p % kStick == 0 && bytes % kStick == 0;
}

/* A stick-padded buffer holding @bytes of @t (copied in when @in), or @t itself. */
struct Staged {
	int dev;
	uint64_t p;
	at::DataPtr scratch;

	Staged(int d, uint64_t src, size_t bytes, size_t padded, bool in) : dev(d), p(src)
	{
		if (whole(src, bytes) && padded == bytes)
			return;
		scratch = alloc_scratch(dev, padded);
		p = reinterpret_cast<uint64_t>(scratch.get());
		if (in)
			copy_d2d(dev, p, src, bytes);
	}
	bool staged() const
	{
		return (bool)scratch;
	}
};

/*
 * The calling thread's group (libspyre's groups are per thread): its depth,
 * and the staging buffers of the calls queued in it, with where a staged
 * receive goes once the group ran (bytes 0 for a send).
 */
struct Queued {
	Staged b;
	uint64_t dst;
	size_t bytes;
};
thread_local int g_group_depth;
thread_local std::vector<Queued> g_queued;

/* @b of a call just made: kept until the group's end when in one, else a receive's copy out now. */
void after_call(Staged &b, uint64_t dst, size_t bytes)
{
	if (!b.staged())
		return;
	if (g_group_depth)
		g_queued.push_back(Queued{std::move(b), dst, bytes});
	else if (bytes)
		copy_d2d(b.dev, dst, b.p, bytes);
}

void group_start()
{
	SPYRE_CHECK(spyre_comm_group_start(), "spyreccl: group start");
	g_group_depth++;
}

void group_end()
{
	int ret;

	TORCH_CHECK(g_group_depth > 0, "spyreccl: group end without a group start");
	ret = spyre_comm_group_end();
	if (!--g_group_depth) {
		std::vector<Queued> q = std::move(g_queued);

		g_queued.clear();
		for (auto &e : q)
			if (!ret && e.bytes)
				copy_d2d(e.b.dev, e.dst, e.b.p, e.bytes);
	}
	SPYRE_CHECK(ret, "spyreccl: group end");
}

int64_t comm_init(const at::Tensor &id, int64_t nranks, int64_t rank, int64_t dev)
{
	spyre_comm_id_t cid;
	spyre_comm_t *c = nullptr;

	TORCH_CHECK(id.device().is_cpu() && id.scalar_type() == at::kByte &&
		    id.numel() == SPYRE_COMM_ID_BYTES && id.is_contiguous(),
		    "spyreccl: the id is ", SPYRE_COMM_ID_BYTES, " CPU bytes of comm_unique_id()");
	memcpy(cid.internal, id.data_ptr(), sizeof(cid.internal));
	check_index((int)dev);
	SPYRE_CHECK(spyre_comm_init_rank(&c, (int)nranks, &cid, (int)rank, device((int)dev)),
		    "spyreccl: joining as rank " + std::to_string(rank) + " of " + std::to_string(nranks));
	std::lock_guard<std::mutex> l(g_comm_lock);
	g_comms.push_back(c);
	return (int64_t)g_comms.size();
}

void all_reduce(int64_t h, const at::Tensor &t)
{
	int dev = card_of(t, "all_reduce");
	size_t bytes = t.nbytes();
	uint32_t dt = dtype_of(t);

	if (!bytes)
		return;
	Staged b(dev, dptr(t), bytes, stick_up(bytes), true);

	SPYRE_CHECK(spyre_comm_all_reduce(comm_of(h), b.p, b.p, t.numel(), dt, SPYRE_RED_SUM,
					  current_stream(dev)), "spyreccl all_reduce");
	if (b.staged())
		copy_d2d(dev, dptr(t), b.p, bytes);
}

/* out (n x in) = every rank's in. */
void all_gather(int64_t h, const at::Tensor &out, const at::Tensor &in)
{
	int dev = card_of(in, "all_gather"), n = spyre_comm_count(comm_of(h));
	size_t each = in.nbytes(), padded = stick_up(each), r;

	TORCH_CHECK(card_of(out, "all_gather") == dev && out.scalar_type() == in.scalar_type() &&
		    out.nbytes() == each * (size_t)n, "spyreccl all_gather: the output is not ", n,
		    " times the input on its card");
	if (!each)
		return;
	Staged i(dev, dptr(in), each, padded, true);
	Staged o(dev, dptr(out), each * n, padded * n, false);

	SPYRE_CHECK(spyre_comm_all_gather(comm_of(h), i.p, o.p, units(padded), kMoveDtype,
					  current_stream(dev)), "spyreccl all_gather");
	for (r = 0; o.staged() && r < (size_t)n; r++)
		copy_d2d(dev, dptr(out) + r * each, o.p + r * padded, each);
}

/* out = chunk rank of the sum of every rank's in (n x out). */
void reduce_scatter(int64_t h, const at::Tensor &out, const at::Tensor &in)
{
	int dev = card_of(in, "reduce_scatter"), n = spyre_comm_count(comm_of(h));
	size_t each = out.nbytes(), padded = stick_up(each), r;

	TORCH_CHECK(card_of(out, "reduce_scatter") == dev && out.scalar_type() == in.scalar_type() &&
		    in.nbytes() == each * (size_t)n, "spyreccl reduce_scatter: the input is not ", n,
		    " times the output on its card");
	Staged i(dev, dptr(in), each * n, padded * n, false);
	Staged o(dev, dptr(out), each, padded, false);

	for (r = 0; i.staged() && r < (size_t)n; r++)
		copy_d2d(dev, i.p + r * padded, dptr(in) + r * each, each);
	SPYRE_CHECK(spyre_comm_reduce_scatter(comm_of(h), i.p, o.p, padded / in.element_size(),
					      dtype_of(in), SPYRE_RED_SUM, current_stream(dev)),
		    "spyreccl reduce_scatter");
	if (o.staged())
		copy_d2d(dev, dptr(out), o.p, each);
}

void broadcast(int64_t h, const at::Tensor &t, int64_t root)
{
	int dev = card_of(t, "broadcast");
	size_t bytes = t.nbytes();
	if (!bytes)
		return;
	Staged b(dev, dptr(t), bytes, stick_up(bytes), true);

	SPYRE_CHECK(spyre_comm_broadcast(comm_of(h), b.p, units(stick_up(bytes)), kMoveDtype, (int)root,
					 current_stream(dev)), "spyreccl broadcast");
	if (b.staged())
		copy_d2d(dev, dptr(t), b.p, bytes);
}

void send(int64_t h, const at::Tensor &t, int64_t peer)
{
	int dev = card_of(t, "send");
	size_t bytes = t.nbytes();
	if (!bytes)
		return;
	Staged b(dev, dptr(t), bytes, stick_up(bytes), true);

	SPYRE_CHECK(spyre_comm_send(comm_of(h), b.p, units(stick_up(bytes)), kMoveDtype, (int)peer,
				    current_stream(dev)), "spyreccl send");
	after_call(b, 0, 0);
}

void recv(int64_t h, const at::Tensor &t, int64_t peer)
{
	int dev = card_of(t, "recv");
	size_t bytes = t.nbytes();
	if (!bytes)
		return;
	Staged b(dev, dptr(t), bytes, stick_up(bytes), false);

	SPYRE_CHECK(spyre_comm_recv(comm_of(h), b.p, units(stick_up(bytes)), kMoveDtype, (int)peer,
				    current_stream(dev)), "spyreccl recv");
	after_call(b, dptr(t), bytes);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(spyre, m)
{
	m.def("comm_unique_id() -> Tensor", [] {
		at::Tensor id = at::empty({SPYRE_COMM_ID_BYTES}, at::kByte);
		spyre_comm_id_t cid;

		SPYRE_CHECK(spyre_comm_get_unique_id(&cid), "spyreccl: a unique id");
		memcpy(id.data_ptr(), cid.internal, sizeof(cid.internal));
		return id;
	});
	m.def("comm_init(Tensor id, int nranks, int rank, int device) -> int", comm_init);
	m.def("comm_destroy(int h) -> ()", [](int64_t h) {
		spyre_comm_t *c = comm_of(h);
		{
			std::lock_guard<std::mutex> l(g_comm_lock);
			g_comms[h - 1] = nullptr;
		}
		spyre_comm_destroy(c);
	});
	m.def("comm_all_reduce(int h, Tensor(a!) t) -> ()", all_reduce);
	m.def("comm_all_gather(int h, Tensor(a!) out, Tensor inp) -> ()", all_gather);
	m.def("comm_reduce_scatter(int h, Tensor(a!) out, Tensor inp) -> ()", reduce_scatter);
	m.def("comm_broadcast(int h, Tensor(a!) t, int root) -> ()", broadcast);
	m.def("comm_send(int h, Tensor t, int peer) -> ()", send);
	m.def("comm_recv(int h, Tensor(a!) t, int peer) -> ()", recv);
	m.def("comm_group_start() -> ()", group_start);
	m.def("comm_group_end() -> ()", group_end);
	m.def("comm_barrier(int h) -> ()",
	      [](int64_t h) { SPYRE_CHECK(spyre_comm_barrier(comm_of(h)), "spyreccl barrier"); });
}

}  // namespace spyre_torch
