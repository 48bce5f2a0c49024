// SPDX-License-Identifier: MIT
/*
 * Collectives over the cards of one process (NCCL's single-process,
 * multi-device use): a communicator is a ring of N devices in the order
 * given; all-reduce is a ring reduce-scatter then a ring all-gather, each
 * step a peer copy (spyre_memcpy_peer_async(), run by whichever card of the
 * pair can reach the other) and, for reductions, the kernel library's ADD
 * on the receiving card. Buffers are split into N chunks of whole sticks.
 * Steps across cards are ordered by the cards, not the host: each rank has
 * a cross-device event (SPYRE_EVENT_CROSS_DEVICE); before a step every
 * stream waits on the device for the others' events of the step before
 * (a device-side barrier), and when a sender pushed, the receiver's ADD
 * waits for the sender's event recorded after the copy. A call enqueues
 * every step and returns; the results are there for later work on each
 * rank's stream, and the host waits only when a scratch buffer grows.
 * Reaches the runtime through spyre.h only, and the kernel library's
 * public API.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "spyre.h"
#include "spyre_kernels.h"
#include "spyre_isa.h"
#include "common.h"
#include "coll.h"


static size_t dtype_size(uint32_t dtype)
{
	return SPYRE_DT_SIZE(dtype);
}

int coll_check_dtype(uint32_t dtype, const char *what)
{
	if (dtype != SPYRE_DT_FP32 && dtype != SPYRE_DT_FP16 && dtype != SPYRE_DT_BF16 &&
	    dtype != SPYRE_DT_DL16)
		return spyre_error(-EINVAL, "%s: dtype %u is not fp32, fp16, bf16 or dl16", what, dtype);
	return 0;
}

void coll_split(size_t bytes, int n, struct coll_chunk *c)
{
	size_t sticks = bytes / COLL_STICK, off = 0;
	int i;

	for (i = 0; i < n; i++) {
		size_t s = sticks / (size_t)n + ((size_t)i < sticks % (size_t)n);

		c[i].off = off;
		c[i].len = s * COLL_STICK;
		off += c[i].len;
	}
}

/* Rank @r's stream: what was enqueued on it so far, for the other cards to wait on. */
static int mark(spyre_comm_t *comm, spyre_stream_t *const *streams, int r)
{
	return spyre_event_record(comm->ev[r], streams[r]);
}

/* Rank @r's stream waits on the device for rank @o's last mark(). */
static int after(spyre_comm_t *comm, spyre_stream_t *const *streams, int r, int o)
{
	return r == o ? 0 : spyre_stream_wait_event(streams[r], comm->ev[o]);
}

/*
 * A barrier on the devices: every stream's later work runs after every
 * stream's work enqueued so far. No host wait.
 */
static int barrier(spyre_comm_t *comm, spyre_stream_t *const *streams)
{
	int r, o, ret = 0;

	if (comm->n == 1)
		return 0;
	for (r = 0; !ret && r < comm->n; r++)
		ret = mark(comm, streams, r);
	for (r = 0; !ret && r < comm->n; r++)
		for (o = 0; !ret && o < comm->n; o++)
			ret = after(comm, streams, r, o);
	return ret;
}

/* The rank whose card runs the peer copy from @src to @dst. */
static int runner_of(const spyre_comm_t *comm, int dst, int src)
{
	return comm->access[dst][src] ? dst : src;
}

/*
 * A copy between @src and @dst on the runner's stream: before it, the
 * runner's stream waits for the other's work so far (@before); after it,
 * the other's stream waits for the copy (the data, or the end of the read).
 */
static int around_copy(spyre_comm_t *comm, spyre_stream_t *const *streams, int dst, int src, bool before)
{
	int run = runner_of(comm, dst, src), other = run == dst ? src : dst;

	if (before)
		return mark(comm, streams, other) ?: after(comm, streams, run, other);
	return mark(comm, streams, run) ?: after(comm, streams, other, run);
}

/*
 * Before a scratch buffer is freed or reused at another size: every card's
 * work done (streams of earlier calls may still use it).
 */
static int drain(spyre_comm_t *comm)
{
	int r, ret = 0;

	for (r = 0; r < comm->n; r++)
		ret = ret ?: spyre_device_synchronize(comm->dev[r]);
	return ret;
}

