// SPDX-License-Identifier: MIT
/*
 * bert.c - the BERT encoder's model directory, weights and CPU reference
 * (bert.h). The reference runs each sentence over its own tokens only: the
 * function the card computes on a padded batch with a padding mask (a
 * padding position gets weight exactly 0 in every softmax and in the mean).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bert.h"
#include "cfgfield.h"
#include "errf.h"
#include "json.h"

#define BERT_MAX_FILE (16u << 20)
#define BERT_MAX_DIM (1u << 20)
#define BERT_MAX_LAYERS 1024u

/* ---- config ----------------------------------------------------------------- */

static int want_string(const struct spyre_json_node *root, const char *key, const char *want, const char *why,
		       char *err, size_t errlen)
{
	const struct spyre_json_node *v = spyre_cfg_member(root, key);
	const char *s;

	if (!v)
		return 0;
	s = spyre_json_string(v, NULL);
	if (!s)
		return errf(err, errlen, "field '%s' must be a string, not a %s", key,
			    spyre_json_type_name(spyre_json_type(v)));
	if (strcmp(s, want))
		return errf(err, errlen, "%s = \"%.64s\" is not supported (%s)", key, s, why);
	return 0;
}

static int want_bool(const struct spyre_json_node *root, const char *key, bool want, bool *out, char *err,
		     size_t errlen)
{
	const struct spyre_json_node *v = spyre_cfg_member(root, key);
	bool b;

	if (!v) {
		if (out)
			*out = want;
		return 0;
	}
	if (spyre_json_bool(v, &b))
		return errf(err, errlen, "field '%s' must be true or false, not a %s", key,
			    spyre_json_type_name(spyre_json_type(v)));
	if (out) {
		*out = b;
		return 0;
	}
	if (b != want)
		return errf(err, errlen, "%s = %s is not supported", key, b ? "true" : "false");
	return 0;
}

