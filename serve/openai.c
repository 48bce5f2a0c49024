// SPDX-License-Identifier: MIT
/* openai.c - OpenAI API requests and responses (openai.h). */
#include "openai.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

void spyre_oai_fail(struct spyre_oai_error *e, unsigned int status, const char *param, const char *fmt, ...)
{
	va_list ap;

	e->status = status;
	snprintf(e->param, sizeof(e->param), "%s", param ? param : "");
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof(e->message), fmt, ap);
	va_end(ap);
}

const char *spyre_oai_error_type(unsigned int status)
{
	switch (status) {
	case 400: return "BadRequestError";
	case 404: return "NotFoundError";
	case 405: return "MethodNotAllowedError";
	case 413: return "RequestTooLargeError";
	case 429: return "RateLimitError";
	case 503: return "ServiceUnavailableError";
	default: return "InternalServerError";
	}
}

static void error_object(struct spyre_jw *w, const struct spyre_oai_error *e)
{
	spyre_jw_key(w, "error");
	spyre_jw_obj(w);
	spyre_jw_key(w, "message");
	spyre_jw_str(w, e->message);
	spyre_jw_key(w, "type");
	spyre_jw_str(w, spyre_oai_error_type(e->status));
	spyre_jw_key(w, "param");
	if (e->param[0])
		spyre_jw_str(w, e->param);
	else
		spyre_jw_null(w);
	spyre_jw_key(w, "code");
	spyre_jw_uint(w, e->status);
	spyre_jw_obj_end(w);
}

char *spyre_oai_error_json(const struct spyre_oai_error *e, size_t *len)
{
	struct spyre_buf b;
	struct spyre_jw w;

	spyre_buf_init(&b);
	spyre_jw_init(&w, &b);
	spyre_jw_obj(&w);
	error_object(&w, e);
	spyre_jw_obj_end(&w);
	return spyre_buf_steal(&b, len);
}

/* ---- parsing ------------------------------------------------------------------------------------ */

static int parse_doc(const char *body, size_t len, struct spyre_json **doc, struct spyre_oai_error *e)
{
	char err[160];

	if (spyre_json_parse(body, len, doc, err, sizeof(err))) {
		spyre_oai_fail(e, 400, NULL, "malformed JSON: %s", err);
		return -1;
	}
	if (spyre_json_type(spyre_json_root(*doc)) != SPYRE_JSON_OBJECT) {
		spyre_oai_fail(e, 400, NULL, "the request body must be a JSON object");
		spyre_json_free(*doc);
		*doc = NULL;
		return -1;
	}
	return 0;
}

static int wrong_type(struct spyre_oai_error *e, const char *key, const char *want,
		      const struct spyre_json_node *v)
{
	spyre_oai_fail(e, 400, key, "'%s' must be %s, not %s", key, want,
		       spyre_json_type_name(spyre_json_type(v)));
	return -1;
}

/* Absent or null: 0 and *v NULL. */
static const struct spyre_json_node *field(const struct spyre_json_node *o, const char *key)
{
	const struct spyre_json_node *v = spyre_json_get(o, key);

	return v && spyre_json_type(v) != SPYRE_JSON_NULL ? v : NULL;
}

static int get_bool(const struct spyre_json_node *o, const char *key, bool *out, struct spyre_oai_error *e)
{
	const struct spyre_json_node *v = field(o, key);

	if (v && spyre_json_bool(v, out))
		return wrong_type(e, key, "a boolean", v);
	return 0;
}

/* A number in [lo, hi]. */
static int get_num(const struct spyre_json_node *o, const char *key, double lo, double hi, float *out,
		   struct spyre_oai_error *e)
{
	const struct spyre_json_node *v = field(o, key);
	double d;

	if (!v)
		return 0;
	if (spyre_json_number(v, &d))
		return wrong_type(e, key, "a number", v);
	if (!(d >= lo && d <= hi)) {
		spyre_oai_fail(e, 400, key, "'%s' must be in [%g, %g], got %g", key, lo, hi, d);
		return -1;
	}
	*out = (float)d;
	return 0;
}

/* An integer in [lo, hi]; 1 when present. */
static int get_int(const struct spyre_json_node *o, const char *key, double lo, double hi, int64_t *out,
		   struct spyre_oai_error *e)
{
	const struct spyre_json_node *v = field(o, key);
	double d;

