// SPDX-License-Identifier: MIT
/*
 * tokenizer_text.c - the normalizers and pre-tokenizers of tokenizer.json,
 * as Hugging Face `tokenizers` runs them.
 *
 * Normalizers: BertNormalizer, Lowercase, NFD, StripAccents, Strip, Prepend,
 * Replace (a literal pattern), Sequence. Pre-tokenizers: ByteLevel (with
 * GPT-2's pattern), Split (a literal pattern, or one of the known regular
 * expressions below: every behavior, invert), BertPreTokenizer, Whitespace,
 * WhitespaceSplit, Digits, Punctuation, Sequence.
 *
 * tokenizers runs Split's patterns with Oniguruma. Rather than a regular
 * expression engine, the patterns that real tokenizers use are recognized by
 * their exact text and each has a scanner written out here over Unicode
 * categories (ordered alternation, greedy quantifiers and the look-ahead of
 * `\s+(?!\S)` reproduced by hand). Any other pattern is refused at load.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"

/* ---- normalizers ---- */

enum { N_BERT, N_LOWER, N_NFD, N_STRIP_ACCENTS, N_STRIP, N_PREPEND, N_REPLACE, N_SEQ };

struct tok_norm {
	int type;
	bool clean_text, chinese, strip_accents, lowercase;	/* BertNormalizer */
	bool left, right;					/* Strip */
	char *a, *b;						/* Prepend (a), Replace (a -> b) */
	size_t na, nb;
	struct tok_norm **sub;					/* Sequence */
	size_t nsub;
};

void tok_norm_free(struct tok_norm *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->nsub; i++)
		tok_norm_free(n->sub[i]);
	free(n->sub);
	free(n->a);
	free(n->b);
	free(n);
}

static int get_bool(const struct spyre_json_node *o, const char *key, bool def, bool *out, const char *where,
		    char *err, size_t errlen)
{
	const struct spyre_json_node *v = spyre_json_get(o, key);

	*out = def;
	if (!v || spyre_json_type(v) == SPYRE_JSON_NULL)
		return 0;
	if (spyre_json_bool(v, out))
		return tok_errf(err, errlen, -EINVAL, "%s.%s: expected a boolean", where, key);
	return 0;
}

static int get_str(const struct spyre_json_node *o, const char *key, char **out, size_t *len, const char *where,
		   char *err, size_t errlen)
{
	const struct spyre_json_node *v = spyre_json_get(o, key);
	const char *s = v ? spyre_json_string(v, len) : NULL;

	if (!s)
		return tok_errf(err, errlen, -EINVAL, "%s.%s: expected a string", where, key);
	if (!(*out = malloc(*len + 1)))
		return -ENOMEM;
	memcpy(*out, s, *len + 1);
	return 0;
}

/* A {"String": s} or {"Regex": r} pattern: the literal, or -EOPNOTSUPP for a regex we do not know. */
static const struct spyre_json_node *pattern_of(const struct spyre_json_node *o, bool *is_regex)
{
	const struct spyre_json_node *p = spyre_json_get(o, "pattern"), *v;

	*is_regex = false;
	if (!p || spyre_json_type(p) != SPYRE_JSON_OBJECT || spyre_json_count(p) != 1)
		return NULL;
	if ((v = spyre_json_get(p, "String")) && spyre_json_string(v, NULL))
		return v;
	if ((v = spyre_json_get(p, "Regex")) && spyre_json_string(v, NULL)) {
		*is_regex = true;
		return v;
	}
	return NULL;
}

