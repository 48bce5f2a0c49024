// SPDX-License-Identifier: MIT
/*
 * tokenizer_unicode.c - UTF-8 (validation, Rust's lossy conversion), buffers,
 * and the Unicode properties the tokenizer needs, from tables that
 * serve/gen-unicode.py generates at build time from Python's unicodedata.
 * White_Space is a fixed list of the Unicode standard (stable since 6.3).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"
#include "tokenizer_impl.h"
#include "tokenizer_unicode_tables.h"

int tok_errf(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
	size_t c = *cap ? *cap : 16;
	void *q;

	if (need <= *cap)
		return 0;
	while (c < need) {
		if (c > SIZE_MAX / 2 / elem)
			return -ENOMEM;
		c *= 2;
	}
	q = realloc(*p, c * elem);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = c;
	return 0;
}

int tok_buf_put(struct tok_buf *b, const void *s, size_t n)
{
	/* +1: room for a NUL that users may add */
	if (n > SIZE_MAX - b->n - 1 || grow((void **)&b->p, &b->cap, b->n + n + 1, 1))
		return -ENOMEM;
	if (n)
		memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = 0;
	return 0;
}

int tok_buf_put_cp(struct tok_buf *b, uint32_t cp)
{
	char u[4];
	size_t n;

	if (cp < 0x80) {
		u[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		u[0] = (char)(0xc0 | cp >> 6);
		u[1] = (char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		u[0] = (char)(0xe0 | cp >> 12);
		u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		u[2] = (char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		u[0] = (char)(0xf0 | cp >> 18);
		u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		u[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		u[3] = (char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	return tok_buf_put(b, u, n);
}

int tok_ids_push(struct tok_ids *v, int32_t id)
{
	if (grow((void **)&v->p, &v->cap, v->n + 1, sizeof(*v->p)))
		return -ENOMEM;
	v->p[v->n++] = id;
	return 0;
}

uint32_t tok_utf8_next(const char *s, size_t *i)
{
	const unsigned char *u = (const unsigned char *)s + *i;
	uint32_t c = u[0];

	if (c < 0x80) {
		*i += 1;
		return c;
	}
	if (c < 0xe0) {
		*i += 2;
		return (c & 0x1f) << 6 | (u[1] & 0x3f);
	}
	if (c < 0xf0) {
		*i += 3;
		return (c & 0x0f) << 12 | (uint32_t)(u[1] & 0x3f) << 6 | (u[2] & 0x3f);
	}
	*i += 4;
	return (c & 0x07) << 18 | (uint32_t)(u[1] & 0x3f) << 12 | (uint32_t)(u[2] & 0x3f) << 6 | (u[3] & 0x3f);
}

size_t tok_utf8_valid_len(const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0;

	while (i < n) {
		int k;

		if (u[i] < 0x80) {
			i++;
			continue;
		}
		k = spyre_utf8_step(u + i, n - i);
		if (k <= 0)
			return i;
		i += (size_t)k;
	}
	return n;
}

int tok_utf8_lossy(const char *s, size_t n, bool hold, size_t *held, struct tok_buf *out)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, run = 0;
	int rc;

	if (held)
		*held = 0;
	while (i < n) {
		int k = u[i] < 0x80 ? 1 : spyre_utf8_step(u + i, n - i);

		if (k > 0) {
			i += (size_t)k;
			continue;
		}
		if ((rc = tok_buf_put(out, s + run, i - run)))
			return rc;
		if (k == 0 && hold) {
			*held = n - i;
			return 0;
		}
		if ((rc = tok_buf_put(out, "\xef\xbf\xbd", 3)))
			return rc;
		i += k == 0 ? n - i : (size_t)-k;
		run = i;
	}
	return tok_buf_put(out, s + run, i - run);
}

const char *tok_unicode_version(void)
{
	return TOK_UNICODE_VERSION;
}

int tok_category(uint32_t cp)
{
	if (cp >= 0x110000)
		return TOK_Cn;
	return tok_cat_blocks[tok_cat_index[cp / TOK_CAT_BLOCK]][cp % TOK_CAT_BLOCK];
}

bool tok_is_letter(uint32_t cp)
{
	int c = tok_category(cp);

	return c >= TOK_Lu && c <= TOK_Lo;
}

bool tok_is_number(uint32_t cp)
{
	int c = tok_category(cp);

	return c >= TOK_Nd && c <= TOK_No;
}

bool tok_is_digit(uint32_t cp)
{
	return tok_category(cp) == TOK_Nd;
}

bool tok_is_punct(uint32_t cp)
{
	int c = tok_category(cp);

	return c >= TOK_Pc && c <= TOK_Po;
}

bool tok_is_mark(uint32_t cp)
{
	int c = tok_category(cp);

	return c >= TOK_Mn && c <= TOK_Me;
}

bool tok_is_mn(uint32_t cp)
{
	return tok_category(cp) == TOK_Mn;
}

bool tok_is_other(uint32_t cp)
{
	int c = tok_category(cp);

	return c == TOK_Cc || c == TOK_Cf || c == TOK_Co || c == TOK_Cs;
}

bool tok_is_space(uint32_t cp)
{
	switch (cp) {
	case 0x09 ... 0x0d:
	case 0x20:
	case 0x85:
	case 0xa0:
	case 0x1680:
	case 0x2000 ... 0x200a:
	case 0x2028:
	case 0x2029:
	case 0x202f:
	case 0x205f:
	case 0x3000:
		return true;
	default:
		return false;
	}
}

bool tok_is_word(uint32_t cp)
{
	int c = tok_category(cp);

	return (c >= TOK_Lu && c <= TOK_Me) || c == TOK_Nd || c == TOK_Nl || c == TOK_Pc ||
	       cp == 0x200c || cp == 0x200d;
}

static const struct tok_umap *umap_find(const struct tok_umap *t, size_t n, uint32_t cp)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t[mid].cp == cp)
			return &t[mid];
		if (t[mid].cp < cp)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

int tok_lower(uint32_t cp, uint32_t out[3])
{
	const struct tok_umap *m;

	if (cp < 0x80) {
		out[0] = cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
		return 1;
	}
	m = umap_find(tok_lower_map, sizeof(tok_lower_map) / sizeof(tok_lower_map[0]), cp);
	if (!m || m->len > 3) {
		out[0] = cp;
		return 1;
	}
	for (uint32_t k = 0; k < m->len; k++)
		out[k] = tok_pool[m->off + k];
	return (int)m->len;
}

static uint8_t ccc_of(uint32_t cp)
{
	size_t lo = 0, hi = sizeof(tok_ccc) / sizeof(tok_ccc[0]);

	if (cp < 0x300)
		return 0;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (tok_ccc[mid].cp == cp)
			return tok_ccc[mid].ccc;
		if (tok_ccc[mid].cp < cp)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

/* Hangul syllables decompose by arithmetic (Unicode 3.12). */
#define HANGUL_S 0xac00
#define HANGUL_COUNT 11172

int tok_nfd(const char *s, size_t n, struct tok_buf *out)
{
	uint32_t *cps = NULL;
	size_t ncp = 0, cap = 0, i = 0;
	int rc = 0;

	while (i < n) {
		uint32_t cp = tok_utf8_next(s, &i), d[4];
		const uint32_t *src = d;
		size_t nd = 1;

		d[0] = cp;
		if (cp >= HANGUL_S && cp < HANGUL_S + HANGUL_COUNT) {
			uint32_t si = cp - HANGUL_S;

			d[0] = 0x1100 + si / 588;
			d[1] = 0x1161 + (si % 588) / 28;
			nd = 2;
			if (si % 28)
				d[nd++] = 0x11a7 + si % 28;
		} else if (cp >= 0xc0) {
			const struct tok_umap *m = umap_find(tok_nfd_map, sizeof(tok_nfd_map) / sizeof(tok_nfd_map[0]), cp);

			if (m) {
				src = tok_pool + m->off;
				nd = m->len;
			}
		}
		if ((rc = grow((void **)&cps, &cap, ncp + nd, sizeof(*cps))))
			goto out;
		for (size_t k = 0; k < nd; k++) {
			/* canonical ordering: a mark moves before marks of a higher class */
			uint32_t c = src[k];
			uint8_t cc = ccc_of(c);
			size_t j = ncp;

			if (cc)
				while (j > 0 && ccc_of(cps[j - 1]) > cc) {
					cps[j] = cps[j - 1];
					j--;
				}
			cps[j] = c;
			ncp++;
		}
	}
	for (size_t k = 0; k < ncp && !rc; k++)
		rc = tok_buf_put_cp(out, cps[k]);
out:
	free(cps);
	return rc;
}
