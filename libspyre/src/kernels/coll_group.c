// SPDX-License-Identifier: MIT
/*
 * Point-to-point calls of a communicator of one card per process and
 * their groups (NCCL's ncclGroupStart/End): spyre_comm_send/recv run at
 * once (coll_rank.c's transfers, a send waiting for the receiver's CTS or
 * DONE) outside a group; inside one they are queued per thread, and
 * spyre_comm_group_end() runs them in a loop that advances, for every pair
 * and direction, the first unfinished call as far as the messages already
 * received allow (coll_net_try(): nothing is waited for) and polls every
 * socket only when no piece moved, so no order of matched calls across
 * ranks deadlocks. A receiving rank lends its inbox to one pushing sender
 * at a time. Calls down into coll_rank.c only.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spyre.h"
#include "spyre_kernels.h"
#include "common.h"
#include "coll.h"
#include "coll_rank.h"

/* One queued spyre_comm_send() or spyre_comm_recv() of a group. */
struct grp_op {
	bool sending;
	int peer;
	spyre_dptr_t buf;
	size_t bytes, done;		/* done: the pieces that went (bytes) */
};

/*
 * The calling thread's queued calls (NCCL's groups are per thread too), all
 * of one communicator (coll_group_comm, coll_rank.h) and one stream.
 */
static __thread struct {
	spyre_stream_t *s;
	struct grp_op *op;
	int n, cap;
} grp;

static void grp_clear(void)
{
	free(grp.op);
	memset(&grp, 0, sizeof(grp));
	coll_group_comm = NULL;
}

static int grp_add(spyre_comm_t *comm, spyre_stream_t *s, bool sending, int peer, spyre_dptr_t buf,
		   size_t bytes, const char *what)
{
	/* The calls of a communicator destroyed since are dropped. */
	if (grp.n && !coll_group_comm)
		grp.n = 0;
	if (grp.n && coll_group_comm != comm)
		return spyre_error(-EOPNOTSUPP, "%s: a group holds the calls of one communicator, and "
				   "this group has another's", what);
	if (grp.n && grp.s != s)
		return spyre_error(-EOPNOTSUPP, "%s: a group holds the calls of one stream, and this "
				   "group has another's", what);
	if (grp.n == grp.cap) {
		int cap = grp.cap ? 2 * grp.cap : 16;
		struct grp_op *op = realloc(grp.op, (size_t)cap * sizeof(*op));

		if (!op)
			return spyre_error(-ENOMEM, "%s: out of memory", what);
		grp.op = op;
		grp.cap = cap;
	}
	coll_group_comm = comm;
	grp.s = s;
	grp.op[grp.n++] = (struct grp_op){ .sending = sending, .peer = peer, .buf = buf, .bytes = bytes };
	return 0;
}

static size_t piece_len(const struct grp_op *o)
{
	return o->bytes - o->done > BOX_BYTES ? BOX_BYTES : o->bytes - o->done;
}

/* The inbox is lent to a sender (its CTS went, its READY did not come). */
static bool inbox_lent(const struct comm_rank *c)
{
	int j;

	for (j = 0; j < c->n; j++)
		if (c->peer[j].cts_sent)
			return true;
	return false;
}

/*
 * Advance the next piece of @o as far as it goes without waiting: 1 when
 * something moved (*@went: the piece went), 0 when it waits for a message.
 */
static int grp_step(struct comm_rank *c, spyre_stream_t *s, struct grp_op *o, bool *went)
{
	struct rk_peer *p = &c->peer[o->peer];
	size_t len = piece_len(o);
	int ret, moved = 0;

	*went = false;
	if (o->sending) {
		if (p->i_reach)
			ret = coll_rank_try_msg(c, o->peer, COLL_MSG_CTS, p->sent, 0);
		else if (c->out_reader >= 0)
			ret = coll_rank_try_msg(c, c->out_reader, COLL_MSG_DONE, c->out_tag, 0);
		else
			ret = 1;
		if (ret <= 0)
			return ret;
		if (!p->i_reach)
			c->out_reader = -1;
		ret = coll_rank_tx_go(c, s, o->peer, o->buf + o->done, len);
	} else {
		/* One sender at a time holds the inbox. */
		if (p->reaches_me && !p->cts_sent) {
			if (inbox_lent(c))
				return 0;
			ret = coll_rank_rx_prepare(c, o->peer);
			if (ret)
				return ret;
			moved = 1;
		}
		ret = coll_rank_try_msg(c, o->peer, COLL_MSG_READY, p->rcvd, len);
		if (ret <= 0)
			return ret ?: moved;
		ret = coll_rank_rx_land(c, s, o->peer, o->buf + o->done, len);
		if (!ret && p->reaches_me)
			ret = coll_rank_inbox_read(c, s);
	}
	if (ret)
		return ret;
	o->done += len;
	*went = true;
	return 1;
}

/* What @o's next piece waits for, into @buf. */
static void grp_waits_for(const struct comm_rank *c, const struct grp_op *o, char *buf, size_t size)
{
	const struct rk_peer *p = &c->peer[o->peer];
	int j = o->peer;
	uint32_t type = COLL_MSG_READY;
	uint64_t tag = p->rcvd;

	if (o->sending && p->i_reach) {
		type = COLL_MSG_CTS;
		tag = p->sent;
	} else if (o->sending) {
		j = c->out_reader;
		type = COLL_MSG_DONE;
		tag = c->out_tag;
	} else if (p->reaches_me && !p->cts_sent) {
		for (j = 0; j < c->n && !c->peer[j].cts_sent; j++)
			;
		snprintf(buf, size, "the inbox is lent to rank %d, which sent no READY (transfer "
			 "%llu)", j, (unsigned long long)(j < c->n ? c->peer[j].rcvd : 0));
		return;
	}
	snprintf(buf, size, "rank %d (pid %d) sent no %s (transfer %llu)", j,
		 coll_net_pid(c->net, j), coll_net_msg_name(type), (unsigned long long)tag);
}