int tok_norm_new(const struct spyre_json_node *v, struct tok_norm **out, char *err, size_t errlen)
{
	const struct spyre_json_node *t = spyre_json_get(v, "type");
	const char *ts = t ? spyre_json_string(t, NULL) : NULL;
	struct tok_norm *n;
	int rc = 0;

	*out = NULL;
	if (!v || spyre_json_type(v) == SPYRE_JSON_NULL)
		return 0;
	if (!ts)
		return tok_errf(err, errlen, -EINVAL, "normalizer: expected an object with a \"type\"");
	if (!(n = calloc(1, sizeof(*n))))
		return -ENOMEM;
	if (!strcmp(ts, "BertNormalizer")) {
		const struct spyre_json_node *sa = spyre_json_get(v, "strip_accents");

		n->type = N_BERT;
		if ((rc = get_bool(v, "clean_text", true, &n->clean_text, ts, err, errlen)) ||
		    (rc = get_bool(v, "handle_chinese_chars", true, &n->chinese, ts, err, errlen)) ||
		    (rc = get_bool(v, "lowercase", true, &n->lowercase, ts, err, errlen)))
			goto fail;
		/* strip_accents: null follows lowercase */
		if ((rc = get_bool(v, "strip_accents", n->lowercase, &n->strip_accents, ts, err, errlen)))
			goto fail;
		(void)sa;
	} else if (!strcmp(ts, "Lowercase")) {
		n->type = N_LOWER;
	} else if (!strcmp(ts, "NFD")) {
		n->type = N_NFD;
	} else if (!strcmp(ts, "StripAccents")) {
		n->type = N_STRIP_ACCENTS;
	} else if (!strcmp(ts, "Strip")) {
		n->type = N_STRIP;
		if ((rc = get_bool(v, "strip_left", true, &n->left, ts, err, errlen)) ||
		    (rc = get_bool(v, "strip_right", true, &n->right, ts, err, errlen)))
			goto fail;
	} else if (!strcmp(ts, "Prepend")) {
		n->type = N_PREPEND;
		if ((rc = get_str(v, "prepend", &n->a, &n->na, ts, err, errlen)))
			goto fail;
	} else if (!strcmp(ts, "Replace")) {
		bool rx;
		const struct spyre_json_node *p = pattern_of(v, &rx);
		const char *ps;

		n->type = N_REPLACE;
		if (!p || rx || !(ps = spyre_json_string(p, &n->na)) || !n->na) {
			rc = tok_errf(err, errlen, -EOPNOTSUPP,
				      "normalizer Replace: only a non-empty {\"String\": ...} pattern is supported");
			goto fail;
		}
		if (!(n->a = malloc(n->na + 1))) {
			rc = -ENOMEM;
			goto fail;
		}
		memcpy(n->a, ps, n->na + 1);
		if ((rc = get_str(v, "content", &n->b, &n->nb, ts, err, errlen)))
			goto fail;
	} else if (!strcmp(ts, "Sequence")) {
		const struct spyre_json_node *arr = spyre_json_get(v, "normalizers");

		n->type = N_SEQ;
		if (!arr || spyre_json_type(arr) != SPYRE_JSON_ARRAY) {
			rc = tok_errf(err, errlen, -EINVAL, "normalizer Sequence: expected \"normalizers\": [...]");
			goto fail;
		}
		if (!(n->sub = calloc(spyre_json_count(arr) + 1, sizeof(*n->sub)))) {
			rc = -ENOMEM;
			goto fail;
		}
		for (size_t i = 0; i < spyre_json_count(arr); i++) {
			if ((rc = tok_norm_new(spyre_json_at(arr, i, NULL), &n->sub[n->nsub], err, errlen)))
				goto fail;
			if (n->sub[n->nsub])
				n->nsub++;
		}
	} else {
		rc = tok_errf(err, errlen, -EOPNOTSUPP,
			      "normalizer '%s' is not supported (BertNormalizer, Lowercase, NFD, StripAccents, Strip, "
			      "Prepend, Replace, Sequence are)", ts);
		goto fail;
	}
	*out = n;
	return 0;
fail:
	tok_norm_free(n);
	return rc;
}

static bool is_chinese(uint32_t c)
{
	return (c >= 0x4e00 && c <= 0x9fff) || (c >= 0x3400 && c <= 0x4dbf) || (c >= 0x20000 && c <= 0x2a6df) ||
	       (c >= 0x2a700 && c <= 0x2b73f) || (c >= 0x2b740 && c <= 0x2b81f) || (c >= 0x2b920 && c <= 0x2ceaf) ||
	       (c >= 0xf900 && c <= 0xfaff) || (c >= 0x2f800 && c <= 0x2fa1f);
}

