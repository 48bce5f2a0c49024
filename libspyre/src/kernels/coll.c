// SPDX-License-Identifier: MIT
/*
 * Collectives over the cards of one process (NCCL's single-process,
 * multi-device use): a communicator is a ring of N devices in the order
 * given; all-reduce is a ring reduce-scatter then a ring all-gather, each
 * step a peer copy (spyre_memcpy_peer_async(), run by whichever card of the
 * pair can reach the other) and, for reductions, the kernel library's ADD
 * on the receiving card. Buffers are split into N chunks of whole sticks.
 * Steps across cards are ordered by the cards, not the host: each stream
 * records cross-device events (SPYRE_EVENT_CROSS_DEVICE) after its steps,
 * and before a step its stream waits on the device for the other streams'
 * earlier steps on the memory ranges it touches (ord_*() below). A call
 * enqueues every step and returns; the results are there for later work on
 * each rank's stream, and the host waits only when a scratch buffer grows.
 * The steps, records and waits of a call on one card are one job (a batch
 * of its stream, common.h), not a job each: the host submits n jobs per
 * call, whatever the ring's length.
 * Reaches the runtime through spyre.h and common.h's batches only, and the
 * kernel library's public API.
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

/*
 * Ordering on the devices. Each rank's stream runs its own work in order;
 * across streams, each step names what it touches - a range of one rank's
 * memory it writes, a range it reads - and before a step on stream R the
 * calls below make R wait (a WAIT on the device, spyre_stream_wait_event()
 * on a cross-device event) for the last step of each other stream that
 * conflicts with it (an overlapping range that either writes) and that R has
 * not waited for yet. The caller's earlier work on a stream counts as its
 * step 1, writing all of its rank's memory; the call's end makes each rank's
 * stream wait for every step on its memory (ord_finish()). Each stream
 * records an event of its own after each of its steps (its "marks"), so
 * that R waits for exactly the step it needs, not for what that stream
 * enqueued after it: the two cards' copies of a ring step, which touch
 * different chunks, run at once. No host wait; the records and waits are
 * packets of the call's few jobs per card (below), not jobs.
 *
 * ord->work[q]: steps of stream q in this call; seen[R * n + q]: the step of
 * q that R has waited for; steps[]: every step of the call and what it
 * touched; mark[q][i - 1]: the event stream q records after its step i
 * (created on first use and kept; mark[q][0] is comm->ev[q]). Each event is
 * recorded at most once a call, so a wait for it waits for that step.
 */
struct coll_access {
	int rank;
	bool write;
	uint64_t lo, hi;	/* device addresses of the rank's card, [lo, hi) */
};

struct coll_step {
	int stream;
	uint64_t idx;		/* its stream's step number */
	int na;
	struct coll_access a[2];
};

struct coll_order {
	int n;
	uint64_t *work, *seen;
	struct coll_step *steps;
	size_t nsteps, cap_steps;
	spyre_event_t ***mark;
	size_t *nmark, *cap_mark;
};

static bool conflict(const struct coll_access *a, const struct coll_access *b)
{
	return a->rank == b->rank && (a->write || b->write) && a->lo < b->hi && b->lo < a->hi;
}

/* Stream @q's step @na accesses @acc were enqueued as its step ord->work[q]: note them, mark it. */
static int ord_step(spyre_comm_t *comm, spyre_stream_t *const *streams, int q,
		    const struct coll_access *acc, int na)
{
	struct coll_order *o = comm->ord;
	uint64_t i = o->work[q];
	struct coll_step *st;
	int ret;

	if (o->nsteps == o->cap_steps) {
		size_t cap = o->cap_steps ? 2 * o->cap_steps : 64;

		st = realloc(o->steps, cap * sizeof(*st));
		if (!st)
			return spyre_error(-ENOMEM, "collective: out of memory");
		o->steps = st;
		o->cap_steps = cap;
	}
	st = &o->steps[o->nsteps++];
	st->stream = q;
	st->idx = i;
	st->na = na;
	memcpy(st->a, acc, (size_t)na * sizeof(*acc));
	if (i > o->nmark[q]) {
		if (o->nmark[q] == o->cap_mark[q]) {
			size_t cap = 2 * o->cap_mark[q];
			spyre_event_t **m = realloc(o->mark[q], cap * sizeof(*m));

			if (!m)
				return spyre_error(-ENOMEM, "collective: out of memory");
			o->mark[q] = m;
			o->cap_mark[q] = cap;
		}
		ret = spyre_event_create_flags(comm->dev[q], SPYRE_EVENT_CROSS_DEVICE,
					       &o->mark[q][o->nmark[q]]);
		if (ret)
			return ret;
		o->nmark[q]++;
	}
	return spyre_event_record(o->mark[q][i - 1], streams[q]);
}

