// SPDX-License-Identifier: MIT
/*
 * The model on a spyre card (device.h): its set-up and the device run of
 * the steps device_graph.c describes (dm_step()), by dispatch a, b, c or d.
 * Tensor parallel over N cards (spyre_dmodel_new_tp()): each card is a
 * model of its shard's shape whose step also marks the two all-reduces
 * of a layer; run_step_tp() launches the cards' steps side by side.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device_int.h"
#include "clock.h"

/* ---- on the device -------------------------------------------------------------- */

static int hold(struct spyre_dmodel *dm, spyre_kernel_t *k)
{
	if (dm->nheld == dm->capheld) {
		uint32_t cap = dm->capheld ? 2 * dm->capheld : 64;
		spyre_kernel_t **n = realloc(dm->held, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		dm->held = n;
		dm->capheld = cap;
	}
	dm->held[dm->nheld++] = k;
	return 0;
}

static void release_held(struct spyre_dmodel *dm)
{
	for (uint32_t i = 0; i < dm->nheld; i++)
		spyre_kernel_put(dm->held[i]);
	dm->nheld = 0;
}

static int emit_kernel(void *ctx, struct call *c)
{
	struct spyre_dmodel *dm = ctx;
	struct spyre_kernel_info info = { .size = sizeof(info) };
	spyre_kernel_t *k;
	int ret;

	spyre_trace_span_begin("spyre_kernel_get");
	ret = spyre_kernel_get(dm->kcache, &c->d, &k);
	spyre_trace_span_end();
	if (ret)
		return fail(dm, ret, "%s kernel", spyre_kernel_op_name(c->d.op));
	spyre_kernel_get_info(k, &info);
	if (c->nscalars == UINT32_MAX)
		c->nscalars = info.num_scalars;
	if (c->nscalars != info.num_scalars || c->nscalars > sizeof(c->scalars) / sizeof(c->scalars[0])) {
		spyre_kernel_put(k);
		return fail(dm, -EINVAL, "%s takes %u scalars, the model passes %u (at most %zu)", info.name,
			    info.num_scalars, c->nscalars, sizeof(c->scalars) / sizeof(c->scalars[0]));
	}
	/* a kernel with a work slot (an unfused MLP) gets it from the kernel library */
	ret = spyre_kernel_launch(dm->stream, k, c->slots, c->nslots, c->scalars, c->nscalars);
	if (ret) {
		spyre_kernel_put(k);
		return fail(dm, ret, "launching %s", info.name);
	}
	/* a BUILD step keeps its kernels until the step is over; the cache keeps the others */
	if (dm->opts.dispatch == SPYRE_DISPATCH_BUILD)
		return hold(dm, k);
	spyre_kernel_put(k);
	return 0;
}

/* A kernel: inside a trace span named by its op while tracing (spyre_trace_start()). */
static int emit_device(void *ctx, struct call *c)
{
	int ret;

	if (!spyre_trace_active())
		return emit_kernel(ctx, c);
	spyre_trace_span_begin(spyre_kernel_op_name(c->d.op));
	ret = emit_kernel(ctx, c);
	spyre_trace_span_end();
	return ret;
}

/*
 * What the stream did since its last reset, over @steps steps that took
 * @host_ns (@dispatch_ns until the last was enqueued), into @st[0 ..
 * steps-1] (optional), each step a @steps-th of the totals. Fails when a
 * kernel faulted.
 */
static int step_stats(struct spyre_dmodel *dm, const struct spyre_kcache_stats *k0, uint32_t steps, uint64_t host_ns,
		      uint64_t dispatch_ns, struct spyre_step_stats *st)
{
	struct spyre_kcache_stats k1 = { .size = sizeof(k1) };
	struct spyre_stream_stats s = { .size = sizeof(s) };
	int ret = spyre_stream_get_stats(dm->stream, &s);

	if (ret)
		return fail(dm, ret, "stream statistics");
	spyre_kcache_get_stats(dm->kcache, &k1);
	for (uint32_t i = 0; st && i < steps; i++) {
		memset(&st[i], 0, sizeof(st[i]));
		st[i].host_ns = host_ns / steps;
		st[i].dispatch_ns = dispatch_ns / steps;
		st[i].device_ns = st[i].device_ns_sum = s.device_ns / steps;
		st[i].launches = s.launches / steps;
		st[i].utilization = s.core_cycles ? (double)s.core_busy_cycles / (double)s.core_cycles : 0;
		st[i].h2d_bytes = s.h2d_bytes / steps;
		st[i].arg_bytes = s.arg_bytes / steps;
		st[i].upload_bytes = s.upload_bytes / steps;
		st[i].d2h_bytes = s.d2h_bytes / steps;
		st[i].kernel_hits = (k1.hits - k0->hits) / steps;
		st[i].kernel_misses = (k1.misses - k0->misses) / steps;
	}
	if (s.failed_launches)
		return fail(dm, -EIO, "%llu kernels of the step faulted", (unsigned long long)s.failed_launches);
	return 0;
}

/* The logits as the device left them (@dev, pinned) into fp32 @logits, divided by logits_scaling. */
static void unpack_logits(const struct spyre_dmodel *dm, float *logits, const void *dev)
{
	float inv = 1.0f / dm->cfg.logits_scaling;

	spyre_kernel_unpack(logits, dev, 1, dm->cfg.vocab, 0, dm->dt);
	for (uint32_t i = 0; i < dm->cfg.vocab; i++)
		logits[i] *= inv;
}

/* The graph of a step of @dm as its dispatch and rank run it. */
static struct graph step_graph(const struct spyre_dmodel *dm)
{
	return (struct graph){ .cfg = &dm->cfg, .dt = dm->dt, .cores = dm->cores, .sp_bytes = dm->sp_bytes,
			       .reloc = dm->opts.dispatch == SPYRE_DISPATCH_PATCH,
			       .paged = dm->opts.dispatch == SPYRE_DISPATCH_GRAPH, .tp = dm->tp, .rank = dm->rank,
			       .dm = dm };
}

/* @m tokens at the next position: 0, or -EINVAL with a message (the model is full, an id out of the vocabulary). */
static int check_tokens(struct spyre_dmodel *dm, const int32_t *tokens, uint32_t m)
{
	if (m == 0 || dm->pos + m > dm->cfg.max_pos)
		return fail(dm, -EINVAL, "%u tokens at position %u: the model holds %u positions", m, dm->pos,
			    dm->cfg.max_pos);
	for (uint32_t i = 0; i < m; i++)
		if (tokens[i] < 0 || (uint32_t)tokens[i] >= dm->cfg.vocab)
			return fail(dm, -EINVAL, "token %d at index %u is not in the vocabulary (0..%u)",
				    tokens[i], i, dm->cfg.vocab - 1);
	return 0;
}

/* ---- tensor parallel ---------------------------------------------------------- */

static const char *const tp_graph_refused = "dispatch d (graph replay) does not run with tensor parallelism: a "
					    "captured step cannot hold the all-reduces, whose cross-card events "
					    "cannot be recorded into a graph; use a, b or c";


/* A shard's kernel (or all-reduce) of the step, kept for run_step_tp() to launch. */
static int emit_record(void *ctx, struct call *c)
{
	struct spyre_dmodel *dm = ctx;

	if (dm->nrec == dm->caprec) {
		uint32_t cap = dm->caprec ? 2 * dm->caprec : 64;
		struct call *n = realloc(dm->rec, cap * sizeof(*n));

		if (!n)
			return fail(dm, -ENOMEM, "host memory");
		dm->rec = n;
		dm->caprec = cap;
	}
	dm->rec[dm->nrec++] = *c;
	return 0;
}

/* The first shard's error as @dm's (or @ret's own when no shard has one). */
static int tp_fail(struct spyre_dmodel *dm, int ret, const char *what)
{
	for (uint32_t r = 0; r < dm->tp; r++)
		if (dm->shard[r]->err[0])
			return fail(dm, ret, "%s, rank %u (card of rank %u): %s", what, r, r, dm->shard[r]->err);
	return fail(dm, ret, "%s", what);
}

/*
 * A step over the shards, Megatron's tensor parallelism: each rank runs
 * the step of its shard (its heads: Q, K, V column-parallel, O
 * row-parallel; its part of the MLP: gate, up column-parallel, down
 * row-parallel) on its own card and stream; where the graph has an
 * OP_ALLREDUCE (after O and after the MLP's down projection) the ranks'
 * partial sums are added up by spyre_all_reduce() on every card, then
 * the residual ADD runs replicated. The ranks' kernels between two
 * all-reduces are launched interleaved (rank 0's i-th, rank 1's i-th, ...),
 * so the cards run them concurrently; the all-reduce is enqueued on the
 * ranks' streams and ordered by the cards (libspyre's cross-device events):
 * the host does not wait for it.
 * Only rank 0 computes the logits and the argmax (the LM head is
 * replicated, not split; the other ranks hold no copy of it).
 *
 * The all-reduce orders each rank's later work on its stream after every
 * other card's copies into or out of that rank's buffers (whichever card
 * ran them), so a rank's next kernel reads the whole sum and overwrites
 * nothing a peer still reads. Attention and the MLP still write different
 * buffers (t, u).
 */
static int run_step_tp(struct spyre_dmodel *dm, const int32_t *tokens, uint32_t m, bool decode, int32_t *next,
		       float *logits, struct spyre_step_stats *st)
{
	struct spyre_kcache_stats k0[SPYRE_MODEL_TP_MAX];
	spyre_stream_t *streams[SPYRE_MODEL_TP_MAX];
	spyre_dptr_t y[SPYRE_MODEL_TP_MAX];
	uint32_t at[SPYRE_MODEL_TP_MAX] = { 0 }, n = dm->tp, r;
	struct spyre_dmodel *s0 = dm->shard[0];
	uint64_t t0, t1, pitch = spyre_kernel_pitch(dm->cfg.hidden, dm->dt);
	int ret = 0, sret;

	for (r = 0; r < n && !ret; r++) {
		struct spyre_dmodel *s = dm->shard[r];

		s->err[0] = 0;
		s->nrec = 0;
		streams[r] = s->stream;
		k0[r] = (struct spyre_kcache_stats){ .size = sizeof(k0[r]) };
		spyre_kcache_get_stats(s->kcache, &k0[r]);
		ret = spyre_stream_reset_stats(s->stream);
		if (ret)
			fail(s, ret, "stream");
	}
	if (ret)
		return tp_fail(dm, ret, "tensor parallel step");
	t0 = mono_ns();
	for (r = 0; r < n && !ret; r++) {
		struct graph g = step_graph(dm->shard[r]);

		ret = dm_step(&g, tokens, m, dm->pos, decode, emit_record, dm->shard[r]);
	}
	while (!ret) {
		bool more = true;

		/* every rank's kernels up to its next all-reduce, interleaved */
		while (more && !ret) {
			more = false;
			for (r = 0; r < n && !ret; r++) {
				struct spyre_dmodel *s = dm->shard[r];

				if (at[r] < s->nrec && s->rec[at[r]].d.op != OP_ALLREDUCE) {
					ret = emit_device(s, &s->rec[at[r]++]);
					more = true;
				}
			}
		}
		if (ret || at[0] == s0->nrec)
			break;
		for (r = 0; r < n; r++) {
			if (at[r] == dm->shard[r]->nrec || dm->shard[r]->rec[at[r]].d.m != s0->rec[at[0]].d.m) {
				ret = fail(dm, -EINVAL, "rank %u's step does not match rank 0's", r);
				break;
			}
			y[r] = dm->shard[r]->rec[at[r]++].slots[0];
		}
		if (ret)
			break;
		if (spyre_trace_active())
			spyre_trace_span_begin("all_reduce");
		ret = spyre_all_reduce(dm->comm, y, y, (size_t)m * pitch / SPYRE_DT_SIZE(dm->dt), dm->dt,
				       SPYRE_RED_SUM, streams);
		if (spyre_trace_active())
			spyre_trace_span_end();
		if (ret) {
			fail(dm, ret, "all-reduce over %u cards", n);
			break;
		}
	}
	if (!ret)
		ret = spyre_memcpy_async(s0->stream, (uint64_t)(uintptr_t)s0->host_token, s0->token, 4,
					 SPYRE_MEMCPY_D2H);
	if (!ret && logits)
		ret = spyre_memcpy_async(s0->stream, (uint64_t)(uintptr_t)s0->host_logits, s0->logits,
					 spyre_kernel_pitch(dm->cfg.vocab, dm->dt), SPYRE_MEMCPY_D2H);
	t1 = mono_ns();
	/* every card done, also after a failure: nothing may still run when the caller goes on */
	for (r = 0; r < n; r++) {
		sret = spyre_stream_synchronize(streams[r]);
		ret = ret ?: sret;
		release_held(dm->shard[r]);
	}
	if (ret)
		return dm->err[0] ? ret : tp_fail(dm, ret, "tensor parallel step");
	{
		struct spyre_step_stats tot = { 0 };
		double busy = 0;

		for (r = 0; r < n && !ret; r++) {
			struct spyre_step_stats rs;

			ret = step_stats(dm->shard[r], &k0[r], 1, mono_ns() - t0, t1 - t0, &rs);
			tot.host_ns = rs.host_ns;
			tot.dispatch_ns = rs.dispatch_ns;
			tot.device_ns = rs.device_ns > tot.device_ns ? rs.device_ns : tot.device_ns;
			tot.device_ns_sum += rs.device_ns;
			busy += rs.utilization * (double)rs.device_ns;
			tot.launches += rs.launches;
			tot.h2d_bytes += rs.h2d_bytes;
			tot.arg_bytes += rs.arg_bytes;
			tot.upload_bytes += rs.upload_bytes;
			tot.d2h_bytes += rs.d2h_bytes;
			tot.kernel_hits += rs.kernel_hits;
			tot.kernel_misses += rs.kernel_misses;
		}
		if (ret)
			return tp_fail(dm, ret, "tensor parallel step");
		tot.utilization = tot.device_ns_sum ? busy / (double)tot.device_ns_sum : 0;
		if (st)
			*st = tot;
	}
	*next = dm->last_token = s0->last_token = *s0->host_token;
	if (logits)
		unpack_logits(dm, logits, s0->host_logits);
	for (r = 0; r < n; r++)
		dm->shard[r]->pos += m;
	dm->pos += m;
	return 0;
}

static int run_step(struct spyre_dmodel *dm, const int32_t *tokens, uint32_t m, bool decode, int32_t *next,
		    float *logits, struct spyre_step_stats *st)
{
	struct graph g = step_graph(dm);
	struct spyre_kcache_stats k0 = { .size = sizeof(k0) };
	uint64_t t0, t1;
	int ret;

	if ((ret = check_tokens(dm, tokens, m)))
		return ret;
	if (dm->shard)
		return run_step_tp(dm, tokens, m, decode, next, logits, st);
	spyre_kcache_get_stats(dm->kcache, &k0);
	ret = spyre_stream_reset_stats(dm->stream);
	if (ret)
		return fail(dm, ret, "stream");
	t0 = mono_ns();
	if (g.paged) {
		/* the prefill's context length; the first decode step's position and context length */
		dm->host_tab[TAB_PREFILL_CTX / 4] = (int32_t)m;
		dm->host_tab[TAB_POS / 4] = (int32_t)m;
		dm->host_tab[TAB_CTX / 4] = (int32_t)m + 1;
		ret = spyre_memcpy_async(dm->stream, dm->tab, (uint64_t)(uintptr_t)dm->host_tab, TAB_TOKEN,
					 SPYRE_MEMCPY_H2D);
		if (ret) {
			fail(dm, ret, "the position tables");
			return ret;
		}
	}
	ret = dm_step(&g, tokens, m, dm->pos, decode, emit_device, dm);
	if (!ret)
		ret = spyre_memcpy_async(dm->stream, (uint64_t)(uintptr_t)dm->host_token, dm->token, 4,
					 SPYRE_MEMCPY_D2H);
	if (!ret && logits)
		ret = spyre_memcpy_async(dm->stream, (uint64_t)(uintptr_t)dm->host_logits, dm->logits,
					 spyre_kernel_pitch(dm->cfg.vocab, dm->dt), SPYRE_MEMCPY_D2H);
	t1 = mono_ns();
	if (!ret)
		ret = spyre_stream_synchronize(dm->stream);
	if (ret) {
		release_held(dm);
		if (!dm->err[0])
			fail(dm, ret, "step at position %u", dm->pos);
		return ret;
	}
	release_held(dm);
	ret = step_stats(dm, &k0, 1, mono_ns() - t0, t1 - t0, st);
	if (ret)
		return ret;
	*next = dm->last_token = *dm->host_token;
	if (g.paged)
		dm->dev_stale = false;	/* the prefill wrote the position rows, its argmax is the token */
	if (logits)
		unpack_logits(dm, logits, dm->host_logits);
	dm->pos += m;
	return 0;
}

/* A step: inside a trace span "prefill, N tokens" / "decode step, position P" while tracing. */
static int run_step_traced(struct spyre_dmodel *dm, const int32_t *tokens, uint32_t m, bool decode, int32_t *next,
			   float *logits, struct spyre_step_stats *st)
{
	char name[48];
	int ret;

	if (!spyre_trace_active())
		return run_step(dm, tokens, m, decode, next, logits, st);
	if (decode)
		snprintf(name, sizeof(name), "decode step, position %u", dm->pos);
	else
		snprintf(name, sizeof(name), "prefill, %u tokens", m);
	spyre_trace_span_begin(name);
	ret = run_step(dm, tokens, m, decode, next, logits, st);
	spyre_trace_span_end();
	return ret;
}

int spyre_dmodel_prefill(struct spyre_dmodel *dm, const int32_t *tokens, uint32_t n, int32_t *next,
			 float *logits, struct spyre_step_stats *st)
{
	dm->err[0] = 0;
	if (dm->pos)
		return fail(dm, -EINVAL, "prefill at position %u: reset the model first", dm->pos);
	return run_step_traced(dm, tokens, n, false, next, logits, st);
}

/* ---- dispatch d: a decode step captured once, replayed ------------------------------- */

/* spyre_kernel_get() of a kernel of the step, so that its capture builds and loads nothing. */
static int emit_prepare(void *ctx, struct call *c)
{
	struct spyre_dmodel *dm = ctx;
	spyre_kernel_t *k;
	int ret = spyre_kernel_get(dm->kcache, &c->d, &k);

	if (ret)
		return fail(dm, ret, "%s kernel", spyre_kernel_op_name(c->d.op));
	spyre_kernel_put(k);
	return 0;
}

static void free_execs(struct spyre_dmodel *dm)
{
	for (uint32_t i = 0; i < dm->ngx; i++)
		spyre_graph_exec_destroy(dm->gx[i].x);
	dm->ngx = 0;
}

static void free_graphs(struct spyre_dmodel *dm)
{
	free_execs(dm);
	if (dm->ring_token)
		spyre_free_host(dm->dev, dm->ring_token);
	if (dm->ring_logits)
		spyre_free_host(dm->dev, dm->ring_logits);
	dm->ring_token = NULL;
	dm->ring_logits = NULL;
}

/* The pinned rings of 2K tokens (and with @logits 2K rows of logits); 0, or a failure with a message. */
static int alloc_rings(struct spyre_dmodel *dm, bool logits)
{
	uint64_t k2 = 2ull * dm->sync_every, lp = spyre_kernel_pitch(dm->cfg.vocab, dm->dt);
	int ret = 0;

	if (logits && !dm->gx_logits)
		free_graphs(dm);	/* the execs copy no logits yet */
	dm->gx_logits = dm->gx_logits || logits;
	if (!dm->ring_token)
		ret = spyre_malloc_host(dm->dev, k2 * SPYRE_STICK_BYTES, (void **)&dm->ring_token);
	if (!ret && dm->gx_logits && !dm->ring_logits)
		ret = spyre_malloc_host(dm->dev, k2 * lp, &dm->ring_logits);
	return ret ? fail(dm, ret, "pinned host memory for the results of %u steps", dm->sync_every) : 0;
}

/*
 * The exec of @steps decode steps with device-side feedback that leaves its
 * tokens (and logits) in half @half of the rings: built on first use,
 * captured on the model's stream (whose work is done), its kernels from the
 * model's cache, which outlives it. One replay: ceil(steps x the step's
 * packets / 253) SUBMITs.
 */
static int get_exec(struct spyre_dmodel *dm, uint32_t steps, uint32_t half, spyre_graph_exec_t **out)
{
	struct graph g = { .cfg = &dm->cfg, .dt = dm->dt, .cores = dm->cores, .sp_bytes = dm->sp_bytes,
			   .paged = true, .dm = dm };
	uint64_t lp = spyre_kernel_pitch(dm->cfg.vocab, dm->dt);
	spyre_graph_t *gr = NULL;
	uint32_t i, slot;
	int ret, e;

	for (i = 0; i < dm->ngx; i++)
		if (dm->gx[i].steps == steps && dm->gx[i].half == half) {
			*out = dm->gx[i].x;
			return 0;
		}
	if (dm->ngx == NEXECS) {
		/* only a last window's length changes: keep the full windows' execs */
		for (i = 0; i < dm->ngx;)
			if (dm->gx[i].steps != dm->sync_every) {
				spyre_graph_exec_destroy(dm->gx[i].x);
				dm->gx[i] = dm->gx[--dm->ngx];
			} else {
				i++;
			}
	}
	ret = dm_step(&g, NULL, 1, 0, true, emit_prepare, dm);
	if (ret)
		return ret;
	ret = spyre_stream_begin_capture(dm->stream);
	for (uint32_t st = 0; st < steps && !ret; st++) {
		slot = half * dm->sync_every + st;
		ret = dm_step(&g, NULL, 1, 0, true, emit_device, dm);
		ret = ret ?: spyre_memcpy_async(dm->stream, (uint64_t)(uintptr_t)dm->ring_token + slot * SPYRE_STICK_BYTES,
						dm->token, SPYRE_STICK_BYTES, SPYRE_MEMCPY_D2H);
		if (!ret && dm->gx_logits)
			ret = spyre_memcpy_async(dm->stream, (uint64_t)(uintptr_t)dm->ring_logits + slot * lp,
						 dm->logits, lp, SPYRE_MEMCPY_D2H);
	}
	/* the window is done: an event node, reached at the end of the replay's last job (no SUBMIT of its own) */
	ret = ret ?: spyre_event_record(dm->window_done[half], dm->stream);
	e = spyre_stream_is_capturing(dm->stream) == 1 ? spyre_stream_end_capture(dm->stream, &gr) : 0;
	ret = ret ?: e;
	ret = ret ?: spyre_graph_instantiate(gr, out);
	spyre_graph_destroy(gr);
	if (ret)
		return dm->err[0] ? ret : fail(dm, ret, "capturing %u decode steps", steps);
	dm->gx[dm->ngx].x = *out;
	dm->gx[dm->ngx].steps = steps;
	dm->gx[dm->ngx++].half = half;
	return 0;
}

/* The tokens (and logits) of the window of @w steps from step @i0 out of half @half of the rings. */
static void collect(struct spyre_dmodel *dm, uint32_t i0, uint32_t w, uint32_t half, int32_t *next, float *logits)
{
	uint64_t lp = spyre_kernel_pitch(dm->cfg.vocab, dm->dt);

	for (uint32_t j = 0, slot = half * dm->sync_every; j < w; j++, slot++) {
		next[i0 + j] = dm->ring_token[slot * SPYRE_STICK_BYTES / 4];
		if (logits)
			unpack_logits(dm, logits + (size_t)(i0 + j) * dm->cfg.vocab,
				      (const char *)dm->ring_logits + slot * lp);
	}
}

/*
 * @n decode steps of dispatch d from @token, in windows of up to K steps,
 * each one replay (its tokens into the other half of the rings than the
 * window before); the host waits for a window only once the next is
 * enqueued, so the card always has a window queued (K = 1: streaming
 * without blocking the next step's submission). A step's token never goes
 * through the host on its way to the next step.
 */
/* The window of a run of @n steps that starts at step @i0: its *@w steps (K, or fewer last) and ring *@half. */
static void window_at(uint32_t n, uint32_t k, uint32_t i0, uint32_t *w, uint32_t *half)
{
	*w = n - i0 < k ? n - i0 : k;
	*half = (i0 / k) & 1;
}

static int decode_graph(struct spyre_dmodel *dm, int32_t token, uint32_t n, int32_t *next, float *logits,
			struct spyre_step_stats *st)
{
	struct spyre_kcache_stats k0 = { .size = sizeof(k0) };
	uint32_t k = dm->sync_every, nwin = (n + k - 1) / k, prev_i0 = 0, prev_w = 0, prev_half = 0, w, half;
	spyre_graph_exec_t *x;
	uint64_t t0, t1;
	char name[80];
	int ret;

	if (dm->pos + n > dm->cfg.max_pos)
		return fail(dm, -EINVAL, "%u decode steps at position %u: the model holds %u positions", n, dm->pos,
			    dm->cfg.max_pos);
	/* every exec of the run before the clock starts: the full windows' and the last one's */
	ret = alloc_rings(dm, logits != NULL);
	/* windows 0 and 1 (a full one into each half, or the run's only ones) and the last */
	for (uint32_t i = 0, at[3] = { 0, 1, nwin - 1 }; i < 3 && !ret; i++) {
		if (at[i] >= nwin)
			continue;
		window_at(n, k, at[i] * k, &w, &half);
		ret = get_exec(dm, w, half, &x);	/* found again when it is one of the first two */
	}
	if (ret)
		return ret;
	spyre_kcache_get_stats(dm->kcache, &k0);
	ret = spyre_stream_reset_stats(dm->stream);
	if (ret)
		return fail(dm, ret, "stream");
	t0 = mono_ns();
	/*
	 * After a failed run some of its replays may have advanced the card's
	 * position, context length and token past dm->pos: the host's values
	 * are written back first.
	 */
	if (dm->dev_stale) {
		dm->host_tab[TAB_POS / 4] = (int32_t)dm->pos;
		dm->host_tab[TAB_CTX / 4] = (int32_t)dm->pos + 1;
		ret = spyre_memcpy_async(dm->stream, dm->tab + TAB_POS, (uint64_t)(uintptr_t)(dm->host_tab + TAB_POS / 4),
					 TAB_TOKEN - TAB_POS, SPYRE_MEMCPY_H2D);
	}
	/* a caller's token other than the card's: written over the last argmax */
	if (!ret && (token != dm->last_token || dm->dev_stale)) {
		dm->host_tab[TAB_TOKEN / 4] = token;
		ret = spyre_memcpy_async(dm->stream, dm->token, (uint64_t)(uintptr_t)(dm->host_tab + TAB_TOKEN / 4), 4,
					 SPYRE_MEMCPY_H2D);
	}
	for (uint32_t i0 = 0; i0 < n && !ret; i0 += w) {
		window_at(n, k, i0, &w, &half);
		if (spyre_trace_active()) {
			snprintf(name, sizeof(name), "decode steps, positions %u..%u (one graph replay)", dm->pos + i0,
				 dm->pos + i0 + w - 1);
			spyre_trace_span_begin(name);
		}
		ret = get_exec(dm, w, half, &x);
		ret = ret ?: spyre_graph_launch(x, dm->stream);
		if (spyre_trace_active())
			spyre_trace_span_end();
		/* the window before, while this one is queued behind it */
		if (!ret && prev_w && !(ret = spyre_event_synchronize(dm->window_done[prev_half])))
			collect(dm, prev_i0, prev_w, prev_half, next, logits);
		prev_i0 = i0;
		prev_w = w;
		prev_half = half;
	}
	t1 = mono_ns();
	if (!ret && !(ret = spyre_event_synchronize(dm->window_done[prev_half])))
		collect(dm, prev_i0, prev_w, prev_half, next, logits);
	ret = ret ?: spyre_stream_synchronize(dm->stream);
	if (ret) {
		/* nothing of the run may still write the rings (a later free_graphs() frees them) */
		spyre_stream_synchronize(dm->stream);
		dm->dev_stale = true;
		return dm->err[0] ? ret : fail(dm, ret, "decode steps at position %u", dm->pos);
	}
	ret = step_stats(dm, &k0, n, mono_ns() - t0, t1 - t0, st);
	dm->dev_stale = ret != 0;	/* a faulted kernel: the replays ran, dm->pos stays */
	if (ret)
		return ret;
	dm->last_token = next[n - 1];
	dm->pos += n;
	return 0;
}

int spyre_dmodel_decode(struct spyre_dmodel *dm, int32_t token, int32_t *next, float *logits,
			struct spyre_step_stats *st)
{
	dm->err[0] = 0;
	if (!dm->pos)
		return fail(dm, -EINVAL, "decode before any prefill");
	if (dm->opts.dispatch != SPYRE_DISPATCH_GRAPH)
		return run_step_traced(dm, &token, 1, true, next, logits, st);
	if (token < 0 || (uint32_t)token >= dm->cfg.vocab)
		return fail(dm, -EINVAL, "token %d is not in the vocabulary (0..%u)", token, dm->cfg.vocab - 1);
	return decode_graph(dm, token, 1, next, logits, st);
}

int spyre_dmodel_decode_steps(struct spyre_dmodel *dm, uint32_t n, int32_t *next, float *logits,
			      struct spyre_step_stats *st)
{
	int ret = 0;

	dm->err[0] = 0;
	if (!dm->pos)
		return fail(dm, -EINVAL, "decode before any prefill");
	if (!n)
		return 0;
	if (dm->opts.dispatch == SPYRE_DISPATCH_GRAPH)
		return decode_graph(dm, dm->last_token, n, next, logits, st);
	for (uint32_t i = 0; i < n && !ret; i++)
		ret = run_step_traced(dm, i ? &next[i - 1] : &dm->last_token, 1, true, &next[i],
				      logits ? logits + (size_t)i * dm->cfg.vocab : NULL, st ? st + i : NULL);
	return ret;
}

int spyre_dmodel_set_sync_every(struct spyre_dmodel *dm, uint32_t k)
{
	if (k < 1 || k > SYNC_MAX)
		return fail(dm, -EINVAL, "sync every %u steps: must be 1 to %u", k, SYNC_MAX);
	if (k != dm->sync_every)
		free_graphs(dm);	/* the rings' size and the execs' slots */
	dm->sync_every = k;
	return 0;
}

uint32_t spyre_dmodel_pos(const struct spyre_dmodel *dm)
{
	return dm->pos;
}

const char *spyre_dmodel_error(const struct spyre_dmodel *dm)
{
	return dm->err;
}

spyre_kcache_t *spyre_dmodel_kcache(struct spyre_dmodel *dm)
{
	return dm->shard ? dm->shard[0]->kcache : dm->kcache;
}

int spyre_dmodel_set_dispatch(struct spyre_dmodel *dm, enum spyre_dispatch dispatch)
{
	spyre_kcache_t *kc;
	int ret = 0;

	if (dispatch > SPYRE_DISPATCH_GRAPH)
		return fail(dm, -EINVAL, "dispatch %d", (int)dispatch);
	if (dm->tp > 1 && dispatch == SPYRE_DISPATCH_GRAPH)
		return fail(dm, -EINVAL, "%s", tp_graph_refused);
	if (dm->shard) {
		for (uint32_t r = 0; r < dm->tp && !ret; r++)
			ret = spyre_dmodel_set_dispatch(dm->shard[r], dispatch);
		if (ret)
			return tp_fail(dm, ret, "dispatch");
		dm->opts.dispatch = dispatch;
		return 0;
	}
	/* the execs name the old cache's programs */
	free_graphs(dm);
	/* BUILD keeps nothing: a cache of capacity 0 */
	ret = spyre_kcache_create(dm->dev, dispatch == SPYRE_DISPATCH_BUILD ? 0 : 4096, &kc);
	if (ret)
		return fail(dm, ret, "kernel cache");
	spyre_kcache_destroy(dm->kcache);
	dm->kcache = kc;
	/* d keeps the KV caches in the paged layout, the others in ATTENTION's: a cache of the other kind is emptied */
	if (dm->pos && (dispatch == SPYRE_DISPATCH_GRAPH) != (dm->opts.dispatch == SPYRE_DISPATCH_GRAPH)) {
		dm->opts.dispatch = dispatch;
		return spyre_dmodel_reset(dm);
	}
	dm->opts.dispatch = dispatch;
	return 0;
}

/* ---- set-up --------------------------------------------------------------- */

static int dalloc(struct spyre_dmodel *dm, uint64_t bytes, spyre_dptr_t *p)
{
	return spyre_dmem_alloc(&dm->mem, bytes, p);
}

/*
 * Bytes of one KV cache: [kv_heads x max_pos] rows of head_dim (ATTENTION's
 * layout) or, for dispatch d, blocks of PAGE positions of kv_heads x
 * head_dim (the paged kernels'): the larger, so either fits.
 */
static uint64_t cache_bytes(const struct spyre_model_config *c, uint32_t dt)
{
	uint64_t contig = (uint64_t)c->kv_heads * c->max_pos * spyre_kernel_pitch(c->head_dim, dt);
	uint64_t paged = (uint64_t)(c->max_pos + PAGE - 1) / PAGE * PAGE *
			 spyre_kernel_grouped_pitch((uint64_t)c->kv_heads * c->head_dim, c->head_dim, dt);

	return contig > paged ? contig : paged;
}

/* Bytes of dispatch d's tables (TAB_*). */
static uint64_t tab_bytes(const struct spyre_model_config *c)
{
	return TAB_SLOTS + spyre_kernel_pitch(c->max_pos, SPYRE_DT_INT32) +
	       spyre_kernel_pitch((c->max_pos + PAGE - 1) / PAGE, SPYRE_DT_INT32);
}

/*
 * Device bytes the model needs (weights, caches, activations), for the fit
 * check; @c is one rank's shard of @tp (1: the whole model), which also
 * holds the MLP's partial sums (u, run_step_tp()).
 */
uint64_t dm_model_bytes(const struct spyre_model_config *c, uint32_t dt, uint32_t tp, uint64_t work)
{
	uint64_t hd = c->head_dim, qd = c->heads * hd, kvd = c->kv_heads * hd;
	uint64_t pq = spyre_kernel_grouped_pitch(qd, hd, dt), pk = spyre_kernel_grouped_pitch(kvd, hd, dt);
	uint64_t ph = spyre_kernel_pitch(c->hidden, dt), pf = spyre_kernel_pitch(c->ffn, dt);
	uint64_t per_layer = 2 * ph + c->hidden * (pq + 2 * pk) + qd * ph + 2 * c->hidden * pf + c->ffn * ph +
			     2 * cache_bytes(c, dt);
	/* x, h, t (and u); q, a; k, v (spyre_dmodel_new's activations); logits; the token; dispatch d's tables */
	uint64_t act = (uint64_t)c->max_pos * ((tp > 1 ? 4 : 3) * ph + 2 * pq + 2 * pk) +
		       spyre_kernel_pitch(c->vocab, dt) +
		       SPYRE_STICK_BYTES + tab_bytes(c);
	/* what the allocator may add to each of the model's allocations (size classes, pages) */
	uint64_t slack = (13 + 11 * (uint64_t)c->layers) * (64u << 10);

	return c->vocab * ph + ph + c->hidden * spyre_kernel_pitch(c->vocab, dt) + c->layers * per_layer + act +
	       2ull * c->max_pos * spyre_kernel_pitch(hd, SPYRE_DT_FP32) + work + slack;
}

/* Device scratch memory for kernels with a work slot (the kernel library allocates it): the fit check's reserve. */
static uint64_t work_bytes(uint64_t mem_size)
{
	return (64ull << 20) < mem_size / 8 ? 64ull << 20 : mem_size / 8;
}

int spyre_dmodel_check_fit(spyre_device_t *dev, const struct spyre_model_config *cfg, uint32_t dtype,
			   uint32_t tp, char *err, size_t errlen)
{
	struct spyre_device_props props = { .size = sizeof(props) };
	uint64_t need;
	int ret;

	ret = spyre_device_get_props(dev, &props);
	if (ret) {
		snprintf(err, errlen, "device properties: %s", spyre_last_error());
		return ret;
	}
	need = dm_model_bytes(cfg, dtype, tp, work_bytes(props.mem_size));
	if (need > props.mem_size) {
		snprintf(err, errlen, "the model needs %.2f GiB of device memory in %s (weights, KV caches for %u "
			 "positions, activations), the device has %.2f GiB", need / 1073741824.0,
			 dtype == SPYRE_DT_FP32 ? "fp32" : "16-bit", cfg->max_pos, props.mem_size / 1073741824.0);
		return -ENOMEM;
	}
	return 0;
}

/* A model on one card: the whole model (@tp 1) or rank @rank's shard (@cfg and @w are the shard's). */
static int dmodel_new(spyre_device_t *dev, const struct spyre_model_config *cfg,
		      const struct spyre_model_weights *w, const struct spyre_dmodel_opts *opts, uint32_t tp,
		      uint32_t rank, struct spyre_dmodel **out, char *err, size_t errlen)
{
	struct spyre_device_props props = { .size = sizeof(props) };
	struct spyre_dmodel *dm;
	uint32_t hd = cfg->head_dim, qd = cfg->heads * hd, kvd = cfg->kv_heads * hd;
	int ret;

	*out = NULL;
	dm = calloc(1, sizeof(*dm));
	if (!dm) {
		snprintf(err, errlen, "out of host memory");
		return -ENOMEM;
	}
	dm->dev = dev;
	dm->mem = (struct spyre_dmem){ .dev = dev, .err = dm->err, .errlen = sizeof(dm->err) };
	dm->cfg = *cfg;
	dm->opts = *opts;
	dm->dt = opts->dtype;
	dm->tp = tp;
	dm->rank = rank;
	ret = spyre_device_get_props(dev, &props);
	if (ret) {
		fail(dm, ret, "device properties");
		goto out;
	}
	dm->cores = opts->cores ? opts->cores : props.num_cores;
	dm->sp_bytes = props.scratchpad_bytes;
	if (dm->cores > props.num_cores) {
		ret = fail(dm, -EINVAL, "%u cores requested, the device has %u", dm->cores, props.num_cores);
		goto out;
	}
	ret = spyre_dmodel_check_fit(dev, cfg, dm->dt, tp, dm->err, sizeof(dm->err));
	if (ret)
		goto out;
	ret = spyre_stream_create(dev, SPYRE_STREAM_PRIORITY_NORMAL, &dm->stream);
	if (ret) {
		fail(dm, ret, "stream");
		goto out;
	}
	ret = spyre_dmodel_set_dispatch(dm, opts->dispatch);
	if (ret)
		goto out;
	/*
	 * weights: the projections as the kernels that use them read them (step()'s descriptors),
	 * written by the kernel library from the checkpoint's [out x in]; the KV caches; RoPE
	 */
	struct graph g = { .cfg = cfg, .dt = dm->dt, .cores = dm->cores, .sp_bytes = dm->sp_bytes };
	struct spyre_kdesc base = dm_kd(&g, SPYRE_KOP_LINEAR, 1, 1, 1);

	ret = spyre_dmem_upload_decoder(&dm->mem, cfg, w, &base, !rank, cache_bytes(cfg, dm->dt), &dm->wt);
	if (ret)
		goto out;
	/* activations for max_pos rows */
	{
		uint64_t mp = cfg->max_pos, ph = spyre_kernel_pitch(cfg->hidden, dm->dt);

		if ((ret = dalloc(dm, mp * ph, &dm->x)) || (ret = dalloc(dm, mp * ph, &dm->h)) ||
		    (ret = dalloc(dm, mp * ph, &dm->t)) || (tp > 1 && (ret = dalloc(dm, mp * ph, &dm->u))) ||
		    (ret = dalloc(dm, mp * spyre_kernel_grouped_pitch(qd, hd, dm->dt), &dm->q)) ||
		    (ret = dalloc(dm, mp * spyre_kernel_grouped_pitch(qd, hd, dm->dt), &dm->a)) ||
		    (ret = dalloc(dm, mp * spyre_kernel_grouped_pitch(kvd, hd, dm->dt), &dm->k)) ||
		    (ret = dalloc(dm, mp * spyre_kernel_grouped_pitch(kvd, hd, dm->dt), &dm->v)) ||
		    (ret = dalloc(dm, spyre_kernel_pitch(cfg->vocab, dm->dt), &dm->logits)) ||
		    (ret = dalloc(dm, SPYRE_STICK_BYTES, &dm->token)))
			goto out;
	}
	/* dispatch d's tables: the slot mapping 0 .. max_pos-1 and the identity block table, once */
	{
		uint64_t tb = tab_bytes(cfg), bt = TAB_SLOTS + spyre_kernel_pitch(cfg->max_pos, SPYRE_DT_INT32);
		int32_t *t = calloc(1, tb);

		dm->nblocks = (cfg->max_pos + PAGE - 1) / PAGE;
		if (!t) {
			ret = fail(dm, -ENOMEM, "host memory");
			goto out;
		}
		for (uint32_t i = 0; i < cfg->max_pos; i++)
			t[TAB_SLOTS / 4 + i] = (int32_t)i;
		for (uint32_t i = 0; i < dm->nblocks; i++)
			t[bt / 4 + i] = (int32_t)i;
		ret = dalloc(dm, tb, &dm->tab);
		ret = ret ?: spyre_memcpy(dev, dm->tab, (uint64_t)(uintptr_t)t, tb, SPYRE_MEMCPY_H2D);
		free(t);
		if (ret)
			goto out;
	}
	ret = spyre_event_create(dev, &dm->window_done[0]);
	ret = ret ?: spyre_event_create(dev, &dm->window_done[1]);
	if (ret) {
		fail(dm, ret, "events");
		goto out;
	}
	ret = spyre_malloc_host(dev, SPYRE_STICK_BYTES, (void **)&dm->host_token);
	ret = ret ?: spyre_malloc_host(dev, spyre_kernel_pitch(cfg->vocab, dm->dt), &dm->host_logits);
	ret = ret ?: spyre_malloc_host(dev, TAB_SLOTS, (void **)&dm->host_tab);
	if (ret) {
		fail(dm, ret, "pinned host memory");
		goto out;
	}
	ret = spyre_dmodel_set_sync_every(dm, opts->sync_every ? opts->sync_every : SYNC_DEFAULT);
	ret = ret ?: spyre_dmodel_reset(dm);
	if (ret)
		goto out;
	*out = dm;
	return 0;
out:
	snprintf(err, errlen, "%s", dm->err);
	spyre_dmodel_free(dm);
	return ret ? ret : -EINVAL;
}

int spyre_dmodel_new(spyre_device_t *dev, const struct spyre_model_config *cfg,
		     const struct spyre_model_weights *w, const struct spyre_dmodel_opts *opts,
		     struct spyre_dmodel **out, char *err, size_t errlen)
{
	return dmodel_new(dev, cfg, w, opts, 1, 0, out, err, errlen);
}

int spyre_dmodel_new_tp(spyre_device_t *const *devs, uint32_t tp, const struct spyre_model_config *cfg,
			const struct spyre_model_weights *w, const struct spyre_dmodel_opts *opts,
			struct spyre_dmodel **out, char *err, size_t errlen)
{
	struct spyre_model_config sc;
	struct spyre_dmodel *dm;
	int ret;

	*out = NULL;
	ret = spyre_model_config_tp(cfg, tp, &sc, err, errlen);
	if (ret)
		return ret;
	if (tp == 1)
		return spyre_dmodel_new(devs[0], cfg, w, opts, out, err, errlen);
	if (opts->dispatch == SPYRE_DISPATCH_GRAPH) {
		snprintf(err, errlen, "%s", tp_graph_refused);
		return -EINVAL;
	}
	dm = calloc(1, sizeof(*dm));
	if (!dm || !(dm->shard = calloc(tp, sizeof(*dm->shard)))) {
		free(dm);
		snprintf(err, errlen, "out of host memory");
		return -ENOMEM;
	}
	dm->dev = devs[0];
	dm->cfg = *cfg;
	dm->opts = *opts;
	dm->dt = opts->dtype;
	dm->tp = tp;
	dm->sync_every = opts->sync_every ? opts->sync_every : SYNC_DEFAULT;
	ret = spyre_comm_init(&dm->comm, devs, (int)tp);
	if (ret) {
		fail(dm, ret, "a communicator of %u cards", tp);
		goto out;
	}
	for (uint32_t r = 0; r < tp && !ret; r++) {
		struct spyre_model_weights sw;
		float *own;

		if (spyre_model_weights_shard(cfg, &sc, w, r, &sw, &own)) {
			ret = fail(dm, -ENOMEM, "host memory");
			break;
		}
		ret = dmodel_new(devs[r], &sc, &sw, opts, tp, r, &dm->shard[r], dm->err, sizeof(dm->err));
		free(own);
		free(sw.layer);
		if (ret) {
			char e[sizeof(dm->err)];

			snprintf(e, sizeof(e), "%s", dm->err);
			fail(dm, ret, "rank %u of %u: %s", r, tp, e);
		}
	}
	if (ret)
		goto out;
	dm->cores = dm->shard[0]->cores;
	*out = dm;
	return 0;
out:
	snprintf(err, errlen, "%s", dm->err);
	spyre_dmodel_free(dm);
	return ret;
}

int spyre_dmodel_reset(struct spyre_dmodel *dm)
{
	uint64_t cache = cache_bytes(&dm->cfg, dm->dt);
	int ret = 0;

	if (dm->shard) {
		for (uint32_t r = 0; r < dm->tp && !ret; r++)
			ret = spyre_dmodel_reset(dm->shard[r]);
		if (ret)
			return tp_fail(dm, ret, "reset");
		dm->pos = 0;
		return 0;
	}

	for (uint32_t l = 0; l < dm->cfg.layers && !ret; l++) {
		ret = spyre_memset_async(dm->stream, dm->wt.layer[l].kc, 0, cache);
		ret = ret ?: spyre_memset_async(dm->stream, dm->wt.layer[l].vc, 0, cache);
	}
	ret = ret ?: spyre_stream_synchronize(dm->stream);
	if (ret)
		return fail(dm, ret, "clearing the KV caches");
	dm->pos = 0;
	return 0;
}

void spyre_dmodel_free(struct spyre_dmodel *dm)
{
	if (!dm)
		return;
	for (uint32_t r = 0; dm->shard && r < dm->tp; r++)
		spyre_dmodel_free(dm->shard[r]);
	free(dm->shard);
	spyre_comm_destroy(dm->comm);
	free(dm->rec);
	if (dm->stream)
		spyre_stream_synchronize(dm->stream);
	release_held(dm);
	free(dm->held);
	free_graphs(dm);
	spyre_kcache_destroy(dm->kcache);
	if (dm->stream)
		spyre_stream_destroy(dm->stream);
	spyre_dmem_free(&dm->mem);
	if (dm->host_token)
		spyre_free_host(dm->dev, dm->host_token);
	if (dm->host_logits)
		spyre_free_host(dm->dev, dm->host_logits);
	if (dm->host_tab)
		spyre_free_host(dm->dev, dm->host_tab);
	for (int i = 0; i < 2; i++)
		if (dm->window_done[i])
			spyre_event_destroy(dm->window_done[i]);
	free(dm->wt.layer);
	free(dm);
}