/* One normalizer, @s -> @out (emptied first). */
static int norm_one(const struct tok_norm *nm, const char *s, size_t n, struct tok_buf *out)
{
	struct tok_buf tmp = { 0 };
	size_t i = 0;
	int rc = 0;

	out->n = 0;
	switch (nm->type) {
	case N_BERT: {
		struct tok_buf a = { 0 };

		/* clean_text and handle_chinese_chars in one pass */
		while (i < n && !rc) {
			uint32_t c = tok_utf8_next(s, &i);

			if (nm->clean_text) {
				if (c == 0 || c == 0xfffd || (c != '\t' && c != '\n' && c != '\r' && tok_is_other(c)))
					continue;
				if (tok_is_space(c))
					c = ' ';
			}
			if (nm->chinese && is_chinese(c)) {
				if (!(rc = tok_buf_put(&a, " ", 1)) && !(rc = tok_buf_put_cp(&a, c)))
					rc = tok_buf_put(&a, " ", 1);
			} else {
				rc = tok_buf_put_cp(&a, c);
			}
		}
		if (!rc && a.n && nm->strip_accents) {
			if (!(rc = tok_nfd(a.p, a.n, &tmp))) {
				a.n = 0;
				for (i = 0; i < tmp.n && !rc;) {
					uint32_t c = tok_utf8_next(tmp.p, &i);

					if (!tok_is_mn(c))
						rc = tok_buf_put_cp(&a, c);
				}
			}
		}
		for (i = 0; i < a.n && !rc;) {
			uint32_t c = tok_utf8_next(a.p, &i), lo[3];
			int k = nm->lowercase ? tok_lower(c, lo) : (lo[0] = c, 1);

			for (int j = 0; j < k && !rc; j++)
				rc = tok_buf_put_cp(out, lo[j]);
		}
		free(a.p);
		break;
	}
	case N_LOWER:
		while (i < n && !rc) {
			uint32_t lo[3];
			int k = tok_lower(tok_utf8_next(s, &i), lo);

			for (int j = 0; j < k && !rc; j++)
				rc = tok_buf_put_cp(out, lo[j]);
		}
		break;
	case N_NFD:
		rc = tok_nfd(s, n, out);
		break;
	case N_STRIP_ACCENTS:
		while (i < n && !rc) {
			uint32_t c = tok_utf8_next(s, &i);

			if (!tok_is_mark(c))
				rc = tok_buf_put_cp(out, c);
		}
		break;
	case N_STRIP: {
		size_t b = 0, e = n;

		if (nm->left)
			while (b < e) {
				size_t j = b;

				if (!tok_is_space(tok_utf8_next(s, &j)))
					break;
				b = j;
			}
		if (nm->right)
			while (e > b) {
				size_t j = e - 1;

				while (j > b && ((unsigned char)s[j] & 0xc0) == 0x80)
					j--;
				size_t k = j;

				if (!tok_is_space(tok_utf8_next(s, &k)))
					break;
				e = j;
			}
		rc = tok_buf_put(out, s + b, e - b);
		break;
	}
	case N_PREPEND:
		if (n)
			rc = tok_buf_put(out, nm->a, nm->na);
		if (!rc)
			rc = tok_buf_put(out, s, n);
		break;
	case N_REPLACE:
		while (i < n && !rc) {
			if (n - i >= nm->na && !memcmp(s + i, nm->a, nm->na)) {
				rc = tok_buf_put(out, nm->b, nm->nb);
				i += nm->na;
			} else {
				rc = tok_buf_put(out, s + i, 1);
				i++;
			}
		}
		break;
	case N_SEQ:
		rc = tok_buf_put(out, s, n);
		for (size_t k = 0; k < nm->nsub && !rc; k++) {
			struct tok_buf t;

			rc = norm_one(nm->sub[k], out->p, out->n, &tmp);
			t = *out;
			*out = tmp;
			tmp = t;
		}
		break;
	}
	if (!rc)
		rc = tok_buf_put(out, "", 0);	/* a NUL, and a buffer even when empty */
	free(tmp.p);
	return rc;
}