/* Peer copy of @len bytes from rank @src to rank @dst on the stream of the card that can. */
static int copy(spyre_comm_t *comm, spyre_stream_t *const *streams, int dst, spyre_dptr_t d,
		int src, spyre_dptr_t s, size_t len)
{
	if (!len)
		return 0;
	return spyre_memcpy_peer_async(streams[runner_of(comm, dst, src)], comm->dev[dst], d,
				       comm->dev[src], s, len);
}

/* Y = A + B in place, rows of one stick. */
int coll_add(spyre_kcache_t *cache, spyre_stream_t *s, uint32_t dtype, spyre_dptr_t y, spyre_dptr_t b,
	     size_t len)
{
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_ADD, .dtype = dtype,
				 .m = len / COLL_STICK, .n = COLL_STICK / dtype_size(dtype) };
	spyre_kernel_t *k;
	int ret;

	if (!len)
		return 0;
	ret = spyre_kernel_get(cache, &d, &k);
	if (ret)
		return ret;
	ret = spyre_kernel_launch(s, k, (spyre_dptr_t[]){ y, b, y }, 3, NULL, 0);
	spyre_kernel_put(k);
	return ret;
}

/* buf[@r] chunk += tmp[@r] on rank @r. */
static int add(spyre_comm_t *comm, spyre_stream_t *const *streams, int r, uint32_t dtype,
	       spyre_dptr_t y, size_t len)
{
	return coll_add(comm->cache[r], streams[r], dtype, y, comm->tmp[r], len);
}

static int tmp_reserve(spyre_comm_t *comm, size_t bytes)
{
	int r, ret;

	if (bytes <= comm->tmp_bytes)
		return 0;
	ret = drain(comm);
	if (ret)
		return ret;
	for (r = 0; r < comm->n; r++) {
		spyre_free(comm->dev[r], comm->tmp[r]);
		comm->tmp[r] = 0;
	}
	comm->tmp_bytes = 0;
	for (r = 0; r < comm->n; r++) {
		ret = spyre_malloc(comm->dev[r], bytes, &comm->tmp[r]);
		if (ret)
			return ret;
	}
	comm->tmp_bytes = bytes;
	return 0;
}

/* reduce-scatter's copy of send[]: @bytes per rank, kept with the communicator. */
static int work_reserve(spyre_comm_t *comm, size_t bytes)
{
	int r, ret;

	if (bytes <= comm->work_bytes)
		return 0;
	ret = drain(comm);
	if (ret)
		return ret;
	for (r = 0; r < comm->n; r++) {
		spyre_free(comm->dev[r], comm->work[r]);
		comm->work[r] = 0;
	}
	comm->work_bytes = 0;
	for (r = 0; r < comm->n; r++) {
		ret = spyre_malloc(comm->dev[r], bytes, &comm->work[r]);
		if (ret)
			return ret;
	}
	comm->work_bytes = bytes;
	return 0;
}

/*
 * Ring reduce-scatter on buf[] in place: after it rank r holds the sum of
 * chunk (r + 1 + @shift) mod n. Step s: rank r receives from r - 1 its
 * chunk (r - 1 - s + @shift) mod n and adds it into its own.
 */