	if (!v)
		return 0;
	if (spyre_json_number(v, &d) || d != floor(d))
		return wrong_type(e, key, "an integer", v);
	if (!(d >= lo && d <= hi)) {
		spyre_oai_fail(e, 400, key, "'%s' must be an integer in [%.0f, %.0f], got %.17g", key, lo, hi, d);
		return -1;
	}
	*out = (int64_t)d;
	return 1;
}

/* An array of token ids in [0, 2^31). */
static int get_ids(const struct spyre_json_node *v, const char *key, int32_t **ids, size_t *n,
		   struct spyre_oai_error *e)
{
	size_t i, count = spyre_json_count(v);

	*ids = malloc((count ? count : 1) * sizeof(**ids));
	if (!*ids) {
		spyre_oai_fail(e, 500, key, "out of memory");
		return -1;
	}
	for (i = 0; i < count; i++) {
		const struct spyre_json_node *x = spyre_json_at(v, i, NULL);
		double d;

		if (spyre_json_number(x, &d) || d != floor(d) || d < 0 || d > INT32_MAX) {
			spyre_oai_fail(e, 400, key, "'%s' must hold token ids (integers >= 0), element %zu is not",
				       key, i);
			free(*ids);
			*ids = NULL;
			return -1;
		}
		(*ids)[i] = (int32_t)d;
	}
	*n = count;
	return 0;
}

static bool is_int_array(const struct spyre_json_node *v)
{
	size_t i;

	if (spyre_json_type(v) != SPYRE_JSON_ARRAY)
		return false;
	for (i = 0; i < spyre_json_count(v); i++)
		if (spyre_json_type(spyre_json_at(v, i, NULL)) != SPYRE_JSON_NUMBER)
			return false;
	return true;
}

static int get_model(const struct spyre_json_node *root, const char **model, struct spyre_oai_error *e)
{
	const struct spyre_json_node *v = field(root, "model");

	*model = NULL;
	if (v && !(*model = spyre_json_string(v, NULL)))
		return wrong_type(e, "model", "a string", v);
	return 0;
}

static int parse_prompt(const struct spyre_json_node *root, struct spyre_oai_gen *g, struct spyre_oai_error *e)
{
	const struct spyre_json_node *v = field(root, "prompt");

	if (!v) {
		spyre_oai_fail(e, 400, "prompt", "'prompt' is required");
		return -1;
	}
	/* A list of one prompt is the prompt. */
	if (spyre_json_type(v) == SPYRE_JSON_ARRAY && spyre_json_count(v) >= 1 && !is_int_array(v)) {
		if (spyre_json_count(v) > 1) {
			spyre_oai_fail(e, 400, "prompt", "one prompt per request is supported, got %zu",
				       spyre_json_count(v));
			return -1;
		}
		v = spyre_json_at(v, 0, NULL);
	}
	if (spyre_json_type(v) == SPYRE_JSON_STRING) {
		g->prompt_text = spyre_json_string(v, &g->prompt_text_len);
		return 0;
	}
	if (spyre_json_type(v) == SPYRE_JSON_ARRAY) {
		if (!spyre_json_count(v)) {
			spyre_oai_fail(e, 400, "prompt", "'prompt' is empty");
			return -1;
		}
		return get_ids(v, "prompt", &g->prompt_ids, &g->n_prompt_ids, e);
	}
	return wrong_type(e, "prompt", "a string, a list of token ids, or a list of one of them", v);
}

static int parse_messages(const struct spyre_json_node *root, struct spyre_oai_message **out, size_t *nout,
			  struct spyre_oai_error *e)
{
	static const char *const roles[] = { "system", "user", "assistant", "developer", "tool" };
	const struct spyre_json_node *v = field(root, "messages");
	size_t i, j, n;