int spyre_bert_config_parse(const char *json, size_t len, struct spyre_bert_config *cfg, char *err,
			    size_t errlen)
{
	struct spyre_json *doc;
	const struct spyre_json_node *r, *v;
	struct spyre_bert_config c = { 0 };
	char msg[256];
	int rc = -1;

	if (spyre_json_parse(json, len, &doc, msg, sizeof(msg)))
		return errf(err, errlen, "not valid JSON: %s", msg);
	r = spyre_json_root(doc);
	if (spyre_json_type(r) != SPYRE_JSON_OBJECT) {
		errf(err, errlen, "not a JSON object but %s", spyre_json_type_name(spyre_json_type(r)));
		goto out;
	}
	if (spyre_cfg_u32(r, "num_hidden_layers", true, 0, &c.layers, NULL, err, errlen) ||
	    spyre_cfg_u32(r, "hidden_size", true, 0, &c.hidden, NULL, err, errlen) ||
	    spyre_cfg_u32(r, "num_attention_heads", true, 0, &c.heads, NULL, err, errlen) ||
	    spyre_cfg_u32(r, "intermediate_size", true, 0, &c.ffn, NULL, err, errlen) ||
	    spyre_cfg_u32(r, "vocab_size", true, 0, &c.vocab, NULL, err, errlen) ||
	    spyre_cfg_u32(r, "max_position_embeddings", true, 0, &c.max_pos, NULL, err, errlen) ||
	    spyre_cfg_u32(r, "type_vocab_size", false, 2, &c.type_vocab, NULL, err, errlen) ||
	    spyre_cfg_u32(r, "pad_token_id", false, 0, &c.pad_token_id, NULL, err, errlen) ||
	    spyre_cfg_float(r, "layer_norm_eps", 1e-12f, &c.norm_eps, err, errlen) ||
	    want_string(r, "hidden_act", "gelu", "only \"gelu\", the erf form, is", err, errlen) ||
	    want_string(r, "position_embedding_type", "absolute", "only \"absolute\" is", err, errlen) ||
	    want_bool(r, "is_decoder", false, NULL, err, errlen) ||
	    want_bool(r, "add_cross_attention", false, NULL, err, errlen))
		goto out;
	v = spyre_cfg_member(r, "model_type");
	snprintf(c.name, sizeof(c.name), "%s", v && spyre_json_string(v, NULL) ? spyre_json_string(v, NULL) : "bert");
	if (strcmp(c.name, "bert")) {
		errf(err, errlen, "model_type = \"%s\" is not supported (a BERT encoder: \"bert\")", c.name);
		goto out;
	}
	const struct { const char *name; uint32_t v, max; } sz[] = {
		{ "num_hidden_layers", c.layers, BERT_MAX_LAYERS }, { "hidden_size", c.hidden, BERT_MAX_DIM },
		{ "num_attention_heads", c.heads, BERT_MAX_DIM }, { "intermediate_size", c.ffn, BERT_MAX_DIM },
		{ "vocab_size", c.vocab, BERT_MAX_DIM }, { "max_position_embeddings", c.max_pos, BERT_MAX_DIM },
		{ "type_vocab_size", c.type_vocab, BERT_MAX_DIM },
	};
	for (size_t i = 0; i < sizeof(sz) / sizeof(sz[0]); i++) {
		if (!sz[i].v || sz[i].v > sz[i].max) {
			errf(err, errlen, "%s (%u) must be from 1 to %u", sz[i].name, sz[i].v, sz[i].max);
			goto out;
		}
	}
	if (c.hidden % c.heads) {
		errf(err, errlen, "hidden_size (%u) is not a multiple of num_attention_heads (%u)", c.hidden, c.heads);
		goto out;
	}
	if (!(c.norm_eps > 0 && c.norm_eps < 1)) {
		errf(err, errlen, "layer_norm_eps (%g) must be in (0, 1)", (double)c.norm_eps);
		goto out;
	}
	if (c.pad_token_id >= c.vocab) {
		errf(err, errlen, "pad_token_id (%u) is not below vocab_size (%u)", c.pad_token_id, c.vocab);
		goto out;
	}
	c.head_dim = c.hidden / c.heads;
	c.max_seq_len = c.max_pos;
	c.normalize = true;
	*cfg = c;
	rc = 0;
out:
	spyre_json_free(doc);
	return rc;
}

/* Parse the JSON file @dir/@name: 0 (*@doc set), 1 when it does not exist, -1 on error. */
static int load_json(const char *dir, const char *name, struct spyre_json **doc, char *path, size_t pathlen,
		     char *err, size_t errlen)
{
	char msg[256], *text;
	size_t len;
	struct stat st;

	*doc = NULL;
	if ((size_t)snprintf(path, pathlen, "%s/%s", dir, name) >= pathlen)
		return errf(err, errlen, "%s: path too long", dir);
	if (stat(path, &st) && errno == ENOENT)
		return 1;
	if (spyre_cfg_read_file(path, BERT_MAX_FILE, &text, &len, err, errlen))
		return -1;
	if (spyre_json_parse(text, len, doc, msg, sizeof(msg))) {
		free(text);
		return errf(err, errlen, "%s: not valid JSON: %s", path, msg);
	}
	free(text);
	if (spyre_json_type(spyre_json_root(*doc)) != SPYRE_JSON_OBJECT &&
	    spyre_json_type(spyre_json_root(*doc)) != SPYRE_JSON_ARRAY) {
		spyre_json_free(*doc);
		*doc = NULL;
		return errf(err, errlen, "%s: not a JSON object", path);
	}
	return 0;
}

