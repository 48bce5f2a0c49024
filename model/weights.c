// SPDX-License-Identifier: MIT
/*
 * weights.c - model weights: allocation, loading by Hugging Face name,
 * deterministic random initialisation, saving (weights.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errf.h"
#include "weights.h"

int spyre_model_weights_alloc(const struct spyre_model_config *c, struct spyre_model_weights *w,
			      char *err, size_t errlen)
{
	uint64_t n = spyre_model_param_count(c);
	uint64_t h = c->hidden, q = (uint64_t)c->heads * c->head_dim, kv = (uint64_t)c->kv_heads * c->head_dim;
	float *p;

	memset(w, 0, sizeof(*w));
	if (spyre_model_config_validate(c, err, errlen))
		return -1;
	if (n > SIZE_MAX / sizeof(float))
		return errf(err, errlen, "%llu parameters do not fit in memory", (unsigned long long)n);
	w->storage = calloc((size_t)n, sizeof(float));
	w->layer = calloc(c->layers, sizeof(*w->layer));
	if (!w->storage || !w->layer) {
		spyre_model_weights_free(w);
		return errf(err, errlen, "out of memory for %llu parameters (%llu bytes)", (unsigned long long)n,
			    (unsigned long long)n * 4);
	}
	w->layers = c->layers;
	w->nfloats = n;
	p = w->storage;
	w->embed = p;
	p += c->vocab * h;
	for (uint32_t l = 0; l < c->layers; l++) {
		struct spyre_layer_weights *L = &w->layer[l];

		L->attn_norm = p; p += h;
		L->wq = p; p += q * h;
		L->wk = p; p += kv * h;
		L->wv = p; p += kv * h;
		L->wo = p; p += h * q;
		L->mlp_norm = p; p += h;
		L->w_gate = p; p += (uint64_t)c->ffn * h;
		L->w_up = p; p += (uint64_t)c->ffn * h;
		L->w_down = p; p += h * c->ffn;
	}
	w->final_norm = p;
	p += h;
	if (c->tied_embeddings) {
		w->lm_head = w->embed;
	} else {
		w->lm_head = p;
		p += c->vocab * h;
	}
	if ((uint64_t)(p - w->storage) != n) {	/* the count and the layout must agree */
		spyre_model_weights_free(w);
		return errf(err, errlen, "internal error: parameter layout");
	}
	return 0;
}

void spyre_model_weights_free(struct spyre_model_weights *w)
{
	if (!w)
		return;
	free(w->storage);
	free(w->layer);
	memset(w, 0, sizeof(*w));
}

static void set(struct spyre_model_tensor *t, const char *name, float *data, uint32_t rank, uint64_t d0,
		uint64_t d1)
{
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->rank = rank;
	t->shape[0] = d0;
	t->shape[1] = d1;
	t->data = data;
}

struct spyre_model_tensor *spyre_model_weights_list(const struct spyre_model_config *c,
						    const struct spyre_model_weights *w, size_t *n)
{
	size_t count = 2 + 9 * (size_t)c->layers + (c->tied_embeddings ? 0 : 1), i = 0;
	uint64_t h = c->hidden, q = (uint64_t)c->heads * c->head_dim, kv = (uint64_t)c->kv_heads * c->head_dim;
	struct spyre_model_tensor *t = calloc(count, sizeof(*t));
	char name[80];

	*n = 0;
	if (!t)
		return NULL;
	set(&t[i++], "model.embed_tokens.weight", w->embed, 2, c->vocab, h);
	for (uint32_t l = 0; l < c->layers; l++) {
		const struct spyre_layer_weights *L = &w->layer[l];
#define LAYER(suffix, ptr, rank, d0, d1) \
		(snprintf(name, sizeof(name), "model.layers.%u.%s", l, suffix), \
		 set(&t[i++], name, ptr, rank, d0, d1))

		LAYER("input_layernorm.weight", L->attn_norm, 1, h, 0);
		LAYER("self_attn.q_proj.weight", L->wq, 2, q, h);
		LAYER("self_attn.k_proj.weight", L->wk, 2, kv, h);
		LAYER("self_attn.v_proj.weight", L->wv, 2, kv, h);
		LAYER("self_attn.o_proj.weight", L->wo, 2, h, q);
		LAYER("post_attention_layernorm.weight", L->mlp_norm, 1, h, 0);
		LAYER("mlp.gate_proj.weight", L->w_gate, 2, c->ffn, h);
		LAYER("mlp.up_proj.weight", L->w_up, 2, c->ffn, h);
		LAYER("mlp.down_proj.weight", L->w_down, 2, h, c->ffn);
#undef LAYER
	}
	set(&t[i++], "model.norm.weight", w->final_norm, 1, h, 0);
	if (!c->tied_embeddings)
		set(&t[i++], "lm_head.weight", w->lm_head, 2, c->vocab, h);
	*n = i;
	return t;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && !strcmp(s + a - b, suffix);
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct spyre_model_tensor *)a)->name, ((const struct spyre_model_tensor *)b)->name);
}

