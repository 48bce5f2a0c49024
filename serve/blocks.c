// SPDX-License-Identifier: MIT
/*
 * blocks.c - the KV block allocator and prefix cache (blocks.h).
 *
 * The free list is doubly linked through prev/next (indices, -1 ends); the
 * prefix table is open addressing with linear probing over 2^k >= 2 *
 * num_blocks slots holding block ids, deletion by backward shift.
 */
#include <stdlib.h>
#include <string.h>

#include "blocks.h"

struct spyre_blocks {
	uint32_t n, bs;
	uint32_t *ref;
	int32_t *prev, *next;	/* free list links */
	int32_t head, tail;
	uint32_t nfree;
	bool *cached;
	uint64_t *hash, *parent;	/* of a cached block */
	int32_t *toks;		/* [n][bs]: a cached block's token ids */
	int32_t *table;		/* [tsize]: block id or -1 */
	uint32_t tmask;
};

static uint64_t mix(uint64_t x)
{
	/* splitmix64's finalizer */
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

uint64_t spyre_blocks_hash(uint64_t parent, const int32_t *tokens, uint32_t block_size)
{
	uint64_t h = mix(parent ^ 0x9e3779b97f4a7c15ull);

	for (uint32_t i = 0; i < block_size; i++)
		h = mix(h + (uint32_t)tokens[i] + 0x9e3779b97f4a7c15ull);
	return h;
}

struct spyre_blocks *spyre_blocks_new(uint32_t num_blocks, uint32_t block_size)
{
	struct spyre_blocks *b;
	uint32_t tsize = 16;

	if (!num_blocks || !block_size || num_blocks > (1u << 26) || block_size > 4096)
		return NULL;
	while (tsize < 2 * num_blocks)
		tsize *= 2;
	b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	b->n = num_blocks;
	b->bs = block_size;
	b->tmask = tsize - 1;
	b->ref = calloc(num_blocks, sizeof(*b->ref));
	b->prev = calloc(num_blocks, sizeof(*b->prev));
	b->next = calloc(num_blocks, sizeof(*b->next));
	b->cached = calloc(num_blocks, sizeof(*b->cached));
	b->hash = calloc(num_blocks, sizeof(*b->hash));
	b->parent = calloc(num_blocks, sizeof(*b->parent));
	b->toks = calloc((size_t)num_blocks * block_size, sizeof(*b->toks));
	b->table = malloc(tsize * sizeof(*b->table));
	if (!b->ref || !b->prev || !b->next || !b->cached || !b->hash || !b->parent || !b->toks || !b->table) {
		spyre_blocks_free(b);
		return NULL;
	}
	for (uint32_t i = 0; i < tsize; i++)
		b->table[i] = -1;
	for (uint32_t i = 0; i < num_blocks; i++) {
		b->prev[i] = (int32_t)i - 1;
		b->next[i] = i + 1 < num_blocks ? (int32_t)i + 1 : -1;
	}
	b->head = 0;
	b->tail = (int32_t)num_blocks - 1;
	b->nfree = num_blocks;
	return b;
}

void spyre_blocks_free(struct spyre_blocks *b)
{
	if (!b)
		return;
	free(b->ref);
	free(b->prev);
	free(b->next);
	free(b->cached);
	free(b->hash);
	free(b->parent);
	free(b->toks);
	free(b->table);
	free(b);
}

uint32_t spyre_blocks_total(const struct spyre_blocks *b)
{
	return b->n;
}

uint32_t spyre_blocks_num_free(const struct spyre_blocks *b)
{
	return b->nfree;
}

uint32_t spyre_blocks_refcount(const struct spyre_blocks *b, int32_t block)
{
	return block >= 0 && (uint32_t)block < b->n ? b->ref[block] : 0;
}

bool spyre_blocks_is_cached(const struct spyre_blocks *b, int32_t block)
{
	return block >= 0 && (uint32_t)block < b->n && b->cached[block];
}

static void list_remove(struct spyre_blocks *b, int32_t i)
{
	if (b->prev[i] >= 0)
		b->next[b->prev[i]] = b->next[i];
	else
		b->head = b->next[i];
	if (b->next[i] >= 0)
		b->prev[b->next[i]] = b->prev[i];
	else
		b->tail = b->prev[i];
	b->prev[i] = b->next[i] = -1;
	b->nfree--;
}

static void list_append(struct spyre_blocks *b, int32_t i)
{
	b->prev[i] = b->tail;
	b->next[i] = -1;
	if (b->tail >= 0)
		b->next[b->tail] = i;
	else
		b->head = i;
	b->tail = i;
	b->nfree++;
}

/* The table slot holding @block (cached), or -1. */
static int64_t table_find_block(const struct spyre_blocks *b, int32_t block)
{
	for (uint32_t s = (uint32_t)b->hash[block] & b->tmask;; s = (s + 1) & b->tmask) {
		if (b->table[s] == block)
			return s;
		if (b->table[s] < 0)
			return -1;
	}
}

static void uncache(struct spyre_blocks *b, int32_t block)
{
	int64_t at = table_find_block(b, block);
	uint32_t hole, s;

	b->cached[block] = false;
	if (at < 0)
		return;
	/* backward-shift deletion keeps every probe run unbroken */
	hole = (uint32_t)at;
	b->table[hole] = -1;
	for (s = (hole + 1) & b->tmask; b->table[s] >= 0; s = (s + 1) & b->tmask) {
		uint32_t home = (uint32_t)b->hash[b->table[s]] & b->tmask;

		/* move the entry at s into the hole when its home is not in (hole, s] */
		if (((s - home) & b->tmask) >= ((s - hole) & b->tmask)) {
			b->table[hole] = b->table[s];
			b->table[s] = -1;
			hole = s;
		}
	}
}

int32_t spyre_blocks_alloc(struct spyre_blocks *b)
{
	int32_t i = b->head;

	if (i < 0)
		return -1;
	list_remove(b, i);
	if (b->cached[i])
		uncache(b, i);
	b->ref[i] = 1;
	return i;
}

void spyre_blocks_ref(struct spyre_blocks *b, int32_t block)
{
	if (!b->ref[block]++)
		list_remove(b, block);
}

void spyre_blocks_release(struct spyre_blocks *b, int32_t block)
{
	if (b->ref[block] && !--b->ref[block])
		list_append(b, block);
}

int32_t spyre_blocks_lookup(const struct spyre_blocks *b, uint64_t h, uint64_t parent, const int32_t *tokens)
{
	for (uint32_t s = (uint32_t)h & b->tmask; b->table[s] >= 0; s = (s + 1) & b->tmask) {
		int32_t i = b->table[s];

		if (b->hash[i] == h && b->parent[i] == parent &&
		    !memcmp(b->toks + (size_t)i * b->bs, tokens, b->bs * sizeof(*tokens)))
			return i;
	}
	return -1;
}

bool spyre_blocks_register(struct spyre_blocks *b, int32_t block, uint64_t h, uint64_t parent,
			   const int32_t *tokens)
{
	uint32_t s;

	if (b->cached[block] || spyre_blocks_lookup(b, h, parent, tokens) >= 0)
		return false;
	b->cached[block] = true;
	b->hash[block] = h;
	b->parent[block] = parent;
	memcpy(b->toks + (size_t)block * b->bs, tokens, b->bs * sizeof(*tokens));
	for (s = (uint32_t)h & b->tmask; b->table[s] >= 0; s = (s + 1) & b->tmask)
		;
	b->table[s] = block;
	return true;
}