int tok_norm_apply(const struct tok_norm *nm, const char *s, size_t n, struct tok_buf *out)
{
	if (!nm) {
		out->n = 0;
		return tok_buf_put(out, s, n);
	}
	return norm_one(nm, s, n, out);
}

/* ---- pre-tokenizers ---- */

enum { P_BYTELEVEL, P_SPLIT, P_WHITESPACE, P_WSSPLIT, P_DIGITS, P_PUNCT };
enum { B_REMOVED, B_ISOLATED, B_PREV, B_NEXT, B_CONTIG };
enum { RX_LITERAL, RX_GPT2, RX_LLAMA3, RX_QWEN2 };

/* The patterns, as they are written in tokenizer.json files (after JSON unescaping). */
static const struct {
	const char *text;
	int kind;
} known_patterns[] = {
	/* GPT-2 (ByteLevel's own; also as a Split) */
	{ "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+", RX_GPT2 },
	/* Llama 3 and GPT-4 (cl100k) */
	{ "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
	  "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", RX_LLAMA3 },
	/* Qwen2: the same with single digits */
	{ "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
	  "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", RX_QWEN2 },
};

struct tok_stage {
	int type;
	int behavior;
	bool invert;
	bool prefix_space, use_regex;	/* ByteLevel */
	bool individual;		/* Digits */
	int kind;			/* Split */
	char *lit;
	size_t nlit;
};

struct tok_pretok {
	struct tok_stage *st;
	size_t n, cap;
};

void tok_pretok_free(struct tok_pretok *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n; i++)
		free(p->st[i].lit);
	free(p->st);
	free(p);
}

static int add_stage(struct tok_pretok *p, struct tok_stage st)
{
	if (p->n == p->cap) {
		size_t c = p->cap ? p->cap * 2 : 4;
		struct tok_stage *q = realloc(p->st, c * sizeof(*q));

		if (!q)
			return -ENOMEM;
		p->st = q;
		p->cap = c;
	}
	p->st[p->n++] = st;
	return 0;
}

static int get_behavior(const struct spyre_json_node *v, int def, int *out, const char *where, char *err, size_t errlen)
{
	static const char *const names[] = { "Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous" };
	const struct spyre_json_node *b = spyre_json_get(v, "behavior");
	const char *s;

	*out = def;
	if (!b)
		return 0;
	if ((s = spyre_json_string(b, NULL)))
		for (int i = 0; i < 5; i++)
			if (!strcmp(s, names[i])) {
				*out = i;
				return 0;
			}
	return tok_errf(err, errlen, -EINVAL, "%s.behavior: expected one of Removed, Isolated, MergedWithPrevious, "
			"MergedWithNext, Contiguous", where);
}

