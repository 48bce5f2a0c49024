/* SPDX-License-Identifier: MIT */
#ifndef LIBSPYRE_COLL_H
#define LIBSPYRE_COLL_H

/*
 * The collectives' shared pieces: the communicator (coll.c: the cards of
 * one process; coll_rank.c: one card per process, on coll_boot.c's
 * sockets), the chunks of a ring, and the ADD of a received chunk.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spyre.h"
#include "spyre_kernels.h"

#define COLL_STICK 128u

struct comm_rank;
struct coll_order;

struct spyre_comm {
	int n;
	spyre_device_t **dev;
	spyre_kcache_t **cache;		/* per rank: the ADD kernels */
	spyre_dptr_t *tmp;		/* per rank: a received chunk before it is added */
	size_t tmp_bytes;
	int **access;			/* access[a][b]: a's copies reach b's memory */
	spyre_event_t **ev;		/* per rank (one process): SPYRE_EVENT_CROSS_DEVICE, where its stream is */
	spyre_dptr_t *work;		/* per rank (one process): reduce-scatter's copy of send[] */
	struct coll_order *ord;		/* one process: what each stream did in this call (coll.c) */
	size_t work_bytes;
	struct comm_rank *rk;		/* one card per process (coll_rank.c), else NULL */
};

struct coll_chunk {
	size_t off, len;		/* bytes, whole sticks */
};

/* 0, or -EINVAL with a detail naming @what when @dtype is not fp32, fp16, bf16 or dl16. */
int coll_check_dtype(uint32_t dtype, const char *what);
/* @bytes (whole sticks) split into n chunks of whole sticks, the first ones a stick larger. */
void coll_split(size_t bytes, int n, struct coll_chunk *c);
/* @bytes rounded up to whole sticks. */
size_t coll_sticks(size_t bytes);
/* @y += @b (@len bytes, whole sticks, of @dtype) on @s: the kernel library's ADD from @cache. */
int coll_add(spyre_kcache_t *cache, spyre_stream_t *s, uint32_t dtype, spyre_dptr_t y, spyre_dptr_t b,
	     size_t len);
/* Release the part of a communicator of one card per process (coll_rank.c). */
void coll_rank_destroy(struct spyre_comm *comm);
/* The rank of a communicator of one card per process. */
int coll_rank_of(const struct spyre_comm *comm);
/* The calling thread is between spyre_comm_group_start() and spyre_comm_group_end(). */
bool coll_group_open(void);

/*
 * coll_boot.c: the ranks' connections, one unix socket (SOCK_SEQPACKET,
 * abstract namespace, named from the id) per pair, and the messages on
 * them. Every wait is bounded (SPYRE_COMM_TIMEOUT_MS); a rank that exits
 * closes its sockets, which every other rank sees at once; a rank that
 * fails sends COLL_MSG_ABORT with its reason to all.
 */
enum coll_msg_type {
	COLL_MSG_HELLO = 1,	/* a: nranks, b: rank; text: card; the id's token */
	COLL_MSG_BOXES,		/* a: 1 with the two dma-buf fds (inbox, outbox), 0 without */
	COLL_MSG_REACH,		/* a: 1 when the sender imported the receiver's boxes */
	COLL_MSG_CTS,		/* tag: the receiver's inbox is free for transfer tag */
	COLL_MSG_READY,		/* tag: transfer tag is in the inbox (push) or outbox (pull); a: bytes */
	COLL_MSG_DONE,		/* tag: the receiver pulled transfer tag out of the outbox */
	COLL_MSG_BARRIER,	/* the barrier's number (comm_rank.barriers) */
	COLL_MSG_ABORT,		/* text: why */
};

struct coll_msg {
	uint32_t magic;
	uint32_t type;		/* enum coll_msg_type */
	uint32_t seq;		/* the sender's collective call number */
	uint32_t op;		/* ... and which collective (enum coll_op of coll_rank.c) */
	uint64_t tag;		/* transfer number between the pair */
	uint64_t a, b;
	uint8_t token[16];	/* HELLO: the id's secret half */
	int32_t pid;
	uint32_t pad;
	char text[256];
};

struct coll_net;

/*
 * Connect rank @rank of @nranks (on card @dev, named @card) to every other
 * rank of @id: *@out on success; each peer's pid and card (its HELLO's
 * text) kept. -errno with a detail on failure (mismatched @nranks, a rank
 * taken, a timeout).
 */
int coll_net_open(struct coll_net **out, spyre_device_t *dev, const spyre_comm_id_t *id,
		  int nranks, int rank, const char *card);
void coll_net_close(struct coll_net *net);
int coll_net_timeout_ms(const struct coll_net *net);
/* Peer @j's pid and card. */
int coll_net_pid(const struct coll_net *net, int j);
const char *coll_net_card(const struct coll_net *net, int j);
/* Send @m (type, seq, op, tag, a, b, text set by the caller) to @j, with @nfds fds. */
int coll_net_send(struct coll_net *net, int j, struct coll_msg *m, const int *fds, int nfds);
/*
 * Wait for @j's message of @type and @tag (any tag when @any_tag), taking
 * it and up to 2 fds it carries into @fds (-1 where none; NULL: closed).
 */
int coll_net_wait(struct coll_net *net, int j, uint32_t type, uint64_t tag, bool any_tag,
		  struct coll_msg *m, int *fds);
/*
 * Without waiting: 1 with @j's message of @type and @tag taken into @m, 0
 * when it has not come, an error when @j ended or any rank failed.
 */
int coll_net_try(struct coll_net *net, int j, uint32_t type, uint64_t tag, struct coll_msg *m);
/* Wait up to @ms for any peer's message and queue every one that came (an ABORT is an error). */
int coll_net_poll(struct coll_net *net, int ms);
/* The name of message @type ("CTS", "READY", ...). */
const char *coll_net_msg_name(uint32_t type);
/*
 * Send @m to @j once the work enqueued on @s so far is done: @s's sender
 * thread (one per stream, up to 8) waits for an event recorded on @s, so
 * @s itself does not wait for the host, nor another stream's messages for
 * @s's work.
 */
int coll_net_send_after(struct coll_net *net, spyre_stream_t *s, int j, const struct coll_msg *m);
/* Tell every peer this rank failed with @status (@why, its strerror stripped), best effort. */
void coll_net_abort(struct coll_net *net, const char *why, int status);
/* Cut a trailing " (<strerror of @status>)" off @s (spyre_error() adds it again). */
void coll_strip_status(char *s, int status);

#endif
