/* SPDX-License-Identifier: MIT */
/*
 * blocks.h - the engine's KV block allocator: reference counts, a free list
 * in eviction order (LRU), and the prefix cache: a table from the hash of a
 * whole block (chained over the token ids of every block before it, as
 * vLLM's) to the block holding those tokens' K/V.
 *
 * A block is in use (ref > 0) or free (ref == 0, on the free list). A free
 * block may still hold a cached prefix (it is "evictable"): a lookup finds
 * it and spyre_blocks_ref() takes it off the free list. Allocation pops the
 * free list's head (the least recently freed block) and drops its cache
 * entry if it had one. Released blocks go to the tail; the engine releases a
 * request's blocks last-first, so its prefix (the blocks most likely to be
 * shared) is evicted last, as vLLM does.
 *
 * The hash of block i of a sequence is H(hash of block i-1, its block_size
 * token ids) (block 0 chains from a fixed seed); the table keeps the parent
 * hash and the token ids too and compares them on lookup, so a hash
 * collision never returns another prefix's block. Not thread-safe: the
 * engine calls it under its lock.
 */
#ifndef SPYRE_SERVE_BLOCKS_H
#define SPYRE_SERVE_BLOCKS_H

#include <stdbool.h>
#include <stdint.h>

#define SPYRE_BLOCK_HASH_SEED 0x5350595245ull	/* the parent of block 0 */

struct spyre_blocks;

struct spyre_blocks *spyre_blocks_new(uint32_t num_blocks, uint32_t block_size);
void spyre_blocks_free(struct spyre_blocks *b);

uint32_t spyre_blocks_total(const struct spyre_blocks *b);
uint32_t spyre_blocks_num_free(const struct spyre_blocks *b);	/* ref == 0, cached or not */
uint32_t spyre_blocks_refcount(const struct spyre_blocks *b, int32_t block);
bool spyre_blocks_is_cached(const struct spyre_blocks *b, int32_t block);

/* A block with ref 1 (its cache entry dropped), or -1 when none is free. */
int32_t spyre_blocks_alloc(struct spyre_blocks *b);
/* One more reference (a free cached block leaves the free list). */
void spyre_blocks_ref(struct spyre_blocks *b, int32_t block);
/* One reference less; at 0 the block goes to the free list's tail. */
void spyre_blocks_release(struct spyre_blocks *b, int32_t block);

/* The chained hash of a block of @block_size @tokens after @parent. */
uint64_t spyre_blocks_hash(uint64_t parent, const int32_t *tokens, uint32_t block_size);
/* The block caching @tokens after @parent (hash @h), or -1. Takes no reference. */
int32_t spyre_blocks_lookup(const struct spyre_blocks *b, uint64_t h, uint64_t parent, const int32_t *tokens);
/*
 * Record that @block (in use) holds @tokens after @parent (hash @h). When
 * another block already caches them nothing changes (false); true when
 * recorded.
 */
bool spyre_blocks_register(struct spyre_blocks *b, int32_t block, uint64_t h, uint64_t parent,
			   const int32_t *tokens);

#endif /* SPYRE_SERVE_BLOCKS_H */
