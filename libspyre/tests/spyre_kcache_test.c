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
 * and a detail naming the problem. The ops of 0.5 (BINARY, UNARY, REDUCE,
 * log SOFTMAX, WHERE, TRIL, PERMUTE, CAT) on the card in fp32, fp16 and
 * bf16 against a CPU reference in double from the rounded inputs: every
 * fn and flag, 37 rows on 4 cores (not a multiple), 45 columns (not a
 * stick), NaN inputs, +-inf scalars; tolerances 0 for the exact ops, one
 * rounding of the output for the arithmetic, 4x that for the
 * transcendentals, the sum's fp32 error for reductions and log_softmax.
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
	b.fn = 0;
	b.beta = -0.0f;	/* since 0.5: -0.0f beta is 0.0f too */
	b.block_size = b.num_blocks = 0;	/* since 0.6 (were reserved) */
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
	d.num_blocks = 1;	/* the paged ops' field (was reserved[1] before 0.6) on another op */
	EXPECT_EQ(-EINVAL, spyre_kernel_get(self->cache, &d, &k));
	EXPECT_NE(NULL, strstr(spyre_last_error(), "block_size and num_blocks must be 0"));
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

/* ---- the ops of 0.5 on the card, against the CPU ---------------------------------------- */

/*
 * A tensor of a kernel's slot: host fp32 [rows x cols] in the stick layout
 * of @dt (-1: the kernel's), an input or an output; the slot's bytes come
 * from the kernel's info.
 */
struct dslot {
	float *data;
	uint64_t rows, cols;
	int dt;
	bool out;
	bool keep_tail;		/* out, one dense row: the slot's bytes after it must stay as they were */
};

#define TAIL_BYTE 0x5a

/* x as the card stores it in @dt */
static float as_dt(float x, uint32_t dt)
{
	uint8_t b[128];

	spyre_kernel_pack(b, &x, 1, 1, 0, dt);
	spyre_kernel_unpack(&x, b, 1, 1, 0, dt);
	return x;
}

/*
 * Build @d through the cache, copy the inputs in, launch on @s (the work
 * slot left to the cache), copy the outputs back. 0, or -1 with the reason
 * in @why.
 */
static int run_on_card(spyre_device_t *dev, spyre_kcache_t *cache, spyre_stream_t *s, const struct spyre_kdesc *d,
		       struct dslot *sl, uint32_t n, char *why, size_t wlen)
{
	struct spyre_kernel_info info = { .size = sizeof(info) };
	spyre_dptr_t dp[8] = { 0 };
	void *hp[8] = { 0 };
	spyre_kernel_t *k = NULL;
	int rc = -1;

	if (spyre_kernel_get(cache, d, &k) || spyre_kernel_get_info(k, &info)) {
		snprintf(why, wlen, "build: %s", spyre_last_error());
		return -1;
	}
	if (info.num_slots - (info.work_bytes ? 1 : 0) != n) {
		snprintf(why, wlen, "%s: %u slots, the test passes %u", info.name, info.num_slots, n);
		goto out;
	}
	for (uint32_t i = 0; i < n; i++) {
		uint32_t dt = sl[i].dt < 0 ? d->dtype : (uint32_t)sl[i].dt;

		hp[i] = calloc(1, info.slot_bytes[i]);
		if (!hp[i] || spyre_malloc(dev, info.slot_bytes[i], &dp[i])) {
			snprintf(why, wlen, "slot %u: %s", i, spyre_last_error());
			goto out;
		}
		if (!sl[i].out)
			spyre_kernel_pack(hp[i], sl[i].data, sl[i].rows, sl[i].cols, 0, dt);
		else
			memset(hp[i], TAIL_BYTE, info.slot_bytes[i]);	/* outputs start as a pattern */
		if (spyre_memcpy_async(s, dp[i], (uint64_t)(uintptr_t)hp[i], info.slot_bytes[i], SPYRE_MEMCPY_H2D))
			goto fail;
	}
	if (spyre_kernel_launch(s, k, dp, n, NULL, 0))
		goto fail;
	for (uint32_t i = 0; i < n; i++)
		if (sl[i].out && spyre_memcpy_async(s, (uint64_t)(uintptr_t)hp[i], dp[i], info.slot_bytes[i],
						    SPYRE_MEMCPY_D2H))
			goto fail;
	if (spyre_stream_synchronize(s))
		goto fail;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t dt = sl[i].dt < 0 ? d->dtype : (uint32_t)sl[i].dt;

