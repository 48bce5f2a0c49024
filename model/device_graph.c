// SPDX-License-Identifier: MIT
/*
 * The model graph (device_int.h): one function, dm_step(), describes a
 * prefill or decode step as the sequence of kernels it launches; the device
 * run (device.c) and the no-device estimate (below) both walk it, so there
 * is one model graph. Under tensor parallelism a shard's step also marks
 * the two all-reduces of a layer (OP_ALLREDUCE).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "device_int.h"

struct spyre_kdesc dm_kd(const struct graph *g, uint32_t op, uint64_t m, uint64_t n, uint64_t k)
{
	return (struct spyre_kdesc){ .size = sizeof(struct spyre_kdesc), .op = op, .dtype = g->dt,
				     .cores = g->cores, .m = m, .n = n, .k = k, .sp_bytes = g->sp_bytes,
				     .flags = g->reloc ? SPYRE_KF_RELOC : 0 };
}

#define B(field) (g->dm ? g->dm->field : 0)
#define W(field) (g->dm ? g->dm->wt.field : 0)
#define L(i, field) (g->dm ? g->dm->wt.layer[i].field : 0)

static int call(emit_fn emit, void *ctx, const struct spyre_kdesc *d, const spyre_dptr_t *slots, uint32_t n,
		const uint64_t *scalars, uint32_t ns)
{
	struct call c = { .d = *d, .nslots = n, .nscalars = ns };

	memcpy(c.slots, slots, n * sizeof(*slots));
	if (ns)
		memcpy(c.scalars, scalars, ns * sizeof(*scalars));
	return emit(ctx, &c);
}

/* Tensor parallel: the sum over the ranks of @y, @m rows of hidden (OP_ALLREDUCE); nothing on one card. */
static int all_reduce(const struct graph *g, spyre_dptr_t y, uint32_t m, emit_fn emit, void *ctx)
{
	struct call c = { .d = { .size = sizeof(c.d), .op = OP_ALLREDUCE, .dtype = g->dt, .m = m,
				 .n = g->cfg->hidden }, .slots = { y }, .nslots = 1 };

	return g->tp > 1 ? emit(ctx, &c) : 0;
}

/* Layer @l's attention of @m rows at pos0 (caches in the contiguous layout: ATTENTION). */
static int attend(const struct graph *g, uint32_t l, uint32_t m, uint32_t pos0, bool decode, emit_fn emit, void *ctx)
{
	const struct spyre_model_config *c = g->cfg;
	struct spyre_kdesc d = dm_kd(g, SPYRE_KOP_ATTENTION, m, 0, 0);
	struct call ac = { .nslots = 6, .slots = { B(q), B(k), B(v), L(l, kc), L(l, vc), B(a) },
			   /* decode: as many scalars as the kernel takes (emit asks it) */
			   .nscalars = decode ? UINT32_MAX : 0 };

	d.heads = c->heads;
	d.kv_heads = c->kv_heads;
	d.head_dim = c->head_dim;
	d.max_pos = c->max_pos;
	d.scale = c->attention_multiplier;
	if (decode) {
		d.flags |= SPYRE_KF_DECODE;
		if (spyre_kernel_attention_scalars(&d, pos0, ac.scalars))
			return -EINVAL;
	}
	ac.d = d;
	return emit(ctx, &ac);
}

/*
 * Dispatch d: the caches as blocks of PAGE positions with the identity block
 * table: the new K/V rows into their slots (prefill: 0 .. m-1; decode: the
 * position row of the tables), then attention up to the context length row.
 */
static int attend_paged(const struct graph *g, uint32_t l, uint32_t m, bool decode, emit_fn emit, void *ctx)
{
	const struct spyre_model_config *c = g->cfg;
	struct spyre_kdesc d = dm_kd(g, SPYRE_KOP_PAGED_KV_WRITE, m, 0, 0);
	int ret;

	d.kv_heads = c->kv_heads;
	d.head_dim = c->head_dim;
	d.block_size = PAGE;
	d.num_blocks = g->dm ? g->dm->nblocks : 1;
	ret = call(emit, ctx, &d, (spyre_dptr_t[]){ B(k), B(v), B(tab) + (decode ? TAB_POS : TAB_SLOTS), L(l, kc),
		   L(l, vc) }, 5, NULL, 0);
	if (ret)
		return ret;
	d.op = SPYRE_KOP_PAGED_ATTENTION;
	d.n = 1;
	d.heads = c->heads;
	d.max_pos = c->max_pos;
	d.scale = c->attention_multiplier;
	return call(emit, ctx, &d, (spyre_dptr_t[]){ B(q), L(l, kc), L(l, vc),
		    B(tab) + TAB_SLOTS + spyre_kernel_pitch(c->max_pos, SPYRE_DT_INT32),
		    B(tab) + (decode ? TAB_CTX : TAB_PREFILL_CTX), B(a) }, 6, NULL, 0);
}

