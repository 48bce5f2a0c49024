// SPDX-License-Identifier: MIT
/*
 * Communicators of one card per process (NCCL's ncclCommInitRank): each
 * rank has two 2 MiB buffers on its card, an inbox and an outbox, exported
 * as dma-bufs (spyre_ipc_export()) to every other rank at set-up, which
 * imports them where its card reaches them. A transfer of up to 2 MiB from
 * rank a to rank b is then either
 *   a push: a's card copies into b's inbox (a imported it), after b's CTS
 *           (b's inbox is free), then READY to b; or
 *   a pull: a copies into its own outbox (after the last reader's DONE),
 *           READY to b, and b's card copies it out (b imported a's
 *           outbox), then DONE to a;
 * push where a's card reaches b's memory, else pull (in `make check`'s VM,
 * the card without a peer BAR runs both). READY and DONE are sent by the
 * communicator's sender thread of the stream once an event after the copy
 * is reached, so the host waits for the other ranks' messages (and, pushed
 * into, for its card to have emptied the inbox before the next CTS), not
 * for its own copies, and the stream never for the host; the collectives are
 * coll.c's rings (a ring reduce-scatter then all-gather, the ADD of a
 * received piece on the receiving card) in pieces of 2 MiB. Every
 * message carries the collective's call number and kind, so ranks that
 * call different collectives fail with a detail instead of mixing data.
 * spyre_comm_send/recv and their groups are coll_group.c's, on the
 * transfer steps here (coll_rank.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spyre.h"
#include "spyre_kernels.h"
#include "spyre_isa.h"
#include "common.h"
#include "coll.h"
#include "coll_rank.h"

static const char *const op_names[] = {
	[OP_ALL_REDUCE] = "all-reduce", [OP_REDUCE_SCATTER] = "reduce-scatter",
	[OP_ALL_GATHER] = "all-gather", [OP_BROADCAST] = "broadcast", [OP_SEND_RECV] = "send/recv",
	[OP_BARRIER] = "barrier",
};

__thread int coll_group_depth;
__thread struct spyre_comm *coll_group_comm;

bool coll_group_open(void)
{
	return coll_group_depth > 0;
}

int coll_rank_of(const struct spyre_comm *comm)
{
	return comm->rk->rank;
}

static size_t dtsize(uint32_t dtype)
{
	return SPYRE_DT_SIZE(dtype);
}

/* ---- transfers ---- */

static int send_msg(struct comm_rank *c, int j, uint32_t type, uint64_t tag, uint64_t a)
{
	struct coll_msg m = { .type = type, .seq = c->seq, .op = c->op, .tag = tag, .a = a };

	return coll_net_send(c->net, j, &m, NULL, 0);
}

/* @m, @j's message of @type, belongs to the same call and, with @bytes, is of that size. */
static int check_msg(struct comm_rank *c, int j, uint32_t type, const struct coll_msg *m, size_t bytes)
{
	if (type != COLL_MSG_DONE && m->op != c->op)
		return spyre_error(-EINVAL, "rank %d called %s where this rank %d called %s (its call %u)",
				   j, SPYRE_NAME_OF(op_names, m->op, "?"), c->rank,
				   SPYRE_NAME_OF(op_names, c->op, "?"), c->seq);
	if (bytes && m->a != bytes)
		return spyre_error(-EINVAL, "rank %d sent %llu bytes where this rank %d expects %zu (%s, "
				   "call %u): counts differ", j, (unsigned long long)m->a, c->rank, bytes,
				   SPYRE_NAME_OF(op_names, c->op, "?"), c->seq);
	return 0;
}

/*
 * Wait for @j's @type of transfer @tag, checking it belongs to the same call
 * (a DONE may be of an earlier one) and, with @bytes, its size.
 */
static int wait_msg(struct comm_rank *c, int j, uint32_t type, uint64_t tag, size_t bytes)
{
	struct coll_msg m;
	int ret = coll_net_wait(c->net, j, type, tag, false, &m, NULL);

	return ret ?: check_msg(c, j, type, &m, bytes);
}

