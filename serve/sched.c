// SPDX-License-Identifier: MIT
/*
 * sched.c - the scheduler: which rows of which requests the next step runs
 * (serve/README.md, "Scheduling"). Every decision is a function of the
 * engine's lists and the block allocator; called under the engine's lock.
 */
#include "engine_int.h"

void spyre_list_push_back(struct spyre_req_list *l, struct spyre_req *r)
{
	r->next = NULL;
	r->prev = l->tail;
	if (l->tail)
		l->tail->next = r;
	else
		l->head = r;
	l->tail = r;
	l->count++;
}

void spyre_list_push_front(struct spyre_req_list *l, struct spyre_req *r)
{
	r->prev = NULL;
	r->next = l->head;
	if (l->head)
		l->head->prev = r;
	else
		l->tail = r;
	l->head = r;
	l->count++;
}

void spyre_list_remove(struct spyre_req_list *l, struct spyre_req *r)
{
	if (r->prev)
		r->prev->next = r->next;
	else
		l->head = r->next;
	if (r->next)
		r->next->prev = r->prev;
	else
		l->tail = r->prev;
	r->prev = r->next = NULL;
	l->count--;
}

/* Last block first: a request's prefix goes to the free list's tail last, so it is evicted last. */
void spyre_req_release_blocks(struct spyre_engine *e, struct spyre_req *r)
{
	while (r->nblocks)
		spyre_blocks_release(e->blocks, r->blocks[--r->nblocks]);
}

/* The chained hash of whole block @i of @r (its tokens all known). */
static uint64_t block_hash(struct spyre_engine *e, struct spyre_req *r, uint32_t i)
{
	while (r->nhashed <= i) {
		uint32_t k = r->nhashed;
		uint64_t parent = k ? r->hashes[k - 1] : SPYRE_BLOCK_HASH_SEED;

		r->hashes[k] = spyre_blocks_hash(parent, r->tokens + (size_t)k * e->block_size, e->block_size);
		r->nhashed++;
	}
	return r->hashes[i];
}

/* Offer every whole block of @r computed so far to the prefix cache. */
void spyre_req_register_blocks(struct spyre_engine *e, struct spyre_req *r)
{
	if (e->opts.no_prefix_caching)
		return;
	while ((r->nregistered + 1) * e->block_size <= r->computed && r->nregistered < r->nblocks) {
		uint32_t i = r->nregistered;
		uint64_t h = block_hash(e, r, i);

		spyre_blocks_register(e->blocks, r->blocks[i], h, i ? r->hashes[i - 1] : SPYRE_BLOCK_HASH_SEED,
				      r->tokens + (size_t)i * e->block_size);
		r->nregistered++;
	}
}

/* Blocks for positions 0 .. ntok - 1 of @r: false when none is free. */
static bool ensure_blocks(struct spyre_engine *e, struct spyre_req *r, uint32_t ntok)
{
	while (r->nblocks * e->block_size < ntok) {
		int32_t b = spyre_blocks_alloc(e->blocks);

		if (b < 0)
			return false;
		r->blocks[r->nblocks++] = b;
	}
	return true;
}

/* Recompute later: blocks freed, back to the front of the waiting queue. */
static void preempt(struct spyre_engine *e, struct spyre_req *r)
{
	spyre_req_release_blocks(e, r);
	r->computed = 0;
	r->nregistered = 0;
	spyre_list_remove(&e->running, r);
	r->state = SPYRE_REQ_WAITING;
	spyre_list_push_front(&e->waiting, r);
	e->stats.preemptions++;
}

/* A request's context when it ends: prompt + max_tokens (clipped to its limit at add). */
static uint32_t final_context(const struct spyre_req *r)
{
	return r->prompt_len + r->max_tokens;
}

/* sendnn-inference's volumetric rule: (running + 1) x the largest final context <= max_batch_tkv. */
static bool tkv_allows(const struct spyre_engine *e, const struct spyre_req *w)
{
	uint32_t m = final_context(w);

	if (!e->opts.max_batch_tkv)
		return true;
	for (const struct spyre_req *r = e->running.head; r; r = r->next)
		if (final_context(r) > m)
			m = final_context(r);
	return (uint64_t)(e->running.count + 1) * m <= e->opts.max_batch_tkv;
}

