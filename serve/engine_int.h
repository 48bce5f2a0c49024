/* SPDX-License-Identifier: MIT */
/*
 * engine_int.h - the engine's state, shared by engine.c (API, threads,
 * events, the step) and sched.c (admission, block bookkeeping, preemption,
 * the step's plan). Not installed; nothing outside serve/engine*.c and
 * serve/sched.c includes it.
 */
#ifndef SPYRE_SERVE_ENGINE_INT_H
#define SPYRE_SERVE_ENGINE_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "blocks.h"
#include "engine.h"
#include "sample.h"

enum spyre_req_state { SPYRE_REQ_WAITING, SPYRE_REQ_RUNNING };

struct spyre_req {
	uint64_t id;
	struct spyre_req *prev, *next;	/* in e->waiting or e->running */
	enum spyre_req_state state;
	int32_t *tokens;		/* [limit]: the prompt, then the generated tokens */
	uint32_t n_tokens, prompt_len;
	uint32_t limit;			/* tokens at most: min(max_model_len, cache) */
	uint32_t computed;		/* positions whose K/V are in the cache */
	uint32_t prefill_end;		/* n_tokens at (re)admission: prefilling while computed < it */
	int32_t *blocks;		/* [ceil(limit / block_size)] */
	uint32_t nblocks;
	uint64_t *hashes;		/* chained hashes of the first nhashed whole blocks */
	uint32_t nhashed;
	uint32_t nregistered;		/* blocks offered to the prefix cache */
	uint32_t max_tokens, generated;
	struct spyre_sampling sampling;
	struct spyre_rng rng;
	int32_t *stop_ids;
	uint32_t n_stop_ids;
	bool ignore_eos;
	bool aborted;			/* spyre_engine_abort: finished at the next step */
	uint32_t cached_prompt_tokens;
	spyre_event_fn fn;
	void *user;
	uint64_t t_arrival, t_scheduled, t_first_token;
	uint64_t d_arrival;		/* stats.runner_device_ns at arrival */
};

struct spyre_req_list {
	struct spyre_req *head, *tail;
	uint32_t count;
};

/* One sequence of a step: rows start .. start + rows - 1 of @r. */
struct spyre_sched_item {
	struct spyre_req *r;
	uint32_t start, rows;
	bool samples;			/* the rows reach r->n_tokens: the last row samples */
};

struct spyre_pending_event {
	struct spyre_event ev;
	spyre_event_fn fn;
	void *user;
};

struct spyre_engine {
	const struct spyre_runner *runner;
	struct spyre_engine_opts opts;
	uint32_t block_size, limit, max_blocks_per_req;

	/* Protects everything below but the step's buffers (the stepping thread's own). */
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* work arrived, or stop */
	struct spyre_req_list waiting, running;
	struct spyre_blocks *blocks;
	uint64_t next_id;
	uint64_t seed_state;		/* splitmix64 state seeding requests without a seed */
	struct spyre_engine_stats stats;
	uint64_t finished_ids[SPYRE_ENGINE_DEBUG_MAX];	/* finished in the last step */
	uint32_t n_finished_ids;
	uint64_t work_gen;		/* counts adds and aborts: the idle thread's wake-up */
	bool stop;

	/* The stepping thread's own. */
	pthread_t thread;
	bool started;			/* set by spyre_engine_start, read by spyre_engine_free (same caller) */
	bool stepping;			/* (atomic) a caller steps, or the engine's thread runs */
	struct spyre_sched_item *items;	/* [max_num_seqs] */
	uint32_t nitems;
	int32_t *b_tokens, *b_positions, *b_tables, *b_argmax;
	int64_t *b_slots;
	uint32_t *b_qs, *b_ctx;
	float *b_logits;
	void *sample_scratch;
	struct spyre_pending_event *events;
	uint32_t nevents, events_cap;
	char step_err[256];
};

/* sched.c: called with e->lock held. */
void spyre_list_push_back(struct spyre_req_list *l, struct spyre_req *r);
void spyre_list_push_front(struct spyre_req_list *l, struct spyre_req *r);
void spyre_list_remove(struct spyre_req_list *l, struct spyre_req *r);
void spyre_req_release_blocks(struct spyre_engine *e, struct spyre_req *r);
void spyre_req_register_blocks(struct spyre_engine *e, struct spyre_req *r);
/* Plan the step into e->items / e->nitems: decodes, then at most one prefill chunk. */
void spyre_sched_plan(struct spyre_engine *e);

#endif /* SPYRE_SERVE_ENGINE_INT_H */