/* 1_Pooling/config.json (or the Pooling module's path): mean pooling only. */
static int load_pooling(const char *dir, const char *sub, char *err, size_t errlen)
{
	static const char *const modes[] = { "pooling_mode_cls_token", "pooling_mode_max_tokens",
					     "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens",
					     "pooling_mode_lasttoken" };
	struct spyre_json *doc;
	char name[512], path[4096], msg[256];
	bool mean;
	int rc;

	if ((size_t)snprintf(name, sizeof(name), "%s/config.json", sub) >= sizeof(name))
		return errf(err, errlen, "%s: pooling path too long", dir);
	rc = load_json(dir, name, &doc, path, sizeof(path), err, errlen);
	if (rc)
		return rc > 0 ? 0 : -1;
	const struct spyre_json_node *r = spyre_json_root(doc);

	rc = -1;
	if (spyre_json_type(r) != SPYRE_JSON_OBJECT) {
		errf(err, errlen, "%s: not a JSON object", path);
		goto out;
	}
	if (want_bool(r, "pooling_mode_mean_tokens", true, &mean, msg, sizeof(msg))) {
		errf(err, errlen, "%s: %s", path, msg);
		goto out;
	}
	if (!mean) {
		errf(err, errlen, "%s: pooling_mode_mean_tokens = false is not supported (mean pooling only)", path);
		goto out;
	}
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		if (want_bool(r, modes[i], false, NULL, msg, sizeof(msg))) {
			errf(err, errlen, "%s: %s (mean pooling only)", path, msg);
			goto out;
		}
	}
	rc = 0;
out:
	spyre_json_free(doc);
	return rc;
}

/* modules.json: Transformer, Pooling (mean), optional Normalize; nothing else. */
static int load_modules(const char *dir, struct spyre_bert_config *c, char *err, size_t errlen)
{
	struct spyre_json *doc;
	char path[4096];
	bool pooling = false;
	int rc;

	rc = load_json(dir, "modules.json", &doc, path, sizeof(path), err, errlen);
	if (rc)
		return rc > 0 ? load_pooling(dir, "1_Pooling", err, errlen) : -1;
	const struct spyre_json_node *r = spyre_json_root(doc);

	rc = -1;
	if (spyre_json_type(r) != SPYRE_JSON_ARRAY) {
		errf(err, errlen, "%s: not a JSON array", path);
		goto out;
	}
	c->normalize = false;
	for (size_t i = 0; i < spyre_json_count(r); i++) {
		const struct spyre_json_node *m = spyre_json_at(r, i, NULL);
		const char *type = spyre_json_string(spyre_json_get(m, "type"), NULL);
		const char *sub = spyre_json_string(spyre_json_get(m, "path"), NULL);
		const char *tail = type ? strrchr(type, '.') : NULL;

		tail = tail ? tail + 1 : type;
		if (!tail) {
			errf(err, errlen, "%s: module %zu has no \"type\" string", path, i);
			goto out;
		}
		if (!strcmp(tail, "Transformer") && i == 0)
			continue;
		if (!strcmp(tail, "Pooling") && !pooling) {
			pooling = true;
			if (load_pooling(dir, sub && *sub ? sub : "1_Pooling", err, errlen))
				goto out;
		} else if (!strcmp(tail, "Normalize") && pooling && !c->normalize) {
			c->normalize = true;
		} else {
			errf(err, errlen, "%s: module %zu of type \"%.80s\" is not supported (Transformer, Pooling, "
			     "Normalize)", path, i, type);
			goto out;
		}
	}
	if (!pooling) {
		errf(err, errlen, "%s: no Pooling module", path);
		goto out;
	}
	rc = 0;
out:
	spyre_json_free(doc);
	return rc;
}

int spyre_bert_config_load(const char *dir, struct spyre_bert_config *cfg, char *err, size_t errlen)
{
	struct spyre_bert_config c;
	struct spyre_json *doc;
	char path[4096], *text, msg[512];
	size_t len;
	int rc;

	if ((size_t)snprintf(path, sizeof(path), "%s/config.json", dir) >= sizeof(path))
		return errf(err, errlen, "%s: path too long", dir);
	if (spyre_cfg_read_file(path, BERT_MAX_FILE, &text, &len, err, errlen))
		return -1;
	rc = spyre_bert_config_parse(text, len, &c, msg, sizeof(msg));
	free(text);
	if (rc)
		return errf(err, errlen, "%s: %s", path, msg);
	if (load_modules(dir, &c, err, errlen))
		return -1;
	rc = load_json(dir, "sentence_bert_config.json", &doc, path, sizeof(path), err, errlen);
	if (rc < 0)
		return -1;
	if (rc == 0) {
		uint32_t n;

		rc = spyre_cfg_u32(spyre_json_root(doc), "max_seq_length", false, c.max_pos, &n, NULL, msg,
				   sizeof(msg));
		spyre_json_free(doc);
		if (rc)
			return errf(err, errlen, "%s: %s", path, msg);
		if (!n || n > c.max_pos)
			return errf(err, errlen, "%s: max_seq_length (%u) must be from 1 to max_position_embeddings (%u)",
				    path, n, c.max_pos);
		c.max_seq_len = n;
	}
	*cfg = c;
	return 0;
}