static int pretok_parse(struct tok_pretok *p, const struct spyre_json_node *v, int depth, char *err, size_t errlen)
{
	const struct spyre_json_node *t = spyre_json_get(v, "type");
	const char *ts = t ? spyre_json_string(t, NULL) : NULL;
	struct tok_stage st = { 0 };
	int rc;

	if (!ts)
		return tok_errf(err, errlen, -EINVAL, "pre_tokenizer: expected an object with a \"type\"");
	if (!strcmp(ts, "Sequence")) {
		const struct spyre_json_node *arr = spyre_json_get(v, "pretokenizers");

		if (!arr || spyre_json_type(arr) != SPYRE_JSON_ARRAY)
			return tok_errf(err, errlen, -EINVAL, "pre_tokenizer Sequence: expected \"pretokenizers\": [...]");
		if (depth > 8)
			return tok_errf(err, errlen, -EINVAL, "pre_tokenizer: Sequences nested too deep");
		for (size_t i = 0; i < spyre_json_count(arr); i++)
			if ((rc = pretok_parse(p, spyre_json_at(arr, i, NULL), depth + 1, err, errlen)))
				return rc;
		return 0;
	}
	if (!strcmp(ts, "ByteLevel")) {
		st.type = P_BYTELEVEL;
		if ((rc = get_bool(v, "add_prefix_space", true, &st.prefix_space, ts, err, errlen)) ||
		    (rc = get_bool(v, "use_regex", true, &st.use_regex, ts, err, errlen)))
			return rc;
	} else if (!strcmp(ts, "BertPreTokenizer")) {
		/* whitespace removed, then each punctuation character isolated */
		if ((rc = add_stage(p, (struct tok_stage){ .type = P_WSSPLIT })))
			return rc;
		st.type = P_PUNCT;
		st.behavior = B_ISOLATED;
	} else if (!strcmp(ts, "Whitespace")) {
		st.type = P_WHITESPACE;
	} else if (!strcmp(ts, "WhitespaceSplit")) {
		st.type = P_WSSPLIT;
	} else if (!strcmp(ts, "Digits")) {
		st.type = P_DIGITS;
		if ((rc = get_bool(v, "individual_digits", false, &st.individual, ts, err, errlen)))
			return rc;
	} else if (!strcmp(ts, "Punctuation")) {
		st.type = P_PUNCT;
		if ((rc = get_behavior(v, B_ISOLATED, &st.behavior, ts, err, errlen)))
			return rc;
	} else if (!strcmp(ts, "Split")) {
		bool rx;
		const struct spyre_json_node *pat = pattern_of(v, &rx);
		const char *ps;
		size_t pn;

		st.type = P_SPLIT;
		if (!pat)
			return tok_errf(err, errlen, -EINVAL, "pre_tokenizer Split: expected \"pattern\": {\"String\" or \"Regex\": ...}");
		ps = spyre_json_string(pat, &pn);
		if ((rc = get_behavior(v, B_ISOLATED, &st.behavior, ts, err, errlen)) ||
		    (rc = get_bool(v, "invert", false, &st.invert, ts, err, errlen)))
			return rc;
		if (rx) {
			st.kind = -1;
			for (size_t i = 0; i < sizeof(known_patterns) / sizeof(known_patterns[0]); i++)
				if (strlen(known_patterns[i].text) == pn && !memcmp(known_patterns[i].text, ps, pn))
					st.kind = known_patterns[i].kind;
			if (st.kind < 0)
				return tok_errf(err, errlen, -EOPNOTSUPP,
						"pre_tokenizer Split: the regular expression '%.*s' is not one this tokenizer "
						"knows (GPT-2's, Llama 3's / GPT-4's, Qwen2's)", (int)(pn > 300 ? 300 : pn), ps);
		} else {
			if (!pn)
				return tok_errf(err, errlen, -EINVAL, "pre_tokenizer Split: an empty pattern");
			st.kind = RX_LITERAL;
			if (!(st.lit = malloc(pn + 1)))
				return -ENOMEM;
			memcpy(st.lit, ps, pn + 1);
			st.nlit = pn;
		}
	} else {
		return tok_errf(err, errlen, -EOPNOTSUPP,
				"pre_tokenizer '%s' is not supported (ByteLevel, Split, BertPreTokenizer, Whitespace, "
				"WhitespaceSplit, Digits, Punctuation, Sequence are)", ts);
	}
	rc = add_stage(p, st);
	if (rc)
		free(st.lit);
	return rc;
}

int tok_pretok_new(const struct spyre_json_node *v, struct tok_pretok **out, char *err, size_t errlen)
{
	struct tok_pretok *p;
	int rc;

	*out = NULL;
	if (!v || spyre_json_type(v) == SPYRE_JSON_NULL)
		return 0;
	if (!(p = calloc(1, sizeof(*p))))
		return -ENOMEM;
	if ((rc = pretok_parse(p, v, 0, err, errlen))) {
		tok_pretok_free(p);
		return rc;
	}
	*out = p;
	return 0;
}

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the others for U+0100 on. */
static bool byte_is_printable(unsigned b)
{
	return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
}

uint32_t tok_byte_to_cp(uint8_t b)
{
	unsigned k = 0;

	if (byte_is_printable(b))
		return b;
	for (unsigned x = 0; x < b; x++)
		k += !byte_is_printable(x);
	return 0x100 + k;
}

