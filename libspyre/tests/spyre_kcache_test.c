// SPDX-License-Identifier: MIT
/*
 * Description: libspyre's kernel library on real cards (run in the VM): the
 * kernel cache shared by threads (one kernel kept however many threads ask
 * at once; hits and misses add up), a cache of capacity 0 that builds and
 * unloads every time, one kernel launched on four streams at once with every
 * result checked against the CPU, both addressing forms (patch and patch-free
 * path) giving the same bytes, kernels with a work slot launched without it
 * from four threads on four streams (the cache's per-stream buffer, grown
 * between a smaller and a larger kernel) and with a work buffer of the
 * caller's, a cache destroyed while a caller still holds a
 * kernel, and descriptors a careless framework would pass (unknown op,
 * reserved bits, more cores than the card has, NULLs) refused with -EINVAL
 * and a detail naming the problem.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kselftest_harness.h"
#include "spyre.h"
#include "spyre_kernels.h"
#include "spyre_isa.h"

#define THREADS 4
#define GETS 50

static struct spyre_kdesc add_desc(uint64_t m, uint64_t n, uint32_t flags)
{
	return (struct spyre_kdesc){ .size = sizeof(struct spyre_kdesc), .op = SPYRE_KOP_ADD,
				     .dtype = SPYRE_DT_FP32, .cores = 4, .m = m, .n = n, .flags = flags };
}

FIXTURE(kc) {
	spyre_device_t *dev;
	spyre_kcache_t *cache;
};

FIXTURE_SETUP(kc)
{
	if (spyre_device_count() < 1)
		SKIP(return, "no spyre device");
	ASSERT_EQ(0, spyre_device_open(0, &self->dev)) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(0, spyre_kcache_create(self->dev, 64, &self->cache));
}

FIXTURE_TEARDOWN(kc)
{
	spyre_kcache_destroy(self->cache);
	if (self->dev)
		spyre_device_close(self->dev);
}

struct getter {
	spyre_kcache_t *cache;
	spyre_kernel_t *seen[GETS];
	int err;
};

static void *get_many(void *arg)
{
	struct getter *g = arg;
	struct spyre_kdesc d = add_desc(33, 77, 0);

	for (int i = 0; i < GETS; i++) {
		if (spyre_kernel_get(g->cache, &d, &g->seen[i])) {
			g->err = 1;
			return NULL;
		}
	}
	return NULL;
}

TEST_F(kc, threads_share_one_kernel)
{
	struct spyre_kcache_stats st = { .size = sizeof(st) };
	struct getter g[THREADS];
	pthread_t t[THREADS];
	spyre_kernel_t *first;

	memset(g, 0, sizeof(g));
	for (int i = 0; i < THREADS; i++) {
		g[i].cache = self->cache;
		ASSERT_EQ(0, pthread_create(&t[i], NULL, get_many, &g[i]));
	}
	for (int i = 0; i < THREADS; i++)
		ASSERT_EQ(0, pthread_join(t[i], NULL));
	ASSERT_EQ(0, spyre_kcache_get_stats(self->cache, &st));
	EXPECT_EQ(1u, st.kernels);
	EXPECT_EQ((uint64_t)THREADS * GETS, st.hits + st.misses);
	EXPECT_GE((uint64_t)THREADS, st.misses);	/* at most one concurrent build per thread */
	first = g[0].seen[GETS - 1];
	for (int i = 0; i < THREADS; i++) {
		EXPECT_EQ(0, g[i].err);
		/* after the race settles, everyone gets the cached kernel */
		EXPECT_EQ(first, g[i].seen[GETS - 1]);
		for (int j = 0; j < GETS; j++)
			spyre_kernel_put(g[i].seen[j]);
	}
}

struct launcher {
	spyre_device_t *dev;
	spyre_kernel_t *k;
	uint32_t m, n, seed;
	int ok;
};

