// SPDX-License-Identifier: MIT
/*
 * Description: a short bounded run of the libFuzzer target for the model's
 * readers (build/fuzz/model-fuzz, built by `make fuzz` with clang): 100,000
 * executions or 15 s, whichever comes first, seeded with valid inputs for
 * each reader (the shipped config.json files, safetensors files of a 1-layer
 * model and of mixed dtypes, a JSON document). Fails on any crash, sanitizer
 * report or timeout; skips (77) when clang's libFuzzer was not available to
 * build the target. Prints the number of executions.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "safetensors.h"
#include "weights.h"
#include "test-util.h"
#include "../../tests/tap.h"
#include "../../tests/fuzz-run.h"

static char fuzz[PATH_MAX + 32];

/* The file @path with the selector byte @sel in front, as seed @i. */
static void seed(const char *dir, int i, unsigned char sel, const char *path)
{
	char out[PATH_MAX + 32];
	size_t len;
	char *buf = model_read_file(path, &len);
	FILE *f;

	if (!buf) {
		tap_diag("no seed %s", path);
		return;
	}
	snprintf(out, sizeof(out), "%s/seed%d", dir, i);
	f = fopen(out, "wb");
	if (f) {
		fputc(sel, f);
		fwrite(buf, 1, len, f);
		fclose(f);
	}
	free(buf);
}

static void test_libfuzzer_run(void)
{
	char dir[] = "/tmp/spyre-model-fuzz-XXXXXX", cmd[4 * PATH_MAX], p[PATH_MAX + 64], err[256];
	struct spyre_model_config c = model_micro_config();
	struct spyre_model_weights w;

	if (!TAP_CHECK(mkdtemp(dir) != NULL, "mkdtemp: %m"))
		return;
	snprintf(p, sizeof(p), "%s/model/configs/tiny/config.json", model_top());
	seed(dir, 0, 0, p);
	seed(dir, 1, 2, p);
	snprintf(p, sizeof(p), "%s/model/configs/granite-3.3-8b/config.json", model_top());
	seed(dir, 2, 0, p);
	snprintf(p, sizeof(p), "%s/micro.st", dir);
	if (spyre_model_weights_random(&c, 1, &w) == 0) {
		if (spyre_model_weights_save(&c, &w, p, SPYRE_ST_BF16, err, sizeof(err)) == 0)
			seed(dir, 3, 1, p);
		spyre_model_weights_free(&w);
	}
	snprintf(p, sizeof(p), "%s/mixed.st", dir);
	if (spyre_st_write(p, model_mixed_tensors, 3, err, sizeof(err)) == 0)	/* all but the scalar */
		seed(dir, 4, 1, p);
	snprintf(cmd, sizeof(cmd), "rm -f %s/micro.st %s/mixed.st", dir, dir);
	if (system(cmd))
		tap_diag("could not remove the seed sources");

	fuzz_run(fuzz, "model-fuzz", dir, 100000, 15);
}

static const struct tap_case cases[] = {
	{ "libfuzzer_run", test_libfuzzer_run },
};

int main(int argc, char **argv)
{
	snprintf(fuzz, sizeof(fuzz), "%s/build/fuzz/model-fuzz", model_top());
	if (access(fuzz, X_OK))
		tap_skip_all("%s not built (needs clang with libFuzzer: make fuzz)", fuzz);
	return TAP_RUN(cases, argc, argv);
}
