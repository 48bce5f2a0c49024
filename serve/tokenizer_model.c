// SPDX-License-Identifier: MIT
/*
 * tokenizer_model.c - the tokenizer's models as Hugging Face `tokenizers`
 * runs them: BPE (merges by rank, lowest first and leftmost among equals,
 * with a heap over the symbols' pairs; "a b" and ["a", "b"] merges;
 * ignore_merges; continuing_subword_prefix, end_of_word_suffix, unk_token,
 * fuse_unk, byte_fallback) and WordPiece (greedy longest match first,
 * continuing_subword_prefix, max_input_chars_per_word, unk_token). Also the
 * string -> id hash table the rest of the tokenizer uses.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"

/* The largest id a tokenizer.json may use (its tables are indexed by id). */
#define TOK_MAX_ID (1 << 24)

static uint64_t hash_bytes(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
	return h ^ (h >> 29);
}

int tok_strmap_init(struct tok_strmap *m, size_t count)
{
	size_t n = 16;

	while (n < count * 2 + 16)
		n *= 2;
	m->slot = calloc(n, sizeof(*m->slot));
	m->mask = n - 1;
	return m->slot ? 0 : -ENOMEM;
}

void tok_strmap_fini(struct tok_strmap *m)
{
	free(m->slot);
	m->slot = NULL;
}

static uint32_t *strmap_find(const struct tok_strmap *m, const char *s, size_t n)
{
	size_t i = hash_bytes(s, n) & m->mask;

	for (;; i = (i + 1) & m->mask) {
		uint32_t v = m->slot[i];

		if (!v || (m->len[v - 1] == n && !memcmp(m->str[v - 1], s, n)))
			return &m->slot[i];
	}
}

int tok_strmap_add(struct tok_strmap *m, int32_t id)
{
	uint32_t *p = strmap_find(m, m->str[id], m->len[id]);

	if (*p)
		return -EEXIST;
	*p = (uint32_t)id + 1;
	return 0;
}

int32_t tok_strmap_get(const struct tok_strmap *m, const char *s, size_t n)
{
	uint32_t v = *strmap_find(m, s, n);

	return v ? (int32_t)v - 1 : -1;
}

/* (left id, right id) -> (rank, new id) */
struct merge_slot {
	uint64_t key;	/* left << 32 | right, +1 so that 0 is empty */
	uint32_t rank;
	int32_t id;
};

enum { MODEL_BPE, MODEL_WORDPIECE };

struct tok_model {
	int type;
	char **str;		/* by id; NULL: hole */
	uint32_t *len;
	int32_t max_id;
	struct tok_strmap map;
	/* BPE */
	struct merge_slot *merges;
	size_t merge_mask;
	char *prefix, *suffix;	/* continuing_subword_prefix, end_of_word_suffix (NULL: none) */
	size_t prefix_len, suffix_len;
	int32_t unk;		/* -1: none */
	bool fuse_unk, byte_fallback, ignore_merges;
	int32_t byte_ids[256];	/* <0xXX> tokens, -1: none */
	/* WordPiece */
	size_t max_chars;
};

static const struct merge_slot *merge_find(const struct tok_model *m, int32_t a, int32_t b)
{
	uint64_t key = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
	size_t i = (size_t)((key * 0x9e3779b97f4a7c15ull) >> 20) & m->merge_mask;

	for (;; i = (i + 1) & m->merge_mask) {
		const struct merge_slot *s = &m->merges[i];

		if (!s->key || s->key == key)
			return s;
	}
}

void tok_model_free(struct tok_model *m)
{
	if (!m)
		return;
	if (m->str)
		for (int32_t i = 0; i <= m->max_id; i++)
			free(m->str[i]);
	free(m->str);
	free(m->len);
	tok_strmap_fini(&m->map);
	free(m->merges);
	free(m->prefix);
	free(m->suffix);
	free(m);
}

int32_t tok_model_max_id(const struct tok_model *m)
{
	return m->max_id;
}

const char *tok_model_id_to_token(const struct tok_model *m, int32_t id, size_t *len)
{
	if (id < 0 || id > m->max_id || !m->str[id])
		return NULL;
	*len = m->len[id];
	return m->str[id];
}

int32_t tok_model_token_to_id(const struct tok_model *m, const char *s, size_t n)
{
	return tok_strmap_get(&m->map, s, n);
}