	if (!v) {
		spyre_oai_fail(e, 400, "messages", "'messages' is required");
		return -1;
	}
	if (spyre_json_type(v) != SPYRE_JSON_ARRAY)
		return wrong_type(e, "messages", "an array", v);
	n = spyre_json_count(v);
	if (!n || n > SPYRE_OAI_MAX_MESSAGES) {
		spyre_oai_fail(e, 400, "messages", "'messages' must hold 1 to %d messages, got %zu",
			       SPYRE_OAI_MAX_MESSAGES, n);
		return -1;
	}
	*out = calloc(n, sizeof(**out));
	if (!*out) {
		spyre_oai_fail(e, 500, NULL, "out of memory");
		return -1;
	}
	*nout = n;
	for (i = 0; i < n; i++) {
		const struct spyre_json_node *m = spyre_json_at(v, i, NULL), *c;
		const char *role;

		if (spyre_json_type(m) != SPYRE_JSON_OBJECT)
			return wrong_type(e, "messages", "an array of objects", m);
		role = spyre_json_string(spyre_json_get(m, "role"), NULL);
		for (j = 0; role && j < sizeof(roles) / sizeof(roles[0]) && strcmp(role, roles[j]); j++)
			;
		if (!role || j == sizeof(roles) / sizeof(roles[0])) {
			spyre_oai_fail(e, 400, "messages", "message %zu: 'role' must be one of system, user, "
				       "assistant, developer, tool", i);
			return -1;
		}
		(*out)[i].role = role;
		c = field(m, "content");
		if (!c) {
			(*out)[i].content = "";
			continue;
		}
		if (spyre_json_type(c) == SPYRE_JSON_STRING) {
			(*out)[i].content = spyre_json_string(c, &(*out)[i].content_len);
			continue;
		}
		/* Content parts: only text ones, one of them (more would need joining). */
		if (spyre_json_type(c) == SPYRE_JSON_ARRAY && spyre_json_count(c) == 1) {
			const struct spyre_json_node *p = spyre_json_at(c, 0, NULL);
			const char *type = spyre_json_string(spyre_json_get(p, "type"), NULL);
			const char *text = spyre_json_string(spyre_json_get(p, "text"), &(*out)[i].content_len);

			if (type && !strcmp(type, "text") && text) {
				(*out)[i].content = text;
				continue;
			}
		}
		spyre_oai_fail(e, 400, "messages", "message %zu: 'content' must be a string or one text part", i);
		return -1;
	}
	return 0;
}

static int parse_stop(const struct spyre_json_node *root, struct spyre_oai_gen *g, struct spyre_oai_error *e)
{
	const struct spyre_json_node *v = field(root, "stop"), *x;
	int32_t *ids;
	size_t i, n;

	if (v) {
		n = spyre_json_type(v) == SPYRE_JSON_STRING ? 1 : spyre_json_count(v);
		if (spyre_json_type(v) != SPYRE_JSON_STRING && spyre_json_type(v) != SPYRE_JSON_ARRAY)
			return wrong_type(e, "stop", "a string or an array of strings", v);
		if (n > SPYRE_OAI_MAX_STOP) {
			spyre_oai_fail(e, 400, "stop", "at most %d stop strings, got %zu", SPYRE_OAI_MAX_STOP, n);
			return -1;
		}
		for (i = 0; i < n; i++) {
			x = spyre_json_type(v) == SPYRE_JSON_STRING ? v : spyre_json_at(v, i, NULL);
			g->stop[i] = spyre_json_string(x, &g->stop_len[i]);
			if (!g->stop[i])
				return wrong_type(e, "stop", "a string or an array of strings", x);
			if (!g->stop_len[i] || g->stop_len[i] > SPYRE_OAI_MAX_STOP_LEN) {
				spyre_oai_fail(e, 400, "stop", "a stop string must have 1 to %d bytes",
					       SPYRE_OAI_MAX_STOP_LEN);
				return -1;
			}
		}
		g->n_stop = n;
	}
	v = field(root, "stop_token_ids");
	if (v) {
		if (spyre_json_type(v) != SPYRE_JSON_ARRAY)
			return wrong_type(e, "stop_token_ids", "an array of token ids", v);
		if (spyre_json_count(v) > SPYRE_OAI_MAX_STOP) {
			spyre_oai_fail(e, 400, "stop_token_ids", "at most %d stop token ids", SPYRE_OAI_MAX_STOP);
			return -1;
		}
		if (get_ids(v, "stop_token_ids", &ids, &n, e))
			return -1;
		memcpy(g->stop_ids, ids, n * sizeof(*ids));
		g->n_stop_ids = n;
		free(ids);
	}
	return 0;
}