/* ---- weights ---------------------------------------------------------------- */

/* One tensor: where it goes, its name (after the prefix) and shape. */
struct bert_tensor {
	float **dst;
	char name[96];
	uint32_t rank;
	uint64_t shape[2];
};

/* Every tensor of @cfg bound to @w's fields: a malloc'ed array of *@n. */
static struct bert_tensor *bert_tensors(const struct spyre_bert_config *c, struct spyre_bert_weights *w, size_t *n)
{
	size_t cap = 5 + 16 * (size_t)c->layers, k = 0;
	struct bert_tensor *t = calloc(cap, sizeof(*t));

	if (!t)
		return NULL;
#define T2(field, nm, r, cc) (t[k] = (struct bert_tensor){ .dst = &(field), .rank = 2, .shape = { (r), (cc) } }, \
			       snprintf(t[k].name, sizeof(t[k].name), "%s", (nm)), k++)
#define T1(field, nm, r) (t[k] = (struct bert_tensor){ .dst = &(field), .rank = 1, .shape = { (r) } }, \
			  snprintf(t[k].name, sizeof(t[k].name), "%s", (nm)), k++)
	T2(w->word, "embeddings.word_embeddings.weight", c->vocab, c->hidden);
	T2(w->pos, "embeddings.position_embeddings.weight", c->max_pos, c->hidden);
	T2(w->type, "embeddings.token_type_embeddings.weight", c->type_vocab, c->hidden);
	T1(w->ln_w, "embeddings.LayerNorm.weight", c->hidden);
	T1(w->ln_b, "embeddings.LayerNorm.bias", c->hidden);
	for (uint32_t l = 0; l < c->layers; l++) {
		struct spyre_bert_layer *y = &w->layer[l];
		char p[32], nm[96];

		snprintf(p, sizeof(p), "encoder.layer.%u.", l);
#define N(s) (snprintf(nm, sizeof(nm), "%s%s", p, s), nm)
		T2(y->wq, N("attention.self.query.weight"), c->hidden, c->hidden);
		T1(y->bq, N("attention.self.query.bias"), c->hidden);
		T2(y->wk, N("attention.self.key.weight"), c->hidden, c->hidden);
		T1(y->bk, N("attention.self.key.bias"), c->hidden);
		T2(y->wv, N("attention.self.value.weight"), c->hidden, c->hidden);
		T1(y->bv, N("attention.self.value.bias"), c->hidden);
		T2(y->wo, N("attention.output.dense.weight"), c->hidden, c->hidden);
		T1(y->bo, N("attention.output.dense.bias"), c->hidden);
		T1(y->ln1_w, N("attention.output.LayerNorm.weight"), c->hidden);
		T1(y->ln1_b, N("attention.output.LayerNorm.bias"), c->hidden);
		T2(y->wi, N("intermediate.dense.weight"), c->ffn, c->hidden);
		T1(y->bi, N("intermediate.dense.bias"), c->ffn);
		T2(y->wd, N("output.dense.weight"), c->hidden, c->ffn);
		T1(y->bd, N("output.dense.bias"), c->hidden);
		T1(y->ln2_w, N("output.LayerNorm.weight"), c->hidden);
		T1(y->ln2_b, N("output.LayerNorm.bias"), c->hidden);
#undef N
	}
#undef T1
#undef T2
	*n = k;
	return t;
}

