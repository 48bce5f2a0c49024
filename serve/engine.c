// SPDX-License-Identifier: MIT
/*
 * engine.c - the serving engine (engine.h): requests, the step (plan from
 * sched.c, the batch, the runner, sampling, stop rules), events, the
 * engine's thread.
 *
 * Locking: e->lock protects the lists, the allocator, the stats and every
 * request's fields that add/abort touch. A step plans and builds its batch
 * under the lock, runs the runner without it (add, abort and get_stats go on
 * meanwhile), takes it again to apply the results, and delivers the events
 * it collected after releasing it, so a callback may call add or abort. Only
 * the stepping thread moves or frees a request.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "errf.h"
#include "engine_int.h"
#include "clock.h"


static void req_free(struct spyre_req *r)
{
	if (!r)
		return;
	free(r->tokens);
	free(r->blocks);
	free(r->hashes);
	free(r->stop_ids);
	free(r);
}

/* ---- new / free ---- */

int spyre_engine_new(const struct spyre_runner *runner, const struct spyre_engine_opts *opts,
		     struct spyre_engine **out, char *err, size_t errlen)
{
	struct spyre_engine *e;
	struct spyre_engine_opts o = { 0 };
	uint32_t bs;

	*out = NULL;
	if (!runner || !runner->ops || !runner->ops->step || !runner->vocab || !runner->block_size ||
	    !runner->num_blocks || !runner->max_model_len)
		return errfc(err, errlen, -EINVAL, "the runner is incomplete (ops, vocab, block size, blocks, context)");
	bs = runner->block_size;
	if (opts)
		o = *opts;
	/* defaults within the runner's limits; explicit options beyond them are refused */
	if (!o.max_num_seqs) {
		o.max_num_seqs = SPYRE_DEFAULT_MAX_NUM_SEQS;
		if (runner->max_num_seqs && runner->max_num_seqs < o.max_num_seqs)
			o.max_num_seqs = runner->max_num_seqs;
	}
	if (!o.max_num_batched_tokens) {
		o.max_num_batched_tokens = (SPYRE_DEFAULT_MAX_NUM_BATCHED_TOKENS + bs - 1) / bs * bs;
		if (runner->max_num_tokens && runner->max_num_tokens < o.max_num_batched_tokens)
			o.max_num_batched_tokens = runner->max_num_tokens / bs * bs;
	}
	if (runner->max_num_seqs && o.max_num_seqs > runner->max_num_seqs)
		return errfc(err, errlen, -EINVAL, "max_num_seqs (%u) is more than the %s runner takes in a step (%u)",
			     o.max_num_seqs, runner->name ? runner->name : "model", runner->max_num_seqs);
	if (runner->max_num_tokens && o.max_num_batched_tokens > runner->max_num_tokens)
		return errfc(err, errlen, -EINVAL,
			     "max_num_batched_tokens (%u) is more than the %s runner takes in a step (%u)",
			     o.max_num_batched_tokens, runner->name ? runner->name : "model", runner->max_num_tokens);
	if (!o.max_waiting)
		o.max_waiting = 256;
	if (o.max_num_batched_tokens % bs)
		return errfc(err, errlen, -EINVAL, "max_num_batched_tokens (%u) is not a multiple of the block size (%u)",
			     o.max_num_batched_tokens, bs);
	if (o.max_num_batched_tokens < o.max_num_seqs - 1 + bs)
		return errfc(err, errlen, -EINVAL,
			     "max_num_batched_tokens (%u) leaves no whole block for a prefill chunk beside %u decodes",
			     o.max_num_batched_tokens, o.max_num_seqs - 1);
	if (o.max_num_seqs > 4096 || o.max_num_batched_tokens > (1u << 20) || o.max_waiting > (1u << 20))
		return errfc(err, errlen, -EINVAL, "max_num_seqs, max_num_batched_tokens or max_waiting is too large");
	e = calloc(1, sizeof(*e));
	if (!e)
		return errfc(err, errlen, -ENOMEM, "out of memory");
	e->runner = runner;
	e->opts = o;
	e->block_size = bs;
	e->limit = runner->max_model_len;
	if (o.max_model_len && o.max_model_len < e->limit)
		e->limit = o.max_model_len;
	if ((uint64_t)runner->num_blocks * bs < e->limit)
		e->limit = runner->num_blocks * bs;
	if (o.max_batch_tkv && o.max_batch_tkv < e->limit)
		e->limit = o.max_batch_tkv;
	e->max_blocks_per_req = (e->limit + bs - 1) / bs;
	e->next_id = 1;
	e->seed_state = o.seed ? o.seed : mono_ns() ^ (uint64_t)(uintptr_t)e;
	pthread_mutex_init(&e->lock, NULL);
	pthread_cond_init(&e->cond, NULL);
	e->blocks = spyre_blocks_new(runner->num_blocks, bs);
	e->items = calloc(o.max_num_seqs, sizeof(*e->items));
	e->b_tokens = calloc(o.max_num_batched_tokens, sizeof(int32_t));
	e->b_positions = calloc(o.max_num_batched_tokens, sizeof(int32_t));
	e->b_slots = calloc(o.max_num_batched_tokens, sizeof(int64_t));
	e->b_qs = calloc(o.max_num_seqs + 1, sizeof(uint32_t));
	e->b_ctx = calloc(o.max_num_seqs, sizeof(uint32_t));
	e->b_tables = calloc((size_t)o.max_num_seqs * e->max_blocks_per_req, sizeof(int32_t));
	e->b_argmax = calloc(o.max_num_seqs, sizeof(int32_t));
	e->b_logits = calloc((size_t)o.max_num_seqs * runner->vocab, sizeof(float));
	e->sample_scratch = malloc(spyre_sample_scratch_size(runner->vocab));
	/*
	 * A step's events: at most a TOKEN and a FINISHED per live request, and
	 * requests live at most max_waiting + max_num_seqs at once (add refuses
	 * beyond max_waiting waiting; preemption only moves running ones), so
	 * the buffer never grows.
	 */
	e->events_cap = 2 * (o.max_waiting + o.max_num_seqs) + 16;
	e->events = calloc(e->events_cap, sizeof(*e->events));
	if (!e->blocks || !e->events || !e->items || !e->b_tokens || !e->b_positions || !e->b_slots || !e->b_qs || !e->b_ctx ||
	    !e->b_tables || !e->b_argmax || !e->b_logits || !e->sample_scratch) {
		spyre_engine_free(e);
		return errfc(err, errlen, -ENOMEM, "out of memory for the engine (%u blocks, %u sequences)",
			     runner->num_blocks, o.max_num_seqs);
	}
	e->stats.blocks_total = runner->num_blocks;
	*out = e;
	return 0;
}

