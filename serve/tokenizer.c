// SPDX-License-Identifier: MIT
/*
 * tokenizer.c - a Hugging Face tokenizer.json in C (see tokenizer.h): the
 * file's top level, added and special tokens (split out before normalization
 * as tokenizers does: first the tokens matched on the raw text, then the
 * "normalized" ones on each normalized piece, leftmost-longest, with
 * single_word, lstrip and rstrip), the encode pipeline (normalizer ->
 * pre-tokenizer -> model -> post-processor), the decoders and streaming
 * detokenization. "truncation" and "padding" are not applied: the caller
 * (the engine) decides lengths.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"

struct added {
	char *content;
	size_t len;
	char *pattern;		/* what is matched: content, normalized for "normalized" tokens */
	size_t plen;
	int32_t id;
	bool special, lstrip, rstrip, single_word, normalized;
};

/* A byte trie of added-token patterns, for leftmost-longest matching. */
struct trie_node {
	int32_t child, sibling;	/* -1: none */
	int32_t term;		/* index in added[], -1: none */
	uint8_t byte;
};

struct trie {
	struct trie_node *v;
	size_t n, cap;
	bool any;
	int32_t first[256];	/* the root's children */
};

enum { DEC_NONE, DEC_BYTELEVEL, DEC_WORDPIECE };

struct spyre_tokenizer {
	struct tok_model *model;
	struct tok_norm *norm;
	struct tok_pretok *pretok;
	struct added *added;
	size_t nadded;
	struct trie raw, normd;
	uint32_t vocab_size;
	const char **id_str;	/* by id: the added token's content or the model's token; NULL: hole */
	uint32_t *id_len;
	bool *id_special;
	/* the post-processor with add_special: pre + A + post */
	struct tok_ids pre, post;
	int dec;
	char *wp_prefix;
	size_t wp_prefix_len;
	bool wp_cleanup;
};

/* ---- the trie ---- */

static int trie_add(struct trie *t, const char *s, size_t n, int32_t term)
{
	int32_t cur = -1;

	for (size_t i = 0; i < n; i++) {
		uint8_t b = (uint8_t)s[i];
		int32_t c = cur < 0 ? t->first[b] : t->v[cur].child;

		while (c >= 0 && t->v[c].byte != b)
			c = t->v[c].sibling;
		if (c < 0) {
			if (t->n == t->cap) {
				size_t cap = t->cap ? t->cap * 2 : 64;
				struct trie_node *q = realloc(t->v, cap * sizeof(*q));

				if (!q)
					return -ENOMEM;
				t->v = q;
				t->cap = cap;
			}
			c = (int32_t)t->n++;
			t->v[c] = (struct trie_node){ -1, -1, -1, b };
			if (cur < 0) {
				t->first[b] = c;
			} else {
				t->v[c].sibling = t->v[cur].child;
				t->v[cur].child = c;
			}
		}
		cur = c;
	}
	if (cur >= 0 && t->v[cur].term < 0)
		t->v[cur].term = term;	/* the first of two equal patterns wins */
	t->any = true;
	return 0;
}

/* The longest pattern at s[0..n): its length, *term set; 0 if none. */
static size_t trie_match(const struct trie *t, const char *s, size_t n, int32_t *term)
{
	int32_t c = t->first[(uint8_t)s[0]];
	size_t best = 0;

	for (size_t i = 0; c >= 0;) {
		if (t->v[c].term >= 0) {
			best = i + 1;
			*term = t->v[c].term;
		}
		if (++i == n)
			break;
		c = t->v[c].child;
		while (c >= 0 && t->v[c].byte != (uint8_t)s[i])
			c = t->v[c].sibling;
	}
	return best;
}

/* ---- loading ---- */

void spyre_tokenizer_free(struct spyre_tokenizer *t)
{
	if (!t)
		return;
	tok_model_free(t->model);
	tok_norm_free(t->norm);
	tok_pretok_free(t->pretok);
	for (size_t i = 0; i < t->nadded; i++) {
		free(t->added[i].content);
		free(t->added[i].pattern);
	}
	free(t->added);
	free(t->raw.v);
	free(t->normd.v);
	free(t->id_str);
	free(t->id_len);
	free(t->id_special);
	free(t->pre.p);
	free(t->post.p);
	free(t->wp_prefix);
	free(t);
}