/* "op 2 of 3 (spyre_comm_recv of 4096 bytes from rank 1, piece 1 of 2)" into @buf. */
static void grp_name(const struct grp_op *o, int i, char *buf, size_t size)
{
	snprintf(buf, size, "op %d of %d (%s of %zu bytes %s rank %d, piece %zu of %zu)", i + 1, grp.n,
		 o->sending ? "spyre_comm_send" : "spyre_comm_recv", o->bytes,
		 o->sending ? "to" : "from", o->peer, o->done / BOX_BYTES + 1,
		 (o->bytes + BOX_BYTES - 1) / BOX_BYTES);
}

/* @o is the first of the group's unfinished calls in its direction with its peer. */
static bool grp_front(int i)
{
	int k;

	for (k = 0; k < i; k++)
		if (grp.op[k].done < grp.op[k].bytes && grp.op[k].peer == grp.op[i].peer &&
		    grp.op[k].sending == grp.op[i].sending)
			return false;
	return true;
}

/*
 * Run the group's calls: each round advances every call that can (the
 * first unfinished one of each peer and direction: pieces between a pair go
 * in the order of the calls), then waits for any message when none could.
 */
static int grp_run(struct comm_rank *c)
{
	int64_t last = (int64_t)(spyre_now_ns() / 1000000);
	int timeout_ms = coll_net_timeout_ms(c->net);
	char name[160], waits[160];

	for (;;) {
		int i, moved = 0, left = 0, first = -1, ret = 0;
		int64_t now;

		for (i = 0; !ret && i < grp.n; i++) {
			struct grp_op *o = &grp.op[i];
			bool went = true;

			/* A call goes on while its pieces go, then the next one of its pair. */
			while (!ret && went && o->done < o->bytes && grp_front(i)) {
				ret = grp_step(c, grp.s, o, &went);
				moved |= ret > 0;
			}
			if (ret < 0)
				break;
			ret = 0;
			if (o->done < o->bytes) {
				left++;
				if (first < 0 && grp_front(i))
					first = i;
			}
		}
		if (ret < 0) {
			char why[256];

			snprintf(why, sizeof(why), "%s", spyre_last_error());
			coll_strip_status(why, ret);
			grp_name(&grp.op[i], i, name, sizeof(name));
			return spyre_error(ret, "%s: %s", name, why);
		}
		if (!left)
			return 0;
		now = (int64_t)(spyre_now_ns() / 1000000);
		if (moved) {
			last = now;
			continue;
		}
		if (now - last >= timeout_ms) {
			grp_name(&grp.op[first], first, name, sizeof(name));
			grp_waits_for(c, &grp.op[first], waits, sizeof(waits));
			return spyre_error(-ETIMEDOUT, "%s: %s within %d ms (SPYRE_COMM_TIMEOUT_MS)", name,
					   waits, timeout_ms);
		}
		ret = coll_net_poll(c->net, (int)(last + timeout_ms - now > 1000 ? 1000 :
						  last + timeout_ms - now));
		if (ret)
			return ret;
	}
}

SPYRE_EXPORT int spyre_comm_group_start(void)
{
	if (coll_group_depth == INT32_MAX)
		return spyre_error(-EINVAL, "spyre_comm_group_start: groups nested too deep");
	coll_group_depth++;
	return 0;
}

SPYRE_EXPORT int spyre_comm_group_end(void)
{
	static const char what[] = "spyre_comm_group_end";
	struct comm_rank *c;
	int ret;

	if (!coll_group_depth)
		return spyre_error(-EINVAL, "%s: no spyre_comm_group_start() before it", what);
	if (--coll_group_depth)
		return 0;
	if (!grp.n || !coll_group_comm) {
		grp_clear();
		return 0;
	}
	ret = coll_rank_begin(coll_group_comm, grp.s, OP_SEND_RECV, what, &c);
	if (!ret)
		ret = coll_rank_finish(c, grp.s, grp_run(c), what);
	grp_clear();
	return ret;
}

static int point_to_point(spyre_comm_t *comm, spyre_dptr_t buf, size_t count, uint32_t dtype, int peer,
			  spyre_stream_t *s, bool sending, const char *what)
{
	struct comm_rank *c;
	size_t bytes;
	int ret = coll_rank_p2p_begin(comm, buf, count, dtype, peer, s, what, &c, &bytes);

	if (ret)
		return ret;
	if (coll_group_depth)
		return bytes ? grp_add(comm, s, sending, peer, buf, bytes, what) : 0;
	return coll_rank_p2p_run(c, s, buf, bytes, peer, sending, what);
}

SPYRE_EXPORT int spyre_comm_send(spyre_comm_t *comm, spyre_dptr_t buf, size_t count, uint32_t dtype,
				 int peer, spyre_stream_t *s)
{
	return point_to_point(comm, buf, count, dtype, peer, s, true, "spyre_comm_send");
}

SPYRE_EXPORT int spyre_comm_recv(spyre_comm_t *comm, spyre_dptr_t buf, size_t count, uint32_t dtype,
				 int peer, spyre_stream_t *s)
{
	return point_to_point(comm, buf, count, dtype, peer, s, false, "spyre_comm_recv");
}
