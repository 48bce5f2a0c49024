/* SPDX-License-Identifier: MIT */
/*
 * tokenizer-util.h - what the tokenizer's tests share: the tree's top
 * directory and build directory, reading a whole file.
 */
#ifndef SPYRE_SERVE_TOKENIZER_UTIL_H
#define SPYRE_SERVE_TOKENIZER_UTIL_H

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The build directory: this program is BUILD/tests/NAME. */
static inline const char *tok_test_build(void)
{
	static char dir[PATH_MAX];
	ssize_t n;

	if (dir[0])
		return dir;
	n = readlink("/proc/self/exe", dir, sizeof(dir) - 1);
	if (n <= 0)
		return "build";
	dir[n] = 0;
	for (int i = 0; i < 2; i++) {
		char *s = strrchr(dir, '/');

		if (s)
			*s = 0;
	}
	return dir;
}

/* The source tree's top: the build directory's parent. */
static inline const char *tok_test_top(void)
{
	static char top[PATH_MAX];
	char *s;

	if (top[0])
		return top;
	snprintf(top, sizeof(top), "%s", tok_test_build());
	s = strrchr(top, '/');
	if (s)
		*s = 0;
	return top;
}

/* The whole file in a malloc'ed buffer of exactly its size (1 byte if empty), or NULL. */
static inline char *tok_test_read(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	*len = 0;
	if (!f)
		return NULL;
	if (!fseek(f, 0, SEEK_END) && (n = ftell(f)) >= 0 && !fseek(f, 0, SEEK_SET)) {
		buf = malloc(n ? (size_t)n : 1);
		if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
			free(buf);
			buf = NULL;
		} else if (buf) {
			*len = (size_t)n;
		}
	}
	fclose(f);
	return buf;
}

#endif /* SPYRE_SERVE_TOKENIZER_UTIL_H */
