// SPDX-License-Identifier: MIT
/*
 * Description: the engine's scheduler step by step (serve/engine.h, sched.c)
 * over a fake runner (engine-test-util.h: its next token is a hash of the
 * context it reads through the block table, so a wrong slot, block table,
 * prefix hit or recompute changes the tokens). At every step: the batch's
 * rows per sequence, positions and slot mappings, the waiting/running/
 * finished lists, the blocks each request holds and their reference counts,
 * and the invariants (block refcounts = holders, at most one prefill chunk,
 * rows <= max_num_batched_tokens, every position read was written there).
 * Cases: decodes interleaved with one prefill chunk; a long prompt over
 * several chunks; admission blocked until blocks free; preemption and
 * recompute forced by a tiny cache (final tokens unchanged); prefix hits for
 * shared prompts (blocks shared, refcounts, the last block recomputed, LRU
 * eviction); the volumetric limit (max_batch_tkv) holding a request back; stop on EOS (and ignore_eos), stop ids, max_tokens, the context
 * end; abort while waiting, mid-prefill, running and during the runner's
 * step (that step's token dropped); queue full -EAGAIN; bad
 * parameters -EINVAL/-E2BIG; a runner failure finishing the step's requests
 * with ERROR; logits asked for only when a sequence samples.
 */
#include <errno.h>
#include <math.h>

#include "engine-test-util.h"

#define V 97

struct env {
	struct fake_runner *f;
	struct spyre_engine *e;
	struct recorder *rec;
	uint32_t bs, mnbt;
};

static struct env env_new(uint32_t bs, uint32_t num_blocks, uint32_t max_model_len, uint32_t max_num_seqs,
			   uint32_t mnbt, bool prefix)
{
	struct env v = { 0 };
	struct spyre_engine_opts o = { 0 };
	char err[256];

	v.f = fake_new(V, bs, num_blocks, max_model_len, -1);
	v.rec = malloc(sizeof(*v.rec));
	rec_init(v.rec);
	o.max_num_seqs = max_num_seqs;
	o.max_num_batched_tokens = mnbt;
	o.max_waiting = 8;
	o.no_prefix_caching = !prefix;
	o.seed = 42;
	v.bs = bs;
	v.mnbt = mnbt;
	if (spyre_engine_new(&v.f->r, &o, &v.e, err, sizeof(err)))
		tap_bail("engine: %s", err);
	return v;
}

static void env_free(struct env *v)
{
	spyre_engine_free(v->e);
	spyre_runner_free(&v->f->r);
	free(v->rec);
}

static uint64_t add(struct env *v, const int32_t *prompt, uint32_t n, uint32_t max_tokens)
{
	struct spyre_request_params p = req_params(prompt, n, max_tokens);
	uint64_t id = 0;
	char err[256];
	int rc = spyre_engine_add(v->e, &p, rec_event, v->rec, &id, err, sizeof(err));

	TAP_CHECK(rc == 0, "add: %d %s", rc, err);
	return id;
}

/* The invariants every step keeps. */
static void check_invariants(struct env *v, const char *where)
{
	struct spyre_engine_debug d;
	uint32_t holders[SPYRE_ENGINE_DEBUG_BLOCKS] = { 0 }, nblocks = v->f->r.num_blocks, prefills = 0;
	const struct fake_batch *b = v->f->nbatches ? &v->f->batches[v->f->nbatches - 1] : NULL;

	spyre_engine_debug_state(v->e, &d);
	for (uint32_t i = 0; i < d.n_running; i++) {
		TAP_CHECK(d.running[i].num_blocks * v->bs >= d.running[i].num_computed, "%s: request %llu holds %u "
			  "blocks for %u positions", where, (unsigned long long)d.running[i].id,
			  d.running[i].num_blocks, d.running[i].num_computed);
		for (uint32_t j = 0; j < d.running[i].num_blocks; j++)
			holders[d.running[i].blocks[j]]++;
	}
	for (uint32_t i = 0; i < d.n_waiting; i++)
		TAP_CHECK(!d.waiting[i].num_blocks, "%s: waiting request %llu holds blocks", where,
			  (unsigned long long)d.waiting[i].id);
	for (uint32_t i = 0; i < nblocks; i++)
		if (holders[i] != d.block_ref[i]) {
			TAP_CHECK(0, "%s: block %u has ref %u but %u holders", where, i, d.block_ref[i], holders[i]);
			break;
		}
	if (b) {
		TAP_CMP(b->num_tokens, <=, v->mnbt);
		for (uint32_t s = 0; s < b->num_seqs; s++)
			prefills += b->qs[s + 1] - b->qs[s] > 1;
		TAP_CMP(prefills, <=, 1u);
	}
	TAP_EQ(0u, v->f->bad);
}

static int step(struct env *v)
{
	int rc = spyre_engine_step(v->e);

	check_invariants(v, "step");
	return rc;
}

static void run_to_end(struct env *v)
{
	for (int i = 0; i < 2000 && step(v) != 0; i++)
		;
}