static int flag(const struct spyre_json_node *o, const char *key, bool def, bool *out, size_t i, char *err, size_t errlen)
{
	const struct spyre_json_node *v = spyre_json_get(o, key);

	*out = def;
	if (v && spyre_json_bool(v, out))
		return tok_errf(err, errlen, -EINVAL, "added_tokens[%zu].%s: expected a boolean", i, key);
	return 0;
}

static int load_added(struct spyre_tokenizer *t, const struct spyre_json_node *arr, char *err, size_t errlen)
{
	size_t n;

	if (!arr || spyre_json_type(arr) == SPYRE_JSON_NULL)
		return 0;
	if (spyre_json_type(arr) != SPYRE_JSON_ARRAY)
		return tok_errf(err, errlen, -EINVAL, "added_tokens: expected an array");
	n = spyre_json_count(arr);
	if (!(t->added = calloc(n + 1, sizeof(*t->added))))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const struct spyre_json_node *o = spyre_json_at(arr, i, NULL), *v;
		struct added *a = &t->added[t->nadded];
		const char *c;
		uint64_t id;
		int rc;

		if (spyre_json_type(o) != SPYRE_JSON_OBJECT)
			return tok_errf(err, errlen, -EINVAL, "added_tokens[%zu]: expected an object", i);
		v = spyre_json_get(o, "id");
		if (!v || spyre_json_u64(v, &id) || id >= (1u << 24))
			return tok_errf(err, errlen, -EINVAL, "added_tokens[%zu].id: expected an integer from 0 to %u", i,
					(1u << 24) - 1);
		v = spyre_json_get(o, "content");
		if (!v || !(c = spyre_json_string(v, &a->len)))
			return tok_errf(err, errlen, -EINVAL, "added_tokens[%zu].content: expected a string", i);
		if (!a->len)
			continue;	/* tokenizers ignores empty tokens */
		if (!(a->content = malloc(a->len + 1)))
			return -ENOMEM;
		memcpy(a->content, c, a->len + 1);
		a->id = (int32_t)id;
		t->nadded++;
		if ((rc = flag(o, "special", false, &a->special, i, err, errlen)) ||
		    (rc = flag(o, "lstrip", false, &a->lstrip, i, err, errlen)) ||
		    (rc = flag(o, "rstrip", false, &a->rstrip, i, err, errlen)) ||
		    (rc = flag(o, "single_word", false, &a->single_word, i, err, errlen)) ||
		    (rc = flag(o, "normalized", !a->special, &a->normalized, i, err, errlen)))
			return rc;
	}
	return 0;
}

/* The id table: the model's tokens, the added tokens over them. */
static int build_ids(struct spyre_tokenizer *t, char *err, size_t errlen)
{
	int32_t max = tok_model_max_id(t->model);

	for (size_t i = 0; i < t->nadded; i++)
		if (t->added[i].id > max)
			max = t->added[i].id;
	if (max < 0)
		return tok_errf(err, errlen, -EINVAL, "model.vocab: no tokens");
	t->vocab_size = (uint32_t)max + 1;
	t->id_str = calloc(t->vocab_size, sizeof(*t->id_str));
	t->id_len = calloc(t->vocab_size, sizeof(*t->id_len));
	t->id_special = calloc(t->vocab_size, sizeof(*t->id_special));
	if (!t->id_str || !t->id_len || !t->id_special)
		return -ENOMEM;
	for (int32_t id = 0; id <= tok_model_max_id(t->model); id++) {
		size_t len;

		t->id_str[id] = tok_model_id_to_token(t->model, id, &len);
		t->id_len[id] = (uint32_t)len;
	}
	for (size_t i = 0; i < t->nadded; i++) {
		const struct added *a = &t->added[i];

		t->id_str[a->id] = a->content;
		t->id_len[a->id] = (uint32_t)a->len;
		t->id_special[a->id] = a->special;
	}
	return 0;
}