int tok_cp_to_byte(uint32_t cp)
{
	static int16_t rev[0x144];
	static int ready;

	if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) {
		int16_t r[0x144];

		for (int i = 0; i < 0x144; i++)
			r[i] = -1;
		for (int b = 0; b < 256; b++)
			r[tok_byte_to_cp((uint8_t)b)] = (int16_t)b;
		/* every thread writes the same values */
		for (int i = 0; i < 0x144; i++)
			__atomic_store_n(&rev[i], r[i], __ATOMIC_RELAXED);
		__atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
	}
	return cp < 0x144 ? rev[cp] : -1;
}

/* A piece of text as characters with their byte offsets. */
struct chars {
	uint32_t *c;
	size_t *off;	/* n + 1 entries */
	size_t n;
};

static int chars_of(const char *s, size_t n, struct chars *ch)
{
	size_t i = 0;

	ch->n = 0;
	ch->c = malloc((n + 1) * sizeof(*ch->c));
	ch->off = malloc((n + 1) * sizeof(*ch->off));
	if (!ch->c || !ch->off)
		return -ENOMEM;
	while (i < n) {
		ch->off[ch->n] = i;
		ch->c[ch->n++] = tok_utf8_next(s, &i);
	}
	ch->off[ch->n] = n;
	ch->c[ch->n] = 0;
	return 0;
}

static void chars_free(struct chars *ch)
{
	free(ch->c);
	free(ch->off);
}

static bool is_crlf(uint32_t c)
{
	return c == '\r' || c == '\n';
}

/* [^\s\p{L}\p{N}] */
static bool is_sym(uint32_t c)
{
	return !tok_is_space(c) && !tok_is_letter(c) && !tok_is_number(c);
}

static size_t run_of(const uint32_t *c, size_t i, size_t n, bool (*pred)(uint32_t))
{
	while (i < n && pred(c[i]))
		i++;
	return i;
}

/* 's 't 're 've 'm 'll 'd at c[i] ('): the end, or 0. @fold: (?i:...) */
static size_t contraction(const uint32_t *c, size_t i, size_t n, bool fold)
{
	static const char *const tails[] = { "s", "t", "re", "ve", "m", "ll", "d" };

	if (c[i] != '\'')
		return 0;
	for (int t = 0; t < 7; t++) {
		size_t k = 0, len = strlen(tails[t]);

		for (; k < len && i + 1 + k < n; k++) {
			uint32_t x = c[i + 1 + k];

			if (fold) {
				if (x >= 'A' && x <= 'Z')
					x += 32;
				else if (x == 0x17f)	/* LATIN SMALL LETTER LONG S folds to s */
					x = 's';
			}
			if (x != (uint32_t)tails[t][k])
				break;
		}
		if (k == len)
			return i + 1 + len;
	}
	return 0;
}

/* \s+(?!\S) then \s+ at a whitespace character c[i] */
static size_t space_run(const uint32_t *c, size_t i, size_t n)
{
	size_t k = run_of(c, i, n, tok_is_space);

	if (k == n || k - 1 == i)
		return k;	/* to the end; or one character: \s+(?!\S) fails, \s+ takes it */
	return k - 1;		/* leave the last one to the next word */
}

static size_t scan_gpt2(const uint32_t *c, size_t i, size_t n)
{
	size_t j = i + (c[i] == ' '), k;

	if ((k = contraction(c, i, n, false)))
		return k;
	if (j < n && tok_is_letter(c[j]))
		return run_of(c, j, n, tok_is_letter);
	if (j < n && tok_is_number(c[j]))
		return run_of(c, j, n, tok_is_number);
	if (j < n && is_sym(c[j]))
		return run_of(c, j, n, is_sym);
	if (tok_is_space(c[i]))
		return space_run(c, i, n);
	return i + 1;
}