		if (!sl[i].out)
			continue;
		spyre_kernel_unpack(sl[i].data, hp[i], sl[i].rows, sl[i].cols, 0, dt);
		for (uint64_t b = sl[i].cols * SPYRE_DT_SIZE(dt); sl[i].keep_tail && b < info.slot_bytes[i]; b++)
			if (((uint8_t *)hp[i])[b] != TAIL_BYTE) {
				snprintf(why, wlen, "%s: byte %llu after the tensor was overwritten", info.name,
					 (unsigned long long)b);
				goto out;
			}
	}
	rc = 0;
	goto out;
fail:
	snprintf(why, wlen, "%s: %s", info.name, spyre_last_error());
out:
	for (uint32_t i = 0; i < n; i++) {
		if (dp[i])
			spyre_free(dev, dp[i]);
		free(hp[i]);
	}
	spyre_kernel_put(k);
	return rc;
}

/* Elements off: NaN where NaN is wanted, infinities equal, else |got - want| <= rtol |want| + atol. */
static uint64_t off_count(const float *got, const float *want, uint64_t n, double rtol, double atol, uint64_t *first)
{
	uint64_t bad = 0;

	for (uint64_t i = 0; i < n; i++) {
		bool ok = isnan(want[i]) ? isnan(got[i]) : isinf(want[i]) ? got[i] == want[i] :
			  fabs((double)got[i] - want[i]) <= rtol * fabs((double)want[i]) + atol;

		if (!ok && !bad++)
			*first = i;
	}
	return bad;
}

/* One rounding of the output to @dt (fp32 inside) */
static double tol_of(uint32_t dt)
{
	return dt == SPYRE_DT_FP16 ? 1.0 / 1024 : dt == SPYRE_DT_BF16 ? 1.0 / 128 : 1.0 / (1 << 20);
}

static void fillr(float *p, uint64_t n, float lo, float hi, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 12345;

	for (uint64_t i = 0; i < n; i++) {
		x = x * 1664525u + 1013904223u;
		p[i] = lo + (hi - lo) * (float)(x >> 8) / 16777216.0f;
	}
}

struct optest {
	struct __test_metadata *md;
	spyre_device_t *dev;
	spyre_kcache_t *cache;
	spyre_stream_t *s;
	unsigned cases, failed;
};

/* Run @d and compare output slot @o with @want; one line per failing case. */
static void check_case(struct optest *t, const char *what, const struct spyre_kdesc *d, struct dslot *sl, uint32_t n,
		       uint32_t o, const float *want, double rtol, double atol)
{
	struct __test_metadata *_metadata = t->md;
	uint64_t cnt = sl[o].rows * sl[o].cols, first = 0, bad;
	char why[256] = "";

	t->cases++;
	if (run_on_card(t->dev, t->cache, t->s, d, sl, n, why, sizeof(why))) {
		t->failed++;
		TH_LOG("%s: %s", what, why);
		return;
	}
	bad = off_count(sl[o].data, want, cnt, rtol, atol, &first);
	if (bad) {
		t->failed++;
		TH_LOG("%s: %llu of %llu off, first [%llu] got %.8g want %.8g (rtol %.3g atol %.3g)", what,
		       (unsigned long long)bad, (unsigned long long)cnt, (unsigned long long)first,
		       (double)sl[o].data[first], (double)want[first], rtol, atol);
	}
}

static const uint32_t card_dts[3] = { SPYRE_DT_FP32, SPYRE_DT_FP16, SPYRE_DT_BF16 };