/* Options of vLLM's server that spyre-serve does not have: present and not their default is an error. */
static int unsupported(const struct spyre_json_node *root, struct spyre_oai_error *e)
{
	static const char *const off[] = { "logprobs", "top_logprobs", "echo", "suffix", "tools", "response_format",
					   "guided_json", "guided_regex", "guided_choice", "logit_bias" };
	const struct spyre_json_node *v;
	int64_t n;
	size_t i;
	bool b;

	for (i = 0; i < sizeof(off) / sizeof(off[0]); i++) {
		v = field(root, off[i]);
		if (!v || (spyre_json_type(v) == SPYRE_JSON_BOOL && !spyre_json_bool(v, &b) && !b))
			continue;
		spyre_oai_fail(e, 400, off[i], "'%s' is not supported by this server", off[i]);
		return -1;
	}
	for (i = 0; i < 2; i++) {
		const char *key = i ? "best_of" : "n";
		int r = get_int(root, key, 1, 1e9, &n, e);

		if (r < 0)
			return -1;
		if (r && n != 1) {
			spyre_oai_fail(e, 400, key, "'%s' must be 1 (one choice per request), got %lld", key,
				       (long long)n);
			return -1;
		}
	}
	return 0;
}

int spyre_oai_parse_gen(enum spyre_oai_kind kind, const char *body, size_t len, struct spyre_oai_gen *g,
			struct spyre_oai_error *e)
{
	const struct spyre_json_node *root, *v;
	int64_t n;
	int r;

	memset(g, 0, sizeof(*g));
	g->kind = kind;
	g->temperature = 1.0f;
	g->top_p = 1.0f;
	g->top_k = -1;
	g->skip_special_tokens = true;
	g->add_special_tokens = true;
	e->status = 0;
	if (parse_doc(body, len, &g->doc, e))
		return -1;
	root = spyre_json_root(g->doc);
	if (get_model(root, &g->model, e) || unsupported(root, e))
		goto fail;
	if (kind == SPYRE_OAI_COMPLETION ? parse_prompt(root, g, e) :
	    parse_messages(root, &g->messages, &g->n_messages, e))
		goto fail;
	r = get_int(root, "max_tokens", 1, UINT32_MAX, &n, e);
	if (!r && kind == SPYRE_OAI_CHAT)
		r = get_int(root, "max_completion_tokens", 1, UINT32_MAX, &n, e);
	if (r < 0)
		goto fail;
	g->has_max_tokens = r;
	g->max_tokens = (uint32_t)n;
	if (get_num(root, "temperature", 0, 2, &g->temperature, e) ||
	    get_num(root, "top_p", 1e-9, 1, &g->top_p, e))
		goto fail;
	r = get_int(root, "top_k", -1, INT32_MAX, &n, e);
	if (r < 0)
		goto fail;
	if (r)
		g->top_k = (int32_t)n;
	v = field(root, "seed");
	if (v) {
		double d;

		if (spyre_json_u64(v, &g->seed)) {
			if (spyre_json_number(v, &d) || d != floor(d) || d >= 0 || d < -9223372036854775808.0) {
				spyre_oai_fail(e, 400, "seed", "'seed' must be an integer in [-2^63, 2^64)");
				goto fail;
			}
			g->seed = (uint64_t)(int64_t)d;
		}
		g->has_seed = true;
	}
	if (parse_stop(root, g, e) || get_bool(root, "stream", &g->stream, e) ||
	    get_bool(root, "ignore_eos", &g->ignore_eos, e) ||
	    get_bool(root, "skip_special_tokens", &g->skip_special_tokens, e) ||
	    get_bool(root, "return_token_ids", &g->return_token_ids, e) ||
	    get_bool(root, "add_special_tokens", &g->add_special_tokens, e))
		goto fail;
	v = field(root, "stream_options");
	if (v) {
		if (spyre_json_type(v) != SPYRE_JSON_OBJECT) {
			wrong_type(e, "stream_options", "an object", v);
			goto fail;
		}
		if (get_bool(v, "include_usage", &g->include_usage, e))
			goto fail;
	}
	return 0;
fail:
	spyre_oai_gen_free(g);
	return -1;
}

