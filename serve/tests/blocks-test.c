// SPDX-License-Identifier: MIT
/*
 * Description: the engine's KV block allocator (serve/blocks.h). Allocation
 * order and exhaustion (-1 with none free); reference counts (a shared
 * block stays in use until its last release); the free list in LRU order
 * (released blocks are reused last, a cached free block is found by lookup
 * and taken back by ref without being allocated twice); register/lookup of
 * chained hashes (the same tokens after another parent miss, a duplicate
 * register is refused, a forged hash collision is rejected by the token
 * comparison); eviction drops the cache entry, and the table stays
 * consistent through 20,000 random operations checked against a model
 * (refcounts, free count, every cached block found by its hash); no leak:
 * every block free at the end.
 */
#include <stdlib.h>
#include <string.h>

#include "blocks.h"
#include "../../tests/tap.h"

static void test_alloc_ref(void)
{
	struct spyre_blocks *b = spyre_blocks_new(4, 2);

	TAP_CHECK(b != NULL, "new");
	TAP_CHECK(spyre_blocks_new(0, 2) == NULL && spyre_blocks_new(4, 0) == NULL, "sizes of 0 refused");
	TAP_EQ(4u, spyre_blocks_num_free(b));
	TAP_EQ(0, spyre_blocks_alloc(b));
	TAP_EQ(1, spyre_blocks_alloc(b));
	TAP_EQ(2, spyre_blocks_alloc(b));
	TAP_EQ(3, spyre_blocks_alloc(b));
	TAP_EQ(-1, spyre_blocks_alloc(b));
	TAP_EQ(0u, spyre_blocks_num_free(b));
	spyre_blocks_ref(b, 1);
	TAP_EQ(2u, spyre_blocks_refcount(b, 1));
	spyre_blocks_release(b, 1);
	TAP_EQ(0u, spyre_blocks_num_free(b));
	TAP_EQ(-1, spyre_blocks_alloc(b));
	spyre_blocks_release(b, 1);
	TAP_EQ(1u, spyre_blocks_num_free(b));
	/* LRU: released 2 then 0: allocation gives 1 (oldest), 2, then 0 */
	spyre_blocks_release(b, 2);
	spyre_blocks_release(b, 0);
	TAP_EQ(1, spyre_blocks_alloc(b));
	TAP_EQ(2, spyre_blocks_alloc(b));
	TAP_EQ(0, spyre_blocks_alloc(b));
	/* release of a free block is a no-op */
	spyre_blocks_release(b, 3);
	spyre_blocks_release(b, 3);
	TAP_EQ(1u, spyre_blocks_num_free(b));
	TAP_EQ(0u, spyre_blocks_refcount(b, 3));
	TAP_EQ(0u, spyre_blocks_refcount(b, 99));
	spyre_blocks_release(b, 0);
	spyre_blocks_release(b, 1);
	spyre_blocks_release(b, 2);
	TAP_EQ(4u, spyre_blocks_num_free(b));
	spyre_blocks_free(b);
}