static double bin_ref(uint32_t fn, double x, double y)
{
	switch (fn) {
	case SPYRE_KFN_ADD: return x + y;
	case SPYRE_KFN_SUB: return x - y;
	case SPYRE_KFN_MUL: return x * y;
	case SPYRE_KFN_DIV: return x / y;
	case SPYRE_KFN_MAX: return isnan(x) || isnan(y) ? NAN : fmax(x, y);
	default: return isnan(x) || isnan(y) ? NAN : fmin(x, y);
	}
}

/* BINARY: every fn, plain / row / column broadcast, REVERSE, alpha; m 37 on 4 cores, n 45 (not a stick) */
static void card_binary(struct optest *t, uint32_t dt)
{
	static const struct { uint32_t fn, flags; float alpha; bool nan; } c[] = {
		{ SPYRE_KFN_ADD, 0, 0, 0 }, { SPYRE_KFN_ADD, SPYRE_KF_BCAST_ROW, 0, 0 },
		{ SPYRE_KFN_ADD, SPYRE_KF_BCAST_ROW | SPYRE_KF_REVERSE, -0.5f, 0 },
		{ SPYRE_KFN_SUB, SPYRE_KF_BCAST_COL | SPYRE_KF_REVERSE, 0, 0 }, { SPYRE_KFN_SUB, 0, 2, 0 },
		{ SPYRE_KFN_MUL, SPYRE_KF_BCAST_COL, 0, 0 }, { SPYRE_KFN_MUL, SPYRE_KF_BCAST_ROW, 0, 0 },
		{ SPYRE_KFN_DIV, 0, 0, 0 }, { SPYRE_KFN_DIV, SPYRE_KF_BCAST_COL | SPYRE_KF_REVERSE, 0, 0 },
		{ SPYRE_KFN_MAX, SPYRE_KF_BCAST_ROW, 0, 1 }, { SPYRE_KFN_MIN, SPYRE_KF_REVERSE, 0, 1 },
	};
	const uint32_t m = 37, n = 45;

	for (unsigned i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		bool row = c[i].flags & SPYRE_KF_BCAST_ROW, col = c[i].flags & SPYRE_KF_BCAST_COL;
		bool rev = c[i].flags & SPYRE_KF_REVERSE;
		uint64_t br = row || col ? 1 : m, bc = row ? n : col ? m : n;
		float a[37 * 45], b[37 * 45], y[37 * 45], r[37 * 45];
		struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_BINARY, .dtype = dt, .cores = 4, .m = m,
					 .n = n, .fn = c[i].fn, .flags = c[i].flags, .alpha = c[i].alpha };
		struct dslot sl[] = { { a, m, n, -1, 0 }, { b, br, bc, -1, 0 }, { y, m, n, -1, 1 } };
		double al = c[i].alpha == 0 ? 1 : c[i].alpha;
		char what[96];

		fillr(a, m * n, -3, 3, i);
		fillr(b, br * bc, -3, 3, i + 100);
		if (c[i].fn == SPYRE_KFN_DIV)
			for (uint64_t j = 0; j < (rev ? m * n : br * bc); j++) {
				float *v = rev ? a : b;

				v[j] += v[j] < 0 ? -0.5f : 0.5f;
			}
		if (c[i].nan) {
			a[3] = NAN;
			b[1] = NAN;
		}
		for (uint64_t p = 0; p < m; p++)
			for (uint64_t j = 0; j < n; j++) {
				double x = as_dt(a[p * n + j], dt), z = as_dt(b[row ? j : col ? p : p * n + j], dt);

				if (c[i].fn <= SPYRE_KFN_SUB) {
					if (rev)
						x = (float)(al * x);
					else
						z = (float)(al * z);
				}
				r[p * n + j] = (float)(rev ? bin_ref(c[i].fn, z, x) : bin_ref(c[i].fn, x, z));
			}
		snprintf(what, sizeof(what), "binary fn %u %s flags 0x%x alpha %g%s", c[i].fn, dt == 0 ? "fp32" :
			 dt == 1 ? "fp16" : "bf16", c[i].flags, (double)c[i].alpha, c[i].nan ? " NaN" : "");
		check_case(t, what, &d, sl, 3, 2, r, c[i].fn >= SPYRE_KFN_MAX ? 0 : tol_of(dt) + 1e-6,
			   c[i].fn >= SPYRE_KFN_MAX ? 0 : 1e-6);
	}
}