/* Without waiting: 1 with @j's @type of transfer @tag taken and checked, 0 when it has not come. */
int coll_rank_try_msg(struct comm_rank *c, int j, uint32_t type, uint64_t tag, size_t bytes)
{
	struct coll_msg m;
	int ret = coll_net_try(c->net, j, type, tag, &m);

	if (ret <= 0)
		return ret;
	return check_msg(c, j, type, &m, bytes) ?: 1;
}

/* Before a transfer from @j: when @j pushes, tell it the inbox is free. */
int coll_rank_rx_prepare(struct comm_rank *c, int j)
{
	struct rk_peer *p = &c->peer[j];
	int ret;

	if (!p->reaches_me || p->cts_sent)
		return 0;
	if (c->inbox_ev_set) {
		ret = spyre_event_synchronize(c->inbox_ev);
		if (ret)
			return ret;
		c->inbox_ev_set = false;
	}
	p->cts_sent = true;
	return send_msg(c, j, COLL_MSG_CTS, p->rcvd, 0);
}

/*
 * Transfer p->sent of @len bytes at @src (this card's memory) to rank @j on
 * @s, once it may go: @j's CTS came (push) or the outbox is free (pull).
 */
int coll_rank_tx_go(struct comm_rank *c, spyre_stream_t *s, int j, spyre_dptr_t src, size_t len)
{
	struct rk_peer *p = &c->peer[j];
	uint64_t tag = p->sent++;
	struct coll_msg m = { .type = COLL_MSG_READY, .seq = c->seq, .op = c->op, .tag = tag, .a = len };
	int ret;

	if (p->i_reach) {
		ret = spyre_memcpy_async(s, p->inbox, src, len, SPYRE_MEMCPY_D2D);
	} else {
		ret = spyre_memcpy_async(s, c->outbox, src, len, SPYRE_MEMCPY_D2D);
		if (!ret) {
			c->out_reader = j;
			c->out_tag = tag;
		}
	}
	return ret ?: coll_net_send_after(c->net, s, j, &m);
}

/* @len bytes at @src (this card's memory) to rank @j, on @s. */
static int tx(struct comm_rank *c, spyre_stream_t *s, int j, spyre_dptr_t src, size_t len)
{
	int ret = 0;

	if (c->peer[j].i_reach) {
		ret = wait_msg(c, j, COLL_MSG_CTS, c->peer[j].sent, 0);
	} else {
		ret = c->out_reader >= 0 ? wait_msg(c, c->out_reader, COLL_MSG_DONE, c->out_tag, 0) : 0;
		c->out_reader = -1;
	}
	return ret ?: coll_rank_tx_go(c, s, j, src, len);
}

/* Transfer p->rcvd of @len bytes from rank @j, whose READY came, into @dst on @s. */
int coll_rank_rx_land(struct comm_rank *c, spyre_stream_t *s, int j, spyre_dptr_t dst, size_t len)
{
	struct rk_peer *p = &c->peer[j];
	struct coll_msg done = { .type = COLL_MSG_DONE, .seq = c->seq, .op = c->op, .tag = p->rcvd };
	int ret;

	p->rcvd++;
	p->cts_sent = false;
	if (p->reaches_me)
		return dst == c->inbox ? 0 : spyre_memcpy_async(s, dst, c->inbox, len, SPYRE_MEMCPY_D2D);
	ret = spyre_memcpy_async(s, dst, p->outbox, len, SPYRE_MEMCPY_D2D);
	return ret ?: coll_net_send_after(c->net, s, j, &done);
}

/*
 * @len bytes from rank @j into @dst (this card's memory; c->inbox to leave
 * them there) on @s.
 */
static int rx(struct comm_rank *c, spyre_stream_t *s, int j, spyre_dptr_t dst, size_t len)
{
	int ret = coll_rank_rx_prepare(c, j);

	ret = ret ?: wait_msg(c, j, COLL_MSG_READY, c->peer[j].rcvd, len);
	return ret ?: coll_rank_rx_land(c, s, j, dst, len);
}