static int build_tries(struct spyre_tokenizer *t)
{
	struct tok_buf nb = { 0 };
	int rc = 0;

	memset(t->raw.first, 0xff, sizeof(t->raw.first));
	memset(t->normd.first, 0xff, sizeof(t->normd.first));
	/* special tokens first, then the others, each in the file's order */
	for (int pass = 0; pass < 2 && !rc; pass++)
		for (size_t i = 0; i < t->nadded && !rc; i++) {
			struct added *a = &t->added[i];

			if (a->special != (pass == 0))
				continue;
			if (!a->normalized) {
				rc = trie_add(&t->raw, a->content, a->len, (int32_t)i);
				continue;
			}
			if ((rc = tok_norm_apply(t->norm, a->content, a->len, &nb)))
				break;
			if (!nb.n)
				continue;
			if (!(a->pattern = malloc(nb.n + 1))) {
				rc = -ENOMEM;
				break;
			}
			memcpy(a->pattern, nb.p, nb.n + 1);
			a->plen = nb.n;
			rc = trie_add(&t->normd, a->pattern, a->plen, (int32_t)i);
		}
	free(nb.p);
	return rc;
}

/* The id of special token @name in a post-processor: 0 or -EINVAL. */
static int post_id(const struct spyre_tokenizer *t, const struct spyre_json_node *v, int32_t *id, const char *where,
		   char *err, size_t errlen)
{
	uint64_t u;

	/* BertProcessing / RobertaProcessing: ["[SEP]", 102] */
	if (!v || spyre_json_type(v) != SPYRE_JSON_ARRAY || spyre_json_count(v) != 2 ||
	    !spyre_json_string(spyre_json_at(v, 0, NULL), NULL) || spyre_json_u64(spyre_json_at(v, 1, NULL), &u) ||
	    u >= t->vocab_size)
		return tok_errf(err, errlen, -EINVAL, "post_processor.%s: expected [token, id] with an id below %u", where,
				t->vocab_size);
	*id = (int32_t)u;
	return 0;
}

static int load_template(struct spyre_tokenizer *t, const struct spyre_json_node *pp, char *err, size_t errlen)
{
	const struct spyre_json_node *single = spyre_json_get(pp, "single");
	const struct spyre_json_node *specials = spyre_json_get(pp, "special_tokens");
	struct tok_ids pre = { 0 }, post = { 0 };
	bool seen_a = false;
	int rc = 0;

	if (!single || spyre_json_type(single) != SPYRE_JSON_ARRAY)
		return tok_errf(err, errlen, -EINVAL, "post_processor TemplateProcessing.single: expected an array");
	for (size_t i = 0; i < spyre_json_count(single) && !rc; i++) {
		const struct spyre_json_node *it = spyre_json_at(single, i, NULL), *st, *seq, *ids;
		const char *name;

		if ((seq = spyre_json_get(it, "Sequence"))) {
			const char *which = spyre_json_string(spyre_json_get(seq, "id"), NULL);

			if (!which || strcmp(which, "A") || seen_a) {
				rc = tok_errf(err, errlen, -EINVAL,
					      "post_processor TemplateProcessing.single[%zu]: only one sequence, $A", i);
				break;
			}
			seen_a = true;
			continue;
		}
		st = spyre_json_get(it, "SpecialToken");
		name = st ? spyre_json_string(spyre_json_get(st, "id"), NULL) : NULL;
		if (!name) {
			rc = tok_errf(err, errlen, -EINVAL,
				      "post_processor TemplateProcessing.single[%zu]: expected SpecialToken or Sequence", i);
			break;
		}
		ids = spyre_json_get(spyre_json_get(specials, name), "ids");
		if (!ids || spyre_json_type(ids) != SPYRE_JSON_ARRAY) {
			rc = tok_errf(err, errlen, -EINVAL,
				      "post_processor TemplateProcessing: special token '%s' has no ids in special_tokens", name);
			break;
		}
		for (size_t k = 0; k < spyre_json_count(ids) && !rc; k++) {
			uint64_t u;

			if (spyre_json_u64(spyre_json_at(ids, k, NULL), &u) || u >= t->vocab_size)
				rc = tok_errf(err, errlen, -EINVAL,
					      "post_processor TemplateProcessing: special token '%s': an id is not below %u",
					      name, t->vocab_size);
			else
				rc = tok_ids_push(seen_a ? &post : &pre, (int32_t)u);
		}
	}
	if (!rc && !seen_a)
		rc = tok_errf(err, errlen, -EINVAL, "post_processor TemplateProcessing.single: no $A");
	/* wrap what earlier processors of a Sequence added: pre + old pre + A + old post + post */
	for (size_t k = 0; k < t->pre.n && !rc; k++)
		rc = tok_ids_push(&pre, t->pre.p[k]);
	if (!rc) {
		for (size_t k = 0; k < post.n && !rc; k++)
			rc = tok_ids_push(&t->post, post.p[k]);
		free(t->pre.p);
		t->pre = pre;
		pre.p = NULL;
	}
	free(pre.p);
	free(post.p);
	return rc;
}

