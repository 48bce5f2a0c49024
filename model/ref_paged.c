// SPDX-License-Identifier: MIT
/*
 * ref_paged.c - the CPU reference of a serving step over a paged KV cache
 * (ref_paged.h): ref.c's kernels and rounding, row by row, each row at its
 * own position, K/V through slots and block tables.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errf.h"
#include "ref_paged.h"


/* ---- the cache ---- */

int spyre_paged_kv_alloc(struct spyre_paged_kv *kv, const struct spyre_model_config *cfg, uint32_t num_blocks,
			 uint32_t block_size)
{
	size_t n;

	memset(kv, 0, sizeof(*kv));
	if (!num_blocks || !block_size || !cfg->layers || !cfg->kv_heads || !cfg->head_dim)
		return -EINVAL;
	n = (size_t)num_blocks * block_size;
	if (n / block_size != num_blocks || n > ((size_t)1 << 40) / ((size_t)cfg->kv_heads * cfg->head_dim))
		return -EINVAL;
	n *= (size_t)cfg->kv_heads * cfg->head_dim;
	kv->layers = cfg->layers;
	kv->num_blocks = num_blocks;
	kv->block_size = block_size;
	kv->kv_heads = cfg->kv_heads;
	kv->head_dim = cfg->head_dim;
	kv->k = calloc(cfg->layers, sizeof(*kv->k));
	kv->v = calloc(cfg->layers, sizeof(*kv->v));
	if (!kv->k || !kv->v)
		goto nomem;
	for (uint32_t l = 0; l < cfg->layers; l++) {
		kv->k[l] = calloc(n, sizeof(float));
		kv->v[l] = calloc(n, sizeof(float));
		if (!kv->k[l] || !kv->v[l])
			goto nomem;
	}
	return 0;
nomem:
	spyre_paged_kv_free(kv);
	return -ENOMEM;
}

void spyre_paged_kv_free(struct spyre_paged_kv *kv)
{
	for (uint32_t l = 0; kv->k && l < kv->layers; l++)
		free(kv->k[l]);
	for (uint32_t l = 0; kv->v && l < kv->layers; l++)
		free(kv->v[l]);
	free(kv->k);
	free(kv->v);
	memset(kv, 0, sizeof(*kv));
}

/* ---- the batch ---- */

int spyre_paged_batch_check(const struct spyre_paged_batch *b, const struct spyre_paged_kv *kv,
			    uint32_t vocab, uint32_t max_pos, char *err, size_t errlen)
{
	uint64_t nslots = (uint64_t)kv->num_blocks * kv->block_size;

	if (!b->num_tokens || !b->num_seqs)
		return errfc(err, errlen, -EINVAL, "empty batch (%u rows, %u sequences)", b->num_tokens,
			     b->num_seqs);
	if (!b->tokens || !b->positions || !b->slot_mapping || !b->query_start || !b->context_lens ||
	    !b->block_tables || !b->max_blocks)
		return errfc(err, errlen, -EINVAL, "a batch array is missing (or max_blocks is 0)");
	if (b->num_seqs > b->num_tokens)
		return errfc(err, errlen, -EINVAL, "%u sequences in %u rows", b->num_seqs, b->num_tokens);
	if (b->query_start[0] != 0 || b->query_start[b->num_seqs] != b->num_tokens)
		return errfc(err, errlen, -EINVAL, "query_start runs %u..%u, not 0..%u", b->query_start[0],
			     b->query_start[b->num_seqs], b->num_tokens);
	for (uint32_t s = 0; s < b->num_seqs; s++) {
		uint32_t r0 = b->query_start[s], r1 = b->query_start[s + 1], ctx = b->context_lens[s];
		const int32_t *bt = b->block_tables + (size_t)s * b->max_blocks;

		if (r1 <= r0 || r1 > b->num_tokens)
			return errfc(err, errlen, -EINVAL, "query_start[%u..%u] = %u..%u: not a non-empty range", s,
				     s + 1, r0, r1);
		if (!ctx || ctx > max_pos || (uint64_t)ctx > (uint64_t)b->max_blocks * kv->block_size)
			return errfc(err, errlen, -EINVAL,
				     "context_lens[%u] = %u: not in [1, min(max_pos %u, max_blocks %u x block_size %u)]",
				     s, ctx, max_pos, b->max_blocks, kv->block_size);
		for (uint32_t i = 0; i < (ctx + kv->block_size - 1) / kv->block_size; i++)
			if (bt[i] < 0 || (uint32_t)bt[i] >= kv->num_blocks)
				return errfc(err, errlen, -EINVAL, "block_tables[%u][%u] = %d: not in [0, %u)", s, i,
					     bt[i], kv->num_blocks);
		for (uint32_t r = r0; r < r1; r++) {
			int64_t slot = b->slot_mapping[r];

			if (b->tokens[r] < 0 || (uint32_t)b->tokens[r] >= vocab)
				return errfc(err, errlen, -EINVAL, "tokens[%u] = %d: not in [0, %u)", r, b->tokens[r],
					     vocab);
			if (slot == -1)
				continue;
			if (b->positions[r] < 0 || (uint32_t)b->positions[r] >= ctx)
				return errfc(err, errlen, -EINVAL,
					     "positions[%u] = %d: not in [0, context_lens[%u] = %u)", r,
					     b->positions[r], s, ctx);
			if (slot < 0 || (uint64_t)slot >= nslots)
				return errfc(err, errlen, -EINVAL, "slot_mapping[%u] = %lld: not in [0, %llu) or -1",
					     r, (long long)slot, (unsigned long long)nslots);
		}
	}
	return 0;
}