/* The inbox was read by work enqueued on @s so far. */
int coll_rank_inbox_read(struct comm_rank *c, spyre_stream_t *s)
{
	int ret = spyre_event_record(c->inbox_ev, s);

	c->inbox_ev_set = !ret;
	return ret;
}

/* ---- rings ---- */

/*
 * One pass of a ring on @buf in place, step s of n - 1: send chunk
 * (rank - s + @shift) mod n to the next rank and receive chunk
 * (rank - 1 - s + @shift) mod n from the previous one, in pieces of the box.
 * @reduce: add what arrives (reduce-scatter: after it this rank holds the sum
 * of chunk (rank + 1 + @shift) mod n; @dtype is the ADD's), else keep it
 * (all-gather: this rank starts owning chunk (rank + @shift) mod n).
 */
static int ring_pass(struct comm_rank *c, spyre_stream_t *s, spyre_dptr_t buf,
		     const struct coll_chunk *ch, int shift, bool reduce, uint32_t dtype)
{
	int n = c->n, r = c->rank, prev = (r + n - 1) % n, next = (r + 1) % n, st, ret = 0;

	for (st = 0; !ret && st < n - 1; st++) {
		const struct coll_chunk *cs = &ch[((r - st + shift) % n + n) % n];
		const struct coll_chunk *cr = &ch[((prev - st + shift) % n + n) % n];
		size_t off, most = cs->len > cr->len ? cs->len : cr->len;

		for (off = 0; !ret && off < most; off += BOX_BYTES) {
			size_t ls = off < cs->len ? cs->len - off : 0, lr = off < cr->len ? cr->len - off : 0;

			ls = ls > BOX_BYTES ? BOX_BYTES : ls;
			lr = lr > BOX_BYTES ? BOX_BYTES : lr;
			if (lr)
				ret = coll_rank_rx_prepare(c, prev);
			if (!ret && ls)
				ret = tx(c, s, next, buf + cs->off + off, ls);
			if (!ret && lr && reduce) {
				ret = rx(c, s, prev, c->inbox, lr);
				ret = ret ?: coll_add(c->cache, s, dtype, buf + cr->off + off, c->inbox, lr);
				ret = ret ?: coll_rank_inbox_read(c, s);
			} else if (!ret && lr) {
				ret = rx(c, s, prev, buf + cr->off + off, lr);
				ret = ret ?: coll_rank_inbox_read(c, s);
			}
		}
	}
	return ret;
}

static int ring_reduce_scatter(struct comm_rank *c, spyre_stream_t *s, spyre_dptr_t buf,
			       const struct coll_chunk *ch, int shift, uint32_t dtype)
{
	return ring_pass(c, s, buf, ch, shift, true, dtype);
}

static int ring_all_gather(struct comm_rank *c, spyre_stream_t *s, spyre_dptr_t buf,
			   const struct coll_chunk *ch, int shift)
{
	return ring_pass(c, s, buf, ch, shift, false, 0);
}

/* ---- calls ---- */

int coll_rank_begin(spyre_comm_t *comm, spyre_stream_t *s, enum coll_op op, const char *what,
		    struct comm_rank **out)
{
	struct comm_rank *c;

	if (!comm)
		return spyre_error(-EINVAL, "%s: NULL communicator", what);
	c = comm->rk;
	if (!c)
		return spyre_error(-EINVAL, "%s: a communicator of the cards of one process (use "
				   "spyre_all_reduce() and its siblings)", what);
	if (c->failed)
		return spyre_error(c->failed, "%s: the communicator failed earlier: %s", what, c->why);
	if (coll_group_depth && op != OP_SEND_RECV)
		return spyre_error(-EOPNOTSUPP, "%s: inside spyre_comm_group_start() (only "
				   "spyre_comm_send() and spyre_comm_recv() are grouped)", what);
	if (!s && op != OP_BARRIER)
		return spyre_error(-EINVAL, "%s: NULL stream", what);
	/* Its steps wait for messages on the host: a graph could not replay them. */
	if (s && spyre_stream_is_capturing(s) > 0)
		return spyre_error(-EBUSY, "%s: the stream is capturing a graph (a call of a "
				   "communicator of one card per process cannot be captured)", what);
	c->seq++;
	c->op = op;
	*out = c;
	return 0;
}