void spyre_oai_gen_free(struct spyre_oai_gen *g)
{
	free(g->prompt_ids);
	free(g->messages);
	spyre_json_free(g->doc);
	memset(g, 0, sizeof(*g));
}

int spyre_oai_parse_tokenize(const char *body, size_t len, struct spyre_oai_tok *t, struct spyre_oai_error *e)
{
	const struct spyre_json_node *root, *v;

	memset(t, 0, sizeof(*t));
	t->add_special_tokens = true;
	if (parse_doc(body, len, &t->doc, e))
		return -1;
	root = spyre_json_root(t->doc);
	if (get_model(root, &t->model, e) || get_bool(root, "add_special_tokens", &t->add_special_tokens, e))
		goto fail;
	v = field(root, "prompt");
	if (v) {
		if (!(t->prompt = spyre_json_string(v, &t->prompt_len))) {
			wrong_type(e, "prompt", "a string", v);
			goto fail;
		}
		return 0;
	}
	if (field(root, "messages")) {
		if (parse_messages(root, &t->messages, &t->n_messages, e))
			goto fail;
		return 0;
	}
	spyre_oai_fail(e, 400, "prompt", "'prompt' or 'messages' is required");
fail:
	spyre_oai_tok_free(t);
	return -1;
}

int spyre_oai_parse_detokenize(const char *body, size_t len, struct spyre_oai_tok *t, struct spyre_oai_error *e)
{
	const struct spyre_json_node *root, *v;

	memset(t, 0, sizeof(*t));
	if (parse_doc(body, len, &t->doc, e))
		return -1;
	root = spyre_json_root(t->doc);
	if (get_model(root, &t->model, e))
		goto fail;
	v = field(root, "tokens");
	if (!v) {
		spyre_oai_fail(e, 400, "tokens", "'tokens' is required");
		goto fail;
	}
	if (spyre_json_type(v) != SPYRE_JSON_ARRAY) {
		wrong_type(e, "tokens", "an array of token ids", v);
		goto fail;
	}
	if (get_ids(v, "tokens", &t->tokens, &t->n_tokens, e))
		goto fail;
	return 0;
fail:
	spyre_oai_tok_free(t);
	return -1;
}

void spyre_oai_tok_free(struct spyre_oai_tok *t)
{
	free(t->messages);
	free(t->tokens);
	spyre_json_free(t->doc);
	memset(t, 0, sizeof(*t));
}

int spyre_oai_parse_embed(const char *body, size_t len, struct spyre_oai_embed *x, struct spyre_oai_error *e)
{
	const struct spyre_json_node *root, *v, *f;
	size_t i, count;

	memset(x, 0, sizeof(*x));
	if (parse_doc(body, len, &x->doc, e))
		return -1;
	root = spyre_json_root(x->doc);
	if (get_model(root, &x->model, e))
		goto fail;
	f = field(root, "encoding_format");
	if (f) {
		const char *fmt = spyre_json_string(f, NULL);

		if (!fmt) {
			wrong_type(e, "encoding_format", "a string", f);
			goto fail;
		}
		if (strcmp(fmt, "float") && strcmp(fmt, "base64")) {
			spyre_oai_fail(e, 400, "encoding_format", "'encoding_format' must be \"float\" or "
				       "\"base64\", not \"%.64s\"", fmt);
			goto fail;
		}
		x->base64 = !strcmp(fmt, "base64");
	}
	if (field(root, "dimensions")) {
		spyre_oai_fail(e, 400, "dimensions", "'dimensions' is not supported by this model");
		goto fail;
	}
	v = field(root, "input");
	if (!v) {
		spyre_oai_fail(e, 400, "input", "'input' is required");
		goto fail;
	}
	if (spyre_json_type(v) == SPYRE_JSON_STRING) {
		count = 1;
	} else if (spyre_json_type(v) == SPYRE_JSON_ARRAY) {
		count = is_int_array(v) ? 1 : spyre_json_count(v);
		if (!spyre_json_count(v)) {
			spyre_oai_fail(e, 400, "input", "'input' must not be empty");
			goto fail;
		}
	} else {
		wrong_type(e, "input", "a string, an array of strings or of token ids", v);
		goto fail;
	}
	if (count > SPYRE_OAI_MAX_EMBED_INPUTS) {
		spyre_oai_fail(e, 400, "input", "'input' has %zu inputs, at most %u are accepted", count,
			       SPYRE_OAI_MAX_EMBED_INPUTS);
		goto fail;
	}
	x->in = calloc(count, sizeof(*x->in));
	if (!x->in) {
		spyre_oai_fail(e, 500, "input", "out of memory");
		goto fail;
	}
	x->n = count;
	if (spyre_json_type(v) == SPYRE_JSON_STRING) {
		x->in[0].text = spyre_json_string(v, &x->in[0].text_len);
	} else if (is_int_array(v)) {
		if (get_ids(v, "input", &x->in[0].ids, &x->in[0].n_ids, e))
			goto fail;
	} else {
		enum spyre_json_type t0 = spyre_json_type(spyre_json_at(v, 0, NULL));

		for (i = 0; i < count; i++) {
			const struct spyre_json_node *el = spyre_json_at(v, i, NULL);

			if (t0 == SPYRE_JSON_STRING && spyre_json_type(el) == SPYRE_JSON_STRING) {
				x->in[i].text = spyre_json_string(el, &x->in[i].text_len);
			} else if (t0 == SPYRE_JSON_ARRAY && is_int_array(el)) {
				if (get_ids(el, "input", &x->in[i].ids, &x->in[i].n_ids, e))
					goto fail;
			} else {
				spyre_oai_fail(e, 400, "input", "'input' must be a string, an array of strings, of "
					       "token ids, or of arrays of token ids (element %zu is %s)", i,
					       spyre_json_type_name(spyre_json_type(el)));
				goto fail;
			}
		}
	}
	for (i = 0; i < count; i++)
		if (x->in[i].text ? !x->in[i].text_len : !x->in[i].n_ids) {
			spyre_oai_fail(e, 400, "input", "input %zu is empty", i);
			goto fail;
		}
	return 0;
fail:
	spyre_oai_embed_free(x);
	return -1;
}