static int load_post(struct spyre_tokenizer *t, const struct spyre_json_node *pp, int depth, char *err, size_t errlen)
{
	const char *ts;
	int rc;

	if (!pp || spyre_json_type(pp) == SPYRE_JSON_NULL)
		return 0;
	ts = spyre_json_string(spyre_json_get(pp, "type"), NULL);
	if (!ts)
		return tok_errf(err, errlen, -EINVAL, "post_processor: expected an object with a \"type\"");
	if (!strcmp(ts, "ByteLevel"))
		return 0;	/* offsets only */
	if (!strcmp(ts, "TemplateProcessing"))
		return load_template(t, pp, err, errlen);
	if (!strcmp(ts, "BertProcessing") || !strcmp(ts, "RobertaProcessing")) {
		int32_t cls, sep;
		struct tok_ids pre = { 0 };

		if ((rc = post_id(t, spyre_json_get(pp, "cls"), &cls, "cls", err, errlen)) ||
		    (rc = post_id(t, spyre_json_get(pp, "sep"), &sep, "sep", err, errlen)))
			return rc;
		if ((rc = tok_ids_push(&pre, cls)))
			return rc;
		for (size_t k = 0; k < t->pre.n && !rc; k++)
			rc = tok_ids_push(&pre, t->pre.p[k]);
		if (!rc)
			rc = tok_ids_push(&t->post, sep);
		free(t->pre.p);
		t->pre = pre;
		return rc;
	}
	if (!strcmp(ts, "Sequence")) {
		const struct spyre_json_node *arr = spyre_json_get(pp, "processors");

		if (!arr || spyre_json_type(arr) != SPYRE_JSON_ARRAY || depth > 8)
			return tok_errf(err, errlen, -EINVAL, "post_processor Sequence: expected \"processors\": [...]");
		for (size_t i = 0; i < spyre_json_count(arr); i++)
			if ((rc = load_post(t, spyre_json_at(arr, i, NULL), depth + 1, err, errlen)))
				return rc;
		return 0;
	}
	return tok_errf(err, errlen, -EOPNOTSUPP,
			"post_processor '%s' is not supported (TemplateProcessing, BertProcessing, RobertaProcessing, "
			"ByteLevel, Sequence are)", ts);
}

static int load_decoder(struct spyre_tokenizer *t, const struct spyre_json_node *d, int depth, char *err, size_t errlen)
{
	const char *ts;

	if (!d || spyre_json_type(d) == SPYRE_JSON_NULL)
		return 0;
	ts = spyre_json_string(spyre_json_get(d, "type"), NULL);
	if (!ts)
		return tok_errf(err, errlen, -EINVAL, "decoder: expected an object with a \"type\"");
	if (!strcmp(ts, "Sequence") && depth == 0) {
		const struct spyre_json_node *arr = spyre_json_get(d, "decoders");

		if (!arr || spyre_json_type(arr) != SPYRE_JSON_ARRAY || spyre_json_count(arr) > 1)
			return tok_errf(err, errlen, -EOPNOTSUPP, "decoder Sequence: only one of ByteLevel or WordPiece");
		return spyre_json_count(arr) ? load_decoder(t, spyre_json_at(arr, 0, NULL), 1, err, errlen) : 0;
	}
	if (!strcmp(ts, "ByteLevel")) {
		t->dec = DEC_BYTELEVEL;
		return 0;
	}
	if (!strcmp(ts, "WordPiece")) {
		const struct spyre_json_node *p = spyre_json_get(d, "prefix"), *c = spyre_json_get(d, "cleanup");
		const char *ps = p ? spyre_json_string(p, &t->wp_prefix_len) : "##";

		t->dec = DEC_WORDPIECE;
		t->wp_cleanup = true;
		if (!ps || (c && spyre_json_bool(c, &t->wp_cleanup)))
			return tok_errf(err, errlen, -EINVAL, "decoder WordPiece: prefix (a string), cleanup (a boolean)");
		if (!p)
			t->wp_prefix_len = 2;
		if (!(t->wp_prefix = strdup(ps)))
			return -ENOMEM;
		return 0;
	}
	return tok_errf(err, errlen, -EOPNOTSUPP, "decoder '%s' is not supported (ByteLevel, WordPiece, Sequence of one are)",
			ts);
}