/* The end of a call: a failure breaks the communicator and is told to every rank. */
int coll_rank_finish(struct comm_rank *c, spyre_stream_t *s, int ret, const char *what)
{
	if (!ret && s) {
		ret = spyre_event_record(c->last_ev, s);
		c->last_ev_set = !ret;
	}
	if (ret) {
		const char *e = spyre_last_error();

		snprintf(c->why, sizeof(c->why), "%s", e);
		coll_strip_status(c->why, ret);
		c->failed = ret;
		coll_net_abort(c->net, c->why, ret);
		return spyre_error(ret, "%s (rank %d, call %u): %s", what, c->rank, c->seq, c->why);
	}
	return 0;
}

static int check_red(uint32_t dtype, uint32_t op, const char *what)
{
	int ret = coll_check_dtype(dtype, what);

	if (!ret && op != SPYRE_RED_SUM)
		ret = spyre_error(-EINVAL, "%s: op %u is not SPYRE_RED_SUM", what, op);
	return ret;
}

SPYRE_EXPORT int spyre_comm_all_reduce(spyre_comm_t *comm, spyre_dptr_t send, spyre_dptr_t recv,
				       size_t count, uint32_t dtype, uint32_t op, spyre_stream_t *s)
{
	static const char what[] = "spyre_comm_all_reduce";
	struct comm_rank *c;
	struct coll_chunk *ch;
	size_t bytes;
	int ret = check_red(dtype, op, what) ?: coll_rank_begin(comm, s, OP_ALL_REDUCE, what, &c);

	if (ret)
		return ret;
	if (!send || !recv)
		return spyre_error(-EINVAL, "%s: NULL buffer", what);
	if (!count)
		return 0;
	bytes = coll_sticks(count * dtsize(dtype));
	ch = calloc((size_t)c->n, sizeof(*ch));
	if (!ch)
		return spyre_error(-ENOMEM, "%s: out of memory", what);
	coll_split(bytes, c->n, ch);
	if (send != recv)
		ret = spyre_memcpy_async(s, recv, send, bytes, SPYRE_MEMCPY_D2D);
	ret = ret ?: ring_reduce_scatter(c, s, recv, ch, 0, dtype);
	ret = ret ?: ring_all_gather(c, s, recv, ch, 1);
	free(ch);
	return coll_rank_finish(c, s, ret, what);
}

/* Whole sticks of @count elements of @dtype in *@each, else -EINVAL. */
static int whole_sticks(size_t count, uint32_t dtype, size_t *each, const char *what)
{
	*each = count * dtsize(dtype);
	if (*each % COLL_STICK)
		return spyre_error(-EINVAL, "%s: %zu elements of %zu bytes are not whole 128-byte sticks",
				   what, count, dtsize(dtype));
	return 0;
}

/* @n chunks of @each bytes, one after the other (reduce-scatter's and all-gather's layout); NULL: no memory. */
static struct coll_chunk *equal_chunks(int n, size_t each)
{
	struct coll_chunk *ch = calloc((size_t)n, sizeof(*ch));
	int r;

	for (r = 0; ch && r < n; r++) {
		ch[r].off = (size_t)r * each;
		ch[r].len = each;
	}
	return ch;
}