/* ---- events ---- */

static void push_event(struct spyre_engine *e, struct spyre_req *r, enum spyre_event_kind kind, int32_t token,
		       bool is_stop, enum spyre_finish_reason reason, const char *error, uint64_t t)
{
	struct spyre_pending_event *pe;

	if (e->nevents == e->events_cap) {
		uint32_t cap = e->events_cap ? 2 * e->events_cap : 64;
		void *p = realloc(e->events, cap * sizeof(*e->events));

		if (!p)
			abort();	/* unreachable: the buffer is sized for every live request (new) */
		e->events = p;
		e->events_cap = cap;
	}
	pe = &e->events[e->nevents++];
	memset(pe, 0, sizeof(*pe));
	pe->fn = r->fn;
	pe->user = r->user;
	pe->ev.kind = kind;
	pe->ev.id = r->id;
	pe->ev.token = token;
	pe->ev.is_stop = is_stop;
	pe->ev.reason = reason;
	pe->ev.error = error;
	pe->ev.prompt_tokens = r->prompt_len;
	pe->ev.generated_tokens = r->generated;
	pe->ev.cached_prompt_tokens = r->cached_prompt_tokens;
	pe->ev.t_arrival = r->t_arrival;
	pe->ev.t_scheduled = r->t_scheduled;
	pe->ev.t_first_token = r->t_first_token;
	pe->ev.t_now = t;
	pe->ev.d_arrival = r->d_arrival;
	pe->ev.d_now = e->stats.runner_device_ns;
}

static void deliver_events(struct spyre_engine *e)
{
	uint32_t n = e->nevents;

	for (uint32_t i = 0; i < n; i++)
		if (e->events[i].fn)
			e->events[i].fn(e->events[i].user, &e->events[i].ev);
	e->nevents = 0;
	if (n && e->opts.events_delivered)
		e->opts.events_delivered(e->opts.events_user);
}