void spyre_oai_embed_free(struct spyre_oai_embed *x)
{
	size_t i;

	for (i = 0; i < x->n && x->in; i++)
		free(x->in[i].ids);
	free(x->in);
	spyre_json_free(x->doc);
	memset(x, 0, sizeof(*x));
}

static void base64(struct spyre_buf *b, const unsigned char *p, size_t n)
{
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char q[4];
	size_t i;

	for (i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
			     (i + 2 < n ? p[i + 2] : 0);

		q[0] = tab[v >> 18 & 63];
		q[1] = tab[v >> 12 & 63];
		q[2] = i + 1 < n ? tab[v >> 6 & 63] : '=';
		q[3] = i + 2 < n ? tab[v & 63] : '=';
		spyre_buf_add(b, q, 4);
	}
}

void spyre_oai_embed_response(const char *model, const float *vec, size_t n, uint32_t dim, bool b64,
			      uint32_t prompt_tokens, struct spyre_buf *out)
{
	struct spyre_jw w;
	size_t i, k;

	spyre_jw_init(&w, out);
	spyre_jw_obj(&w);
	spyre_jw_key(&w, "object");
	spyre_jw_str(&w, "list");
	spyre_jw_key(&w, "data");
	spyre_jw_arr(&w);
	for (i = 0; i < n; i++) {
		const float *v = vec + i * dim;

		spyre_jw_obj(&w);
		spyre_jw_key(&w, "object");
		spyre_jw_str(&w, "embedding");
		spyre_jw_key(&w, "index");
		spyre_jw_uint(&w, i);
		spyre_jw_key(&w, "embedding");
		if (b64) {
			/* the float32s' bytes, little-endian (the host's order: x86-64 and aarch64 Linux) */
			struct spyre_buf s;

			spyre_buf_init(&s);
			base64(&s, (const unsigned char *)v, dim * sizeof(float));
			spyre_jw_strn(&w, s.p ? s.p : "", s.len);
			spyre_buf_free(&s);
		} else {
			spyre_jw_arr(&w);
			for (k = 0; k < dim; k++)
				spyre_jw_double(&w, v[k]);
			spyre_jw_arr_end(&w);
		}
		spyre_jw_obj_end(&w);
	}
	spyre_jw_arr_end(&w);
	spyre_jw_key(&w, "model");
	spyre_jw_str(&w, model);
	spyre_jw_key(&w, "usage");
	spyre_jw_obj(&w);
	spyre_jw_key(&w, "prompt_tokens");
	spyre_jw_uint(&w, prompt_tokens);
	spyre_jw_key(&w, "total_tokens");
	spyre_jw_uint(&w, prompt_tokens);
	spyre_jw_obj_end(&w);
	spyre_jw_obj_end(&w);
}

