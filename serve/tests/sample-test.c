// SPDX-License-Identifier: MIT
/*
 * Description: host sampling (serve/sample.h). The PRNG: xoshiro256** from
 * splitmix64 gives the published first outputs of splitmix64 for seed 0
 * (so the documented generator is the one implemented), the same stream for
 * the same seed and another for another seed, uniforms in [0, 1). Greedy
 * (temperature 0) equals spyre_argmax on 200 random rows, ties to the lower
 * id. Distributions, 40,000 draws each with fixed seeds, Pearson chi-square
 * against the exact probabilities below the 99.9% quantile (df 7: 24.32;
 * df 2: 13.82; df 3: 16.27): temperature 0.7 over 8 tokens; top-k 3 (never a
 * token outside the 3 largest); top-p 0.6 (never outside the nucleus, which
 * is computed independently here); top-k and top-p together. NaN logits are
 * never drawn; all -inf falls back to argmax. Bad parameters: negative,
 * NaN or huge temperature, top_p 0, > 1 or NaN.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "ref.h"
#include "sample.h"
#include "../../tests/tap.h"

static void test_prng(void)
{
	uint64_t st = 0;
	struct spyre_rng a, b, c;
	uint32_t same = 0;

	/* splitmix64 from 0: the reference implementation's first two outputs */
	TAP_EQ(0xe220a8397b1dcdafull, spyre_splitmix64(&st));
	TAP_EQ(0x6e789e6aa1b965f4ull, spyre_splitmix64(&st));
	spyre_rng_seed(&a, 7);
	spyre_rng_seed(&b, 7);
	spyre_rng_seed(&c, 8);
	for (int i = 0; i < 1000; i++) {
		uint64_t x = spyre_rng_next(&a), y = spyre_rng_next(&b), z = spyre_rng_next(&c);

		TAP_CHECK(x == y, "draw %d differs for the same seed", i);
		same += x == z;
		if (x != y)
			break;
	}
	TAP_EQ(0u, same);
	for (int i = 0; i < 100000; i++) {
		double u = spyre_rng_uniform(&a);

		if (!(u >= 0.0 && u < 1.0)) {
			TAP_CHECK(0, "uniform %g out of [0, 1)", u);
			break;
		}
	}
}

static struct spyre_sampling samp(float t, uint32_t k, float p)
{
	struct spyre_sampling s = { .temperature = t, .top_p = p, .top_k = k };

	return s;
}

static void test_greedy(void)
{
	float l[50];
	struct spyre_rng r;
	struct spyre_sampling s = samp(0, 0, 1);
	uint64_t st = 5;

	spyre_rng_seed(&r, 1);
	for (int i = 0; i < 200; i++) {
		for (int j = 0; j < 50; j++)
			l[j] = (float)(spyre_splitmix64(&st) % 1000) / 100.0f;
		if (i == 0) {
			l[3] = l[7] = 100.0f;	/* a tie: the lower id */
			TAP_EQ(3, spyre_sample(l, 50, &s, &r, NULL));
		}
		TAP_EQ(spyre_argmax(l, 50), spyre_sample(l, 50, &s, &r, NULL));
	}
	/* greedy draws nothing from the generator */
	{
		struct spyre_rng r2;

		spyre_rng_seed(&r2, 1);
		TAP_EQ(spyre_rng_next(&r2), spyre_rng_next(&r));
	}
}

/* Draw n tokens; counts[] by token. */
static void draw(const float *l, uint32_t v, const struct spyre_sampling *s, uint64_t seed, uint32_t n,
		 uint32_t *counts)
{
	struct spyre_rng r;
	void *scratch = malloc(spyre_sample_scratch_size(v));

	spyre_rng_seed(&r, seed);
	for (uint32_t i = 0; i < v; i++)
		counts[i] = 0;
	for (uint32_t i = 0; i < n; i++) {
		int32_t t = spyre_sample(l, v, s, &r, scratch);

		if (t >= 0 && (uint32_t)t < v)
			counts[t]++;
	}
	free(scratch);
}

/* Pearson chi-square of counts against probabilities p (tokens with p == 0 must have no count). */
static double chi2(const uint32_t *counts, const double *p, uint32_t v, uint32_t n, uint32_t *outside)
{
	double x = 0;

	*outside = 0;
	for (uint32_t i = 0; i < v; i++) {
		if (p[i] == 0.0) {
			*outside += counts[i];
			continue;
		}
		x += (counts[i] - n * p[i]) * (counts[i] - n * p[i]) / (n * p[i]);
	}
	return x;
}

static const float L8[8] = { 1.0f, 0.2f, -0.5f, 2.0f, 0.9f, 0.0f, 1.5f, -1.0f };
/* order by logit: 3 (2.0), 6 (1.5), 0 (1.0), 4 (0.9), 1, 5, 2, 7 */

static void softmax(const float *l, const bool *keep, uint32_t v, double t, double *p)
{
	double s = 0;

	for (uint32_t i = 0; i < v; i++) {
		p[i] = keep[i] ? exp(l[i] / t) : 0.0;
		s += p[i];
	}
	for (uint32_t i = 0; i < v; i++)
		p[i] /= s;
}

enum { N = 40000 };

