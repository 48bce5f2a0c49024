// SPDX-License-Identifier: MIT
/*
 * Description: libspyre's collectives on every card of the VM (2 in
 * `make check`; 4 with tools/vm/run --devices 4), one communicator in one
 * process, each rank with a stream of its card: all-reduce (sum) in fp32,
 * fp16, bf16 and dl16 over odd counts (1, 31, 1000, 4097, 65536 + 13
 * elements; a count that leaves a rank an empty chunk), in place and not;
 * reduce-scatter, all-gather, broadcast from every root and send/recv
 * between every pair; each checked against a CPU reference computed from
 * the same rounded inputs: the sum of n values in rank order, each partial
 * sum rounded to the dtype as the card's ADD rounds its output (fp32
 * inside) - exact for 2 ranks; for more, the ring adds in another order,
 * so the tolerance is n - 1 roundings of the largest partial sum.
 * Events recorded after a collective order the host. Jobs: an all-reduce,
 * in place and not, and a broadcast are one job per card (the stream's
 * SUBMIT count, spyre_stream_get_stats()), the steps, records and waits
 * that order them packets of it. A host wait inside a call (the kernel
 * cache evicting a kernel: 24 all-reduces of distinct sizes, 16 kernels
 * cached per card) submits every card's job first: no stream hangs. Errors: bad dtype or
 * op, chunks that are not whole sticks, a root outside the ring, NULL
 * streams, the same device twice in a communicator (-EINVAL with detail).
 * Ordering on the cards: a cross-device event (SPYRE_EVENT_CROSS_DEVICE)
 * recorded behind a long queue of copies on one card holds back the other
 * card's stream (busy, no host wait) whose peer copy then reads the newest
 * data, twice with one event; an all-reduce enqueued behind such a queue
 * returns with the streams still busy and its results exact; a wait for a
 * value that never comes (the recording card's job made to hang, debugfs
 * "inject", root) fails the waiting stream with -EIO "hung", and new
 * streams on both cards then order themselves with the same event.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kselftest_harness.h"
#include "spyre.h"
#include "spyre_kernels.h"
#include "spyre_isa.h"
#include "spyre_dtype.h"
#include "coll-ref.h"
#include "spyre_inject.h"

#define MAXR 8



FIXTURE(coll) {
	int n;
	spyre_device_t *dev[MAXR];
	spyre_stream_t *s[MAXR];
	spyre_comm_t *comm;
};

FIXTURE_SETUP(coll)
{
	int r, ret;

	self->n = spyre_device_count();
	if (self->n > MAXR)
		self->n = MAXR;
	if (self->n < 2)
		SKIP(return, "two spyre devices needed");
	for (r = 0; r < self->n; r++) {
		ASSERT_EQ(0, spyre_device_open(r, &self->dev[r])) TH_LOG("%s", spyre_last_error());
		ASSERT_EQ(0, spyre_stream_create(self->dev[r], SPYRE_STREAM_PRIORITY_NORMAL, &self->s[r]));
	}
	ret = spyre_comm_init(&self->comm, self->dev, self->n);
	if (ret == -EXDEV)
		SKIP(return, "no peer-to-peer path between the cards (tools/vm/run --flat?)");
	ASSERT_EQ(0, ret) TH_LOG("%s", spyre_last_error());
	EXPECT_EQ(self->n, spyre_comm_count(self->comm));
	TH_LOG("communicator of %d cards", self->n);
}

FIXTURE_TEARDOWN(coll)
{
	int r;

	spyre_comm_destroy(self->comm);
	for (r = 0; r < self->n; r++) {
		if (self->s[r])
			spyre_stream_destroy(self->s[r]);
		spyre_device_close(self->dev[r]);
	}
}

/* Fill rank buffers with value(r, i) for @count elements (the padding zero). */
static int fill(FIXTURE_DATA(coll) *self, const spyre_dptr_t *buf, size_t count, uint32_t dt,
		unsigned int seed)
{
	size_t bytes = round_sticks(count * SPYRE_DT_SIZE(dt)), i;
	uint8_t *h = calloc(1, bytes);
	int r, ret = 0;

	for (r = 0; !ret && r < self->n; r++) {
		memset(h, 0, bytes);
		for (i = 0; i < count; i++)
			spyre_store_f32(h, dt, i, value(r, i, dt, seed));
		ret = spyre_memcpy(self->dev[r], buf[r], (uintptr_t)h, bytes, SPYRE_MEMCPY_H2D);
	}
	free(h);
	return ret;
}