/*
 * A call's start: from here to ord_finish() each rank's stream batches its
 * jobs (stream.c), so that the call's steps on a card, and the records and
 * waits that order them, are packets of a few jobs per card: a mark's
 * record submits its card's pending job (stream.c, event_record()), the
 * rest goes at ord_finish() (or past DRM_SPYRE_MAX_JOB_PACKETS). Then each
 * stream marks the caller's earlier work, its step 1. @ret: the call's
 * status so far (when not 0, only the batches begin).
 *
 * Every WAIT is submitted after the job holding the SIGNAL it waits for (a
 * WAIT is appended after its mark's record, which submitted that job), as
 * when each was a job of its own: so no interleaving with other callers'
 * jobs on hardware queues shared in one FIFO can deadlock (one job per card
 * and call, submitted at the end, could: an independent review's finding).
 * The jobs' other waits are the event waits pending before the call, on
 * earlier jobs. A card whose job fails (or is never submitted: its SUBMIT
 * failed, the call's status) leaves the WAITs on it to the driver's job
 * timeout: those streams fail with -EIO.
 */
static int ord_start(spyre_comm_t *comm, spyre_stream_t *const *streams, int ret)
{
	struct coll_order *o = comm->ord;
	int n = comm->n, r;

	for (r = 0; r < n; r++)
		spyre_stream_batch_begin(streams[r]);
	if (ret)
		return ret;
	memset(o->seen, 0, sizeof(uint64_t) * (size_t)n * (size_t)n);
	o->nsteps = 0;
	for (r = 0; !ret && r < n; r++) {
		struct coll_access all = { .rank = r, .write = true, .lo = 0, .hi = UINT64_MAX };

		o->work[r] = 1;
		ret = ord_step(comm, streams, r, &all, 1);
	}
	return ret;
}

/* Stream @R waits for each other stream's last step that conflicts with the @na accesses @acc. */
static int ord_before(spyre_comm_t *comm, spyre_stream_t *const *streams, int R,
		      const struct coll_access *acc, int na)
{
	struct coll_order *o = comm->ord;
	int n = comm->n, q, ret = 0;

	for (q = 0; !ret && q < n; q++) {
		uint64_t t = 0;
		size_t k;
		int i, j;

		if (q == R)
			continue;
		for (k = 0; k < o->nsteps; k++) {
			const struct coll_step *st = &o->steps[k];

			if (st->stream != q || st->idx <= t)
				continue;
			for (i = 0; i < st->na; i++)
				for (j = 0; j < na; j++)
					if (conflict(&st->a[i], &acc[j]))
						t = st->idx;
		}
		if (t <= o->seen[R * n + q])
			continue;
		ret = spyre_stream_wait_event(streams[R], o->mark[q][t - 1]);
		o->seen[R * n + q] = t;
	}
	return ret;
}

/* A step with the @na accesses @acc was enqueued on stream @R (after ord_before()): mark it. */
static int ord_after(spyre_comm_t *comm, spyre_stream_t *const *streams, int R,
		     const struct coll_access *acc, int na)
{
	comm->ord->work[R]++;
	return ord_step(comm, streams, R, acc, na);
}

