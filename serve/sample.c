// SPDX-License-Identifier: MIT
/*
 * sample.c - temperature, top-k, top-p sampling with a per-request
 * xoshiro256** generator (sample.h).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "ref.h"
#include "sample.h"

void spyre_rng_seed(struct spyre_rng *r, uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		r->s[i] = spyre_splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t spyre_rng_next(struct spyre_rng *r)
{
	uint64_t *s = r->s, out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return out;
}

double spyre_rng_uniform(struct spyre_rng *r)
{
	return (double)(spyre_rng_next(r) >> 11) * 0x1.0p-53;
}

int spyre_sampling_check(const struct spyre_sampling *s)
{
	if (!(s->temperature >= 0.0f && s->temperature <= 1e4f))
		return -EINVAL;
	if (!(s->top_p > 0.0f && s->top_p <= 1.0f))
		return -EINVAL;
	return 0;
}

struct cand {
	float logit;
	int32_t id;
};

static int cand_cmp(const void *pa, const void *pb)
{
	const struct cand *a = pa, *b = pb;

	if (a->logit != b->logit)
		return a->logit > b->logit ? -1 : 1;
	return a->id < b->id ? -1 : a->id > b->id;
}

size_t spyre_sample_scratch_size(uint32_t vocab)
{
	return (size_t)vocab * (sizeof(struct cand) + sizeof(double));
}

int32_t spyre_sample(const float *logits, uint32_t vocab, const struct spyre_sampling *s, struct spyre_rng *rng,
		     void *scratch)
{
	struct cand *c = scratch;
	double *p = (double *)(c + vocab), sum = 0.0, u, acc;
	uint32_t n = vocab, k;
	float inv_t;

	if (s->temperature == 0.0f || vocab < 2)
		return spyre_argmax(logits, vocab);
	inv_t = 1.0f / s->temperature;
	for (uint32_t i = 0; i < vocab; i++) {
		c[i].logit = isnan(logits[i]) ? -INFINITY : logits[i] * inv_t;
		c[i].id = (int32_t)i;
	}
	k = s->top_k && s->top_k < vocab ? s->top_k : vocab;
	if (k < vocab || s->top_p < 1.0f) {
		qsort(c, vocab, sizeof(*c), cand_cmp);
		n = k;
	}
	/* softmax over the n kept (max subtracted) */
	{
		float m = -INFINITY;

		for (uint32_t i = 0; i < n; i++)
			if (c[i].logit > m)
				m = c[i].logit;
		if (m == -INFINITY)
			return spyre_argmax(logits, vocab);
		for (uint32_t i = 0; i < n; i++) {
			p[i] = exp((double)c[i].logit - (double)m);
			sum += p[i];
		}
	}
	if (s->top_p < 1.0f) {
		/* the smallest prefix (sorted, most probable first) reaching top_p */
		double need = (double)s->top_p * sum, run = 0.0;
		uint32_t keep = 0;

		while (keep < n) {
			run += p[keep++];
			if (run >= need)
				break;
		}
		n = keep;
		sum = run;
	}
	u = spyre_rng_uniform(rng) * sum;
	acc = 0.0;
	for (uint32_t i = 0; i < n; i++) {
		acc += p[i];
		if (u < acc)
			return c[i].id;
	}
	/* rounding left u at the very top: the last token with mass */
	for (uint32_t i = n; i-- > 0;)
		if (p[i] > 0.0)
			return c[i].id;
	return c[0].id;
}