static bool ignored(const char *name)
{
	return !strcmp(name, "embeddings.position_ids") || !strcmp(name, "pooler.dense.weight") ||
	       !strcmp(name, "pooler.dense.bias");
}

void spyre_bert_weights_free(struct spyre_bert_weights *w)
{
	free(w->storage);
	free(w->layer);
	memset(w, 0, sizeof(*w));
}

int spyre_bert_weights_load(const struct spyre_bert_config *cfg, const struct spyre_st *st,
			    struct spyre_bert_weights *w, char *err, size_t errlen)
{
	struct bert_tensor *t;
	const char *prefix = "";
	char full[128];
	size_t n, total = 0;
	float *p;

	memset(w, 0, sizeof(*w));
	if (!spyre_st_find(st, "embeddings.word_embeddings.weight") &&
	    spyre_st_find(st, "bert.embeddings.word_embeddings.weight"))
		prefix = "bert.";
	w->layer = calloc(cfg->layers, sizeof(*w->layer));
	t = w->layer ? bert_tensors(cfg, w, &n) : NULL;
	if (!t) {
		spyre_bert_weights_free(w);
		return errf(err, errlen, "out of memory");
	}
	for (size_t i = 0; i < n; i++)
		total += t[i].shape[0] * (t[i].rank == 2 ? t[i].shape[1] : 1);
	w->storage = malloc(total * sizeof(float));
	if (!w->storage) {
		free(t);
		spyre_bert_weights_free(w);
		return errf(err, errlen, "out of memory for %zu MiB of weights", total * sizeof(float) >> 20);
	}
	p = w->storage;
	for (size_t i = 0; i < n; i++) {
		snprintf(full, sizeof(full), "%s%s", prefix, t[i].name);
		if (spyre_st_read_f32(st, full, t[i].rank, t[i].shape, p, err, errlen)) {
			free(t);
			spyre_bert_weights_free(w);
			return -1;
		}
		*t[i].dst = p;
		p += t[i].shape[0] * (t[i].rank == 2 ? t[i].shape[1] : 1);
	}
	/* a tensor of the file the model does not use is a mistake (another model's file) */
	for (size_t i = 0; i < spyre_st_count(st); i++) {
		const char *name = spyre_st_tensor_at(st, i)->name;
		size_t pl = strlen(prefix);
		bool known = false;

		if (strncmp(name, prefix, pl) || ignored(name + pl)) {
			known = !strncmp(name, prefix, pl);
		} else {
			for (size_t j = 0; j < n && !known; j++)
				known = !strcmp(name + pl, t[j].name);
		}
		if (!known) {
			char shown[100];

			snprintf(shown, sizeof(shown), "%s", name);
			free(t);
			spyre_bert_weights_free(w);
			return errf(err, errlen, "unexpected tensor '%s' (not a BERT encoder of this config)", shown);
		}
	}
	free(t);
	return 0;
}

int spyre_bert_load(const char *dir, struct spyre_bert **out, char *err, size_t errlen)
{
	struct spyre_bert *m = calloc(1, sizeof(*m));
	struct spyre_st *st;
	char path[4096], msg[512];

	*out = NULL;
	if (!m)
		return errf(err, errlen, "out of memory");
	if (spyre_bert_config_load(dir, &m->cfg, err, errlen))
		goto fail;
	if ((size_t)snprintf(path, sizeof(path), "%s/model.safetensors", dir) >= sizeof(path)) {
		errf(err, errlen, "%s: path too long", dir);
		goto fail;
	}
	if (spyre_st_open(path, &st, err, errlen))
		goto fail;
	if (spyre_bert_weights_load(&m->cfg, st, &m->w, msg, sizeof(msg))) {
		spyre_st_close(st);
		errf(err, errlen, "%s: %s", path, msg);
		goto fail;
	}
	spyre_st_close(st);
	*out = m;
	return 0;
fail:
	free(m);
	return -1;
}

void spyre_bert_free(struct spyre_bert *m)
{
	if (!m)
		return;
	spyre_bert_weights_free(&m->w);
	free(m);
}

