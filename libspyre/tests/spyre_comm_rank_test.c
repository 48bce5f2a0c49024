// SPDX-License-Identifier: MIT
/*
 * Description: communicators of one card per process
 * (spyre_comm_init_rank()) on every card of the VM (2 in `make check`; 4
 * with tools/vm/run --devices 4), rank r a forked process with card r and a
 * stream of it: all-reduce (sum) in fp32, fp16, bf16 and dl16 over odd
 * counts (1, 31, 1000, 4097, 65549 elements, and 1.5 Mi fp32 elements,
 * whose chunks take two 2 MiB pieces), in place and not; reduce-scatter
 * (the input unchanged), all-gather, broadcast from every root and
 * send/recv between every ordered pair (3001 fp16 and 600 001 fp32
 * elements), and the same with the receiver's and then the sender's card
 * held by a WAIT that its host releases only after the call returned (the
 * call must return, its stream busy: for one piece it waits for the other
 * rank, not for its own card); each checked by every rank against the CPU reference of
 * spyre_coll_test (the same rounded inputs, partial sums rounded in rank
 * order: exact for 2 ranks, n - 1 roundings of the sum beyond). Two
 * communicators at once, interleaved, with a barrier. Uneven send/recv
 * (rank 0 sends to every rank, then twice to rank 1 in one group against
 * its two receives) and then a barrier and a checked all-reduce, twice: the
 * ranks' call counts differ, the barrier must still meet. Groups
 * (spyre_comm_group_start/end()): a ring exchange in both orders (one
 * nested), an all-to-all, three transfers each way between ranks 0 and 1
 * matched in call order, over 1 to 3 box pieces, each against the
 * sender's values; careless use of groups (-EINVAL, -EOPNOTSUPP with their
 * details) and an unmatched receive (-ETIMEDOUT naming the call, the
 * peer's next call -ECONNABORTED). Hostile and careless
 * use, each with its status and detail: mismatched nranks (-EINVAL on both
 * sides), a rank taken twice (-EADDRINUSE; the other rank 0 times out,
 * -ETIMEDOUT), two ranks on one card (-EINVAL), an id not from
 * spyre_comm_get_unique_id(), ranks calling different collectives or
 * counts (-EINVAL, and the communicator is broken after), the calls of a
 * communicator of one process; a rank that never joins (-ETIMEDOUT within
 * SPYRE_COMM_TIMEOUT_MS), a lower rank's socket held by a process that
 * never accepts (-ETIMEDOUT, not a blocked connect), one SIGKILLed during set-up and one SIGKILLed
 * in the middle of a loop of all-reduces of 1 MiB (-ECONNRESET or
 * -ECONNABORTED with the rank and its pid, seconds later, never a hang),
 * and one that exits between two calls. And the sharing beneath, in one
 * process: spyre_ipc_export() of card 0's allocation, imported by card 1,
 * whose copy reads the exact bytes after the exporter freed it; its errors
 * (a sub-allocated buffer, a bad fd or import, -EOPNOTSUPP where the card
 * shows no memory to peers).
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "spyre.h"
#include "spyre_kernels.h"
#include "spyre_isa.h"
#include "spyre_dtype.h"
#include "coll-ref.h"
#include "spyre_hw.h"

#define MAXR 8

/* What a rank's process hands back: its status, the mismatches it counted, its detail. */
struct result {
	int ret;
	int stage;		/* how far it got (the test's own numbering) */
	long bad;
	double secs;		/* the failing call's duration */
	char err[512];
};

struct ctx {
	int n, rank;
	spyre_device_t *dev;
	spyre_stream_t *s;
	spyre_comm_t *comm;
	struct result *res;
	const spyre_comm_id_t *id;
	const void *arg;
};


static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}


static int fill(struct ctx *c, spyre_dptr_t buf, size_t count, uint32_t dt, unsigned int seed, int as)
{
	size_t bytes = round_sticks(count * SPYRE_DT_SIZE(dt)), i;
	uint8_t *h = calloc(1, bytes);
	int ret;

	if (!h)
		return -ENOMEM;
	for (i = 0; i < count; i++)
		spyre_store_f32(h, dt, i, value(as, i, dt, seed));
	ret = spyre_memcpy(c->dev, buf, (uintptr_t)h, bytes, SPYRE_MEMCPY_H2D);
	free(h);
	return ret;
}

/* Mismatches of @buf (@count elements from element @first) against the reduced reference. */
static long check_sum(struct ctx *c, spyre_dptr_t buf, size_t first, size_t count, uint32_t dt,
		      unsigned int seed)
{
	size_t bytes = round_sticks(count * SPYRE_DT_SIZE(dt)), i;
	uint8_t *h = malloc(bytes);
	long bad = 0;

	if (!h || spyre_memcpy(c->dev, (uintptr_t)h, buf, bytes, SPYRE_MEMCPY_D2H)) {
		free(h);
		return (long)count;
	}
	for (i = 0; i < count; i++) {
		float want = ref_sum(c->n, first + i, dt, seed), got = spyre_load_f32(h, dt, i);
		float tol = ref_tol(c->n, want, dt);

		if (!(fabsf(got - want) <= tol)) {	/* a NaN fails too */
			if (bad < 3)
				fprintf(stderr, "# rank %d element %zu: %g, want %g\n", c->rank, first + i,
					(double)got, (double)want);
			bad++;
		}
	}
	free(h);
	return bad;
}

/* Mismatches of @buf against rank @as's values. */
static long check_copy(struct ctx *c, spyre_dptr_t buf, size_t count, uint32_t dt, unsigned int seed,
		       int as)
{
	size_t bytes = round_sticks(count * SPYRE_DT_SIZE(dt)), i;
	uint8_t *h = malloc(bytes);
	long bad = 0;

	if (!h || spyre_memcpy(c->dev, (uintptr_t)h, buf, bytes, SPYRE_MEMCPY_D2H)) {
		free(h);
		return (long)count;
	}
	for (i = 0; i < count; i++)
		bad += spyre_load_f32(h, dt, i) != value(as, i, dt, seed);
	free(h);
	return bad;
}

typedef int (*rank_fn)(struct ctx *c);

/* Record @ret and the detail of a failure of rank @c (a macro: the stage and a line). */
#define FAIL_IF(c, call)									\
	do {											\
		double t0_ = now_s();								\
		int r_ = (call);								\
		if (r_) {									\
			(c)->res->ret = r_;							\
			(c)->res->secs = now_s() - t0_;						\
			snprintf((c)->res->err, sizeof((c)->res->err), "line %d: %s", __LINE__,	\
				 spyre_last_error());						\
			return r_;								\
		}										\
	} while (0)

/*
 * Rank @rank's process: card @card (-1: none, the function opens what it
 * needs), a stream, the communicator @id (unless @init is 0), then @fn.
 */
static void rank_main(int n, int rank, int card, const spyre_comm_id_t *id, int init, rank_fn fn,
		      const void *arg, struct result *res)
{
	struct ctx c = { .n = n, .rank = rank, .res = res, .id = id, .arg = arg };
	int ret = 0;

	if (card >= 0) {
		ret = spyre_device_open(card, &c.dev);
		ret = ret ?: spyre_stream_create(c.dev, SPYRE_STREAM_PRIORITY_NORMAL, &c.s);
	}
	if (!ret && init) {
		double t0 = now_s();

		res->stage = 1;	/* in the set-up */
		ret = spyre_comm_init_rank(&c.comm, n, id, rank, c.dev);
		res->secs = now_s() - t0;
	}
	if (ret) {
		res->ret = ret;
		snprintf(res->err, sizeof(res->err), "set-up: %s", spyre_last_error());
	} else if (fn) {
		ret = fn(&c);
	}
	spyre_comm_destroy(c.comm);
	if (c.s)
		spyre_stream_destroy(c.s);
	spyre_device_close(c.dev);
	_exit(ret ? 1 : 0);
}

struct launch {
	int n;
	int card[MAXR];		/* card of each rank */
	int init;
	rank_fn fn[MAXR];
	const void *arg;
	int kill_rank, kill_ms;	/* SIGKILL rank kill_rank (-1: none) kill_ms after ... */
	int kill_after_stage;	/* ... its stage reached this (1: it entered the set-up) */
	const char *timeout_ms;	/* SPYRE_COMM_TIMEOUT_MS of every rank */
};