/* Expect the lists: waiting and running ids (0-terminated). */
static void expect_lists(struct env *v, const uint64_t *waiting, const uint64_t *running, const uint64_t *finished,
			 int line)
{
	struct spyre_engine_debug d;
	uint32_t n;

	spyre_engine_debug_state(v->e, &d);
	for (n = 0; waiting[n]; n++)
		TAP_CHECK(n < d.n_waiting && d.waiting[n].id == waiting[n], "line %d: waiting[%u] != %llu", line, n,
			  (unsigned long long)waiting[n]);
	TAP_CHECK(n == d.n_waiting, "line %d: %u waiting, expected %u", line, d.n_waiting, n);
	for (n = 0; running[n]; n++)
		TAP_CHECK(n < d.n_running && d.running[n].id == running[n], "line %d: running[%u] != %llu", line, n,
			  (unsigned long long)running[n]);
	TAP_CHECK(n == d.n_running, "line %d: %u running, expected %u", line, d.n_running, n);
	for (n = 0; finished[n]; n++)
		TAP_CHECK(n < d.n_finished && d.finished[n] == finished[n], "line %d: finished[%u] != %llu", line, n,
			  (unsigned long long)finished[n]);
	TAP_CHECK(n == d.n_finished, "line %d: %u finished, expected %u", line, d.n_finished, n);
}

#define LISTS(v, w, r, f) expect_lists(v, (const uint64_t[])w, (const uint64_t[])r, (const uint64_t[])f, __LINE__)
#define L(...) { __VA_ARGS__, 0 }
#define NONE { 0 }

/* The last batch: rows per sequence (0-terminated). */
static void expect_rows(struct env *v, const uint32_t *rows, int line)
{
	const struct fake_batch *b = &v->f->batches[v->f->nbatches - 1];
	uint32_t n;

	for (n = 0; rows[n]; n++)
		TAP_CHECK(n < b->num_seqs && b->qs[n + 1] - b->qs[n] == rows[n], "line %d: sequence %u has %u rows, "
			  "expected %u", line, n, n < b->num_seqs ? b->qs[n + 1] - b->qs[n] : 0, rows[n]);
	TAP_CHECK(n == b->num_seqs, "line %d: %u sequences, expected %u", line, b->num_seqs, n);
}

#define ROWS(v, ...) expect_rows(v, (const uint32_t[]){ __VA_ARGS__, 0 }, __LINE__)

/* The blocks request @id holds (in its table order). */
static void expect_blocks(struct env *v, uint64_t id, const int32_t *blocks, uint32_t n, int line)
{
	struct spyre_engine_debug d;

	spyre_engine_debug_state(v->e, &d);
	for (uint32_t i = 0; i < d.n_running; i++)
		if (d.running[i].id == id) {
			TAP_CHECK(d.running[i].num_blocks == n, "line %d: request %llu holds %u blocks, expected %u",
				  line, (unsigned long long)id, d.running[i].num_blocks, n);
			for (uint32_t j = 0; j < n && j < d.running[i].num_blocks; j++)
				TAP_CHECK(d.running[i].blocks[j] == blocks[j], "line %d: block %u is %d, expected %d",
					  line, j, d.running[i].blocks[j], blocks[j]);
			return;
		}
	TAP_CHECK(0, "line %d: request %llu is not running", line, (unsigned long long)id);
}

#define BLOCKS(v, id, ...) expect_blocks(v, id, (const int32_t[]){ __VA_ARGS__ },				\
					 sizeof((const int32_t[]){ __VA_ARGS__ }) / sizeof(int32_t), __LINE__)

static void prompt_fill(int32_t *p, uint32_t n, uint32_t salt)
{
	for (uint32_t i = 0; i < n; i++)
		p[i] = (int32_t)((i * 31 + salt * 17 + 3) % V);
}

/* Request @id's tokens are the fake model's greedy ones and it finished once with @reason. */
static void expect_done(struct env *v, uint64_t id, const int32_t *prompt, uint32_t n, uint32_t ntok,
			enum spyre_finish_reason reason, int line)
{
	int32_t want[REC_MAX_TOK];
	const struct rec_req *q = &v->rec->req[id];

	fake_expect(prompt, n, ntok, V, -1, want);
	TAP_CHECK(q->finished == 1 && q->after_finish == 0, "line %d: request %llu: %u FINISHED, %u after",
		  line, (unsigned long long)id, q->finished, q->after_finish);
	TAP_CHECK(q->reason == reason, "line %d: request %llu finished %d, expected %d", line,
		  (unsigned long long)id, q->reason, reason);
	TAP_CHECK(q->ntok == ntok, "line %d: request %llu: %u tokens, expected %u", line, (unsigned long long)id,
		  q->ntok, ntok);
	TAP_CHECK(!memcmp(q->tokens, want, (q->ntok < ntok ? q->ntok : ntok) * sizeof(int32_t)),
		  "line %d: request %llu: tokens differ from the model's", line, (unsigned long long)id);
}

#define DONE(v, id, prompt, n, ntok, reason) expect_done(v, id, prompt, n, ntok, reason, __LINE__)

static void expect_all_free(struct env *v, int line)
{
	struct spyre_engine_stats st;

	spyre_engine_get_stats(v->e, &st);
	TAP_CHECK(st.blocks_used == 0 && st.running == 0 && st.waiting == 0, "line %d: %u blocks used, %u running, "
		  "%u waiting at the end", line, st.blocks_used, st.running, st.waiting);
}

/* ---- cases ---- */