/* Compare rank @r's @buf (@count elements) with the reduced reference; returns mismatches. */
static size_t check_sum(FIXTURE_DATA(coll) *self, int r, spyre_dptr_t buf, size_t first,
			size_t count, uint32_t dt, unsigned int seed)
{
	size_t bytes = round_sticks(count * SPYRE_DT_SIZE(dt)), i, bad = 0;
	uint8_t *h = malloc(bytes);

	if (spyre_memcpy(self->dev[r], (uintptr_t)h, buf, bytes, SPYRE_MEMCPY_D2H)) {
		free(h);
		return count;
	}
	for (i = 0; i < count; i++) {
		float want = ref_sum(self->n, first + i, dt, seed), got = spyre_load_f32(h, dt, i);
		float tol = ref_tol(self->n, want, dt);

		if (!(fabsf(got - want) <= tol)) {	/* a NaN fails too */
			if (bad < 3)
				fprintf(stderr, "# rank %d element %zu: %g, want %g\n", r, first + i,
					(double)got, (double)want);
			bad++;
		}
	}
	free(h);
	return bad;
}

static void sync_all(FIXTURE_DATA(coll) *self, struct __test_metadata *_metadata)
{
	int r;

	for (r = 0; r < self->n; r++)
		ASSERT_EQ(0, spyre_stream_synchronize(self->s[r])) TH_LOG("%s", spyre_last_error());
}

TEST_F(coll, all_reduce_dtypes_and_odd_counts)
{
	static const uint32_t dts[] = { SPYRE_DT_FP32, SPYRE_DT_FP16, SPYRE_DT_BF16, SPYRE_DT_DL16 };
	static const size_t counts[] = { 1, 31, 1000, 4097, 65536 + 13 };
	spyre_dptr_t send[MAXR], recv[MAXR];
	size_t d, c;
	int r;

	for (d = 0; d < sizeof(dts) / sizeof(dts[0]); d++) {
		for (c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
			size_t bytes = round_sticks(counts[c] * SPYRE_DT_SIZE(dts[d]));
			unsigned int seed = (unsigned int)(d * 10 + c);
			int inplace = c % 2;

			for (r = 0; r < self->n; r++) {
				ASSERT_EQ(0, spyre_malloc(self->dev[r], bytes, &send[r]));
				if (inplace)
					recv[r] = send[r];
				else
					ASSERT_EQ(0, spyre_malloc(self->dev[r], bytes, &recv[r]));
			}
			ASSERT_EQ(0, fill(self, send, counts[c], dts[d], seed));
			ASSERT_EQ(0, spyre_all_reduce(self->comm, send, recv, counts[c], dts[d],
						      SPYRE_RED_SUM, self->s))
				TH_LOG("%s", spyre_last_error());
			sync_all(self, _metadata);
			for (r = 0; r < self->n; r++)
				EXPECT_EQ(0, check_sum(self, r, recv[r], 0, counts[c], dts[d], seed))
					TH_LOG("%s, %zu elements, rank %d%s",
					       dts[d] == SPYRE_DT_FP32 ? "fp32" : dts[d] == SPYRE_DT_FP16 ?
					       "fp16" : dts[d] == SPYRE_DT_BF16 ? "bf16" : "dl16",
					       counts[c], r, inplace ? ", in place" : "");
			for (r = 0; r < self->n; r++) {
				spyre_free(self->dev[r], send[r]);
				if (!inplace)
					spyre_free(self->dev[r], recv[r]);
			}
		}
	}
}