/*
 * The call's end, its status so far @ret: unless it failed, each rank's
 * stream waits for every other stream's steps on its memory, so that its
 * later work (the caller's) sees the result and overwrites nothing another
 * card still reads. Then, whatever @ret, each stream's job is submitted (the
 * steps enqueued before a failure run, as they would unbatched).
 */
static int ord_finish(spyre_comm_t *comm, spyre_stream_t *const *streams, int ret)
{
	int r, e;

	for (r = 0; !ret && r < comm->n; r++) {
		struct coll_access all = { .rank = r, .write = true, .lo = 0, .hi = UINT64_MAX };

		ret = ord_before(comm, streams, r, &all, 1);
	}
	for (r = 0; r < comm->n; r++) {
		e = spyre_stream_batch_end(streams[r]);
		ret = ret ?: e;
	}
	return ret;
}

static int ord_alloc(spyre_comm_t *comm)
{
	size_t n = (size_t)comm->n, r;
	struct coll_order *o = calloc(1, sizeof(*o));

	if (!o)
		return -ENOMEM;
	comm->ord = o;
	o->n = comm->n;
	o->work = calloc(n, sizeof(uint64_t));
	o->seen = calloc(n * n, sizeof(uint64_t));
	o->mark = calloc(n, sizeof(*o->mark));
	o->nmark = calloc(n, sizeof(size_t));
	o->cap_mark = calloc(n, sizeof(size_t));
	if (!o->work || !o->seen || !o->mark || !o->nmark || !o->cap_mark)
		return -ENOMEM;
	for (r = 0; r < n; r++) {
		o->mark[r] = calloc(8, sizeof(spyre_event_t *));
		if (!o->mark[r])
			return -ENOMEM;
		o->cap_mark[r] = 8;
		o->mark[r][0] = comm->ev[r];	/* the communicator's */
		o->nmark[r] = 1;
	}
	return 0;
}

static void ord_free(spyre_comm_t *comm)
{
	struct coll_order *o = comm->ord;
	size_t r, i;

	if (!o)
		return;
	for (r = 0; o->mark && r < (size_t)o->n; r++) {
		for (i = 1; o->mark[r] && i < o->nmark[r]; i++)
			spyre_event_destroy(o->mark[r][i]);
		free(o->mark[r]);
	}
	free(o->mark);
	free(o->nmark);
	free(o->cap_mark);
	free(o->work);
	free(o->seen);
	free(o->steps);
	free(o);
	comm->ord = NULL;
}

/* The rank whose card runs the peer copy from @src to @dst. */
static int runner_of(const spyre_comm_t *comm, int dst, int src)
{
	return comm->access[dst][src] ? dst : src;
}

/* A D2D copy within rank @r's memory, on its stream. */
static int local_copy(spyre_comm_t *comm, spyre_stream_t *const *streams, int r, spyre_dptr_t d,
		      spyre_dptr_t s, size_t len)
{
	const struct coll_access acc[2] = { { r, true, d, d + len }, { r, false, s, s + len } };

	return ord_before(comm, streams, r, acc, 2) ?:
	       spyre_memcpy_async(streams[r], d, s, len, SPYRE_MEMCPY_D2D) ?:
	       ord_after(comm, streams, r, acc, 2);
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
	const struct coll_access acc[2] = { { dst, true, d, d + len }, { src, false, s, s + len } };
	int run = runner_of(comm, dst, src);

	if (!len)
		return 0;
	return ord_before(comm, streams, run, acc, 2) ?:
	       spyre_memcpy_peer_async(streams[run], comm->dev[dst], d, comm->dev[src], s, len) ?:
	       ord_after(comm, streams, run, acc, 2);
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
	const struct coll_access acc[2] = { { r, true, y, y + len }, { r, false, comm->tmp[r], comm->tmp[r] + len } };

	if (!len)
		return 0;
	return ord_before(comm, streams, r, acc, 2) ?:
	       coll_add(comm->cache[r], streams[r], dtype, y, comm->tmp[r], len) ?:
	       ord_after(comm, streams, r, acc, 2);
}