/* Run the ranks of @l in processes; results in @res; returns how many exited 0 (a kill counts not). */
static int run_ranks(const struct launch *l, struct result *res, const spyre_comm_id_t *id)
{
	pid_t pid[MAXR];
	int r, ok = 0, st;
	double t0 = now_s();

	memset(res, 0, sizeof(*res) * MAXR);
	if (l->timeout_ms)
		setenv("SPYRE_COMM_TIMEOUT_MS", l->timeout_ms, 1);
	else
		unsetenv("SPYRE_COMM_TIMEOUT_MS");
	fflush(NULL);
	for (r = 0; r < l->n; r++) {
		pid[r] = fork();
		if (!pid[r])
			rank_main(l->n, r, l->card[r], id, l->init, l->fn[r], l->arg, &res[r]);
	}
	if (l->kill_rank >= 0) {
		while (res[l->kill_rank].stage < l->kill_after_stage && now_s() - t0 < 600)
			usleep(500);
		usleep((useconds_t)l->kill_ms * 1000);
		kill(pid[l->kill_rank], SIGKILL);
	}
	for (r = 0; r < l->n; r++) {
		waitpid(pid[r], &st, 0);
		ok += WIFEXITED(st) && WEXITSTATUS(st) == 0;
		if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0) && r != l->kill_rank)
			fprintf(stderr, "# rank %d: status %d %s\n", r, res[r].ret, res[r].err);
	}
	unsetenv("SPYRE_COMM_TIMEOUT_MS");
	return ok;
}

/* ---- what the ranks do ---- */

static int do_all_reduce(struct ctx *c)
{
	static const uint32_t dts[] = { SPYRE_DT_FP32, SPYRE_DT_FP16, SPYRE_DT_BF16, SPYRE_DT_DL16 };
	static const size_t counts[] = { 1, 31, 1000, 4097, 65536 + 13 };
	size_t d, k;

	for (d = 0; d < 5; d++) {
		for (k = 0; k < (d < 4 ? 5u : 1u); k++) {
			/* d == 4: fp32 chunks of more than one 2 MiB piece. */
			uint32_t dt = d < 4 ? dts[d] : SPYRE_DT_FP32;
			size_t count = d < 4 ? counts[k] : (3u << 19) + 5;
			size_t bytes = round_sticks(count * SPYRE_DT_SIZE(dt));
			unsigned int seed = (unsigned int)(d * 10 + k);
			int inplace = (k + d) % 2;
			spyre_dptr_t send, recv;
			long bad;

			FAIL_IF(c, spyre_malloc(c->dev, bytes, &send));
			recv = send;
			if (!inplace)
				FAIL_IF(c, spyre_malloc(c->dev, bytes, &recv));
			FAIL_IF(c, fill(c, send, count, dt, seed, c->rank));
			FAIL_IF(c, spyre_comm_all_reduce(c->comm, send, recv, count, dt, SPYRE_RED_SUM, c->s));
			FAIL_IF(c, spyre_stream_synchronize(c->s));
			bad = check_sum(c, recv, 0, count, dt, seed);
			if (bad)
				fprintf(stderr, "# rank %d: dtype %u, %zu elements%s: %ld wrong\n", c->rank,
					dt, count, inplace ? ", in place" : "", bad);
			c->res->bad += bad;
			spyre_free(c->dev, send);
			if (!inplace)
				spyre_free(c->dev, recv);
		}
	}
	return 0;
}

static int do_rs_ag(struct ctx *c)
{
	const uint32_t dt = SPYRE_DT_FP32;
	const size_t each = 32 * 37;
	spyre_dptr_t send, recv, gath;

	FAIL_IF(c, spyre_malloc(c->dev, each * 4 * (size_t)c->n, &send));
	FAIL_IF(c, spyre_malloc(c->dev, each * 4, &recv));
	FAIL_IF(c, spyre_malloc(c->dev, each * 4 * (size_t)c->n, &gath));
	FAIL_IF(c, fill(c, send, each * (size_t)c->n, dt, 5, c->rank));
	FAIL_IF(c, spyre_comm_reduce_scatter(c->comm, send, recv, each, dt, SPYRE_RED_SUM, c->s));
	FAIL_IF(c, spyre_stream_synchronize(c->s));
	c->res->bad += check_sum(c, recv, (size_t)c->rank * each, each, dt, 5);
	/* The input is unchanged. */
	c->res->bad += check_copy(c, send, each * (size_t)c->n, dt, 5, c->rank);
	FAIL_IF(c, spyre_comm_all_gather(c->comm, recv, gath, each, dt, c->s));
	FAIL_IF(c, spyre_stream_synchronize(c->s));
	c->res->bad += check_sum(c, gath, 0, each * (size_t)c->n, dt, 5);
	spyre_free(c->dev, send);
	spyre_free(c->dev, recv);
	spyre_free(c->dev, gath);
	return 0;
}

static int do_bcast_p2p(struct ctx *c)
{
	static const struct { uint32_t dt; size_t count; } sz[] = {
		{ SPYRE_DT_FP16, 3001 }, { SPYRE_DT_FP32, 600001 },
	};
	size_t z;
	int root, src, dst;

	for (z = 0; z < 2; z++) {
		spyre_dptr_t buf;
		uint32_t dt = sz[z].dt;
		size_t count = sz[z].count;

		FAIL_IF(c, spyre_malloc(c->dev, round_sticks(count * SPYRE_DT_SIZE(dt)), &buf));
		for (root = 0; root < c->n; root++) {
			FAIL_IF(c, fill(c, buf, count, dt, 40 + (unsigned int)root, c->rank));
			FAIL_IF(c, spyre_comm_broadcast(c->comm, buf, count, dt, root, c->s));
			FAIL_IF(c, spyre_stream_synchronize(c->s));
			c->res->bad += check_copy(c, buf, count, dt, 40 + (unsigned int)root, root);
		}
		for (src = 0; src < c->n; src++) {
			for (dst = 0; dst < c->n; dst++) {
				unsigned int seed = 60 + (unsigned int)(src * 8 + dst);

				if (src == dst || (c->rank != src && c->rank != dst))
					continue;
				FAIL_IF(c, fill(c, buf, count, dt, seed, c->rank));
				if (c->rank == src)
					FAIL_IF(c, spyre_comm_send(c->comm, buf, count, dt, dst, c->s));
				else
					FAIL_IF(c, spyre_comm_recv(c->comm, buf, count, dt, src, c->s));
				FAIL_IF(c, spyre_stream_synchronize(c->s));
				c->res->bad += check_copy(c, buf, count, dt, seed, src);
			}
		}
		spyre_free(c->dev, buf);
	}
	return 0;
}

/* Two communicators (ids in c->arg) at once: all-reduces interleaved, barriers between. */
static int do_two_comms(struct ctx *c)
{
	const spyre_comm_id_t *ids = c->arg;
	spyre_comm_t *b = NULL;
	spyre_dptr_t x, y;
	const size_t count = 5000;
	int i, ret;

	FAIL_IF(c, spyre_comm_init_rank(&b, c->n, &ids[1], c->rank, c->dev));
	FAIL_IF(c, spyre_malloc(c->dev, count * 4, &x));
	FAIL_IF(c, spyre_malloc(c->dev, count * 4, &y));
	for (i = 0; i < 3; i++) {
		FAIL_IF(c, fill(c, x, count, SPYRE_DT_FP32, 70 + (unsigned int)i, c->rank));
		FAIL_IF(c, fill(c, y, count, SPYRE_DT_FP32, 80 + (unsigned int)i, c->rank));
		FAIL_IF(c, spyre_comm_all_reduce(c->comm, x, x, count, SPYRE_DT_FP32, SPYRE_RED_SUM, c->s));
		FAIL_IF(c, spyre_comm_all_reduce(b, y, y, count, SPYRE_DT_FP32, SPYRE_RED_SUM, c->s));
		FAIL_IF(c, spyre_comm_barrier(b));
		FAIL_IF(c, spyre_comm_barrier(c->comm));
		FAIL_IF(c, spyre_stream_synchronize(c->s));
		c->res->bad += check_sum(c, x, 0, count, SPYRE_DT_FP32, 70 + (unsigned int)i);
		c->res->bad += check_sum(c, y, 0, count, SPYRE_DT_FP32, 80 + (unsigned int)i);
	}
	if (spyre_comm_rank(b) != c->rank || spyre_comm_count(b) != c->n)
		c->res->bad++;
	ret = spyre_comm_destroy(b);
	spyre_free(c->dev, x);
	spyre_free(c->dev, y);
	return ret;
}