/* y = a + b on its own stream, with its own buffers; checked against the CPU. */
static void *launch_one(void *arg)
{
	struct launcher *l = arg;
	uint64_t pitch = spyre_kernel_pitch(l->n, SPYRE_DT_FP32), bytes = l->m * pitch;
	float *a = malloc(l->m * l->n * 4), *b = malloc(l->m * l->n * 4), *y = malloc(l->m * l->n * 4);
	void *pa = malloc(bytes), *pb = malloc(bytes), *py = malloc(bytes);
	spyre_dptr_t da = 0, db = 0, dy = 0;
	spyre_stream_t *s = NULL;
	int bad = 0;

	if (!a || !b || !y || !pa || !pb || !py)
		goto out;
	for (uint32_t i = 0; i < l->m * l->n; i++) {
		a[i] = (float)(i % 97) * 0.5f + l->seed;
		b[i] = (float)(i % 13) - 6.0f;
	}
	spyre_kernel_pack(pa, a, l->m, l->n, 0, SPYRE_DT_FP32);
	spyre_kernel_pack(pb, b, l->m, l->n, 0, SPYRE_DT_FP32);
	if (spyre_stream_create(l->dev, SPYRE_STREAM_PRIORITY_NORMAL, &s) || spyre_malloc(l->dev, bytes, &da) ||
	    spyre_malloc(l->dev, bytes, &db) || spyre_malloc(l->dev, bytes, &dy))
		goto out;
	for (int rep = 0; rep < 10; rep++) {
		if (spyre_memcpy_async(s, da, (uint64_t)(uintptr_t)pa, bytes, SPYRE_MEMCPY_H2D) ||
		    spyre_memcpy_async(s, db, (uint64_t)(uintptr_t)pb, bytes, SPYRE_MEMCPY_H2D) ||
		    spyre_kernel_launch(s, l->k, (spyre_dptr_t[]){ da, db, dy }, 3, NULL, 0) ||
		    spyre_memcpy_async(s, (uint64_t)(uintptr_t)py, dy, bytes, SPYRE_MEMCPY_D2H) ||
		    spyre_stream_synchronize(s))
			goto out;
		spyre_kernel_unpack(y, py, l->m, l->n, 0, SPYRE_DT_FP32);
		for (uint32_t i = 0; i < l->m * l->n; i++)
			bad += y[i] != a[i] + b[i];
	}
	l->ok = !bad;
out:
	if (s)
		spyre_stream_destroy(s);
	spyre_free(l->dev, da);
	spyre_free(l->dev, db);
	spyre_free(l->dev, dy);
	free(a);
	free(b);
	free(y);
	free(pa);
	free(pb);
	free(py);
	return NULL;
}

static void four_streams(struct __test_metadata *_metadata, spyre_device_t *dev, spyre_kcache_t *cache,
			 uint32_t flags)
{
	struct spyre_kdesc d = add_desc(37, 300, flags);
	struct launcher l[4];
	pthread_t t[4];
	spyre_kernel_t *k;

	ASSERT_EQ(0, spyre_kernel_get(cache, &d, &k)) TH_LOG("%s", spyre_last_error());
	for (int i = 0; i < 4; i++) {
		l[i] = (struct launcher){ .dev = dev, .k = k, .m = 37, .n = 300, .seed = (uint32_t)i };
		ASSERT_EQ(0, pthread_create(&t[i], NULL, launch_one, &l[i]));
	}
	for (int i = 0; i < 4; i++) {
		ASSERT_EQ(0, pthread_join(t[i], NULL));
		EXPECT_EQ(1, l[i].ok) TH_LOG("stream %d: %s", i, spyre_last_error());
	}
	spyre_kernel_put(k);
}

TEST_F(kc, one_kernel_on_four_streams_patch_free)
{
	four_streams(_metadata, self->dev, self->cache, 0);
}

TEST_F(kc, one_kernel_on_four_streams_patched)
{
	four_streams(_metadata, self->dev, self->cache, SPYRE_KF_RELOC);
}

/* Row-wise softmax of @m rows of @n, fp32, the naive strategy: its passes go through the work slot. */
static struct spyre_kdesc softmax_desc(uint64_t m, uint64_t n)
{
	return (struct spyre_kdesc){ .size = sizeof(struct spyre_kdesc), .op = SPYRE_KOP_SOFTMAX,
				     .dtype = SPYRE_DT_FP32, .cores = 4, .strategy = SPYRE_KSTRAT_NAIVE,
				     .m = m, .n = n };
}

struct work_launcher {
	spyre_device_t *dev;
	spyre_kernel_t *k[2];	/* a smaller and a larger work slot */
	uint32_t m[2], n, seed;
	bool own_work;		/* pass a work buffer of our own (the convention before 0.4) */
	int ok;
};