static void test_interleave(void)
{
	struct env v = env_new(4, 64, 128, 4, 16, false);
	int32_t a[6], b[10];
	uint64_t A, B;
	const struct fake_batch *fb;

	prompt_fill(a, 6, 1);
	prompt_fill(b, 10, 2);
	A = add(&v, a, 6, 4);
	B = add(&v, b, 10, 3);
	LISTS(&v, L(A, B), NONE, NONE);
	/* 1: A's whole prompt (one prefill per step: B waits) */
	TAP_EQ(1, step(&v));
	ROWS(&v, 6);
	fb = &v.f->batches[0];
	TAP_EQ(0, fb->positions[0]);
	TAP_EQ(5, fb->positions[5]);
	TAP_EQ(0, fb->slots[0]);	/* blocks 0, 1 */
	TAP_EQ(5, fb->slots[5]);
	LISTS(&v, L(B), L(A), NONE);
	BLOCKS(&v, A, 0, 1);
	/* 2: A decodes beside B's prefill (chunk 16 - 1 = 15 -> 12 rows: B's 10) */
	TAP_EQ(1, step(&v));
	ROWS(&v, 1, 10);
	fb = &v.f->batches[1];
	TAP_EQ(6, fb->positions[0]);
	TAP_EQ(6, fb->slots[0]);
	TAP_EQ(8, fb->slots[1]);	/* B: blocks 2, 3, 4 */
	TAP_EQ(17, fb->slots[10]);
	LISTS(&v, NONE, L(A, B), NONE);
	BLOCKS(&v, B, 2, 3, 4);
	/* 3: both decode; A reaches position 8: a new block (5) */
	TAP_EQ(1, step(&v));
	ROWS(&v, 1, 1);
	TAP_EQ(7, v.f->batches[2].positions[0]);
	TAP_EQ(10, v.f->batches[2].positions[1]);
	TAP_EQ(1, step(&v));
	ROWS(&v, 1, 1);
	TAP_EQ(20, v.f->batches[3].slots[0]);	/* A's position 8 in a new block, 5 */
	TAP_EQ(11, v.f->batches[3].positions[1]);
	/* after step 4 A has 4 tokens (1 from its prefill, 3 decodes), B 3: both finished */
	LISTS(&v, NONE, NONE, L(A, B));
	TAP_EQ(0, step(&v));
	LISTS(&v, NONE, NONE, NONE);
	DONE(&v, A, a, 6, 4, SPYRE_FINISH_LENGTH);
	DONE(&v, B, b, 10, 3, SPYRE_FINISH_LENGTH);
	TAP_EQ(0, step(&v));
	expect_all_free(&v, __LINE__);
	/* the modeled clock (the fake: 1 us per row): rows 6, 11, 2, 2 */
	TAP_EQ(0ull, v.rec->req[A].d_arrival);
	TAP_EQ(6000ull, v.rec->req[A].d_first);
	TAP_EQ(17000ull, v.rec->req[B].d_first);
	TAP_EQ(21000ull, v.rec->req[A].d_end);
	{
		struct spyre_engine_stats st;

		spyre_engine_get_stats(v.e, &st);
		TAP_EQ(21000ull, st.runner_device_ns);
		TAP_EQ(4ull, st.steps);
	}
	env_free(&v);
}

static void test_long_prompt_chunks(void)
{
	struct env v = env_new(4, 64, 128, 4, 16, false);
	int32_t a[5], b[40];
	uint64_t A, B;

	prompt_fill(a, 5, 3);
	prompt_fill(b, 40, 4);
	A = add(&v, a, 5, 20);
	TAP_EQ(1, step(&v));
	B = add(&v, b, 40, 2);
	/* chunks of (16 - 1 decode) / 4 * 4 = 12 rows: 12, 12, 12, 4 */
	TAP_EQ(1, step(&v));
	ROWS(&v, 1, 12);
	TAP_EQ(0, v.f->batches[1].positions[1]);
	TAP_EQ(1, step(&v));
	ROWS(&v, 1, 12);
	TAP_EQ(12, v.f->batches[2].positions[1]);
	TAP_EQ(1, step(&v));
	ROWS(&v, 1, 12);
	TAP_EQ(1, step(&v));
	ROWS(&v, 1, 4);
	TAP_EQ(36, v.f->batches[4].positions[1]);
	TAP_EQ(39, v.f->batches[4].positions[4]);
	TAP_CHECK(v.rec->req[B].ntok == 1, "B sampled once its last chunk ran: %u", v.rec->req[B].ntok);
	/* no intermediate chunk sampled: B's only token came from the last */
	TAP_EQ(1, step(&v));
	ROWS(&v, 1, 1);
	LISTS(&v, NONE, L(A), L(B));
	run_to_end(&v);
	DONE(&v, A, a, 5, 20, SPYRE_FINISH_LENGTH);
	DONE(&v, B, b, 40, 2, SPYRE_FINISH_LENGTH);
	expect_all_free(&v, __LINE__);
	env_free(&v);
}

