// SPDX-License-Identifier: MIT
/*
 * config.c - Hugging Face config.json -> struct spyre_model_config (config.h).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "errf.h"
#include "json.h"
#include "cfgfield.h"

#define CONFIG_MAX_FILE (16u << 20)

/* The member @key, NULL when absent or null. */
const struct spyre_json_node *spyre_cfg_member(const struct spyre_json_node *root, const char *key)
{
	const struct spyre_json_node *v = spyre_json_get(root, key);

	return v && spyre_json_type(v) == SPYRE_JSON_NULL ? NULL : v;
}

/* An integer field from 0 to UINT32_MAX; *@present says whether it was there. */
int spyre_cfg_u32(const struct spyre_json_node *root, const char *key, bool required, uint32_t def,
		   uint32_t *out, bool *present, char *err, size_t errlen)
{
	const struct spyre_json_node *v = spyre_cfg_member(root, key);
	double d;

	if (present)
		*present = v != NULL;
	if (!v) {
		if (required)
			return errf(err, errlen, "missing field '%s'", key);
		*out = def;
		return 0;
	}
	if (spyre_json_number(v, &d))
		return errf(err, errlen, "field '%s' must be an integer, not a%s %s", key,
			    spyre_json_type(v) == SPYRE_JSON_ARRAY || spyre_json_type(v) == SPYRE_JSON_OBJECT ?
			    "n" : "", spyre_json_type_name(spyre_json_type(v)));
	if (!(d >= 0 && d <= (double)UINT32_MAX) || d != floor(d))
		return errf(err, errlen, "field '%s' must be an integer from 0 to %u, not %.17g", key,
			    UINT32_MAX, d);
	*out = (uint32_t)d;
	return 0;
}

int spyre_cfg_float(const struct spyre_json_node *root, const char *key, float def, float *out,
		     char *err, size_t errlen)
{
	const struct spyre_json_node *v = spyre_cfg_member(root, key);
	double d;

	if (!v) {
		*out = def;
		return 0;
	}
	if (spyre_json_number(v, &d))
		return errf(err, errlen, "field '%s' must be a number, not a%s %s", key,
			    spyre_json_type(v) == SPYRE_JSON_ARRAY || spyre_json_type(v) == SPYRE_JSON_OBJECT ?
			    "n" : "", spyre_json_type_name(spyre_json_type(v)));
	if (fabs(d) > 3.4028234663852886e38)
		return errf(err, errlen, "field '%s' (%g) is out of the range of a float", key, d);
	*out = (float)d;
	return 0;
}

static int get_false(const struct spyre_json_node *root, const char *key, char *err, size_t errlen)
{
	const struct spyre_json_node *v = spyre_cfg_member(root, key);
	bool b;

	if (!v)
		return 0;
	if (spyre_json_bool(v, &b))
		return errf(err, errlen, "field '%s' must be true or false, not a%s %s", key,
			    spyre_json_type(v) == SPYRE_JSON_ARRAY || spyre_json_type(v) == SPYRE_JSON_OBJECT ?
			    "n" : "", spyre_json_type_name(spyre_json_type(v)));
	if (b)
		return errf(err, errlen, "%s = true is not supported (the model has no bias tensors)", key);
	return 0;
}

/* a * b and a + b; on overflow *@ok = false */
static uint64_t mul(uint64_t a, uint64_t b, bool *ok)
{
	if (a && b > UINT64_MAX / a) {
		*ok = false;
		return 0;
	}
	return a * b;
}

static uint64_t add(uint64_t a, uint64_t b, bool *ok)
{
	if (b > UINT64_MAX - a) {
		*ok = false;
		return 0;
	}
	return a + b;
}