/* The jobs @s submitted since *@jobs (updated): what spyre_stream_get_stats() counts, one per SUBMIT. */
static uint64_t jobs_since(spyre_stream_t *s, uint64_t *jobs)
{
	struct spyre_stream_stats st = { .size = sizeof(st) };
	uint64_t was = *jobs;

	if (spyre_stream_get_stats(s, &st))
		return UINT64_MAX;
	*jobs = st.jobs;
	return st.jobs - was;
}

TEST_F(coll, jobs_per_card)
{
	const uint32_t dt = SPYRE_DT_FP32;
	const size_t count = 65536 + 13, bytes = round_sticks(count * 4);
	spyre_dptr_t send[MAXR], recv[MAXR];
	uint64_t jobs[MAXR];
	int r, inplace;

	for (r = 0; r < self->n; r++) {
		ASSERT_EQ(0, spyre_malloc(self->dev[r], bytes, &send[r]));
		ASSERT_EQ(0, spyre_malloc(self->dev[r], bytes, &recv[r]));
		jobs[r] = 0;
		jobs_since(self->s[r], &jobs[r]);
	}
	/*
	 * A card's steps, records and waits are batched into one job up to each
	 * record another card waits for (its SIGNAL is submitted before any
	 * WAIT for it). On make check's two cards (card 1, without a peer BAR,
	 * runs the copies both ways): 4 and 7 jobs, in place 3 and 6, a
	 * broadcast 2 each; with a job per step, record and wait it was 6 to 8
	 * and more. Other card counts: at most one job per step of the ring.
	 */
	static const uint64_t want2[3][2] = { { 4, 7 }, { 3, 6 }, { 2, 2 } };
	for (inplace = 0; inplace < 2; inplace++) {
		const spyre_dptr_t *in = inplace ? recv : send;

		ASSERT_EQ(0, fill(self, in, count, dt, 5 + inplace));
		ASSERT_EQ(0, spyre_all_reduce(self->comm, in, recv, count, dt, SPYRE_RED_SUM, self->s))
			TH_LOG("%s", spyre_last_error());
		for (r = 0; r < self->n; r++) {
			uint64_t j = jobs_since(self->s[r], &jobs[r]);

			if (self->n == 2) {
				EXPECT_EQ(want2[inplace][r], j) TH_LOG("rank %d%s", r, inplace ? ", in place" : "");
			} else {
				EXPECT_GE((uint64_t)(4 * self->n), j) TH_LOG("rank %d", r);
			}
			EXPECT_EQ(0, check_sum(self, r, recv[r], 0, count, dt, 5 + inplace)) TH_LOG("rank %d", r);
		}
	}
	/* A broadcast: the copies on the cards that run them, and the root's waits for them. */
	ASSERT_EQ(0, spyre_broadcast(self->comm, send, count, dt, 0, self->s)) TH_LOG("%s", spyre_last_error());
	for (r = 0; r < self->n; r++) {
		uint64_t j = jobs_since(self->s[r], &jobs[r]);

		if (self->n == 2) {
			EXPECT_EQ(want2[2][r], j) TH_LOG("rank %d", r);
		} else {
			EXPECT_GE((uint64_t)self->n, j) TH_LOG("rank %d", r);
		}
	}
	for (r = 0; r < self->n; r++) {
		spyre_free(self->dev[r], send[r]);
		spyre_free(self->dev[r], recv[r]);
	}
}