static void test_admission_blocked(void)
{
	/* 6 blocks of 4: A takes 4, B needs 3 */
	struct env v = env_new(4, 6, 64, 4, 16, true);
	int32_t a[15], b[10];
	uint64_t A, B;
	struct spyre_engine_debug d;

	prompt_fill(a, 15, 5);
	prompt_fill(b, 10, 6);
	A = add(&v, a, 15, 2);
	B = add(&v, b, 10, 2);
	TAP_EQ(1, step(&v));
	ROWS(&v, 15);
	LISTS(&v, L(B), L(A), NONE);
	spyre_engine_debug_state(v.e, &d);
	TAP_EQ(2u, d.blocks_free);
	/* A decodes; B still does not fit (3 > 2 free) */
	TAP_EQ(1, step(&v));
	ROWS(&v, 1);
	LISTS(&v, L(B), NONE, L(A));
	/* A's blocks free: B admitted */
	TAP_EQ(1, step(&v));
	ROWS(&v, 10);
	LISTS(&v, NONE, L(B), NONE);
	run_to_end(&v);
	DONE(&v, A, a, 15, 2, SPYRE_FINISH_LENGTH);
	DONE(&v, B, b, 10, 2, SPYRE_FINISH_LENGTH);
	expect_all_free(&v, __LINE__);
	env_free(&v);
}

static void test_batch_tkv(void)
{
	/* final contexts 10 + 10 = 20: two fit in a tkv of 40, the third waits */
	struct env v = env_new(4, 64, 128, 4, 16, true);
	struct spyre_engine *e2;
	struct spyre_engine_opts o = { .max_num_seqs = 4, .max_num_batched_tokens = 16, .max_batch_tkv = 40, .seed = 1 };
	int32_t a[10], b[10], c[10], big[40] = { 0 };
	uint64_t A, B, C;
	char err[256];
	struct spyre_request_params q = req_params(big, 40, 4);

	spyre_engine_free(v.e);
	TAP_EQ(0, spyre_engine_new(&v.f->r, &o, &e2, err, sizeof(err)));
	v.e = e2;
	prompt_fill(a, 10, 70);
	prompt_fill(b, 10, 71);
	prompt_fill(c, 10, 72);
	A = add(&v, a, 10, 10);
	B = add(&v, b, 10, 10);
	C = add(&v, c, 10, 10);
	TAP_EQ(1, step(&v));
	TAP_EQ(1, step(&v));
	LISTS(&v, L(C), L(A, B), NONE);
	for (int i = 0; i < 7; i++) {
		TAP_EQ(1, step(&v));
		LISTS(&v, L(C), L(A, B), NONE);
	}
	TAP_EQ(1, step(&v));	/* A's 10th token */
	LISTS(&v, L(C), L(B), L(A));
	TAP_EQ(1, step(&v));	/* B's 10th, C admitted beside it */
	ROWS(&v, 1, 10);
	run_to_end(&v);
	DONE(&v, A, a, 10, 10, SPYRE_FINISH_LENGTH);
	DONE(&v, B, b, 10, 10, SPYRE_FINISH_LENGTH);
	DONE(&v, C, c, 10, 10, SPYRE_FINISH_LENGTH);
	/* a prompt of the whole tkv is too big; max_tokens clipped to it */
	TAP_EQ(-E2BIG, spyre_engine_add(v.e, &q, rec_event, v.rec, &A, err, sizeof(err)));
	TAP_CHECK(strstr(err, "max_batch_tkv"), "'%s'", err);
	A = add(&v, a, 10, 100);
	run_to_end(&v);
	DONE(&v, A, a, 10, 30, SPYRE_FINISH_LENGTH);
	env_free(&v);
}

static void test_preemption(void)
{
	/* 4 blocks of 4 = 16 slots: A and B (7-token prompts) take 2 each; A's 9th position needs a 5th */
	struct env v = env_new(4, 4, 64, 4, 16, true);
	int32_t a[7], b[7];
	uint64_t A, B;
	struct spyre_engine_stats st;

	prompt_fill(a, 7, 7);
	prompt_fill(b, 7, 8);
	A = add(&v, a, 7, 8);
	B = add(&v, b, 7, 8);
	TAP_EQ(1, step(&v));	/* A prefill */
	TAP_EQ(1, step(&v));	/* A decode (position 7), B prefill */
	ROWS(&v, 1, 7);
	LISTS(&v, NONE, L(A, B), NONE);
	BLOCKS(&v, A, 0, 1);
	BLOCKS(&v, B, 2, 3);
	TAP_EQ(1, step(&v));	/* A position 8: no block free -> B (newest) preempted */
	ROWS(&v, 1);
	LISTS(&v, L(B), L(A), NONE);
	spyre_engine_get_stats(v.e, &st);
	TAP_EQ(1ull, st.preemptions);
	TAP_EQ(1u, v.rec->req[B].ntok);	/* its generated token is kept */
	run_to_end(&v);
	/* A's final tokens, and B's recomputed from prompt + its kept token: unchanged */
	DONE(&v, A, a, 7, 8, SPYRE_FINISH_LENGTH);
	DONE(&v, B, b, 7, 8, SPYRE_FINISH_LENGTH);
	expect_all_free(&v, __LINE__);
	env_free(&v);
}