static double un_ref(uint32_t fn, double x, double alpha, double beta)
{
	switch (fn) {
	case SPYRE_KFN_EXP: return exp(x);
	case SPYRE_KFN_LOG: return log(x);
	case SPYRE_KFN_TANH: return tanh(x);
	case SPYRE_KFN_SIGMOID: return 1 / (1 + exp(-x));
	case SPYRE_KFN_RSQRT: return 1 / sqrt(x);
	case SPYRE_KFN_SQRT: return sqrt(x);
	case SPYRE_KFN_RECIP: return 1 / x;
	case SPYRE_KFN_ABS: return fabs(x);
	case SPYRE_KFN_GELU_TANH: return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
	case SPYRE_KFN_SCALE: return alpha * x + beta;
	default: return pow(x, alpha);
	}
}

/* UNARY: every fn, 9 x 37 on 4 cores; a NaN input stays NaN */
static void card_unary(struct optest *t, uint32_t dt)
{
	static const struct { uint32_t fn; float alpha, beta, lo, hi; } c[] = {
		{ SPYRE_KFN_EXP, 0, 0, -4, 4 }, { SPYRE_KFN_LOG, 0, 0, 0.01f, 8 }, { SPYRE_KFN_TANH, 0, 0, -4, 4 },
		{ SPYRE_KFN_SIGMOID, 0, 0, -6, 6 }, { SPYRE_KFN_RSQRT, 0, 0, 0.01f, 8 }, { SPYRE_KFN_SQRT, 0, 0, 0, 8 },
		{ SPYRE_KFN_RECIP, 0, 0, 0.1f, 8 }, { SPYRE_KFN_ABS, 0, 0, -4, 4 }, { SPYRE_KFN_GELU_TANH, 0, 0, -5, 5 },
		{ SPYRE_KFN_SCALE, 0.125f, -1, -4, 4 }, { SPYRE_KFN_POW, 2, 0, -3, 3 }, { SPYRE_KFN_POW, 0.5f, 0, 0, 4 },
	};
	const uint32_t m = 9, n = 37;

	for (unsigned i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		float x[9 * 37], y[9 * 37], r[9 * 37];
		struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_UNARY, .dtype = dt, .cores = 4, .m = m,
					 .n = n, .fn = c[i].fn, .alpha = c[i].alpha, .beta = c[i].beta };
		struct dslot sl[] = { { x, m, n, -1, 0 }, { y, m, n, -1, 1 } };
		bool exact = c[i].fn == SPYRE_KFN_ABS, one = c[i].fn == SPYRE_KFN_SCALE;
		char what[96];

		fillr(x, m * n, c[i].lo, c[i].hi, i + 7);
		x[5] = NAN;
		for (uint64_t j = 0; j < m * n; j++)
			r[j] = (float)un_ref(c[i].fn, as_dt(x[j], dt), c[i].alpha, c[i].beta);
		snprintf(what, sizeof(what), "unary fn %u dt %u alpha %g", c[i].fn, dt, (double)c[i].alpha);
		check_case(t, what, &d, sl, 2, 1, r, exact ? 0 : one ? tol_of(dt) + 1e-6 : 4 * tol_of(dt) + 1e-6,
			   exact ? 0 : 1e-5);
	}
}