SPYRE_EXPORT int spyre_comm_reduce_scatter(spyre_comm_t *comm, spyre_dptr_t send, spyre_dptr_t recv,
					   size_t recvcount, uint32_t dtype, uint32_t op,
					   spyre_stream_t *s)
{
	static const char what[] = "spyre_comm_reduce_scatter";
	struct comm_rank *c;
	struct coll_chunk *ch;
	size_t each, total;
	int ret = check_red(dtype, op, what);

	ret = ret ?: whole_sticks(recvcount, dtype, &each, what);
	ret = ret ?: coll_rank_begin(comm, s, OP_REDUCE_SCATTER, what, &c);
	if (ret)
		return ret;
	if (!send || !recv)
		return spyre_error(-EINVAL, "%s: NULL buffer", what);
	if (!recvcount)
		return 0;
	total = each * (size_t)c->n;
	ch = equal_chunks(c->n, each);
	if (!ch)
		return spyre_error(-ENOMEM, "%s: out of memory", what);
	/* The ring works on a copy of send (the caller's input stays), kept for later calls. */
	if (c->work_bytes < total) {
		/* The last call that read work may have been on another stream. */
		if (c->work_ev_set)
			ret = spyre_event_synchronize(c->work_ev);
		if (!ret && c->work)
			spyre_free(c->dev, c->work);
		c->work = 0;
		c->work_bytes = 0;
		ret = ret ?: spyre_malloc(c->dev, total, &c->work);
		if (!ret)
			c->work_bytes = total;
	}
	if (!ret && c->work_ev_set)
		ret = spyre_stream_wait_event(s, c->work_ev);
	ret = ret ?: spyre_memcpy_async(s, c->work, send, total, SPYRE_MEMCPY_D2D);
	/* This rank ends with chunk (rank + 1 + shift): shift n - 1 gives chunk rank. */
	ret = ret ?: ring_reduce_scatter(c, s, c->work, ch, c->n - 1, dtype);
	ret = ret ?: spyre_memcpy_async(s, recv, c->work + ch[c->rank].off, each, SPYRE_MEMCPY_D2D);
	if (!ret) {
		ret = spyre_event_record(c->work_ev, s);
		c->work_ev_set = !ret;
	}
	free(ch);
	return coll_rank_finish(c, s, ret, what);
}

SPYRE_EXPORT int spyre_comm_all_gather(spyre_comm_t *comm, spyre_dptr_t send, spyre_dptr_t recv,
				       size_t sendcount, uint32_t dtype, spyre_stream_t *s)
{
	static const char what[] = "spyre_comm_all_gather";
	struct comm_rank *c;
	struct coll_chunk *ch;
	size_t each;
	int ret = coll_check_dtype(dtype, what);

	ret = ret ?: whole_sticks(sendcount, dtype, &each, what);
	ret = ret ?: coll_rank_begin(comm, s, OP_ALL_GATHER, what, &c);
	if (ret)
		return ret;
	if (!send || !recv)
		return spyre_error(-EINVAL, "%s: NULL buffer", what);
	if (!sendcount)
		return 0;
	ch = equal_chunks(c->n, each);
	if (!ch)
		return spyre_error(-ENOMEM, "%s: out of memory", what);
	if (send != recv + ch[c->rank].off)
		ret = spyre_memcpy_async(s, recv + ch[c->rank].off, send, each, SPYRE_MEMCPY_D2D);
	ret = ret ?: ring_all_gather(c, s, recv, ch, 0);
	free(ch);
	return coll_rank_finish(c, s, ret, what);
}

/*
 * A chain from @src through the ring to @last (both included): each rank
 * after @src receives @bytes at @buf in pieces, each rank before @last
 * sends them on.
 */
static int chain(struct comm_rank *c, spyre_stream_t *s, spyre_dptr_t buf, size_t bytes, int src,
		 int last)
{
	int n = c->n, r = c->rank, prev = (r + n - 1) % n, next = (r + 1) % n, ret = 0;
	size_t off;

	for (off = 0; !ret && off < bytes; off += BOX_BYTES) {
		size_t l = bytes - off > BOX_BYTES ? BOX_BYTES : bytes - off;

		if (r != src) {
			ret = rx(c, s, prev, buf + off, l);
			ret = ret ?: coll_rank_inbox_read(c, s);
		}
		if (!ret && r != last)
			ret = tx(c, s, next, buf + off, l);
	}
	return ret;
}