static void test_preemption_many(void)
{
	/* 6 requests through 8 blocks: repeated preemption, every token still the model's */
	struct env v = env_new(4, 8, 64, 6, 16, true);
	int32_t p[6][12];
	uint64_t id[6];
	struct spyre_engine_stats st;

	for (int i = 0; i < 6; i++) {
		prompt_fill(p[i], 5 + (uint32_t)i, 10 + (uint32_t)i);
		id[i] = add(&v, p[i], 5 + (uint32_t)i, 12);
	}
	run_to_end(&v);
	for (int i = 0; i < 6; i++)
		DONE(&v, id[i], p[i], 5 + (uint32_t)i, 12, SPYRE_FINISH_LENGTH);
	spyre_engine_get_stats(v.e, &st);
	TAP_CMP(st.preemptions, >=, 2ull);
	expect_all_free(&v, __LINE__);
	env_free(&v);
}

static void test_prefix_hits(void)
{
	struct env v = env_new(4, 16, 64, 4, 16, true);
	int32_t a[13], b[14], c[12];
	uint64_t A, B, C, D, E, hits0;
	struct spyre_engine_stats st;
	struct spyre_engine_debug d;

	prompt_fill(a, 13, 20);
	memcpy(b, a, 12 * sizeof(int32_t));
	b[12] = 5;
	b[13] = 6;
	memcpy(c, a, 12 * sizeof(int32_t));
	A = add(&v, a, 13, 1);
	TAP_EQ(1, step(&v));
	ROWS(&v, 13);
	LISTS(&v, NONE, NONE, L(A));
	/* A's blocks 0..2 (whole) are cached, free; block 3 free uncached */
	spyre_engine_debug_state(v.e, &d);
	TAP_CHECK(d.block_cached[0] && d.block_cached[1] && d.block_cached[2] && !d.block_cached[3], "cached blocks");
	TAP_EQ(16u, d.blocks_free);
	/* B shares A's first 12 tokens: 3 blocks hit, only rows 12, 13 computed */
	B = add(&v, b, 14, 3);
	TAP_EQ(1, step(&v));
	ROWS(&v, 2);
	TAP_EQ(12, v.f->batches[1].positions[0]);
	BLOCKS(&v, B, 0, 1, 2, 4);
	/* C = the 12 shared tokens exactly: 2 blocks hit, the last (block 2's tokens) recomputed */
	C = add(&v, c, 12, 2);
	TAP_EQ(1, step(&v));
	ROWS(&v, 1, 4);
	TAP_EQ(8, v.f->batches[2].positions[1]);
	BLOCKS(&v, C, 0, 1, 5);
	spyre_engine_debug_state(v.e, &d);
	TAP_EQ(2u, d.block_ref[0]);
	TAP_EQ(2u, d.block_ref[1]);
	TAP_EQ(1u, d.block_ref[2]);
	spyre_engine_get_stats(v.e, &st);
	TAP_EQ(13ull + 14 + 12, st.prefix_cache_queries);
	TAP_EQ(12ull + 8, st.prefix_cache_hits);
	run_to_end(&v);
	DONE(&v, A, a, 13, 1, SPYRE_FINISH_LENGTH);
	DONE(&v, B, b, 14, 3, SPYRE_FINISH_LENGTH);
	DONE(&v, C, c, 12, 2, SPYRE_FINISH_LENGTH);
	TAP_EQ(12u, v.rec->req[B].cached);
	TAP_EQ(8u, v.rec->req[C].cached);
	expect_all_free(&v, __LINE__);
	/* D with no shared prefix fills the cache: cached blocks are evicted, oldest freed first */
	{
		int32_t dd[60];

		prompt_fill(dd, 60, 99);
		dd[0] = (a[0] + 1) % V;
		D = add(&v, dd, 60, 1);
		run_to_end(&v);
		DONE(&v, D, dd, 60, 1, SPYRE_FINISH_LENGTH);
		/* A's prompt again: its prefix is gone (at most 1 of 16 blocks was not D's) */
		spyre_engine_get_stats(v.e, &st);
		hits0 = st.prefix_cache_hits;
		E = add(&v, a, 13, 2);
		run_to_end(&v);
		DONE(&v, E, a, 13, 2, SPYRE_FINISH_LENGTH);
		spyre_engine_get_stats(v.e, &st);
		TAP_CMP(st.prefix_cache_hits - hits0, <=, 4ull);
		/* and D's again: its 14 whole blocks before the last were the latest freed, but E took up to 4 */
		hits0 = st.prefix_cache_hits;
		D = add(&v, dd, 60, 1);
		run_to_end(&v);
		DONE(&v, D, dd, 60, 1, SPYRE_FINISH_LENGTH);
		spyre_engine_get_stats(v.e, &st);
		TAP_CMP(st.prefix_cache_hits - hits0, >=, 4ull);
		expect_all_free(&v, __LINE__);
	}
	env_free(&v);
}

static void test_prefix_off(void)
{
	struct env v = env_new(4, 16, 64, 4, 16, false);
	int32_t a[13];
	uint64_t A, B;
	struct spyre_engine_stats st;

	prompt_fill(a, 13, 21);
	A = add(&v, a, 13, 1);
	run_to_end(&v);
	B = add(&v, a, 13, 1);
	TAP_EQ(1, step(&v));
	ROWS(&v, 13);
	spyre_engine_get_stats(v.e, &st);
	TAP_EQ(0ull, st.prefix_cache_hits);
	DONE(&v, A, a, 13, 1, SPYRE_FINISH_LENGTH);
	DONE(&v, B, a, 13, 1, SPYRE_FINISH_LENGTH);
	env_free(&v);
}

