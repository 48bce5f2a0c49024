// SPDX-License-Identifier: MIT
/*
 * Description: libspyre's runtime on real cards (run in the VM): the caching
 * allocator and its statistics, pointer attributes of interior pointers,
 * memcpy in every direction with pageable and pinned host memory and odd
 * sizes (the bytes beyond a partial stick are preserved), memset, streams
 * ordered by events, event timing, events that outlive their stream (its
 * syncobj handle reused by the next streams), host callbacks, stream memory operations
 * (a WAIT released by another stream's write), an asynchronous fault
 * that poisons only its stream with the device's fault record in the detail,
 * producer/consumer chains with random sizes, threads x streams, streams
 * destroyed while other threads walk all streams of the device, stream
 * statistics summed over more launches than the ring of launch records holds
 * (also with an engine fault, and while another thread launches), a device
 * reset in the middle of launches (every failing call's detail names it),
 * and two cards in one process.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sys/wait.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "spyre.h"
#include "spyre_accel.h"
#include "spyre_inject.h"
#include "spyre_progbuild.h"

#define MiB (1u << 20)

static void fill(uint8_t *p, size_t n, unsigned int seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 13 + seed * 101 + (i >> 10));
}

FIXTURE(rt) {
	spyre_device_t *dev;
	spyre_stream_t *s;
};

FIXTURE_SETUP(rt)
{
	if (spyre_device_count() < 1)
		SKIP(return, "no spyre device");
	ASSERT_EQ(0, spyre_device_open(0, &self->dev)) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(0, spyre_stream_create(self->dev, SPYRE_STREAM_PRIORITY_NORMAL, &self->s));
}

FIXTURE_TEARDOWN(rt)
{
	if (self->dev)
		spyre_device_close(self->dev);
}

TEST_F(rt, caching_allocator_and_stats)
{
	struct spyre_mem_stats st = { .size = sizeof(st) };
	spyre_dptr_t p[100], again, big;
	int i;

	for (i = 0; i < 100; i++) {
		ASSERT_EQ(0, spyre_malloc(self->dev, 900 + i, &p[i]));
		ASSERT_EQ(0, p[i] % 128);
	}
	ASSERT_EQ(0, spyre_mem_get_stats(self->dev, &st));
	ASSERT_EQ(100, st.alloc_calls);
	ASSERT_EQ(1, st.bo_creates);		/* 100 small tensors, one ioctl */
	ASSERT_EQ(100 * 900 + 4950, st.allocated);
	ASSERT_EQ(0, spyre_free(self->dev, p[42]));
	ASSERT_EQ(0, spyre_malloc(self->dev, 1024, &again));
	ASSERT_EQ(p[42], again);		/* reused from the cache */
	ASSERT_EQ(-EINVAL, spyre_free(self->dev, p[0] + 128));	/* not an allocation */
	ASSERT_NE(NULL, strstr(spyre_last_error(), "is not an allocation"));
	ASSERT_EQ(-EINVAL, spyre_malloc(self->dev, 0, &big));

	ASSERT_EQ(0, spyre_malloc(self->dev, 3 * MiB, &big));
	ASSERT_EQ(0, spyre_free(self->dev, big));
	ASSERT_EQ(0, spyre_mem_get_stats(self->dev, &st));
	ASSERT_EQ(2, st.bo_creates);
	ASSERT_LE(2 * MiB + 3 * MiB, st.reserved);
	ASSERT_EQ(0, spyre_malloc(self->dev, 3 * MiB, &big));	/* cached large BO */
	ASSERT_EQ(0, spyre_mem_get_stats(self->dev, &st));
	ASSERT_EQ(2, st.bo_creates);
	ASSERT_EQ(0, spyre_free(self->dev, big));
	for (i = 0; i < 100; i++)
		ASSERT_EQ(0, spyre_free(self->dev, i == 42 ? again : p[i]));
	ASSERT_EQ(0, spyre_empty_cache(self->dev));
	ASSERT_EQ(0, spyre_mem_get_stats(self->dev, &st));
	ASSERT_EQ(0, st.reserved);
	ASSERT_EQ(0, st.allocated);
}

TEST_F(rt, pointer_attributes)
{
	struct spyre_pointer_attributes a = { .size = sizeof(a) };
	spyre_dptr_t d;
	void *h;

	ASSERT_EQ(0, spyre_malloc(self->dev, 5000, &d));
	ASSERT_EQ(0, spyre_pointer_get_attributes(self->dev, d + 4999, &a));
	ASSERT_EQ(SPYRE_MEMORY_DEVICE, a.type);
	ASSERT_EQ(0, a.device);
	ASSERT_EQ(d, a.device_base);
	ASSERT_EQ(5000, a.alloc_size);
	ASSERT_EQ(0, spyre_malloc_host(self->dev, 10000, &h));
	ASSERT_EQ(0, spyre_pointer_get_attributes(self->dev, (uintptr_t)h + 777, &a));
	ASSERT_EQ(SPYRE_MEMORY_HOST, a.type);
	ASSERT_EQ(h, a.host_base);
	ASSERT_EQ(10000, a.alloc_size);
	ASSERT_EQ(0, spyre_pointer_get_attributes(self->dev, 0x42, &a));
	ASSERT_EQ(SPYRE_MEMORY_UNREGISTERED, a.type);
	ASSERT_EQ(0, spyre_free_host(self->dev, h));
	ASSERT_EQ(0, spyre_free(self->dev, d));
}

TEST_F(rt, memcpy_all_directions_and_odd_sizes)
{
	static const size_t sizes[] = { 128, 1000, 4096, 5 * MiB + 3 };
	uint8_t *in = malloc(6 * MiB), *out = malloc(6 * MiB);
	spyre_dptr_t a, b;
	unsigned int i;

	ASSERT_NE(NULL, in);
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];

		fill(in, n, i);
		memset(out, 0, n);
		ASSERT_EQ(0, spyre_malloc(self->dev, n, &a));
		ASSERT_EQ(0, spyre_malloc(self->dev, n, &b));
		ASSERT_EQ(0, spyre_memcpy(self->dev, a, (uintptr_t)in, n, SPYRE_MEMCPY_H2D))
			TH_LOG("%s", spyre_last_error());
		if (n % 128 == 0) {
			ASSERT_EQ(0, spyre_memcpy(self->dev, b, a, n, SPYRE_MEMCPY_D2D));
		} else {
			ASSERT_EQ(0, spyre_memcpy(self->dev, b, (uintptr_t)in, n, SPYRE_MEMCPY_H2D));
		}
		ASSERT_EQ(0, spyre_memcpy(self->dev, (uintptr_t)out, b, n, SPYRE_MEMCPY_D2H));
		ASSERT_EQ(0, memcmp(in, out, n)) TH_LOG("size %zu", n);
		spyre_free(self->dev, a);
		spyre_free(self->dev, b);
	}
	ASSERT_EQ(0, spyre_malloc(self->dev, 4096, &a));
	ASSERT_EQ(-EINVAL, spyre_memcpy(self->dev, a + 64, a, 128, SPYRE_MEMCPY_D2D));
	ASSERT_NE(NULL, strstr(spyre_last_error(), "whole 128-byte sticks"));
	ASSERT_EQ(-EINVAL, spyre_memcpy(self->dev, a, a, 100, SPYRE_MEMCPY_D2D));
	free(in);
	free(out);
}

TEST_F(rt, misaligned_pinned_and_sync_failure_recovery)
{
	uint8_t *h, out[4096];
	spyre_dptr_t d;

	ASSERT_EQ(0, spyre_malloc_host(self->dev, 8192, (void **)&h));
	ASSERT_EQ(0, spyre_malloc(self->dev, 4096, &d));
	fill(h + 64, 4096, 3);
	/* Pinned but not stick aligned: staged, not faulted. */
	ASSERT_EQ(0, spyre_memcpy(self->dev, d, (uintptr_t)(h + 64), 4096, SPYRE_MEMCPY_H2D));
	ASSERT_EQ(0, spyre_memcpy(self->dev, (uintptr_t)out, d, 4096, SPYRE_MEMCPY_D2H));
	ASSERT_EQ(0, memcmp(h + 64, out, 4096));
	/* A failed synchronous copy reports -EIO once; the next one works. */
	ASSERT_EQ(-EIO, spyre_memcpy(self->dev, d, 127ull << 30, 4096, SPYRE_MEMCPY_D2D));
	ASSERT_EQ(0, spyre_memcpy(self->dev, (uintptr_t)out, d, 4096, SPYRE_MEMCPY_D2H));
	ASSERT_EQ(0, spyre_free_host(self->dev, h));
}