/* Softmax of the rows of x by kernel @k on @s (the work slot left out, or @work); mismatches against the CPU. */
static int softmax_on(struct work_launcher *l, spyre_stream_t *s, int which, spyre_dptr_t dx, spyre_dptr_t dy,
		      spyre_dptr_t work, void *px, void *py, float *x, float *y)
{
	uint32_t m = l->m[which], n = l->n;
	uint64_t bytes = m * spyre_kernel_pitch(n, SPYRE_DT_FP32);
	int bad = 0;

	for (uint32_t i = 0; i < m * n; i++)
		x[i] = (float)((i * 7 + l->seed * 13 + (uint32_t)which) % 101) / 17.0f - 3.0f;
	spyre_kernel_pack(px, x, m, n, 0, SPYRE_DT_FP32);
	if (spyre_memcpy_async(s, dx, (uint64_t)(uintptr_t)px, bytes, SPYRE_MEMCPY_H2D) ||
	    spyre_kernel_launch(s, l->k[which], (spyre_dptr_t[]){ dx, dy, work }, work ? 3 : 2, NULL, 0) ||
	    spyre_memcpy_async(s, (uint64_t)(uintptr_t)py, dy, bytes, SPYRE_MEMCPY_D2H) || spyre_stream_synchronize(s))
		return -1;
	spyre_kernel_unpack(y, py, m, n, 0, SPYRE_DT_FP32);
	for (uint32_t r = 0; r < m; r++) {
		double mx = x[r * n], sum = 0;

		for (uint32_t j = 1; j < n; j++)
			mx = fmax(mx, x[r * n + j]);
		for (uint32_t j = 0; j < n; j++)
			sum += exp(x[r * n + j] - mx);
		for (uint32_t j = 0; j < n; j++) {
			double want = exp(x[r * n + j] - mx) / sum;

			bad += !(fabs(y[r * n + j] - want) <= 1e-5 * want + 1e-7);
		}
	}
	return bad;
}

static void *launch_with_work(void *arg)
{
	struct work_launcher *l = arg;
	uint64_t bytes = l->m[1] * spyre_kernel_pitch(l->n, SPYRE_DT_FP32);
	struct spyre_kernel_info info = { .size = sizeof(info) };
	float *x = malloc(bytes), *y = malloc(bytes);
	void *px = malloc(bytes), *py = malloc(bytes);
	spyre_dptr_t dx = 0, dy = 0, work = 0;
	spyre_stream_t *s = NULL;
	int bad = 0;

	spyre_kernel_get_info(l->k[1], &info);
	if (!x || !y || !px || !py || spyre_stream_create(l->dev, SPYRE_STREAM_PRIORITY_NORMAL, &s) ||
	    spyre_malloc(l->dev, bytes, &dx) || spyre_malloc(l->dev, bytes, &dy) ||
	    (l->own_work && spyre_malloc(l->dev, info.work_bytes, &work)))
		goto out;
	for (int rep = 0; rep < 6; rep++)
		for (int which = 0; which < 2; which++) {
			int b = softmax_on(l, s, which, dx, dy, work, px, py, x, y);

			if (b < 0)
				goto out;
			bad += b;
		}
	l->ok = !bad;
out:
	if (s)
		spyre_stream_destroy(s);
	spyre_free(l->dev, dx);
	spyre_free(l->dev, dy);
	spyre_free(l->dev, work);
	free(x);
	free(y);
	free(px);
	free(py);
	return NULL;
}

/*
 * Kernels with a work slot on four streams at once: three leave it to the cache
 * (the larger needs more than its first 1 MiB), one passes its own.
 */
