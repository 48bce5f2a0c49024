/* SPDX-License-Identifier: MIT */
/*
 * test-util.h - helpers shared by the model tests (and the fuzz target):
 * where the source tree is, reading a file, a temporary directory, the
 * readers' safetensors seeds (a 1-layer model, tensors of mixed dtypes).
 */
#ifndef SPYRE_MODEL_TEST_UTIL_H
#define SPYRE_MODEL_TEST_UTIL_H

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "safetensors.h"

/* The repository's top directory: this program is build/tests/NAME or build/fuzz/NAME. */
static inline const char *model_top(void)
{
	static char top[PATH_MAX];
	char self[PATH_MAX];
	ssize_t n;

	if (top[0])
		return top;
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return ".";
	self[n] = 0;
	for (int i = 0; i < 3; i++) {
		char *s = strrchr(self, '/');

		if (!s)
			return ".";
		*s = 0;
	}
	snprintf(top, sizeof(top), "%s", self);
	return top;
}

/* The whole file in a malloc'ed buffer of exactly its size (NULL on error). */
static inline char *model_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	*len = 0;
	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET))
		goto out;
	buf = malloc(n ? (size_t)n : 1);
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
		goto out;
	}
	*len = (size_t)n;
out:
	fclose(f);
	return buf;
}

static inline int model_write_file(const char *path, const void *buf, size_t len)
{
	FILE *f = fopen(path, "wb");
	int rc;

	if (!f)
		return -1;
	rc = fwrite(buf, 1, len, f) == len ? 0 : -1;
	return fclose(f) ? -1 : rc;
}

/* A fresh temporary directory, or NULL. */
static inline const char *model_tmpdir(void)
{
	static char dir[64];

	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "/tmp/spyre-model-XXXXXX");
		if (!mkdtemp(dir)) {
			dir[0] = 0;
			return NULL;
		}
	}
	return dir;
}

static inline void model_rmtmp(void)
{
	char cmd[128];

	if (model_tmpdir()) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", model_tmpdir());
		if (system(cmd))
			fprintf(stderr, "could not remove %s\n", model_tmpdir());
	}
}

/*
 * The 1-layer model whose weights seed the readers' tests and fuzz target:
 * what the weights loader expects of their safetensors inputs.
 */
static inline struct spyre_model_config model_micro_config(void)
{
	struct spyre_model_config c = spyre_model_config_tiny();

	c.layers = 1;
	c.hidden = 8;
	c.heads = 2;
	c.kv_heads = 1;
	c.head_dim = 4;
	c.ffn = 12;
	c.vocab = 16;
	c.max_pos = 16;
	return c;
}

/* Tensors of mixed dtypes and ranks for a safetensors seed; the last one a scalar. */
static const float model_mixed_data[6] = { 1, -2, 0.5f, 3, 4, 5 };
static const struct spyre_st_out model_mixed_tensors[4] = {
	{ "a", SPYRE_ST_F32, 2, { 2, 3 }, model_mixed_data, NULL },
	{ "b", SPYRE_ST_F16, 1, { 4 }, model_mixed_data, NULL },
	{ "c", SPYRE_ST_BF16, 3, { 1, 1, 2 }, model_mixed_data, NULL },
	{ "s", SPYRE_ST_F32, 0, { 0 }, model_mixed_data, NULL },
};

#endif /* SPYRE_MODEL_TEST_UTIL_H */