/*
 * Uneven point-to-point traffic, then a barrier and an all-reduce: rank 0
 * sends to every other rank (n - 1 calls against their one) and twice more
 * to rank 1 in one group (one call against rank 1's two), so the ranks'
 * call counts differ; the barrier must still meet (it once waited for the
 * call count as its tag: a hang with 3 ranks) and the all-reduce after it
 * be right. Twice, so a second barrier meets too.
 */
static int do_uneven_barrier(struct ctx *c)
{
	const size_t count = 3001, sum_count = 5000;
	const uint32_t dt = SPYRE_DT_FP16;
	spyre_dptr_t buf[2], x;
	int i, j, k;

	for (k = 0; k < 2; k++)
		FAIL_IF(c, spyre_malloc(c->dev, round_sticks(count * SPYRE_DT_SIZE(dt)), &buf[k]));
	FAIL_IF(c, spyre_malloc(c->dev, sum_count * 4, &x));
	for (i = 0; i < 2; i++) {
		unsigned int seed = 500 + 10 * (unsigned int)i;

		if (c->rank == 0) {
			for (j = 1; j < c->n; j++) {
				FAIL_IF(c, fill(c, buf[0], count, dt, seed + (unsigned int)j, 0));
				FAIL_IF(c, spyre_comm_send(c->comm, buf[0], count, dt, j, c->s));
				FAIL_IF(c, spyre_stream_synchronize(c->s));
			}
			FAIL_IF(c, fill(c, buf[0], count, dt, seed + 8, 0));
			FAIL_IF(c, fill(c, buf[1], count, dt, seed + 9, 0));
			FAIL_IF(c, spyre_comm_group_start());
			for (k = 0; k < 2; k++)
				FAIL_IF(c, spyre_comm_send(c->comm, buf[k], count, dt, 1, c->s));
			FAIL_IF(c, spyre_comm_group_end());
		} else {
			FAIL_IF(c, spyre_comm_recv(c->comm, buf[0], count, dt, 0, c->s));
			FAIL_IF(c, spyre_stream_synchronize(c->s));
			c->res->bad += check_copy(c, buf[0], count, dt, seed + (unsigned int)c->rank, 0);
			for (k = 0; c->rank == 1 && k < 2; k++) {
				FAIL_IF(c, spyre_comm_recv(c->comm, buf[k], count, dt, 0, c->s));
				FAIL_IF(c, spyre_stream_synchronize(c->s));
				c->res->bad += check_copy(c, buf[k], count, dt, seed + 8 + (unsigned int)k, 0);
			}
		}
		FAIL_IF(c, spyre_stream_synchronize(c->s));
		FAIL_IF(c, spyre_comm_barrier(c->comm));
		FAIL_IF(c, fill(c, x, sum_count, SPYRE_DT_FP32, seed, c->rank));
		FAIL_IF(c, spyre_comm_all_reduce(c->comm, x, x, sum_count, SPYRE_DT_FP32, SPYRE_RED_SUM, c->s));
		FAIL_IF(c, spyre_stream_synchronize(c->s));
		c->res->bad += check_sum(c, x, 0, sum_count, SPYRE_DT_FP32, seed);
	}
	for (k = 0; k < 2; k++)
		spyre_free(c->dev, buf[k]);
	spyre_free(c->dev, x);
	return 0;
}

/* Rank 0 all-reduces, the others broadcast: each must fail with -EINVAL naming both. */
static int do_mismatch(struct ctx *c)
{
	spyre_dptr_t x;
	int ret;

	FAIL_IF(c, spyre_malloc(c->dev, 4096, &x));
	ret = c->rank == 0 ? spyre_comm_all_reduce(c->comm, x, x, 1024, SPYRE_DT_FP32, SPYRE_RED_SUM, c->s) :
	      spyre_comm_broadcast(c->comm, x, 1024, SPYRE_DT_FP32, 0, c->s);
	c->res->ret = ret;
	snprintf(c->res->err, sizeof(c->res->err), "%s", spyre_last_error());
	/* Broken from now on. */
	c->res->stage = spyre_comm_barrier(c->comm);
	spyre_free(c->dev, x);
	return 0;
}

/* Counts that differ between ranks. */
static int do_count_mismatch(struct ctx *c)
{
	spyre_dptr_t x;

	FAIL_IF(c, spyre_malloc(c->dev, 8192, &x));
	c->res->ret = spyre_comm_all_reduce(c->comm, x, x, c->rank ? 2048 : 1024, SPYRE_DT_FP32,
					    SPYRE_RED_SUM, c->s);
	snprintf(c->res->err, sizeof(c->res->err), "%s", spyre_last_error());
	spyre_free(c->dev, x);
	return 0;
}

/* All-reduces of 1 MiB until one fails; the stage counts the successes. */
static int do_loop(struct ctx *c)
{
	spyre_dptr_t x;

	FAIL_IF(c, spyre_malloc(c->dev, 1u << 20, &x));
	for (;;) {
		FAIL_IF(c, spyre_comm_all_reduce(c->comm, x, x, 1u << 18, SPYRE_DT_FP32, SPYRE_RED_SUM,
						 c->s));
		c->res->stage++;
	}
}

/* One all-reduce, then exit without a word. */
static int do_one_then_exit(struct ctx *c)
{
	spyre_dptr_t x;

	FAIL_IF(c, spyre_malloc(c->dev, 4096, &x));
	FAIL_IF(c, spyre_comm_all_reduce(c->comm, x, x, 1024, SPYRE_DT_FP32, SPYRE_RED_SUM, c->s));
	FAIL_IF(c, spyre_stream_synchronize(c->s));
	_exit(0);
}

static int do_two_then_fail(struct ctx *c)
{
	spyre_dptr_t x;

	FAIL_IF(c, spyre_malloc(c->dev, 4096, &x));
	FAIL_IF(c, spyre_comm_all_reduce(c->comm, x, x, 1024, SPYRE_DT_FP32, SPYRE_RED_SUM, c->s));
	FAIL_IF(c, spyre_comm_all_reduce(c->comm, x, x, 1024, SPYRE_DT_FP32, SPYRE_RED_SUM, c->s));
	return 0;
}

/*
 * A rank's call returns while its card is still held by earlier work: a
 * WAIT for a word that this rank's host releases (another stream's write)
 * only after the call returned. The call (one piece) waits for the other
 * rank's messages, not for its own card. Every ordered pair, the receiver held,
 * then the sender (so both the push and the pull path where the cards have
 * one of each).
 */
static int do_held(struct ctx *c)
{
	const uint32_t dt = SPYRE_DT_FP32;
	const size_t count = 70001;
	spyre_stream_t *g;
	spyre_dptr_t buf, word;
	uint64_t v = 0;
	int src, dst, held;

	/* High priority: its own hardware queue, not behind the held stream's WAIT. */
	FAIL_IF(c, spyre_stream_create(c->dev, SPYRE_STREAM_PRIORITY_HIGH, &g));
	FAIL_IF(c, spyre_malloc(c->dev, round_sticks(count * SPYRE_DT_SIZE(dt)), &buf));
	FAIL_IF(c, spyre_malloc(c->dev, 4096, &word));
	FAIL_IF(c, spyre_memset_async(g, word, 0, 4096));
	FAIL_IF(c, spyre_stream_synchronize(g));
	for (src = 0; src < c->n; src++) {
		for (dst = 0; dst < c->n; dst++) {
			for (held = 0; held < 2; held++) {
				unsigned int seed = 90 + (unsigned int)(src * 8 + dst + held * 64);
				int me_held = c->rank == (held ? src : dst), q;

				if (src == dst || (c->rank != src && c->rank != dst))
					continue;
				FAIL_IF(c, fill(c, buf, count, dt, seed, c->rank));
				/* Released within a second or two; bounded at 60 s for a loaded host. */
				if (me_held)
					FAIL_IF(c, spyre_stream_wait_value64(c->s, word, ++v, 60000));
				if (c->rank == src)
					FAIL_IF(c, spyre_comm_send(c->comm, buf, count, dt, dst, c->s));
				else
					FAIL_IF(c, spyre_comm_recv(c->comm, buf, count, dt, src, c->s));
				if (me_held) {
					q = spyre_stream_query(c->s);
					if (q != -EBUSY) {
						fprintf(stderr, "# rank %d: %d -> %d, %s held: the call "
							"returned with the stream at %d, not -EBUSY\n",
							c->rank, src, dst, held ? "sender" : "receiver", q);
						c->res->bad++;
					}
					FAIL_IF(c, spyre_stream_write_value64(g, word, v));
				}
				FAIL_IF(c, spyre_stream_synchronize(c->s));
				c->res->bad += check_copy(c, buf, count, dt, seed, src);
			}
		}
	}
	spyre_free(c->dev, buf);
	spyre_free(c->dev, word);
	spyre_stream_destroy(g);
	return 0;
}