/* Finish @r (in a list): blocks released, FINISHED queued, freed. */
static void finish(struct spyre_engine *e, struct spyre_req *r, enum spyre_finish_reason reason, const char *error,
		   uint64_t t)
{
	spyre_req_release_blocks(e, r);
	spyre_list_remove(r->state == SPYRE_REQ_WAITING ? &e->waiting : &e->running, r);
	push_event(e, r, SPYRE_EVENT_FINISHED, -1, false, reason, error, t);
	e->stats.requests_finished[reason]++;
	if (e->n_finished_ids < SPYRE_ENGINE_DEBUG_MAX)
		e->finished_ids[e->n_finished_ids++] = r->id;
	req_free(r);
}

static void reap_aborted(struct spyre_engine *e, uint64_t t)
{
	struct spyre_req_list *lists[2] = { &e->waiting, &e->running };

	for (int i = 0; i < 2; i++)
		for (struct spyre_req *r = lists[i]->head, *next; r; r = next) {
			next = r->next;
			if (r->aborted)
				finish(e, r, SPYRE_FINISH_ABORT, NULL, t);
		}
}

void spyre_engine_free(struct spyre_engine *e)
{
	if (!e)
		return;
	pthread_mutex_lock(&e->lock);
	e->stop = true;
	pthread_cond_broadcast(&e->cond);
	pthread_mutex_unlock(&e->lock);
	if (e->started)
		pthread_join(e->thread, NULL);
	pthread_mutex_lock(&e->lock);
	for (struct spyre_req *r = e->waiting.head; r; r = r->next)
		r->aborted = true;
	for (struct spyre_req *r = e->running.head; r; r = r->next)
		r->aborted = true;
	if (e->blocks)
		reap_aborted(e, mono_ns());
	pthread_mutex_unlock(&e->lock);
	deliver_events(e);
	spyre_blocks_free(e->blocks);
	pthread_cond_destroy(&e->cond);
	pthread_mutex_destroy(&e->lock);
	free(e->items);
	free(e->b_tokens);
	free(e->b_positions);
	free(e->b_slots);
	free(e->b_qs);
	free(e->b_ctx);
	free(e->b_tables);
	free(e->b_argmax);
	free(e->b_logits);
	free(e->sample_scratch);
	free(e->events);
	free(e);
}

/* ---- add / abort / stats ---- */