int spyre_tokenizer_new(const char *json, size_t len, struct spyre_tokenizer **out, char *err, size_t errlen)
{
	struct spyre_json *doc = NULL;
	const struct spyre_json_node *root;
	struct spyre_tokenizer *t = NULL;
	char jerr[200];
	int rc;

	if (err && errlen)
		err[0] = 0;
	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!json)
		return tok_errf(err, errlen, -EINVAL, "tokenizer.json: no text");
	if (spyre_json_parse(json, len, &doc, jerr, sizeof(jerr)))
		return tok_errf(err, errlen, -EINVAL, "tokenizer.json: %s", jerr);
	root = spyre_json_root(doc);
	if (spyre_json_type(root) != SPYRE_JSON_OBJECT) {
		rc = tok_errf(err, errlen, -EINVAL, "tokenizer.json: expected an object");
		goto fail;
	}
	if (!(t = calloc(1, sizeof(*t)))) {
		rc = -ENOMEM;
		goto fail;
	}
	if ((rc = tok_model_new(spyre_json_get(root, "model"), &t->model, err, errlen)) ||
	    (rc = tok_norm_new(spyre_json_get(root, "normalizer"), &t->norm, err, errlen)) ||
	    (rc = tok_pretok_new(spyre_json_get(root, "pre_tokenizer"), &t->pretok, err, errlen)) ||
	    (rc = load_added(t, spyre_json_get(root, "added_tokens"), err, errlen)) ||
	    (rc = build_ids(t, err, errlen)) || (rc = build_tries(t)) ||
	    (rc = load_post(t, spyre_json_get(root, "post_processor"), 0, err, errlen)) ||
	    (rc = load_decoder(t, spyre_json_get(root, "decoder"), 0, err, errlen)))
		goto fail;
	spyre_json_free(doc);
	*out = t;
	return 0;
fail:
	if (rc == -ENOMEM && err && errlen && !err[0])
		tok_errf(err, errlen, rc, "tokenizer.json: out of memory");
	spyre_json_free(doc);
	spyre_tokenizer_free(t);
	return rc;
}

int spyre_tokenizer_load(const char *path, struct spyre_tokenizer **out, char *err, size_t errlen)
{
	FILE *f;
	char *buf = NULL;
	long n;
	int rc;

	if (!path || !out)
		return -EINVAL;
	*out = NULL;
	if (!(f = fopen(path, "rb")))
		return tok_errf(err, errlen, -errno, "%s: %s", path, strerror(errno));
	if (fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
		rc = tok_errf(err, errlen, -EIO, "%s: cannot find its size", path);
		goto out;
	}
	if (!(buf = malloc(n ? (size_t)n : 1))) {
		rc = tok_errf(err, errlen, -ENOMEM, "%s: out of memory for %ld bytes", path, n);
		goto out;
	}
	if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
		rc = tok_errf(err, errlen, -EIO, "%s: short read", path);
		goto out;
	}
	rc = spyre_tokenizer_new(buf, (size_t)n, out, err, errlen);
	if (rc && err && errlen) {
		char tmp[512];

		snprintf(tmp, sizeof(tmp), "%s: %s", path, err);
		snprintf(err, errlen, "%s", tmp);
	}