/* ---- kernels ---- */

void spyre_ref_paged_store(float *kc, float *vc, uint32_t kvdim, const int64_t *slot_mapping, uint32_t n,
			   const float *k, const float *v)
{
	for (uint32_t r = 0; r < n; r++) {
		if (slot_mapping[r] < 0)
			continue;
		memcpy(kc + (size_t)slot_mapping[r] * kvdim, k + (size_t)r * kvdim, kvdim * sizeof(float));
		memcpy(vc + (size_t)slot_mapping[r] * kvdim, v + (size_t)r * kvdim, kvdim * sizeof(float));
	}
}

void spyre_ref_paged_gather(const float *kc, const float *vc, uint32_t kvdim, uint32_t block_size,
			    const int32_t *block_table, uint32_t npos, float *kout, float *vout)
{
	for (uint32_t p = 0; p < npos; p++) {
		size_t slot = (size_t)block_table[p / block_size] * block_size + p % block_size;

		if (kout)
			memcpy(kout + (size_t)p * kvdim, kc + slot * kvdim, kvdim * sizeof(float));
		if (vout)
			memcpy(vout + (size_t)p * kvdim, vc + slot * kvdim, kvdim * sizeof(float));
	}
}

void spyre_ref_paged_attention(const float *q, const float *kc, const float *vc, uint32_t block_size,
			       const int32_t *block_table, uint32_t pos, uint32_t heads, uint32_t kv_heads,
			       uint32_t head_dim, float scale, float *out, float *scratch)
{
	uint32_t kvdim = kv_heads * head_dim, npos = pos + 1;
	float *k = scratch, *v = scratch + (size_t)npos * kvdim, *p = v + (size_t)npos * kvdim;

	spyre_ref_paged_gather(kc, vc, kvdim, block_size, block_table, npos, k, v);
	spyre_ref_attention(q, k, v, npos, heads, kv_heads, head_dim, scale, out, p);
}

int spyre_ref_paged_attention_batch(const struct spyre_paged_batch *b, const float *kc, const float *vc,
				    uint32_t block_size, uint32_t heads, uint32_t kv_heads, uint32_t head_dim,
				    float scale, const float *q, float *out)
{
	uint32_t kvdim = kv_heads * head_dim, qdim = heads * head_dim, maxctx = 0;
	float *k, *v, *p;

	for (uint32_t s = 0; s < b->num_seqs; s++)
		if (b->context_lens[s] > maxctx)
			maxctx = b->context_lens[s];
	k = malloc((size_t)maxctx * kvdim * sizeof(float));
	v = malloc((size_t)maxctx * kvdim * sizeof(float));
	p = malloc((size_t)maxctx * sizeof(float));
	if (!k || !v || !p) {
		free(k);
		free(v);
		free(p);
		return -ENOMEM;
	}
	for (uint32_t s = 0; s < b->num_seqs; s++) {
		spyre_ref_paged_gather(kc, vc, kvdim, block_size, b->block_tables + (size_t)s * b->max_blocks,
				       b->context_lens[s], k, v);
		for (uint32_t r = b->query_start[s]; r < b->query_start[s + 1]; r++) {
			if (b->slot_mapping[r] < 0) {
				memset(out + (size_t)r * qdim, 0, qdim * sizeof(float));
				continue;
			}
			spyre_ref_attention(q + (size_t)r * qdim, k, v, (uint32_t)b->positions[r] + 1, heads,
					    kv_heads, head_dim, scale, out + (size_t)r * qdim, p);
		}
	}
	free(k);
	free(v);
	free(p);
	return 0;
}

void spyre_ref_rope_rows(float *v, uint32_t n, uint32_t nheads, uint32_t head_dim, const int32_t *positions,
			 float theta)
{
	for (uint32_t r = 0; r < n; r++)
		spyre_ref_rope(v + (size_t)r * nheads * head_dim, nheads, head_dim, (uint32_t)positions[r], theta);
}

/* ---- the step ---- */