/* REDUCE: sum, mean, max of 37 rows of 45 on 4 cores (rows split in sticks of Y); a NaN row, a -inf */
static void card_reduce(struct optest *t, uint32_t dt)
{
	const uint32_t m = 37, n = 45;

	for (uint32_t fn = SPYRE_KFN_SUM; fn <= SPYRE_KFN_RMAX; fn++) {
		float x[37 * 45], y[37], r[37];
		struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_REDUCE, .dtype = dt, .cores = 4, .m = m,
					 .n = n, .fn = fn };
		struct dslot sl[] = { { x, m, n, -1, 0 }, { y, 1, m, -1, 1 } };
		double atol = 0;
		char what[64];

		fillr(x, m * n, -2, 3, fn);
		x[5 * n + 3] = NAN;
		x[7 * n] = -INFINITY;
		for (uint32_t i = 0; i < m; i++) {
			double sm = 0, sa = 0, mx = -INFINITY;
			bool nan = false;

			for (uint32_t j = 0; j < n; j++) {
				double v = as_dt(x[i * n + j], dt);

				nan |= isnan(v);
				sm += v;
				sa += fabs(v);
				mx = fmax(mx, v);
			}
			r[i] = nan ? NAN : (float)(fn == SPYRE_KFN_SUM ? sm : fn == SPYRE_KFN_MEAN ? sm / n : mx);
			if (isfinite(sa))
				atol = fmax(atol, sa * (n + 2) / 16777216.0);
		}
		snprintf(what, sizeof(what), "reduce fn %u dt %u", fn, dt);
		check_case(t, what, &d, sl, 2, 1, r, fn == SPYRE_KFN_RMAX ? 0 : tol_of(dt), atol);
	}
}

/* log_softmax: both strategies (the naive one's work slot bound by the cache), a causal -inf mask */
static void card_log_softmax(struct optest *t, uint32_t dt)
{
	const uint32_t m = 9, n = 45;

	for (int st = 0; st < 2; st++) {
		float x[9 * 45], y[9 * 45], r[9 * 45];
		struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_SOFTMAX, .dtype = dt, .cores = 4, .m = m,
					 .n = n, .flags = SPYRE_KF_LOG,
					 .strategy = st ? SPYRE_KSTRAT_NAIVE : SPYRE_KSTRAT_SCRATCHPAD };
		struct dslot sl[] = { { x, m, n, -1, 0 }, { y, m, n, -1, 1 } };
		double rtol = tol_of(dt) + 64 / 16777216.0;
		char what[64];

		fillr(x, m * n, -8, 8, 40 + st);
		for (uint32_t i = 0; i < m; i++)
			for (uint32_t j = i + 1; j < n; j++)
				x[i * n + j] = -INFINITY;
		for (uint32_t i = 0; i < m; i++) {
			double mx = -INFINITY, sum = 0;

			for (uint32_t j = 0; j < n; j++)
				mx = fmax(mx, as_dt(x[i * n + j], dt));
			for (uint32_t j = 0; j < n; j++)
				sum += exp(as_dt(x[i * n + j], dt) - mx);
			for (uint32_t j = 0; j < n; j++)
				r[i * n + j] = (float)(as_dt(x[i * n + j], dt) - mx - log(sum));
		}
		snprintf(what, sizeof(what), "log_softmax %s dt %u", st ? "naive" : "scratchpad", dt);
		check_case(t, what, &d, sl, 2, 1, r, rtol, rtol * 20);
	}
}

/* WHERE: tensors, -inf / +inf scalars (masked_fill), NaN on the side not taken */
static void card_where(struct optest *t, uint32_t dt)
{
	static const struct { uint32_t flags; float alpha, beta; } c[] = {
		{ 0, 0, 0 }, { SPYRE_KF_SCALAR_A, -INFINITY, 0 }, { SPYRE_KF_SCALAR_B, 0, INFINITY },
		{ SPYRE_KF_SCALAR_A | SPYRE_KF_SCALAR_B, -INFINITY, 0.5f },
	};
	const uint32_t m = 37, n = 45;

	for (unsigned i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		bool sa = c[i].flags & SPYRE_KF_SCALAR_A, sb = c[i].flags & SPYRE_KF_SCALAR_B;
		float cm[37 * 45], a[37 * 45], b[37 * 45], y[37 * 45], r[37 * 45];
		struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_WHERE, .dtype = dt, .cores = 4, .m = m,
					 .n = n, .flags = c[i].flags, .alpha = c[i].alpha, .beta = c[i].beta };
		struct dslot sl[4] = { { cm, m, n, SPYRE_DT_INT8, 0 } };
		uint32_t ns = 1;
		char what[64];

		fillr(cm, m * n, -1, 1, i);
		fillr(a, m * n, -3, 3, i + 1);
		fillr(b, m * n, -3, 3, i + 2);
		for (uint32_t j = 0; j < m * n; j++) {
			cm[j] = cm[j] < 0 ? 0 : cm[j] < 0.5f ? 1 : -3;
			if (j % 5 == 1)
				a[j] = NAN;
			if (j % 7 == 2)
				b[j] = NAN;
			r[j] = cm[j] != 0 ? as_dt(sa ? c[i].alpha : a[j], dt) : as_dt(sb ? c[i].beta : b[j], dt);
		}
		if (!sa)
			sl[ns++] = (struct dslot){ a, m, n, -1, 0 };
		if (!sb)
			sl[ns++] = (struct dslot){ b, m, n, -1, 0 };
		sl[ns++] = (struct dslot){ y, m, n, -1, 1 };
		snprintf(what, sizeof(what), "where flags 0x%x dt %u", c[i].flags, dt);
		check_case(t, what, &d, sl, ns, ns - 1, r, 0, 0);
	}
}