static uint64_t param_count(const struct spyre_model_config *c, bool *ok)
{
	uint64_t h = c->hidden, q = (uint64_t)c->heads * c->head_dim, kv = (uint64_t)c->kv_heads * c->head_dim;
	uint64_t layer, total;

	*ok = true;
	layer = add(2 * h, mul(h, add(add(q, q, ok), 2 * kv, ok), ok), ok);	/* norms, q o, k v */
	layer = add(layer, mul(3 * h, c->ffn, ok), ok);				/* gate up down */
	total = add(mul(c->vocab, h, ok), mul(layer, c->layers, ok), ok);
	total = add(total, h, ok);
	if (!c->tied_embeddings)
		total = add(total, mul(c->vocab, h, ok), ok);
	return total;
}

uint64_t spyre_model_param_count(const struct spyre_model_config *cfg)
{
	bool ok;
	uint64_t n = param_count(cfg, &ok);

	return ok ? n : UINT64_MAX;
}

uint64_t spyre_model_bytes(const struct spyre_model_config *cfg, unsigned int dtype_size)
{
	bool ok;
	uint64_t n = param_count(cfg, &ok);

	n = mul(n, dtype_size, &ok);
	return ok ? n : UINT64_MAX;
}

int spyre_model_config_validate(const struct spyre_model_config *c, char *err, size_t errlen)
{
	const struct {
		const char *key;
		uint32_t v;
	} dims[] = {
		{ "num_hidden_layers", c->layers }, { "hidden_size", c->hidden },
		{ "num_attention_heads", c->heads }, { "num_key_value_heads", c->kv_heads },
		{ "head_dim", c->head_dim }, { "intermediate_size", c->ffn },
		{ "vocab_size", c->vocab }, { "max_position_embeddings", c->max_pos },
	};
	bool ok;

	if (!memchr(c->name, 0, sizeof(c->name)))
		return errf(err, errlen, "model_type is not a terminated string");
	for (size_t i = 0; i < sizeof(dims) / sizeof(dims[0]); i++) {
		if (!dims[i].v)
			return errf(err, errlen, "%s is 0", dims[i].key);
		if (i == 0 && dims[i].v > SPYRE_MODEL_MAX_LAYERS)
			return errf(err, errlen, "%s (%u) is larger than %u", dims[i].key, dims[i].v,
				    SPYRE_MODEL_MAX_LAYERS);
		if (dims[i].v > SPYRE_MODEL_MAX_DIM)
			return errf(err, errlen, "%s (%u) is larger than %u", dims[i].key, dims[i].v,
				    SPYRE_MODEL_MAX_DIM);
	}
	if (c->kv_heads > c->heads || c->heads % c->kv_heads)
		return errf(err, errlen, "num_attention_heads (%u) is not a multiple of num_key_value_heads (%u)",
			    c->heads, c->kv_heads);
	if (c->head_dim % 2)
		return errf(err, errlen, "head_dim (%u) is odd: rotary embeddings need pairs", c->head_dim);
	if ((uint64_t)c->heads * c->head_dim > SPYRE_MODEL_MAX_DIM)
		return errf(err, errlen, "num_attention_heads * head_dim (%u * %u) is larger than %u",
			    c->heads, c->head_dim, SPYRE_MODEL_MAX_DIM);
	if (!(c->rope_theta > 1.0f) || isinf(c->rope_theta))
		return errf(err, errlen, "rope_theta (%g) must be a finite number above 1", c->rope_theta);
	if (!(c->norm_eps > 0.0f && c->norm_eps < 1.0f))
		return errf(err, errlen, "rms_norm_eps (%g) must be above 0 and below 1", c->norm_eps);
	const struct {
		const char *key;
		float v;
	} mults[] = {
		{ "embedding_multiplier", c->embedding_multiplier },
		{ "attention_multiplier", c->attention_multiplier },
		{ "residual_multiplier", c->residual_multiplier },
		{ "logits_scaling", c->logits_scaling },
	};
	for (size_t i = 0; i < sizeof(mults) / sizeof(mults[0]); i++)
		if (!(mults[i].v > 0.0f) || isinf(mults[i].v))
			return errf(err, errlen, "%s (%g) must be a finite number above 0", mults[i].key,
				    mults[i].v);
	if (c->bos_token_id >= c->vocab)
		return errf(err, errlen, "bos_token_id (%u) is not below vocab_size (%u)", c->bos_token_id,
			    c->vocab);
	if (c->eos_token_id >= c->vocab)
		return errf(err, errlen, "eos_token_id (%u) is not below vocab_size (%u)", c->eos_token_id,
			    c->vocab);
	uint64_t n = param_count(c, &ok);

	if (ok)
		mul(n, 4, &ok);	/* the fp32 bytes too */
	if (!ok)
		return errf(err, errlen, "the parameter count overflows 64 bits");
	return 0;
}

