// SPDX-License-Identifier: MIT
/*
 * model-fuzz - libFuzzer target for the model's readers (built by `make
 * fuzz` with clang -fsanitize=fuzzer,address,undefined when clang exists).
 * The first byte selects the reader of the rest: 0 the config parser, 1 the
 * safetensors reader (every tensor read as fp32, then the weights loader for
 * a 1-layer model), 2 the JSON parser (the document walked). An error must
 * come with a message; anything else is a crash or a sanitizer report.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "json.h"
#include "safetensors.h"
#include "weights.h"
#include "test-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void walk(const struct spyre_json_node *v, int depth)
{
	double d;
	uint64_t u;
	bool b;
	size_t n;

	(void)spyre_json_number(v, &d);
	(void)spyre_json_u64(v, &u);
	(void)spyre_json_bool(v, &b);
	(void)spyre_json_string(v, &n);
	for (size_t i = 0; i < spyre_json_count(v); i++) {
		const char *key;
		const struct spyre_json_node *c = spyre_json_at(v, i, &key);

		if (!c || depth > SPYRE_JSON_MAX_DEPTH)
			abort();
		size_t klen;

		/* a key without a NUL is found by name (the first of its name: keys are unique) */
		if (key && spyre_json_key(c, &klen) == key && strlen(key) == klen && spyre_json_get(v, key) != c)
			abort();
		walk(c, depth + 1);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[256] = "";
	uint8_t sel;

	if (!size)
		return 0;
	sel = data[0] % 3;
	data++;
	size--;
	if (sel == 0) {
		struct spyre_model_config c;

		if (spyre_model_config_parse((const char *)data, size, &c, err, sizeof(err)) == 0) {
			if (spyre_model_config_validate(&c, NULL, 0))
				abort();
			(void)spyre_model_bytes(&c, 2);
		} else if (!err[0]) {
			abort();
		}
	} else if (sel == 1) {
		struct spyre_st *st;

		if (spyre_st_open_mem(data, size, &st, err, sizeof(err))) {
			if (!err[0])
				abort();
			return 0;
		}
		for (size_t i = 0; i < spyre_st_count(st); i++) {
			const struct spyre_st_tensor *t = spyre_st_tensor_at(st, i);
			float *out = malloc(t->nelem ? t->nelem * sizeof(float) : 1);

			if (!out)
				continue;
			if (spyre_st_read_f32(st, t->name, t->rank, t->shape, out, err, sizeof(err)))
				abort();
			free(out);
		}
		struct spyre_model_config c = model_micro_config();
		struct spyre_model_weights w;

		err[0] = 0;
		if (spyre_model_weights_load(&c, st, &w, err, sizeof(err)) == 0)
			spyre_model_weights_free(&w);
		else if (!err[0])
			abort();
		spyre_st_close(st);
	} else {
		struct spyre_json *doc;

		if (spyre_json_parse((const char *)data, size, &doc, err, sizeof(err)) == 0) {
			walk(spyre_json_root(doc), 0);
			spyre_json_free(doc);
		} else if (!err[0]) {
			abort();
		}
	}
	return 0;
}