/* ---- groups (spyre_comm_group_start/end) ---- */

/* The sizes of the group tests: odd counts, and one of three 2 MiB pieces with a short last one. */
static const struct { uint32_t dt; size_t count; } grp_sz[] = {
	{ SPYRE_DT_FP16, 3001 }, { SPYRE_DT_FP32, 5 }, { SPYRE_DT_FP32, 1100001 },
};

static size_t grp_bytes(size_t z)
{
	return round_sticks(grp_sz[z].count * SPYRE_DT_SIZE(grp_sz[z].dt));
}

/*
 * A ring exchange in one group: send to the next rank, receive from the
 * previous one, in both orders inside the group (with 2 ranks the two are
 * one peer), the second order with the send in a nested group.
 */
static int do_group_ring(struct ctx *c)
{
	int n = c->n, next = (c->rank + 1) % n, prev = (c->rank + n - 1) % n, order;
	size_t z;

	for (z = 0; z < 3; z++) {
		uint32_t dt = grp_sz[z].dt;
		size_t count = grp_sz[z].count;
		spyre_dptr_t sb, rb;

		FAIL_IF(c, spyre_malloc(c->dev, grp_bytes(z), &sb));
		FAIL_IF(c, spyre_malloc(c->dev, grp_bytes(z), &rb));
		for (order = 0; order < 2; order++) {
			unsigned int seed = 200 + (unsigned int)(z * 2 + order);

			FAIL_IF(c, fill(c, sb, count, dt, seed, c->rank));
			FAIL_IF(c, spyre_memset_async(c->s, rb, 0, grp_bytes(z)));
			FAIL_IF(c, spyre_comm_group_start());
			if (order) {
				FAIL_IF(c, spyre_comm_recv(c->comm, rb, count, dt, prev, c->s));
				FAIL_IF(c, spyre_comm_group_start());
				FAIL_IF(c, spyre_comm_send(c->comm, sb, count, dt, next, c->s));
				/* The inner end runs nothing: the outer one runs both. */
				FAIL_IF(c, spyre_comm_group_end());
			} else {
				FAIL_IF(c, spyre_comm_send(c->comm, sb, count, dt, next, c->s));
				FAIL_IF(c, spyre_comm_recv(c->comm, rb, count, dt, prev, c->s));
			}
			FAIL_IF(c, spyre_comm_group_end());
			FAIL_IF(c, spyre_stream_synchronize(c->s));
			c->res->bad += check_copy(c, rb, count, dt, seed, prev);
			c->res->bad += check_copy(c, sb, count, dt, seed, c->rank);
		}
		spyre_free(c->dev, sb);
		spyre_free(c->dev, rb);
	}
	return 0;
}

/*
 * All-to-all in one group: rank r sends buffer j (seed 300 + 8r + j) to
 * every rank j != r, sends in rising rank order, receives in falling.
 */
static int do_group_all_to_all(struct ctx *c)
{
	spyre_dptr_t sb[MAXR] = { 0 }, rb[MAXR] = { 0 };
	size_t z;
	int j;

	for (z = 0; z < 3; z += 2) {
		uint32_t dt = grp_sz[z].dt;
		size_t count = grp_sz[z].count;

		for (j = 0; j < c->n; j++) {
			if (j == c->rank)
				continue;
			FAIL_IF(c, spyre_malloc(c->dev, grp_bytes(z), &sb[j]));
			FAIL_IF(c, spyre_malloc(c->dev, grp_bytes(z), &rb[j]));
			FAIL_IF(c, fill(c, sb[j], count, dt, 300 + (unsigned int)(8 * c->rank + j), c->rank));
		}
		FAIL_IF(c, spyre_comm_group_start());
		for (j = 0; j < c->n; j++)
			if (j != c->rank)
				FAIL_IF(c, spyre_comm_send(c->comm, sb[j], count, dt, j, c->s));
		for (j = c->n - 1; j >= 0; j--)
			if (j != c->rank)
				FAIL_IF(c, spyre_comm_recv(c->comm, rb[j], count, dt, j, c->s));
		FAIL_IF(c, spyre_comm_group_end());
		FAIL_IF(c, spyre_stream_synchronize(c->s));
		for (j = 0; j < c->n; j++) {
			if (j == c->rank)
				continue;
			c->res->bad += check_copy(c, rb[j], count, dt, 300 + (unsigned int)(8 * j + c->rank), j);
			spyre_free(c->dev, sb[j]);
			spyre_free(c->dev, rb[j]);
		}
	}
	return 0;
}

/*
 * Ranks 0 and 1: several transfers each way in one group, matched in call
 * order per direction (the first and third of one size, told apart by
 * their values), rank 0 sending first, rank 1 receiving first. Other ranks
 * take no part.
 */
static int do_group_same_peer(struct ctx *c)
{
	static const int zs[3] = { 0, 2, 0 };	/* sizes of the three transfers each way */
	spyre_dptr_t sb[3], rb[3];
	int peer = !c->rank, k;

	if (c->rank > 1)
		return 0;
	for (k = 0; k < 3; k++) {
		FAIL_IF(c, spyre_malloc(c->dev, grp_bytes(zs[k]), &sb[k]));
		FAIL_IF(c, spyre_malloc(c->dev, grp_bytes(zs[k]), &rb[k]));
		FAIL_IF(c, fill(c, sb[k], grp_sz[zs[k]].count, grp_sz[zs[k]].dt,
				400 + (unsigned int)(10 * c->rank + k), c->rank));
	}
	FAIL_IF(c, spyre_comm_group_start());
	for (k = 0; k < 3; k++) {
		const size_t z = (size_t)zs[k];

		if (c->rank == 0) {
			FAIL_IF(c, spyre_comm_send(c->comm, sb[k], grp_sz[z].count, grp_sz[z].dt, peer, c->s));
			FAIL_IF(c, spyre_comm_recv(c->comm, rb[k], grp_sz[z].count, grp_sz[z].dt, peer, c->s));
		} else {
			FAIL_IF(c, spyre_comm_recv(c->comm, rb[k], grp_sz[z].count, grp_sz[z].dt, peer, c->s));
			FAIL_IF(c, spyre_comm_send(c->comm, sb[k], grp_sz[z].count, grp_sz[z].dt, peer, c->s));
		}
	}
	FAIL_IF(c, spyre_comm_group_end());
	FAIL_IF(c, spyre_stream_synchronize(c->s));
	for (k = 0; k < 3; k++)
		c->res->bad += check_copy(c, rb[k], grp_sz[zs[k]].count, grp_sz[zs[k]].dt,
					  400 + (unsigned int)(10 * peer + k), peer);
	/* A plain send/recv after the group: the pair's transfer numbers still agree. */
	FAIL_IF(c, fill(c, sb[1], grp_sz[2].count, grp_sz[2].dt, 410, c->rank));
	if (c->rank == 0)
		FAIL_IF(c, spyre_comm_send(c->comm, sb[1], grp_sz[2].count, grp_sz[2].dt, 1, c->s));
	else
		FAIL_IF(c, spyre_comm_recv(c->comm, rb[1], grp_sz[2].count, grp_sz[2].dt, 0, c->s));
	FAIL_IF(c, spyre_stream_synchronize(c->s));
	if (c->rank == 1)
		c->res->bad += check_copy(c, rb[1], grp_sz[2].count, grp_sz[2].dt, 410, 0);
	for (k = 0; k < 3; k++) {
		spyre_free(c->dev, sb[k]);
		spyre_free(c->dev, rb[k]);
	}
	return 0;
}

