/* SPDX-License-Identifier: MIT */
#ifndef LIBSPYRE_COLL_RANK_H
#define LIBSPYRE_COLL_RANK_H

/*
 * The inside of a communicator of one card per process (coll_rank.c) that
 * its point-to-point calls and groups (coll_group.c, which calls down into
 * coll_rank.c only) work with: the ranks' boxes and transfer numbers, and
 * the steps of a transfer.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coll.h"

#define BOX_BYTES (2u << 20)

enum coll_op {
	OP_ALL_REDUCE = 1, OP_REDUCE_SCATTER, OP_ALL_GATHER, OP_BROADCAST, OP_SEND_RECV, OP_BARRIER,
};

struct rk_peer {
	spyre_dptr_t inbox, outbox;	/* its boxes imported into this card, 0 where not reached */
	bool i_reach;			/* this card reaches its memory */
	bool reaches_me;		/* its card reaches this card's memory */
	uint64_t sent, rcvd;		/* transfers to it, from it */
	bool cts_sent;			/* CTS for transfer rcvd sent */
};

struct comm_rank {
	int rank, n;
	spyre_device_t *dev;
	struct coll_net *net;
	struct rk_peer *peer;
	spyre_kcache_t *cache;
	spyre_dptr_t inbox, outbox;
	int out_reader;			/* the rank whose DONE frees the outbox, -1 */
	uint64_t out_tag;
	spyre_event_t *inbox_ev;	/* after the last read of the inbox */
	bool inbox_ev_set;
	spyre_event_t *last_ev;		/* after the last call's work */
	bool last_ev_set;
	spyre_dptr_t work;		/* reduce-scatter's copy of its input */
	size_t work_bytes;
	spyre_event_t *work_ev;		/* after the last read of work (any stream) */
	bool work_ev_set;
	uint32_t seq, op;		/* the call under way */
	/*
	 * Barriers called so far, a barrier's message tag: unlike seq, which
	 * every call (send/recv and groups too) advances, it is the same on
	 * every rank however uneven their point-to-point traffic was.
	 */
	uint64_t barriers;
	int failed;
	char why[256];
};

/*
 * The calling thread's group: spyre_comm_group_start() calls not yet
 * ended, and the communicator of its queued calls (coll_group.c keeps
 * them), set to NULL when that communicator is destroyed.
 */
extern __thread int coll_group_depth;
extern __thread struct spyre_comm *coll_group_comm;

/*
 * The start of a call on @comm (its checks; @s may be NULL for a barrier
 * only) into *@out, or an error. Inside a group only send/recv.
 */
int coll_rank_begin(spyre_comm_t *comm, spyre_stream_t *s, enum coll_op op, const char *what,
		    struct comm_rank **out);
/* The end of a call with status @ret: a failure breaks the communicator and is told to every rank. */
int coll_rank_finish(struct comm_rank *c, spyre_stream_t *s, int ret, const char *what);
/* Without waiting: 1 with @j's @type of transfer @tag taken and checked, 0 when it has not come. */
int coll_rank_try_msg(struct comm_rank *c, int j, uint32_t type, uint64_t tag, size_t bytes);
/* Before a transfer from @j: when @j pushes, tell it the inbox is free (CTS). */
int coll_rank_rx_prepare(struct comm_rank *c, int j);
/* Transfer p->sent of @len bytes at @src to @j on @s, once its CTS came (push) or the outbox is free (pull). */
int coll_rank_tx_go(struct comm_rank *c, spyre_stream_t *s, int j, spyre_dptr_t src, size_t len);
/* Transfer p->rcvd of @len bytes from @j, whose READY came, into @dst on @s. */
int coll_rank_rx_land(struct comm_rank *c, spyre_stream_t *s, int j, spyre_dptr_t dst, size_t len);
/* The inbox was read by work enqueued on @s so far. */
int coll_rank_inbox_read(struct comm_rank *c, spyre_stream_t *s);
/*
 * spyre_comm_send/recv's start: coll_rank_begin(), the peer checked
 * (-EINVAL, -EXDEV), the bytes (whole sticks) of @count elements.
 */
int coll_rank_p2p_begin(spyre_comm_t *comm, spyre_dptr_t buf, size_t count, uint32_t dtype, int peer,
			spyre_stream_t *s, const char *what, struct comm_rank **out, size_t *bytes);
/* A send or receive of @bytes run at once, piece after piece, then coll_rank_finish(). */
int coll_rank_p2p_run(struct comm_rank *c, spyre_stream_t *s, spyre_dptr_t buf, size_t bytes, int peer,
		      bool sending, const char *what);

#endif