/* An optional string member: 0 (absent or null: *out NULL), or -EINVAL. */
static int opt_string(const struct spyre_json_node *o, const char *key, char **out, size_t *len, char *err,
		      size_t errlen)
{
	const struct spyre_json_node *v = spyre_json_get(o, key);
	const char *s;
	size_t n;

	*out = NULL;
	if (len)
		*len = 0;
	if (!v || spyre_json_type(v) == SPYRE_JSON_NULL)
		return 0;
	if (!(s = spyre_json_string(v, &n)))
		return tok_errf(err, errlen, -EINVAL, "model.%s: expected a string or null, got %s", key,
				spyre_json_type_name(spyre_json_type(v)));
	if (!(*out = malloc(n + 1)))
		return -ENOMEM;
	memcpy(*out, s, n + 1);
	if (len)
		*len = n;
	return 0;
}

static int opt_bool(const struct spyre_json_node *o, const char *key, bool *out, char *err, size_t errlen)
{
	const struct spyre_json_node *v = spyre_json_get(o, key);

	*out = false;
	if (!v || spyre_json_type(v) == SPYRE_JSON_NULL)
		return 0;
	if (spyre_json_bool(v, out))
		return tok_errf(err, errlen, -EINVAL, "model.%s: expected a boolean", key);
	return 0;
}

static int load_vocab(struct tok_model *m, const struct spyre_json_node *vocab, char *err, size_t errlen)
{
	size_t count = spyre_json_count(vocab);
	int rc;

	if (!vocab || spyre_json_type(vocab) != SPYRE_JSON_OBJECT)
		return tok_errf(err, errlen, -EINVAL, "model.vocab: expected an object of token: id");
	m->max_id = -1;
	for (size_t i = 0; i < count; i++) {
		uint64_t id;

		if (spyre_json_u64(spyre_json_at(vocab, i, NULL), &id) || id >= TOK_MAX_ID)
			return tok_errf(err, errlen, -EINVAL, "model.vocab: entry %zu: the id is not an integer from 0 to %d",
					i, TOK_MAX_ID - 1);
		if ((int32_t)id > m->max_id)
			m->max_id = (int32_t)id;
	}
	m->str = calloc((size_t)m->max_id + 2, sizeof(*m->str));
	m->len = calloc((size_t)m->max_id + 2, sizeof(*m->len));
	if (!m->str || !m->len || tok_strmap_init(&m->map, count))
		return -ENOMEM;
	m->map.str = (const char *const *)m->str;
	m->map.len = m->len;
	for (size_t i = 0; i < count; i++) {
		const char *key;
		size_t klen;
		uint64_t id;

		spyre_json_u64(spyre_json_at(vocab, i, &key), &id);
		key = spyre_json_key(spyre_json_at(vocab, i, NULL), &klen);
		if (m->str[id])
			return tok_errf(err, errlen, -EINVAL, "model.vocab: id %llu given to two tokens",
					(unsigned long long)id);
		if (!(m->str[id] = malloc(klen + 1)))
			return -ENOMEM;
		memcpy(m->str[id], key, klen + 1);
		m->len[id] = (uint32_t)klen;
		if ((rc = tok_strmap_add(&m->map, (int32_t)id)))
			return tok_errf(err, errlen, -EINVAL, "model.vocab: token %zu repeated", i);
	}
	return 0;
}

/* One merge: "a b" or ["a", "b"]. */
static int merge_parts(const struct spyre_json_node *v, const char **a, size_t *na, const char **b, size_t *nb)
{
	const char *s;
	size_t n;

	if ((s = spyre_json_string(v, &n))) {
		const char *sp = memchr(s, ' ', n);

		/* tokenizers splits on the first space and wants exactly two parts */
		if (!sp || memchr(sp + 1, ' ', n - (size_t)(sp + 1 - s)))
			return -1;
		*a = s;
		*na = (size_t)(sp - s);
		*b = sp + 1;
		*nb = n - *na - 1;
		return 0;
	}
	if (spyre_json_type(v) == SPYRE_JSON_ARRAY && spyre_json_count(v) == 2 &&
	    (*a = spyre_json_string(spyre_json_at(v, 0, NULL), na)) &&
	    (*b = spyre_json_string(spyre_json_at(v, 1, NULL), nb)))
		return 0;
	return -1;
}

