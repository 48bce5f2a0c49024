// SPDX-License-Identifier: MIT
/*
 * json.c - a small, strict, bounds-checked JSON parser (json.h).
 *
 * Recursive descent over [text, text + len), depth-limited. Nodes live in one
 * array; a container's children are contiguous in a second array (kids), so
 * spyre_json_at() is O(1); decoded strings and keys live in a byte pool. All
 * three grow with overflow-checked sizes; the node count is capped so hostile
 * input cannot make the parser allocate much more than a few times its size.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

#define JSON_MAX_NODES (1u << 20)
#define JSON_MAX_NUMBER 512	/* characters in one number literal */

enum { F_TRUE = 1, F_U64 = 2, F_MEMBER = 4 };

struct spyre_json_node {
	const struct spyre_json *doc;
	size_t offset;
	size_t key, keylen;	/* a member's key in the pool */
	size_t keypos;		/* and its offset in the text */
	size_t a, n;		/* string: pool offset, length; container: kids offset, count */
	double num;
	uint64_t u64;
	unsigned char type, flags;	/* flags: F_TRUE, F_U64, F_MEMBER */
};

struct spyre_json {
	struct spyre_json_node *nodes;
	size_t nnodes, capnodes;
	size_t *kids;		/* final: children indices, per container contiguous */
	size_t nkids, capkids;
	char *pool;
	size_t npool, cappool;
};

struct parser {
	const unsigned char *p;
	size_t len, pos;
	struct spyre_json *doc;
	size_t *stack;		/* children of the open containers, innermost last */
	size_t nstack, capstack;
	char *err;
	size_t errlen;
	int failed;
};