/* TRIL / TRIU: 2 matrices of 9 rows x 45, diagonals 0 and 1 */
static void card_tril(struct optest *t, uint32_t dt)
{
	const uint32_t m = 18, n = 45, k = 9;

	for (int up = 0; up < 2; up++) {
		float x[18 * 45], y[18 * 45], r[18 * 45];
		struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_TRIL, .dtype = dt, .cores = 4, .m = m,
					 .n = n, .k = k, .fn = up ? SPYRE_KFN_TRIU : SPYRE_KFN_TRIL, .alpha = (float)up };
		struct dslot sl[] = { { x, m, n, -1, 0 }, { y, m, n, -1, 1 } };
		char what[64];

		fillr(x, m * n, -3, 3, 60 + up);
		for (uint32_t i = 0; i < m; i++)
			for (uint32_t j = 0; j < n; j++) {
				int dc = (int)j - (int)(i % k);

				r[i * n + j] = (up ? dc >= 1 : dc <= 0) ? as_dt(x[i * n + j], dt) : 0;
			}
		snprintf(what, sizeof(what), "%s dt %u", up ? "triu" : "tril", dt);
		check_case(t, what, &d, sl, 2, 1, r, 0, 0);
	}
}

/* PERMUTE: rows of whole sticks, stick tiles, dense */
static void card_permute(struct optest *t, uint32_t dt)
{
	uint32_t kr = dt == SPYRE_DT_FP32 ? 32 : 64;
	const struct { uint32_t batch, m, n, k; } c[] = { { 2, 5, 3, kr }, { 2, 64, 128, 1 }, { 3, 7, 5, 1 } };

	for (unsigned i = 0; i < 3; i++) {
		uint64_t tot = (uint64_t)c[i].batch * c[i].m * c[i].n * c[i].k;
		float *x = calloc(tot, 4), *y = calloc(tot, 4), *r = calloc(tot, 4);
		struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_PERMUTE, .dtype = dt, .cores = 4,
					 .batch = c[i].batch, .m = c[i].m, .n = c[i].n, .k = c[i].k };
		struct dslot sl[] = { { x, 1, tot, -1, 0, 0 }, { y, 1, tot, -1, 1, 1 } };
		char what[64];

		if (!x || !y || !r)
			goto next;
		fillr(x, tot, -3, 3, 70 + i);
		for (uint64_t b = 0; b < c[i].batch; b++)
			for (uint64_t p = 0; p < c[i].m; p++)
				for (uint64_t j = 0; j < c[i].n; j++)
					for (uint64_t e = 0; e < c[i].k; e++)
						r[((b * c[i].n + j) * c[i].m + p) * c[i].k + e] =
							as_dt(x[((b * c[i].m + p) * c[i].n + j) * c[i].k + e], dt);
		snprintf(what, sizeof(what), "permute %ux%ux%ux%u dt %u", c[i].batch, c[i].m, c[i].n, c[i].k, dt);
		check_case(t, what, &d, sl, 2, 1, r, 0, 0);
next:
		free(x);
		free(y);
		free(r);
	}
}