static void test_stops(void)
{
	int32_t p[9], want[40];
	uint32_t k;
	int32_t eos;

	prompt_fill(p, 9, 30);
	fake_expect(p, 9, 40, V, -1, want);
	/* the first token that did not appear before it: EOS at its index k */
	for (k = 2; k < 40; k++) {
		uint32_t j;

		for (j = 0; j < k && want[j] != want[k]; j++)
			;
		if (j == k)
			break;
	}
	TAP_CMP(k, <, 40u);
	eos = want[k];
	{
		struct env v = env_new(4, 32, 128, 4, 16, true);
		uint64_t A, B, C;
		struct spyre_request_params q = req_params(p, 9, 30);

		v.f->r.eos_token_id = eos;
		A = add(&v, p, 9, 30);
		q.ignore_eos = true;
		TAP_EQ(0, spyre_engine_add(v.e, &q, rec_event, v.rec, &B, NULL, 0));
		q = req_params(p, 9, 30);
		q.stop_ids = (const int32_t[]){ 1000, want[1] };
		q.n_stop_ids = 2;
		TAP_EQ(0, spyre_engine_add(v.e, &q, rec_event, v.rec, &C, NULL, 0));
		run_to_end(&v);
		DONE(&v, A, p, 9, k + 1, SPYRE_FINISH_STOP);
		TAP_CHECK(v.rec->req[A].last_is_stop, "EOS token flagged is_stop");
		DONE(&v, B, p, 9, 30, SPYRE_FINISH_LENGTH);
		TAP_CHECK(!v.rec->req[B].last_is_stop, "ignore_eos");
		DONE(&v, C, p, 9, 2, SPYRE_FINISH_STOP);
		TAP_CHECK(v.rec->req[C].last_is_stop, "stop id flagged is_stop");
		env_free(&v);
	}
	{
		/* the context end: max_model_len 16, prompt 9: 7 tokens at most */
		struct env v = env_new(4, 32, 16, 4, 16, true);
		uint64_t A = add(&v, p, 9, 100);

		run_to_end(&v);
		DONE(&v, A, p, 9, 7, SPYRE_FINISH_LENGTH);
		env_free(&v);
	}
	{
		/* the cache's end: 3 blocks of 4 -> 12 tokens at most */
		struct env v = env_new(4, 3, 64, 4, 16, true);
		uint64_t A = add(&v, p, 9, 100);

		run_to_end(&v);
		DONE(&v, A, p, 9, 3, SPYRE_FINISH_LENGTH);
		env_free(&v);
	}
}

static void test_abort(void)
{
	struct env v = env_new(4, 32, 128, 4, 8, true);
	int32_t a[40], b[6], c[6];
	uint64_t A, B, C;
	struct spyre_engine_debug d;

	prompt_fill(a, 40, 40);
	prompt_fill(b, 6, 41);
	prompt_fill(c, 6, 42);
	C = add(&v, c, 6, 50);
	TAP_EQ(1, step(&v));	/* C prefilled, running */
	A = add(&v, a, 40, 5);
	B = add(&v, b, 6, 5);
	TAP_EQ(1, step(&v));	/* C decodes, A's first chunk (4 rows) */
	ROWS(&v, 1, 4);
	LISTS(&v, L(B), L(C, A), NONE);
	/* abort waiting B and mid-prefill A */
	TAP_EQ(0, spyre_engine_abort(v.e, B));
	TAP_EQ(-ENOENT, spyre_engine_abort(v.e, B));	/* already aborting */
	TAP_EQ(0, spyre_engine_abort(v.e, A));
	TAP_EQ(1, step(&v));
	ROWS(&v, 1);
	LISTS(&v, NONE, L(C), L(B, A));
	TAP_EQ(1u, v.rec->req[A].finished);
	TAP_EQ((int)SPYRE_FINISH_ABORT, (int)v.rec->req[A].reason);
	TAP_EQ(0u, v.rec->req[B].ntok);
	TAP_EQ((int)SPYRE_FINISH_ABORT, (int)v.rec->req[B].reason);
	spyre_engine_debug_state(v.e, &d);
	TAP_EQ(32u - 2, d.blocks_free);		/* only C's 2 blocks held */
	/* abort running C */
	TAP_EQ(0, spyre_engine_abort(v.e, C));
	TAP_EQ(0, step(&v));
	LISTS(&v, NONE, NONE, L(C));
	TAP_EQ(1u, v.rec->req[C].finished);
	TAP_EQ(0u, v.rec->req[C].after_finish);
	TAP_EQ(-ENOENT, spyre_engine_abort(v.e, C));
	TAP_EQ(-ENOENT, spyre_engine_abort(v.e, 9999));
	expect_all_free(&v, __LINE__);
	env_free(&v);
}

struct abort_arg {
	struct spyre_engine *e;
	uint64_t id;
	int rc;
};

static void abort_hook(void *arg)
{
	struct abort_arg *a = arg;

	a->rc = spyre_engine_abort(a->e, a->id);
	/* a step inside a step is refused */
	TAP_EQ(-EBUSY, spyre_engine_step(a->e));
	TAP_EQ(-EBUSY, spyre_engine_start(a->e));
}