TEST_F(coll, host_wait_inside_a_call)
{
	const uint32_t dt = SPYRE_DT_FP32;
	const size_t most = 24 * 32 * (size_t)self->n;
	spyre_dptr_t buf[MAXR];
	size_t count;
	int r;

	for (r = 0; r < self->n; r++)
		ASSERT_EQ(0, spyre_malloc(self->dev[r], most * 4, &buf[r]));
	/*
	 * Each size gives every rank chunks of another stick count, so another
	 * ADD kernel; past the cache's 16 per card each call evicts one, whose
	 * unload synchronizes the card's streams in the middle of the call, the
	 * other cards' jobs not submitted yet.
	 */
	for (count = 32 * (size_t)self->n; count <= most; count += 32 * (size_t)self->n) {
		ASSERT_EQ(0, fill(self, buf, count, dt, (unsigned int)count));
		ASSERT_EQ(0, spyre_all_reduce(self->comm, buf, buf, count, dt, SPYRE_RED_SUM, self->s))
			TH_LOG("%zu elements: %s", count, spyre_last_error());
		sync_all(self, _metadata);
		for (r = 0; r < self->n; r++)
			ASSERT_EQ(0, check_sum(self, r, buf[r], 0, count, dt, (unsigned int)count))
				TH_LOG("%zu elements, rank %d", count, r);
	}
	for (r = 0; r < self->n; r++)
		spyre_free(self->dev[r], buf[r]);
}

TEST_F(coll, reduce_scatter_and_all_gather)
{
	const uint32_t dt = SPYRE_DT_FP32;
	const size_t each = 32 * 37;	/* whole sticks, not a power of two */
	spyre_dptr_t send[MAXR], recv[MAXR], gath[MAXR];
	size_t bad;
	int r, k;
	uint8_t *h = malloc(each * 4 * MAXR);

	for (r = 0; r < self->n; r++) {
		ASSERT_EQ(0, spyre_malloc(self->dev[r], each * 4 * (size_t)self->n, &send[r]));
		ASSERT_EQ(0, spyre_malloc(self->dev[r], each * 4, &recv[r]));
		ASSERT_EQ(0, spyre_malloc(self->dev[r], each * 4 * (size_t)self->n, &gath[r]));
	}
	ASSERT_EQ(0, fill(self, send, each * (size_t)self->n, dt, 5));
	ASSERT_EQ(0, spyre_reduce_scatter(self->comm, send, recv, each, dt, SPYRE_RED_SUM, self->s))
		TH_LOG("%s", spyre_last_error());
	sync_all(self, _metadata);
	for (r = 0; r < self->n; r++)
		EXPECT_EQ(0, check_sum(self, r, recv[r], (size_t)r * each, each, dt, 5)) TH_LOG("rank %d", r);
	/* The input is unchanged. */
	ASSERT_EQ(0, spyre_memcpy(self->dev[1], (uintptr_t)h, send[1], each * 4, SPYRE_MEMCPY_D2H));
	for (bad = 0, k = 0; k < (int)each; k++)
		bad += spyre_load_f32(h, dt, (uint64_t)k) != value(1, (size_t)k, dt, 5);
	EXPECT_EQ(0, bad);

	/* All-gather of the reduced chunks gives every rank the whole sum. */
	ASSERT_EQ(0, spyre_all_gather(self->comm, recv, gath, each, dt, self->s))
		TH_LOG("%s", spyre_last_error());
	sync_all(self, _metadata);
	for (r = 0; r < self->n; r++)
		EXPECT_EQ(0, check_sum(self, r, gath[r], 0, each * (size_t)self->n, dt, 5)) TH_LOG("rank %d", r);
	for (r = 0; r < self->n; r++) {
		spyre_free(self->dev[r], send[r]);
		spyre_free(self->dev[r], recv[r]);
		spyre_free(self->dev[r], gath[r]);
	}
	free(h);
}

