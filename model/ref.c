// SPDX-License-Identifier: MIT
/*
 * ref.c - the CPU reference transformer (ref.h).
 *
 * One code path for prefill and decode: a batch of n rows (tokens) through
 * every layer, the K/V cache appended as it goes, row r attending to cache
 * positions 0 .. pos+r (causal). Decode is the batch of one.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"
#include "spyre_dtype.h"
#include "spyre_isa.h"

struct spyre_ref {
	struct spyre_model_config cfg;
	struct spyre_model_weights w;	/* the weights used (a rounded copy, or a view of the caller's) */
	float *rounded;			/* storage of the rounded copy, or NULL */
	struct spyre_layer_weights *own_layers;	/* w.layer when it is the copy's */
	unsigned int dtype;
	spyre_round_fn round;
	uint32_t pos;
	uint32_t cap;			/* positions the cache holds */
	float **kc, **vc;		/* per layer [cap][kv_heads * head_dim] */
	float *inv_freq;		/* [head_dim / 2] */
	char err[200];
};

float spyre_ref_round_none(float x)
{
	return x;
}

float spyre_ref_round_f16(float x)
{
	return spyre_f16_to_f32(spyre_f32_to_f16(x));
}

float spyre_ref_round_bf16(float x)
{
	return spyre_bf16_to_f32(spyre_f32_to_bf16(x));
}

float spyre_ref_round_dl16(float x)
{
	return spyre_dl16_to_f32(spyre_f32_to_dl16(x));
}

spyre_round_fn spyre_ref_round_fn(unsigned int act_dtype)
{
	switch (act_dtype) {
	case SPYRE_REF_FP32: return spyre_ref_round_none;
	case SPYRE_REF_FP16: return spyre_ref_round_f16;
	case SPYRE_REF_BF16: return spyre_ref_round_bf16;
	case SPYRE_REF_DL16: return spyre_ref_round_dl16;
	}
	return NULL;
}

const char *spyre_ref_dtype_name(unsigned int act_dtype)
{
	/* The activation dtypes are the device's first four. */
	static const char *const names[SPYRE_DT_COUNT] = SPYRE_DT_NAMES;
	_Static_assert(SPYRE_REF_FP32 == SPYRE_DT_FP32 && SPYRE_REF_FP16 == SPYRE_DT_FP16 &&
		       SPYRE_REF_BF16 == SPYRE_DT_BF16 && SPYRE_REF_DL16 == SPYRE_DT_DL16,
		       "SPYRE_REF_* are SPYRE_DT_*");

	return act_dtype <= SPYRE_REF_DL16 ? names[act_dtype] : "?";
}

/* ---- kernels ---- */

void spyre_ref_rmsnorm(const float *x, const float *w, uint32_t n, float eps, float *out)
{
	float ss = 0.0f, r;

	for (uint32_t i = 0; i < n; i++)
		ss += x[i] * x[i];
	r = 1.0f / sqrtf(ss / (float)n + eps);
	for (uint32_t i = 0; i < n; i++)
		out[i] = x[i] * r * w[i];
}