/* An abort that arrives while the runner computes the request's step: that step's token is dropped. */
static void test_abort_during_step(void)
{
	struct env v = env_new(4, 32, 128, 4, 16, true);
	int32_t a[6];
	uint64_t A;
	struct abort_arg arg;

	prompt_fill(a, 6, 43);
	A = add(&v, a, 6, 10);
	TAP_EQ(1, step(&v));
	TAP_EQ(1, step(&v));
	TAP_EQ(2u, v.rec->req[A].ntok);
	arg = (struct abort_arg){ v.e, A, 1 };
	v.f->hook = abort_hook;
	v.f->hook_arg = &arg;
	TAP_EQ(1, step(&v));
	TAP_EQ(0, arg.rc);
	TAP_EQ(2u, v.rec->req[A].ntok);
	TAP_EQ(1u, v.rec->req[A].finished);
	TAP_EQ((int)SPYRE_FINISH_ABORT, (int)v.rec->req[A].reason);
	LISTS(&v, NONE, NONE, L(A));
	expect_all_free(&v, __LINE__);
	v.f->hook = NULL;
	env_free(&v);
}

static void test_bad_params(void)
{
	struct env v = env_new(4, 8, 64, 4, 16, true);
	int32_t p[40] = { 0 };
	struct spyre_request_params q;
	char err[256];
	uint64_t id;
	struct spyre_engine *e2;
	struct spyre_engine_opts o = { 0 };

#define ADD_RC(want) do {									\
		err[0] = 0;										\
		TAP_EQ(want, spyre_engine_add(v.e, &q, rec_event, v.rec, &id, err, sizeof(err)));	\
		TAP_CHECK(err[0], "no message for %d", want);						\
	} while (0)

	q = req_params(p, 0, 4); ADD_RC(-EINVAL);
	q = req_params(NULL, 3, 4); ADD_RC(-EINVAL);
	q = req_params(p, 3, 0); ADD_RC(-EINVAL);
	p[1] = V; q = req_params(p, 3, 4); ADD_RC(-EINVAL);
	p[1] = -1; ADD_RC(-EINVAL);
	p[1] = 0;
	q = req_params(p, 3, 4); q.sampling.temperature = -1; ADD_RC(-EINVAL);
	q.sampling.temperature = NAN; ADD_RC(-EINVAL);
	q = req_params(p, 3, 4); q.sampling.top_p = 0; ADD_RC(-EINVAL);
	q.sampling.top_p = 1.5f; ADD_RC(-EINVAL);
	q = req_params(p, 3, 4); q.n_stop_ids = 2; ADD_RC(-EINVAL);
	q = req_params(p, 32, 4); ADD_RC(-E2BIG);	/* 8 blocks of 4 = 32 */
	{
		/* opts.max_model_len below the model's */
		struct fake_runner *f = fake_new(V, 4, 64, 64, -1);
		struct spyre_engine_opts o2 = { .max_num_seqs = 4, .max_num_batched_tokens = 16, .max_model_len = 20 };
		struct recorder *rc = malloc(sizeof(*rc));

		rec_init(rc);
		TAP_EQ(0, spyre_engine_new(&f->r, &o2, &e2, err, sizeof(err)));
		q = req_params(p, 20, 4);
		TAP_EQ(-E2BIG, spyre_engine_add(e2, &q, rec_event, rc, &id, err, sizeof(err)));
		TAP_CHECK(strstr(err, "(20)"), "'%s'", err);
		q = req_params(p, 15, 100);
		TAP_EQ(0, spyre_engine_add(e2, &q, rec_event, rc, &id, err, sizeof(err)));
		while (spyre_engine_step(e2) > 0)
			;
		TAP_EQ(5u, rc->req[id].ntok);
		spyre_engine_free(e2);
		spyre_runner_free(&f->r);
		free(rc);
	}
	{
		struct env w = env_new(4, 64, 16, 4, 16, true);
		struct env *vv = &w;

		q = req_params(p, 16, 4);
		err[0] = 0;
		TAP_EQ(-E2BIG, spyre_engine_add(vv->e, &q, rec_event, vv->rec, &id, err, sizeof(err)));
		TAP_CHECK(strstr(err, "context"), "'%s'", err);
		env_free(&w);
	}
	/* the queue: max_waiting 8 */
	q = req_params(p, 3, 4);
	for (int i = 0; i < 8; i++)
		TAP_EQ(0, spyre_engine_add(v.e, &q, rec_event, v.rec, &id, err, sizeof(err)));
	ADD_RC(-EAGAIN);
	run_to_end(&v);
	TAP_EQ(0, spyre_engine_add(v.e, &q, rec_event, v.rec, &id, err, sizeof(err)));
	run_to_end(&v);
	expect_all_free(&v, __LINE__);
	env_free(&v);
	/* engine options */
	{
		struct fake_runner *f = fake_new(V, 4, 8, 64, -1);

		o.max_num_batched_tokens = 18;
		TAP_EQ(-EINVAL, spyre_engine_new(&f->r, &o, &e2, err, sizeof(err)));
		o.max_num_batched_tokens = 16;
		o.max_num_seqs = 14;	/* 13 decodes leave 3 rows: no whole block */
		TAP_EQ(-EINVAL, spyre_engine_new(&f->r, &o, &e2, err, sizeof(err)));
		TAP_CHECK(strstr(err, "whole block"), "'%s'", err);
		TAP_EQ(-EINVAL, spyre_engine_new(NULL, &o, &e2, err, sizeof(err)));
		spyre_runner_free(&f->r);
		/* a runner's step limits: the defaults stay within them, explicit options beyond are refused */
		f = fake_new(V, 4, 128, 64, -1);
		f->r.max_num_seqs = 6;
		f->r.max_num_tokens = 30;
		o = (struct spyre_engine_opts){ 0 };
		TAP_EQ(0, spyre_engine_new(&f->r, &o, &e2, err, sizeof(err)));
		{
			struct spyre_engine_debug *d = calloc(1, sizeof(*d));
			struct recorder *rc = malloc(sizeof(*rc));
			int32_t pr[40];
			uint32_t k, most = 0;

			rec_init(rc);
			prompt_fill(pr, 40, 7);
			for (k = 0; k < 9; k++) {	/* more than 6 at once, prompts longer than 28 rows */
				q = req_params(pr, 33, 20);
				TAP_EQ(0, spyre_engine_add(e2, &q, rec_event, rc, &id, err, sizeof(err)));
			}
			while (spyre_engine_step(e2) > 0) {
				spyre_engine_debug_state(e2, d);
				most = d->n_running > most ? d->n_running : most;
			}
			TAP_EQ(6u, most);	/* max_num_seqs defaulted to the runner's 6 */
			TAP_EQ(0u, f->bad_batches);	/* no step beyond 6 sequences or 28 (= 30 in blocks of 4) rows */
			spyre_engine_free(e2);
			free(d);
			free(rc);
		}
		o = (struct spyre_engine_opts){ .max_num_seqs = 7 };
		TAP_EQ(-EINVAL, spyre_engine_new(&f->r, &o, &e2, err, sizeof(err)));
		TAP_CHECK(strstr(err, "max_num_seqs (7) is more than the fake runner takes in a step (6)"), "'%s'", err);
		o = (struct spyre_engine_opts){ .max_num_batched_tokens = 32 };
		TAP_EQ(-EINVAL, spyre_engine_new(&f->r, &o, &e2, err, sizeof(err)));
		TAP_CHECK(strstr(err, "max_num_batched_tokens (32) is more than"), "'%s'", err);
		spyre_runner_free(&f->r);
	}
}