static int fail(struct parser *ps, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(struct parser *ps, size_t at, const char *fmt, ...)
{
	char msg[200];
	va_list ap;

	if (ps->failed)
		return -1;
	ps->failed = 1;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (ps->err && ps->errlen)
		snprintf(ps->err, ps->errlen, "%s at byte %zu", msg, at);
	return -1;
}

/* Make room for @more elements of @size bytes in *@buf (capacity *@cap). */
static int grow(void **buf, size_t *cap, size_t used, size_t more, size_t size)
{
	size_t want, ncap;
	void *nb;

	if (more > SIZE_MAX - used)
		return -1;
	want = used + more;
	if (want <= *cap)
		return 0;
	ncap = *cap ? *cap : 16;
	while (ncap < want) {
		if (ncap > SIZE_MAX / 2)
			return -1;
		ncap *= 2;
	}
	if (ncap > SIZE_MAX / size)
		return -1;
	nb = realloc(*buf, ncap * size);
	if (!nb)
		return -1;
	*buf = nb;
	*cap = ncap;
	return 0;
}

static int new_node(struct parser *ps, unsigned char type, size_t *idx)
{
	struct spyre_json *d = ps->doc;

	if (d->nnodes >= JSON_MAX_NODES)
		return fail(ps, ps->pos, "too many values (limit %u)", JSON_MAX_NODES);
	if (grow((void **)&d->nodes, &d->capnodes, d->nnodes, 1, sizeof(*d->nodes)))
		return fail(ps, ps->pos, "out of memory");
	*idx = d->nnodes++;
	memset(&d->nodes[*idx], 0, sizeof(d->nodes[*idx]));
	d->nodes[*idx].type = type;
	d->nodes[*idx].offset = ps->pos;
	return 0;
}

static void skip_ws(struct parser *ps)
{
	while (ps->pos < ps->len) {
		unsigned char c = ps->p[ps->pos];

		if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
			break;
		ps->pos++;
	}
}

static int pool_put(struct parser *ps, const void *bytes, size_t n)
{
	struct spyre_json *d = ps->doc;

	if (grow((void **)&d->pool, &d->cappool, d->npool, n, 1))
		return fail(ps, ps->pos, "out of memory");
	memcpy(d->pool + d->npool, bytes, n);
	d->npool += n;
	return 0;
}

static int put_utf8(struct parser *ps, uint32_t cp)
{
	unsigned char b[4];
	size_t n;

	if (cp < 0x80) {
		b[0] = (unsigned char)cp;
		n = 1;
	} else if (cp < 0x800) {
		b[0] = (unsigned char)(0xc0 | (cp >> 6));
		b[1] = (unsigned char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		b[0] = (unsigned char)(0xe0 | (cp >> 12));
		b[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		b[2] = (unsigned char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		b[0] = (unsigned char)(0xf0 | (cp >> 18));
		b[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
		b[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		b[3] = (unsigned char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	return pool_put(ps, b, n);
}

static int hex4(struct parser *ps, uint32_t *out)
{
	uint32_t v = 0;

	if (ps->len - ps->pos < 4)
		return fail(ps, ps->pos, "truncated \\u escape");
	for (int i = 0; i < 4; i++) {
		unsigned char c = ps->p[ps->pos + (size_t)i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (uint32_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (uint32_t)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (uint32_t)(c - 'A' + 10);
		else
			return fail(ps, ps->pos + (size_t)i, "invalid hex digit in \\u escape");
	}
	ps->pos += 4;
	*out = v;
	return 0;
}

/* Length of the valid UTF-8 sequence at ps->pos (2..4), or 0. */
static size_t utf8_len(const struct parser *ps)
{
	const unsigned char *s = ps->p + ps->pos;
	size_t left = ps->len - ps->pos;
	unsigned char c = s[0];
	size_t n;
	uint32_t cp;

	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
		cp = c & 0x1fu;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		cp = c & 0x0fu;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		cp = c & 0x07u;
	} else {
		return 0;
	}
	if (left < n)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3fu);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;	/* overlong, beyond U+10FFFF, or a surrogate */
	return n;
}

/* A string at ps->pos (the opening quote): decoded into the pool, NUL-terminated. */
static int parse_string(struct parser *ps, size_t *off, size_t *slen)
{
	size_t start = ps->pos;

	ps->pos++;	/* the quote */
	*off = ps->doc->npool;
	for (;;) {
		if (ps->pos >= ps->len)
			return fail(ps, start, "unterminated string");
		unsigned char c = ps->p[ps->pos];

		if (c == '"') {
			ps->pos++;
			break;
		}
		if (c < 0x20)
			return fail(ps, ps->pos, "control character 0x%02x in a string", c);
		if (c == '\\') {
			size_t esc = ps->pos;
			uint32_t cp;
			char ch;

			ps->pos++;
			if (ps->pos >= ps->len)
				return fail(ps, start, "unterminated string");
			c = ps->p[ps->pos++];
			switch (c) {
			case '"': ch = '"'; break;
			case '\\': ch = '\\'; break;
			case '/': ch = '/'; break;
			case 'b': ch = '\b'; break;
			case 'f': ch = '\f'; break;
			case 'n': ch = '\n'; break;
			case 'r': ch = '\r'; break;
			case 't': ch = '\t'; break;
			case 'u':
				if (hex4(ps, &cp))
					return -1;
				if (cp >= 0xdc00 && cp <= 0xdfff)
					return fail(ps, esc, "unpaired low surrogate \\u%04x", (unsigned int)cp);
				if (cp >= 0xd800 && cp <= 0xdbff) {
					uint32_t lo;

					if (ps->len - ps->pos < 2 || ps->p[ps->pos] != '\\' ||
					    ps->p[ps->pos + 1] != 'u')
						return fail(ps, esc, "unpaired high surrogate \\u%04x",
							    (unsigned int)cp);
					ps->pos += 2;
					if (hex4(ps, &lo))
						return -1;
					if (lo < 0xdc00 || lo > 0xdfff)
						return fail(ps, esc, "unpaired high surrogate \\u%04x",
							    (unsigned int)cp);
					cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				}
				if (put_utf8(ps, cp))
					return -1;
				continue;
			default:
				return fail(ps, esc, "invalid escape '\\%c'", c >= 0x20 && c < 0x7f ? c : '?');
			}
			if (pool_put(ps, &ch, 1))
				return -1;
			continue;
		}
		if (c < 0x80) {
			if (pool_put(ps, &c, 1))
				return -1;
			ps->pos++;
			continue;
		}
		size_t n = utf8_len(ps);

		if (!n)
			return fail(ps, ps->pos, "invalid UTF-8 in a string");
		if (pool_put(ps, ps->p + ps->pos, n))
			return -1;
		ps->pos += n;
	}
	*slen = ps->doc->npool - *off;
	return pool_put(ps, "", 1);
}

static int is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

static int parse_number(struct parser *ps, size_t idx)
{
	size_t start = ps->pos, i = ps->pos;
	int integer = 1, neg = 0;
	char buf[JSON_MAX_NUMBER + 1];
	uint64_t u = 0;
	int u_ok = 1;

	if (i < ps->len && ps->p[i] == '-') {
		neg = 1;
		i++;
	}
	if (i >= ps->len || !is_digit(ps->p[i]))
		return fail(ps, start, "invalid number");
	if (ps->p[i] == '0') {
		i++;
		if (i < ps->len && is_digit(ps->p[i]))
			return fail(ps, start, "number with a leading zero");
	} else {
		while (i < ps->len && is_digit(ps->p[i])) {
			unsigned int dgt = (unsigned int)(ps->p[i] - '0');

			if (u > (UINT64_MAX - dgt) / 10)
				u_ok = 0;
			else
				u = u * 10 + dgt;
			i++;
		}
	}
	if (i < ps->len && ps->p[i] == '.') {
		integer = 0;
		i++;
		if (i >= ps->len || !is_digit(ps->p[i]))
			return fail(ps, i, "expected a digit after '.'");
		while (i < ps->len && is_digit(ps->p[i]))
			i++;
	}
	if (i < ps->len && (ps->p[i] == 'e' || ps->p[i] == 'E')) {
		integer = 0;
		i++;
		if (i < ps->len && (ps->p[i] == '+' || ps->p[i] == '-'))
			i++;
		if (i >= ps->len || !is_digit(ps->p[i]))
			return fail(ps, i, "expected a digit in the exponent");
		while (i < ps->len && is_digit(ps->p[i]))
			i++;
	}
	if (i - start > JSON_MAX_NUMBER)
		return fail(ps, start, "number longer than %d characters", JSON_MAX_NUMBER);
	memcpy(buf, ps->p + start, i - start);
	buf[i - start] = 0;
	errno = 0;
	double v = strtod(buf, NULL);

	if (!isfinite(v))
		return fail(ps, start, "number out of range");
	ps->doc->nodes[idx].num = v;
	if (integer && !neg && u_ok) {
		ps->doc->nodes[idx].u64 = u;
		ps->doc->nodes[idx].flags |= F_U64;
	}
	ps->pos = i;
	return 0;
}

static int match_word(struct parser *ps, const char *w)
{
	size_t n = strlen(w);

	if (ps->len - ps->pos < n || memcmp(ps->p + ps->pos, w, n))
		return fail(ps, ps->pos, "invalid literal (expected %s)", w);
	ps->pos += n;
	return 0;
}

static int push_child(struct parser *ps, size_t idx)
{
	if (grow((void **)&ps->stack, &ps->capstack, ps->nstack, 1, sizeof(*ps->stack)))
		return fail(ps, ps->pos, "out of memory");
	ps->stack[ps->nstack++] = idx;
	return 0;
}

struct keyref {
	const char *s;
	size_t len, off;
};

static int keycmp(const void *a, const void *b)
{
	const struct keyref *x = a, *y = b;
	size_t n = x->len < y->len ? x->len : y->len;
	int c = memcmp(x->s, y->s, n);

	if (c)
		return c;
	return x->len < y->len ? -1 : x->len > y->len;
}

/* Move the children stack[base..] of container @idx into kids. */
static int close_container(struct parser *ps, size_t idx, size_t base)
{
	struct spyre_json *d = ps->doc;
	size_t n = ps->nstack - base;

	if (grow((void **)&d->kids, &d->capkids, d->nkids, n, sizeof(*d->kids)))
		return fail(ps, ps->pos, "out of memory");
	if (n)
		memcpy(d->kids + d->nkids, ps->stack + base, n * sizeof(*d->kids));
	d->nodes[idx].a = d->nkids;
	d->nodes[idx].n = n;
	d->nkids += n;
	ps->nstack = base;

	if (d->nodes[idx].type != SPYRE_JSON_OBJECT || n < 2)
		return 0;
	/* duplicate keys: sort a copy, compare neighbours */
	struct keyref *k = calloc(n, sizeof(*k));

	if (!k)
		return fail(ps, ps->pos, "out of memory");
	for (size_t i = 0; i < n; i++) {
		const struct spyre_json_node *c = &d->nodes[d->kids[d->nodes[idx].a + i]];

		k[i].s = d->pool + c->key;
		k[i].len = c->keylen;
		k[i].off = c->keypos;
	}
	qsort(k, n, sizeof(*k), keycmp);
	for (size_t i = 1; i < n; i++) {
		if (!keycmp(&k[i - 1], &k[i])) {
			size_t at = k[i - 1].off > k[i].off ? k[i - 1].off : k[i].off;
			char name[64];

			snprintf(name, sizeof(name), "%.*s%s", k[i].len > 40 ? 40 : (int)k[i].len, k[i].s,
				 k[i].len > 40 ? "..." : "");
			for (char *c = name; *c; c++)
				if ((unsigned char)*c < 0x20)
					*c = '?';
			free(k);
			return fail(ps, at, "duplicate key \"%s\"", name);
		}
	}
	free(k);
	return 0;
}

static int parse_value(struct parser *ps, int depth, size_t *out);

static int parse_container(struct parser *ps, int depth, size_t idx, int object)
{
	size_t base = ps->nstack;
	char close = object ? '}' : ']';

	if (depth >= SPYRE_JSON_MAX_DEPTH)
		return fail(ps, ps->pos, "nesting deeper than %d", SPYRE_JSON_MAX_DEPTH);
	ps->pos++;	/* '{' or '[' */
	skip_ws(ps);
	if (ps->pos < ps->len && ps->p[ps->pos] == close) {
		ps->pos++;
		return close_container(ps, idx, base);
	}
	for (;;) {
		size_t key = 0, keylen = 0, keypos = 0, child;

		skip_ws(ps);
		if (object) {
			if (ps->pos >= ps->len)
				return fail(ps, ps->pos, "unterminated object");
			if (ps->p[ps->pos] != '"')
				return fail(ps, ps->pos, "expected a string key in an object");
			keypos = ps->pos;
			if (parse_string(ps, &key, &keylen))
				return -1;
			skip_ws(ps);
			if (ps->pos >= ps->len || ps->p[ps->pos] != ':')
				return fail(ps, ps->pos, "expected ':' after an object key");
			ps->pos++;
			skip_ws(ps);
		}
		if (parse_value(ps, depth + 1, &child))
			return -1;
		if (object) {
			ps->doc->nodes[child].key = key;
			ps->doc->nodes[child].keylen = keylen;
			ps->doc->nodes[child].keypos = keypos;
			ps->doc->nodes[child].flags |= F_MEMBER;
		}
		if (push_child(ps, child))
			return -1;
		skip_ws(ps);
		if (ps->pos >= ps->len)
			return fail(ps, ps->pos, object ? "unterminated object" : "unterminated array");
		if (ps->p[ps->pos] == ',') {
			ps->pos++;
			continue;
		}
		if (ps->p[ps->pos] == close) {
			ps->pos++;
			return close_container(ps, idx, base);
		}
		return fail(ps, ps->pos, object ? "expected ',' or '}' in an object" :
			    "expected ',' or ']' in an array");
	}
}

static int parse_value(struct parser *ps, int depth, size_t *out)
{
	size_t idx;

	skip_ws(ps);
	if (ps->pos >= ps->len)
		return fail(ps, ps->pos, "expected a value, found the end");
	unsigned char c = ps->p[ps->pos];

	switch (c) {
	case '{':
	case '[':
		if (new_node(ps, c == '{' ? SPYRE_JSON_OBJECT : SPYRE_JSON_ARRAY, &idx))
			return -1;
		*out = idx;
		return parse_container(ps, depth, idx, c == '{');
	case '"': {
		size_t off, n;

		if (new_node(ps, SPYRE_JSON_STRING, &idx) || parse_string(ps, &off, &n))
			return -1;
		ps->doc->nodes[idx].a = off;
		ps->doc->nodes[idx].n = n;
		*out = idx;
		return 0;
	}
	case 't':
	case 'f':
		if (new_node(ps, SPYRE_JSON_BOOL, &idx) || match_word(ps, c == 't' ? "true" : "false"))
			return -1;
		if (c == 't')
			ps->doc->nodes[idx].flags |= F_TRUE;
		*out = idx;
		return 0;
	case 'n':
		if (new_node(ps, SPYRE_JSON_NULL, &idx) || match_word(ps, "null"))
			return -1;
		*out = idx;
		return 0;
	default:
		if (c == '-' || is_digit(c)) {
			if (new_node(ps, SPYRE_JSON_NUMBER, &idx) || parse_number(ps, idx))
				return -1;
			*out = idx;
			return 0;
		}
		if (c >= 0x20 && c < 0x7f)
			return fail(ps, ps->pos, "unexpected character '%c'", c);
		return fail(ps, ps->pos, "unexpected byte 0x%02x", c);
	}
}

int spyre_json_parse(const char *text, size_t len, struct spyre_json **doc, char *err, size_t errlen)
{
	struct parser ps = { (const unsigned char *)text, len, 0, NULL, NULL, 0, 0, err, errlen, 0 };
	size_t root;

	*doc = NULL;
	if (err && errlen)
		err[0] = 0;
	if (!text && len)
		return fail(&ps, 0, "no text");
	ps.doc = calloc(1, sizeof(*ps.doc));
	if (!ps.doc)
		return fail(&ps, 0, "out of memory");
	if (parse_value(&ps, 0, &root))
		goto bad;
	skip_ws(&ps);
	if (ps.pos != len) {
		fail(&ps, ps.pos, "unexpected data after the JSON value");
		goto bad;
	}
	free(ps.stack);
	for (size_t i = 0; i < ps.doc->nnodes; i++)
		ps.doc->nodes[i].doc = ps.doc;
	*doc = ps.doc;
	return 0;
bad:
	free(ps.stack);
	spyre_json_free(ps.doc);
	return -1;
}

void spyre_json_free(struct spyre_json *doc)
{
	if (!doc)
		return;
	free(doc->nodes);
	free(doc->kids);
	free(doc->pool);
	free(doc);
}

const struct spyre_json_node *spyre_json_root(const struct spyre_json *doc)
{
	return doc && doc->nnodes ? &doc->nodes[0] : NULL;
}

enum spyre_json_type spyre_json_type(const struct spyre_json_node *v)
{
	return v ? (enum spyre_json_type)v->type : SPYRE_JSON_NULL;
}

const char *spyre_json_type_name(enum spyre_json_type t)
{
	switch (t) {
	case SPYRE_JSON_NULL: return "null";
	case SPYRE_JSON_BOOL: return "boolean";
	case SPYRE_JSON_NUMBER: return "number";
	case SPYRE_JSON_STRING: return "string";
	case SPYRE_JSON_ARRAY: return "array";
	case SPYRE_JSON_OBJECT: return "object";
	}
	return "?";
}

size_t spyre_json_offset(const struct spyre_json_node *v)
{
	return v ? v->offset : 0;
}

size_t spyre_json_count(const struct spyre_json_node *v)
{
	return v && (v->type == SPYRE_JSON_ARRAY || v->type == SPYRE_JSON_OBJECT) ? v->n : 0;
}

const struct spyre_json_node *spyre_json_at(const struct spyre_json_node *v, size_t i, const char **key)
{
	if (!v || (v->type != SPYRE_JSON_ARRAY && v->type != SPYRE_JSON_OBJECT) || i >= v->n)
		return NULL;
	const struct spyre_json_node *c = &v->doc->nodes[v->doc->kids[v->a + i]];

	if (key)
		*key = v->type == SPYRE_JSON_OBJECT ? v->doc->pool + c->key : NULL;
	return c;
}

const struct spyre_json_node *spyre_json_get(const struct spyre_json_node *obj, const char *key)
{
	size_t klen;

	if (!obj || obj->type != SPYRE_JSON_OBJECT || !key)
		return NULL;
	klen = strlen(key);
	for (size_t i = 0; i < obj->n; i++) {
		const struct spyre_json_node *c = &obj->doc->nodes[obj->doc->kids[obj->a + i]];

		if (c->keylen == klen && !memcmp(obj->doc->pool + c->key, key, klen))
			return c;
	}
	return NULL;
}

const char *spyre_json_key(const struct spyre_json_node *member, size_t *len)
{
	if (!member || !(member->flags & F_MEMBER))
		return NULL;
	if (len)
		*len = member->keylen;
	return member->doc->pool + member->key;
}

int spyre_json_number(const struct spyre_json_node *v, double *out)
{
	if (!v || v->type != SPYRE_JSON_NUMBER)
		return -1;
	*out = v->num;
	return 0;
}

int spyre_json_u64(const struct spyre_json_node *v, uint64_t *out)
{
	if (!v || v->type != SPYRE_JSON_NUMBER || !(v->flags & F_U64))
		return -1;
	*out = v->u64;
	return 0;
}

int spyre_json_bool(const struct spyre_json_node *v, bool *out)
{
	if (!v || v->type != SPYRE_JSON_BOOL)
		return -1;
	*out = (v->flags & F_TRUE) != 0;
	return 0;
}

const char *spyre_json_string(const struct spyre_json_node *v, size_t *len)
{
	if (!v || v->type != SPYRE_JSON_STRING)
		return NULL;
	if (len)
		*len = v->n;
	return v->doc->pool + v->a;
}