TEST_F(coll, broadcast_and_send_recv)
{
	const uint32_t dt = SPYRE_DT_FP16;
	const size_t count = 3001;
	size_t bytes = round_sticks(count * 2);
	spyre_dptr_t buf[MAXR];
	uint8_t *want = malloc(bytes), *got = malloc(bytes);
	spyre_event_t *ev;
	int root, r, dst;

	for (r = 0; r < self->n; r++)
		ASSERT_EQ(0, spyre_malloc(self->dev[r], bytes, &buf[r]));
	for (root = 0; root < self->n; root++) {
		ASSERT_EQ(0, fill(self, buf, count, dt, 40 + (unsigned int)root));
		ASSERT_EQ(0, spyre_memcpy(self->dev[root], (uintptr_t)want, buf[root], bytes,
					  SPYRE_MEMCPY_D2H));
		ASSERT_EQ(0, spyre_broadcast(self->comm, buf, count, dt, root, self->s))
			TH_LOG("%s", spyre_last_error());
		sync_all(self, _metadata);
		for (r = 0; r < self->n; r++) {
			ASSERT_EQ(0, spyre_memcpy(self->dev[r], (uintptr_t)got, buf[r], bytes,
						  SPYRE_MEMCPY_D2H));
			EXPECT_EQ(0, memcmp(want, got, count * 2)) TH_LOG("root %d, rank %d", root, r);
		}
	}
	/* Send/recv between every ordered pair; an event on the runner orders the host. */
	for (r = 0; r < self->n; r++) {
		for (dst = 0; dst < self->n; dst++) {
			if (dst == r)
				continue;
			ASSERT_EQ(0, fill(self, buf, count, dt, 60 + (unsigned int)(r * 8 + dst)));
			ASSERT_EQ(0, spyre_memcpy(self->dev[r], (uintptr_t)want, buf[r], bytes,
						  SPYRE_MEMCPY_D2H));
			ASSERT_EQ(0, spyre_send_recv(self->comm, r, buf[r], dst, buf[dst], count, dt, self->s))
				TH_LOG("%s", spyre_last_error());
			ASSERT_EQ(0, spyre_event_create(self->dev[dst], &ev));
			/* Either card may have run it: wait for both streams, by events. */
			ASSERT_EQ(0, spyre_event_record(ev, self->s[dst]));
			ASSERT_EQ(0, spyre_event_synchronize(ev));
			spyre_event_destroy(ev);
			ASSERT_EQ(0, spyre_stream_synchronize(self->s[r]));
			ASSERT_EQ(0, spyre_memcpy(self->dev[dst], (uintptr_t)got, buf[dst], bytes,
						  SPYRE_MEMCPY_D2H));
			EXPECT_EQ(0, memcmp(want, got, count * 2)) TH_LOG("%d -> %d", r, dst);
		}
	}
	for (r = 0; r < self->n; r++)
		spyre_free(self->dev[r], buf[r]);
	free(want);
	free(got);
}

TEST_F(coll, errors)
{
	spyre_dptr_t b[MAXR];
	spyre_stream_t *nul[MAXR] = { 0 };
	spyre_device_t *twice[2] = { self->dev[0], self->dev[0] };
	spyre_comm_t *c = NULL;
	int r;

	for (r = 0; r < self->n; r++)
		ASSERT_EQ(0, spyre_malloc(self->dev[r], 4096, &b[r]));
	EXPECT_EQ(-EINVAL, spyre_all_reduce(self->comm, b, b, 32, SPYRE_DT_INT8, SPYRE_RED_SUM, self->s));
	EXPECT_NE(NULL, strstr(spyre_last_error(), "is not fp32, fp16, bf16 or dl16"));
	EXPECT_EQ(-EINVAL, spyre_all_reduce(self->comm, b, b, 32, SPYRE_DT_FP32, 7, self->s));
	EXPECT_EQ(-EINVAL, spyre_all_reduce(self->comm, b, b, 32, SPYRE_DT_FP32, SPYRE_RED_SUM, nul));
	EXPECT_NE(NULL, strstr(spyre_last_error(), "NULL stream of rank 0"));
	EXPECT_EQ(-EINVAL, spyre_all_gather(self->comm, b, b, 33, SPYRE_DT_FP32, self->s));
	EXPECT_NE(NULL, strstr(spyre_last_error(), "not whole 128-byte sticks"));
	EXPECT_EQ(-EINVAL, spyre_reduce_scatter(self->comm, b, b, 10, SPYRE_DT_FP16, SPYRE_RED_SUM,
						self->s));
	EXPECT_EQ(-EINVAL, spyre_broadcast(self->comm, b, 32, SPYRE_DT_FP32, self->n, self->s));
	EXPECT_NE(NULL, strstr(spyre_last_error(), "root is not a rank"));
	EXPECT_EQ(-EINVAL, spyre_send_recv(self->comm, 0, b[0], -1, b[1], 32, SPYRE_DT_FP32, self->s));
	EXPECT_EQ(-EINVAL, spyre_comm_init(&c, twice, 2));
	EXPECT_NE(NULL, strstr(spyre_last_error(), "same device handle"));
	EXPECT_EQ(NULL, c);
	EXPECT_EQ(-EINVAL, spyre_comm_init(&c, self->dev, 0));
	EXPECT_EQ(0, spyre_all_reduce(self->comm, b, b, 0, SPYRE_DT_FP32, SPYRE_RED_SUM, self->s));
	for (r = 0; r < self->n; r++)
		spyre_free(self->dev[r], b[r]);
}