static void test_prefix(void)
{
	struct spyre_blocks *b = spyre_blocks_new(4, 3);
	const int32_t t0[3] = { 1, 2, 3 }, t1[3] = { 4, 5, 6 };
	uint64_t h0 = spyre_blocks_hash(SPYRE_BLOCK_HASH_SEED, t0, 3), h1 = spyre_blocks_hash(h0, t1, 3);
	uint64_t h1b = spyre_blocks_hash(SPYRE_BLOCK_HASH_SEED, t1, 3);
	int32_t x = spyre_blocks_alloc(b), y = spyre_blocks_alloc(b), z;

	TAP_CHECK(h1 != h1b, "the chain changes the hash");
	TAP_EQ(-1, spyre_blocks_lookup(b, h0, SPYRE_BLOCK_HASH_SEED, t0));
	TAP_CHECK(spyre_blocks_register(b, x, h0, SPYRE_BLOCK_HASH_SEED, t0), "register");
	TAP_CHECK(spyre_blocks_register(b, y, h1, h0, t1), "register");
	TAP_CHECK(!spyre_blocks_register(b, 2, h0, SPYRE_BLOCK_HASH_SEED, t0), "a duplicate is refused");
	TAP_EQ(x, spyre_blocks_lookup(b, h0, SPYRE_BLOCK_HASH_SEED, t0));
	TAP_EQ(y, spyre_blocks_lookup(b, h1, h0, t1));
	/* the same tokens after another parent: a miss */
	TAP_EQ(-1, spyre_blocks_lookup(b, h1b, SPYRE_BLOCK_HASH_SEED, t1));
	/* a forged collision: the right hash, other tokens or parent */
	TAP_EQ(-1, spyre_blocks_lookup(b, h1, h0, t0));
	TAP_EQ(-1, spyre_blocks_lookup(b, h1, h1, t1));
	/* freed, still cached: found, taken back by ref (not allocated again) */
	spyre_blocks_release(b, y);
	spyre_blocks_release(b, x);
	TAP_EQ(4u, spyre_blocks_num_free(b));
	TAP_EQ(y, spyre_blocks_lookup(b, h1, h0, t1));
	spyre_blocks_ref(b, y);
	TAP_EQ(3u, spyre_blocks_num_free(b));
	TAP_CHECK(spyre_blocks_is_cached(b, y), "still cached when in use again");
	/* allocation: 2, 3 (never used), then x (LRU) -- evicted from the cache */
	TAP_EQ(2, spyre_blocks_alloc(b));
	TAP_EQ(3, spyre_blocks_alloc(b));
	z = spyre_blocks_alloc(b);
	TAP_EQ(x, z);
	TAP_CHECK(!spyre_blocks_is_cached(b, x), "evicted");
	TAP_EQ(-1, spyre_blocks_lookup(b, h0, SPYRE_BLOCK_HASH_SEED, t0));
	TAP_EQ(y, spyre_blocks_lookup(b, h1, h0, t1));
	TAP_EQ(-1, spyre_blocks_alloc(b));
	spyre_blocks_release(b, 2);
	spyre_blocks_release(b, 3);
	spyre_blocks_release(b, x);
	spyre_blocks_release(b, y);
	TAP_EQ(4u, spyre_blocks_num_free(b));
	spyre_blocks_free(b);
}

/* Random operations against a model: refcounts, the free count, lookups. */
static void test_random(void)
{
	enum { N = 64, BS = 2, OPS = 20000 };
	struct spyre_blocks *b = spyre_blocks_new(N, BS);
	uint32_t ref[N] = { 0 }, nfree = N;
	int32_t toks[N][BS];
	bool cached[N] = { false };
	uint64_t hash[N], rng = 88172645463325252ull;
	uint32_t bad = 0;

	for (int op = 0; op < OPS; op++) {
		uint32_t r, i;

		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		r = (uint32_t)(rng >> 32);
		i = r % N;
		switch ((r >> 8) % 4) {
		case 0: {	/* alloc */
			int32_t x = spyre_blocks_alloc(b);

			if (!nfree) {
				bad += x != -1;
				break;
			}
			if (x < 0 || ref[x]) {
				bad++;
				break;
			}
			ref[x] = 1;
			cached[x] = false;
			nfree--;
			break;
		}
		case 1:	/* release */
			if (ref[i]) {
				spyre_blocks_release(b, (int32_t)i);
				if (!--ref[i])
					nfree++;
			}
			break;
		case 2:	/* register an in-use block with fresh tokens */
			if (ref[i] && !cached[i]) {
				toks[i][0] = (int32_t)op;
				toks[i][1] = (int32_t)(r & 0xff);
				hash[i] = spyre_blocks_hash(7, toks[i], BS);
				if (!spyre_blocks_register(b, (int32_t)i, hash[i], 7, toks[i]))
					bad++;
				cached[i] = true;
			}
			break;
		case 3:	/* hit a cached block */
			if (cached[i]) {
				if (spyre_blocks_lookup(b, hash[i], 7, toks[i]) != (int32_t)i)
					bad++;
				spyre_blocks_ref(b, (int32_t)i);
				if (!ref[i]++)
					nfree--;
			}
			break;
		}
		if (spyre_blocks_num_free(b) != nfree)
			bad++;
	}
	for (uint32_t i = 0; i < N; i++) {
		if (spyre_blocks_refcount(b, (int32_t)i) != ref[i] || spyre_blocks_is_cached(b, (int32_t)i) != cached[i])
			bad++;
		if (cached[i] && spyre_blocks_lookup(b, hash[i], 7, toks[i]) != (int32_t)i)
			bad++;
		while (ref[i]) {
			spyre_blocks_release(b, (int32_t)i);
			ref[i]--;
		}
	}
	TAP_EQ(0u, bad);
	TAP_EQ((uint32_t)N, spyre_blocks_num_free(b));
	spyre_blocks_free(b);
}

static const struct tap_case cases[] = {
	{ "alloc-ref", test_alloc_ref },
	{ "prefix", test_prefix },
	{ "random", test_random },
};

int main(int argc, char **argv)
{
	return TAP_RUN(cases, argc, argv);
}