static size_t scan_llama3(const uint32_t *c, size_t i, size_t n, size_t digits)
{
	size_t j, k;

	if ((k = contraction(c, i, n, true)))
		return k;
	/* [^\r\n\p{L}\p{N}]?\p{L}+ */
	if (tok_is_letter(c[i]))
		return run_of(c, i, n, tok_is_letter);
	if (!is_crlf(c[i]) && !tok_is_number(c[i]) && i + 1 < n && tok_is_letter(c[i + 1]))
		return run_of(c, i + 1, n, tok_is_letter);
	/* \p{N}{1,digits} */
	if (tok_is_number(c[i])) {
		for (k = i; k < n && k - i < digits && tok_is_number(c[k]); k++)
			;
		return k;
	}
	/*  ?[^\s\p{L}\p{N}]+[\r\n]* */
	j = i + (c[i] == ' ');
	if (j < n && is_sym(c[j]))
		return run_of(c, run_of(c, j, n, is_sym), n, is_crlf);
	if (tok_is_space(c[i])) {
		/* \s*[\r\n]+: to the last newline of the whitespace run */
		size_t e = run_of(c, i, n, tok_is_space), last = n;

		for (k = i; k < e; k++)
			if (is_crlf(c[k]))
				last = k;
		if (last != n)
			return last + 1;
		return space_run(c, i, n);
	}
	return i + 1;
}

struct span {
	size_t s, e;
	bool m;
};

struct spans {
	struct span *v;
	size_t n, cap;
};

static int span_push(struct spans *sp, size_t s, size_t e, bool m)
{
	if (s == e)
		return 0;
	/* the text between two matches is one piece */
	if (!m && sp->n && !sp->v[sp->n - 1].m && sp->v[sp->n - 1].e == s) {
		sp->v[sp->n - 1].e = e;
		return 0;
	}
	if (sp->n == sp->cap) {
		size_t c = sp->cap ? sp->cap * 2 : 64;
		struct span *q = realloc(sp->v, c * sizeof(*q));

		if (!q)
			return -ENOMEM;
		sp->v = q;
		sp->cap = c;
	}
	sp->v[sp->n++] = (struct span){ s, e, m };
	return 0;
}

static bool is_bert_punct(uint32_t c)
{
	return (c >= 0x21 && c <= 0x2f) || (c >= 0x3a && c <= 0x40) || (c >= 0x5b && c <= 0x60) ||
	       (c >= 0x7b && c <= 0x7e) || tok_is_punct(c);
}

static bool not_word_not_space(uint32_t c)
{
	return !tok_is_word(c) && !tok_is_space(c);
}

/* The stage's matches over @s as spans covering it, m set on matches. */
static int find_matches(const struct tok_stage *st, const char *s, size_t n, struct spans *out)
{
	struct chars ch = { 0 };
	size_t i = 0, prev = 0;
	int rc = 0;

	out->n = 0;
	if (st->type == P_SPLIT && st->kind == RX_LITERAL) {
		while (i + st->nlit <= n && !rc) {
			if (!memcmp(s + i, st->lit, st->nlit)) {
				if (!(rc = span_push(out, prev, i, false)))
					rc = span_push(out, i, i + st->nlit, true);
				i += st->nlit;
				prev = i;
			} else {
				i++;
			}
		}
		return rc ? rc : span_push(out, prev, n, false);
	}
	if ((rc = chars_of(s, n, &ch)))
		goto out;
	for (i = 0; i < ch.n && !rc;) {
		size_t e = i + 1;
		bool m = true;

		switch (st->type) {
		case P_BYTELEVEL:
			e = scan_gpt2(ch.c, i, ch.n);
			break;
		case P_SPLIT:
			e = st->kind == RX_GPT2 ? scan_gpt2(ch.c, i, ch.n) :
			    scan_llama3(ch.c, i, ch.n, st->kind == RX_LLAMA3 ? 3 : 1);
			break;
		case P_WHITESPACE:	/* \w+|[^\w\s]+, inverted: the matches are kept */
			if (tok_is_word(ch.c[i]))
				e = run_of(ch.c, i, ch.n, tok_is_word);
			else if (!tok_is_space(ch.c[i]))
				e = run_of(ch.c, i, ch.n, not_word_not_space);
			else
				m = false;
			break;
		case P_WSSPLIT:
			m = tok_is_space(ch.c[i]);
			break;
		case P_DIGITS:
			m = tok_is_number(ch.c[i]);
			break;
		case P_PUNCT:
			m = is_bert_punct(ch.c[i]);
			break;
		}
		rc = span_push(out, ch.off[i], ch.off[e], m);
		i = e;
	}
out:
	chars_free(&ch);
	return rc;
}

