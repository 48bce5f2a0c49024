// SPDX-License-Identifier: MIT
/* jsonw.c - a growable byte buffer and a JSON writer (jsonw.h). */
#include "utf8.h"
#include "jsonw.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void spyre_buf_init(struct spyre_buf *b)
{
	b->p = NULL;
	b->len = b->cap = 0;
	b->oom = false;
}

void spyre_buf_free(struct spyre_buf *b)
{
	free(b->p);
	spyre_buf_init(b);
}

/* Room for @n more bytes and the NUL. */
static bool buf_reserve(struct spyre_buf *b, size_t n)
{
	size_t want, cap;
	char *p;

	if (b->oom)
		return false;
	if (n > SIZE_MAX / 2 - b->len - 1) {
		b->oom = true;
		return false;
	}
	want = b->len + n + 1;
	if (want <= b->cap)
		return true;
	cap = b->cap ? b->cap : 64;
	while (cap < want)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p) {
		b->oom = true;
		return false;
	}
	b->p = p;
	b->cap = cap;
	return true;
}

void spyre_buf_add(struct spyre_buf *b, const void *data, size_t n)
{
	if (!buf_reserve(b, n))
		return;
	if (n)
		memcpy(b->p + b->len, data, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void spyre_buf_puts(struct spyre_buf *b, const char *s)
{
	spyre_buf_add(b, s, strlen(s));
}

void spyre_buf_printf(struct spyre_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	/* one pass into the room there is (most lines fit in 128 bytes), a second only when it did not fit */
	if (!buf_reserve(b, 128))
		return;
	va_start(ap, fmt);
	n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->p[b->len] = '\0';
		b->oom = true;
		return;
	}
	if ((size_t)n >= b->cap - b->len) {
		if (!buf_reserve(b, (size_t)n)) {
			b->p[b->len] = '\0';
			return;
		}
		va_start(ap, fmt);
		vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	b->len += (size_t)n;
}

void spyre_buf_consume(struct spyre_buf *b, size_t n)
{
	if (n >= b->len) {
		b->len = 0;
	} else {
		memmove(b->p, b->p + n, b->len - n);
		b->len -= n;
	}
	if (b->p)
		b->p[b->len] = '\0';
}

char *spyre_buf_steal(struct spyre_buf *b, size_t *len)
{
	char *p;

	if (b->oom) {
		spyre_buf_free(b);
		return NULL;
	}
	if (!b->p && !buf_reserve(b, 0))
		return NULL;
	p = b->p;
	if (len)
		*len = b->len;
	spyre_buf_init(b);
	return p;
}

/* The length of the valid UTF-8 character at @s (1..4), or 0 when the bytes there are not one. */
static size_t utf8_char(const unsigned char *s, size_t n)
{
	int k = spyre_utf8_step(s, n);

	return k > 0 ? (size_t)k : 0;
}

size_t spyre_utf8_valid_prefix(const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, k;

	while (i < n && (k = utf8_char(u + i, n - i)))
		i += k;
	return i;
}

void spyre_jw_escape(struct spyre_buf *b, const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, run = 0, k;

	while (i < n) {
		unsigned char c = u[i];

		if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {	/* plain ASCII: no UTF-8 step */
			i++;
			run++;
			continue;
		}
		k = utf8_char(u + i, n - i);
		if (k > 1 || (k == 1 && c >= 0x20 && c != '"' && c != '\\' && c != 0x7f)) {
			i += k;
			run += k;
			continue;
		}
		spyre_buf_add(b, u + i - run, run);
		run = 0;
		switch (k ? c : 0x100) {
		case '"': spyre_buf_add(b, "\\\"", 2); break;
		case '\\': spyre_buf_add(b, "\\\\", 2); break;
		case '\n': spyre_buf_add(b, "\\n", 2); break;
		case '\r': spyre_buf_add(b, "\\r", 2); break;
		case '\t': spyre_buf_add(b, "\\t", 2); break;
		case '\b': spyre_buf_add(b, "\\b", 2); break;
		case '\f': spyre_buf_add(b, "\\f", 2); break;
		case 0x100: spyre_buf_add(b, "\xef\xbf\xbd", 3); break;	/* invalid: U+FFFD */
		default: spyre_buf_printf(b, "\\u%04x", c); break;
		}
		i++;
	}
	spyre_buf_add(b, u + i - run, run);
}

void spyre_jw_init(struct spyre_jw *w, struct spyre_buf *b)
{
	memset(w, 0, sizeof(*w));
	w->b = b;
}

/* Before a value: the comma, or nothing after a key; false when it may not go here. */
static bool jw_value(struct spyre_jw *w)
{
	if (w->bad)
		return false;
	if (w->depth && w->is_obj[w->depth] && !w->after_key) {
		w->bad = true;
		return false;
	}
	if (w->depth && !w->is_obj[w->depth] && w->items[w->depth])
		spyre_buf_add(w->b, ",", 1);
	if (w->depth)
		w->items[w->depth] = true;
	w->after_key = false;
	return true;
}

static void jw_open(struct spyre_jw *w, bool obj)
{
	if (w->depth >= SPYRE_JW_MAX_DEPTH)
		w->bad = true;
	if (!jw_value(w))
		return;
	w->depth++;
	w->items[w->depth] = false;
	w->is_obj[w->depth] = obj;
	spyre_buf_add(w->b, obj ? "{" : "[", 1);
}

static void jw_close(struct spyre_jw *w, bool obj)
{
	if (w->bad || !w->depth || w->is_obj[w->depth] != obj || w->after_key) {
		w->bad = true;
		return;
	}
	w->depth--;
	spyre_buf_add(w->b, obj ? "}" : "]", 1);
}

void spyre_jw_obj(struct spyre_jw *w) { jw_open(w, true); }
void spyre_jw_obj_end(struct spyre_jw *w) { jw_close(w, true); }
void spyre_jw_arr(struct spyre_jw *w) { jw_open(w, false); }
void spyre_jw_arr_end(struct spyre_jw *w) { jw_close(w, false); }

void spyre_jw_key(struct spyre_jw *w, const char *key)
{
	if (w->bad || !w->depth || !w->is_obj[w->depth] || w->after_key) {
		w->bad = true;
		return;
	}
	if (w->items[w->depth])
		spyre_buf_add(w->b, ",", 1);
	w->items[w->depth] = true;
	spyre_buf_add(w->b, "\"", 1);
	spyre_jw_escape(w->b, key, strlen(key));
	spyre_buf_add(w->b, "\":", 2);
	w->after_key = true;
}

void spyre_jw_strn(struct spyre_jw *w, const char *s, size_t n)
{
	if (!jw_value(w))
		return;
	spyre_buf_add(w->b, "\"", 1);
	spyre_jw_escape(w->b, s, n);
	spyre_buf_add(w->b, "\"", 1);
}

void spyre_jw_str(struct spyre_jw *w, const char *s)
{
	spyre_jw_strn(w, s, strlen(s));
}

/* Decimal digits of @v, with a '-' when @neg (no printf: a streamed token's chunk has a few numbers). */
static void put_u64(struct spyre_buf *b, uint64_t v, bool neg)
{
	char d[24];
	size_t i = sizeof(d);

	do {
		d[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	if (neg)
		d[--i] = '-';
	spyre_buf_add(b, d + i, sizeof(d) - i);
}

void spyre_jw_int(struct spyre_jw *w, int64_t v)
{
	if (jw_value(w))
		put_u64(w->b, v < 0 ? 0 - (uint64_t)v : (uint64_t)v, v < 0);
}

void spyre_jw_uint(struct spyre_jw *w, uint64_t v)
{
	if (jw_value(w))
		put_u64(w->b, v, false);
}

void spyre_jw_double(struct spyre_jw *w, double v)
{
	if (!jw_value(w))
		return;
	if (isfinite(v))
		spyre_buf_printf(w->b, "%.17g", v);
	else
		spyre_buf_add(w->b, "null", 4);
}

void spyre_jw_bool(struct spyre_jw *w, bool v)
{
	if (jw_value(w))
		spyre_buf_puts(w->b, v ? "true" : "false");
}

void spyre_jw_null(struct spyre_jw *w)
{
	if (jw_value(w))
		spyre_buf_add(w->b, "null", 4);
}