/* Count a call's status @got that is not @want, with the detail. */
static void expect_status(struct ctx *c, int got, int want, const char *what)
{
	if (got == want)
		return;
	fprintf(stderr, "# rank %d: %s returned %d, want %d: %s\n", c->rank, what, got, want,
		spyre_last_error());
	c->res->bad++;
}

/* Careless use of groups, each with its status; the communicator works after. */
static int do_group_errors(struct ctx *c)
{
	int n = c->n, next = (c->rank + 1) % n, prev = (c->rank + n - 1) % n;
	spyre_stream_t *s2 = NULL;
	spyre_comm_t *one = NULL;
	spyre_dptr_t x, y;

	FAIL_IF(c, spyre_malloc(c->dev, 4096, &x));
	FAIL_IF(c, spyre_malloc(c->dev, 4096, &y));
	FAIL_IF(c, spyre_stream_create(c->dev, SPYRE_STREAM_PRIORITY_NORMAL, &s2));
	FAIL_IF(c, spyre_comm_init(&one, &c->dev, 1));
	expect_status(c, spyre_comm_group_end(), -EINVAL, "group_end without start");
	if (!strstr(spyre_last_error(), "no spyre_comm_group_start() before it"))
		c->res->bad++;
	FAIL_IF(c, spyre_comm_group_start());
	expect_status(c, spyre_comm_all_reduce(c->comm, x, x, 1024, SPYRE_DT_FP32, SPYRE_RED_SUM, c->s),
		      -EOPNOTSUPP, "all-reduce in a group");
	if (!strstr(spyre_last_error(), "only spyre_comm_send() and spyre_comm_recv() are grouped"))
		c->res->bad++;
	expect_status(c, spyre_comm_barrier(c->comm), -EOPNOTSUPP, "barrier in a group");
	expect_status(c, spyre_all_reduce(one, &x, &x, 1024, SPYRE_DT_FP32, SPYRE_RED_SUM, &c->s),
		      -EOPNOTSUPP, "one process's all-reduce in a group");
	expect_status(c, spyre_comm_send(one, x, 1024, SPYRE_DT_FP32, 0, c->s), -EINVAL,
		      "one process's communicator to spyre_comm_send");
	expect_status(c, spyre_comm_send(c->comm, x, 1024, SPYRE_DT_FP32, c->rank, c->s), -EINVAL,
		      "send to itself in a group");
	/* Nothing queued: the end runs nothing. */
	expect_status(c, spyre_comm_group_end(), 0, "an empty group's end");
	expect_status(c, spyre_comm_group_end(), -EINVAL, "a second group_end");

	FAIL_IF(c, fill(c, x, 1024, SPYRE_DT_FP32, 500, c->rank));
	FAIL_IF(c, spyre_comm_group_start());
	FAIL_IF(c, spyre_comm_send(c->comm, x, 1024, SPYRE_DT_FP32, next, c->s));
	expect_status(c, spyre_comm_recv(c->comm, y, 1024, SPYRE_DT_FP32, prev, s2), -EOPNOTSUPP,
		      "a second stream in a group");
	if (!strstr(spyre_last_error(), "a group holds the calls of one stream"))
		c->res->bad++;
	FAIL_IF(c, spyre_comm_recv(c->comm, y, 1024, SPYRE_DT_FP32, prev, c->s));
	FAIL_IF(c, spyre_comm_group_end());
	FAIL_IF(c, spyre_stream_synchronize(c->s));
	c->res->bad += check_copy(c, y, 1024, SPYRE_DT_FP32, 500, prev);
	/* Still whole: a collective and a barrier after. */
	FAIL_IF(c, fill(c, x, 1024, SPYRE_DT_FP32, 501, c->rank));
	FAIL_IF(c, spyre_comm_all_reduce(c->comm, x, x, 1024, SPYRE_DT_FP32, SPYRE_RED_SUM, c->s));
	FAIL_IF(c, spyre_comm_barrier(c->comm));
	FAIL_IF(c, spyre_stream_synchronize(c->s));
	c->res->bad += check_sum(c, x, 0, 1024, SPYRE_DT_FP32, 501);
	spyre_comm_destroy(one);
	spyre_stream_destroy(s2);
	spyre_free(c->dev, x);
	spyre_free(c->dev, y);
	return 0;
}

/*
 * An unmatched call: rank 0 sends to and receives from rank 1 in a group,
 * rank 1 only receives. Rank 0's group ends at the timeout naming its
 * receive; rank 1's group returns, its next call sees rank 0's failure.
 */
static int do_group_unmatched(struct ctx *c)
{
	spyre_dptr_t x, y;
	double t0;

	/*
	 * The others' barrier starts 4 s late, after rank 0's 3 s timeout (an
	 * ABORT that came before it fails it at once): rank 0's failure, not
	 * their own 3 s, ends it, with seconds to spare for the ranks' skew.
	 */
	if (c->rank > 1) {
		usleep(4000000);
		c->res->stage = spyre_comm_barrier(c->comm);
		return 0;
	}
	FAIL_IF(c, spyre_malloc(c->dev, 4096, &x));
	FAIL_IF(c, spyre_malloc(c->dev, 4096, &y));
	FAIL_IF(c, spyre_comm_group_start());
	if (c->rank == 0)
		FAIL_IF(c, spyre_comm_send(c->comm, x, 1024, SPYRE_DT_FP32, 1, c->s));
	FAIL_IF(c, spyre_comm_recv(c->comm, y, 1024, SPYRE_DT_FP32, !c->rank, c->s));
	t0 = now_s();
	c->res->ret = spyre_comm_group_end();
	c->res->secs = now_s() - t0;
	snprintf(c->res->err, sizeof(c->res->err), "%s", spyre_last_error());
	/* Rank 0 broken, rank 1 told (4 s: as the others). */
	if (c->rank)
		usleep(4000000);
	c->res->stage = spyre_comm_barrier(c->comm);
	spyre_free(c->dev, x);
	spyre_free(c->dev, y);
	return 0;
}

/* ---- the tests ---- */

FIXTURE(rank) {
	int n;
	spyre_comm_id_t id;
	struct result *res;
	struct launch l;
};

FIXTURE_SETUP(rank)
{
	int r;

	self->n = spyre_device_count();
	if (self->n > MAXR)
		self->n = MAXR;
	if (self->n < 2)
		SKIP(return, "two spyre devices needed");
	self->res = mmap(NULL, sizeof(*self->res) * MAXR, PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, self->res);
	ASSERT_EQ(0, spyre_comm_get_unique_id(&self->id));
	memset(&self->l, 0, sizeof(self->l));
	self->l.n = self->n;
	self->l.init = 1;
	self->l.kill_rank = -1;
	for (r = 0; r < MAXR; r++)
		self->l.card[r] = r;
	/* Without a peer-to-peer path there is nothing to test (tools/vm/run --flat). */
	self->l.fn[0] = NULL;
	if (run_ranks(&self->l, self->res, &self->id) != self->n &&
	    self->res[0].ret == -EXDEV)
		SKIP(return, "no peer-to-peer path between the cards: %s", self->res[0].err);
	ASSERT_EQ(0, spyre_comm_get_unique_id(&self->id));
	TH_LOG("%d ranks, one card each", self->n);
}

FIXTURE_TEARDOWN(rank)
{
	if (self->res && self->res != MAP_FAILED)
		munmap(self->res, sizeof(*self->res) * MAXR);
}

static void all_fn(struct launch *l, rank_fn fn)
{
	int r;

	for (r = 0; r < MAXR; r++)
		l->fn[r] = fn;
}

TEST_F(rank, all_reduce_dtypes_and_odd_counts)
{
	int r;

	all_fn(&self->l, do_all_reduce);
	ASSERT_EQ(self->n, run_ranks(&self->l, self->res, &self->id));
	for (r = 0; r < self->n; r++) {
		EXPECT_EQ(0, self->res[r].bad) TH_LOG("rank %d", r);
	}
}