int spyre_model_weights_load(const struct spyre_model_config *c, const struct spyre_st *st,
			     struct spyre_model_weights *w, char *err, size_t errlen)
{
	struct spyre_model_tensor *t;
	size_t n;

	if (spyre_model_weights_alloc(c, w, err, errlen))
		return -1;
	t = spyre_model_weights_list(c, w, &n);
	if (!t) {
		spyre_model_weights_free(w);
		return errf(err, errlen, "out of memory");
	}
	for (size_t i = 0; i < n; i++)
		if (spyre_st_read_f32(st, t[i].name, t[i].rank, t[i].shape, t[i].data, err, errlen))
			goto bad;
	/* every tensor of the file must be one of ours (or one we may ignore) */
	qsort(t, n, sizeof(*t), by_name);
	for (size_t i = 0; i < spyre_st_count(st); i++) {
		const char *name = spyre_st_tensor_at(st, i)->name;
		struct spyre_model_tensor key;

		if (strlen(name) < sizeof(key.name)) {
			snprintf(key.name, sizeof(key.name), "%s", name);
			if (bsearch(&key, t, n, sizeof(*t), by_name))
				continue;
		}
		if ((c->tied_embeddings && !strcmp(name, "lm_head.weight")) ||
		    ends_with(name, ".rotary_emb.inv_freq"))
			continue;
		errf(err, errlen, "unexpected tensor '%.80s%s' (not part of a %u-layer %s model)", name,
		     strlen(name) > 80 ? "..." : "", c->layers, c->name[0] ? c->name : "Llama-style");
		goto bad;
	}
	free(t);
	return 0;
bad:
	free(t);
	spyre_model_weights_free(w);
	return -1;
}

int spyre_model_weights_load_file(const struct spyre_model_config *c, const char *path,
				  struct spyre_model_weights *w, char *err, size_t errlen)
{
	struct spyre_st *st;
	char msg[512];
	int rc;

	memset(w, 0, sizeof(*w));
	if (spyre_st_open(path, &st, err, errlen))
		return -1;
	rc = spyre_model_weights_load(c, st, w, msg, sizeof(msg));
	spyre_st_close(st);
	if (rc)
		return errf(err, errlen, "%s: %s", path, msg);
	return 0;
}

/* ---- random weights ---- */