void spyre_oai_chat_prompt(const struct spyre_oai_message *m, size_t n, bool granite, struct spyre_buf *out)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (granite)
			spyre_buf_printf(out, "<|start_of_role|>%s<|end_of_role|>", m[i].role);
		else
			spyre_buf_printf(out, "<|%s|>\n", m[i].role);
		spyre_buf_add(out, m[i].content, m[i].content_len);
		spyre_buf_puts(out, granite ? "<|end_of_text|>\n" : "\n");
	}
	spyre_buf_puts(out, granite ? "<|start_of_role|>assistant<|end_of_role|>" : "<|assistant|>\n");
}

/* ---- responses ---------------------------------------------------------------------------------- */

const char *spyre_oai_finish_name(int finish)
{
	static const char *const names[] = { "none", "length", "stop", "abort", "error" };

	return finish >= 0 && finish < 5 ? names[finish] : "error";
}

static void head(struct spyre_jw *w, const struct spyre_oai_resp *r, bool chunk)
{
	spyre_jw_key(w, "id");
	spyre_jw_str(w, r->id);
	spyre_jw_key(w, "object");
	spyre_jw_str(w, r->kind == SPYRE_OAI_CHAT ? (chunk ? "chat.completion.chunk" : "chat.completion") :
		     "text_completion");
	spyre_jw_key(w, "created");
	spyre_jw_int(w, r->created);
	spyre_jw_key(w, "model");
	spyre_jw_str(w, r->model);
}

static void usage(struct spyre_jw *w, uint32_t prompt, uint32_t completion)
{
	spyre_jw_key(w, "usage");
	spyre_jw_obj(w);
	spyre_jw_key(w, "prompt_tokens");
	spyre_jw_uint(w, prompt);
	spyre_jw_key(w, "total_tokens");
	spyre_jw_uint(w, (uint64_t)prompt + completion);
	spyre_jw_key(w, "completion_tokens");
	spyre_jw_uint(w, completion);
	spyre_jw_obj_end(w);
}

/* One choice: the text (as "text", "message" or "delta"), the ids, the finish reason. */
static void choice(struct spyre_jw *w, const struct spyre_oai_resp *r, bool chunk, bool role, const char *text,
		   size_t text_len, const int32_t *ids, size_t n_ids, const char *finish, const char *stop_str)
{
	size_t i;

	spyre_jw_obj(w);
	spyre_jw_key(w, "index");
	spyre_jw_uint(w, 0);
	if (r->kind == SPYRE_OAI_CHAT) {
		spyre_jw_key(w, chunk ? "delta" : "message");
		spyre_jw_obj(w);
		if (!chunk || role) {
			spyre_jw_key(w, "role");
			spyre_jw_str(w, "assistant");
		}
		if (!chunk || text_len || role) {
			spyre_jw_key(w, "content");
			spyre_jw_strn(w, text, text_len);
		}
		spyre_jw_obj_end(w);
	} else {
		spyre_jw_key(w, "text");
		spyre_jw_strn(w, text, text_len);
	}
	spyre_jw_key(w, "logprobs");
	spyre_jw_null(w);
	spyre_jw_key(w, "finish_reason");
	if (finish)
		spyre_jw_str(w, finish);
	else
		spyre_jw_null(w);
	spyre_jw_key(w, "stop_reason");
	if (stop_str)
		spyre_jw_str(w, stop_str);
	else
		spyre_jw_null(w);
	if (r->return_token_ids) {
		spyre_jw_key(w, "token_ids");
		spyre_jw_arr(w);
		for (i = 0; i < n_ids; i++)
			spyre_jw_int(w, ids[i]);
		spyre_jw_arr_end(w);
	}
	spyre_jw_obj_end(w);
}

void spyre_oai_response(const struct spyre_oai_resp *r, const char *text, size_t text_len, const int32_t *ids,
			size_t n_ids, const char *finish, const char *stop_str, uint32_t prompt_tokens,
			struct spyre_buf *out)
{
	struct spyre_jw w;

