/* SPDX-License-Identifier: MIT */
/*
 * engine.h - the serving engine: continuous batching over a paged KV cache,
 * as vLLM (and sendnn-inference on Spyre) schedule it.
 *
 * Every step runs all running decodes plus at most one prefill chunk (at most
 * max_num_batched_tokens rows in all); blocks come from an allocator with
 * reference counts; whole blocks of a prompt are shared by hash of their
 * token ids (prefix caching; the last block of a prompt is always computed);
 * when a decode needs a block and none is free the newest running request is
 * preempted (its blocks freed, recomputed later from its tokens); admission
 * never overcommits (a request is admitted only when its prompt's blocks are
 * free). A request stops on max_tokens, EOS (unless ignore_eos), a stop id,
 * the model's context length, or abort.
 *
 * Threads: spyre_engine_add/abort/get_stats may be called from any thread at
 * any time; steps run on one thread: the engine's own (spyre_engine_start) or
 * the caller's (spyre_engine_step, for tests). Events are delivered on the
 * stepping thread, in order per request; after its FINISHED event the engine
 * never names the request again.
 */
#ifndef SPYRE_SERVE_ENGINE_H
#define SPYRE_SERVE_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runner.h"

struct spyre_engine;

struct spyre_engine_opts {
	uint32_t max_num_seqs;		/* running requests at most (default 32) */
	uint32_t max_num_batched_tokens;/* rows per step = prefill chunk (default 512, a multiple of block_size) */
	uint32_t max_waiting;		/* queue length before add() says -EAGAIN (default 256) */
	bool no_prefix_caching;		/* prefix caching is on unless this is set */
	uint64_t seed;			/* seeds the requests without a seed (0: from the clock) */
	uint32_t max_model_len;		/* a request's context at most (0: the runner's max_model_len) */
	/*
	 * sendnn-inference's volumetric limit (VLLM_DT_MAX_BATCH_TKV_LIMIT), 0:
	 * off. A request is admitted only when (running + 1) x the largest
	 * final context (prompt + max_tokens) among them stays within it, so
	 * batch x context holds at every future step; a request's context is
	 * clipped to it.
	 */
	uint32_t max_batch_tkv;
	/*
	 * Each step lasts at least this long (0: off): a slower device for
	 * tests and demos that need requests to stay in flight (spyre-serve
	 * --min-step-us).
	 */
	uint32_t min_step_us;
	/*
	 * Called on the stepping thread after a step's events were delivered
	 * (when there were any), with @events_user: where a listener that was
	 * handed N events can act on them at once (spyre-serve wakes its
	 * server thread once per step, not once per stream). NULL: none.
	 */
	void (*events_delivered)(void *user);
	void *events_user;
};

struct spyre_sampling {
	float temperature;		/* 0: greedy */
	float top_p;			/* (0, 1], 1: off */
	uint32_t top_k;			/* 0: off */
	uint64_t seed;
	bool has_seed;			/* otherwise a seed from the engine's generator */
};

struct spyre_request_params {
	const int32_t *prompt;
	uint32_t prompt_len;		/* >= 1, < max_model_len */
	uint32_t max_tokens;		/* >= 1; clipped to the context */
	struct spyre_sampling sampling;
	const int32_t *stop_ids;	/* extra stop tokens */
	uint32_t n_stop_ids;
	bool ignore_eos;
};

enum spyre_finish_reason {
	SPYRE_FINISH_NONE = 0,
	SPYRE_FINISH_LENGTH,		/* max_tokens or the context */
	SPYRE_FINISH_STOP,		/* EOS or a stop id (the stop token is reported, flagged) */
	SPYRE_FINISH_ABORT,		/* spyre_engine_abort */
	SPYRE_FINISH_ERROR,		/* the runner failed: message in the event */
};

enum spyre_event_kind {
	SPYRE_EVENT_TOKEN = 1,		/* one new token */
	SPYRE_EVENT_FINISHED,		/* last event of a request */
};

struct spyre_event {
	enum spyre_event_kind kind;
	uint64_t id;
	int32_t token;			/* TOKEN */
	bool is_stop;			/* TOKEN: it is the EOS/stop token that ends the request */
	enum spyre_finish_reason reason;/* FINISHED */
	const char *error;		/* FINISHED with ERROR */
	uint32_t prompt_tokens, generated_tokens;
	uint32_t cached_prompt_tokens;	/* prompt tokens served from the prefix cache */
	/* Wall times (CLOCK_MONOTONIC ns): arrival, first scheduled, first token, now. */
	uint64_t t_arrival, t_scheduled, t_first_token, t_now;
	/*
	 * The engine's modeled clock: the sum of the runner's device_ns over
	 * every step so far (0 on the CPU runner), at the request's arrival and
	 * now. Latencies in modeled time (timed mode) are differences of these.
	 */
	uint64_t d_arrival, d_now;
};