static void test_runner_error(void)
{
	struct env v = env_new(4, 16, 64, 4, 16, true);
	int32_t a[5], b[5];
	uint64_t A, B;

	prompt_fill(a, 5, 50);
	prompt_fill(b, 5, 51);
	v.f->fail_at = 2;
	A = add(&v, a, 5, 10);
	B = add(&v, b, 5, 10);
	TAP_EQ(1, step(&v));
	TAP_EQ(-EIO, step(&v));	/* A's decode and B's prefill fail */
	TAP_EQ((int)SPYRE_FINISH_ERROR, (int)v.rec->req[A].reason);
	TAP_EQ((int)SPYRE_FINISH_ERROR, (int)v.rec->req[B].reason);
	TAP_CHECK(strstr(v.rec->req[A].error, "step 2 fails"), "message '%s'", v.rec->req[A].error);
	TAP_EQ(1u, v.rec->req[A].finished);
	expect_all_free(&v, __LINE__);
	env_free(&v);
}

static void test_logits_only_when_sampling(void)
{
	struct env v = env_new(4, 16, 64, 4, 16, true);
	int32_t a[5];
	struct spyre_request_params q;
	uint64_t A, B;

	prompt_fill(a, 5, 60);
	A = add(&v, a, 5, 3);
	TAP_EQ(1, step(&v));
	TAP_CHECK(!v.f->batches[0].logits, "greedy step asked for logits");
	q = req_params(a, 5, 3);
	q.sampling.temperature = 0.7f;
	q.sampling.has_seed = true;
	q.sampling.seed = 3;
	TAP_EQ(0, spyre_engine_add(v.e, &q, rec_event, v.rec, &B, NULL, 0));
	TAP_EQ(1, step(&v));
	TAP_CHECK(v.f->batches[1].logits, "a sampling step without logits");
	run_to_end(&v);
	/* the fake's logits are one-hot by 30: sampling at 0.7 picks the model's token */
	DONE(&v, A, a, 5, 3, SPYRE_FINISH_LENGTH);
	DONE(&v, B, a, 5, 3, SPYRE_FINISH_LENGTH);
	env_free(&v);
}

static const struct tap_case cases[] = {
	{ "interleave", test_interleave },
	{ "long-prompt-chunks", test_long_prompt_chunks },
	{ "admission-blocked", test_admission_blocked },
	{ "batch-tkv", test_batch_tkv },
	{ "preemption", test_preemption },
	{ "preemption-many", test_preemption_many },
	{ "prefix-hits", test_prefix_hits },
	{ "prefix-off", test_prefix_off },
	{ "stops", test_stops },
	{ "abort", test_abort },
	{ "abort-during-step", test_abort_during_step },
	{ "bad-params", test_bad_params },
	{ "runner-error", test_runner_error },
	{ "logits-only-when-sampling", test_logits_only_when_sampling },
};

int main(int argc, char **argv)
{
	return TAP_RUN(cases, argc, argv);
}