/* Apply a split behavior in place (tokenizers' NormalizedString::split). */
static void apply_behavior(struct spans *sp, int behavior, bool invert)
{
	size_t k = 0;
	bool prev_m = false;

	if (invert)
		for (size_t i = 0; i < sp->n; i++)
			sp->v[i].m = !sp->v[i].m;
	switch (behavior) {
	case B_ISOLATED:
		return;
	case B_REMOVED:
		for (size_t i = 0; i < sp->n; i++)
			if (!sp->v[i].m)
				sp->v[k++] = sp->v[i];
		break;
	case B_PREV:
		for (size_t i = 0; i < sp->n; i++) {
			bool m = sp->v[i].m;

			if (m && !prev_m && k)
				sp->v[k - 1].e = sp->v[i].e;
			else
				sp->v[k++] = sp->v[i];
			prev_m = m;
		}
		break;
	case B_NEXT:
		/* from the end: a match joins the piece after it */
		k = sp->n;
		for (size_t i = sp->n; i-- > 0;) {
			bool m = sp->v[i].m;

			if (m && !prev_m && k < sp->n)
				sp->v[k].s = sp->v[i].s;
			else
				sp->v[--k] = sp->v[i];
			prev_m = m;
		}
		if (k)
			memmove(sp->v, sp->v + k, (sp->n - k) * sizeof(*sp->v));
		k = sp->n - k;
		break;
	case B_CONTIG:
		for (size_t i = 0; i < sp->n; i++) {
			bool m = sp->v[i].m;

			if (k && m == prev_m)
				sp->v[k - 1].e = sp->v[i].e;
			else
				sp->v[k++] = sp->v[i];
			prev_m = m;
		}
		break;
	}
	sp->n = k;
}

static int run_stages(const struct tok_pretok *p, size_t first, const char *s, size_t n, tok_emit_fn emit, void *ctx)
{
	const struct tok_stage *st;
	struct spans sp = { 0 };
	struct tok_buf pre = { 0 }, mapped = { 0 };
	int rc = 0;

	if (!n)
		return 0;
	if (first == p->n)
		return emit(ctx, s, n);
	st = &p->st[first];
	if (st->type == P_BYTELEVEL) {
		if (st->prefix_space && s[0] != ' ') {
			if ((rc = tok_buf_put(&pre, " ", 1)) || (rc = tok_buf_put(&pre, s, n)))
				goto out;
			s = pre.p;
			n = pre.n;
		}
		if (st->use_regex)
			rc = find_matches(st, s, n, &sp);
		else
			rc = span_push(&sp, 0, n, true);
		for (size_t i = 0; i < sp.n && !rc; i++) {
			mapped.n = 0;
			for (size_t b = sp.v[i].s; b < sp.v[i].e && !rc; b++)
				rc = tok_buf_put_cp(&mapped, tok_byte_to_cp((uint8_t)s[b]));
			if (!rc)
				rc = run_stages(p, first + 1, mapped.p, mapped.n, emit, ctx);
		}
		goto out;
	}
	if ((rc = find_matches(st, s, n, &sp)))
		goto out;
	switch (st->type) {
	case P_SPLIT:
		apply_behavior(&sp, st->behavior, st->invert);
		break;
	case P_WHITESPACE:
	case P_WSSPLIT:
		apply_behavior(&sp, B_REMOVED, st->type == P_WSSPLIT ? false : true);
		break;
	case P_DIGITS:
		apply_behavior(&sp, st->individual ? B_ISOLATED : B_CONTIG, false);
		break;
	case P_PUNCT:
		apply_behavior(&sp, st->behavior, false);
		break;
	}
	for (size_t i = 0; i < sp.n && !rc; i++)
		rc = run_stages(p, first + 1, s + sp.v[i].s, sp.v[i].e - sp.v[i].s, emit, ctx);
out:
	free(sp.v);
	free(pre.p);
	free(mapped.p);
	return rc;
}

int tok_pretok_apply(const struct tok_pretok *p, const char *s, size_t n, tok_emit_fn emit, void *ctx)
{
	if (!p)
		return n ? emit(ctx, s, n) : 0;
	return run_stages(p, 0, s, n, emit, ctx);
}
