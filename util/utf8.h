/* SPDX-License-Identifier: MIT */
/*
 * utf8.h - one step of UTF-8 validation (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF), header-only: the JSON writer and the
 * tokenizer use it. (util/json.c and libspyre's trace writer still carry a
 * copy of their own: see the issue note.)
 */
#ifndef SPYRE_UTIL_UTF8_H
#define SPYRE_UTIL_UTF8_H

#include <stddef.h>

/*
 * At s[0..n), n >= 1: the length of the valid character there (1..4), or
 * -(the length of the maximal ill-formed subsequence), or 0 when the text
 * ends inside a sequence more bytes could complete.
 */
static inline int spyre_utf8_step(const unsigned char *s, size_t n)
{
	unsigned char c = s[0], lo = 0x80, hi = 0xbf;
	int w;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		w = 2;
	else if (c >= 0xe0 && c <= 0xef)
		w = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		w = 4;
	else
		return -1;
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	for (int k = 1; k < w; k++) {
		if ((size_t)k >= n)
			return 0;
		if (s[k] < lo || s[k] > hi)
			return -k;
		lo = 0x80;
		hi = 0xbf;
	}
	return w;
}

#endif /* SPYRE_UTIL_UTF8_H */