int spyre_bert_check_batch(const struct spyre_bert_config *cfg, const int32_t *ids, const uint32_t *lens,
			   uint32_t batch, char *err, size_t errlen)
{
	if (!batch || batch > SPYRE_BERT_MAX_BATCH) {
		errf(err, errlen, "batch of %u sentences: from 1 to %u", batch, SPYRE_BERT_MAX_BATCH);
		return -EINVAL;
	}
	if (!ids || !lens) {
		errf(err, errlen, "no token ids");
		return -EINVAL;
	}
	for (uint32_t b = 0; b < batch; b++) {
		if (!lens[b] || lens[b] > cfg->max_seq_len) {
			errf(err, errlen, "sentence %u: %u tokens, %s max_seq_length %u", b, lens[b],
			     lens[b] ? "more than" : "not from 1 to", cfg->max_seq_len);
			return -EINVAL;
		}
		for (uint32_t i = 0; i < lens[b]; i++) {
			if (ids[i] < 0 || (uint32_t)ids[i] >= cfg->vocab) {
				errf(err, errlen, "sentence %u, token %u: id %d is not below vocab_size %u", b, i,
				     ids[i], cfg->vocab);
				return -EINVAL;
			}
		}
		ids += lens[b];
	}
	return 0;
}

/* ---- the CPU reference --------------------------------------------------------- */

float spyre_bert_gelu(float x)
{
	return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
}

/* y [rows][out] = x [rows][in] W^T + b, W [out][in] */
static void linear(const float *x, uint32_t rows, const float *w, const float *b, uint32_t out, uint32_t in,
		   float *y)
{
	for (uint32_t r = 0; r < rows; r++) {
		const float *xr = x + (size_t)r * in;

		for (uint32_t o = 0; o < out; o++) {
			const float *wr = w + (size_t)o * in;
			float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
			uint32_t i = 0;

			for (; i + 4 <= in; i += 4) {
				s0 += xr[i] * wr[i];
				s1 += xr[i + 1] * wr[i + 1];
				s2 += xr[i + 2] * wr[i + 2];
				s3 += xr[i + 3] * wr[i + 3];
			}
			for (; i < in; i++)
				s0 += xr[i] * wr[i];
			y[(size_t)r * out + o] = (s0 + s1) + (s2 + s3) + b[o];
		}
	}
}

/* x [rows][n] = LayerNorm(x + add) (add may be NULL), in place */
static void add_layernorm(float *x, const float *add, uint32_t rows, uint32_t n, const float *w, const float *b,
			  float eps)
{
	for (uint32_t r = 0; r < rows; r++) {
		float *xr = x + (size_t)r * n;
		double mean = 0, var = 0;

		if (add)
			for (uint32_t i = 0; i < n; i++)
				xr[i] += add[(size_t)r * n + i];
		for (uint32_t i = 0; i < n; i++)
			mean += xr[i];
		mean /= n;
		for (uint32_t i = 0; i < n; i++)
			var += (xr[i] - mean) * (xr[i] - mean);
		var /= n;
		float rs = (float)(1.0 / sqrt(var + eps)), mf = (float)mean;

		for (uint32_t i = 0; i < n; i++)
			xr[i] = (xr[i] - mf) * rs * w[i] + b[i];
	}
}

