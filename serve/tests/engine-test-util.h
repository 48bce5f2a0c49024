/* SPDX-License-Identifier: MIT */
/*
 * engine-test-util.h - what the engine tests share: a fake runner and an
 * event recorder.
 *
 * The fake runner keeps what each slot of its "KV cache" holds (the token and
 * position written there) and answers a sequence's next token as a hash of
 * the tokens it reads through the block table for positions 0..p of the
 * sequence's last row. A wrong block table, slot mapping, prefix-cache hit or
 * recompute therefore changes the tokens: fake_expect() computes the right
 * ones from the token list alone. It checks every row's slot is its block
 * table's, every position read was written at that position, and records
 * each batch.
 */
#ifndef SPYRE_SERVE_ENGINE_TEST_UTIL_H
#define SPYRE_SERVE_ENGINE_TEST_UTIL_H

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "../../tests/tap.h"

#define FAKE_MAX_STEPS 4096
#define FAKE_MAX_ROWS 256
#define FAKE_MAX_SEQS 64

struct fake_batch {
	uint32_t num_tokens, num_seqs;
	int32_t tokens[FAKE_MAX_ROWS], positions[FAKE_MAX_ROWS];
	int64_t slots[FAKE_MAX_ROWS];
	uint32_t qs[FAKE_MAX_SEQS + 1], ctx[FAKE_MAX_SEQS];
	bool logits;			/* the engine asked for logits (a sampling sequence) */
};

struct fake_runner {
	struct spyre_runner r;
	int32_t *slot_tok, *slot_pos;	/* [num_blocks * block_size] */
	struct fake_batch *batches;	/* [FAKE_MAX_STEPS] */
	uint32_t nbatches;
	uint32_t bad;			/* rows that read an unwritten or misplaced position */
	int fail_at;			/* the step (1-based) that fails with -EIO, 0: never */
	uint32_t bad_batches;		/* steps beyond r.max_num_seqs / r.max_num_tokens (refused) */
	uint32_t sleep_us;		/* per step (the thread tests) */
	void (*hook)(void *arg);	/* called inside each step (e.g. to abort meanwhile) */
	void *hook_arg;
};

/* The fake model's next token after @ctx[0..n). */
static inline int32_t fake_next(const int32_t *ctx, uint32_t n, uint32_t vocab)
{
	uint64_t h = 1469598103934665603ull;

	for (uint32_t i = 0; i < n; i++)
		h = (h ^ (uint32_t)ctx[i]) * 1099511628211ull;
	h ^= h >> 29;
	return (int32_t)(h % vocab);
}

/* The tokens a greedy run of @prompt generates (at most @max, into @out): stops at EOS unless @eos < 0. */
static inline uint32_t fake_expect(const int32_t *prompt, uint32_t n, uint32_t max, uint32_t vocab, int32_t eos,
				   int32_t *out)
{
	int32_t *ctx = malloc((n + max) * sizeof(int32_t));
	uint32_t g = 0;

	memcpy(ctx, prompt, n * sizeof(int32_t));
	while (g < max) {
		int32_t t = fake_next(ctx, n + g, vocab);

		out[g] = t;
		ctx[n + g++] = t;
		if (t == eos)
			break;
	}
	free(ctx);
	return g;
}

static int fake_step(void *self, const struct spyre_runner_batch *b, struct spyre_runner_stats *st, char *err,
		     size_t errlen)
{
	struct fake_runner *f = self;
	uint32_t bs = f->r.block_size;
	int32_t ctx[4096];

	if (st) {
		st->device_ns = 1000ull * b->num_tokens;	/* a modeled cost: 1 us per row */
		st->host_ns = 1;
	}
	if (f->sleep_us) {
		struct timespec ts = { 0, (long)f->sleep_us * 1000 };

		nanosleep(&ts, NULL);
	}
	if (f->nbatches < FAKE_MAX_STEPS) {
		struct fake_batch *fb = &f->batches[f->nbatches];

		memset(fb, 0, sizeof(*fb));
		fb->num_tokens = b->num_tokens;
		fb->num_seqs = b->num_seqs;
		for (uint32_t i = 0; i < b->num_tokens && i < FAKE_MAX_ROWS; i++) {
			fb->tokens[i] = b->tokens[i];
			fb->positions[i] = b->positions[i];
			fb->slots[i] = b->slot_mapping[i];
		}
		for (uint32_t s = 0; s <= b->num_seqs && s <= FAKE_MAX_SEQS; s++)
			fb->qs[s] = b->query_start[s];
		for (uint32_t s = 0; s < b->num_seqs && s < FAKE_MAX_SEQS; s++)
			fb->ctx[s] = b->context_lens[s];
		fb->logits = b->logits != NULL;
	}
	f->nbatches++;
	if ((f->r.max_num_seqs && b->num_seqs > f->r.max_num_seqs) ||
	    (f->r.max_num_tokens && b->num_tokens > f->r.max_num_tokens)) {
		f->bad_batches++;
		snprintf(err, errlen, "fake runner: %u sequences, %u rows: beyond its limits", b->num_seqs,
			 b->num_tokens);
		return -EINVAL;
	}
	if (f->hook)
		f->hook(f->hook_arg);
	if (f->fail_at && (int)f->nbatches == f->fail_at) {
		snprintf(err, errlen, "fake runner: step %u fails", f->nbatches);
		return -EIO;
	}
	/* write every row's K/V (token, position) to its slot */
	for (uint32_t r = 0; r < b->num_tokens; r++) {
		int64_t sl = b->slot_mapping[r];

		if (sl < 0 || sl >= (int64_t)f->r.num_blocks * bs) {
			f->bad++;
			continue;
		}
		f->slot_tok[sl] = b->tokens[r];
		f->slot_pos[sl] = b->positions[r];
	}
	for (uint32_t s = 0; s < b->num_seqs; s++) {
		const int32_t *tbl = b->block_tables + (size_t)s * b->max_blocks;
		uint32_t last = b->query_start[s + 1] - 1, p = (uint32_t)b->positions[last];
		int32_t t;

		for (uint32_t r = b->query_start[s]; r <= last; r++) {
			uint32_t q = (uint32_t)b->positions[r];

			if (b->slot_mapping[r] != (int64_t)tbl[q / bs] * bs + q % bs)
				f->bad++;
		}
		if (b->context_lens[s] != p + 1)
			f->bad++;
		for (uint32_t q = 0; q <= p && q < 4096; q++) {
			int64_t sl = (int64_t)tbl[q / bs] * bs + q % bs;

			if (tbl[q / bs] < 0 || f->slot_pos[sl] != (int32_t)q)
				f->bad++;
			ctx[q] = f->slot_tok[sl];
		}
		t = fake_next(ctx, p + 1, f->r.vocab);
		if (b->argmax)
			b->argmax[s] = t;
		if (b->logits) {
			float *l = b->logits + (size_t)s * f->r.vocab;

			for (uint32_t i = 0; i < f->r.vocab; i++)
				l[i] = 0.0f;
			l[t] = 30.0f;	/* any temperature <= 3 samples t but once in ~e^10 */
		}
	}
	return 0;
}