TEST_F(rank, reduce_scatter_and_all_gather)
{
	int r;

	all_fn(&self->l, do_rs_ag);
	ASSERT_EQ(self->n, run_ranks(&self->l, self->res, &self->id));
	for (r = 0; r < self->n; r++) {
		EXPECT_EQ(0, self->res[r].bad) TH_LOG("rank %d", r);
	}
}

TEST_F(rank, broadcast_and_send_recv)
{
	int r;

	all_fn(&self->l, do_bcast_p2p);
	ASSERT_EQ(self->n, run_ranks(&self->l, self->res, &self->id));
	for (r = 0; r < self->n; r++) {
		EXPECT_EQ(0, self->res[r].bad) TH_LOG("rank %d", r);
	}
}

TEST_F(rank, call_returns_while_its_card_is_held)
{
	int r;

	all_fn(&self->l, do_held);
	ASSERT_EQ(self->n, run_ranks(&self->l, self->res, &self->id));
	for (r = 0; r < self->n; r++) {
		EXPECT_EQ(0, self->res[r].bad) TH_LOG("rank %d", r);
	}
}

TEST_F(rank, two_communicators_at_once)
{
	spyre_comm_id_t ids[2] = { self->id };
	int r;

	ASSERT_EQ(0, spyre_comm_get_unique_id(&ids[1]));
	self->l.arg = ids;
	all_fn(&self->l, do_two_comms);
	ASSERT_EQ(self->n, run_ranks(&self->l, self->res, &self->id));
	for (r = 0; r < self->n; r++) {
		EXPECT_EQ(0, self->res[r].bad) TH_LOG("rank %d", r);
	}
}

/* Two processes of the ranks @ra of @na and @rb of @nb, on cards @ca and @cb. */
static void run_pair(const spyre_comm_id_t *id, int na, int ra, int ca, int nb, int rb, int cb,
		     const char *timeout_ms, struct result *res)
{
	memset(res, 0, sizeof(*res) * 2);
	fflush(NULL);
	setenv("SPYRE_COMM_TIMEOUT_MS", timeout_ms, 1);
	if (!fork())
		rank_main(na, ra, ca, id, 1, NULL, NULL, &res[0]);
	if (!fork())
		rank_main(nb, rb, cb, id, 1, NULL, NULL, &res[1]);
	wait(NULL);
	wait(NULL);
	unsetenv("SPYRE_COMM_TIMEOUT_MS");
}

TEST_F(rank, mismatched_nranks_taken_rank_same_card)
{
	struct result *res = self->res;
	spyre_comm_id_t bad;
	spyre_comm_t *comm = (spyre_comm_t *)&bad, *one;
	spyre_device_t *d;
	spyre_stream_t *s;
	spyre_graph_t *g = NULL;

	/* Rank 0 says 2 ranks, rank 1 says 3: both refuse, naming the counts. */
	run_pair(&self->id, 2, 0, 0, 3, 1, 1, "8000", res);
	EXPECT_EQ(-EINVAL, res[0].ret);
	EXPECT_NE(NULL, strstr(res[0].err, "joined with nranks 3, this rank 0 with nranks 2"))
		TH_LOG("%s", res[0].err);
	EXPECT_EQ(-EINVAL, res[1].ret);
	EXPECT_NE(NULL, strstr(res[1].err, "refused this rank")) TH_LOG("%s", res[1].err);

	/* Two processes as rank 0, none as 1: one finds it taken, the other times out. */
	ASSERT_EQ(0, spyre_comm_get_unique_id(&self->id));
	run_pair(&self->id, 2, 0, 0, 2, 0, 1, "3000", res);
	EXPECT_TRUE((res[0].ret == -EADDRINUSE && res[1].ret == -ETIMEDOUT) ||
		    (res[1].ret == -EADDRINUSE && res[0].ret == -ETIMEDOUT))
		TH_LOG("%d %s / %d %s", res[0].ret, res[0].err, res[1].ret, res[1].err);
	EXPECT_TRUE(strstr(res[0].err, "rank 0 of this id is already taken") != NULL ||
		    strstr(res[1].err, "rank 0 of this id is already taken") != NULL);
	EXPECT_TRUE(strstr(res[0].err, "rank 1 did not join within 3000 ms") != NULL ||
		    strstr(res[1].err, "rank 1 did not join within 3000 ms") != NULL);

	/* Two ranks on card 0. */
	ASSERT_EQ(0, spyre_comm_get_unique_id(&self->id));
	run_pair(&self->id, 2, 0, 0, 2, 1, 0, "8000", res);
	EXPECT_EQ(-EINVAL, res[0].ret);
	EXPECT_NE(NULL, strstr(res[0].err, "ranks 0 and 1 use the same card")) TH_LOG("%s", res[0].err);
	EXPECT_EQ(-EINVAL, res[1].ret);
	EXPECT_NE(NULL, strstr(res[1].err, "ranks 0 and 1 use the same card")) TH_LOG("%s", res[1].err);

	/* Arguments, and an id that is not one. */
	memset(&bad, 0x5a, sizeof(bad));
	EXPECT_EQ(-EINVAL, spyre_comm_init_rank(&comm, 2, &bad, 0, NULL));
	EXPECT_EQ(NULL, comm);
	EXPECT_EQ(-EINVAL, spyre_comm_init_rank(&comm, 2, &self->id, 2, (spyre_device_t *)&bad));
	EXPECT_NE(NULL, strstr(spyre_last_error(), "rank 2 of 2"));
	EXPECT_EQ(-EINVAL, spyre_comm_init_rank(&comm, 65, &self->id, 0, (spyre_device_t *)&bad));
	EXPECT_EQ(-EINVAL, spyre_comm_get_unique_id(NULL));
	ASSERT_EQ(0, spyre_device_open(0, &d));
	EXPECT_EQ(-EINVAL, spyre_comm_init_rank(&comm, 2, &bad, 0, d));
	EXPECT_NE(NULL, strstr(spyre_last_error(), "not one of spyre_comm_get_unique_id()"));
	/* A communicator of one process takes the array calls only, and the other way round. */
	ASSERT_EQ(0, spyre_comm_init(&one, &d, 1));
	EXPECT_EQ(0, spyre_comm_rank(one));
	EXPECT_EQ(-EINVAL, spyre_comm_all_reduce(one, 128, 128, 1, SPYRE_DT_FP32, SPYRE_RED_SUM,
						 (spyre_stream_t *)&bad));
	EXPECT_NE(NULL, strstr(spyre_last_error(), "a communicator of the cards of one process"));
	spyre_comm_destroy(one);
	/* One rank of one: a communicator of itself. */
	ASSERT_EQ(0, spyre_comm_get_unique_id(&self->id));
	ASSERT_EQ(0, spyre_comm_init_rank(&one, 1, &self->id, 0, d)) TH_LOG("%s", spyre_last_error());
	EXPECT_EQ(1, spyre_comm_count(one));
	EXPECT_EQ(0, spyre_comm_rank(one));
	EXPECT_EQ(-EINVAL, spyre_all_reduce(one, NULL, NULL, 1, SPYRE_DT_FP32, SPYRE_RED_SUM,
					    (spyre_stream_t *const *)&bad));
	EXPECT_NE(NULL, strstr(spyre_last_error(), "one card per process"));
	EXPECT_EQ(0, spyre_comm_barrier(one));
	ASSERT_EQ(0, spyre_stream_create(d, SPYRE_STREAM_PRIORITY_NORMAL, &s));
	EXPECT_EQ(-EINVAL, spyre_comm_send(one, 128, 1, SPYRE_DT_FP32, 0, s));
	EXPECT_NE(NULL, strstr(spyre_last_error(), "the peer is this rank"));
	/* A capturing stream: refused before anything is enqueued (its steps wait on the host). */
	ASSERT_EQ(0, spyre_stream_begin_capture(s));
	EXPECT_EQ(-EBUSY, spyre_comm_send(one, 128, 1, SPYRE_DT_FP32, 0, s));
	EXPECT_NE(NULL, strstr(spyre_last_error(), "cannot be captured")) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(0, spyre_stream_end_capture(s, &g));
	EXPECT_EQ(0, spyre_graph_node_count(g));	/* nothing was captured */
	spyre_graph_destroy(g);
	spyre_stream_destroy(s);
	spyre_comm_destroy(one);
	spyre_device_close(d);
}