/* Keep @s busy for a while: @n D2D copies of @bytes on its card (its buffers in @scratch). */
static int busy(spyre_device_t *dev, spyre_stream_t *s, size_t bytes, int n, spyre_dptr_t scratch[2])
{
	int i, ret;

	ret = spyre_malloc(dev, bytes, &scratch[0]) ?: spyre_malloc(dev, bytes, &scratch[1]);
	for (i = 0; !ret && i < n; i++)
		ret = spyre_memcpy_async(s, scratch[i % 2], scratch[(i + 1) % 2], bytes, SPYRE_MEMCPY_D2D);
	return ret;
}

#define BUSY_BYTES (64u << 20)
#define BUSY_COPIES 16

/* Ranks @x and @y such that @y's copies reach @x's memory; 0, or -1 when no pair of the first two does. */
static int puller(FIXTURE_DATA(coll) *self, int *x, int *y)
{
	int can = 0;

	if (!spyre_device_can_access_peer(self->dev[1], self->dev[0], &can) && can) {
		*x = 0, *y = 1;
		return 0;
	}
	if (!spyre_device_can_access_peer(self->dev[0], self->dev[1], &can) && can) {
		*x = 1, *y = 0;
		return 0;
	}
	return -1;
}

/* Card @y's stream @sy pulls @len bytes of @a (card @x) into @b after @e; then @b is @val throughout. */
static size_t pulled(FIXTURE_DATA(coll) *self, int x, int y, spyre_stream_t *sy, spyre_event_t *e,
		     spyre_dptr_t a, spyre_dptr_t b, size_t len, uint8_t val, int *busy_after)
{
	uint8_t *h = malloc(len);
	size_t i, bad = 0;

	if (spyre_stream_wait_event(sy, e) ||
	    spyre_memcpy_peer_async(sy, self->dev[y], b, self->dev[x], a, len)) {
		free(h);
		return len;
	}
	*busy_after = spyre_stream_query(sy);
	if (spyre_stream_synchronize(sy) ||
	    spyre_memcpy(self->dev[y], (uintptr_t)h, b, len, SPYRE_MEMCPY_D2H)) {
		free(h);
		return len;
	}
	for (i = 0; i < len; i++)
		bad += h[i] != val;
	free(h);
	return bad;
}