int spyre_model_config_parse(const char *json, size_t len, struct spyre_model_config *cfg, char *err,
			     size_t errlen)
{
	struct spyre_model_config c;
	struct spyre_json *doc;
	const struct spyre_json_node *root, *v;
	bool have_kv, have_hd, b;
	char jerr[256];
	int rc = -1;

	memset(&c, 0, sizeof(c));
	if (err && errlen)
		err[0] = 0;
	if (spyre_json_parse(json, len, &doc, jerr, sizeof(jerr)))
		return errf(err, errlen, "not valid JSON: %s", jerr);
	root = spyre_json_root(doc);
	if (spyre_json_type(root) != SPYRE_JSON_OBJECT) {
		errf(err, errlen, "expected a JSON object, found a%s %s",
		     spyre_json_type(root) == SPYRE_JSON_ARRAY || spyre_json_type(root) == SPYRE_JSON_OBJECT ?
		     "n" : "", spyre_json_type_name(spyre_json_type(root)));
		goto out;
	}
	v = spyre_cfg_member(root, "model_type");
	if (v) {
		size_t n;
		const char *s = spyre_json_string(v, &n);

		if (!s) {
			errf(err, errlen, "field 'model_type' must be a string, not a%s %s",
			     spyre_json_type(v) == SPYRE_JSON_ARRAY || spyre_json_type(v) == SPYRE_JSON_OBJECT ?
			     "n" : "", spyre_json_type_name(spyre_json_type(v)));
			goto out;
		}
		if (n >= sizeof(c.name) || strlen(s) != n) {
			errf(err, errlen, "field 'model_type' is longer than %zu bytes or holds a NUL",
			     sizeof(c.name) - 1);
			goto out;
		}
		memcpy(c.name, s, n + 1);
	}
	v = spyre_cfg_member(root, "hidden_act");
	if (v) {
		const char *s = spyre_json_string(v, NULL);

		if (!s || strcmp(s, "silu")) {
			errf(err, errlen, "hidden_act %s%.40s%s is not supported (only \"silu\")", s ? "\"" : "",
			     s ? s : spyre_json_type_name(spyre_json_type(v)), s ? "\"" : "");
			goto out;
		}
	}
	if (spyre_cfg_member(root, "rope_scaling")) {
		errf(err, errlen, "rope_scaling is not supported (only plain RoPE: null or absent)");
		goto out;
	}
	if (get_false(root, "attention_bias", err, errlen) || get_false(root, "mlp_bias", err, errlen))
		goto out;
	if (spyre_cfg_u32(root, "num_hidden_layers", true, 0, &c.layers, NULL, err, errlen) ||
	    spyre_cfg_u32(root, "hidden_size", true, 0, &c.hidden, NULL, err, errlen) ||
	    spyre_cfg_u32(root, "num_attention_heads", true, 0, &c.heads, NULL, err, errlen) ||
	    spyre_cfg_u32(root, "num_key_value_heads", false, c.heads, &c.kv_heads, &have_kv, err, errlen) ||
	    spyre_cfg_u32(root, "head_dim", false, 0, &c.head_dim, &have_hd, err, errlen) ||
	    spyre_cfg_u32(root, "intermediate_size", true, 0, &c.ffn, NULL, err, errlen) ||
	    spyre_cfg_u32(root, "vocab_size", true, 0, &c.vocab, NULL, err, errlen) ||
	    spyre_cfg_u32(root, "max_position_embeddings", true, 0, &c.max_pos, NULL, err, errlen) ||
	    spyre_cfg_u32(root, "bos_token_id", false, 0, &c.bos_token_id, NULL, err, errlen))
		goto out;
	v = spyre_cfg_member(root, "eos_token_id");
	if (v && spyre_json_type(v) == SPYRE_JSON_ARRAY) {	/* a list of ids: the first */
		const struct spyre_json_node *first = spyre_json_at(v, 0, NULL);
		double d;

		if (!first || spyre_json_number(first, &d) || !(d >= 0 && d <= UINT32_MAX) || d != floor(d)) {
			errf(err, errlen, "field 'eos_token_id' must be an integer or a non-empty list of them");
			goto out;
		}
		c.eos_token_id = (uint32_t)d;
	} else if (spyre_cfg_u32(root, "eos_token_id", false, 0, &c.eos_token_id, NULL, err, errlen)) {
		goto out;
	}
	(void)have_kv;
	if (!have_hd) {
		if (!c.heads) {
			errf(err, errlen, "num_attention_heads is 0");
			goto out;
		}
		if (c.hidden % c.heads) {
			errf(err, errlen, "hidden_size (%u) is not a multiple of num_attention_heads (%u) "
			     "and head_dim is not given", c.hidden, c.heads);
			goto out;
		}
		c.head_dim = c.hidden / c.heads;
	}
	if (spyre_cfg_float(root, "rope_theta", 10000.0f, &c.rope_theta, err, errlen) ||
	    spyre_cfg_float(root, "rms_norm_eps", 1e-6f, &c.norm_eps, err, errlen) ||
	    spyre_cfg_float(root, "embedding_multiplier", 1.0f, &c.embedding_multiplier, err, errlen) ||
	    spyre_cfg_float(root, "attention_multiplier", c.head_dim ? (float)(1.0 / sqrt((double)c.head_dim)) : 1.0f,
		      &c.attention_multiplier, err, errlen) ||
	    spyre_cfg_float(root, "residual_multiplier", 1.0f, &c.residual_multiplier, err, errlen) ||
	    spyre_cfg_float(root, "logits_scaling", 1.0f, &c.logits_scaling, err, errlen))
		goto out;
	v = spyre_cfg_member(root, "tie_word_embeddings");
	if (v) {
		if (spyre_json_bool(v, &b)) {
			errf(err, errlen, "field 'tie_word_embeddings' must be true or false, not a%s %s",
			     spyre_json_type(v) == SPYRE_JSON_ARRAY || spyre_json_type(v) == SPYRE_JSON_OBJECT ?
			     "n" : "", spyre_json_type_name(spyre_json_type(v)));
			goto out;
		}
		c.tied_embeddings = b;
	}
	if (spyre_model_config_validate(&c, err, errlen))
		goto out;
	*cfg = c;
	rc = 0;
out:
	spyre_json_free(doc);
	return rc;
}