static float dot(const float *a, const float *b, uint32_t n)
{
	float s[8] = { 0 };
	uint32_t i = 0;

	for (; i + 8 <= n; i += 8)
		for (int j = 0; j < 8; j++)
			s[j] += a[i + (uint32_t)j] * b[i + (uint32_t)j];
	for (; i < n; i++)
		s[i % 8] += a[i] * b[i];
	return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

void spyre_ref_matmul(const float *x, uint32_t rows, const float *w, uint32_t out, uint32_t in, float *y)
{
	for (uint32_t r = 0; r < rows; r++)
		for (uint32_t o = 0; o < out; o++)
			y[(size_t)r * out + o] = dot(x + (size_t)r * in, w + (size_t)o * in, in);
}

float spyre_ref_rope_inv_freq(uint32_t i, uint32_t head_dim, float theta)
{
	return 1.0f / powf(theta, (float)(2 * i) / (float)head_dim);
}

/* Rotate pair (i, i + head_dim/2) of each of @nheads heads by pos * @inv_freq. */
static void rope_pair(float *v, uint32_t nheads, uint32_t head_dim, uint32_t pos, uint32_t i, float inv_freq)
{
	uint32_t half = head_dim / 2;
	float ang = (float)pos * inv_freq;
	float c = (float)cos((double)ang), s = (float)sin((double)ang);

	for (uint32_t h = 0; h < nheads; h++) {
		float *x = v + (size_t)h * head_dim;
		float a = x[i], b = x[i + half];

		x[i] = a * c - b * s;
		x[i + half] = b * c + a * s;
	}
}

static void rope_with(float *v, uint32_t nheads, uint32_t head_dim, uint32_t pos, const float *inv_freq)
{
	for (uint32_t i = 0; i < head_dim / 2; i++)
		rope_pair(v, nheads, head_dim, pos, i, inv_freq[i]);
}

void spyre_ref_rope(float *v, uint32_t nheads, uint32_t head_dim, uint32_t pos, float theta)
{
	for (uint32_t i = 0; i < head_dim / 2; i++)
		rope_pair(v, nheads, head_dim, pos, i, spyre_ref_rope_inv_freq(i, head_dim, theta));
}

void spyre_ref_attention(const float *q, const float *k, const float *v, uint32_t npos, uint32_t heads,
			 uint32_t kv_heads, uint32_t head_dim, float scale, float *out, float *p)
{
	uint32_t group = heads / kv_heads, kvdim = kv_heads * head_dim;

	for (uint32_t h = 0; h < heads; h++) {
		const float *qh = q + (size_t)h * head_dim;
		uint32_t kvh = h / group;
		float m = -INFINITY, sum = 0.0f;
		float *o = out + (size_t)h * head_dim;

		for (uint32_t j = 0; j < npos; j++) {
			p[j] = dot(qh, k + (size_t)j * kvdim + (size_t)kvh * head_dim, head_dim) * scale;
			if (p[j] > m)
				m = p[j];
		}
		for (uint32_t j = 0; j < npos; j++) {
			p[j] = expf(p[j] - m);
			sum += p[j];
		}
		for (uint32_t d = 0; d < head_dim; d++)
			o[d] = 0.0f;
		for (uint32_t j = 0; j < npos; j++) {
			const float *vj = v + (size_t)j * kvdim + (size_t)kvh * head_dim;
			float pj = p[j] / sum;

			for (uint32_t d = 0; d < head_dim; d++)
				o[d] += pj * vj[d];
		}
	}
}

float spyre_ref_silu(float x)
{
	return x / (1.0f + expf(-x));
}

int32_t spyre_argmax(const float *v, uint32_t n)
{
	int32_t best = 0;
	int found = 0;

	if (!n)
		return -1;
	for (uint32_t i = 0; i < n; i++) {
		if (isnan(v[i]))
			continue;
		if (!found || v[i] > v[best]) {
			best = (int32_t)i;
			found = 1;
		}
	}
	return best;
}

/* ---- the model ---- */

static int fail(struct spyre_ref *ref, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(struct spyre_ref *ref, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(ref->err, sizeof(ref->err), fmt, ap);
	va_end(ap);
	return rc;
}

static void round_all(spyre_round_fn round, float *x, size_t n)
{
	if (round == spyre_ref_round_none)
		return;
	for (size_t i = 0; i < n; i++)
		x[i] = round(x[i]);
}

void spyre_ref_round_all(spyre_round_fn round, float *x, size_t n)
{
	round_all(round, x, n);
}

void spyre_ref_layer_out(const struct spyre_model_config *c, const struct spyre_layer_weights *L, spyre_round_fn R,
			 uint32_t n, float *a, float *x, float *h, float *g, float *u, float *o)
{
	uint32_t H = c->hidden, Q = c->heads * c->head_dim, F = c->ffn;

	round_all(R, a, (size_t)n * Q);
	spyre_ref_matmul(a, n, L->wo, H, Q, o);
	round_all(R, o, (size_t)n * H);
	for (size_t i = 0; i < (size_t)n * H; i++)
		x[i] = R(x[i] + c->residual_multiplier * o[i]);

	/* MLP block */
	for (uint32_t r = 0; r < n; r++)
		spyre_ref_rmsnorm(x + (size_t)r * H, L->mlp_norm, H, c->norm_eps, h + (size_t)r * H);
	round_all(R, h, (size_t)n * H);
	spyre_ref_matmul(h, n, L->w_gate, F, H, g);
	spyre_ref_matmul(h, n, L->w_up, F, H, u);
	for (size_t i = 0; i < (size_t)n * F; i++)
		g[i] = R(spyre_ref_silu(g[i]) * u[i]);
	spyre_ref_matmul(g, n, L->w_down, H, F, o);
	round_all(R, o, (size_t)n * H);
	for (size_t i = 0; i < (size_t)n * H; i++)
		x[i] = R(x[i] + c->residual_multiplier * o[i]);
}

static float *rebase(const float *p, const struct spyre_model_weights *from, float *to)
{
	return to + (p - from->storage);
}

struct spyre_ref *spyre_ref_new(const struct spyre_model_config *cfg, const struct spyre_model_weights *w,
				unsigned int act_dtype)
{
	struct spyre_ref *ref;

	if (!spyre_ref_round_fn(act_dtype) || spyre_model_config_validate(cfg, NULL, 0) || !w || !w->storage ||
	    w->layers != cfg->layers || w->nfloats != spyre_model_param_count(cfg))
		return NULL;
	ref = calloc(1, sizeof(*ref));
	if (!ref)
		return NULL;
	ref->cfg = *cfg;
	ref->dtype = act_dtype;
	ref->round = spyre_ref_round_fn(act_dtype);
	ref->w = *w;
	ref->kc = calloc(cfg->layers, sizeof(*ref->kc));
	ref->vc = calloc(cfg->layers, sizeof(*ref->vc));
	ref->inv_freq = calloc(cfg->head_dim / 2, sizeof(float));
	if (!ref->kc || !ref->vc || !ref->inv_freq)
		goto bad;
	for (uint32_t i = 0; i < cfg->head_dim / 2; i++)
		ref->inv_freq[i] = spyre_ref_rope_inv_freq(i, cfg->head_dim, cfg->rope_theta);
	if (act_dtype != SPYRE_REF_FP32) {
		/* round the weights once, into a copy with the same layout */
		ref->rounded = malloc((size_t)w->nfloats * sizeof(float));
		ref->own_layers = malloc(cfg->layers * sizeof(*ref->own_layers));
		if (!ref->rounded || !ref->own_layers)
			goto bad;
		ref->w.layer = ref->own_layers;
		for (uint64_t i = 0; i < w->nfloats; i++)
			ref->rounded[i] = ref->round(w->storage[i]);
		ref->w.storage = ref->rounded;
		ref->w.embed = rebase(w->embed, w, ref->rounded);
		ref->w.final_norm = rebase(w->final_norm, w, ref->rounded);
		ref->w.lm_head = rebase(w->lm_head, w, ref->rounded);
		for (uint32_t l = 0; l < cfg->layers; l++) {
			const struct spyre_layer_weights *L = &w->layer[l];
			struct spyre_layer_weights *R = &ref->w.layer[l];

			R->attn_norm = rebase(L->attn_norm, w, ref->rounded);
			R->wq = rebase(L->wq, w, ref->rounded);
			R->wk = rebase(L->wk, w, ref->rounded);
			R->wv = rebase(L->wv, w, ref->rounded);
			R->wo = rebase(L->wo, w, ref->rounded);
			R->mlp_norm = rebase(L->mlp_norm, w, ref->rounded);
			R->w_gate = rebase(L->w_gate, w, ref->rounded);
			R->w_up = rebase(L->w_up, w, ref->rounded);
			R->w_down = rebase(L->w_down, w, ref->rounded);
		}
	}
	return ref;
bad:
	spyre_ref_free(ref);
	return NULL;
}

void spyre_ref_free(struct spyre_ref *ref)
{
	if (!ref)
		return;
	for (uint32_t l = 0; ref->kc && l < ref->cfg.layers; l++)
		free(ref->kc[l]);
	for (uint32_t l = 0; ref->vc && l < ref->cfg.layers; l++)
		free(ref->vc[l]);
	free(ref->kc);
	free(ref->vc);
	free(ref->inv_freq);
	free(ref->rounded);
	free(ref->own_layers);
	free(ref);
}

uint32_t spyre_ref_pos(const struct spyre_ref *ref)
{
	return ref->pos;
}

void spyre_ref_reset(struct spyre_ref *ref)
{
	ref->pos = 0;
	ref->err[0] = 0;
}

const char *spyre_ref_error(const struct spyre_ref *ref)
{
	return ref->err;
}

spyre_round_fn spyre_ref_rounding(const struct spyre_ref *ref)
{
	return ref->round;
}

const struct spyre_model_config *spyre_ref_config(const struct spyre_ref *ref)
{
	return &ref->cfg;
}

const struct spyre_model_weights *spyre_ref_weights(const struct spyre_ref *ref)
{
	return &ref->w;
}

/* Room for @need positions in the cache. */
static int reserve(struct spyre_ref *ref, uint32_t need)
{
	size_t kvdim = (size_t)ref->cfg.kv_heads * ref->cfg.head_dim;
	uint32_t cap = ref->cap ? ref->cap : 16;

	if (need <= ref->cap)
		return 0;
	while (cap < need)
		cap = cap > ref->cfg.max_pos / 2 ? ref->cfg.max_pos : cap * 2;
	for (uint32_t l = 0; l < ref->cfg.layers; l++) {
		float *k = realloc(ref->kc[l], (size_t)cap * kvdim * sizeof(float));

		if (!k)
			return -1;
		ref->kc[l] = k;
		float *v = realloc(ref->vc[l], (size_t)cap * kvdim * sizeof(float));

		if (!v)
			return -1;
		ref->vc[l] = v;
	}
	ref->cap = cap;
	return 0;
}

int spyre_ref_prefill(struct spyre_ref *ref, const int32_t *tokens, uint32_t n, float *logits_last)
{
	const struct spyre_model_config *c = &ref->cfg;
	const struct spyre_model_weights *w = &ref->w;
	spyre_round_fn R = ref->round;
	uint32_t H = c->hidden, Q = c->heads * c->head_dim, KV = c->kv_heads * c->head_dim, F = c->ffn;
	uint32_t pos0 = ref->pos;
	float *x = NULL, *h = NULL, *q = NULL, *a = NULL, *o = NULL, *g = NULL, *u = NULL, *p = NULL;
	int rc = -ENOMEM;

	ref->err[0] = 0;
	if (!n)
		return fail(ref, -EINVAL, "no tokens");
	for (uint32_t i = 0; i < n; i++)
		if (tokens[i] < 0 || (uint32_t)tokens[i] >= c->vocab)
			return fail(ref, -EINVAL, "token %u: id %d is not in [0, %u)", i, tokens[i], c->vocab);
	if (n > c->max_pos || pos0 > c->max_pos - n)
		return fail(ref, -ERANGE, "positions %u..%u are beyond max_position_embeddings (%u)", pos0,
			    pos0 + n - 1, c->max_pos);
	if (reserve(ref, pos0 + n))
		return fail(ref, -ENOMEM, "out of memory for the K/V cache of %u positions", pos0 + n);
	x = malloc((size_t)n * H * sizeof(float));
	h = malloc((size_t)n * H * sizeof(float));
	q = malloc((size_t)n * Q * sizeof(float));
	a = malloc((size_t)n * Q * sizeof(float));
	o = malloc((size_t)n * H * sizeof(float));
	g = malloc((size_t)n * F * sizeof(float));
	u = malloc((size_t)n * F * sizeof(float));
	p = malloc((size_t)(pos0 + n) * sizeof(float));
	if (!x || !h || !q || !a || !o || !g || !u || !p) {
		fail(ref, -ENOMEM, "out of memory for a batch of %u tokens", n);
		goto out;
	}

	/* embedding */
	for (uint32_t r = 0; r < n; r++)
		for (uint32_t i = 0; i < H; i++)
			x[(size_t)r * H + i] = R(w->embed[(size_t)tokens[r] * H + i] * c->embedding_multiplier);

	for (uint32_t l = 0; l < c->layers; l++) {
		const struct spyre_layer_weights *L = &w->layer[l];
		float *kc = ref->kc[l] + (size_t)pos0 * KV, *vc = ref->vc[l] + (size_t)pos0 * KV;

		/* attention block */
		for (uint32_t r = 0; r < n; r++)
			spyre_ref_rmsnorm(x + (size_t)r * H, L->attn_norm, H, c->norm_eps, h + (size_t)r * H);
		round_all(R, h, (size_t)n * H);
		spyre_ref_matmul(h, n, L->wq, Q, H, q);
		spyre_ref_matmul(h, n, L->wk, KV, H, kc);	/* k and v straight into the cache */
		spyre_ref_matmul(h, n, L->wv, KV, H, vc);
		round_all(R, q, (size_t)n * Q);
		round_all(R, kc, (size_t)n * KV);
		round_all(R, vc, (size_t)n * KV);
		for (uint32_t r = 0; r < n; r++) {
			rope_with(q + (size_t)r * Q, c->heads, c->head_dim, pos0 + r, ref->inv_freq);
			rope_with(kc + (size_t)r * KV, c->kv_heads, c->head_dim, pos0 + r, ref->inv_freq);
		}
		round_all(R, q, (size_t)n * Q);
		round_all(R, kc, (size_t)n * KV);
		for (uint32_t r = 0; r < n; r++)
			spyre_ref_attention(q + (size_t)r * Q, ref->kc[l], ref->vc[l], pos0 + r + 1, c->heads,
					    c->kv_heads, c->head_dim, c->attention_multiplier,
					    a + (size_t)r * Q, p);
		spyre_ref_layer_out(c, L, R, n, a, x, h, g, u, o);
	}

	if (logits_last) {
		const float *xl = x + (size_t)(n - 1) * H;

		spyre_ref_rmsnorm(xl, w->final_norm, H, c->norm_eps, h);
		round_all(R, h, H);
		spyre_ref_matmul(h, 1, w->lm_head, c->vocab, H, logits_last);
		for (uint32_t i = 0; i < c->vocab; i++)
			logits_last[i] = R(logits_last[i] / c->logits_scaling);
	}
	ref->pos = pos0 + n;
	rc = 0;
out:
	free(x);
	free(h);
	free(q);
	free(a);
	free(o);
	free(g);
	free(u);
	free(p);
	return rc;
}

int spyre_ref_decode(struct spyre_ref *ref, int32_t token, float *logits)
{
	return spyre_ref_prefill(ref, &token, 1, logits);
}