/* CAT: 2 pieces of a stick's width (DMA), 3 of 5 columns (on chip) */
static void card_cat(struct optest *t, uint32_t dt)
{
	const struct { uint32_t n, k; } c[] = { { dt == SPYRE_DT_FP32 ? 32 : 64, 2 }, { 5, 3 } };
	const uint32_t m = 37;

	for (unsigned i = 0; i < 2; i++) {
		uint32_t n = c[i].n, k = c[i].k;
		float x[3][37 * 64], y[37 * 64 * 3], r[37 * 64 * 3];
		struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_CAT, .dtype = dt, .cores = 4, .m = m,
					 .n = n, .k = k };
		struct dslot sl[4];
		char what[64];

		for (uint32_t p = 0; p < k; p++) {
			fillr(x[p], m * n, -3, 3, 80 + p);
			sl[p] = (struct dslot){ x[p], m, n, -1, 0 };
			for (uint32_t a = 0; a < m; a++)
				for (uint32_t j = 0; j < n; j++)
					r[a * n * k + p * n + j] = as_dt(x[p][a * n + j], dt);
		}
		sl[k] = (struct dslot){ y, m, (uint64_t)n * k, -1, 1 };
		snprintf(what, sizeof(what), "cat %u x %ux%u dt %u", k, m, n, dt);
		check_case(t, what, &d, sl, k + 1, k, r, 0, 0);
	}
}

TEST_F(kc, ops_of_0_5_against_the_cpu)
{
	struct optest t = { .md = _metadata, .dev = self->dev, .cache = self->cache };

	ASSERT_EQ(0, spyre_stream_create(self->dev, SPYRE_STREAM_PRIORITY_NORMAL, &t.s));
	for (unsigned i = 0; i < 3; i++) {
		card_binary(&t, card_dts[i]);
		card_unary(&t, card_dts[i]);
		card_reduce(&t, card_dts[i]);
		card_log_softmax(&t, card_dts[i]);
		card_where(&t, card_dts[i]);
		card_tril(&t, card_dts[i]);
		card_permute(&t, card_dts[i]);
		card_cat(&t, card_dts[i]);
	}
	spyre_stream_destroy(t.s);
	TH_LOG("%u cases of the ops of 0.5 on the card, %u failed", t.cases, t.failed);
	EXPECT_EQ(0u, t.failed);
	EXPECT_EQ(3u * (11 + 12 + 3 + 2 + 4 + 2 + 3 + 2), t.cases);
}

/* Descriptors of the ops of 0.5 a framework could get wrong: each refused with the field named. */
TEST_F(kc, ops_of_0_5_careless_descriptors)
{
	struct spyre_kdesc b = { .size = sizeof(b), .op = SPYRE_KOP_BINARY, .dtype = SPYRE_DT_FP16, .cores = 4,
				 .m = 4, .n = 8 }, d;
	spyre_kernel_t *k = NULL;

	d = b, d.fn = 9;
	EXPECT_EQ(-EINVAL, spyre_kernel_get(self->cache, &d, &k));
	EXPECT_NE(NULL, strstr(spyre_last_error(), "fn 9 is not a function of binary"));
	d = b, d.flags = SPYRE_KF_SCALAR_A;
	EXPECT_EQ(-EINVAL, spyre_kernel_get(self->cache, &d, &k));
	EXPECT_NE(NULL, strstr(spyre_last_error(), "do not apply"));
	d = b, d.op = SPYRE_KOP_UNARY, d.fn = SPYRE_KFN_LOG, d.beta = 1;
	EXPECT_EQ(-EINVAL, spyre_kernel_get(self->cache, &d, &k));
	EXPECT_NE(NULL, strstr(spyre_last_error(), "beta must be 0"));
	d = b, d.op = SPYRE_KOP_CAT, d.k = 12;
	EXPECT_EQ(-EINVAL, spyre_kernel_get(self->cache, &d, &k));
	EXPECT_NE(NULL, strstr(spyre_last_error(), "k (pieces) must be 2..8"));
	d = b, d.op = SPYRE_KOP_PERMUTE, d.k = 5;
	EXPECT_EQ(-EINVAL, spyre_kernel_get(self->cache, &d, &k));
	EXPECT_NE(NULL, strstr(spyre_last_error(), "multiple of 128"));
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