int spyre_cfg_read_file(const char *file, size_t max, char **text, size_t *len, char *err, size_t errlen)
{
	struct stat st;
	FILE *f;
	char *buf;
	size_t n;

	*text = NULL;
	*len = 0;
	f = fopen(file, "rb");
	if (!f)
		return errf(err, errlen, "%s: %s", file, strerror(errno));
	if (fstat(fileno(f), &st) || !S_ISREG(st.st_mode)) {
		fclose(f);
		return errf(err, errlen, "%s: not a regular file", file);
	}
	if ((uint64_t)st.st_size > max) {
		fclose(f);
		return errf(err, errlen, "%s: larger than %zu MiB", file, max >> 20);
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		fclose(f);
		return errf(err, errlen, "%s: out of memory", file);
	}
	n = fread(buf, 1, (size_t)st.st_size, f);
	if (ferror(f)) {
		fclose(f);
		free(buf);
		return errf(err, errlen, "%s: read error", file);
	}
	fclose(f);
	buf[n] = 0;
	*text = buf;
	*len = n;
	return 0;
}

int spyre_model_config_load(const char *path, struct spyre_model_config *cfg, char *err, size_t errlen)
{
	char file[4096], msg[512];
	struct stat st;
	char *buf;
	size_t n;
	int rc;

	if (!stat(path, &st) && S_ISDIR(st.st_mode)) {
		if ((size_t)snprintf(file, sizeof(file), "%s/config.json", path) >= sizeof(file))
			return errf(err, errlen, "%s: path too long", path);
	} else if ((size_t)snprintf(file, sizeof(file), "%s", path) >= sizeof(file)) {
		return errf(err, errlen, "path too long");
	}
	if (spyre_cfg_read_file(file, CONFIG_MAX_FILE, &buf, &n, err, errlen))
		return -1;
	rc = spyre_model_config_parse(buf, n, cfg, msg, sizeof(msg));
	free(buf);
	if (rc)
		return errf(err, errlen, "%s: %s", file, msg);
	return 0;
}

