/* SPDX-License-Identifier: MIT */
/*
 * jsonw.h - a growable byte buffer and a JSON writer on it (util/: shared,
 * depends on nothing of the project; json.h is the reader).
 *
 * The buffer keeps its text NUL-terminated. Out of memory is sticky: the
 * first failed growth sets ->oom, later writes do nothing, and
 * spyre_buf_steal() returns NULL, so a caller checks once at the end.
 *
 * The writer puts the commas and colons itself: open an object or array,
 * write members (a key, then a value) or elements, close it. Strings are
 * always written as valid JSON text: '"', '\\' and every control character
 * (U+0000..U+001F, U+007F) are escaped, valid UTF-8 passes through, and each
 * byte of an invalid UTF-8 sequence (a stray continuation byte, a truncated
 * or overlong sequence, a surrogate, a code point above U+10FFFF) becomes
 * U+FFFD. Numbers that are not finite are written as null (JSON has no NaN).
 * Nesting deeper than SPYRE_JW_MAX_DEPTH, a key outside an object or a value
 * without its key are programming errors: they set ->bad and write nothing.
 */
#ifndef SPYRE_UTIL_JSONW_H
#define SPYRE_UTIL_JSONW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct spyre_buf {
	char *p;		/* NUL-terminated when len > 0 or after any write */
	size_t len, cap;
	bool oom;
};

void spyre_buf_init(struct spyre_buf *b);
void spyre_buf_free(struct spyre_buf *b);		/* and re-initialize */
void spyre_buf_add(struct spyre_buf *b, const void *data, size_t n);
void spyre_buf_puts(struct spyre_buf *b, const char *s);
__attribute__((format(printf, 2, 3))) void spyre_buf_printf(struct spyre_buf *b, const char *fmt, ...);
/* Drop the first @n bytes (all of them if n >= len). */
void spyre_buf_consume(struct spyre_buf *b, size_t n);
/* The text, malloc'ed and NUL-terminated (the buffer is left empty), or NULL after an oom. */
char *spyre_buf_steal(struct spyre_buf *b, size_t *len);

#define SPYRE_JW_MAX_DEPTH 32

struct spyre_jw {
	struct spyre_buf *b;
	unsigned int depth;
	bool bad;
	bool after_key;				/* a key was written, its value comes next */
	bool items[SPYRE_JW_MAX_DEPTH + 1];	/* the container at each depth has an item */
	bool is_obj[SPYRE_JW_MAX_DEPTH + 1];
};

void spyre_jw_init(struct spyre_jw *w, struct spyre_buf *b);
void spyre_jw_obj(struct spyre_jw *w);		/* { */
void spyre_jw_obj_end(struct spyre_jw *w);	/* } */
void spyre_jw_arr(struct spyre_jw *w);		/* [ */
void spyre_jw_arr_end(struct spyre_jw *w);	/* ] */
void spyre_jw_key(struct spyre_jw *w, const char *key);
void spyre_jw_str(struct spyre_jw *w, const char *s);
void spyre_jw_strn(struct spyre_jw *w, const char *s, size_t n);
void spyre_jw_int(struct spyre_jw *w, int64_t v);
void spyre_jw_uint(struct spyre_jw *w, uint64_t v);
void spyre_jw_double(struct spyre_jw *w, double v);	/* %.17g (reads back exactly); null if not finite */
void spyre_jw_bool(struct spyre_jw *w, bool v);
void spyre_jw_null(struct spyre_jw *w);
/* Write @n bytes of @s as a JSON string's contents (no quotes) with the escaping above. */
void spyre_jw_escape(struct spyre_buf *b, const char *s, size_t n);

/* The length of the longest prefix of @s (at most @n bytes) that is whole, valid UTF-8 characters. */
size_t spyre_utf8_valid_prefix(const char *s, size_t n);

#endif /* SPYRE_UTIL_JSONW_H */