int spyre_ref_paged_step(const struct spyre_ref *ref, struct spyre_paged_kv *kv, const struct spyre_paged_batch *b,
			 float *logits, int32_t *argmax, char *err, size_t errlen)
{
	const struct spyre_model_config *c = spyre_ref_config(ref);
	const struct spyre_model_weights *w = spyre_ref_weights(ref);
	spyre_round_fn R = spyre_ref_rounding(ref);
	uint32_t H = c->hidden, Q = c->heads * c->head_dim, KV = c->kv_heads * c->head_dim, F = c->ffn;
	uint32_t n = b->num_tokens, V = c->vocab;
	float *x, *h, *q, *k, *v, *a, *o, *g, *u, *lg = NULL;
	int rc;

	if (kv->layers != c->layers || kv->kv_heads != c->kv_heads || kv->head_dim != c->head_dim)
		return errfc(err, errlen, -EINVAL, "the KV cache (%u layers, %u kv heads x %u) is not the model's "
			     "(%u, %u x %u)", kv->layers, kv->kv_heads, kv->head_dim, c->layers, c->kv_heads,
			     c->head_dim);
	rc = spyre_paged_batch_check(b, kv, V, c->max_pos, err, errlen);
	if (rc)
		return rc;
	x = malloc((size_t)n * H * sizeof(float));
	h = malloc((size_t)n * H * sizeof(float));
	q = malloc((size_t)n * Q * sizeof(float));
	k = malloc((size_t)n * KV * sizeof(float));
	v = malloc((size_t)n * KV * sizeof(float));
	a = malloc((size_t)n * Q * sizeof(float));
	o = malloc((size_t)n * H * sizeof(float));
	g = malloc((size_t)n * F * sizeof(float));
	u = malloc((size_t)n * F * sizeof(float));
	if (!logits && argmax)
		lg = malloc((size_t)V * sizeof(float));
	rc = errfc(err, errlen, -ENOMEM, "out of memory for a step of %u rows", n);
	if (!x || !h || !q || !k || !v || !a || !o || !g || !u || (!logits && argmax && !lg))
		goto out;

	/* embedding */
	for (uint32_t r = 0; r < n; r++)
		for (uint32_t i = 0; i < H; i++)
			x[(size_t)r * H + i] = R(w->embed[(size_t)b->tokens[r] * H + i] * c->embedding_multiplier);

	for (uint32_t l = 0; l < c->layers; l++) {
		const struct spyre_layer_weights *L = &w->layer[l];

		/* attention block */
		for (uint32_t r = 0; r < n; r++)
			spyre_ref_rmsnorm(x + (size_t)r * H, L->attn_norm, H, c->norm_eps, h + (size_t)r * H);
		spyre_ref_round_all(R, h, (size_t)n * H);
		spyre_ref_matmul(h, n, L->wq, Q, H, q);
		spyre_ref_matmul(h, n, L->wk, KV, H, k);
		spyre_ref_matmul(h, n, L->wv, KV, H, v);
		spyre_ref_round_all(R, q, (size_t)n * Q);
		spyre_ref_round_all(R, k, (size_t)n * KV);
		spyre_ref_round_all(R, v, (size_t)n * KV);
		spyre_ref_rope_rows(q, n, c->heads, c->head_dim, b->positions, c->rope_theta);
		spyre_ref_rope_rows(k, n, c->kv_heads, c->head_dim, b->positions, c->rope_theta);
		spyre_ref_round_all(R, q, (size_t)n * Q);
		spyre_ref_round_all(R, k, (size_t)n * KV);
		spyre_ref_paged_store(kv->k[l], kv->v[l], KV, b->slot_mapping, n, k, v);
		if (spyre_ref_paged_attention_batch(b, kv->k[l], kv->v[l], kv->block_size, c->heads, c->kv_heads,
						    c->head_dim, c->attention_multiplier, q, a))
			goto out;
		spyre_ref_layer_out(c, L, R, n, a, x, h, g, u, o);
	}

	/* the last row of each sequence samples */
	if (logits || argmax) {
		for (uint32_t s = 0; s < b->num_seqs; s++) {
			const float *xl = x + (size_t)(b->query_start[s + 1] - 1) * H;
			float *ls = logits ? logits + (size_t)s * V : lg;

			spyre_ref_rmsnorm(xl, w->final_norm, H, c->norm_eps, h);
			spyre_ref_round_all(R, h, H);
			spyre_ref_matmul(h, 1, w->lm_head, V, H, ls);
			for (uint32_t i = 0; i < V; i++)
				ls[i] = R(ls[i] / c->logits_scaling);
			if (argmax)
				argmax[s] = spyre_argmax(ls, V);
		}
	}
	rc = 0;
out:
	free(x);
	free(h);
	free(q);
	free(k);
	free(v);
	free(a);
	free(o);
	free(g);
	free(u);
	free(lg);
	return rc;
}