/* One sentence of @len ids: its pooled (and normalized) vector into @out [hidden]. */
static void embed_one(const struct spyre_bert *m, const int32_t *ids, uint32_t len, float *buf, float *out)
{
	const struct spyre_bert_config *c = &m->cfg;
	const struct spyre_bert_weights *w = &m->w;
	uint32_t H = c->hidden, F = c->ffn, hd = c->head_dim;
	float *x = buf, *q = x + (size_t)len * H, *k = q + (size_t)len * H, *v = k + (size_t)len * H;
	float *a = v + (size_t)len * H, *t = a + (size_t)len * H, *f = t + (size_t)len * H, *s = f + (size_t)len * F;
	float scale = 1.0f / sqrtf((float)hd);

	for (uint32_t i = 0; i < len; i++)
		for (uint32_t j = 0; j < H; j++)
			x[(size_t)i * H + j] = w->word[(size_t)ids[i] * H + j] + w->pos[(size_t)i * H + j] + w->type[j];
	add_layernorm(x, NULL, len, H, w->ln_w, w->ln_b, c->norm_eps);
	for (uint32_t l = 0; l < c->layers; l++) {
		const struct spyre_bert_layer *y = &w->layer[l];

		linear(x, len, y->wq, y->bq, H, H, q);
		linear(x, len, y->wk, y->bk, H, H, k);
		linear(x, len, y->wv, y->bv, H, H, v);
		for (uint32_t h = 0; h < c->heads; h++) {
			for (uint32_t i = 0; i < len; i++) {
				const float *qi = q + (size_t)i * H + h * hd;
				float mx = -INFINITY, sum = 0;

				for (uint32_t j = 0; j < len; j++) {
					const float *kj = k + (size_t)j * H + h * hd;
					float d = 0;

					for (uint32_t e = 0; e < hd; e++)
						d += qi[e] * kj[e];
					s[j] = d * scale;
					mx = s[j] > mx ? s[j] : mx;
				}
				for (uint32_t j = 0; j < len; j++) {
					s[j] = expf(s[j] - mx);
					sum += s[j];
				}
				float *ai = a + (size_t)i * H + h * hd;

				for (uint32_t e = 0; e < hd; e++)
					ai[e] = 0;
				for (uint32_t j = 0; j < len; j++) {
					const float *vj = v + (size_t)j * H + h * hd;
					float p = s[j] / sum;

					for (uint32_t e = 0; e < hd; e++)
						ai[e] += p * vj[e];
				}
			}
		}
		linear(a, len, y->wo, y->bo, H, H, t);
		add_layernorm(x, t, len, H, y->ln1_w, y->ln1_b, c->norm_eps);
		linear(x, len, y->wi, y->bi, F, H, f);
		for (size_t i = 0; i < (size_t)len * F; i++)
			f[i] = spyre_bert_gelu(f[i]);
		linear(f, len, y->wd, y->bd, H, F, t);
		add_layernorm(x, t, len, H, y->ln2_w, y->ln2_b, c->norm_eps);
	}
	/* mean over the sentence's tokens, then x / max(|x|, 1e-12) (torch's F.normalize) */
	double norm = 0;

	for (uint32_t j = 0; j < H; j++) {
		double sum = 0;

		for (uint32_t i = 0; i < len; i++)
			sum += x[(size_t)i * H + j];
		out[j] = (float)(sum / len);
		norm += (double)out[j] * out[j];
	}
	if (c->normalize) {
		norm = sqrt(norm);
		norm = norm > 1e-12 ? norm : 1e-12;
		for (uint32_t j = 0; j < H; j++)
			out[j] = (float)(out[j] / norm);
	}
}

int spyre_bert_embed(const struct spyre_bert *m, const int32_t *ids, const uint32_t *lens, uint32_t batch,
		     float *out, char *err, size_t errlen)
{
	const struct spyre_bert_config *c = &m->cfg;
	uint32_t maxlen = 0;
	float *buf;
	int ret;

	ret = spyre_bert_check_batch(c, ids, lens, batch, err, errlen);
	if (ret)
		return ret;
	for (uint32_t b = 0; b < batch; b++)
		maxlen = lens[b] > maxlen ? lens[b] : maxlen;
	buf = malloc(((size_t)maxlen * (6 * (size_t)c->hidden + c->ffn) + maxlen) * sizeof(float));
	if (!buf) {
		errf(err, errlen, "out of memory for sentences of %u tokens", maxlen);
		return -ENOMEM;
	}
	for (uint32_t b = 0; b < batch; b++) {
		embed_one(m, ids, lens[b], buf, out + (size_t)b * c->hidden);
		ids += lens[b];
	}
	free(buf);
	return 0;
}