static int load_merges(struct tok_model *m, const struct spyre_json_node *merges, char *err, size_t errlen)
{
	size_t count, n = 16;
	struct tok_buf joined = { 0 };
	int rc = 0;

	if (!merges || spyre_json_type(merges) == SPYRE_JSON_NULL)
		count = 0;
	else if (spyre_json_type(merges) != SPYRE_JSON_ARRAY)
		return tok_errf(err, errlen, -EINVAL, "model.merges: expected an array");
	else
		count = spyre_json_count(merges);
	while (n < count * 2 + 16)
		n *= 2;
	if (!(m->merges = calloc(n, sizeof(*m->merges))))
		return -ENOMEM;
	m->merge_mask = n - 1;
	for (size_t i = 0; i < count; i++) {
		const char *a, *b;
		size_t na, nb;
		int32_t ia, ib, inew;
		struct merge_slot *s;

		if (merge_parts(spyre_json_at(merges, i, NULL), &a, &na, &b, &nb)) {
			rc = tok_errf(err, errlen, -EINVAL, "model.merges[%zu]: expected \"a b\" or [\"a\", \"b\"]", i);
			break;
		}
		ia = tok_strmap_get(&m->map, a, na);
		ib = tok_strmap_get(&m->map, b, nb);
		if (ia < 0 || ib < 0) {
			rc = tok_errf(err, errlen, -EINVAL, "model.merges[%zu]: '%.*s' is not in the vocabulary", i,
				      (int)(ia < 0 ? na : nb), ia < 0 ? a : b);
			break;
		}
		/* the merged token: a + b without b's continuing_subword_prefix */
		if (m->prefix && nb >= m->prefix_len && !memcmp(b, m->prefix, m->prefix_len)) {
			b += m->prefix_len;
			nb -= m->prefix_len;
		}
		joined.n = 0;
		if ((rc = tok_buf_put(&joined, a, na)) || (rc = tok_buf_put(&joined, b, nb)))
			break;
		inew = tok_strmap_get(&m->map, joined.p, joined.n);
		if (inew < 0) {
			rc = tok_errf(err, errlen, -EINVAL, "model.merges[%zu]: the merged token '%.*s' is not in the vocabulary",
				      i, (int)(joined.n > 200 ? 200 : joined.n), joined.p);
			break;
		}
		/* a repeated pair takes the later rank, as tokenizers' map does */
		s = (struct merge_slot *)merge_find(m, ia, ib);
		s->key = ((uint64_t)(uint32_t)ia << 32 | (uint32_t)ib) + 1;
		s->rank = (uint32_t)i;
		s->id = inew;
	}
	free(joined.p);
	return rc;
}

int tok_model_new(const struct spyre_json_node *j, struct tok_model **out, char *err, size_t errlen)
{
	const struct spyre_json_node *type = spyre_json_get(j, "type"), *v;
	struct tok_model *m;
	const char *ts = type ? spyre_json_string(type, NULL) : NULL;
	char *unk = NULL;
	int rc;

	*out = NULL;
	if (!j || spyre_json_type(j) != SPYRE_JSON_OBJECT)
		return tok_errf(err, errlen, -EINVAL, "model: expected an object");
	if (!(m = calloc(1, sizeof(*m))))
		return -ENOMEM;
	m->unk = -1;
	m->max_id = -1;
	if (!ts) {
		/* tokenizers guesses BPE from "merges", WordPiece otherwise from "continuing_subword_prefix"... */
		if (spyre_json_get(j, "merges"))
			ts = "BPE";
		else
			ts = "?";
	}
	if (!strcmp(ts, "BPE"))
		m->type = MODEL_BPE;
	else if (!strcmp(ts, "WordPiece"))
		m->type = MODEL_WORDPIECE;
	else {
		rc = tok_errf(err, errlen, -EOPNOTSUPP, "model.type '%s' is not supported (BPE and WordPiece are)", ts);
		goto fail;
	}
	if ((rc = load_vocab(m, spyre_json_get(j, "vocab"), err, errlen)))
		goto fail;
	if ((rc = opt_string(j, "unk_token", &unk, NULL, err, errlen)) ||
	    (rc = opt_string(j, "continuing_subword_prefix", &m->prefix, &m->prefix_len, err, errlen)))
		goto fail;
	if (unk) {
		m->unk = tok_strmap_get(&m->map, unk, strlen(unk));
		if (m->unk < 0 && m->type == MODEL_WORDPIECE) {
			rc = tok_errf(err, errlen, -EINVAL, "model.unk_token '%s' is not in the vocabulary", unk);
			goto fail;
		}
	}
	if (m->type == MODEL_WORDPIECE) {
		uint64_t mc = 100;

		if (!unk) {
			rc = tok_errf(err, errlen, -EINVAL, "model.unk_token: WordPiece needs one");
			goto fail;
		}
		if (!m->prefix && !(m->prefix = strdup("##"))) {
			rc = -ENOMEM;
			goto fail;
		}
		m->prefix_len = strlen(m->prefix);
		v = spyre_json_get(j, "max_input_chars_per_word");
		if (v && spyre_json_u64(v, &mc)) {
			rc = tok_errf(err, errlen, -EINVAL, "model.max_input_chars_per_word: expected an integer");
			goto fail;
		}
		m->max_chars = mc > SIZE_MAX ? SIZE_MAX : (size_t)mc;
	} else {
		double dropout = 0;

		v = spyre_json_get(j, "dropout");
		if (v && spyre_json_type(v) != SPYRE_JSON_NULL && (spyre_json_number(v, &dropout) || dropout != 0)) {
			rc = tok_errf(err, errlen, -EOPNOTSUPP, "model.dropout: BPE dropout is random; only null or 0");
			goto fail;
		}
		if ((rc = opt_string(j, "end_of_word_suffix", &m->suffix, &m->suffix_len, err, errlen)) ||
		    (rc = opt_bool(j, "fuse_unk", &m->fuse_unk, err, errlen)) ||
		    (rc = opt_bool(j, "byte_fallback", &m->byte_fallback, err, errlen)) ||
		    (rc = opt_bool(j, "ignore_merges", &m->ignore_merges, err, errlen)) ||
		    (rc = load_merges(m, spyre_json_get(j, "merges"), err, errlen)))
			goto fail;
		for (int b = 0; b < 256; b++) {
			char name[8];

			snprintf(name, sizeof(name), "<0x%02X>", b);
			m->byte_ids[b] = tok_strmap_get(&m->map, name, 6);
		}
	}
	free(unk);
	*out = m;
	return 0;
fail:
	free(unk);
	tok_model_free(m);
	return rc;
}