int spyre_engine_add(struct spyre_engine *e, const struct spyre_request_params *p, spyre_event_fn fn,
		     void *user, uint64_t *id, char *err, size_t errlen)
{
	const struct spyre_runner *rn = e->runner;
	struct spyre_req *r;
	int rc;

	if (!p || !p->prompt || !p->prompt_len)
		return errfc(err, errlen, -EINVAL, "the prompt is empty");
	if (p->prompt_len >= rn->max_model_len || (e->opts.max_model_len && p->prompt_len >= e->opts.max_model_len))
		return errfc(err, errlen, -E2BIG, "the prompt's %u tokens reach the model's context (%u)",
			     p->prompt_len, e->opts.max_model_len && e->opts.max_model_len < rn->max_model_len ?
			     e->opts.max_model_len : rn->max_model_len);
	if (p->prompt_len >= e->limit)
		return errfc(err, errlen, -E2BIG, "the prompt's %u tokens do not fit the KV cache (%u blocks of %u%s)",
			     p->prompt_len, rn->num_blocks, e->block_size,
			     e->opts.max_batch_tkv ? ", or max_batch_tkv" : "");
	for (uint32_t i = 0; i < p->prompt_len; i++)
		if (p->prompt[i] < 0 || (uint32_t)p->prompt[i] >= rn->vocab)
			return errfc(err, errlen, -EINVAL, "prompt token %u: id %d is not in [0, %u)", i, p->prompt[i],
				     rn->vocab);
	if (!p->max_tokens)
		return errfc(err, errlen, -EINVAL, "max_tokens is 0");
	rc = spyre_sampling_check(&p->sampling);
	if (rc)
		return errfc(err, errlen, rc, "bad sampling parameters: temperature %g (want [0, 1e4]), top_p %g "
			     "(want (0, 1])", (double)p->sampling.temperature, (double)p->sampling.top_p);
	if (p->n_stop_ids && !p->stop_ids)
		return errfc(err, errlen, -EINVAL, "%u stop ids but no array", p->n_stop_ids);
	if (p->n_stop_ids > 1024)
		return errfc(err, errlen, -E2BIG, "%u stop ids (at most 1024)", p->n_stop_ids);
	r = calloc(1, sizeof(*r));
	if (!r)
		return errfc(err, errlen, -ENOMEM, "out of memory");
	r->limit = e->limit;
	r->tokens = malloc((size_t)r->limit * sizeof(int32_t));
	r->blocks = malloc((size_t)e->max_blocks_per_req * sizeof(int32_t));
	r->hashes = malloc((size_t)e->max_blocks_per_req * sizeof(uint64_t));
	r->stop_ids = malloc((p->n_stop_ids ? p->n_stop_ids : 1) * sizeof(int32_t));
	if (!r->tokens || !r->blocks || !r->hashes || !r->stop_ids) {
		req_free(r);
		return errfc(err, errlen, -ENOMEM, "out of memory");
	}
	memcpy(r->tokens, p->prompt, p->prompt_len * sizeof(int32_t));
	if (p->n_stop_ids)
		memcpy(r->stop_ids, p->stop_ids, p->n_stop_ids * sizeof(int32_t));
	r->n_stop_ids = p->n_stop_ids;
	r->n_tokens = r->prompt_len = p->prompt_len;
	r->max_tokens = p->max_tokens < r->limit - p->prompt_len ? p->max_tokens : r->limit - p->prompt_len;
	r->sampling = p->sampling;
	r->ignore_eos = p->ignore_eos;
	r->fn = fn;
	r->user = user;
	r->t_arrival = mono_ns();
	r->state = SPYRE_REQ_WAITING;

	pthread_mutex_lock(&e->lock);
	if (e->stop || e->waiting.count >= e->opts.max_waiting) {
		uint32_t n = e->waiting.count;
		bool stopping = e->stop;

		pthread_mutex_unlock(&e->lock);
		req_free(r);
		if (stopping)
			return errfc(err, errlen, -ESHUTDOWN, "the engine is shutting down");
		return errfc(err, errlen, -EAGAIN, "%u requests are waiting already (max_waiting)", n);
	}
	r->id = e->next_id++;
	r->d_arrival = e->stats.runner_device_ns;
	spyre_rng_seed(&r->rng, p->sampling.has_seed ? p->sampling.seed : spyre_splitmix64(&e->seed_state));
	spyre_list_push_back(&e->waiting, r);
	e->work_gen++;
	if (id)
		*id = r->id;
	pthread_cond_broadcast(&e->cond);
	pthread_mutex_unlock(&e->lock);
	return 0;
}

int spyre_engine_abort(struct spyre_engine *e, uint64_t id)
{
	struct spyre_req_list *lists[2] = { &e->waiting, &e->running };
	int rc = -ENOENT;

	pthread_mutex_lock(&e->lock);
	for (int i = 0; i < 2 && rc; i++)
		for (struct spyre_req *r = lists[i]->head; r; r = r->next)
			if (r->id == id) {
				if (!r->aborted) {
					r->aborted = true;
					e->work_gen++;
					rc = 0;
					pthread_cond_broadcast(&e->cond);
				}
				break;
			}
	pthread_mutex_unlock(&e->lock);
	return rc;
}

void spyre_engine_get_stats(struct spyre_engine *e, struct spyre_engine_stats *st)
{
	pthread_mutex_lock(&e->lock);
	*st = e->stats;
	st->running = e->running.count;
	st->waiting = e->waiting.count;
	st->blocks_total = spyre_blocks_total(e->blocks);
	st->blocks_used = st->blocks_total - spyre_blocks_num_free(e->blocks);
	pthread_mutex_unlock(&e->lock);
	st->thread_cpu_ns = 0;
	if (e->started) {
		clockid_t cid;
		struct timespec ts;

		if (!pthread_getcpuclockid(e->thread, &cid) && !clock_gettime(cid, &ts))
			st->thread_cpu_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	}
}

static void debug_req(const struct spyre_req *r, struct spyre_engine_debug_req *d)
{
	d->id = r->id;
	d->num_tokens = r->n_tokens;
	d->num_computed = r->computed;
	d->num_generated = r->generated;
	d->num_blocks = r->nblocks;
	for (uint32_t i = 0; i < r->nblocks && i < SPYRE_ENGINE_DEBUG_MAX; i++)
		d->blocks[i] = r->blocks[i];
}