/* The shortest %.Ng text that reads back as @v (a float). */
static void fmt_float(char *buf, size_t len, float v)
{
	for (int prec = 1; prec <= 9; prec++) {
		snprintf(buf, len, "%.*g", prec, (double)v);
		if (strtof(buf, NULL) == v)
			break;
	}
	/* a JSON number may not be ".5" or "5." and %g never writes those */
}

int spyre_model_config_format(const struct spyre_model_config *c, char *buf, size_t len)
{
	char theta[32], eps[32], em[32], am[32], rm[32], ls[32];
	const char *arch = !strcmp(c->name, "granite") ? "GraniteForCausalLM" :
			   !strcmp(c->name, "llama") ? "LlamaForCausalLM" : NULL;
	char archs[64] = "";

	fmt_float(theta, sizeof(theta), c->rope_theta);
	fmt_float(eps, sizeof(eps), c->norm_eps);
	fmt_float(em, sizeof(em), c->embedding_multiplier);
	fmt_float(am, sizeof(am), c->attention_multiplier);
	fmt_float(rm, sizeof(rm), c->residual_multiplier);
	fmt_float(ls, sizeof(ls), c->logits_scaling);
	if (arch)
		snprintf(archs, sizeof(archs), "  \"architectures\": [\"%s\"],\n", arch);
	for (const char *p = c->name; *p; p++)
		if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20)
			return -1;
	return snprintf(buf, len,
			"{\n%s"
			"  \"model_type\": \"%s\",\n"
			"  \"num_hidden_layers\": %u,\n"
			"  \"hidden_size\": %u,\n"
			"  \"num_attention_heads\": %u,\n"
			"  \"num_key_value_heads\": %u,\n"
			"  \"head_dim\": %u,\n"
			"  \"intermediate_size\": %u,\n"
			"  \"vocab_size\": %u,\n"
			"  \"max_position_embeddings\": %u,\n"
			"  \"hidden_act\": \"silu\",\n"
			"  \"attention_bias\": false,\n"
			"  \"mlp_bias\": false,\n"
			"  \"rope_scaling\": null,\n"
			"  \"rope_theta\": %s,\n"
			"  \"rms_norm_eps\": %s,\n"
			"  \"tie_word_embeddings\": %s,\n"
			"  \"embedding_multiplier\": %s,\n"
			"  \"attention_multiplier\": %s,\n"
			"  \"residual_multiplier\": %s,\n"
			"  \"logits_scaling\": %s,\n"
			"  \"bos_token_id\": %u,\n"
			"  \"eos_token_id\": %u\n"
			"}\n",
			archs, c->name, c->layers, c->hidden, c->heads, c->kv_heads, c->head_dim, c->ffn,
			c->vocab, c->max_pos, theta, eps, c->tied_embeddings ? "true" : "false", em, am, rm, ls,
			c->bos_token_id, c->eos_token_id);
}