/*
 * The kernels of one step: @m tokens at positions pos0.. (decode: m = 1).
 * @tokens may be NULL for the estimate. Ends with the argmax of the last
 * row's logits in the token buffer. A paged decode step (dispatch d) takes
 * nothing from the host: its token is the last argmax (EMBEDDING
 * SPYRE_KF_INDEXED), its position and context length are device int32
 * (ROPE SPYRE_KF_INDEXED, PAGED_KV_WRITE, PAGED_ATTENTION), advanced by 1
 * on the card at its end (IADD), so a replay of it is the next step.
 */
int dm_step(const struct graph *g, const int32_t *tokens, uint32_t m, uint32_t pos0, bool decode,
		emit_fn emit, void *ctx)
{
	const struct spyre_model_config *c = g->cfg;
	uint32_t hd = c->head_dim, qd = c->heads * hd, kvd = c->kv_heads * hd;
	uint64_t xp = spyre_kernel_pitch(c->hidden, g->dt);
	struct spyre_kdesc d;
	uint64_t sc[EMBED_CHUNK + 8];
	bool fb = g->paged && decode;	/* device-side feedback */
	/* the MLP's output: not attention's under tensor parallelism (a peer may still read t, run_step_tp()) */
	spyre_dptr_t mo = g->tp > 1 ? B(u) : B(t);
	int ret;

	if (fb) {
		d = dm_kd(g, SPYRE_KOP_EMBEDDING, 1, c->vocab, c->hidden);
		d.scale = c->embedding_multiplier;
		d.flags |= SPYRE_KF_INDEXED;
		if ((ret = call(emit, ctx, &d, (spyre_dptr_t[]){ W(embed), B(token), B(x) }, 3, NULL, 0)))
			return ret;
	}
	/* embedding, in chunks: token ids travel as launch scalars */
	for (uint32_t i = 0; i < m && !fb; i += EMBED_CHUNK) {
		uint32_t n = m - i < EMBED_CHUNK ? m - i : EMBED_CHUNK;

		d = dm_kd(g, SPYRE_KOP_EMBEDDING, n, c->vocab, c->hidden);
		d.scale = c->embedding_multiplier;
		if (tokens && spyre_kernel_embedding_scalars(&d, tokens + i, sc))
			return -EINVAL;
		if (!tokens)
			memset(sc, 0, sizeof(sc));
		ret = call(emit, ctx, &d, (spyre_dptr_t[]){ W(embed), B(x) + i * xp }, 2, sc, n);
		if (ret)
			return ret;
	}
	for (uint32_t l = 0; l < c->layers; l++) {
		/* attention block */
		d = dm_kd(g, SPYRE_KOP_RMSNORM, m, c->hidden, 0);
		d.eps = c->norm_eps;
		if ((ret = call(emit, ctx, &d, (spyre_dptr_t[]){ B(x), L(l, attn_norm), B(h) }, 3, NULL, 0)))
			return ret;
		d = dm_kd(g, SPYRE_KOP_LINEAR, m, qd, c->hidden);
		d.out_group = hd;
		if ((ret = call(emit, ctx, &d, (spyre_dptr_t[]){ B(h), L(l, wq), B(q) }, 3, NULL, 0)))
			return ret;
		d = dm_kd(g, SPYRE_KOP_LINEAR, m, kvd, c->hidden);
		d.out_group = hd;
		if ((ret = call(emit, ctx, &d, (spyre_dptr_t[]){ B(h), L(l, wk), B(k) }, 3, NULL, 0)) ||
		    (ret = call(emit, ctx, &d, (spyre_dptr_t[]){ B(h), L(l, wv), B(v) }, 3, NULL, 0)))
			return ret;
		for (int qk = 0; qk < 2; qk++) {
			d = dm_kd(g, SPYRE_KOP_ROPE, m, 0, 0);
			d.heads = qk ? c->kv_heads : c->heads;
			d.head_dim = hd;
			d.max_pos = c->max_pos;
			if (fb) {
				d.flags |= SPYRE_KF_INDEXED;
				ret = call(emit, ctx, &d, (spyre_dptr_t[]){ qk ? B(k) : B(q), W(rope_cos),
					   W(rope_sin), B(tab) + TAB_POS, qk ? B(k) : B(q) }, 5, NULL, 0);
			} else {
				sc[0] = spyre_kernel_rope_scalar(&d, pos0);
				ret = call(emit, ctx, &d, (spyre_dptr_t[]){ qk ? B(k) : B(q), W(rope_cos),
					   W(rope_sin), qk ? B(k) : B(q) }, 4, sc, 1);
			}
			if (ret)
				return ret;
		}
		if ((ret = g->paged ? attend_paged(g, l, m, decode, emit, ctx) : attend(g, l, m, pos0, decode, emit, ctx)))
			return ret;
		d = dm_kd(g, SPYRE_KOP_LINEAR, m, c->hidden, qd);
		d.in_group = hd;
		if ((ret = call(emit, ctx, &d, (spyre_dptr_t[]){ B(a), L(l, wo), B(t) }, 3, NULL, 0)) ||
		    (ret = all_reduce(g, B(t), m, emit, ctx)))
			return ret;
		d = dm_kd(g, SPYRE_KOP_ADD, m, c->hidden, 0);
		d.alpha = c->residual_multiplier;
		if ((ret = call(emit, ctx, &d, (spyre_dptr_t[]){ B(x), B(t), B(x) }, 3, NULL, 0)))
			return ret;
		/* MLP block */
		d = dm_kd(g, SPYRE_KOP_RMSNORM, m, c->hidden, 0);
		d.eps = c->norm_eps;
		if ((ret = call(emit, ctx, &d, (spyre_dptr_t[]){ B(x), L(l, mlp_norm), B(h) }, 3, NULL, 0)))
			return ret;
		d = dm_kd(g, SPYRE_KOP_MLP, m, c->ffn, c->hidden);
		if ((ret = call(emit, ctx, &d, (spyre_dptr_t[]){ B(h), L(l, wg), L(l, wu), L(l, wd), mo }, 5,
				NULL, 0)) ||
		    (ret = all_reduce(g, mo, m, emit, ctx)))
			return ret;
		d = dm_kd(g, SPYRE_KOP_ADD, m, c->hidden, 0);
		d.alpha = c->residual_multiplier;
		if ((ret = call(emit, ctx, &d, (spyre_dptr_t[]){ B(x), mo, B(x) }, 3, NULL, 0)))
			return ret;
	}
	/* the last position's logits and the greedy token: rank 0's (the LM head is not split) */
	if (g->rank)
		return 0;
	d = dm_kd(g, SPYRE_KOP_RMSNORM, 1, c->hidden, 0);
	d.eps = c->norm_eps;
	if ((ret = call(emit, ctx, &d, (spyre_dptr_t[]){ B(x) + (m - 1) * xp, W(final_norm), B(h) }, 3, NULL, 0)))
		return ret;
	d = dm_kd(g, SPYRE_KOP_LINEAR, 1, c->vocab, c->hidden);
	if ((ret = call(emit, ctx, &d, (spyre_dptr_t[]){ B(h), W(lm_head), B(logits) }, 3, NULL, 0)))
		return ret;
	d = dm_kd(g, SPYRE_KOP_ARGMAX, 1, c->vocab, 0);
	if ((ret = call(emit, ctx, &d, (spyre_dptr_t[]){ B(logits), B(token) }, 2, NULL, 0)) || !fb)
		return ret;
	/* the next step's position and context length, on the card */
	d = (struct spyre_kdesc){ .size = sizeof(d), .op = SPYRE_KOP_IADD, .cores = 1, .m = 2, .n = 1, .alpha = 1,
				  .sp_bytes = g->sp_bytes };
	return call(emit, ctx, &d, (spyre_dptr_t[]){ B(tab) + TAB_POS, B(tab) + TAB_POS }, 2, NULL, 0);
}

#undef B
#undef L

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
	ret = dm_step(&g, NULL, prompt, 0, false, emit_estimate, &e);
	if (ret)
		return -1;
	*prefill_ns = e.total;
	e.total = 0;
	ret = dm_step(&g, NULL, 1, prompt, true, emit_estimate, &e);
	if (ret)
		return -1;
	*decode_ns = e.total;
	*weight_bytes = dm_model_bytes(cfg, dtype, 1, 0);
	return 0;
}