/* ---- BPE ---- */

struct symbol {
	int32_t id;
	int32_t prev, next;	/* -1: none */
	uint32_t len;		/* bytes of the word; 0: merged away */
};

struct merge_item {
	uint32_t rank;
	uint32_t pos;
	int32_t id;
};

static bool item_less(const struct merge_item *a, const struct merge_item *b)
{
	return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

struct heap {
	struct merge_item *v;
	size_t n, cap;
};

static int heap_push(struct heap *h, struct merge_item it)
{
	size_t i;

	if (h->n == h->cap) {
		size_t c = h->cap ? h->cap * 2 : 64;
		struct merge_item *q = realloc(h->v, c * sizeof(*q));

		if (!q)
			return -ENOMEM;
		h->v = q;
		h->cap = c;
	}
	i = h->n++;
	while (i > 0) {
		size_t p = (i - 1) / 2;

		if (!item_less(&it, &h->v[p]))
			break;
		h->v[i] = h->v[p];
		i = p;
	}
	h->v[i] = it;
	return 0;
}

static struct merge_item heap_pop(struct heap *h)
{
	struct merge_item top = h->v[0], last = h->v[--h->n];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= h->n)
			break;
		if (c + 1 < h->n && item_less(&h->v[c + 1], &h->v[c]))
			c++;
		if (!item_less(&h->v[c], &last))
			break;
		h->v[i] = h->v[c];
		i = c;
	}
	if (h->n)
		h->v[i] = last;
	return top;
}

static int push_pair(const struct tok_model *m, struct heap *h, const struct symbol *sy, int32_t pos)
{
	int32_t next = sy[pos].next;
	const struct merge_slot *s;

	if (next < 0)
		return 0;
	s = merge_find(m, sy[pos].id, sy[next].id);
	if (!s->key)
		return 0;
	return heap_push(h, (struct merge_item){ s->rank, (uint32_t)pos, s->id });
}

static int bpe_add(struct symbol **sy, size_t *n, size_t *cap, int32_t id, size_t len)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 32;
		struct symbol *q = realloc(*sy, c * sizeof(*q));

		if (!q)
			return -ENOMEM;
		*sy = q;
		*cap = c;
	}
	(*sy)[*n] = (struct symbol){ id, (int32_t)*n - 1, -1, (uint32_t)len };
	if (*n)
		(*sy)[*n - 1].next = (int32_t)*n;
	(*n)++;
	return 0;
}