TEST_F(coll, cross_device_event_orders_the_cards)
{
	const size_t len = 1 << 20;
	spyre_dptr_t a, b, scratch[2];
	spyre_event_t *e, *plain;
	int x, y, round, q = 0;

	if (puller(self, &x, &y))
		SKIP(return, "neither of the first two cards reaches the other's memory");
	ASSERT_EQ(-EINVAL, spyre_event_create_flags(self->dev[x], 0x2, &e));
	EXPECT_NE(NULL, strstr(spyre_last_error(), "unknown flags 0x2"));
	ASSERT_EQ(0, spyre_event_create_flags(self->dev[x], SPYRE_EVENT_CROSS_DEVICE, &e));
	ASSERT_EQ(0, spyre_event_create(self->dev[x], &plain));
	ASSERT_EQ(0, spyre_malloc(self->dev[x], len, &a));
	ASSERT_EQ(0, spyre_malloc(self->dev[y], len, &b));
	ASSERT_EQ(0, spyre_memset_async(self->s[x], a, 0, len));
	ASSERT_EQ(0, spyre_stream_synchronize(self->s[x]));
	/* A plain event of another card: refused, with the flag to use. */
	ASSERT_EQ(0, spyre_event_record(plain, self->s[x]));
	EXPECT_EQ(-EINVAL, spyre_stream_wait_event(self->s[y], plain));
	EXPECT_NE(NULL, strstr(spyre_last_error(), "SPYRE_EVENT_CROSS_DEVICE"));
	/* Twice with one event: its value grows, no reset. */
	ASSERT_EQ(0, busy(self->dev[x], self->s[x], BUSY_BYTES, BUSY_COPIES, scratch))
		TH_LOG("%s", spyre_last_error());
	for (round = 0; round < 2; round++) {
		uint8_t val = round ? 0xa5 : 0x5a;

		if (round)
			ASSERT_EQ(0, busy(self->dev[x], self->s[x], BUSY_BYTES, BUSY_COPIES, scratch + 0));
		ASSERT_EQ(0, spyre_memset_async(self->s[x], a, val, len));
		ASSERT_EQ(0, spyre_event_record(e, self->s[x])) TH_LOG("%s", spyre_last_error());
		/* Card y waits on the device: its stream is busy with nothing of its own. */
		EXPECT_EQ(0, pulled(self, x, y, self->s[y], e, a, b, len, val, &q)) TH_LOG("round %d", round);
		EXPECT_EQ(-EBUSY, q) TH_LOG("round %d: card %d's stream was done at once", round, y);
		ASSERT_EQ(0, spyre_stream_synchronize(self->s[x]));
		spyre_free(self->dev[x], scratch[0]);
		spyre_free(self->dev[x], scratch[1]);
	}
	/* Waiting on the event's own card stays the syncobj wait. */
	ASSERT_EQ(0, spyre_stream_wait_event(self->s[x], e));
	ASSERT_EQ(0, spyre_stream_synchronize(self->s[x]));
	spyre_event_destroy(plain);
	spyre_event_destroy(e);
	spyre_free(self->dev[x], a);
	spyre_free(self->dev[y], b);
}

TEST_F(coll, all_reduce_returns_before_the_data_is_there)
{
	const uint32_t dt = SPYRE_DT_FP32;
	const size_t count = 65536 + 13, bytes = round_sticks(count * 4);
	spyre_dptr_t buf[MAXR], scratch[2];
	int r, q[MAXR], attempt, seen = 0;

	for (r = 0; r < self->n; r++)
		ASSERT_EQ(0, spyre_malloc(self->dev[r], bytes, &buf[r]));
	/*
	 * Card 0's stream is busy with copies (an event behind them), then the
	 * all-reduce is enqueued. If the copies are still running after the
	 * call returned and the streams were queried, the call did not wait for
	 * them and every stream was still busy then (each waits for card 0's
	 * copies on the device). A host slower than the copies (a debug kernel
	 * on a loaded machine) cannot tell: again with twice the copies.
	 */
	for (attempt = 0; attempt < 4 && !seen; attempt++) {
		spyre_event_t *eb;

		ASSERT_EQ(0, fill(self, buf, count, dt, 77));
		ASSERT_EQ(0, busy(self->dev[0], self->s[0], BUSY_BYTES, BUSY_COPIES << attempt, scratch));
		ASSERT_EQ(0, spyre_event_create(self->dev[0], &eb));
		ASSERT_EQ(0, spyre_event_record(eb, self->s[0]));
		ASSERT_EQ(0, spyre_all_reduce(self->comm, buf, buf, count, dt, SPYRE_RED_SUM, self->s))
			TH_LOG("%s", spyre_last_error());
		for (r = 0; r < self->n; r++)
			q[r] = spyre_stream_query(self->s[r]);
		seen = spyre_event_query(eb) == -EBUSY;
		if (seen) {
			for (r = 0; r < self->n; r++) {
				EXPECT_EQ(-EBUSY, q[r]) TH_LOG("rank %d", r);
			}
		} else {
			TH_LOG("attempt %d: %d copies of 64 MiB were done before the call returned", attempt,
			       BUSY_COPIES << attempt);
		}
		/* Each rank's result is there for its own stream's later work. */
		for (r = self->n - 1; r >= 0; r--) {
			spyre_event_t *ev;

			ASSERT_EQ(0, spyre_event_create(self->dev[r], &ev));
			ASSERT_EQ(0, spyre_event_record(ev, self->s[r]));
			ASSERT_EQ(0, spyre_event_synchronize(ev)) TH_LOG("%s", spyre_last_error());
			spyre_event_destroy(ev);
			EXPECT_EQ(0, check_sum(self, r, buf[r], 0, count, dt, 77)) TH_LOG("rank %d", r);
		}
		sync_all(self, _metadata);
		spyre_event_destroy(eb);
		spyre_free(self->dev[0], scratch[0]);
		spyre_free(self->dev[0], scratch[1]);
	}
	EXPECT_TRUE(seen) TH_LOG("the copies were done before the call returned in every attempt");
	for (r = 0; r < self->n; r++)
		spyre_free(self->dev[r], buf[r]);
}