/* The dma-buf sharing under the communicators, in one process: card 1 copies out of card 0's export. */
TEST_F(rank, ipc_export_import)
{
	struct spyre_device_props props = { .size = sizeof(props) };
	const size_t big = 2u << 20;
	spyre_device_t *d0, *d1;
	spyre_stream_t *s1;
	spyre_dptr_t small, b0, b1, imp, imp2, own;
	uint8_t *want = malloc(big), *got = malloc(big);
	size_t size = 0, i;
	int fd = -1, fd1 = -1;

	ASSERT_EQ(0, spyre_device_open(0, &d0));
	ASSERT_EQ(0, spyre_device_open(1, &d1));
	ASSERT_EQ(0, spyre_stream_create(d1, SPYRE_STREAM_PRIORITY_NORMAL, &s1));
	ASSERT_EQ(0, spyre_malloc(d0, 4096, &small));
	EXPECT_EQ(-EINVAL, spyre_ipc_export(d0, small, &fd));
	EXPECT_NE(NULL, strstr(spyre_last_error(), "only allocations of more than 1 MiB"));
	EXPECT_EQ(-1, fd);
	EXPECT_EQ(-EINVAL, spyre_ipc_export(d0, small + 128, &fd));
	EXPECT_EQ(-EINVAL, spyre_ipc_import(d1, -1, &imp, NULL));
	EXPECT_EQ(-EINVAL, spyre_ipc_close(d1, 0x1000));
	EXPECT_NE(NULL, strstr(spyre_last_error(), "is not an import of"));

	ASSERT_EQ(0, spyre_malloc(d0, big, &b0));
	ASSERT_EQ(0, spyre_malloc(d1, big, &b1));
	for (i = 0; i < big; i++)
		want[i] = (uint8_t)(i * 31 + (i >> 11));
	ASSERT_EQ(0, spyre_memcpy(d0, b0, (uintptr_t)want, big, SPYRE_MEMCPY_H2D));
	ASSERT_EQ(0, spyre_ipc_export(d0, b0, &fd)) TH_LOG("%s", spyre_last_error());
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, spyre_ipc_import(d1, fd, &imp, &size)) TH_LOG("%s", spyre_last_error());
	/* Imported twice: the same memory at the same address, closed once per import. */
	ASSERT_EQ(0, spyre_ipc_import(d1, fd, &imp2, NULL)) TH_LOG("%s", spyre_last_error());
	EXPECT_EQ(imp, imp2);
	EXPECT_EQ(0, spyre_ipc_close(d1, imp2));
	/* Back on its own card: the allocation itself, which the close leaves alone. */
	ASSERT_EQ(0, spyre_ipc_import(d0, fd, &own, NULL)) TH_LOG("%s", spyre_last_error());
	EXPECT_EQ(b0, own);
	EXPECT_EQ(0, spyre_ipc_close(d0, own));
	ASSERT_EQ(0, spyre_memcpy(d0, (uintptr_t)got, b0, 4096, SPYRE_MEMCPY_D2H));
	EXPECT_EQ(0, memcmp(got, want, 4096));
	close(fd);
	EXPECT_EQ(big, size);
	/* The memory outlives the exporter's free: the import holds it. */
	ASSERT_EQ(0, spyre_free(d0, b0));
	ASSERT_EQ(0, spyre_memcpy_async(s1, b1 + 128, imp + 256, big - 256, SPYRE_MEMCPY_D2D));
	ASSERT_EQ(0, spyre_stream_synchronize(s1));
	ASSERT_EQ(0, spyre_memcpy(d1, (uintptr_t)got, b1, big, SPYRE_MEMCPY_D2H));
	EXPECT_EQ(0, memcmp(got + 128, want + 256, big - 256));
	EXPECT_EQ(0, spyre_ipc_close(d1, imp));
	EXPECT_EQ(-EINVAL, spyre_ipc_close(d1, imp));
	/* A card that shows no memory to peers cannot export (card 1 of make check's VM). */
	ASSERT_EQ(0, spyre_device_get_props(d1, &props));
	if (!(props.features & SPYRE_FEAT_PEER_BAR)) {
		EXPECT_EQ(-EOPNOTSUPP, spyre_ipc_export(d1, b1, &fd1));
		EXPECT_NE(NULL, strstr(spyre_last_error(), "no peer BAR"));
	}
	spyre_free(d0, small);
	spyre_free(d1, b1);
	spyre_stream_destroy(s1);
	spyre_device_close(d1);
	spyre_device_close(d0);
	free(want);
	free(got);
}

TEST_F(rank, mismatched_calls)
{
	int r;

	self->l.timeout_ms = "20000";
	all_fn(&self->l, do_mismatch);
	ASSERT_EQ(self->n, run_ranks(&self->l, self->res, &self->id));
	for (r = 0; r < self->n; r++) {
		/* A rank sees the mismatch itself, or the ABORT of the rank that saw it. */
		EXPECT_TRUE(self->res[r].ret == -EINVAL || self->res[r].ret == -ECONNABORTED)
			TH_LOG("rank %d: %d %s", r, self->res[r].ret, self->res[r].err);
		EXPECT_TRUE(strstr(self->res[r].err, "called broadcast where this rank") != NULL ||
			    strstr(self->res[r].err, "called all-reduce where this rank") != NULL)
			TH_LOG("rank %d: %s", r, self->res[r].err);
		EXPECT_EQ(self->res[r].ret, self->res[r].stage) TH_LOG("rank %d: the barrier after", r);
	}
	ASSERT_EQ(0, spyre_comm_get_unique_id(&self->id));
	all_fn(&self->l, do_count_mismatch);
	ASSERT_EQ(self->n, run_ranks(&self->l, self->res, &self->id));
	for (r = 0; r < self->n; r++) {
		EXPECT_NE(NULL, strstr(self->res[r].err, "counts differ")) TH_LOG("rank %d: %s", r, self->res[r].err);
	}
}

TEST_F(rank, rank_missing_or_killed_in_set_up)
{
	struct launch l = self->l;
	int r;

	/* The last rank never starts: the others time out, naming it. */
	l.n = self->n;
	l.timeout_ms = "3000";
	l.card[self->n - 1] = -1;
	l.init = 1;
	{
		/* Run n - 1 ranks of an n-rank communicator. */
		l.n = self->n - 1;
		fflush(NULL);
		setenv("SPYRE_COMM_TIMEOUT_MS", "3000", 1);
		memset(self->res, 0, sizeof(*self->res) * MAXR);
		for (r = 0; r < self->n - 1; r++)
			if (!fork())
				rank_main(self->n, r, r, &self->id, 1, NULL, NULL, &self->res[r]);
		for (r = 0; r < self->n - 1; r++)
			wait(NULL);
		unsetenv("SPYRE_COMM_TIMEOUT_MS");
	}
	for (r = 0; r < self->n - 1; r++) {
		EXPECT_TRUE(self->res[r].ret == -ETIMEDOUT || self->res[r].ret == -ECONNABORTED)
			TH_LOG("rank %d: %d %s", r, self->res[r].ret, self->res[r].err);
		EXPECT_LT(self->res[r].secs, 3.0 + 10.0) TH_LOG("rank %d", r);
	}
	EXPECT_NE(NULL, strstr(self->res[self->n - 2].err, "did not join within 3000 ms"))
		TH_LOG("%s", self->res[self->n - 2].err);

	/*
	 * The last rank SIGKILLed 0, 5, 20 ms into its set-up: the others end by
	 * the timeout, sooner when they see it go. A kill that lands after the
	 * set-up (later rounds on a fast machine) lets them succeed: logged.
	 */
	for (r = 0; r < 3; r++) {
		int k, hit = 0;

		ASSERT_EQ(0, spyre_comm_get_unique_id(&self->id));
		l = self->l;
		l.timeout_ms = "5000";
		l.kill_rank = self->n - 1;
		l.kill_after_stage = 1;
		l.kill_ms = r == 0 ? 0 : r == 1 ? 5 : 20;
		all_fn(&l, NULL);
		run_ranks(&l, self->res, &self->id);
		for (k = 0; k < self->n - 1; k++) {
			hit += self->res[k].ret != 0;
			if (r == 0 || self->res[k].ret)
				EXPECT_TRUE(self->res[k].ret == -ETIMEDOUT || self->res[k].ret == -ECONNRESET ||
					    self->res[k].ret == -ECONNABORTED)
					TH_LOG("rank %d: %d %s", k, self->res[k].ret, self->res[k].err);
			EXPECT_LT(self->res[k].secs, 5.0 + 10.0) TH_LOG("rank %d", k);
			TH_LOG("kill %d ms into the set-up: rank %d: %d after %.2f s: %s", l.kill_ms, k,
			       self->res[k].ret, self->res[k].secs, self->res[k].ret ? self->res[k].err : "joined");
		}
		if (!hit)
			TH_LOG("kill %d ms in: it landed after the set-up", l.kill_ms);
	}
}