static void fake_free(void *self)
{
	struct fake_runner *f = self;

	free(f->slot_tok);
	free(f->slot_pos);
	free(f->batches);
	free(f);
}

static const struct spyre_runner_ops fake_ops = { fake_step, fake_free };

static inline struct fake_runner *fake_new(uint32_t vocab, uint32_t block_size, uint32_t num_blocks,
					   uint32_t max_model_len, int32_t eos)
{
	struct fake_runner *f = calloc(1, sizeof(*f));
	size_t n = (size_t)num_blocks * block_size;

	f->r = (struct spyre_runner){ .ops = &fake_ops, .self = f, .vocab = vocab, .block_size = block_size,
				     .num_blocks = num_blocks, .max_model_len = max_model_len, .eos_token_id = eos,
				     .name = "fake" };
	f->slot_tok = calloc(n, sizeof(int32_t));
	f->slot_pos = malloc(n * sizeof(int32_t));
	for (size_t i = 0; i < n; i++)
		f->slot_pos[i] = -1;
	f->batches = calloc(FAKE_MAX_STEPS, sizeof(*f->batches));
	return f;
}

/* ---- events ---- */

#define REC_MAX_REQ 1024
#define REC_MAX_TOK 512

struct rec_req {
	int32_t tokens[REC_MAX_TOK];
	uint32_t ntok;
	uint32_t finished;		/* FINISHED events seen */
	uint32_t after_finish;		/* events after FINISHED (must stay 0) */
	enum spyre_finish_reason reason;
	bool last_is_stop;
	uint32_t cached;
	uint64_t d_arrival, d_first, d_end;	/* modeled clock at arrival, first token, FINISHED */
	char error[128];
};

struct recorder {
	pthread_mutex_t lock;
	struct rec_req req[REC_MAX_REQ + 1];	/* by id */
	uint32_t events;
};

static inline void rec_init(struct recorder *rc)
{
	memset(rc, 0, sizeof(*rc));
	pthread_mutex_init(&rc->lock, NULL);
}

static void rec_event(void *user, const struct spyre_event *ev)
{
	struct recorder *rc = user;
	struct rec_req *q;

	pthread_mutex_lock(&rc->lock);
	rc->events++;
	if (ev->id > REC_MAX_REQ) {
		pthread_mutex_unlock(&rc->lock);
		return;
	}
	q = &rc->req[ev->id];
	if (q->finished)
		q->after_finish++;
	if (ev->kind == SPYRE_EVENT_TOKEN) {
		if (q->ntok < REC_MAX_TOK)
			q->tokens[q->ntok++] = ev->token;
		q->last_is_stop = ev->is_stop;
		if (q->ntok == 1)
			q->d_first = ev->d_now;
		if (ev->generated_tokens != q->ntok)
			q->after_finish += 1000;	/* a count out of step: flagged the same way */
	} else {
		q->finished++;
		q->reason = ev->reason;
		q->cached = ev->cached_prompt_tokens;
		q->d_arrival = ev->d_arrival;
		q->d_end = ev->d_now;
		if (ev->error)
			snprintf(q->error, sizeof(q->error), "%s", ev->error);
	}
	pthread_mutex_unlock(&rc->lock);
}

/* A greedy request's parameters. */
static inline struct spyre_request_params req_params(const int32_t *prompt, uint32_t n, uint32_t max_tokens)
{
	struct spyre_request_params p;

	memset(&p, 0, sizeof(p));
	p.prompt = prompt;
	p.prompt_len = n;
	p.max_tokens = max_tokens;
	p.sampling.top_p = 1.0f;
	return p;
}

#endif /* SPYRE_SERVE_ENGINE_TEST_UTIL_H */