SPYRE_EXPORT int spyre_comm_broadcast(spyre_comm_t *comm, spyre_dptr_t buf, size_t count, uint32_t dtype,
				      int root, spyre_stream_t *s)
{
	static const char what[] = "spyre_comm_broadcast";
	struct comm_rank *c;
	int ret = coll_check_dtype(dtype, what) ?: coll_rank_begin(comm, s, OP_BROADCAST, what, &c);

	if (ret)
		return ret;
	if (!buf || root < 0 || root >= c->n)
		return spyre_error(-EINVAL, "%s: %s", what, !buf ? "NULL buffer" :
				   "root is not a rank of the communicator");
	if (!count || c->n == 1)
		return 0;
	ret = chain(c, s, buf, coll_sticks(count * dtsize(dtype)), root, (root + c->n - 1) % c->n);
	return coll_rank_finish(c, s, ret, what);
}

/* ---- point-to-point (coll_group.c: spyre_comm_send/recv and groups) ---- */

int coll_rank_p2p_begin(spyre_comm_t *comm, spyre_dptr_t buf, size_t count, uint32_t dtype, int peer,
			spyre_stream_t *s, const char *what, struct comm_rank **out, size_t *bytes)
{
	struct comm_rank *c;
	int ret = coll_check_dtype(dtype, what) ?: coll_rank_begin(comm, s, OP_SEND_RECV, what, &c);

	if (ret)
		return ret;
	if (!buf || peer < 0 || peer >= c->n || peer == c->rank)
		return spyre_error(-EINVAL, "%s: %s", what, !buf ? "NULL buffer" :
				   peer == c->rank ? "the peer is this rank" :
				   "the peer is not a rank of the communicator");
	if (!c->peer[peer].i_reach && !c->peer[peer].reaches_me)
		return spyre_error(-EXDEV, "%s: neither this rank's card (%s) nor rank %d's (%s) reaches "
				   "the other's memory", what, coll_net_card(c->net, c->rank), peer,
				   coll_net_card(c->net, peer));
	*bytes = coll_sticks(count * dtsize(dtype));
	*out = c;
	return 0;
}

int coll_rank_p2p_run(struct comm_rank *c, spyre_stream_t *s, spyre_dptr_t buf, size_t bytes, int peer,
		      bool sending, const char *what)
{
	size_t off;
	int ret = 0;

	for (off = 0; !ret && off < bytes; off += BOX_BYTES) {
		size_t l = bytes - off > BOX_BYTES ? BOX_BYTES : bytes - off;

		if (sending) {
			ret = tx(c, s, peer, buf + off, l);
		} else {
			ret = rx(c, s, peer, buf + off, l);
			ret = ret ?: coll_rank_inbox_read(c, s);
		}
	}
	return coll_rank_finish(c, s, ret, what);
}

SPYRE_EXPORT int spyre_comm_barrier(spyre_comm_t *comm)
{
	static const char what[] = "spyre_comm_barrier";
	struct comm_rank *c;
	int j, ret = coll_rank_begin(comm, NULL, OP_BARRIER, what, &c);

	if (ret)
		return ret;
	c->barriers++;
	for (j = 0; !ret && j < c->n; j++)
		if (j != c->rank)
			ret = send_msg(c, j, COLL_MSG_BARRIER, c->barriers, 0);
	for (j = 0; !ret && j < c->n; j++)
		if (j != c->rank)
			ret = wait_msg(c, j, COLL_MSG_BARRIER, c->barriers, 0);
	return coll_rank_finish(c, NULL, ret, what);
}

/* ---- set-up ---- */