static int bpe_tokenize(const struct tok_model *m, const char *s, size_t n, struct tok_ids *out)
{
	struct symbol *sy = NULL;
	size_t ns = 0, cap = 0, i = 0;
	struct heap h = { 0 };
	struct tok_buf tmp = { 0 };
	int32_t unk_id = -1;
	size_t unk_len = 0;
	int rc = 0;

	if (!n)
		return 0;
	if (n > INT32_MAX / 2)
		return -E2BIG;
	if (m->ignore_merges) {
		int32_t id = tok_strmap_get(&m->map, s, n);

		if (id >= 0)
			return tok_ids_push(out, id);
	}
	while (i < n && !rc) {
		size_t start = i, clen;
		int32_t id;
		const char *key = s + start;
		size_t klen;

		tok_utf8_next(s, &i);
		clen = i - start;
		klen = clen;
		if ((start > 0 && m->prefix) || (i == n && m->suffix)) {
			tmp.n = 0;
			if ((start > 0 && m->prefix && (rc = tok_buf_put(&tmp, m->prefix, m->prefix_len))) ||
			    (rc = tok_buf_put(&tmp, key, clen)) ||
			    (i == n && m->suffix && (rc = tok_buf_put(&tmp, m->suffix, m->suffix_len))))
				break;
			key = tmp.p;
			klen = tmp.n;
		}
		id = tok_strmap_get(&m->map, key, klen);
		if (id >= 0) {
			if (unk_id >= 0) {
				rc = bpe_add(&sy, &ns, &cap, unk_id, unk_len);
				unk_id = -1;
				if (rc)
					break;
			}
			rc = bpe_add(&sy, &ns, &cap, id, clen);
			continue;
		}
		if (m->byte_fallback) {
			bool all = true;

			for (size_t k = 0; k < klen; k++)
				all = all && m->byte_ids[(unsigned char)key[k]] >= 0;
			if (all) {
				for (size_t k = 0; k < klen && !rc; k++)
					rc = bpe_add(&sy, &ns, &cap, m->byte_ids[(unsigned char)key[k]], 1);
				continue;
			}
		}
		if (m->unk >= 0) {
			if (unk_id >= 0 && m->fuse_unk) {
				unk_len += clen;
			} else {
				if (unk_id >= 0 && (rc = bpe_add(&sy, &ns, &cap, unk_id, unk_len)))
					break;
				unk_id = m->unk;
				unk_len = clen;
			}
		}
		/* no unk_token: the character is dropped, as tokenizers does */
	}
	if (!rc && unk_id >= 0)
		rc = bpe_add(&sy, &ns, &cap, unk_id, unk_len);
	for (size_t k = 0; k + 1 < ns && !rc; k++)
		rc = push_pair(m, &h, sy, (int32_t)k);
	while (!rc && h.n) {
		struct merge_item top = heap_pop(&h);
		struct symbol *cur = &sy[top.pos];
		int32_t nx;
		const struct merge_slot *ms;

		if (!cur->len || cur->next < 0)
			continue;
		nx = cur->next;
		ms = merge_find(m, cur->id, sy[nx].id);
		if (!ms->key || ms->id != top.id)
			continue;	/* a stale entry */
		cur->id = top.id;
		cur->len += sy[nx].len;
		cur->next = sy[nx].next;
		sy[nx].len = 0;
		if (cur->next >= 0)
			sy[cur->next].prev = (int32_t)top.pos;
		if (cur->prev >= 0)
			rc = push_pair(m, &h, sy, cur->prev);
		if (!rc)
			rc = push_pair(m, &h, sy, (int32_t)top.pos);
	}
	for (size_t k = 0; k < ns && !rc; k++)
		if (sy[k].len)
			rc = tok_ids_push(out, sy[k].id);
	free(sy);
	free(h.v);
	free(tmp.p);
	return rc;
}

/* ---- WordPiece ---- */

static int wordpiece_tokenize(const struct tok_model *m, const char *s, size_t n, struct tok_ids *out)
{
	size_t chars = 0, start = 0, mark = out->n;
	struct tok_buf tmp = { 0 };
	int rc = 0;

	for (size_t i = 0; i < n && chars <= m->max_chars; chars++)
		tok_utf8_next(s, &i);
	if (chars > m->max_chars)
		return tok_ids_push(out, m->unk);
	while (start < n) {
		size_t end = n;
		int32_t id = -1;

		while (start < end) {
			tmp.n = 0;
			if ((start > 0 && (rc = tok_buf_put(&tmp, m->prefix, m->prefix_len))) ||
			    (rc = tok_buf_put(&tmp, s + start, end - start)))
				goto out;
			id = tok_strmap_get(&m->map, tmp.p, tmp.n);
			if (id >= 0)
				break;
			/* back one character */
			do
				end--;
			while (end > start && ((unsigned char)s[end] & 0xc0) == 0x80);
		}
		if (id < 0) {
			out->n = mark;
			rc = tok_ids_push(out, m->unk);
			goto out;
		}
		if ((rc = tok_ids_push(out, id)))
			goto out;
		start = end;
	}
out:
	free(tmp.p);
	return rc;
}

int tok_model_tokenize(const struct tok_model *m, const char *s, size_t n, struct tok_ids *out)
{
	return m->type == MODEL_BPE ? bpe_tokenize(m, s, n, out) : wordpiece_tokenize(m, s, n, out);
}