	spyre_jw_init(&w, out);
	spyre_jw_obj(&w);
	head(&w, r, false);
	spyre_jw_key(&w, "choices");
	spyre_jw_arr(&w);
	choice(&w, r, false, false, text, text_len, ids, n_ids, finish, stop_str);
	spyre_jw_arr_end(&w);
	usage(&w, prompt_tokens, (uint32_t)n_ids);
	spyre_jw_obj_end(&w);
}

void spyre_oai_chunk_head(const struct spyre_oai_resp *r, struct spyre_buf *out)
{
	struct spyre_jw w;

	spyre_buf_puts(out, "data: ");
	spyre_jw_init(&w, out);
	spyre_jw_obj(&w);
	head(&w, r, true);
	spyre_jw_key(&w, "choices");
	spyre_jw_arr(&w);
	/* left open: the tail's choice is the array's first element */
}

void spyre_oai_chunk_tail(const struct spyre_oai_resp *r, bool role_chunk, const char *text, size_t text_len,
			  const int32_t *ids, size_t n_ids, const char *finish, const char *stop_str,
			  struct spyre_buf *out)
{
	struct spyre_jw w;

	spyre_jw_init(&w, out);
	choice(&w, r, true, role_chunk, text, text_len, ids, n_ids, finish, stop_str);
	spyre_buf_puts(out, "]}\n\n");
}

void spyre_oai_chunk(const struct spyre_oai_resp *r, bool role_chunk, const char *text, size_t text_len,
		     const int32_t *ids, size_t n_ids, const char *finish, const char *stop_str,
		     struct spyre_buf *out)
{
	spyre_oai_chunk_head(r, out);
	spyre_oai_chunk_tail(r, role_chunk, text, text_len, ids, n_ids, finish, stop_str, out);
}

void spyre_oai_usage_chunk(const struct spyre_oai_resp *r, uint32_t prompt_tokens, uint32_t completion_tokens,
			   struct spyre_buf *out)
{
	struct spyre_jw w;

	spyre_buf_puts(out, "data: ");
	spyre_jw_init(&w, out);
	spyre_jw_obj(&w);
	head(&w, r, true);
	spyre_jw_key(&w, "choices");
	spyre_jw_arr(&w);
	spyre_jw_arr_end(&w);
	usage(&w, prompt_tokens, completion_tokens);
	spyre_jw_obj_end(&w);
	spyre_buf_puts(out, "\n\n");
}

void spyre_oai_sse_done(struct spyre_buf *out)
{
	spyre_buf_puts(out, "data: [DONE]\n\n");
}

void spyre_oai_sse_error(const struct spyre_oai_error *e, struct spyre_buf *out)
{
	struct spyre_jw w;

	spyre_buf_puts(out, "data: ");
	spyre_jw_init(&w, out);
	spyre_jw_obj(&w);
	error_object(&w, e);
	spyre_jw_obj_end(&w);
	spyre_buf_puts(out, "\n\n");
}

/* ---- stop strings ------------------------------------------------------------------------------- */

size_t spyre_oai_stop_feed(const struct spyre_oai_gen *g, struct spyre_buf *pending, const char *text, size_t n,
			   int *hit)
{
	size_t best = SIZE_MAX, hold = 0, i, k;
	const char *p;

	*hit = -1;
	spyre_buf_add(pending, text, n);
	if (!g->n_stop)
		return pending->len;
	for (i = 0; i < g->n_stop; i++) {
		p = memmem(pending->p, pending->len, g->stop[i], g->stop_len[i]);
		if (p && (size_t)(p - pending->p) < best) {
			best = (size_t)(p - pending->p);
			*hit = (int)i;
		}
	}
	if (*hit >= 0)
		return best;
	/* Hold back the longest tail that is the start of a stop string. */
	for (i = 0; i < g->n_stop; i++) {
		k = g->stop_len[i] - 1 < pending->len ? g->stop_len[i] - 1 : pending->len;
		for (; k > hold; k--)
			if (!memcmp(pending->p + pending->len - k, g->stop[i], k)) {
				hold = k;
				break;
			}
	}
	return pending->len - hold;
}