TEST_F(rt, partial_stick_keeps_neighbours)
{
	uint8_t buf[256], in[100];
	spyre_dptr_t d;

	memset(buf, 0xaa, sizeof(buf));
	memset(in, 0x11, sizeof(in));
	ASSERT_EQ(0, spyre_malloc(self->dev, 256, &d));
	ASSERT_EQ(0, spyre_memcpy(self->dev, d, (uintptr_t)buf, 256, SPYRE_MEMCPY_H2D));
	ASSERT_EQ(0, spyre_memcpy(self->dev, d, (uintptr_t)in, 100, SPYRE_MEMCPY_H2D));
	memset(buf, 0, sizeof(buf));
	ASSERT_EQ(0, spyre_memcpy(self->dev, (uintptr_t)buf, d, 256, SPYRE_MEMCPY_D2H));
	ASSERT_EQ(0x11, buf[0]);
	ASSERT_EQ(0x11, buf[99]);
	ASSERT_EQ(0xaa, buf[100]);
	ASSERT_EQ(0xaa, buf[255]);
}

TEST_F(rt, pinned_async_and_memset)
{
	uint8_t *h;
	spyre_dptr_t d;
	size_t i, n = 3 * MiB + 128 * 5;

	ASSERT_EQ(0, spyre_malloc_host(self->dev, n, (void **)&h));
	ASSERT_EQ(0, spyre_malloc(self->dev, n, &d));
	ASSERT_EQ(0, spyre_memset_async(self->s, d, 0x5c, n));
	ASSERT_EQ(0, spyre_memcpy_async(self->s, (uintptr_t)h, d, n, SPYRE_MEMCPY_D2H));
	ASSERT_EQ(0, spyre_stream_synchronize(self->s));
	for (i = 0; i < n; i += 4093)
		ASSERT_EQ(0x5c, h[i]);
	ASSERT_EQ(0x5c, h[n - 1]);
	ASSERT_EQ(-EINVAL, spyre_memset_async(self->s, d, 1, 100));
	ASSERT_EQ(0, spyre_free_host(self->dev, h));
}