out:
	free(buf);
	fclose(f);
	return rc;
}

uint32_t spyre_tokenizer_vocab_size(const struct spyre_tokenizer *t)
{
	return t->vocab_size;
}

int32_t spyre_tokenizer_token_to_id(const struct spyre_tokenizer *t, const char *token)
{
	size_t n = strlen(token);

	for (size_t i = 0; i < t->nadded; i++)
		if (t->added[i].len == n && !memcmp(t->added[i].content, token, n))
			return t->added[i].id;
	return tok_model_token_to_id(t->model, token, n);
}

bool spyre_tokenizer_is_special(const struct spyre_tokenizer *t, int32_t id)
{
	return id >= 0 && (uint32_t)id < t->vocab_size && t->id_special[id];
}

/* ---- encoding ---- */

struct enc {
	const struct spyre_tokenizer *t;
	struct tok_ids ids;
	struct tok_buf norm;
};

static int emit_pretoken(void *ctx, const char *s, size_t n)
{
	struct enc *e = ctx;

	return tok_model_tokenize(e->t->model, s, n, &e->ids);
}

/* \s*$ and ^\s* */
static size_t space_before(const char *s, size_t end)
{
	while (end > 0) {
		size_t j = end - 1, k;

		while (j > 0 && ((unsigned char)s[j] & 0xc0) == 0x80)
			j--;
		k = j;
		if (!tok_is_space(tok_utf8_next(s, &k)))
			break;
		end = j;
	}
	return end;
}

static size_t space_after(const char *s, size_t start, size_t n)
{
	while (start < n) {
		size_t k = start;

		if (!tok_is_space(tok_utf8_next(s, &k)))
			break;
		start = k;
	}
	return start;
}

static bool word_before(const char *s, size_t end)
{
	size_t j = end - 1;

	while (j > 0 && ((unsigned char)s[j] & 0xc0) == 0x80)
		j--;
	return tok_is_word(tok_utf8_next(s, &j));
}

static bool word_after(const char *s, size_t start)
{
	return tok_is_word(tok_utf8_next(s, &start));
}

typedef int (*piece_fn)(struct enc *e, const char *s, size_t n);

/* Split @s on the trie's tokens: added tokens' ids go out, the text between to @rest. */
static int split_added(struct enc *e, const struct trie *tr, const char *s, size_t n, piece_fn rest)
{
	size_t i = 0, done = 0;
	int rc = 0;

	if (!tr->any)
		return n ? rest(e, s, n) : 0;
	while (i < n) {
		int32_t term;
		size_t len = trie_match(tr, s + i, n - i, &term), start = i, stop;
		const struct added *a;

		if (!len) {
			i++;
			continue;
		}
		a = &e->t->added[term];
		stop = i + len;
		i = stop;
		if (a->single_word && ((start > 0 && word_before(s, start)) || (stop < n && word_after(s, stop))))
			continue;
		if (a->lstrip) {
			size_t ns = space_before(s, start);

			start = ns > done ? ns : done;
		}
		if (a->rstrip)
			stop = space_after(s, stop, n);
		if (start > done && (rc = rest(e, s + done, start - done)))
			return rc;
		if ((rc = tok_ids_push(&e->ids, a->id)))
			return rc;
		done = i = stop;
	}
	return n > done ? rest(e, s + done, n - done) : 0;
}

static int pretokenize(struct enc *e, const char *s, size_t n)
{
	return tok_pretok_apply(e->t->pretok, s, n, emit_pretoken, e);
}

static int normalize_piece(struct enc *e, const char *s, size_t n)
{
	char *p;
	int rc;

	if ((rc = tok_norm_apply(e->t->norm, s, n, &e->norm)))
		return rc;
	/* the buffer is reused by the next piece: take it */
	p = e->norm.p;
	n = e->norm.n;
	e->norm = (struct tok_buf){ 0 };
	rc = split_added(e, &e->t->normd, p, n, pretokenize);
	free(p);
	return rc;
}