static void test_temperature(void)
{
	bool keep[8] = { 1, 1, 1, 1, 1, 1, 1, 1 };
	double p[8];
	uint32_t c[8], out;
	struct spyre_sampling s = samp(0.7f, 0, 1);

	softmax(L8, keep, 8, 0.7f, p);
	draw(L8, 8, &s, 11, N, c);
	TAP_CMP(chi2(c, p, 8, N, &out), <, 24.32);
	/* the same seed, the same counts; another, other counts */
	{
		uint32_t c2[8], c3[8];

		draw(L8, 8, &s, 11, N, c2);
		draw(L8, 8, &s, 12, N, c3);
		TAP_CHECK(!memcmp(c, c2, sizeof(c)), "same seed, other draws");
		TAP_CHECK(memcmp(c, c3, sizeof(c)), "another seed, the same draws");
	}
	/* a high temperature flattens: every token drawn */
	s = samp(100.0f, 0, 1);
	draw(L8, 8, &s, 13, N, c);
	for (int i = 0; i < 8; i++)
		TAP_CMP(c[i], >, (uint32_t)(N / 8 * 0.9));
}

static void test_top_k(void)
{
	bool keep[8] = { [3] = 1, [6] = 1, [0] = 1 };
	double p[8];
	uint32_t c[8], out;
	struct spyre_sampling s = samp(1.0f, 3, 1);

	softmax(L8, keep, 8, 1.0, p);
	draw(L8, 8, &s, 21, N, c);
	TAP_CMP(chi2(c, p, 8, N, &out), <, 13.82);
	TAP_EQ(0u, out);
	/* k 1 is greedy; k >= vocab is off */
	s = samp(1.0f, 1, 1);
	draw(L8, 8, &s, 22, 1000, c);
	TAP_EQ(1000u, c[3]);
	{
		bool all[8] = { 1, 1, 1, 1, 1, 1, 1, 1 };

		s = samp(1.0f, 100, 1);
		softmax(L8, all, 8, 1.0, p);
		draw(L8, 8, &s, 23, N, c);
		TAP_CMP(chi2(c, p, 8, N, &out), <, 24.32);
	}
}

static void test_top_p(void)
{
	bool all[8] = { 1, 1, 1, 1, 1, 1, 1, 1 }, keep[8] = { 0 };
	const int order[8] = { 3, 6, 0, 4, 1, 5, 2, 7 };
	double p[8], run = 0;
	uint32_t c[8], out, nk = 0;
	struct spyre_sampling s = samp(1.0f, 0, 0.6f);

	/* the nucleus, independently: the most probable first until the sum reaches 0.6 */
	softmax(L8, all, 8, 1.0, p);
	for (int i = 0; i < 8 && run < 0.6; i++) {
		keep[order[i]] = true;
		run += p[order[i]];
		nk++;
	}
	TAP_EQ(3u, nk);	/* 0.33 + 0.20 + 0.12 < 0.6, + 0.11 */
	softmax(L8, keep, 8, 1.0, p);
	draw(L8, 8, &s, 31, N, c);
	TAP_CMP(chi2(c, p, 8, N, &out), <, 16.27);
	TAP_EQ(0u, out);
	/* top-k 2, then top-p over those two (renormalized: 0.622, 0.378): 0.6 keeps one, 0.7 both */
	s = samp(1.0f, 2, 0.6f);
	draw(L8, 8, &s, 34, 1000, c);
	TAP_EQ(1000u, c[3]);
	{
		bool k2[8] = { [3] = 1, [6] = 1 };

		s = samp(1.0f, 2, 0.7f);
		softmax(L8, k2, 8, 1.0, p);
		draw(L8, 8, &s, 32, N, c);
		TAP_CMP(chi2(c, p, 8, N, &out), <, 10.83);	/* df 1 */
		TAP_EQ(0u, out);
	}
	/* a tiny top_p keeps the top token only */
	s = samp(1.0f, 0, 0.01f);
	draw(L8, 8, &s, 33, 1000, c);
	TAP_EQ(1000u, c[3]);
}

static void test_odd_logits(void)
{
	float l[4] = { NAN, 1.0f, NAN, 0.5f }, m[3] = { -INFINITY, -INFINITY, -INFINITY };
	uint32_t c[4];
	struct spyre_sampling s = samp(1.0f, 0, 1), s2 = samp(1.0f, 2, 0.9f);
	struct spyre_rng r;

	draw(l, 4, &s, 41, 2000, c);
	TAP_EQ(0u, c[0] + c[2]);
	TAP_EQ(2000u, c[1] + c[3]);
	draw(l, 4, &s2, 42, 2000, c);
	TAP_EQ(0u, c[0] + c[2]);
	spyre_rng_seed(&r, 1);
	{
		void *scr = malloc(spyre_sample_scratch_size(3));

		TAP_EQ(0, spyre_sample(m, 3, &s, &r, scr));
		free(scr);
	}
}

static void test_check(void)
{
	struct spyre_sampling s;

	s = samp(0, 0, 1);
	TAP_EQ(0, spyre_sampling_check(&s));
	s = samp(1e4f, 100000, 0.001f);
	TAP_EQ(0, spyre_sampling_check(&s));
	s = samp(-0.1f, 0, 1);
	TAP_EQ(-EINVAL, spyre_sampling_check(&s));
	s = samp(NAN, 0, 1);
	TAP_EQ(-EINVAL, spyre_sampling_check(&s));
	s = samp(INFINITY, 0, 1);
	TAP_EQ(-EINVAL, spyre_sampling_check(&s));
	s = samp(1, 0, 0);
	TAP_EQ(-EINVAL, spyre_sampling_check(&s));
	s = samp(1, 0, 1.01f);
	TAP_EQ(-EINVAL, spyre_sampling_check(&s));
	s = samp(1, 0, NAN);
	TAP_EQ(-EINVAL, spyre_sampling_check(&s));
}

static const struct tap_case cases[] = {
	{ "prng", test_prng },
	{ "greedy", test_greedy },
	{ "temperature", test_temperature },
	{ "top-k", test_top_k },
	{ "top-p", test_top_p },
	{ "odd-logits", test_odd_logits },
	{ "check", test_check },
};

int main(int argc, char **argv)
{
	return TAP_RUN(cases, argc, argv);
}
