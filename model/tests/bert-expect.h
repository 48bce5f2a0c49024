/* SPDX-License-Identifier: MIT */
/*
 * bert-expect.h - the expected embeddings bert_ref.py writes (the host's
 * sentence-transformers on the CPU): read by the encoder's host test and by
 * spyre-embed --expect (the card's test in the VM). {"model_dir": "...",
 * "sentences": [...], "ids": [[...], ...], "embeddings": [[...], ...]}.
 */
#ifndef SPYRE_MODEL_BERT_EXPECT_H
#define SPYRE_MODEL_BERT_EXPECT_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfgfield.h"
#include "json.h"

struct bert_expect {
	uint32_t n, hidden, total;	/* sentences, vector size, ids in all */
	char model_dir[4096];
	int32_t *ids;			/* packed: sentence i is lens[i] ids */
	uint32_t *lens;
	float *emb;			/* [n][hidden] */
};

static inline void bert_expect_free(struct bert_expect *e)
{
	free(e->ids);
	free(e->lens);
	free(e->emb);
	memset(e, 0, sizeof(*e));
}

/* 0, or -1 with a message in @err. */
static inline int bert_expect_load(const char *path, struct bert_expect *e, char *err, size_t errlen)
{
	struct spyre_json *doc = NULL;
	const struct spyre_json_node *r, *ids, *emb;
	char *text, msg[256];
	size_t len;
	const char *dir;

	memset(e, 0, sizeof(*e));
	if (spyre_cfg_read_file(path, 64u << 20, &text, &len, err, errlen))
		return -1;
	if (spyre_json_parse(text, len, &doc, msg, sizeof(msg))) {
		free(text);
		snprintf(err, errlen, "%s: %s", path, msg);
		return -1;
	}
	free(text);
	r = spyre_json_root(doc);
	ids = spyre_json_get(r, "ids");
	emb = spyre_json_get(r, "embeddings");
	dir = spyre_json_string(spyre_json_get(r, "model_dir"), NULL);
	if (!ids || !emb || !dir || spyre_json_count(ids) != spyre_json_count(emb) || !spyre_json_count(ids))
		goto bad;
	snprintf(e->model_dir, sizeof(e->model_dir), "%s", dir);
	e->n = (uint32_t)spyre_json_count(ids);
	e->hidden = (uint32_t)spyre_json_count(spyre_json_at(emb, 0, NULL));
	for (uint32_t i = 0; i < e->n; i++)
		e->total += (uint32_t)spyre_json_count(spyre_json_at(ids, i, NULL));
	e->ids = malloc(e->total * sizeof(*e->ids) + 1);
	e->lens = malloc(e->n * sizeof(*e->lens));
	e->emb = malloc((size_t)e->n * e->hidden * sizeof(*e->emb) + 1);
	if (!e->ids || !e->lens || !e->emb || !e->hidden)
		goto bad;
	for (uint32_t i = 0, k = 0; i < e->n; i++) {
		const struct spyre_json_node *row = spyre_json_at(ids, i, NULL), *vec = spyre_json_at(emb, i, NULL);
		double d;

		e->lens[i] = (uint32_t)spyre_json_count(row);
		for (uint32_t j = 0; j < e->lens[i]; j++, k++) {
			if (spyre_json_number(spyre_json_at(row, j, NULL), &d))
				goto bad;
			e->ids[k] = (int32_t)d;
		}
		if (spyre_json_count(vec) != e->hidden)
			goto bad;
		for (uint32_t j = 0; j < e->hidden; j++) {
			if (spyre_json_number(spyre_json_at(vec, j, NULL), &d))
				goto bad;
			e->emb[(size_t)i * e->hidden + j] = (float)d;
		}
	}
	spyre_json_free(doc);
	return 0;
bad:
	spyre_json_free(doc);
	bert_expect_free(e);
	snprintf(err, errlen, "%s: not an expected-embeddings file (model_dir, ids, embeddings)", path);
	return -1;
}

/* cos(a, b) over n floats, in double. */
static inline double bert_cosine(const float *a, const float *b, uint32_t n)
{
	double ab = 0, aa = 0, bb = 0;

	for (uint32_t i = 0; i < n; i++) {
		ab += (double)a[i] * b[i];
		aa += (double)a[i] * a[i];
		bb += (double)b[i] * b[i];
	}
	return aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : 0;
}

#endif /* SPYRE_MODEL_BERT_EXPECT_H */