int spyre_tokenizer_encode(const struct spyre_tokenizer *t, const char *text, size_t len, bool add_special,
			   int32_t **ids, size_t *n, char *err, size_t errlen)
{
	struct enc e = { .t = t };
	size_t bad;
	int rc = 0;

	if (!t || !ids || !n || (!text && len))
		return tok_errf(err, errlen, -EINVAL, "encode: bad arguments");
	*ids = NULL;
	*n = 0;
	if ((bad = tok_utf8_valid_len(text, len)) != len)
		return tok_errf(err, errlen, -EILSEQ, "encode: invalid UTF-8 at byte %zu", bad);
	if (add_special)
		for (size_t k = 0; k < t->pre.n && !rc; k++)
			rc = tok_ids_push(&e.ids, t->pre.p[k]);
	if (!rc && len)
		rc = split_added(&e, &t->raw, text, len, normalize_piece);
	if (add_special)
		for (size_t k = 0; k < t->post.n && !rc; k++)
			rc = tok_ids_push(&e.ids, t->post.p[k]);
	if (!rc && !e.ids.p)
		rc = tok_ids_push(&e.ids, 0), e.ids.n = 0;	/* a malloc'ed array even when empty */
	free(e.norm.p);
	if (rc) {
		free(e.ids.p);
		return tok_errf(err, errlen, rc, "encode: %s", rc == -ENOMEM ? "out of memory" : strerror(-rc));
	}
	*ids = e.ids.p;
	*n = e.ids.n;
	return 0;
}

/* ---- decoding ---- */

/* replace every @from by @to in @b (a WordPiece cleanup step) */
static int replace_all(struct tok_buf *b, const char *from, const char *to, struct tok_buf *tmp)
{
	size_t nf = strlen(from), nt = strlen(to), i = 0;
	int rc = 0;

	if (b->n < nf || !memmem(b->p, b->n, from, nf))
		return 0;
	tmp->n = 0;
	while (i < b->n && !rc) {
		if (b->n - i >= nf && !memcmp(b->p + i, from, nf)) {
			rc = tok_buf_put(tmp, to, nt);
			i += nf;
		} else {
			rc = tok_buf_put(tmp, b->p + i, 1);
			i++;
		}
	}
	if (!rc) {
		b->n = 0;
		rc = tok_buf_put(b, tmp->p, tmp->n);
	}
	return rc;
}

/* The bytes the decoder gives token @id as the @k-th token kept, appended to @out. */
static int decode_piece(const struct spyre_tokenizer *t, int32_t id, size_t k, struct tok_buf *out)
{
	static const char *const cleanup[][2] = {
		{ " .", "." }, { " ?", "?" }, { " !", "!" }, { " ,", "," }, { " ' ", "'" }, { " n't", "n't" },
		{ " 'm", "'m" }, { " do not", " don't" }, { " 's", "'s" }, { " 've", "'ve" }, { " 're", "'re" },
	};
	const char *s = t->id_str[id];
	size_t n = t->id_len[id], i = 0;
	struct tok_buf w = { 0 }, tmp = { 0 };
	int rc = 0;

	switch (t->dec) {
	case DEC_NONE:
		if (k && (rc = tok_buf_put(out, " ", 1)))
			return rc;
		return tok_buf_put(out, s, n);
	case DEC_BYTELEVEL:
		/* every character one of the 256: their bytes; else the token's own text */
		for (bool all = true; i < n;)
			if (!(all = tok_cp_to_byte(tok_utf8_next(s, &i)) >= 0))
				return tok_buf_put(out, s, n);
		for (i = 0; i < n && !rc;) {
			char b = (char)tok_cp_to_byte(tok_utf8_next(s, &i));

			rc = tok_buf_put(out, &b, 1);
		}
		return rc;
	default:
		break;
	}
	/* WordPiece */
	if (k) {
		if (n >= t->wp_prefix_len && !memcmp(s, t->wp_prefix, t->wp_prefix_len)) {
			rc = tok_buf_put(&w, s + t->wp_prefix_len, n - t->wp_prefix_len);
		} else if (!(rc = tok_buf_put(&w, " ", 1))) {
			rc = tok_buf_put(&w, s, n);
		}
	} else {
		rc = tok_buf_put(&w, s, n);
	}
	if (t->wp_cleanup)
		for (size_t c = 0; c < sizeof(cleanup) / sizeof(cleanup[0]) && !rc; c++)
			rc = replace_all(&w, cleanup[c][0], cleanup[c][1], &tmp);
	if (!rc)
		rc = tok_buf_put(out, w.p, w.n);
	free(w.p);
	free(tmp.p);
	return rc;
}