int spyre_model_config_save(const struct spyre_model_config *cfg, const char *path, char *err, size_t errlen)
{
	char buf[4096];
	int n = spyre_model_config_format(cfg, buf, sizeof(buf));
	FILE *f;

	if (n < 0 || (size_t)n >= sizeof(buf))
		return errf(err, errlen, "%s: model_type cannot be written as JSON", path);
	f = fopen(path, "wb");
	if (!f)
		return errf(err, errlen, "%s: %s", path, strerror(errno));
	if (fwrite(buf, 1, (size_t)n, f) != (size_t)n) {
		fclose(f);
		return errf(err, errlen, "%s: write error", path);
	}
	if (fclose(f))
		return errf(err, errlen, "%s: %s", path, strerror(errno));
	return 0;
}

struct spyre_model_config spyre_model_config_tiny(void)
{
	struct spyre_model_config c = {
		.name = "granite",
		.layers = 2, .hidden = 128, .heads = 4, .kv_heads = 2, .head_dim = 32, .ffn = 352,
		.vocab = 512, .max_pos = 256, .rope_theta = 10000.0f, .norm_eps = 1e-5f,
		.tied_embeddings = true, .embedding_multiplier = 12.0f, .attention_multiplier = 0.03125f,
		.residual_multiplier = 0.22f, .logits_scaling = 8.0f, .bos_token_id = 0, .eos_token_id = 0,
	};

	return c;
}

/* From IBM's published config.json for granite-3.3-8b-instruct, as
 * remembered: only the shape matters here (model/configs/README.md). */
struct spyre_model_config spyre_model_config_granite_3_3_8b(void)
{
	struct spyre_model_config c = {
		.name = "granite",
		.layers = 40, .hidden = 4096, .heads = 32, .kv_heads = 8, .head_dim = 128, .ffn = 12800,
		.vocab = 49159, .max_pos = 131072, .rope_theta = 10000000.0f, .norm_eps = 1e-5f,
		.tied_embeddings = true, .embedding_multiplier = 12.0f, .attention_multiplier = 0.0078125f,
		.residual_multiplier = 0.22f, .logits_scaling = 16.0f, .bos_token_id = 0, .eos_token_id = 0,
	};

	return c;
}

int spyre_model_config_preset(const char *name, struct spyre_model_config *cfg)
{
	if (!strcmp(name, "tiny")) {
		*cfg = spyre_model_config_tiny();
		return 0;
	}
	if (!strcmp(name, "granite-3.3-8b")) {
		*cfg = spyre_model_config_granite_3_3_8b();
		return 0;
	}
	return -1;
}

/* Tensor parallel: one rank's shape (config.h). */
int spyre_model_config_tp(const struct spyre_model_config *cfg, uint32_t tp, struct spyre_model_config *shard,
			  char *err, size_t errlen)
{
	const char *what = NULL;
	uint32_t v = 0;

	if (tp < 1 || tp > SPYRE_MODEL_TP_MAX) {
		snprintf(err, errlen, "tensor parallel over %u cards: must be 1 to %u", tp, SPYRE_MODEL_TP_MAX);
		return -EINVAL;
	}
	if (cfg->heads % tp)
		what = "num_attention_heads", v = cfg->heads;
	else if (cfg->kv_heads % tp)
		what = "num_key_value_heads", v = cfg->kv_heads;
	else if (cfg->ffn % tp)
		what = "intermediate_size", v = cfg->ffn;
	if (what) {
		snprintf(err, errlen, "tensor parallel over %u cards: %u does not divide %s (%u); it must divide the "
			 "attention heads (%u), the KV heads (%u) and intermediate_size (%u)", tp, tp, what, v,
			 cfg->heads, cfg->kv_heads, cfg->ffn);
		return -EINVAL;
	}
	*shard = *cfg;
	shard->heads /= tp;
	shard->kv_heads /= tp;
	shard->ffn /= tp;
	return 0;
}