static int ring_reduce_scatter(spyre_comm_t *comm, spyre_stream_t *const *streams,
			       const spyre_dptr_t *buf, const struct coll_chunk *c, int shift,
			       uint32_t dtype)
{
	int n = comm->n, s, r, ret;

	for (s = 0; s < n - 1; s++) {
		ret = barrier(comm, streams);
		for (r = 0; !ret && r < n; r++) {
			int p = (r + n - 1) % n, k = ((p - s + shift) % n + n) % n;

			ret = copy(comm, streams, r, comm->tmp[r], p, buf[p] + c[k].off, c[k].len);
			/* A chunk the sender pushed lands from the sender's stream: the ADD waits for it. */
			if (!ret && !comm->access[r][p])
				ret = mark(comm, streams, p) ?: after(comm, streams, r, p);
		}
		for (r = 0; !ret && r < n; r++) {
			int p = (r + n - 1) % n, k = ((p - s + shift) % n + n) % n;

			ret = add(comm, streams, r, dtype, buf[r] + c[k].off, c[k].len);
		}
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * Ring all-gather on buf[] in place: rank r starts owning chunk
 * (r + @shift) mod n; step s: rank r receives from r - 1 the chunk
 * (r - 1 - s + @shift) mod n.
 */
static int ring_all_gather(spyre_comm_t *comm, spyre_stream_t *const *streams,
			   const spyre_dptr_t *buf, const struct coll_chunk *c, int shift)
{
	int n = comm->n, s, r, ret;

	for (s = 0; s < n - 1; s++) {
		ret = barrier(comm, streams);
		for (r = 0; !ret && r < n; r++) {
			int p = (r + n - 1) % n, k = ((p - s + shift) % n + n) % n;

			ret = copy(comm, streams, r, buf[r] + c[k].off, p, buf[p] + c[k].off, c[k].len);
		}
		if (ret)
			return ret;
	}
	return 0;
}

static int check_call(spyre_comm_t *comm, spyre_stream_t *const *streams, const char *what)
{
	int r;

	if (!comm || !streams)
		return spyre_error(-EINVAL, "%s: NULL communicator or streams", what);
	if (comm->rk)
		return spyre_error(-EINVAL, "%s: a communicator of one card per process (use the "
				   "spyre_comm_* call)", what);
	for (r = 0; r < comm->n; r++)
		if (!streams[r])
			return spyre_error(-EINVAL, "%s: NULL stream of rank %d", what, r);
	return 0;
}

size_t coll_sticks(size_t bytes)
{
	return (bytes + COLL_STICK - 1) / COLL_STICK * COLL_STICK;
}

SPYRE_EXPORT int spyre_all_reduce(spyre_comm_t *comm, const spyre_dptr_t *send, const spyre_dptr_t *recv,
				  size_t count, uint32_t dtype, uint32_t op, spyre_stream_t *const *streams)
{
	struct coll_chunk *c;
	size_t bytes;
	int r, ret;

	ret = check_call(comm, streams, "spyre_all_reduce") ?: coll_check_dtype(dtype, "spyre_all_reduce");
	if (ret)
		return ret;
	if (op != SPYRE_RED_SUM)
		return spyre_error(-EINVAL, "spyre_all_reduce: op %u is not SPYRE_RED_SUM", op);
	if (!send || !recv)
		return spyre_error(-EINVAL, "spyre_all_reduce: NULL buffers");
	if (!count)
		return 0;
	bytes = coll_sticks(count * dtype_size(dtype));
	c = calloc((size_t)comm->n, sizeof(*c));
	if (!c)
		return spyre_error(-ENOMEM, "spyre_all_reduce: out of memory");
	coll_split(bytes, comm->n, c);
	ret = tmp_reserve(comm, c[0].len);
	for (r = 0; !ret && r < comm->n; r++)
		if (send[r] != recv[r])
			ret = spyre_memcpy_async(streams[r], recv[r], send[r], bytes, SPYRE_MEMCPY_D2D);
	ret = ret ?: ring_reduce_scatter(comm, streams, recv, c, 0, dtype);
	ret = ret ?: ring_all_gather(comm, streams, recv, c, 1);
	ret = ret ?: barrier(comm, streams);
	free(c);
	return ret;
}

SPYRE_EXPORT int spyre_reduce_scatter(spyre_comm_t *comm, const spyre_dptr_t *send,
				      const spyre_dptr_t *recv, size_t recvcount, uint32_t dtype,
				      uint32_t op, spyre_stream_t *const *streams)
{
	struct coll_chunk *c;
	size_t each;
	int r, ret;

	ret = check_call(comm, streams, "spyre_reduce_scatter") ?:
	      coll_check_dtype(dtype, "spyre_reduce_scatter");
	if (ret)
		return ret;
	if (op != SPYRE_RED_SUM)
		return spyre_error(-EINVAL, "spyre_reduce_scatter: op %u is not SPYRE_RED_SUM", op);
	if (!send || !recv)
		return spyre_error(-EINVAL, "spyre_reduce_scatter: NULL buffers");
	each = recvcount * dtype_size(dtype);
	if (each % COLL_STICK)
		return spyre_error(-EINVAL, "spyre_reduce_scatter: %zu elements of %zu bytes are not "
				   "whole 128-byte sticks", recvcount, dtype_size(dtype));
	if (!recvcount)
		return 0;
	c = calloc((size_t)comm->n, sizeof(*c));
	if (!c)
		return spyre_error(-ENOMEM, "spyre_reduce_scatter: out of memory");
	for (r = 0; r < comm->n; r++) {
		c[r].off = (size_t)r * each;
		c[r].len = each;
	}
	ret = tmp_reserve(comm, each) ?: work_reserve(comm, each * (size_t)comm->n);
	/* The ring works on a copy of send[] (the caller's input stays): n chunks per rank. */
	for (r = 0; !ret && r < comm->n; r++)
		ret = spyre_memcpy_async(streams[r], comm->work[r], send[r], each * (size_t)comm->n,
					 SPYRE_MEMCPY_D2D);
	/* Rank r ends with chunk (r + 1 + shift): shift n - 1 gives chunk r. */
	ret = ret ?: ring_reduce_scatter(comm, streams, comm->work, c, comm->n - 1, dtype);
	for (r = 0; !ret && r < comm->n; r++)
		ret = spyre_memcpy_async(streams[r], recv[r], comm->work[r] + c[r].off, each,
					 SPYRE_MEMCPY_D2D);
	ret = ret ?: barrier(comm, streams);
	free(c);
	return ret;
}

SPYRE_EXPORT int spyre_all_gather(spyre_comm_t *comm, const spyre_dptr_t *send, const spyre_dptr_t *recv,
				  size_t sendcount, uint32_t dtype, spyre_stream_t *const *streams)
{
	struct coll_chunk *c;
	size_t each;
	int r, ret;

	ret = check_call(comm, streams, "spyre_all_gather") ?: coll_check_dtype(dtype, "spyre_all_gather");
	if (ret)
		return ret;
	if (!send || !recv)
		return spyre_error(-EINVAL, "spyre_all_gather: NULL buffers");
	each = sendcount * dtype_size(dtype);
	if (each % COLL_STICK)
		return spyre_error(-EINVAL, "spyre_all_gather: %zu elements of %zu bytes are not "
				   "whole 128-byte sticks", sendcount, dtype_size(dtype));
	if (!sendcount)
		return 0;
	c = calloc((size_t)comm->n, sizeof(*c));
	if (!c)
		return spyre_error(-ENOMEM, "spyre_all_gather: out of memory");
	for (r = 0; r < comm->n; r++) {
		c[r].off = (size_t)r * each;
		c[r].len = each;
	}
	ret = 0;
	for (r = 0; !ret && r < comm->n; r++)
		if (send[r] != recv[r] + c[r].off)
			ret = spyre_memcpy_async(streams[r], recv[r] + c[r].off, send[r], each,
						 SPYRE_MEMCPY_D2D);
	ret = ret ?: ring_all_gather(comm, streams, recv, c, 0);
	ret = ret ?: barrier(comm, streams);
	free(c);
	return ret;
}

SPYRE_EXPORT int spyre_broadcast(spyre_comm_t *comm, const spyre_dptr_t *buf, size_t count,
				 uint32_t dtype, int root, spyre_stream_t *const *streams)
{
	size_t bytes;
	int r, ret;

	ret = check_call(comm, streams, "spyre_broadcast") ?: coll_check_dtype(dtype, "spyre_broadcast");
	if (ret)
		return ret;
	if (!buf || root < 0 || root >= comm->n)
		return spyre_error(-EINVAL, "spyre_broadcast: %s", !buf ? "NULL buffers" :
				   "root is not a rank of the communicator");
	if (!count)
		return 0;
	bytes = coll_sticks(count * dtype_size(dtype));
	/* Each copy after both streams' earlier work; each rank's later work after its copy. */
	for (r = 0; !ret && r < comm->n; r++)
		if (r != root)
			ret = around_copy(comm, streams, r, root, true) ?:
			      copy(comm, streams, r, buf[r], root, buf[root], bytes) ?:
			      around_copy(comm, streams, r, root, false);
	return ret;
}

SPYRE_EXPORT int spyre_send_recv(spyre_comm_t *comm, int src, spyre_dptr_t sendbuf, int dst,
				 spyre_dptr_t recvbuf, size_t count, uint32_t dtype,
				 spyre_stream_t *const *streams)
{
	int ret = check_call(comm, streams, "spyre_send_recv") ?: coll_check_dtype(dtype, "spyre_send_recv");

	if (ret)
		return ret;
	if (src < 0 || src >= comm->n || dst < 0 || dst >= comm->n)
		return spyre_error(-EINVAL, "spyre_send_recv: rank %d or %d is not in the communicator",
				   src, dst);
	if (!count)
		return 0;
	if (src == dst)
		return copy(comm, streams, dst, recvbuf, src, sendbuf, coll_sticks(count * dtype_size(dtype)));
	/* Either card may run the copy: the other's earlier work first, its later work after. */
	return around_copy(comm, streams, dst, src, true) ?:
	       copy(comm, streams, dst, recvbuf, src, sendbuf, coll_sticks(count * dtype_size(dtype))) ?:
	       around_copy(comm, streams, dst, src, false);
}

SPYRE_EXPORT int spyre_comm_destroy(spyre_comm_t *comm)
{
	int r;

	if (!comm)
		return 0;
	if (comm->rk)
		coll_rank_destroy(comm);
	if (!comm->rk && comm->dev)
		drain(comm);	/* the scratch may still be in use by the last call's streams */
	for (r = 0; r < comm->n; r++) {
		if (comm->tmp && comm->tmp[r])
			spyre_free(comm->dev[r], comm->tmp[r]);
		if (comm->work && comm->work[r])
			spyre_free(comm->dev[r], comm->work[r]);
		if (comm->ev && comm->ev[r])
			spyre_event_destroy(comm->ev[r]);
		if (comm->cache && comm->cache[r])
			spyre_kcache_destroy(comm->cache[r]);
		if (comm->access)
			free(comm->access[r]);
	}
	free(comm->access);
	free(comm->ev);
	free(comm->work);
	free(comm->tmp);
	free(comm->cache);
	free(comm->dev);
	free(comm);
	return 0;
}

SPYRE_EXPORT int spyre_comm_init(spyre_comm_t **out, spyre_device_t *const *devs, int n)
{
	spyre_comm_t *comm;
	int a, b, ret = 0;

	if (!out || !devs || n < 1 || n > 64)
		return spyre_error(-EINVAL, "spyre_comm_init: %s", !out || !devs ? "NULL argument" :
				   "1 to 64 devices");
	*out = NULL;
	for (a = 0; a < n; a++) {
		if (!devs[a])
			return spyre_error(-EINVAL, "spyre_comm_init: device of rank %d is NULL", a);
		for (b = 0; b < a; b++)
			if (devs[a] == devs[b])
				return spyre_error(-EINVAL, "spyre_comm_init: ranks %d and %d are the same "
						   "device handle", b, a);
	}
	comm = calloc(1, sizeof(*comm));
	if (!comm)
		return spyre_error(-ENOMEM, "spyre_comm_init: out of memory");
	comm->n = n;
	comm->dev = calloc((size_t)n, sizeof(*comm->dev));
	comm->cache = calloc((size_t)n, sizeof(*comm->cache));
	comm->tmp = calloc((size_t)n, sizeof(*comm->tmp));
	comm->access = calloc((size_t)n, sizeof(*comm->access));
	comm->ev = calloc((size_t)n, sizeof(*comm->ev));
	comm->work = calloc((size_t)n, sizeof(*comm->work));
	if (!comm->dev || !comm->cache || !comm->tmp || !comm->access || !comm->ev || !comm->work) {
		spyre_comm_destroy(comm);
		return spyre_error(-ENOMEM, "spyre_comm_init: out of memory");
	}
	for (a = 0; !ret && a < n; a++) {
		comm->dev[a] = devs[a];
		comm->access[a] = calloc((size_t)n, sizeof(int));
		if (!comm->access[a])
			ret = spyre_error(-ENOMEM, "spyre_comm_init: out of memory");
		ret = ret ?: spyre_kcache_create(devs[a], 16, &comm->cache[a]);
		ret = ret ?: spyre_event_create_flags(devs[a], SPYRE_EVENT_CROSS_DEVICE, &comm->ev[a]);
	}
	/* Each neighbour pair of the ring: one of the two must reach the other. */
	for (a = 0; !ret && a < n; a++)
		for (b = 0; !ret && b < n; b++)
			ret = spyre_device_can_access_peer(devs[a], devs[b], &comm->access[a][b]);
	for (a = 0; !ret && a < n; a++) {
		b = (a + 1) % n;
		if (!comm->access[a][b] && !comm->access[b][a])
			ret = spyre_error(-EXDEV, "spyre_comm_init: neither rank %d nor rank %d can "
					  "reach the other's memory", a, b);
	}
	if (ret) {
		spyre_comm_destroy(comm);
		return ret;
	}
	*out = comm;
	return 0;
}

SPYRE_EXPORT int spyre_comm_count(const spyre_comm_t *comm)
{
	return comm ? comm->n : spyre_error(-EINVAL, "spyre_comm_count: NULL communicator");
}

SPYRE_EXPORT int spyre_comm_rank(const spyre_comm_t *comm)
{
	return comm ? (comm->rk ? coll_rank_of(comm) : 0) :
		spyre_error(-EINVAL, "spyre_comm_rank: NULL communicator");
}