typedef void (*spyre_event_fn)(void *user, const struct spyre_event *ev);

/* @runner is borrowed (must outlive the engine). 0 or -errno with @err. */
int spyre_engine_new(const struct spyre_runner *runner, const struct spyre_engine_opts *opts,
		     struct spyre_engine **out, char *err, size_t errlen);
void spyre_engine_free(struct spyre_engine *e);	/* stops the thread, aborts everything (events delivered) */

/*
 * Queue a request (the prompt is copied). 0 and *id, or: -EINVAL (empty
 * prompt, token id outside the vocabulary, bad sampling parameters),
 * -E2BIG (prompt_len >= max_model_len, or the prompt needs more blocks than
 * the cache has), -EAGAIN (max_waiting requests already wait), with @err.
 */
int spyre_engine_add(struct spyre_engine *e, const struct spyre_request_params *p, spyre_event_fn fn,
		     void *user, uint64_t *id, char *err, size_t errlen);
/* Abort @id: its FINISHED(ABORT) event follows on the stepping thread. -ENOENT if unknown or finished. */
int spyre_engine_abort(struct spyre_engine *e, uint64_t id);

/*
 * One scheduler step on the caller's thread: 1 ran a batch, 0 nothing to do
 * (aborts may still have been delivered), -EBUSY when the engine's thread
 * runs or another step is in progress (e.g. from an event callback), or the runner's -errno (the step's requests finished with ERROR).
 */
int spyre_engine_step(struct spyre_engine *e);
/* Steps on a thread of the engine's until spyre_engine_free. 0, -EBUSY (started, or a step runs), -errno. */
int spyre_engine_start(struct spyre_engine *e);

struct spyre_engine_stats {
	uint32_t running, waiting;
	uint32_t blocks_total, blocks_used;	/* kv_cache_usage = used / total */
	uint64_t prompt_tokens_total, generation_tokens_total;
	uint64_t prefix_cache_queries, prefix_cache_hits;	/* in tokens, as vLLM counts */
	uint64_t preemptions;
	uint64_t steps;
	uint64_t runner_host_ns, runner_device_ns;	/* sums of the runner's step stats */
	uint64_t runner_builds;				/* kernels built by steps (after any warm-up) */
	uint64_t runner_replays;			/* steps the runner replayed as a launch graph */
	uint64_t thread_cpu_ns;		/* CPU time of the engine's thread (spyre_engine_start), else 0 */
	uint64_t requests_finished[SPYRE_FINISH_ERROR + 1];	/* by reason */
};
void spyre_engine_get_stats(struct spyre_engine *e, struct spyre_engine_stats *st);

/*
 * For tests: the engine's state between steps. Lists in order (waiting from
 * its head, running oldest first); finished: the ids whose FINISHED event the
 * last step delivered. At most SPYRE_ENGINE_DEBUG_MAX of each (and blocks per
 * request); block_ref[i] for blocks i < SPYRE_ENGINE_DEBUG_BLOCKS.
 */
#define SPYRE_ENGINE_DEBUG_MAX 64
#define SPYRE_ENGINE_DEBUG_BLOCKS 256
struct spyre_engine_debug_req {
	uint64_t id;
	uint32_t num_tokens, num_computed, num_generated;
	uint32_t num_blocks;
	int32_t blocks[SPYRE_ENGINE_DEBUG_MAX];
};
struct spyre_engine_debug {
	uint32_t n_waiting, n_running, n_finished;
	struct spyre_engine_debug_req waiting[SPYRE_ENGINE_DEBUG_MAX], running[SPYRE_ENGINE_DEBUG_MAX];
	uint64_t finished[SPYRE_ENGINE_DEBUG_MAX];
	uint32_t blocks_free;			/* ref 0, cached or not */
	uint32_t block_ref[SPYRE_ENGINE_DEBUG_BLOCKS];
	bool block_cached[SPYRE_ENGINE_DEBUG_BLOCKS];
};
void spyre_engine_debug_state(struct spyre_engine *e, struct spyre_engine_debug *d);

#endif /* SPYRE_SERVE_ENGINE_H */