void spyre_engine_debug_state(struct spyre_engine *e, struct spyre_engine_debug *d)
{
	memset(d, 0, sizeof(*d));
	pthread_mutex_lock(&e->lock);
	for (struct spyre_req *r = e->waiting.head; r && d->n_waiting < SPYRE_ENGINE_DEBUG_MAX; r = r->next)
		debug_req(r, &d->waiting[d->n_waiting++]);
	for (struct spyre_req *r = e->running.head; r && d->n_running < SPYRE_ENGINE_DEBUG_MAX; r = r->next)
		debug_req(r, &d->running[d->n_running++]);
	d->n_finished = e->n_finished_ids;
	memcpy(d->finished, e->finished_ids, sizeof(d->finished));
	d->blocks_free = spyre_blocks_num_free(e->blocks);
	for (uint32_t i = 0; i < spyre_blocks_total(e->blocks) && i < SPYRE_ENGINE_DEBUG_BLOCKS; i++) {
		d->block_ref[i] = spyre_blocks_refcount(e->blocks, (int32_t)i);
		d->block_cached[i] = spyre_blocks_is_cached(e->blocks, (int32_t)i);
	}
	pthread_mutex_unlock(&e->lock);
}

/* ---- the step ---- */

/* The batch of the planned items; true when every sampling sequence is greedy. */
static bool build_batch(struct spyre_engine *e, struct spyre_runner_batch *b)
{
	uint32_t bs = e->block_size, n = 0, maxb = 1;
	bool greedy = true;

	for (uint32_t s = 0; s < e->nitems; s++) {
		const struct spyre_sched_item *it = &e->items[s];
		uint32_t nb = (it->start + it->rows + bs - 1) / bs;

		if (nb > maxb)
			maxb = nb;
		if (it->samples && it->r->sampling.temperature != 0.0f)
			greedy = false;
	}
	for (uint32_t s = 0; s < e->nitems; s++) {
		const struct spyre_sched_item *it = &e->items[s];
		const struct spyre_req *r = it->r;
		int32_t *tbl = e->b_tables + (size_t)s * maxb;

		e->b_qs[s] = n;
		for (uint32_t i = 0; i < it->rows; i++, n++) {
			uint32_t p = it->start + i;

			e->b_tokens[n] = r->tokens[p];
			e->b_positions[n] = (int32_t)p;
			e->b_slots[n] = (int64_t)r->blocks[p / bs] * bs + p % bs;
		}
		e->b_ctx[s] = it->start + it->rows;
		for (uint32_t i = 0; i < maxb; i++)
			tbl[i] = i < r->nblocks ? r->blocks[i] : -1;
	}
	e->b_qs[e->nitems] = n;
	memset(b, 0, sizeof(*b));
	b->num_tokens = n;
	b->tokens = e->b_tokens;
	b->positions = e->b_positions;
	b->slot_mapping = e->b_slots;
	b->num_seqs = e->nitems;
	b->query_start = e->b_qs;
	b->context_lens = e->b_ctx;
	b->block_tables = e->b_tables;
	b->max_blocks = maxb;
	b->logits = greedy ? NULL : e->b_logits;
	b->argmax = e->b_argmax;
	return greedy;
}

static bool is_stop(const struct spyre_engine *e, const struct spyre_req *r, int32_t t)
{
	if (!r->ignore_eos && t == e->runner->eos_token_id)
		return true;
	for (uint32_t i = 0; i < r->n_stop_ids; i++)
		if (r->stop_ids[i] == t)
			return true;
	return false;
}