void coll_rank_destroy(struct spyre_comm *comm)
{
	struct comm_rank *c = comm->rk;
	int j;

	if (!c)
		return;
	/* Calls of it queued in this thread's group are dropped with it (coll_group.c). */
	if (coll_group_comm == comm)
		coll_group_comm = NULL;
	/* Work of this rank still reading or writing the boxes ends first. */
	if (c->last_ev_set)
		(void)spyre_event_synchronize(c->last_ev);
	/*
	 * A transfer left in the outbox is pulled by its reader after this
	 * rank's send returned: its DONE comes first (bounded by
	 * SPYRE_COMM_TIMEOUT_MS), or the reader's DONE finds the connection
	 * closed and its receive fails, and the outbox it reads is freed.
	 */
	if (!c->failed && c->out_reader >= 0)
		(void)wait_msg(c, c->out_reader, COLL_MSG_DONE, c->out_tag, 0);
	if (c->inbox_ev_set)
		(void)spyre_event_synchronize(c->inbox_ev);
	if (c->work_ev_set)
		(void)spyre_event_synchronize(c->work_ev);
	/* Its messages still queued go out first (copies on other streams end before them). */
	coll_net_close(c->net);
	c->net = NULL;
	for (j = 0; c->peer && j < c->n; j++) {
		if (c->peer[j].inbox)
			spyre_ipc_close(c->dev, c->peer[j].inbox);
		if (c->peer[j].outbox)
			spyre_ipc_close(c->dev, c->peer[j].outbox);
	}
	if (c->inbox)
		spyre_free(c->dev, c->inbox);
	if (c->outbox)
		spyre_free(c->dev, c->outbox);
	if (c->work)
		spyre_free(c->dev, c->work);
	if (c->cache)
		spyre_kcache_destroy(c->cache);
	if (c->inbox_ev)
		spyre_event_destroy(c->inbox_ev);
	if (c->last_ev)
		spyre_event_destroy(c->last_ev);
	if (c->work_ev)
		spyre_event_destroy(c->work_ev);
	free(c->peer);
	free(c);
	comm->rk = NULL;
}

/* Import @j's boxes from @fds (closing them); no path is an answer, not a failure. */
static int import_boxes(struct comm_rank *c, int j, int *fds)
{
	struct rk_peer *p = &c->peer[j];
	int ret = 0;

	if (fds[0] >= 0 && fds[1] >= 0) {
		size_t in_size = 0, out_size = 0;

		ret = spyre_ipc_import(c->dev, fds[0], &p->inbox, &in_size);
		ret = ret ?: spyre_ipc_import(c->dev, fds[1], &p->outbox, &out_size);
		/* A piece is up to BOX_BYTES: a smaller box would be written past. */
		if (!ret && (in_size < BOX_BYTES || out_size < BOX_BYTES)) {
			spyre_ipc_close(c->dev, p->outbox);
			ret = spyre_error(-EPROTO, "rank %d's boxes are %zu and %zu bytes, not %u",
					  j, in_size, out_size, BOX_BYTES);
		}
		if (ret && p->inbox)
			spyre_ipc_close(c->dev, p->inbox);
		if (ret)
			p->inbox = p->outbox = 0;
		if (ret == -EXDEV || ret == -EOPNOTSUPP)
			ret = 0;
	}
	if (fds[0] >= 0)
		close(fds[0]);
	if (fds[1] >= 0)
		close(fds[1]);
	p->i_reach = p->inbox && p->outbox;
	return ret;
}

/* Export the boxes to every rank, import theirs, tell each whether its memory is reached. */
static int exchange_boxes(struct comm_rank *c)
{
	int fds[2] = { -1, -1 }, j, ret, have;
	struct coll_msg m;

	ret = spyre_ipc_export(c->dev, c->inbox, &fds[0]);
	ret = ret ?: spyre_ipc_export(c->dev, c->outbox, &fds[1]);
	/* A card that shows no memory to peers pulls and pushes itself. */
	if (ret == -EOPNOTSUPP)
		ret = 0;
	have = fds[0] >= 0 && fds[1] >= 0;
	for (j = 0; !ret && j < c->n; j++) {
		if (j == c->rank)
			continue;
		memset(&m, 0, sizeof(m));
		m.type = COLL_MSG_BOXES;
		m.a = (uint64_t)have;
		ret = coll_net_send(c->net, j, &m, fds, have ? 2 : 0);
	}
	if (fds[0] >= 0)
		close(fds[0]);
	if (fds[1] >= 0)
		close(fds[1]);
	for (j = 0; !ret && j < c->n; j++) {
		int got[2];

		if (j == c->rank)
			continue;
		ret = coll_net_wait(c->net, j, COLL_MSG_BOXES, 0, true, &m, got);
		ret = ret ?: import_boxes(c, j, got);
		if (!ret) {
			memset(&m, 0, sizeof(m));
			m.type = COLL_MSG_REACH;
			m.a = c->peer[j].i_reach;
			ret = coll_net_send(c->net, j, &m, NULL, 0);
		}
	}
	for (j = 0; !ret && j < c->n; j++) {
		if (j == c->rank)
			continue;
		ret = coll_net_wait(c->net, j, COLL_MSG_REACH, 0, true, &m, NULL);
		c->peer[j].reaches_me = !ret && m.a;
	}
	return ret;
}

