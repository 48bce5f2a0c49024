// SPDX-License-Identifier: MIT
/*
 * The model on a spyre card (device.h). One function, step(), describes a
 * prefill or decode step as the sequence of kernels it launches; the device
 * run and the no-device estimate both walk it, so there is one model graph.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device.h"
#include "spyre_isa.h"

/* Prefill embeds at most this many tokens per launch (they travel as launch scalars). */
#define EMBED_CHUNK	128

struct layer_buf {
	spyre_dptr_t attn_norm, wq, wk, wv, wo, mlp_norm, wg, wu, wd, kc, vc;
};

struct spyre_dmodel {
	spyre_device_t *dev;
	struct spyre_model_config cfg;
	struct spyre_dmodel_opts opts;
	uint32_t dt, cores, sp_bytes, pos;
	spyre_stream_t *stream;
	spyre_kcache_t *kcache;
	/* weights */
	spyre_dptr_t embed, final_norm, lm_head, rope_cos, rope_sin;
	struct layer_buf *layer;
	/* activations, for up to max_pos rows (kernels with a work slot get it from the kernel library) */
	spyre_dptr_t x, h, q, k, v, a, t, logits, token;
	/* pinned host buffers the results come back in */
	int32_t *host_token;
	void *host_logits;
	/* kernels launched by a BUILD step, released when it ends */
	spyre_kernel_t **held;
	uint32_t nheld, capheld;
	char err[512];
	/* every device allocation, freed at the end */
	spyre_dptr_t *allocs;
	uint32_t nallocs, capallocs;
};