/* Apply item @s's results (under the lock). */
static void apply(struct spyre_engine *e, uint32_t s, uint64_t t)
{
	const struct spyre_sched_item *it = &e->items[s];
	struct spyre_req *r = it->r;
	int32_t tok;
	bool stop;

	if (r->aborted) {
		finish(e, r, SPYRE_FINISH_ABORT, NULL, t);
		return;
	}
	r->computed += it->rows;
	spyre_req_register_blocks(e, r);
	if (!it->samples)
		return;
	if (r->sampling.temperature == 0.0f)
		tok = e->b_argmax[s];
	else
		tok = spyre_sample(e->b_logits + (size_t)s * e->runner->vocab, e->runner->vocab, &r->sampling, &r->rng,
				   e->sample_scratch);
	r->tokens[r->n_tokens++] = tok;
	r->generated++;
	e->stats.generation_tokens_total++;
	if (!r->t_first_token)
		r->t_first_token = t;
	stop = is_stop(e, r, tok);
	push_event(e, r, SPYRE_EVENT_TOKEN, tok, stop, SPYRE_FINISH_NONE, NULL, t);
	if (stop)
		finish(e, r, SPYRE_FINISH_STOP, NULL, t);
	else if (r->generated >= r->max_tokens || r->n_tokens >= r->limit)
		finish(e, r, SPYRE_FINISH_LENGTH, NULL, t);
}

static int step(struct spyre_engine *e)
{
	struct spyre_runner_batch b;
	struct spyre_runner_stats rs = { 0 };
	uint64_t t = mono_ns();
	int rc;

	pthread_mutex_lock(&e->lock);
	e->n_finished_ids = 0;
	reap_aborted(e, t);
	spyre_sched_plan(e);
	if (!e->nitems) {
		pthread_mutex_unlock(&e->lock);
		deliver_events(e);
		return 0;
	}
	for (uint32_t s = 0; s < e->nitems; s++)
		if (!e->items[s].r->t_scheduled)
			e->items[s].r->t_scheduled = t;
	build_batch(e, &b);
	pthread_mutex_unlock(&e->lock);

	rc = e->runner->ops->step(e->runner->self, &b, &rs, e->step_err, sizeof(e->step_err));
	if (e->opts.min_step_us) {
		uint64_t spent = mono_ns() - t;

		if (spent < e->opts.min_step_us * 1000ull)
			usleep((useconds_t)((e->opts.min_step_us * 1000ull - spent) / 1000));
	}

	pthread_mutex_lock(&e->lock);
	t = mono_ns();
	e->stats.steps++;
	e->stats.runner_host_ns += rs.host_ns;
	e->stats.runner_device_ns += rs.device_ns;
	e->stats.runner_builds += rs.builds;
	e->stats.runner_replays += rs.replays;
	for (uint32_t s = 0; s < e->nitems; s++) {
		if (rc)
			finish(e, e->items[s].r, e->items[s].r->aborted ? SPYRE_FINISH_ABORT : SPYRE_FINISH_ERROR,
			       e->items[s].r->aborted ? NULL : e->step_err, t);
		else
			apply(e, s, t);
	}
	pthread_mutex_unlock(&e->lock);
	deliver_events(e);
	return rc ? rc : 1;
}

int spyre_engine_step(struct spyre_engine *e)
{
	int rc;

	/* one stepping thread: the engine's (which holds the flag for good), or one caller at a time */
	if (__atomic_exchange_n(&e->stepping, true, __ATOMIC_ACQUIRE))
		return -EBUSY;
	rc = step(e);
	__atomic_store_n(&e->stepping, false, __ATOMIC_RELEASE);
	return rc;
}

static void *engine_thread(void *arg)
{
	struct spyre_engine *e = arg;

	pthread_mutex_lock(&e->lock);
	while (!e->stop) {
		uint64_t gen = e->work_gen;

		if (!e->waiting.count && !e->running.count) {
			pthread_cond_wait(&e->cond, &e->lock);
			continue;
		}
		pthread_mutex_unlock(&e->lock);
		if (step(e) == 0) {
			/* nothing could run: sleep until an add or abort changes that */
			pthread_mutex_lock(&e->lock);
			if (!e->stop && gen == e->work_gen)
				pthread_cond_wait(&e->cond, &e->lock);
			continue;
		}
		pthread_mutex_lock(&e->lock);
	}
	pthread_mutex_unlock(&e->lock);
	return NULL;
}

int spyre_engine_start(struct spyre_engine *e)
{
	int rc;

	if (__atomic_exchange_n(&e->stepping, true, __ATOMIC_ACQUIRE))
		return -EBUSY;
	rc = pthread_create(&e->thread, NULL, engine_thread, e);
	if (rc) {
		__atomic_store_n(&e->stepping, false, __ATOMIC_RELEASE);
		return -rc;
	}
	e->started = true;
	return 0;
}