SPYRE_EXPORT int spyre_comm_init_rank(spyre_comm_t **out, int nranks, const spyre_comm_id_t *id, int rank,
				      spyre_device_t *dev)
{
	struct spyre_device_props props = { .size = sizeof(props) };
	struct spyre_comm *comm;
	struct comm_rank *c;
	int j, ret;

	if (!out)
		return spyre_error(-EINVAL, "spyre_comm_init_rank: NULL argument");
	*out = NULL;
	if (!id || !dev)
		return spyre_error(-EINVAL, "spyre_comm_init_rank: NULL argument");
	if (nranks < 1 || nranks > 64 || rank < 0 || rank >= nranks)
		return spyre_error(-EINVAL, "spyre_comm_init_rank: rank %d of %d (1 to 64 ranks, "
				   "0 <= rank < nranks)", rank, nranks);
	ret = spyre_device_get_props(dev, &props);
	if (ret)
		return ret;
	comm = calloc(1, sizeof(*comm));
	c = calloc(1, sizeof(*c));
	if (c)
		c->peer = calloc((size_t)nranks, sizeof(*c->peer));
	if (!comm || !c || !c->peer) {
		free(comm);
		if (c)
			free(c->peer);
		free(c);
		return spyre_error(-ENOMEM, "spyre_comm_init_rank: out of memory");
	}
	comm->n = nranks;
	comm->rk = c;
	c->n = nranks;
	c->rank = rank;
	c->dev = dev;
	c->out_reader = -1;
	ret = coll_net_open(&c->net, c->dev, id, nranks, rank, props.pci_address);
	/* Two ranks on one card would share its memory and queues: NCCL refuses it too. */
	for (j = 0; !ret && j < nranks; j++)
		if (j != rank && !strcmp(coll_net_card(c->net, j), props.pci_address))
			ret = spyre_error(-EINVAL, "spyre_comm_init_rank: ranks %d and %d use the same "
					  "card %s", j < rank ? j : rank, j < rank ? rank : j,
					  props.pci_address);
	ret = ret ?: spyre_malloc(dev, BOX_BYTES, &c->inbox);
	ret = ret ?: spyre_malloc(dev, BOX_BYTES, &c->outbox);
	ret = ret ?: spyre_kcache_create(dev, 16, &c->cache);
	ret = ret ?: spyre_event_create(dev, &c->inbox_ev);
	ret = ret ?: spyre_event_create(dev, &c->last_ev);
	ret = ret ?: spyre_event_create(dev, &c->work_ev);
	ret = ret ?: exchange_boxes(c);
	/* Each neighbour pair of the ring: one of the two must reach the other. */
	for (j = 0; !ret && nranks > 1 && j < 2; j++) {
		int k = j ? (rank + 1) % nranks : (rank + nranks - 1) % nranks;

		if (!c->peer[k].i_reach && !c->peer[k].reaches_me)
			ret = spyre_error(-EXDEV, "spyre_comm_init_rank: neither rank %d's card (%s) nor "
					  "rank %d's (%s) reaches the other's memory", rank,
					  props.pci_address, k, coll_net_card(c->net, k));
	}
	if (ret) {
		if (c->net)
			coll_net_abort(c->net, spyre_last_error(), ret);
		spyre_comm_destroy(comm);
		return ret;
	}
	*out = comm;
	return 0;
}