TEST_F(rt, events_order_streams_and_time)
{
	spyre_stream_t *s2;
	spyre_event_t *e, *t0, *t1;
	uint8_t *x, *z;
	spyre_dptr_t y;
	float ms = -1;

	ASSERT_EQ(0, spyre_stream_create(self->dev, SPYRE_STREAM_PRIORITY_HIGH, &s2));
	ASSERT_EQ(0, spyre_event_create(self->dev, &e));
	ASSERT_EQ(0, spyre_event_create(self->dev, &t0));
	ASSERT_EQ(0, spyre_event_create(self->dev, &t1));
	ASSERT_EQ(-EINVAL, spyre_event_query(e));	/* never recorded */
	ASSERT_EQ(0, spyre_malloc_host(self->dev, 4 * MiB, (void **)&x));
	ASSERT_EQ(0, spyre_malloc_host(self->dev, 4 * MiB, (void **)&z));
	ASSERT_EQ(0, spyre_malloc(self->dev, 4 * MiB, &y));
	fill(x, 4 * MiB, 5);

	ASSERT_EQ(0, spyre_event_record(t0, self->s));
	ASSERT_EQ(0, spyre_memcpy_async(self->s, y, (uintptr_t)x, 4 * MiB, SPYRE_MEMCPY_H2D));
	ASSERT_EQ(0, spyre_event_record(e, self->s));
	ASSERT_EQ(0, spyre_stream_wait_event(s2, e));
	ASSERT_EQ(0, spyre_memcpy_async(s2, (uintptr_t)z, y, 4 * MiB, SPYRE_MEMCPY_D2H));
	ASSERT_EQ(0, spyre_event_record(t1, s2));
	ASSERT_EQ(0, spyre_stream_synchronize(s2));
	ASSERT_EQ(0, memcmp(x, z, 4 * MiB));
	ASSERT_EQ(0, spyre_event_query(e));
	ASSERT_EQ(0, spyre_event_synchronize(t1));
	ASSERT_EQ(0, spyre_event_elapsed_ms(t0, t1, &ms));
	ASSERT_LT(0.0f, ms);
	ASSERT_GT(10000.0f, ms);
	ASSERT_EQ(0, spyre_event_record(e, s2));	/* re-recordable */
	ASSERT_EQ(0, spyre_event_synchronize(e));
	spyre_event_destroy(e);
	spyre_event_destroy(t0);
	spyre_event_destroy(t1);
	spyre_stream_destroy(s2);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * Events outlive their stream: A's syncobj handle is the lowest free once A
 * is destroyed, so B (created next) would get it from DRM; B stays below
 * A's last point, C passes it. The events keep A's timeline: synchronize,
 * query, a stream's wait and elapsed time all work, and promptly.
 */
TEST_F(rt, events_outlive_their_stream)
{
	spyre_stream_t *a, *b, *c, *w;
	spyre_event_t *t0, *e;
	const int jobs = 40;
	spyre_dptr_t d, d2;
	float ms = -1;
	uint8_t h[4096];
	double t;
	int i;

	ASSERT_EQ(0, spyre_malloc(self->dev, MiB, &d));
	ASSERT_EQ(0, spyre_malloc(self->dev, MiB, &d2));
	ASSERT_EQ(0, spyre_event_create(self->dev, &t0));
	ASSERT_EQ(0, spyre_event_create(self->dev, &e));
	ASSERT_EQ(0, spyre_stream_create(self->dev, SPYRE_STREAM_PRIORITY_NORMAL, &a));
	ASSERT_EQ(0, spyre_event_record(t0, a));
	for (i = 1; i <= jobs; i++)
		ASSERT_EQ(0, spyre_memset_async(a, d, (uint8_t)i, MiB));
	ASSERT_EQ(0, spyre_event_record(e, a));
	ASSERT_EQ(0, spyre_stream_destroy(a));

	ASSERT_EQ(0, spyre_stream_create(self->dev, SPYRE_STREAM_PRIORITY_NORMAL, &b));
	ASSERT_EQ(0, spyre_stream_create(self->dev, SPYRE_STREAM_PRIORITY_NORMAL, &c));
	for (i = 0; i < 3; i++)
		ASSERT_EQ(0, spyre_memset_async(b, d2, 0x11, MiB));
	for (i = 0; i < jobs + 10; i++)
		ASSERT_EQ(0, spyre_memset_async(c, d2, 0x22, 4096));
	ASSERT_EQ(0, spyre_stream_synchronize(c));
	ASSERT_EQ(0, spyre_memcpy(self->dev, (uintptr_t)h, d2, 16, SPYRE_MEMCPY_D2H));	/* the internal stream */

	t = now_s();
	ASSERT_EQ(0, spyre_event_synchronize(e)) TH_LOG("%s", spyre_last_error());
	ASSERT_GT(5.0, now_s() - t);
	ASSERT_EQ(0, spyre_event_query(e));
	ASSERT_EQ(0, spyre_event_query(t0));

	/* A stream that waits for the event runs: it reads what A's last memset wrote. */
	ASSERT_EQ(0, spyre_stream_create(self->dev, SPYRE_STREAM_PRIORITY_NORMAL, &w));
	ASSERT_EQ(0, spyre_stream_wait_event(w, e));
	ASSERT_EQ(0, spyre_memcpy_async(w, (uintptr_t)h, d, sizeof(h), SPYRE_MEMCPY_D2H));
	t = now_s();
	ASSERT_EQ(0, spyre_stream_synchronize(w)) TH_LOG("%s", spyre_last_error());
	ASSERT_GT(5.0, now_s() - t);
	for (i = 0; i < (int)sizeof(h); i++)
		ASSERT_EQ(jobs, h[i]);

	ASSERT_EQ(0, spyre_event_elapsed_ms(t0, e, &ms));
	ASSERT_LT(0.0f, ms);
	ASSERT_GT(10000.0f, ms);

	/* Re-recorded on a live stream, then destroyed after its stream too. */
	ASSERT_EQ(0, spyre_event_record(e, b));
	ASSERT_EQ(0, spyre_stream_destroy(b));
	ASSERT_EQ(0, spyre_event_synchronize(e));
	ASSERT_EQ(0, spyre_event_query(e));
	ASSERT_EQ(0, spyre_event_destroy(e));
	ASSERT_EQ(0, spyre_event_destroy(t0));
	ASSERT_EQ(0, spyre_stream_destroy(c));
	ASSERT_EQ(0, spyre_stream_destroy(w));
	ASSERT_EQ(0, spyre_free(self->dev, d));
	ASSERT_EQ(0, spyre_free(self->dev, d2));
}

static int cb_order[4], cb_n;

static void cb(void *arg)
{
	cb_order[cb_n++] = (int)(intptr_t)arg;
}

TEST_F(rt, host_callbacks_run_in_stream_order)
{
	spyre_dptr_t d;
	uint8_t *h;

	cb_n = 0;
	ASSERT_EQ(0, spyre_malloc(self->dev, MiB, &d));
	ASSERT_EQ(0, spyre_malloc_host(self->dev, MiB, (void **)&h));
	ASSERT_EQ(0, spyre_memset_async(self->s, d, 7, MiB));
	ASSERT_EQ(0, spyre_stream_add_callback(self->s, cb, (void *)1));
	ASSERT_EQ(0, spyre_memcpy_async(self->s, (uintptr_t)h, d, MiB, SPYRE_MEMCPY_D2H));
	ASSERT_EQ(0, spyre_stream_add_callback(self->s, cb, (void *)2));
	ASSERT_EQ(0, spyre_stream_synchronize(self->s));
	ASSERT_EQ(2, cb_n);
	ASSERT_EQ(1, cb_order[0]);
	ASSERT_EQ(2, cb_order[1]);
	ASSERT_EQ(7, h[MiB - 1]);
	ASSERT_EQ(-EINVAL, spyre_stream_add_callback(self->s, NULL, NULL));
}

/*
 * The stream memory operations: a stream held on the card by a WAIT for a
 * word (in device memory and in pinned host memory) until another stream
 * writes it; greater-or-equal; a timeout past the driver's 2 s; a value
 * that never comes is a hung job.
 */
TEST_F(rt, stream_write_and_wait_value64)
{
	struct spyre_pointer_attributes a = { .size = sizeof(a) };
	spyre_graph_t *g = NULL;
	spyre_stream_t *w;
	spyre_dptr_t words[2], d;
	uint8_t *x, *z;
	uint64_t *hw;
	int k;

	/* High priority: its own hardware queue, not behind the held stream's WAIT. */
	ASSERT_EQ(0, spyre_stream_create(self->dev, SPYRE_STREAM_PRIORITY_HIGH, &w));
	ASSERT_EQ(0, spyre_malloc(self->dev, 4096, &words[0]));
	ASSERT_EQ(0, spyre_memset_async(w, words[0], 0, 4096));
	ASSERT_EQ(0, spyre_malloc_host(self->dev, 4096, (void **)&hw));
	memset(hw, 0, 4096);
	ASSERT_EQ(0, spyre_pointer_get_attributes(self->dev, (uintptr_t)hw, &a));
	words[1] = a.device_base;
	ASSERT_EQ(0, spyre_malloc_host(self->dev, MiB, (void **)&x));
	ASSERT_EQ(0, spyre_malloc_host(self->dev, MiB, (void **)&z));
	ASSERT_EQ(0, spyre_malloc(self->dev, MiB, &d));
	ASSERT_EQ(0, spyre_stream_synchronize(w));
	for (k = 0; k < 2; k++) {
		fill(x, MiB, 30 + (unsigned int)k);
		memset(z, 0, MiB);
		/* Held: the copies behind the WAIT cannot run until w writes 5 (>= 3). */
		ASSERT_EQ(0, spyre_stream_wait_value64(self->s, words[k], 3, 0));
		ASSERT_EQ(0, spyre_memcpy_async(self->s, d, (uintptr_t)x, MiB, SPYRE_MEMCPY_H2D));
		ASSERT_EQ(0, spyre_memcpy_async(self->s, (uintptr_t)z, d, MiB, SPYRE_MEMCPY_D2H));
		usleep(200000);
		ASSERT_EQ(-EBUSY, spyre_stream_query(self->s)) TH_LOG("word %d", k);
		ASSERT_EQ(0, z[0]);
		ASSERT_EQ(0, spyre_stream_write_value64(w, words[k], 5));
		ASSERT_EQ(0, spyre_stream_synchronize(self->s)) TH_LOG("%s", spyre_last_error());
		ASSERT_EQ(0, memcmp(x, z, MiB)) TH_LOG("word %d", k);
		/* Already >= 4: no wait. */
		ASSERT_EQ(0, spyre_stream_wait_value64(self->s, words[k], 4, 0));
		ASSERT_EQ(0, spyre_stream_synchronize(self->s));
	}
	/* The card stored the value in host memory. */
	ASSERT_EQ(5, hw[0]);
	ASSERT_EQ(0, hw[1]);
	ASSERT_EQ(-EINVAL, spyre_stream_wait_value64(self->s, 0, 1, 0));
	ASSERT_EQ(-EINVAL, spyre_stream_write_value64(self->s, words[0] + 4, 1));
	ASSERT_NE(NULL, strstr(spyre_last_error(), "is not a non-zero multiple of 8"))
		TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(0, spyre_stream_begin_capture(w));
	ASSERT_EQ(-EBUSY, spyre_stream_wait_value64(w, words[0], 1, 0));
	ASSERT_EQ(-EBUSY, spyre_stream_write_value64(w, words[0], 1));
	ASSERT_EQ(0, spyre_stream_end_capture(w, &g));
	spyre_graph_destroy(g);
	ASSERT_EQ(-EINVAL, spyre_stream_wait_value64(self->s, words[0], 1, 60001));
	ASSERT_NE(NULL, strstr(spyre_last_error(), "timeout 60001 ms is beyond the driver's 60000 ms"))
		TH_LOG("%s", spyre_last_error());
	/* A bound past the driver's 2 s job timeout: released after 4.5 s, no failure. */
	ASSERT_EQ(0, spyre_stream_wait_value64(self->s, words[0], 7, 10000));
	ASSERT_EQ(0, spyre_memcpy_async(self->s, (uintptr_t)z, d, MiB, SPYRE_MEMCPY_D2H));
	usleep(4500000);
	ASSERT_EQ(-EBUSY, spyre_stream_query(self->s));
	ASSERT_EQ(0, spyre_stream_write_value64(w, words[0], 7));
	ASSERT_EQ(0, spyre_stream_synchronize(self->s)) TH_LOG("%s", spyre_last_error());
	/* 8 never comes: the driver's job timeout fails the stream. */
	ASSERT_EQ(0, spyre_stream_wait_value64(self->s, words[0], 8, 0));
	ASSERT_EQ(-EIO, spyre_stream_synchronize(self->s));
	ASSERT_NE(NULL, strstr(spyre_last_error(), "hung")) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(0, spyre_stream_query(w));
	spyre_stream_destroy(w);
}

TEST_F(rt, async_fault_poisons_only_its_stream)
{
	spyre_stream_t *ok;
	spyre_dptr_t d;

	ASSERT_EQ(0, spyre_stream_create(self->dev, SPYRE_STREAM_PRIORITY_NORMAL, &ok));
	ASSERT_EQ(0, spyre_malloc(self->dev, 4096, &d));
	/* 127 GiB is never mapped here: the device faults, asynchronously. */
	ASSERT_EQ(0, spyre_memcpy_async(self->s, d, 127ull << 30, 4096, SPYRE_MEMCPY_D2D));
	ASSERT_EQ(-EIO, spyre_stream_synchronize(self->s));
	ASSERT_NE(NULL, strstr(spyre_last_error(), "page fault at device address 0x1fc0000000"))
		TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(-EIO, spyre_stream_query(self->s));
	ASSERT_EQ(-EIO, spyre_memset_async(self->s, d, 0, 4096));
	/* Another stream is fine. */
	ASSERT_EQ(0, spyre_memset_async(ok, d, 3, 4096));
	ASSERT_EQ(0, spyre_stream_synchronize(ok));
	spyre_stream_destroy(ok);
}

TEST_F(rt, producer_consumer_random_sizes)
{
	spyre_stream_t *cons;
	spyre_event_t *e;
	uint8_t *src, *dst;
	spyre_dptr_t buf;
	unsigned int it, seed = 12345;

	ASSERT_EQ(0, spyre_stream_create(self->dev, SPYRE_STREAM_PRIORITY_LOW, &cons));
	ASSERT_EQ(0, spyre_event_create(self->dev, &e));
	ASSERT_EQ(0, spyre_malloc_host(self->dev, MiB, (void **)&src));
	ASSERT_EQ(0, spyre_malloc_host(self->dev, MiB, (void **)&dst));
	ASSERT_EQ(0, spyre_malloc(self->dev, MiB, &buf));
	for (it = 0; it < 20; it++) {
		size_t n = 128 * (1 + (rand_r(&seed) % 8192));

		memset(src, (int)it + 1, n);
		ASSERT_EQ(0, spyre_memcpy_async(self->s, buf, (uintptr_t)src, n, SPYRE_MEMCPY_H2D));
		ASSERT_EQ(0, spyre_event_record(e, self->s));
		ASSERT_EQ(0, spyre_stream_wait_event(cons, e));
		ASSERT_EQ(0, spyre_memcpy_async(cons, (uintptr_t)dst, buf, n, SPYRE_MEMCPY_D2H));
		ASSERT_EQ(0, spyre_stream_synchronize(cons));
		ASSERT_EQ(it + 1, dst[0]);
		ASSERT_EQ(it + 1, dst[n - 1]);
	}
	spyre_event_destroy(e);
	spyre_stream_destroy(cons);
}

struct worker {
	spyre_device_t *dev;
	int idx;
	int bad;
};

static void *thread_main(void *arg)
{
	struct worker *w = arg;
	spyre_stream_t *s;
	uint8_t in[8192], out[8192];
	spyre_dptr_t d;
	int i;

	if (spyre_stream_create(w->dev, w->idx % 3, &s) || spyre_malloc(w->dev, 8192, &d)) {
		w->bad = 1;
		return NULL;
	}
	for (i = 0; i < 10; i++) {
		fill(in, sizeof(in), (unsigned int)(w->idx * 100 + i));
		if (spyre_memcpy(w->dev, d, (uintptr_t)in, sizeof(in), SPYRE_MEMCPY_H2D) ||
		    spyre_memcpy_async(s, (uintptr_t)out, d, sizeof(out), SPYRE_MEMCPY_D2H) ||
		    spyre_stream_synchronize(s) || memcmp(in, out, sizeof(in)))
			w->bad++;
	}
	spyre_free(w->dev, d);
	spyre_stream_destroy(s);
	return NULL;
}

TEST_F(rt, threads_times_streams)
{
	struct worker w[4];
	pthread_t t[4];
	int i;

	for (i = 0; i < 4; i++) {
		w[i].dev = self->dev;
		w[i].idx = i;
		w[i].bad = 0;
		ASSERT_EQ(0, pthread_create(&t[i], NULL, thread_main, &w[i]));
	}
	for (i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		ASSERT_EQ(0, w[i].bad) TH_LOG("thread %d", i);
	}
}

/* y = relu(x) over 1024 fp32, in either operand form. */
static void *relu_image(int abs, size_t *size)
{
	return spyre_pb_relu_image(abs ? SPYRE_PB_ADDR_RELOC : SPYRE_PB_ADDR_SLOT, 32, 4096, size);
}

TEST_F(rt, programs_both_paths_and_errors)
{
	struct spyre_program_info info = { .size = sizeof(info) };
	struct spyre_slot_info si = { .size = sizeof(si) };
	struct spyre_launch_stats st = { .size = sizeof(st) };
	spyre_program_t *pf, *pp;
	float in[1024], out[1024];
	spyre_dptr_t slots[2], small, other[2];
	uint32_t idx;
	size_t size;
	void *img;
	int i, k;

	for (i = 0; i < 1024; i++)
		in[i] = (float)(i % 37) - 18.0f;
	ASSERT_EQ(0, spyre_malloc(self->dev, 4096, &slots[0]));
	ASSERT_EQ(0, spyre_malloc(self->dev, 4096, &slots[1]));
	ASSERT_EQ(0, spyre_malloc(self->dev, 4096, &other[0]));
	ASSERT_EQ(0, spyre_malloc(self->dev, 4096, &other[1]));
	ASSERT_EQ(0, spyre_malloc(self->dev, 2048, &small));
	ASSERT_EQ(0, spyre_memcpy(self->dev, slots[0], (uintptr_t)in, sizeof(in), SPYRE_MEMCPY_H2D));
	ASSERT_EQ(0, spyre_memcpy(self->dev, other[0], (uintptr_t)in, sizeof(in), SPYRE_MEMCPY_H2D));

	img = relu_image(0, &size);
	ASSERT_NE(NULL, img);
	ASSERT_EQ(0, spyre_program_load(self->dev, img, size, &pf));
	free(img);
	img = relu_image(1, &size);
	ASSERT_EQ(0, spyre_program_load(self->dev, img, size, &pp));
	ASSERT_EQ(-EINVAL, spyre_program_load(self->dev, img, size - 8, &pf));
	free(img);

	ASSERT_EQ(0, spyre_program_get_info(pf, &info));
	ASSERT_EQ(SPYRE_LAUNCH_FAST, info.path);
	ASSERT_EQ(2, info.num_slots);
	ASSERT_EQ(0, info.num_relocs);
	ASSERT_EQ(0, spyre_program_get_info(pp, &info));
	ASSERT_EQ(SPYRE_LAUNCH_PATCH, info.path);
	ASSERT_EQ(2, info.num_relocs);
	ASSERT_EQ(0, spyre_program_find_slot(pp, "y", &idx));
	ASSERT_EQ(1, idx);
	ASSERT_EQ(-ENOENT, spyre_program_find_slot(pp, "z", &idx));
	ASSERT_EQ(0, spyre_program_slot_info(pp, 1, &si));
	ASSERT_EQ(4096, si.bytes);
	ASSERT_EQ(0, strcmp(si.name, "y"));
	ASSERT_EQ(-EINVAL, spyre_program_slot_info(pp, 2, &si));

	/* Both paths, twice each with changing bindings: same, correct results. */
	for (k = 0; k < 4; k++) {
		spyre_program_t *p = k % 2 ? pp : pf;
		spyre_dptr_t *b = k < 2 ? slots : other;

		memset(out, 0, sizeof(out));
		ASSERT_EQ(0, spyre_memset_async(self->s, b[1], 0, 4096));
		ASSERT_EQ(0, spyre_launch(self->s, p, 1, b, 2, NULL, 0)) TH_LOG("%s", spyre_last_error());
		ASSERT_EQ(0, spyre_stream_last_launch(self->s, &st));
		ASSERT_EQ(0, st.status);
		ASSERT_LT(0, st.device_ns);
		ASSERT_EQ(0, spyre_memcpy(self->dev, (uintptr_t)out, b[1], sizeof(out), SPYRE_MEMCPY_D2H));
		for (i = 0; i < 1024; i++)
			ASSERT_EQ(in[i] > 0 ? in[i] : 0.0f, out[i]) TH_LOG("launch %d element %d", k, i);
	}

	/* Wrong bindings are errors, never wrong numbers. */
	ASSERT_EQ(-EINVAL, spyre_launch(self->s, pf, 1, slots, 1, NULL, 0));
	ASSERT_NE(NULL, strstr(spyre_last_error(), "takes 2 slots"));
	slots[1] = small;
	ASSERT_EQ(-EINVAL, spyre_launch(self->s, pf, 1, slots, 2, NULL, 0));
	ASSERT_NE(NULL, strstr(spyre_last_error(), "slot 1 'y' needs 4096 bytes"));
	slots[1] = other[1] + 64;
	ASSERT_EQ(-EINVAL, spyre_launch(self->s, pf, 1, slots, 2, NULL, 0));
	slots[1] = 0x42000;
	ASSERT_EQ(-EINVAL, spyre_launch(self->s, pf, 1, slots, 2, NULL, 0));
	ASSERT_NE(NULL, strstr(spyre_last_error(), "is not device memory"));
	ASSERT_EQ(-EINVAL, spyre_launch(self->s, pf, 0, other, 2, NULL, 0));
	ASSERT_EQ(0, spyre_program_unload(pf));
	ASSERT_EQ(0, spyre_program_unload(pp));
}

static uint64_t busy_sum(const struct spyre_launch_stats *l)
{
	uint64_t sum = 0;
	int i;

	for (i = 0; i < 32; i++)
		sum += l->core_busy_cycles[i];
	return sum;
}

/*
 * More launches with unchanged bindings than the stream's ring of 256 launch
 * records: each is counted once, with a record of its own, while only the
 * first writes its argument block.
 */
#define STATS_LAUNCHES	300

TEST_F(rt, stream_stats_sum_every_launch)
{
	struct spyre_stream_stats st = { .size = sizeof(st) }, zero = { .size = sizeof(zero) };
	struct spyre_launch_stats one = { .size = sizeof(one) };
	struct spyre_mem_stats ms = { .size = sizeof(ms) }, before = { .size = sizeof(before) };
	spyre_program_t *pf, *pp;
	spyre_dptr_t slots[2], other[2];
	uint8_t buf[4096];
	size_t size, upload;
	void *img;
	int i;

	ASSERT_EQ(0, spyre_malloc(self->dev, 4096, &slots[0]));
	ASSERT_EQ(0, spyre_malloc(self->dev, 4096, &slots[1]));
	ASSERT_EQ(0, spyre_malloc(self->dev, 4096, &other[0]));
	ASSERT_EQ(0, spyre_malloc(self->dev, 4096, &other[1]));
	fill(buf, sizeof(buf), 5);
	ASSERT_EQ(0, spyre_memcpy(self->dev, slots[0], (uintptr_t)buf, 4096, SPYRE_MEMCPY_H2D));
	ASSERT_EQ(0, spyre_memcpy(self->dev, other[0], (uintptr_t)buf, 4096, SPYRE_MEMCPY_H2D));
	img = relu_image(0, &size);
	ASSERT_NE(NULL, img);
	ASSERT_EQ(0, spyre_program_load(self->dev, img, size, &pf));
	free(img);
	img = relu_image(1, &size);
	ASSERT_NE(NULL, img);
	ASSERT_EQ(0, spyre_program_load(self->dev, img, size, &pp));
	free(img);
	upload = (size + 127) & ~(size_t)127;

	/* A new stream has done nothing; spyre_memcpy() ran on another one. */
	ASSERT_EQ(0, spyre_stream_get_stats(self->s, &st));
	ASSERT_EQ(0, memcmp(&zero, &st, sizeof(st)));

	for (i = 0; i < STATS_LAUNCHES; i++)
		ASSERT_EQ(0, spyre_launch(self->s, pf, 1, slots, 2, NULL, 0))
			TH_LOG("launch %d: %s", i, spyre_last_error());
	/* Every launch of it on one core takes the same modeled time. */
	ASSERT_EQ(0, spyre_stream_last_launch(self->s, &one));
	ASSERT_EQ(0, one.status);
	ASSERT_EQ(1, one.cores_run);
	ASSERT_LT(0, one.device_ns);
	ASSERT_EQ(0, spyre_stream_get_stats(self->s, &st));
	ASSERT_EQ(STATS_LAUNCHES, st.launches);
	ASSERT_EQ(0, st.failed_launches);
	ASSERT_EQ(STATS_LAUNCHES * one.device_ns, st.device_ns);
	ASSERT_EQ(STATS_LAUNCHES * one.device_cycles, st.device_cycles);
	ASSERT_EQ(STATS_LAUNCHES * one.insns, st.insns);
	ASSERT_EQ(STATS_LAUNCHES * busy_sum(&one), st.core_busy_cycles);
	ASSERT_EQ(STATS_LAUNCHES * one.device_cycles, st.core_cycles);	/* one core each */
	ASSERT_EQ(2 * 8, st.arg_bytes);		/* the first launch's block, reused after */
	ASSERT_EQ(0, st.upload_bytes);
	ASSERT_EQ(0, st.h2d_bytes);
	/* Asking again counts nothing twice. */
	ASSERT_EQ(0, spyre_stream_get_stats(self->s, &st));
	ASSERT_EQ(STATS_LAUNCHES, st.launches);
	ASSERT_EQ(STATS_LAUNCHES * one.device_ns, st.device_ns);

	/* Reset: nothing left, and nothing done before it comes back. */
	ASSERT_EQ(0, spyre_stream_reset_stats(self->s));
	ASSERT_EQ(0, spyre_stream_get_stats(self->s, &st));
	ASSERT_EQ(0, memcmp(&zero, &st, sizeof(st)));

	/* New bindings write a block each; the patch path uploads a patched copy each. */
	for (i = 0; i < 4; i++)
		ASSERT_EQ(0, spyre_launch(self->s, pp, 1, i % 2 ? other : slots, 2, NULL, 0))
			TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(0, spyre_stream_get_stats(self->s, &st));
	ASSERT_EQ(4, st.launches);
	ASSERT_EQ(4 * 2 * 8, st.arg_bytes);
	ASSERT_EQ(4 * upload, st.upload_bytes);

	/* Copies and fills count on their stream, copies on the device too. */
	ASSERT_EQ(0, spyre_mem_get_stats(self->dev, &before));
	ASSERT_EQ(0, spyre_stream_reset_stats(self->s));
	ASSERT_EQ(0, spyre_memcpy_async(self->s, slots[0], (uintptr_t)buf, 4096, SPYRE_MEMCPY_H2D));
	ASSERT_EQ(0, spyre_memcpy_async(self->s, (uintptr_t)buf, slots[0], 1000, SPYRE_MEMCPY_D2H));
	ASSERT_EQ(0, spyre_memcpy_async(self->s, slots[1], slots[0], 4096, SPYRE_MEMCPY_D2D));
	ASSERT_EQ(0, spyre_memset_async(self->s, other[1], 0, 4096));
	ASSERT_EQ(0, spyre_memcpy(self->dev, other[0], (uintptr_t)buf, 128, SPYRE_MEMCPY_H2D));
	ASSERT_EQ(0, spyre_stream_get_stats(self->s, &st));
	ASSERT_EQ(4096, st.h2d_bytes);		/* not the synchronous copy's 128 */
	ASSERT_EQ(1000, st.d2h_bytes);
	ASSERT_EQ(4096, st.d2d_bytes);
	ASSERT_EQ(4096, st.memset_bytes);
	ASSERT_EQ(0, st.launches);
	ASSERT_EQ(0, st.arg_bytes);
	ASSERT_EQ(0, spyre_mem_get_stats(self->dev, &ms));
	ASSERT_EQ(before.h2d_bytes + 4096 + 128, ms.h2d_bytes);
	ASSERT_EQ(before.d2h_bytes + 1000, ms.d2h_bytes);
	ASSERT_EQ(before.d2d_bytes + 4096, ms.d2d_bytes);
	/* A caller of the structure before the copy counters gets what fits. */
	memset(&before, 0xa5, sizeof(before));
	before.size = offsetof(struct spyre_mem_stats, h2d_bytes);
	ASSERT_EQ(0, spyre_mem_get_stats(self->dev, &before));
	ASSERT_EQ(ms.alloc_calls, before.alloc_calls);
	ASSERT_EQ(0xa5a5a5a5a5a5a5a5ull, before.h2d_bytes);

	ASSERT_EQ(0, spyre_program_unload(pf));
	ASSERT_EQ(0, spyre_program_unload(pp));
}

TEST_F(rt, stream_stats_count_a_faulting_launch)
{
	struct spyre_stream_stats st = { .size = sizeof(st) };
	struct spyre_launch_stats one = { .size = sizeof(one) };
	spyre_program_t *pf, *bad;
	spyre_dptr_t slots[2];
	size_t size;
	void *img;

	ASSERT_EQ(0, spyre_malloc(self->dev, 4096, &slots[0]));
	ASSERT_EQ(0, spyre_malloc(self->dev, 4096, &slots[1]));
	img = relu_image(0, &size);
	ASSERT_NE(NULL, img);
	ASSERT_EQ(0, spyre_program_load(self->dev, img, size, &pf));
	free(img);
	/* "x" claims 64 bytes, the load reads 4096: the engine faults (MEM_RANGE). */
	img = spyre_pb_relu_image(SPYRE_PB_ADDR_SLOT, 32, 64, &size);
	ASSERT_NE(NULL, img);
	ASSERT_EQ(0, spyre_program_load(self->dev, img, size, &bad));
	free(img);

	ASSERT_EQ(0, spyre_launch(self->s, pf, 1, slots, 2, NULL, 0));
	ASSERT_EQ(0, spyre_launch(self->s, bad, 1, slots, 2, NULL, 0));
	/* The stream is poisoned; the totals are there all the same. */
	ASSERT_EQ(-EIO, spyre_stream_get_stats(self->s, &st));
	ASSERT_NE(NULL, strstr(spyre_last_error(), "program fault")) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(2, st.launches);
	ASSERT_EQ(1, st.failed_launches);
	ASSERT_EQ(-EIO, spyre_stream_last_launch(self->s, &one));
	ASSERT_EQ(SPYRE_ENGINE_FAULT_MEM_RANGE, one.status);
	ASSERT_EQ(-EIO, spyre_stream_reset_stats(self->s));
	ASSERT_EQ(-EIO, spyre_stream_get_stats(self->s, &st));
	ASSERT_EQ(0, st.launches);
	ASSERT_EQ(0, st.failed_launches);
	ASSERT_EQ(0, spyre_program_unload(pf));
	ASSERT_EQ(0, spyre_program_unload(bad));
}

/* Launches on one thread while another asks for the totals of the same stream. */
#define STATS_RACE_LAUNCHES	1000

struct stats_race {
	spyre_stream_t *s;
	spyre_program_t *prog;
	spyre_dptr_t slots[2];
	int done;
	int bad;
};

static void *stats_launcher(void *arg)
{
	struct stats_race *r = arg;
	int i;

	for (i = 0; i < STATS_RACE_LAUNCHES && !r->bad; i++)
		if (spyre_launch(r->s, r->prog, 1, r->slots, 2, NULL, 0)) {
			fprintf(stderr, "# launch %d: %s\n", i, spyre_last_error());
			r->bad = 1;
		}
	__atomic_store_n(&r->done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

TEST_F(rt, stream_stats_while_another_thread_launches)
{
	struct spyre_stream_stats st = { .size = sizeof(st) };
	struct spyre_launch_stats one = { .size = sizeof(one) };
	struct stats_race r = { .s = self->s };
	uint64_t seen = 0;
	pthread_t t;
	size_t size;
	void *img;
	int calls = 0;

	ASSERT_EQ(0, spyre_malloc(self->dev, 4096, &r.slots[0]));
	ASSERT_EQ(0, spyre_malloc(self->dev, 4096, &r.slots[1]));
	img = relu_image(0, &size);
	ASSERT_NE(NULL, img);
	ASSERT_EQ(0, spyre_program_load(self->dev, img, size, &r.prog));
	free(img);
	ASSERT_EQ(0, pthread_create(&t, NULL, stats_launcher, &r));
	while (!__atomic_load_n(&r.done, __ATOMIC_SEQ_CST)) {
		ASSERT_EQ(0, spyre_stream_get_stats(self->s, &st)) TH_LOG("%s", spyre_last_error());
		/* Never fewer than before, never more than were enqueued. */
		ASSERT_LE(seen, st.launches);
		ASSERT_GE(STATS_RACE_LAUNCHES, st.launches);
		seen = st.launches;
		calls++;
	}
	pthread_join(t, NULL);
	ASSERT_EQ(0, r.bad);
	ASSERT_EQ(0, spyre_stream_last_launch(self->s, &one));
	ASSERT_EQ(0, spyre_stream_get_stats(self->s, &st));
	ASSERT_EQ(STATS_RACE_LAUNCHES, st.launches);
	ASSERT_EQ(STATS_RACE_LAUNCHES * one.device_ns, st.device_ns);
	ASSERT_EQ(2 * 8, st.arg_bytes);
	TH_LOG("%d spyre_stream_get_stats() calls during %d launches", calls, STATS_RACE_LAUNCHES);
	ASSERT_EQ(0, spyre_program_unload(r.prog));
}

/*
 * Streams created, used and destroyed on some threads while others call
 * what walks every stream of the device: spyre_device_synchronize(),
 * spyre_program_unload(), and launches of a program whose earlier users are
 * being destroyed. Fixed iterations; every call must succeed and every
 * memset land. Built with AddressSanitizer too (spyre_runtime_asan_test),
 * where a walk touching a freed stream aborts the test.
 */
#define RACE_CHURNERS	3
#define RACE_WALKERS	2
#define RACE_ITERS	25

struct race {
	spyre_device_t *dev;
	spyre_program_t *prog;		/* patch path, launched by every churner */
	spyre_dptr_t x;
	int churners_left;
	int bad;
	int walks;
};

#define RACE_OK(r, call) do {									int ret_ = (call);								if (ret_) {										fprintf(stderr, "# %s = %d: %s\n", #call, ret_,						spyre_last_error());							__atomic_add_fetch(&(r)->bad, 1, __ATOMIC_SEQ_CST);			}									} while (0)

static void race_cb(void *arg)
{
	__atomic_add_fetch((int *)arg, 1, __ATOMIC_SEQ_CST);
}

static void *race_churner(void *arg)
{
	struct race *r = arg;
	spyre_dptr_t d, slots[2] = { r->x, 0 };
	uint8_t check[128];
	int i, j, cbs = 0, want_cbs = 0;

	RACE_OK(r, spyre_malloc(r->dev, MiB, &d));
	RACE_OK(r, spyre_malloc(r->dev, 4096, &slots[1]));
	for (i = 0; i < RACE_ITERS; i++) {
		spyre_stream_t *s = NULL;
		spyre_event_t *e = NULL;

		RACE_OK(r, spyre_stream_create(r->dev, i % 3, &s));
		if (!s)
			break;
		RACE_OK(r, spyre_memset_async(s, d, (uint8_t)(i + 1), MiB));
		switch (i % 4) {
		case 0:
			RACE_OK(r, spyre_stream_add_callback(s, race_cb, &cbs));
			want_cbs++;
			break;
		case 1:
			RACE_OK(r, spyre_event_create(r->dev, &e));
			RACE_OK(r, spyre_event_record(e, s));
			RACE_OK(r, spyre_event_synchronize(e));
			RACE_OK(r, spyre_event_destroy(e));
			break;
		case 2:
			RACE_OK(r, spyre_launch(s, r->prog, 1, slots, 2, NULL, 0));
			break;
		default:
			RACE_OK(r, spyre_memcpy(r->dev, slots[1], (uintptr_t)check, 128,
						SPYRE_MEMCPY_H2D));
			break;
		}
		RACE_OK(r, spyre_stream_destroy(s));	/* waits for the stream's work */
		RACE_OK(r, spyre_memcpy(r->dev, (uintptr_t)check, d + MiB - 128, 128,
					SPYRE_MEMCPY_D2H));
		for (j = 0; j < 128; j++)
			if (check[j] != (uint8_t)(i + 1)) {
				fprintf(stderr, "# iteration %d: byte %d is %u\n", i, j, check[j]);
				__atomic_add_fetch(&r->bad, 1, __ATOMIC_SEQ_CST);
				break;
			}
	}
	if (__atomic_load_n(&cbs, __ATOMIC_SEQ_CST) != want_cbs) {
		fprintf(stderr, "# %d of %d callbacks ran\n", cbs, want_cbs);
		__atomic_add_fetch(&r->bad, 1, __ATOMIC_SEQ_CST);
	}
	spyre_free(r->dev, slots[1]);
	spyre_free(r->dev, d);
	__atomic_sub_fetch(&r->churners_left, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

static void *race_walker(void *arg)
{
	struct spyre_mem_stats st = { .size = sizeof(st) };
	struct race *r = arg;
	spyre_stream_t *s = NULL;
	spyre_dptr_t slots[2];
	size_t size = 0;
	void *img = relu_image(0, &size);

	RACE_OK(r, spyre_stream_create(r->dev, SPYRE_STREAM_PRIORITY_NORMAL, &s));
	RACE_OK(r, spyre_malloc(r->dev, 4096, &slots[0]));
	RACE_OK(r, spyre_malloc(r->dev, 4096, &slots[1]));
	while (img && s && __atomic_load_n(&r->churners_left, __ATOMIC_SEQ_CST)) {
		spyre_program_t *p = NULL;

		RACE_OK(r, spyre_device_synchronize(r->dev));
		RACE_OK(r, spyre_mem_get_stats(r->dev, &st));
		RACE_OK(r, spyre_program_load(r->dev, img, size, &p));
		if (p) {
			RACE_OK(r, spyre_launch(s, p, 1, slots, 2, NULL, 0));
			RACE_OK(r, spyre_program_unload(p));	/* walks every stream */
		}
		__atomic_add_fetch(&r->walks, 1, __ATOMIC_SEQ_CST);
	}
	free(img);
	spyre_free(r->dev, slots[0]);
	spyre_free(r->dev, slots[1]);
	RACE_OK(r, spyre_stream_destroy(s));
	return NULL;
}

TEST_F(rt, streams_destroyed_during_device_wide_calls)
{
	struct race r = { .dev = self->dev, .churners_left = RACE_CHURNERS };
	pthread_t c[RACE_CHURNERS], w[RACE_WALKERS];
	size_t size;
	void *img;
	int i;

	img = relu_image(1, &size);
	ASSERT_NE(NULL, img);
	ASSERT_EQ(0, spyre_program_load(self->dev, img, size, &r.prog));
	free(img);
	ASSERT_EQ(0, spyre_malloc(self->dev, 4096, &r.x));
	for (i = 0; i < RACE_WALKERS; i++)
		ASSERT_EQ(0, pthread_create(&w[i], NULL, race_walker, &r));
	for (i = 0; i < RACE_CHURNERS; i++)
		ASSERT_EQ(0, pthread_create(&c[i], NULL, race_churner, &r));
	for (i = 0; i < RACE_CHURNERS; i++)
		pthread_join(c[i], NULL);
	for (i = 0; i < RACE_WALKERS; i++)
		pthread_join(w[i], NULL);
	ASSERT_EQ(0, r.bad);
	ASSERT_LT(0, r.walks);
	TH_LOG("%d stream lifetimes against %d device-wide walks",
	       RACE_CHURNERS * RACE_ITERS, r.walks);
	ASSERT_EQ(0, spyre_device_synchronize(self->dev));
	ASSERT_EQ(0, spyre_program_unload(r.prog));
	spyre_free(self->dev, r.x);
}

static int block_fd;

static void blocking_cb(void *arg)
{
	char c;

	(void)arg;
	if (read(block_fd, &c, 1) != 1)
		c = 0;
}

/* The relu program loaded for the fast path (@abs 0) or the patch path (1), or NULL. */
static spyre_program_t *relu_program(spyre_device_t *dev, int abs)
{
	spyre_program_t *p = NULL;
	size_t size;
	void *img = relu_image(abs, &size);

	if (img && spyre_program_load(dev, img, size, &p))
		p = NULL;
	free(img);
	return p;
}

/* Write @text to the file at @path; 0 or -errno. */
/*
 * The patch path keeps one device image per program. Stream 1 launches it with
 * new bindings (its job: the upload of the re-patched image, then the launch)
 * behind other work; stream 2 at once launches it with the same bindings.
 * Stream 2's launch must run the new image, never the previous one: it must
 * write its output, and the previous bindings' output must stay untouched.
 */
TEST_F(rt, patch_path_same_bindings_on_another_stream_run_the_new_image)
{
	struct spyre_launch_stats ls = { .size = sizeof(ls) };
	float in[2][1024], out[1024];
	uint32_t raw[1024];
	spyre_dptr_t x[2], y[2], b[2];
	spyre_program_t *pf, *pp;
	spyre_stream_t *s2;
	int i, k, j;

	for (i = 0; i < 1024; i++) {
		in[0][i] = (float)(i % 37) - 18.0f;
		in[1][i] = 11.5f - (float)(i % 23);
	}
	for (j = 0; j < 2; j++) {
		ASSERT_EQ(0, spyre_malloc(self->dev, 4096, &x[j]));
		ASSERT_EQ(0, spyre_malloc(self->dev, 4096, &y[j]));
		ASSERT_EQ(0, spyre_memcpy(self->dev, x[j], (uintptr_t)in[j], 4096, SPYRE_MEMCPY_H2D));
	}
	pf = relu_program(self->dev, 0);
	pp = relu_program(self->dev, 1);
	ASSERT_TRUE(pf && pp) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(0, spyre_stream_create(self->dev, SPYRE_STREAM_PRIORITY_NORMAL, &s2));

	for (k = 0; k < 24; k++) {
		j = k % 2;
		/* This round's output zeroed, the last round's a sentinel no launch writes. */
		ASSERT_EQ(0, spyre_memset_async(self->s, y[j], 0, 4096));
		ASSERT_EQ(0, spyre_memset_async(self->s, y[!j], 0xff, 4096));
		ASSERT_EQ(0, spyre_stream_synchronize(self->s)) TH_LOG("%s", spyre_last_error());
		/*
		 * Stream 1: busy, then the new bindings; stream 2 right after, the
		 * same. The previous image would write y[!j].
		 */
		b[0] = x[j];
		b[1] = y[j];
		for (i = 0; i < 4; i++) {
			ASSERT_EQ(0, spyre_launch(self->s, pf, 1, b, 2, NULL, 0)) TH_LOG("%s", spyre_last_error());
		}
		ASSERT_EQ(0, spyre_launch(self->s, pp, 1, b, 2, NULL, 0)) TH_LOG("%s", spyre_last_error());
		ASSERT_EQ(0, spyre_launch(s2, pp, 1, b, 2, NULL, 0)) TH_LOG("%s", spyre_last_error());
		ASSERT_EQ(0, spyre_stream_last_launch(s2, &ls)) TH_LOG("%s", spyre_last_error());
		ASSERT_EQ(0, ls.status) TH_LOG("round %d", k);
		ASSERT_EQ(0, spyre_stream_synchronize(self->s)) TH_LOG("%s", spyre_last_error());
		ASSERT_EQ(0, spyre_memcpy(self->dev, (uintptr_t)out, y[j], sizeof(out), SPYRE_MEMCPY_D2H));
		for (i = 0; i < 1024; i++) {
			ASSERT_EQ(in[j][i] > 0 ? in[j][i] : 0.0f, out[i]) TH_LOG("round %d element %d", k, i);
		}
		ASSERT_EQ(0, spyre_memcpy(self->dev, (uintptr_t)raw, y[!j], sizeof(raw), SPYRE_MEMCPY_D2H));
		for (i = 0; i < 1024; i++) {
			ASSERT_EQ(0xffffffffu, raw[i]) TH_LOG("round %d: the previous image wrote element %d", k, i);
		}
	}
	ASSERT_EQ(0, spyre_stream_destroy(s2));
	ASSERT_EQ(0, spyre_program_unload(pf));
	ASSERT_EQ(0, spyre_program_unload(pp));
	for (j = 0; j < 2; j++) {
		ASSERT_EQ(0, spyre_free(self->dev, x[j]));
		ASSERT_EQ(0, spyre_free(self->dev, y[j]));
	}
}

/*
 * A device reset in the middle of a stream of launches (as in a decode step):
 * every call that fails says why, naming the reset - an error detail is never
 * empty. The stream's first job hangs (debugfs "inject"), more launches queue
 * behind it on both paths, the card is reset (sysfs "reset"), and launches go
 * on until one fails.
 */
TEST_F(rt, launch_after_a_device_reset_names_the_reset)
{
	struct spyre_stream_stats st = { .size = sizeof(st) };
	char inject[256], reset[256];
	spyre_program_t *pf, *pp;
	spyre_stream_t *s2;
	spyre_dptr_t slots[2];
	float in[1024], out[1024];
	int i, k, ret = 0;

	if (inject_paths(self->dev, inject, reset))
		SKIP(return, "no fault injection or reset attribute (debugfs, root)");
	ASSERT_EQ(0, spyre_malloc(self->dev, 4096, &slots[0]));
	ASSERT_EQ(0, spyre_malloc(self->dev, 4096, &slots[1]));
	pf = relu_program(self->dev, 0);
	pp = relu_program(self->dev, 1);
	ASSERT_TRUE(pf && pp) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(0, spyre_launch(self->s, pf, 1, slots, 2, NULL, 0));
	ASSERT_EQ(0, spyre_stream_synchronize(self->s));

	/* Every hardware queue's next job hangs. */
	ASSERT_LT(0, inject_hang_all(inject));
	for (i = 0; i < 8; i++)
		ASSERT_EQ(0, spyre_launch(self->s, i % 2 ? pp : pf, 1, slots, 2, NULL, 0))
			TH_LOG("%s", spyre_last_error());
	usleep(50000);
	ASSERT_EQ(0, write_file(reset, "1"));
	/* Mid-decode: the launches go on, without a synchronize, until one fails. */
	for (i = 0; i < 2 * 256 + 8 && !ret; i++)
		ret = spyre_launch(self->s, i % 2 ? pp : pf, 1, slots, 2, NULL, 0);
	write_file(inject, "0 0");
	ASSERT_EQ(-EIO, ret) TH_LOG("launch %d: %d %s", i, ret, spyre_last_error());
	ASSERT_NE(0, spyre_last_error()[0]);
	ASSERT_NE(NULL, strstr(spyre_last_error(), "reset")) TH_LOG("%s", spyre_last_error());
	printf("# launch %d after the reset failed: %s\n", i, spyre_last_error());
	/* Every later call on the stream says the same. */
	ASSERT_EQ(-EIO, spyre_launch(self->s, pp, 1, slots, 2, NULL, 0));
	ASSERT_NE(NULL, strstr(spyre_last_error(), "reset")) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(-EIO, spyre_stream_synchronize(self->s));
	ASSERT_NE(NULL, strstr(spyre_last_error(), "reset")) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(-EIO, spyre_stream_get_stats(self->s, &st));
	ASSERT_NE(NULL, strstr(spyre_last_error(), "reset")) TH_LOG("%s", spyre_last_error());
	/*
	 * A new stream runs both programs with the same bindings, and gets
	 * right numbers: @pp's patched image was uploaded by a job the reset
	 * canceled, so its launch there uploads it again.
	 */
	for (i = 0; i < 1024; i++)
		in[i] = (float)(i % 37) - 18.0f;
	ASSERT_EQ(0, spyre_memcpy(self->dev, slots[0], (uintptr_t)in, sizeof(in), SPYRE_MEMCPY_H2D));
	ASSERT_EQ(0, spyre_stream_create(self->dev, SPYRE_STREAM_PRIORITY_NORMAL, &s2));
	for (k = 0; k < 2; k++) {
		spyre_program_t *p = k ? pp : pf;

		ASSERT_EQ(0, spyre_memset_async(s2, slots[1], 0xff, 4096));
		ASSERT_EQ(0, spyre_launch(s2, p, 1, slots, 2, NULL, 0)) TH_LOG("%s", spyre_last_error());
		ASSERT_EQ(0, spyre_stream_synchronize(s2)) TH_LOG("%s", spyre_last_error());
		ASSERT_EQ(0, spyre_memcpy(self->dev, (uintptr_t)out, slots[1], sizeof(out), SPYRE_MEMCPY_D2H));
		for (i = 0; i < 1024; i++) {
			ASSERT_EQ(in[i] > 0 ? in[i] : 0.0f, out[i])
				TH_LOG("%s path, element %d", k ? "patch" : "fast", i);
		}
	}
	/* The re-upload is counted once; a repeat on the stream uploads nothing. */
	ASSERT_EQ(0, spyre_stream_reset_stats(s2));
	ASSERT_EQ(0, spyre_launch(s2, pp, 1, slots, 2, NULL, 0)) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(0, spyre_stream_get_stats(s2, &st));
	ASSERT_EQ(1, st.launches);
	ASSERT_EQ(0, st.failed_launches);
	ASSERT_EQ(0, st.upload_bytes);
	ASSERT_EQ(0, spyre_stream_destroy(s2));
	ASSERT_EQ(0, spyre_program_unload(pf));
	ASSERT_EQ(0, spyre_program_unload(pp));
}

TEST_F(rt, api_error_cases)
{
	struct spyre_mem_stats st = { 0 };
	struct spyre_pointer_attributes pa = { 0 };
	spyre_stream_t *bad;
	spyre_event_t *e1, *e2;
	uint64_t v = 0;
	float ms;
	int fds[2];
	char c = 1;

	ASSERT_EQ(-EINVAL, spyre_device_get_param(self->dev, 999, &v));
	ASSERT_EQ(0, spyre_device_get_param(self->dev, DRM_SPYRE_PARAM_STICK_BYTES, &v));
	ASSERT_EQ(128, v);
	ASSERT_LE(0, spyre_device_fd(self->dev));
	ASSERT_EQ(-EINVAL, spyre_mem_get_stats(self->dev, &st));	/* size not set */
	ASSERT_EQ(-EINVAL, spyre_pointer_get_attributes(self->dev, 0, &pa));
	ASSERT_EQ(-EINVAL, spyre_free_host(self->dev, &v));
	ASSERT_EQ(-EINVAL, spyre_stream_create(self->dev, 7, &bad));
	ASSERT_EQ(-EINVAL, spyre_memcpy(self->dev, 0, 0, 128, (enum spyre_memcpy_kind)9));
	ASSERT_EQ(0, spyre_event_create(self->dev, &e1));
	ASSERT_EQ(0, spyre_event_create(self->dev, &e2));
	ASSERT_EQ(-EINVAL, spyre_event_elapsed_ms(e1, e2, &ms));	/* never recorded */
	ASSERT_EQ(0, spyre_event_synchronize(e1));			/* no-op when unrecorded */
	ASSERT_EQ(0, spyre_stream_wait_event(self->s, e1));		/* no-op, as in CUDA */

	/* A host callback still running keeps the stream busy. */
	ASSERT_EQ(0, pipe(fds));
	block_fd = fds[0];
	ASSERT_EQ(0, spyre_stream_add_callback(self->s, blocking_cb, NULL));
	ASSERT_EQ(-EBUSY, spyre_stream_query(self->s));
	ASSERT_EQ(1, write(fds[1], &c, 1));
	ASSERT_EQ(0, spyre_stream_synchronize(self->s));
	ASSERT_EQ(0, spyre_stream_query(self->s));
	ASSERT_EQ(0, spyre_device_synchronize(self->dev));
	close(fds[0]);
	close(fds[1]);
	spyre_event_destroy(e1);
	spyre_event_destroy(e2);
}

TEST(two_processes)
{
	pid_t pid[2];
	int i, status;

	if (spyre_device_count() < 1)
		SKIP(return, "no spyre device");
	for (i = 0; i < 2; i++) {
		pid[i] = fork();
		ASSERT_LE(0, pid[i]);
		if (pid[i] == 0) {
			uint8_t in[65536], out[65536];
			spyre_device_t *dev;
			spyre_dptr_t d;
			int j, bad = 0;

			if (spyre_device_open(0, &dev) || spyre_malloc(dev, sizeof(in), &d))
				_exit(2);
			for (j = 0; j < 10; j++) {
				fill(in, sizeof(in), (unsigned int)(i * 10 + j));
				if (spyre_memcpy(dev, d, (uintptr_t)in, sizeof(in), SPYRE_MEMCPY_H2D) ||
				    spyre_memcpy(dev, (uintptr_t)out, d, sizeof(out), SPYRE_MEMCPY_D2H) ||
				    memcmp(in, out, sizeof(in)))
					bad++;
			}
			spyre_device_close(dev);
			_exit(bad ? 1 : 0);
		}
	}
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(pid[i], waitpid(pid[i], &status, 0));
		ASSERT_TRUE(WIFEXITED(status));
		ASSERT_EQ(0, WEXITSTATUS(status));
	}
}

TEST(two_cards_in_one_process)
{
	spyre_device_t *d0, *d1;
	uint8_t in[4096], out[4096];
	spyre_dptr_t a, b;
	int cur = -1;

	if (spyre_device_count() < 2)
		SKIP(return, "fewer than two cards");
	ASSERT_EQ(0, spyre_device_open(0, &d0));
	ASSERT_EQ(0, spyre_device_open(1, &d1));
	ASSERT_EQ(0, spyre_set_device(1));
	ASSERT_EQ(0, spyre_get_device(&cur));
	ASSERT_EQ(1, cur);
	ASSERT_EQ(-ENODEV, spyre_set_device(9));
	fill(in, sizeof(in), 9);
	ASSERT_EQ(0, spyre_malloc(d0, 4096, &a));
	ASSERT_EQ(0, spyre_malloc(d1, 4096, &b));
	ASSERT_EQ(0, spyre_memcpy(d0, a, (uintptr_t)in, 4096, SPYRE_MEMCPY_H2D));
	ASSERT_EQ(0, spyre_memcpy(d0, (uintptr_t)out, a, 4096, SPYRE_MEMCPY_D2H));
	ASSERT_EQ(0, spyre_memcpy(d1, b, (uintptr_t)out, 4096, SPYRE_MEMCPY_H2D));
	memset(out, 0, sizeof(out));
	ASSERT_EQ(0, spyre_memcpy(d1, (uintptr_t)out, b, 4096, SPYRE_MEMCPY_D2H));
	ASSERT_EQ(0, memcmp(in, out, sizeof(in)));
	spyre_device_close(d0);
	spyre_device_close(d1);
}

TEST_HARNESS_MAIN