TEST_F(coll, cross_device_wait_that_never_comes_fails_the_stream)
{
	const size_t len = 4096;
	char inject[256], reset[256];
	spyre_stream_t *sx, *sy;
	spyre_dptr_t a, b;
	spyre_event_t *e;
	int x, y, q = 0;

	if (puller(self, &x, &y))
		SKIP(return, "neither of the first two cards reaches the other's memory");
	if (inject_paths(self->dev[x], inject, reset))
		SKIP(return, "no fault injection attribute (debugfs, root)");
	ASSERT_EQ(0, spyre_event_create_flags(self->dev[x], SPYRE_EVENT_CROSS_DEVICE, &e));
	ASSERT_EQ(0, spyre_malloc(self->dev[x], len, &a));
	ASSERT_EQ(0, spyre_malloc(self->dev[y], len, &b));
	ASSERT_EQ(0, spyre_event_record(e, self->s[x]));
	ASSERT_EQ(0, spyre_stream_synchronize(self->s[x]));
	/* Card x's next job hangs: the record's SIGNAL never runs. */
	ASSERT_LT(0, inject_hang_all(inject));
	ASSERT_EQ(0, spyre_event_record(e, self->s[x]));
	ASSERT_EQ(0, spyre_stream_wait_event(self->s[y], e));
	ASSERT_EQ(0, spyre_memset_async(self->s[y], b, 0x11, len));
	EXPECT_EQ(-EBUSY, spyre_stream_query(self->s[y]));
	/* The driver's job timeout ends the wait: the stream fails and says why. */
	ASSERT_EQ(-EIO, spyre_stream_synchronize(self->s[y]));
	EXPECT_NE(NULL, strstr(spyre_last_error(), "hung")) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(-EIO, spyre_stream_synchronize(self->s[x]));
	EXPECT_NE(NULL, strstr(spyre_last_error(), "hung")) TH_LOG("%s", spyre_last_error());
	write_file(inject, "0 0");
	/* Recovery: new streams on both cards order themselves with the same event. */
	ASSERT_EQ(0, spyre_stream_create(self->dev[x], SPYRE_STREAM_PRIORITY_NORMAL, &sx));
	ASSERT_EQ(0, spyre_stream_create(self->dev[y], SPYRE_STREAM_PRIORITY_NORMAL, &sy));
	ASSERT_EQ(0, spyre_memset_async(sx, a, 0x77, len));
	ASSERT_EQ(0, spyre_event_record(e, sx));
	EXPECT_EQ(0, pulled(self, x, y, sy, e, a, b, len, 0x77, &q));
	spyre_stream_destroy(sx);
	spyre_stream_destroy(sy);
	/* The fixture's streams are poisoned: the teardown gets new ones out of the way. */
	spyre_event_destroy(e);
	spyre_free(self->dev[x], a);
	spyre_free(self->dev[y], b);
}

TEST_HARNESS_MAIN