/*
 * Rank 0's socket name held by a process that listens with a full backlog
 * and never accepts (a squatter, or a flood from another process): the
 * connecting rank's set-up still ends at SPYRE_COMM_TIMEOUT_MS, saying so,
 * instead of blocking in connect(). The name is coll_boot.c's
 * "spyre-comm-<the id's public bytes 8..15 in hex>-<rank>".
 */
TEST_F(rank, squatter_that_never_accepts)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	const unsigned char *idb = (const unsigned char *)self->id.internal;
	int lfd, fill[8], nfill = 0, full = 0, i, n;
	pid_t pid;
	socklen_t len;

	n = snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, "spyre-comm-");
	for (i = 8; i < 16; i++)
		n += snprintf(a.sun_path + 1 + n, sizeof(a.sun_path) - 1 - (size_t)n, "%02x", idb[i]);
	n += snprintf(a.sun_path + 1 + n, sizeof(a.sun_path) - 1 - (size_t)n, "-0");
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
	lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	ASSERT_LE(0, lfd);
	ASSERT_EQ(0, bind(lfd, (struct sockaddr *)&a, len));
	ASSERT_EQ(0, listen(lfd, 0));
	while (nfill < 8 && !full) {
		fill[nfill] = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		ASSERT_LE(0, fill[nfill]);
		if (connect(fill[nfill], (struct sockaddr *)&a, len)) {
			ASSERT_EQ(EAGAIN, errno);
			full = 1;
		}
		nfill++;
	}
	ASSERT_EQ(1, full) TH_LOG("the backlog never filled");

	setenv("SPYRE_COMM_TIMEOUT_MS", "2000", 1);
	memset(self->res, 0, sizeof(*self->res) * MAXR);
	fflush(NULL);
	pid = fork();
	if (!pid)
		rank_main(2, 1, 1, &self->id, 1, NULL, NULL, &self->res[1]);
	waitpid(pid, NULL, 0);
	unsetenv("SPYRE_COMM_TIMEOUT_MS");
	for (i = 0; i < nfill; i++)
		close(fill[i]);
	close(lfd);
	EXPECT_EQ(-ETIMEDOUT, self->res[1].ret) TH_LOG("%s", self->res[1].err);
	EXPECT_NE(NULL, strstr(self->res[1].err, "holds its socket but does not accept"))
		TH_LOG("%s", self->res[1].err);
	EXPECT_LT(self->res[1].secs, 2.0 + 10.0);
}

TEST_F(rank, rank_killed_mid_collective_or_exiting)
{
	struct launch l = self->l;
	int r;

	/* A long timeout: the death is seen by its closed sockets, not by the clock. */
	l.timeout_ms = "120000";
	all_fn(&l, do_loop);
	l.kill_rank = self->n - 1;
	l.kill_after_stage = 4;	/* the set-up, then three all-reduces */
	EXPECT_EQ(0, run_ranks(&l, self->res, &self->id));
	for (r = 0; r < self->n - 1; r++) {
		EXPECT_TRUE(self->res[r].ret == -ECONNRESET || self->res[r].ret == -ECONNABORTED)
			TH_LOG("rank %d: %d %s", r, self->res[r].ret, self->res[r].err);
		EXPECT_LT(self->res[r].secs, 60.0) TH_LOG("rank %d", r);
		EXPECT_GE(self->res[r].stage, 2);
		EXPECT_TRUE(strstr(self->res[r].err, "closed its connection: it exited or was killed") != NULL ||
			    strstr(self->res[r].err, "failed: ") != NULL)
			TH_LOG("rank %d: %s", r, self->res[r].err);
		TH_LOG("rank %d: %d after %d all-reduces, %.2f s in the failing call: %s", r,
		       self->res[r].ret, self->res[r].stage - 1, self->res[r].secs, self->res[r].err);
	}

	/* The last rank exits after one all-reduce; the others' second one fails. */
	ASSERT_EQ(0, spyre_comm_get_unique_id(&self->id));
	l = self->l;
	l.timeout_ms = "120000";
	all_fn(&l, do_two_then_fail);
	l.fn[self->n - 1] = do_one_then_exit;
	EXPECT_EQ(1, run_ranks(&l, self->res, &self->id));
	for (r = 0; r < self->n - 1; r++) {
		EXPECT_TRUE(self->res[r].ret == -ECONNRESET || self->res[r].ret == -ECONNABORTED)
			TH_LOG("rank %d: %d %s", r, self->res[r].ret, self->res[r].err);
		EXPECT_LT(self->res[r].secs, 60.0);
	}
}

static void expect_all_good(struct __test_metadata *_metadata, FIXTURE_DATA(rank) *self, rank_fn fn)
{
	int r;

	all_fn(&self->l, fn);
	ASSERT_EQ(self->n, run_ranks(&self->l, self->res, &self->id));
	for (r = 0; r < self->n; r++) {
		EXPECT_EQ(0, self->res[r].bad) TH_LOG("rank %d", r);
	}
}

TEST_F(rank, group_ring_exchange)
{
	/* Outside a group this deadlocks until the timeout: every rank sends first. */
	self->l.timeout_ms = "60000";
	expect_all_good(_metadata, self, do_group_ring);
}

TEST_F(rank, group_all_to_all)
{
	self->l.timeout_ms = "60000";
	expect_all_good(_metadata, self, do_group_all_to_all);
}

TEST_F(rank, barrier_after_uneven_send_recv)
{
	/* The barrier's old hang ends in this timeout, not the default's. */
	self->l.timeout_ms = "20000";
	expect_all_good(_metadata, self, do_uneven_barrier);
}

TEST_F(rank, group_same_peer_in_call_order)
{
	self->l.timeout_ms = "60000";
	expect_all_good(_metadata, self, do_group_same_peer);
}

TEST_F(rank, group_errors)
{
	self->l.timeout_ms = "60000";
	expect_all_good(_metadata, self, do_group_errors);
}

TEST_F(rank, group_unmatched_call)
{
	int r;

	self->l.timeout_ms = "3000";
	all_fn(&self->l, do_group_unmatched);
	ASSERT_EQ(self->n, run_ranks(&self->l, self->res, &self->id));
	EXPECT_EQ(-ETIMEDOUT, self->res[0].ret) TH_LOG("%s", self->res[0].err);
	EXPECT_NE(NULL, strstr(self->res[0].err, "spyre_comm_group_end (rank 0, call "));
	EXPECT_NE(NULL, strstr(self->res[0].err,
			       "op 2 of 2 (spyre_comm_recv of 4096 bytes from rank 1, piece 1 of 1): rank 1 (pid "))
		TH_LOG("%s", self->res[0].err);
	EXPECT_NE(NULL, strstr(self->res[0].err, "sent no READY (transfer 0) within 3000 ms"));
	EXPECT_GE(self->res[0].secs, 2.9);
	EXPECT_LT(self->res[0].secs, 30.0);
	EXPECT_EQ(-ETIMEDOUT, self->res[0].stage) TH_LOG("rank 0's barrier after");
	EXPECT_EQ(0, self->res[1].ret) TH_LOG("%s", self->res[1].err);
	for (r = 1; r < self->n; r++) {
		EXPECT_EQ(-ECONNABORTED, self->res[r].stage) TH_LOG("rank %d's barrier after", r);
	}
	TH_LOG("rank 0: %.2f s: %s", self->res[0].secs, self->res[0].err);
}

TEST_HARNESS_MAIN