static int check_id(const struct spyre_tokenizer *t, int32_t id, char *err, size_t errlen)
{
	if (id < 0 || (uint32_t)id >= t->vocab_size)
		return tok_errf(err, errlen, -EINVAL, "decode: id %d is out of range (the vocabulary has %u)", id,
				t->vocab_size);
	return 0;
}

/* Is @id decoded at all? (holes in the vocabulary and skipped specials are not, as in tokenizers) */
static bool kept(const struct spyre_tokenizer *t, int32_t id, bool skip_special)
{
	return t->id_str[id] && !(skip_special && t->id_special[id]);
}

int spyre_tokenizer_decode(const struct spyre_tokenizer *t, const int32_t *ids, size_t n, bool skip_special,
			   char **text, size_t *len, char *err, size_t errlen)
{
	struct tok_buf bytes = { 0 }, out = { 0 };
	size_t k = 0;
	int rc = 0;

	if (!t || !text || (!ids && n))
		return tok_errf(err, errlen, -EINVAL, "decode: bad arguments");
	*text = NULL;
	if (len)
		*len = 0;
	for (size_t i = 0; i < n; i++)
		if ((rc = check_id(t, ids[i], err, errlen)))
			return rc;
	for (size_t i = 0; i < n && !rc; i++)
		if (kept(t, ids[i], skip_special))
			rc = decode_piece(t, ids[i], k++, &bytes);
	if (!rc)
		rc = tok_utf8_lossy(bytes.p, bytes.n, false, NULL, &out);
	if (!rc)
		rc = tok_buf_put(&out, "", 0);
	free(bytes.p);
	if (rc) {
		free(out.p);
		return tok_errf(err, errlen, rc, "decode: out of memory");
	}
	*text = out.p;
	if (len)
		*len = out.n;
	return 0;
}

/* ---- streaming ---- */

struct spyre_detok {
	const struct spyre_tokenizer *t;
	bool skip_special;
	size_t k;		/* tokens kept so far */
	struct tok_buf bytes;	/* held back: the start of a character that later bytes may complete */
	struct tok_buf out;
};

struct spyre_detok *spyre_detok_new(const struct spyre_tokenizer *t, bool skip_special)
{
	struct spyre_detok *d;

	if (!t || !(d = calloc(1, sizeof(*d))))
		return NULL;
	d->t = t;
	d->skip_special = skip_special;
	return d;
}

static int detok_convert(struct spyre_detok *d, bool hold, const char **piece, size_t *len)
{
	size_t held = 0;
	int rc;

	d->out.n = 0;
	rc = tok_utf8_lossy(d->bytes.p, d->bytes.n, hold, &held, &d->out);
	if (!rc)
		rc = tok_buf_put(&d->out, "", 0);
	if (rc)
		return rc;
	/* keep the held bytes at the start of the buffer for the next call */
	if (held)
		memmove(d->bytes.p, d->bytes.p + d->bytes.n - held, held);
	d->bytes.n = held;
	*piece = d->out.p;
	if (len)
		*len = d->out.n;
	return 0;
}

int spyre_detok_push(struct spyre_detok *d, int32_t id, const char **piece, size_t *len)
{
	int rc;

	if (!d || !piece)
		return -EINVAL;
	*piece = "";
	if (len)
		*len = 0;
	if ((rc = check_id(d->t, id, NULL, 0)))
		return rc;
	if (kept(d->t, id, d->skip_special) && (rc = decode_piece(d->t, id, d->k++, &d->bytes)))
		return rc;
	return detok_convert(d, true, piece, len);
}

int spyre_detok_flush(struct spyre_detok *d, const char **piece, size_t *len)
{
	if (!d || !piece)
		return -EINVAL;
	return detok_convert(d, false, piece, len);
}

void spyre_detok_free(struct spyre_detok *d)
{
	if (!d)
		return;
	free(d->bytes.p);
	free(d->out.p);
	free(d);
}