static bool prefilling(const struct spyre_req *r)
{
	return r->computed < r->prefill_end;
}

/*
 * Admit the waiting queue's head when max_num_seqs and max_batch_tkv allow
 * and its blocks are free (the cached
 * prefix's blocks taken by reference, the rest allocated now: admission never
 * overcommits). NULL when the queue is empty or the head does not fit.
 */
static struct spyre_req *admit(struct spyre_engine *e)
{
	struct spyre_req *r = e->waiting.head;
	uint32_t bs = e->block_size, hits = 0, hit_free = 0, need;
	if (!r || e->running.count >= e->opts.max_num_seqs || !tkv_allows(e, r))
		return NULL;
	if (!e->opts.no_prefix_caching) {
		/* whole blocks before the one holding the last token */
		uint32_t max_hits = (r->n_tokens - 1) / bs;

		for (; hits < max_hits; hits++) {
			uint64_t h = block_hash(e, r, hits);
			int32_t b = spyre_blocks_lookup(e->blocks, h, hits ? r->hashes[hits - 1] : SPYRE_BLOCK_HASH_SEED,
							r->tokens + (size_t)hits * bs);

			if (b < 0)
				break;
			if (!spyre_blocks_refcount(e->blocks, b))
				hit_free++;
		}
	}
	need = (r->n_tokens + bs - 1) / bs - hits;
	if (need + hit_free > spyre_blocks_num_free(e->blocks))
		return NULL;
	/* the hits first (off the free list), so allocating cannot evict them */
	for (uint32_t i = 0; i < hits; i++) {
		int32_t b = spyre_blocks_lookup(e->blocks, r->hashes[i], i ? r->hashes[i - 1] : SPYRE_BLOCK_HASH_SEED,
						r->tokens + (size_t)i * bs);

		spyre_blocks_ref(e->blocks, b);
		r->blocks[r->nblocks++] = b;
	}
	ensure_blocks(e, r, r->n_tokens);
	r->computed = hits * bs;
	r->nregistered = hits;
	r->prefill_end = r->n_tokens;
	if (!e->opts.no_prefix_caching) {
		e->stats.prefix_cache_queries += r->n_tokens;
		e->stats.prefix_cache_hits += (uint64_t)hits * bs;
	}
	if (!r->t_scheduled) {	/* first admission */
		r->cached_prompt_tokens = hits * bs < r->prompt_len ? hits * bs : r->prompt_len;
		e->stats.prompt_tokens_total += r->prompt_len;
	}
	spyre_list_remove(&e->waiting, r);
	r->state = SPYRE_REQ_RUNNING;
	spyre_list_push_back(&e->running, r);
	return r;
}

static void add_item(struct spyre_engine *e, struct spyre_req *r, uint32_t rows)
{
	struct spyre_sched_item *it = &e->items[e->nitems++];

	it->r = r;
	it->start = r->computed;
	it->rows = rows;
	it->samples = r->computed + rows == r->n_tokens;
}

void spyre_sched_plan(struct spyre_engine *e)
{
	uint32_t bs = e->block_size, rows = 0, chunk;
	struct spyre_req *r, *pre = NULL;

	e->nitems = 0;
	/* 1. every running decode, oldest first; a decode short of a block preempts the newest */
	for (r = e->running.head; r;) {
		bool self = false;

		if (prefilling(r)) {
			pre = r;
			r = r->next;
			continue;
		}
		while (!ensure_blocks(e, r, r->computed + 1)) {
			struct spyre_req *victim = e->running.tail;

			if (victim == pre)
				pre = NULL;
			self = victim == r;
			preempt(e, victim);
			if (self)
				break;
		}
		if (self)
			break;	/* r was the newest: nothing after it */
		add_item(e, r, 1);
		rows++;
		r = r->next;
	}
	/* 2. at most one prefill chunk: the ongoing prefill, else the waiting head if it fits */
	chunk = (e->opts.max_num_batched_tokens - rows) / bs * bs;
	if (!chunk)
		return;
	if (!pre)
		pre = admit(e);
	if (pre) {
		uint32_t left = pre->prefill_end - pre->computed;

		add_item(e, pre, left < chunk ? left : chunk);
	}
}