TEST_F(kc, work_slot_from_the_cache_on_four_streams)
{
	struct spyre_kdesc ds = softmax_desc(5, 3000), dl = softmax_desc(100, 3000);
	struct spyre_kernel_info is = { .size = sizeof(is) }, il = { .size = sizeof(il) };
	struct work_launcher l[4];
	spyre_kernel_t *ks, *kl;
	pthread_t t[4];

	ASSERT_EQ(0, spyre_kernel_get(self->cache, &ds, &ks)) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(0, spyre_kernel_get(self->cache, &dl, &kl)) TH_LOG("%s", spyre_last_error());
	spyre_kernel_get_info(ks, &is);
	spyre_kernel_get_info(kl, &il);
	ASSERT_EQ(3, il.num_slots);
	ASSERT_EQ(il.slot_bytes[2], il.work_bytes);
	ASSERT_LT(is.work_bytes, il.work_bytes);
	for (int i = 0; i < 4; i++) {
		l[i] = (struct work_launcher){ .dev = self->dev, .k = { ks, kl }, .m = { 5, 100 }, .n = 3000,
					       .seed = (uint32_t)i, .own_work = i == 3 };
		ASSERT_EQ(0, pthread_create(&t[i], NULL, launch_with_work, &l[i]));
	}
	for (int i = 0; i < 4; i++) {
		ASSERT_EQ(0, pthread_join(t[i], NULL));
		EXPECT_EQ(1, l[i].ok) TH_LOG("stream %d: %s", i, spyre_last_error());
	}
	spyre_kernel_put(ks);
	spyre_kernel_put(kl);
}

TEST_F(kc, capacity_zero_builds_every_time)
{
	struct spyre_kcache_stats st = { .size = sizeof(st) };
	struct spyre_kdesc d = add_desc(8, 8, 0);
	spyre_kcache_t *c0;
	spyre_kernel_t *k1, *k2;

	ASSERT_EQ(0, spyre_kcache_create(self->dev, 0, &c0));
	ASSERT_EQ(0, spyre_kernel_get(c0, &d, &k1));
	ASSERT_EQ(0, spyre_kernel_get(c0, &d, &k2));
	EXPECT_NE(k1, k2);
	ASSERT_EQ(0, spyre_kcache_get_stats(c0, &st));
	EXPECT_EQ(0u, st.kernels);
	EXPECT_EQ(0u, st.hits);
	EXPECT_EQ(2u, st.misses);
	spyre_kernel_put(k1);
	spyre_kernel_put(k2);
	spyre_kcache_destroy(c0);
}

/* A kernel a capacity-0 cache never kept, put after the cache is destroyed (was a use after free). */
TEST_F(kc, uncached_kernel_put_after_destroy)
{
	struct spyre_kdesc d = add_desc(6, 6, 0);
	spyre_kcache_t *c;
	spyre_kernel_t *k;

	ASSERT_EQ(0, spyre_kcache_create(self->dev, 0, &c));
	ASSERT_EQ(0, spyre_kernel_get(c, &d, &k));
	spyre_kcache_destroy(c);
	EXPECT_NE(NULL, spyre_kernel_program(k));
	spyre_kernel_put(k);
}

/* -0.0f and 0.0f, and whatever padding the caller's struct has, are one key. */
TEST_F(kc, equal_descriptors_are_one_key)
{
	struct spyre_kcache_stats st = { .size = sizeof(st) };
	struct spyre_kdesc a = add_desc(9, 9, 0), b;
	spyre_kernel_t *k1, *k2;

	memset(&b, 0xa5, sizeof(b));	/* garbage in the padding */
	b.size = sizeof(b);
	b.op = a.op;
	b.dtype = a.dtype;
	b.cores = a.cores;
	b.strategy = 0;
	b.flags = 0;
	b.m = a.m;
	b.n = a.n;
	b.k = 0;
	b.batch = b.heads = b.kv_heads = b.head_dim = b.max_pos = b.in_group = b.out_group = 0;
	b.eps = 0.0f;
	b.alpha = -0.0f;
	b.scale = 0.0f;
	b.sp_bytes = 0;
	memset(b.reserved, 0, sizeof(b.reserved));
	ASSERT_EQ(0, spyre_kernel_get(self->cache, &a, &k1));
	ASSERT_EQ(0, spyre_kernel_get(self->cache, &b, &k2));
	EXPECT_EQ(k1, k2);
	ASSERT_EQ(0, spyre_kcache_get_stats(self->cache, &st));
	EXPECT_EQ(1u, st.hits);
	spyre_kernel_put(k1);
	spyre_kernel_put(k2);
}