uint64_t spyre_splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [0, 1), 53 bits. */
static double uniform(uint64_t *s)
{
	return (double)(spyre_splitmix64(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* Mean 0, standard deviation 1, in [-2 sqrt 3, 2 sqrt 3]: the sum of four
 * uniforms (Irwin-Hall), normal enough and pure arithmetic (no libm). */
static double normalish(uint64_t *s)
{
	double v = uniform(s) + uniform(s) + uniform(s) + uniform(s) - 2.0;

	return v * 1.7320508075688772;	/* sqrt(12 / 4) */
}

/* 1 / sqrt(n) by Newton's method, deterministic. */
static double inv_sqrt(double n)
{
	double x = 1.0;

	while (x * x * n > 1.0)
		x *= 0.5;
	for (int i = 0; i < 60; i++)
		x = x * (1.5 - 0.5 * n * x * x);
	return x;
}

/*
 * The scales (model/README.md explains them). A random model with tied
 * embeddings tends to copy its input token (the embedding stays in the
 * residual stream and lm_head == embed) or to settle on one token (near-uniform
 * attention averages the context); these scales avoid both, so greedy
 * decoding wanders through many tokens:
 *   embedding (and an untied lm_head): std WEIGHTS_EMBED_STD, small, so the
 *	token's own embedding does not dominate the final hidden state;
 *   q, k: std WEIGHTS_QK_GAIN / sqrt(fan_in), so attention is not uniform;
 *   v, gate, up: std 1 / sqrt(fan_in) (outputs of rms ~1 from a normed input);
 *   o: std WEIGHTS_O_GAIN / sqrt(fan_in); down: WEIGHTS_DOWN_GAIN /
 *	sqrt(fan_in), the MLP carries most of the token-to-token map;
 *   norms: uniform in [0.9, 1.1].
 */
#define WEIGHTS_EMBED_STD 0.01
#define WEIGHTS_QK_GAIN 3.0
#define WEIGHTS_O_GAIN 1.0
#define WEIGHTS_DOWN_GAIN 8.0

static void fill_normal(float *p, uint64_t n, double std, uint64_t seed)
{
	uint64_t s = seed;

	for (uint64_t i = 0; i < n; i++)
		p[i] = (float)(normalish(&s) * std);
}

static void fill_norm(float *p, uint64_t n, uint64_t seed)
{
	uint64_t s = seed;

	for (uint64_t i = 0; i < n; i++)
		p[i] = (float)(0.9 + 0.2 * uniform(&s));
}

int spyre_model_weights_random(const struct spyre_model_config *c, uint64_t seed, struct spyre_model_weights *w)
{
	struct spyre_model_tensor *t;
	size_t n;
	uint64_t s = seed;

	if (spyre_model_weights_alloc(c, w, NULL, 0))
		return -1;
	t = spyre_model_weights_list(c, w, &n);
	if (!t) {
		spyre_model_weights_free(w);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t ts = spyre_splitmix64(&s), count = t[i].shape[0] * (t[i].rank == 2 ? t[i].shape[1] : 1);
		const char *name = t[i].name;

		if (t[i].rank == 1)
			fill_norm(t[i].data, count, ts);
		else if (!strcmp(name, "model.embed_tokens.weight"))
			fill_normal(t[i].data, count, WEIGHTS_EMBED_STD, ts);
		else if (!strcmp(name, "lm_head.weight"))
			fill_normal(t[i].data, count, WEIGHTS_EMBED_STD, ts);
		else if (ends_with(name, "o_proj.weight"))
			fill_normal(t[i].data, count, WEIGHTS_O_GAIN * inv_sqrt((double)t[i].shape[1]), ts);
		else if (ends_with(name, "down_proj.weight"))
			fill_normal(t[i].data, count, WEIGHTS_DOWN_GAIN * inv_sqrt((double)t[i].shape[1]), ts);
		else if (ends_with(name, "q_proj.weight") || ends_with(name, "k_proj.weight"))
			fill_normal(t[i].data, count, WEIGHTS_QK_GAIN * inv_sqrt((double)t[i].shape[1]), ts);
		else
			fill_normal(t[i].data, count, inv_sqrt((double)t[i].shape[1]), ts);
	}
	free(t);
	return 0;
}

int spyre_model_weights_save(const struct spyre_model_config *c, const struct spyre_model_weights *w,
			     const char *path, enum spyre_st_dtype dtype, char *err, size_t errlen)
{
	struct spyre_model_tensor *t;
	struct spyre_st_out *o;
	size_t n;
	int rc;

	t = spyre_model_weights_list(c, w, &n);
	o = calloc(n ? n : 1, sizeof(*o));
	if (!t || !o) {
		free(t);
		free(o);
		return errf(err, errlen, "out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		o[i].name = t[i].name;
		o[i].dtype = dtype;
		o[i].rank = t[i].rank;
		o[i].shape[0] = t[i].shape[0];
		o[i].shape[1] = t[i].shape[1];
		o[i].f32 = t[i].data;
	}
	rc = spyre_st_write(path, o, n, err, errlen);
	free(o);
	free(t);
	return rc;
}

/* Tensor parallel: rank @r's shard of @w (weights.h). */
int spyre_model_weights_shard(const struct spyre_model_config *cfg, const struct spyre_model_config *sc,
			      const struct spyre_model_weights *w, uint32_t r, struct spyre_model_weights *sw,
			      float **own)
{
	uint64_t hd = cfg->head_dim, hid = cfg->hidden, qd = cfg->heads * hd, qs = sc->heads * hd;
	uint64_t ks = sc->kv_heads * hd, fs = sc->ffn;
	float *o;

	*sw = *w;
	sw->storage = NULL;
	sw->layer = calloc(cfg->layers, sizeof(*sw->layer));
	o = *own = malloc(cfg->layers * hid * (qs + fs) * sizeof(float));
	if (!sw->layer || !o) {
		free(sw->layer);
		free(o);
		return -ENOMEM;
	}
	for (uint32_t l = 0; l < cfg->layers; l++) {
		const struct spyre_layer_weights *lw = &w->layer[l];
		struct spyre_layer_weights *sl = &sw->layer[l];

		*sl = *lw;
		sl->wq = lw->wq + r * qs * hid;
		sl->wk = lw->wk + r * ks * hid;
		sl->wv = lw->wv + r * ks * hid;
		sl->w_gate = lw->w_gate + r * fs * hid;
		sl->w_up = lw->w_up + r * fs * hid;
		sl->wo = o;
		for (uint64_t i = 0; i < hid; i++, o += qs)
			memcpy(o, lw->wo + i * qd + r * qs, qs * sizeof(float));
		sl->w_down = o;
		for (uint64_t i = 0; i < hid; i++, o += fs)
			memcpy(o, lw->w_down + i * cfg->ffn + r * fs, fs * sizeof(float));
	}
	return 0;
}