static int fail(struct spyre_dmodel *dm, int ret, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(struct spyre_dmodel *dm, int ret, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(dm->err, sizeof(dm->err), fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < sizeof(dm->err) - 4 && ret < 0 && *spyre_last_error())
		snprintf(dm->err + n, sizeof(dm->err) - (size_t)n, ": %s", spyre_last_error());
	return ret < 0 ? ret : -EINVAL;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- the model graph ---------------------------------------------------------- */

/* One kernel of a step: what to build and what to bind. */
struct call {
	struct spyre_kdesc d;
	spyre_dptr_t slots[8];
	uint32_t nslots;
	uint64_t scalars[EMBED_CHUNK + 8];
	uint32_t nscalars;
};

typedef int (*emit_fn)(void *ctx, struct call *c);

/* Shapes and buffers step() needs; buffers are 0 for the estimate. */
struct graph {
	const struct spyre_model_config *cfg;
	uint32_t dt, cores, sp_bytes;
	bool reloc;
	const struct spyre_dmodel *dm;	/* NULL for the estimate */
};

static struct spyre_kdesc kd(const struct graph *g, uint32_t op, uint64_t m, uint64_t n, uint64_t k)
{
	return (struct spyre_kdesc){ .size = sizeof(struct spyre_kdesc), .op = op, .dtype = g->dt,
				     .cores = g->cores, .m = m, .n = n, .k = k, .sp_bytes = g->sp_bytes,
				     .flags = g->reloc ? SPYRE_KF_RELOC : 0 };
}

#define B(field) (g->dm ? g->dm->field : 0)
#define L(i, field) (g->dm ? g->dm->layer[i].field : 0)

static int call(emit_fn emit, void *ctx, const struct spyre_kdesc *d, const spyre_dptr_t *slots, uint32_t n,
		const uint64_t *scalars, uint32_t ns)
{
	struct call c = { .d = *d, .nslots = n, .nscalars = ns };

	memcpy(c.slots, slots, n * sizeof(*slots));
	if (ns)
		memcpy(c.scalars, scalars, ns * sizeof(*scalars));
	return emit(ctx, &c);
}

/*
 * The kernels of one step: @m tokens at positions pos0.. (decode: m = 1).
 * @tokens may be NULL for the estimate. Ends with the argmax of the last
 * row's logits in the token buffer.
 */
static int step(const struct graph *g, const int32_t *tokens, uint32_t m, uint32_t pos0, bool decode,
		emit_fn emit, void *ctx)
{
	const struct spyre_model_config *c = g->cfg;
	uint32_t hd = c->head_dim, qd = c->heads * hd, kvd = c->kv_heads * hd;
	uint64_t xp = spyre_kernel_pitch(c->hidden, g->dt);
	struct spyre_kdesc d;
	uint64_t sc[EMBED_CHUNK + 8];
	int ret;

	/* embedding, in chunks: token ids travel as launch scalars */
	for (uint32_t i = 0; i < m; i += EMBED_CHUNK) {
		uint32_t n = m - i < EMBED_CHUNK ? m - i : EMBED_CHUNK;

		d = kd(g, SPYRE_KOP_EMBEDDING, n, c->vocab, c->hidden);
		d.scale = c->embedding_multiplier;
		if (tokens && spyre_kernel_embedding_scalars(&d, tokens + i, sc))
			return -EINVAL;
		if (!tokens)
			memset(sc, 0, sizeof(sc));
		ret = call(emit, ctx, &d, (spyre_dptr_t[]){ B(embed), B(x) + i * xp }, 2, sc, n);
		if (ret)
			return ret;
	}
	for (uint32_t l = 0; l < c->layers; l++) {
		/* attention block */
		d = kd(g, SPYRE_KOP_RMSNORM, m, c->hidden, 0);
		d.eps = c->norm_eps;
		if ((ret = call(emit, ctx, &d, (spyre_dptr_t[]){ B(x), L(l, attn_norm), B(h) }, 3, NULL, 0)))
			return ret;
		d = kd(g, SPYRE_KOP_LINEAR, m, qd, c->hidden);
		d.out_group = hd;
		if ((ret = call(emit, ctx, &d, (spyre_dptr_t[]){ B(h), L(l, wq), B(q) }, 3, NULL, 0)))
			return ret;
		d = kd(g, SPYRE_KOP_LINEAR, m, kvd, c->hidden);
		d.out_group = hd;
		if ((ret = call(emit, ctx, &d, (spyre_dptr_t[]){ B(h), L(l, wk), B(k) }, 3, NULL, 0)) ||
		    (ret = call(emit, ctx, &d, (spyre_dptr_t[]){ B(h), L(l, wv), B(v) }, 3, NULL, 0)))
			return ret;
		for (int qk = 0; qk < 2; qk++) {
			d = kd(g, SPYRE_KOP_ROPE, m, 0, 0);
			d.heads = qk ? c->kv_heads : c->heads;
			d.head_dim = hd;
			d.max_pos = c->max_pos;
			sc[0] = spyre_kernel_rope_scalar(&d, pos0);
			ret = call(emit, ctx, &d, (spyre_dptr_t[]){ qk ? B(k) : B(q), B(rope_cos), B(rope_sin),
				   qk ? B(k) : B(q) }, 4, sc, 1);
			if (ret)
				return ret;
		}
		d = kd(g, SPYRE_KOP_ATTENTION, m, 0, 0);
		d.heads = c->heads;
		d.kv_heads = c->kv_heads;
		d.head_dim = hd;
		d.max_pos = c->max_pos;
		d.scale = c->attention_multiplier;
		if (decode) {
			d.flags |= SPYRE_KF_DECODE;
			if (spyre_kernel_attention_scalars(&d, pos0, sc))
				return -EINVAL;
		}
		struct call ac = { .d = d, .nslots = 6,
				   .slots = { B(q), B(k), B(v), L(l, kc), L(l, vc), B(a) },
				   /* decode: as many scalars as the kernel takes (emit asks it) */
				   .nscalars = decode ? UINT32_MAX : 0 };

		memcpy(ac.scalars, sc, sizeof(ac.scalars));
		if ((ret = emit(ctx, &ac)))
			return ret;
		d = kd(g, SPYRE_KOP_LINEAR, m, c->hidden, qd);
		d.in_group = hd;
		if ((ret = call(emit, ctx, &d, (spyre_dptr_t[]){ B(a), L(l, wo), B(t) }, 3, NULL, 0)))
			return ret;
		d = kd(g, SPYRE_KOP_ADD, m, c->hidden, 0);
		d.alpha = c->residual_multiplier;
		if ((ret = call(emit, ctx, &d, (spyre_dptr_t[]){ B(x), B(t), B(x) }, 3, NULL, 0)))
			return ret;
		/* MLP block */
		d = kd(g, SPYRE_KOP_RMSNORM, m, c->hidden, 0);
		d.eps = c->norm_eps;
		if ((ret = call(emit, ctx, &d, (spyre_dptr_t[]){ B(x), L(l, mlp_norm), B(h) }, 3, NULL, 0)))
			return ret;
		d = kd(g, SPYRE_KOP_MLP, m, c->ffn, c->hidden);
		if ((ret = call(emit, ctx, &d, (spyre_dptr_t[]){ B(h), L(l, wg), L(l, wu), L(l, wd), B(t) }, 5,
				NULL, 0)))
			return ret;
		d = kd(g, SPYRE_KOP_ADD, m, c->hidden, 0);
		d.alpha = c->residual_multiplier;
		if ((ret = call(emit, ctx, &d, (spyre_dptr_t[]){ B(x), B(t), B(x) }, 3, NULL, 0)))
			return ret;
	}
	/* the last position's logits and the greedy token */
	d = kd(g, SPYRE_KOP_RMSNORM, 1, c->hidden, 0);
	d.eps = c->norm_eps;
	if ((ret = call(emit, ctx, &d, (spyre_dptr_t[]){ B(x) + (m - 1) * xp, B(final_norm), B(h) }, 3, NULL, 0)))
		return ret;
	d = kd(g, SPYRE_KOP_LINEAR, 1, c->vocab, c->hidden);
	if ((ret = call(emit, ctx, &d, (spyre_dptr_t[]){ B(h), B(lm_head), B(logits) }, 3, NULL, 0)))
		return ret;
	d = kd(g, SPYRE_KOP_ARGMAX, 1, c->vocab, 0);
	return call(emit, ctx, &d, (spyre_dptr_t[]){ B(logits), B(token) }, 2, NULL, 0);
}

#undef B
#undef L

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

static int run_step(struct spyre_dmodel *dm, const int32_t *tokens, uint32_t m, bool decode, int32_t *next,
		    float *logits, struct spyre_step_stats *st)
{
	struct graph g = { .cfg = &dm->cfg, .dt = dm->dt, .cores = dm->cores, .sp_bytes = dm->sp_bytes,
			   .reloc = dm->opts.dispatch == SPYRE_DISPATCH_PATCH, .dm = dm };
	struct spyre_kcache_stats k0 = { .size = sizeof(k0) }, k1 = { .size = sizeof(k1) };
	struct spyre_stream_stats s = { .size = sizeof(s) };
	uint64_t t0, t1;
	int ret;

	if (m == 0 || dm->pos + m > dm->cfg.max_pos)
		return fail(dm, -EINVAL, "%u tokens at position %u: the model holds %u positions", m, dm->pos,
			    dm->cfg.max_pos);
	for (uint32_t i = 0; i < m; i++)
		if (tokens[i] < 0 || (uint32_t)tokens[i] >= dm->cfg.vocab)
			return fail(dm, -EINVAL, "token %d at index %u is not in the vocabulary (0..%u)",
				    tokens[i], i, dm->cfg.vocab - 1);
	spyre_kcache_get_stats(dm->kcache, &k0);
	ret = spyre_stream_reset_stats(dm->stream);
	if (ret)
		return fail(dm, ret, "stream");
	t0 = now_ns();
	ret = step(&g, tokens, m, dm->pos, decode, emit_device, dm);
	if (!ret)
		ret = spyre_memcpy_async(dm->stream, (uint64_t)(uintptr_t)dm->host_token, dm->token, 4,
					 SPYRE_MEMCPY_D2H);
	if (!ret && logits)
		ret = spyre_memcpy_async(dm->stream, (uint64_t)(uintptr_t)dm->host_logits, dm->logits,
					 spyre_kernel_pitch(dm->cfg.vocab, dm->dt), SPYRE_MEMCPY_D2H);
	t1 = now_ns();
	if (!ret)
		ret = spyre_stream_synchronize(dm->stream);
	if (ret) {
		release_held(dm);
		if (!dm->err[0])
			fail(dm, ret, "step at position %u", dm->pos);
		return ret;
	}
	if (st) {
		memset(st, 0, sizeof(*st));
		st->host_ns = now_ns() - t0;
		st->dispatch_ns = t1 - t0;
	}
	release_held(dm);
	ret = spyre_stream_get_stats(dm->stream, &s);
	if (ret)
		return fail(dm, ret, "stream statistics");
	spyre_kcache_get_stats(dm->kcache, &k1);
	if (st) {
		st->device_ns = s.device_ns;
		st->launches = s.launches;
		st->utilization = s.core_cycles ? (double)s.core_busy_cycles / (double)s.core_cycles : 0;
		st->h2d_bytes = s.h2d_bytes;
		st->arg_bytes = s.arg_bytes;
		st->upload_bytes = s.upload_bytes;
		st->d2h_bytes = s.d2h_bytes;
		st->kernel_hits = k1.hits - k0.hits;
		st->kernel_misses = k1.misses - k0.misses;
	}
	if (s.failed_launches)
		return fail(dm, -EIO, "%llu kernels of the step faulted", (unsigned long long)s.failed_launches);
	*next = *dm->host_token;
	if (logits) {
		float inv = 1.0f / dm->cfg.logits_scaling;

		spyre_kernel_unpack(logits, dm->host_logits, 1, dm->cfg.vocab, 0, dm->dt);
		for (uint32_t i = 0; i < dm->cfg.vocab; i++)
			logits[i] *= inv;
	}
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

int spyre_dmodel_decode(struct spyre_dmodel *dm, int32_t token, int32_t *next, float *logits,
			struct spyre_step_stats *st)
{
	dm->err[0] = 0;
	if (!dm->pos)
		return fail(dm, -EINVAL, "decode before any prefill");
	return run_step_traced(dm, &token, 1, true, next, logits, st);
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
	return dm->kcache;
}

int spyre_dmodel_set_dispatch(struct spyre_dmodel *dm, enum spyre_dispatch dispatch)
{
	spyre_kcache_t *kc;
	int ret;

	if (dispatch > SPYRE_DISPATCH_FAST)
		return fail(dm, -EINVAL, "dispatch %d", (int)dispatch);
	/* BUILD keeps nothing: a cache of capacity 0 */
	ret = spyre_kcache_create(dm->dev, dispatch == SPYRE_DISPATCH_BUILD ? 0 : 4096, &kc);
	if (ret)
		return fail(dm, ret, "kernel cache");
	spyre_kcache_destroy(dm->kcache);
	dm->kcache = kc;
	dm->opts.dispatch = dispatch;
	return 0;
}

/* ---- set-up --------------------------------------------------------------- */

static int dalloc(struct spyre_dmodel *dm, uint64_t bytes, spyre_dptr_t *p)
{
	int ret;

	if (dm->nallocs == dm->capallocs) {
		uint32_t cap = dm->capallocs ? 2 * dm->capallocs : 64;
		spyre_dptr_t *n = realloc(dm->allocs, cap * sizeof(*n));

		if (!n)
			return fail(dm, -ENOMEM, "host memory");
		dm->allocs = n;
		dm->capallocs = cap;
	}
	ret = spyre_malloc(dm->dev, bytes, p);
	if (ret)
		return fail(dm, ret, "device memory: %llu bytes", (unsigned long long)bytes);
	dm->allocs[dm->nallocs++] = *p;
	return 0;
}

/* Copy @bytes at @buf (freed) to a new device allocation *@p. */
static int upload_bytes(struct spyre_dmodel *dm, spyre_dptr_t *p, void *buf, uint64_t bytes)
{
	int ret = dalloc(dm, bytes, p);

	ret = ret ?: spyre_memcpy(dm->dev, *p, (uint64_t)(uintptr_t)buf, bytes, SPYRE_MEMCPY_H2D);
	free(buf);
	if (ret && !dm->err[0])
		fail(dm, ret, "uploading weights");
	return ret;
}

/* Upload a host fp32 matrix [rows x cols] (a vector: one row) in the stick layout. */
static int upload(struct spyre_dmodel *dm, spyre_dptr_t *p, const float *src, uint64_t rows, uint64_t cols)
{
	uint64_t bytes = rows * spyre_kernel_pitch(cols, dm->dt);
	void *buf = malloc(bytes);

	if (!buf)
		return fail(dm, -ENOMEM, "host memory");
	spyre_kernel_pack(buf, src, rows, cols, 0, dm->dt);
	return upload_bytes(dm, p, buf, bytes);
}

/*
 * Upload weight slot @slot of the kernel @d (its projections) from the
 * checkpoint's fp32 [out x in]: the kernel library writes its layout.
 */
static int upload_weight(struct spyre_dmodel *dm, spyre_dptr_t *p, const struct spyre_kdesc *d, uint32_t slot,
			 const float *src)
{
	size_t bytes = 0;
	void *buf;
	int ret = spyre_kernel_pack_weight(d, slot, SPYRE_KW_OUT_IN, src, SPYRE_DT_FP32, NULL, &bytes);

	if (ret)
		return fail(dm, ret, "%s weight", spyre_kernel_op_name(d->op));
	buf = malloc(bytes);
	if (!buf)
		return fail(dm, -ENOMEM, "host memory");
	spyre_kernel_pack_weight(d, slot, SPYRE_KW_OUT_IN, src, SPYRE_DT_FP32, buf, &bytes);
	return upload_bytes(dm, p, buf, bytes);
}

/* Device bytes the model needs (weights, caches, activations), for the fit check. */
static uint64_t model_bytes(const struct spyre_model_config *c, uint32_t dt, uint64_t work)
{
	uint64_t hd = c->head_dim, qd = c->heads * hd, kvd = c->kv_heads * hd;
	uint64_t pq = spyre_kernel_grouped_pitch(qd, hd, dt), pk = spyre_kernel_grouped_pitch(kvd, hd, dt);
	uint64_t ph = spyre_kernel_pitch(c->hidden, dt), pf = spyre_kernel_pitch(c->ffn, dt);
	uint64_t per_layer = 2 * ph + c->hidden * (pq + 2 * pk) + qd * ph + 2 * c->hidden * pf + c->ffn * ph +
			     2 * (uint64_t)c->kv_heads * c->max_pos * spyre_kernel_pitch(hd, dt);
	/* x, h, t; q, a; k, v (spyre_dmodel_new's activations); logits; the token */
	uint64_t act = (uint64_t)c->max_pos * (3 * ph + 2 * pq + 2 * pk) + spyre_kernel_pitch(c->vocab, dt) +
		       SPYRE_STICK_BYTES;
	/* what the allocator may add to each of the model's allocations (size classes, pages) */
	uint64_t slack = (12 + 11 * (uint64_t)c->layers) * (64u << 10);

	return c->vocab * ph + ph + c->hidden * spyre_kernel_pitch(c->vocab, dt) + c->layers * per_layer + act +
	       2ull * c->max_pos * spyre_kernel_pitch(hd, SPYRE_DT_FP32) + work + slack;
}

/* Device scratch memory for kernels with a work slot (the kernel library allocates it): the fit check's reserve. */
static uint64_t work_bytes(uint64_t mem_size)
{
	return (64ull << 20) < mem_size / 8 ? 64ull << 20 : mem_size / 8;
}

int spyre_dmodel_check_fit(spyre_device_t *dev, const struct spyre_model_config *cfg, uint32_t dtype,
			   char *err, size_t errlen)
{
	struct spyre_device_props props = { .size = sizeof(props) };
	uint64_t need;
	int ret;

	ret = spyre_device_get_props(dev, &props);
	if (ret) {
		snprintf(err, errlen, "device properties: %s", spyre_last_error());
		return ret;
	}
	need = model_bytes(cfg, dtype, work_bytes(props.mem_size));
	if (need > props.mem_size) {
		snprintf(err, errlen, "the model needs %.2f GiB of device memory in %s (weights, KV caches for %u "
			 "positions, activations), the device has %.2f GiB", need / 1073741824.0,
			 dtype == SPYRE_DT_FP32 ? "fp32" : "16-bit", cfg->max_pos, props.mem_size / 1073741824.0);
		return -ENOMEM;
	}
	return 0;
}

int spyre_dmodel_new(spyre_device_t *dev, const struct spyre_model_config *cfg,
		     const struct spyre_model_weights *w, const struct spyre_dmodel_opts *opts,
		     struct spyre_dmodel **out, char *err, size_t errlen)
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
	dm->cfg = *cfg;
	dm->opts = *opts;
	dm->dt = opts->dtype;
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
	ret = spyre_dmodel_check_fit(dev, cfg, dm->dt, dm->err, sizeof(dm->err));
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
	dm->layer = calloc(cfg->layers, sizeof(*dm->layer));
	if (!dm->layer) {
		ret = fail(dm, -ENOMEM, "host memory");
		goto out;
	}
	/*
	 * weights: the projections as the kernels that use them read them (step()'s descriptors),
	 * written by the kernel library from the checkpoint's [out x in]
	 */
	struct graph g = { .cfg = cfg, .dt = dm->dt, .cores = dm->cores, .sp_bytes = dm->sp_bytes };
	struct spyre_kdesc dq = kd(&g, SPYRE_KOP_LINEAR, 1, qd, cfg->hidden);
	struct spyre_kdesc dkv = kd(&g, SPYRE_KOP_LINEAR, 1, kvd, cfg->hidden);
	struct spyre_kdesc dout = kd(&g, SPYRE_KOP_LINEAR, 1, cfg->hidden, qd);
	struct spyre_kdesc dmlp = kd(&g, SPYRE_KOP_MLP, 1, cfg->ffn, cfg->hidden);
	struct spyre_kdesc dlm = kd(&g, SPYRE_KOP_LINEAR, 1, cfg->vocab, cfg->hidden);

	dq.out_group = dkv.out_group = hd;
	dout.in_group = hd;
	if ((ret = upload(dm, &dm->embed, w->embed, cfg->vocab, cfg->hidden)) ||
	    (ret = upload(dm, &dm->final_norm, w->final_norm, 1, cfg->hidden)) ||
	    (ret = upload_weight(dm, &dm->lm_head, &dlm, 1, w->lm_head)))
		goto out;
	for (uint32_t l = 0; l < cfg->layers; l++) {
		const struct spyre_layer_weights *lw = &w->layer[l];
		struct layer_buf *lb = &dm->layer[l];
		uint64_t cache = (uint64_t)cfg->kv_heads * cfg->max_pos * spyre_kernel_pitch(hd, dm->dt);

		if ((ret = upload(dm, &lb->attn_norm, lw->attn_norm, 1, cfg->hidden)) ||
		    (ret = upload_weight(dm, &lb->wq, &dq, 1, lw->wq)) ||
		    (ret = upload_weight(dm, &lb->wk, &dkv, 1, lw->wk)) ||
		    (ret = upload_weight(dm, &lb->wv, &dkv, 1, lw->wv)) ||
		    (ret = upload_weight(dm, &lb->wo, &dout, 1, lw->wo)) ||
		    (ret = upload(dm, &lb->mlp_norm, lw->mlp_norm, 1, cfg->hidden)) ||
		    (ret = upload_weight(dm, &lb->wg, &dmlp, 1, lw->w_gate)) ||
		    (ret = upload_weight(dm, &lb->wu, &dmlp, 2, lw->w_up)) ||
		    (ret = upload_weight(dm, &lb->wd, &dmlp, 3, lw->w_down)) ||
		    (ret = dalloc(dm, cache, &lb->kc)) || (ret = dalloc(dm, cache, &lb->vc)))
			goto out;
	}
	/* RoPE tables (fp32) */
	{
		uint64_t tb = (uint64_t)cfg->max_pos * spyre_kernel_pitch(hd, SPYRE_DT_FP32);
		void *cs = malloc(tb), *sn = malloc(tb);

		if (!cs || !sn) {
			free(cs);
			free(sn);
			ret = fail(dm, -ENOMEM, "host memory");
			goto out;
		}
		spyre_kernel_rope_tables(cs, sn, cfg->max_pos, hd, cfg->rope_theta);
		ret = dalloc(dm, tb, &dm->rope_cos);
		ret = ret ?: dalloc(dm, tb, &dm->rope_sin);
		ret = ret ?: spyre_memcpy(dev, dm->rope_cos, (uint64_t)(uintptr_t)cs, tb, SPYRE_MEMCPY_H2D);
		ret = ret ?: spyre_memcpy(dev, dm->rope_sin, (uint64_t)(uintptr_t)sn, tb, SPYRE_MEMCPY_H2D);
		free(cs);
		free(sn);
		if (ret)
			goto out;
	}
	/* activations for max_pos rows */
	{
		uint64_t mp = cfg->max_pos, ph = spyre_kernel_pitch(cfg->hidden, dm->dt);

		if ((ret = dalloc(dm, mp * ph, &dm->x)) || (ret = dalloc(dm, mp * ph, &dm->h)) ||
		    (ret = dalloc(dm, mp * ph, &dm->t)) ||
		    (ret = dalloc(dm, mp * spyre_kernel_grouped_pitch(qd, hd, dm->dt), &dm->q)) ||
		    (ret = dalloc(dm, mp * spyre_kernel_grouped_pitch(qd, hd, dm->dt), &dm->a)) ||
		    (ret = dalloc(dm, mp * spyre_kernel_grouped_pitch(kvd, hd, dm->dt), &dm->k)) ||
		    (ret = dalloc(dm, mp * spyre_kernel_grouped_pitch(kvd, hd, dm->dt), &dm->v)) ||
		    (ret = dalloc(dm, spyre_kernel_pitch(cfg->vocab, dm->dt), &dm->logits)) ||
		    (ret = dalloc(dm, SPYRE_STICK_BYTES, &dm->token)))
			goto out;
	}
	ret = spyre_malloc_host(dev, SPYRE_STICK_BYTES, (void **)&dm->host_token);
	ret = ret ?: spyre_malloc_host(dev, spyre_kernel_pitch(cfg->vocab, dm->dt), &dm->host_logits);
	if (ret) {
		fail(dm, ret, "pinned host memory");
		goto out;
	}
	ret = spyre_dmodel_reset(dm);
	if (ret)
		goto out;
	*out = dm;
	return 0;
out:
	snprintf(err, errlen, "%s", dm->err);
	spyre_dmodel_free(dm);
	return ret ? ret : -EINVAL;
}

int spyre_dmodel_reset(struct spyre_dmodel *dm)
{
	uint64_t cache = (uint64_t)dm->cfg.kv_heads * dm->cfg.max_pos * spyre_kernel_pitch(dm->cfg.head_dim, dm->dt);
	int ret = 0;

	for (uint32_t l = 0; l < dm->cfg.layers && !ret; l++) {
		ret = spyre_memset_async(dm->stream, dm->layer[l].kc, 0, cache);
		ret = ret ?: spyre_memset_async(dm->stream, dm->layer[l].vc, 0, cache);
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
	if (dm->stream)
		spyre_stream_synchronize(dm->stream);
	release_held(dm);
	free(dm->held);
	spyre_kcache_destroy(dm->kcache);
	if (dm->stream)
		spyre_stream_destroy(dm->stream);
	for (uint32_t i = 0; i < dm->nallocs; i++)
		spyre_free(dm->dev, dm->allocs[i]);
	free(dm->allocs);
	if (dm->host_token)
		spyre_free_host(dm->dev, dm->host_token);
	if (dm->host_logits)
		spyre_free_host(dm->dev, dm->host_logits);
	free(dm->layer);
	free(dm);
}

/* ---- the estimate, without a device ------------------------------------------ */

struct est {
	struct spyre_kdesc seen[64];
	uint64_t seen_ns[64];
	uint32_t nseen;
	uint64_t total;
	char *err;
	size_t errlen;
};

static int emit_estimate(void *ctx, struct call *c)
{
	struct est *e = ctx;
	struct spyre_kernel_info info = { .size = sizeof(info) };
	void *img;
	size_t sz;
	int ret;

	/* every layer launches the same kernels: build each distinct one once */
	for (uint32_t i = 0; i < e->nseen; i++)
		if (!memcmp(&e->seen[i], &c->d, sizeof(c->d))) {
			e->total += e->seen_ns[i];
			return 0;
		}
	ret = spyre_kernel_build(&c->d, &img, &sz, &info);
	if (ret) {
		snprintf(e->err, e->errlen, "%s", spyre_last_error());
		return ret;
	}
	free(img);
	if (e->nseen < 64) {
		e->seen[e->nseen] = c->d;
		e->seen_ns[e->nseen++] = info.est_ns;
	}
	e->total += info.est_ns;
	return 0;
}

int spyre_dmodel_estimate(const struct spyre_model_config *cfg, uint32_t dtype, uint32_t cores, uint32_t prompt,
			  uint64_t *prefill_ns, uint64_t *decode_ns, uint64_t *weight_bytes, char *err,
			  size_t errlen)
{
	struct graph g = { .cfg = cfg, .dt = dtype, .cores = cores };
	struct est e = { .err = err, .errlen = errlen };
	int ret;

	if (!prompt || prompt >= cfg->max_pos) {
		snprintf(err, errlen, "prompt of %u tokens: must be 1..%u", prompt, cfg->max_pos - 1);
		return -1;
	}
	ret = step(&g, NULL, prompt, 0, false, emit_estimate, &e);
	if (ret)
		return -1;
	*prefill_ns = e.total;
	e.total = 0;
	ret = step(&g, NULL, 1, prompt, true, emit_estimate, &e);
	if (ret)
		return -1;
	*decode_ns = e.total;
	*weight_bytes = model_bytes(cfg, dtype, 0);
	return 0;
}