TEST_F(kc, cache_destroyed_while_a_kernel_is_held)
{
	struct spyre_kernel_info info = { .size = sizeof(info) };
	struct spyre_kdesc d = add_desc(5, 5, 0);
	spyre_kcache_t *c;
	spyre_kernel_t *k;

	ASSERT_EQ(0, spyre_kcache_create(self->dev, 4, &c));
	ASSERT_EQ(0, spyre_kernel_get(c, &d, &k));
	spyre_kcache_destroy(c);
	/* the holder's reference keeps the kernel usable until it puts it */
	ASSERT_EQ(0, spyre_kernel_get_info(k, &info));
	EXPECT_EQ(3u, info.num_slots);
	spyre_kernel_put(k);
}

TEST_F(kc, careless_descriptors_are_refused)
{
	struct spyre_device_props props = { .size = sizeof(props) };
	struct spyre_kdesc d;
	spyre_kernel_t *k = NULL;

	ASSERT_EQ(0, spyre_device_get_props(self->dev, &props));
	d = add_desc(4, 4, 0);
	d.op = 999;
	EXPECT_EQ(-EINVAL, spyre_kernel_get(self->cache, &d, &k));
	EXPECT_NE(NULL, strstr(spyre_last_error(), "unknown op 999"));
	d = add_desc(4, 4, 0);
	d.reserved[1] = 1;
	EXPECT_EQ(-EINVAL, spyre_kernel_get(self->cache, &d, &k));
	EXPECT_NE(NULL, strstr(spyre_last_error(), "reserved"));
	d = add_desc(4, 4, 1u << 30);
	EXPECT_EQ(-EINVAL, spyre_kernel_get(self->cache, &d, &k));
	EXPECT_NE(NULL, strstr(spyre_last_error(), "unknown flags"));
	d = add_desc(4, 4, 0);
	d.dtype = SPYRE_DT_INT8;
	EXPECT_EQ(-EINVAL, spyre_kernel_get(self->cache, &d, &k));
	EXPECT_NE(NULL, strstr(spyre_last_error(), "dtype"));
	d = add_desc(0, 4, 0);
	EXPECT_EQ(-EINVAL, spyre_kernel_get(self->cache, &d, &k));
	if (props.num_cores < 32) {
		d = add_desc(4, 4, 0);
		d.cores = 32;
		EXPECT_EQ(-EINVAL, spyre_kernel_get(self->cache, &d, &k));
		EXPECT_NE(NULL, strstr(spyre_last_error(), "cores requested"));
	}
	d = add_desc(4, 4, 0);
	d.sp_bytes = props.scratchpad_bytes + 128;
	EXPECT_EQ(-EINVAL, spyre_kernel_get(self->cache, &d, &k));
	EXPECT_NE(NULL, strstr(spyre_last_error(), "scratchpad"));
	d = add_desc(4, 4, 0);
	d.size = 8;
	EXPECT_EQ(-EINVAL, spyre_kernel_get(self->cache, &d, &k));
	EXPECT_EQ(-EINVAL, spyre_kernel_get(NULL, &d, &k));
	EXPECT_EQ(-EINVAL, spyre_kernel_get(self->cache, NULL, &k));
	EXPECT_EQ(-EINVAL, spyre_kernel_launch(NULL, NULL, NULL, 0, NULL, 0));
	EXPECT_EQ(NULL, k);
}

/* The second card (8 cores in make check's VM): more cores than it has is refused. */
TEST(more_cores_than_the_card)
{
	struct spyre_device_props p = { .size = sizeof(p) };
	struct spyre_kdesc d = add_desc(4, 4, 0);
	spyre_device_t *dev;
	spyre_kcache_t *c;
	spyre_kernel_t *k;

	if (spyre_device_count() < 2)
		SKIP(return, "one card");
	ASSERT_EQ(0, spyre_device_open(1, &dev));
	ASSERT_EQ(0, spyre_device_get_props(dev, &p));
	ASSERT_EQ(0, spyre_kcache_create(dev, 4, &c));
	d.cores = p.num_cores + 1;
	if (d.cores <= 32) {
		EXPECT_EQ(-EINVAL, spyre_kernel_get(c, &d, &k));
		EXPECT_NE(NULL, strstr(spyre_last_error(), "cores requested"));
	}
	/* 0 cores: all the card has */
	d.cores = 0;
	ASSERT_EQ(0, spyre_kernel_get(c, &d, &k)) TH_LOG("%s", spyre_last_error());
	spyre_kernel_put(k);
	spyre_kcache_destroy(c);
	spyre_device_close(dev);
}

TEST_HARNESS_MAIN