/*
 * Grow the per-rank buffers @buf (each @*have bytes) to @bytes, after the
 * streams are done with them: tmp (a received chunk before it is added)
 * and work (reduce-scatter's copy of send[]), kept with the communicator.
 */
static int reserve(spyre_comm_t *comm, spyre_dptr_t *buf, size_t *have, size_t bytes)
{
	int r, ret;

	if (bytes <= *have)
		return 0;
	ret = drain(comm);
	if (ret)
		return ret;
	for (r = 0; r < comm->n; r++) {
		spyre_free(comm->dev[r], buf[r]);
		buf[r] = 0;
	}
	*have = 0;
	for (r = 0; r < comm->n; r++) {
		ret = spyre_malloc(comm->dev[r], bytes, &buf[r]);
		if (ret)
			return ret;
	}
	*have = bytes;
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
		ret = 0;
		for (r = 0; !ret && r < n; r++) {
			int p = (r + n - 1) % n, k = ((p - s + shift) % n + n) % n;

			ret = copy(comm, streams, r, comm->tmp[r], p, buf[p] + c[k].off, c[k].len);
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
		ret = 0;
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
	if (coll_group_open())
		return spyre_error(-EOPNOTSUPP, "%s: inside spyre_comm_group_start() (a communicator of "
				   "the cards of one process runs both sides in one call: nothing to group)",
				   what);
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
	ret = reserve(comm, comm->tmp, &comm->tmp_bytes, c[0].len);
	ret = ord_start(comm, streams, ret);
	for (r = 0; !ret && r < comm->n; r++)
		if (send[r] != recv[r])
			ret = local_copy(comm, streams, r, recv[r], send[r], bytes);
	ret = ret ?: ring_reduce_scatter(comm, streams, recv, c, 0, dtype);
	ret = ret ?: ring_all_gather(comm, streams, recv, c, 1);
	ret = ord_finish(comm, streams, ret);
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
	ret = reserve(comm, comm->tmp, &comm->tmp_bytes, each) ?:
	      reserve(comm, comm->work, &comm->work_bytes, each * (size_t)comm->n);
	ret = ord_start(comm, streams, ret);
	/* The ring works on a copy of send[] (the caller's input stays): n chunks per rank. */
	for (r = 0; !ret && r < comm->n; r++)
		ret = local_copy(comm, streams, r, comm->work[r], send[r], each * (size_t)comm->n);
	/* Rank r ends with chunk (r + 1 + shift): shift n - 1 gives chunk r. */
	ret = ret ?: ring_reduce_scatter(comm, streams, comm->work, c, comm->n - 1, dtype);
	for (r = 0; !ret && r < comm->n; r++)
		ret = local_copy(comm, streams, r, recv[r], comm->work[r] + c[r].off, each);
	ret = ord_finish(comm, streams, ret);
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
	ret = ord_start(comm, streams, 0);
	for (r = 0; !ret && r < comm->n; r++)
		if (send[r] != recv[r] + c[r].off)
			ret = local_copy(comm, streams, r, recv[r] + c[r].off, send[r], each);
	ret = ret ?: ring_all_gather(comm, streams, recv, c, 0);
	ret = ord_finish(comm, streams, ret);
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
	ret = ord_start(comm, streams, ret);
	for (r = 0; !ret && r < comm->n; r++)
		if (r != root)
			ret = copy(comm, streams, r, buf[r], root, buf[root], bytes);
	return ord_finish(comm, streams, ret);
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
	/* Either card may run the copy: the other's earlier work first, its later work after. */
	ret = ord_start(comm, streams, 0);
	ret = ret ?: copy(comm, streams, dst, recvbuf, src, sendbuf, coll_sticks(count * dtype_size(dtype)));
	return ord_finish(comm, streams, ret);
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
	ord_free(comm);
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
	if (!ret && ord_alloc(comm))
		ret = spyre_error(-ENOMEM, "spyre_comm_init: out of memory");
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
