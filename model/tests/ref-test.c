// SPDX-License-Identifier: MIT
/*
 * Description: the CPU reference transformer (model/ref.h) and the model
 * weights (model/weights.h). The kernels on hand-checkable cases (RMSNorm of
 * a known vector, RoPE identity at position 0 and a known rotation at p,
 * attention over one position returning v, the GQA head mapping, softmax
 * weights, SiLU, argmax ties); the fp16/bf16/DLFloat16 roundings on chosen
 * values, and each one the round trip through the ISA library's conversions
 * (isa/spyre_dtype.h) on about 1.6 million fp32 patterns; the whole
 * model against an independent, plain double-precision implementation in
 * this file (three shapes: tiny, untied with kv_heads == heads, and hidden !=
 * heads * head_dim); prefill of n tokens == n decode steps == chunked
 * prefill; greedy decoding of the tiny random model deterministic, not
 * degenerate, and the same tokens in fp16 and DLFloat16; the logits of a
 * storage dtype are values of that dtype; errors (token id, position,
 * n = 0) leave the state alone; weights saved and loaded (F32 exact, BF16
 * rounded), and a missing, unexpected or misshapen tensor is named.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ref.h"
#include "safetensors.h"
#include "spyre_dtype.h"
#include "weights.h"
#include "test-util.h"
#include "../../tests/tap.h"

static char err[512];

static double rel_err(const float *a, const float *b, uint32_t n)
{
	double d = 0, m = 0;

	for (uint32_t i = 0; i < n; i++) {
		if (fabs((double)a[i] - b[i]) > d)
			d = fabs((double)a[i] - b[i]);
		if (fabs((double)b[i]) > m)
			m = fabs((double)b[i]);
	}
	return m > 0 ? d / m : d;
}

/* ---- kernels ---- */

static void test_rmsnorm(void)
{
	const float x[4] = { 3, 4, 0, -5 }, w[4] = { 1, 2, 3, 0.5f };
	float out[4];

	/* mean(x^2) = 50 / 4 = 12.5; eps 0.5: 1/sqrt(13) */
	spyre_ref_rmsnorm(x, w, 4, 0.5f, out);
	for (int i = 0; i < 4; i++)
		TAP_CHECK(fabs(out[i] - x[i] * w[i] / sqrt(13.0)) < 1e-6, "out[%d] = %.9g, expected %.9g", i, out[i],
			  x[i] * w[i] / sqrt(13.0));
	spyre_ref_rmsnorm(x, w, 4, 1e-6f, out);
	TAP_CHECK(fabs(out[0] - 3.0 / sqrt(12.5)) < 1e-6, "eps 1e-6: %.9g", out[0]);
	/* in place */
	float y[4] = { 3, 4, 0, -5 };

	spyre_ref_rmsnorm(y, w, 4, 1e-6f, y);
	TAP_CHECK(!memcmp(y, out, sizeof(y)), "in place");
}

static void test_rope(void)
{
	float v[16], orig[16];

	for (int i = 0; i < 16; i++)
		v[i] = orig[i] = (float)(i + 1) * 0.25f - 1.5f;
	spyre_ref_rope(v, 2, 8, 0, 10000.0f);
	TAP_CHECK(!memcmp(v, orig, sizeof(v)), "position 0 is the identity");
	/* head_dim 8: inv_freq = 10000^(-2i/8) = 1, 0.1, 0.01, 0.001 */
	TAP_CHECK(spyre_ref_rope_inv_freq(0, 8, 10000.0f) == 1.0f, "inv_freq 0");
	TAP_CHECK(fabsf(spyre_ref_rope_inv_freq(1, 8, 10000.0f) - 0.1f) < 1e-8f, "inv_freq 1 = %.9g",
		  spyre_ref_rope_inv_freq(1, 8, 10000.0f));
	TAP_CHECK(fabsf(spyre_ref_rope_inv_freq(3, 8, 10000.0f) - 0.001f) < 1e-10f, "inv_freq 3");
	/* pair (1, 5) of head 1 rotates by 3 * 0.1 at position 3; the rest stays put */
	memset(v, 0, sizeof(v));
	v[8 + 1] = 1.0f;
	v[8 + 5] = 0.5f;
	spyre_ref_rope(v, 2, 8, 3, 10000.0f);
	TAP_CHECK(fabs(v[9] - (cos(0.3) - 0.5 * sin(0.3))) < 1e-6 && fabs(v[13] - (0.5 * cos(0.3) + sin(0.3))) < 1e-6,
		  "(1, 0.5) -> (%.7f, %.7f)", v[9], v[13]);
	for (int i = 0; i < 16; i++)
		if (i != 9 && i != 13)
			TAP_CHECK(v[i] == 0.0f, "v[%d] = %g stays 0", i, v[i]);
	/* rotations compose and keep the norm: p = 2 then p = 5 equals p = 7 */
	float a[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, b[8];

	memcpy(b, a, sizeof(a));
	spyre_ref_rope(a, 1, 8, 2, 10000.0f);
	spyre_ref_rope(a, 1, 8, 5, 10000.0f);
	spyre_ref_rope(b, 1, 8, 7, 10000.0f);
	TAP_CHECK(rel_err(a, b, 8) < 1e-6, "2 + 5 == 7: %g", rel_err(a, b, 8));
}

static void test_attention(void)
{
	/* heads 4, kv_heads 2, head_dim 2: query heads 0,1 read kv head 0; 2,3 read kv head 1 */
	const float q[8] = { 1, 0, 0, 1, 1, 1, -1, 0 };
	const float k1[4] = { 0.5f, 0.5f, 2, -1 }, v1[4] = { 10, 20, 30, 40 };
	float out[8], p[4];

	spyre_ref_attention(q, k1, v1, 1, 4, 2, 2, 0.7f, out, p);
	const float want1[8] = { 10, 20, 10, 20, 30, 40, 30, 40 };

	TAP_CHECK(!memcmp(out, want1, sizeof(out)), "one position returns v, by GQA group: %g %g %g %g %g %g %g %g",
		  out[0], out[1], out[2], out[3], out[4], out[5], out[6], out[7]);
	/* two positions: weights softmax(q.k * scale) */
	const float k2[8] = { 1, 0, 0, 0, /* pos 1 */ 0, 1, 0, 0 };
	const float v2[8] = { 1, 0, 5, 5, /* pos 1 */ 0, 1, 7, 7 };

	spyre_ref_attention(q, k2, v2, 2, 4, 2, 2, 2.0f, out, p);
	double e = exp(2.0), w0 = e / (e + 1), w1 = 1 / (e + 1);

	/* head 0 (q 1,0): scores 2, 0; head 1 (q 0,1): 0, 2; heads 2, 3: kv head 1 has zero keys: uniform */
	TAP_CHECK(fabs(out[0] - w0) < 1e-6 && fabs(out[1] - w1) < 1e-6, "head 0: %g %g", out[0], out[1]);
	TAP_CHECK(fabs(out[2] - w1) < 1e-6 && fabs(out[3] - w0) < 1e-6, "head 1: %g %g", out[2], out[3]);
	TAP_CHECK(fabs(out[4] - 6) < 1e-6 && fabs(out[7] - 6) < 1e-6, "heads 2, 3: %g %g", out[4], out[7]);
	/* large scores do not overflow (the max is subtracted) */
	const float qb[2] = { 1000, 0 }, kb[4] = { 1, 0, 0.9f, 0 }, vb[4] = { 1, 2, 3, 4 };

	spyre_ref_attention(qb, kb, vb, 2, 1, 1, 2, 1.0f, out, p);
	TAP_CHECK(fabs(out[0] - 1) < 1e-6 && fabs(out[1] - 2) < 1e-6, "scores 1000, 900: %g %g", out[0], out[1]);
}

static void test_small_kernels(void)
{
	TAP_CHECK(spyre_ref_silu(0) == 0.0f, "silu 0");
	TAP_CHECK(fabsf(spyre_ref_silu(1) - 0.7310586f) < 1e-6f, "silu 1 = %.7f", spyre_ref_silu(1));
	TAP_CHECK(spyre_ref_silu(-100) > -1e-30f && spyre_ref_silu(-100) <= 0, "silu -100 = %g", spyre_ref_silu(-100));
	TAP_CHECK(spyre_ref_silu(-1000) == 0.0f, "silu -1000 (exp overflows) = %g", spyre_ref_silu(-1000));
	const float v[6] = { 1, 3, NAN, 3, -INFINITY, 2 };
	const float nans[2] = { NAN, NAN };

	TAP_EQ(1, spyre_argmax(v, 6));		/* the first of the ties; NaN never wins */
	TAP_EQ(0, spyre_argmax(v, 1));
	TAP_EQ(-1, spyre_argmax(v, 0));
	TAP_EQ(0, spyre_argmax(nans, 2));
	TAP_EQ(1, spyre_argmax((const float[]){ NAN, -5, -4.5f }, 2));
	/* matmul: [2,3] x [2,3]^T */
	const float x[6] = { 1, 2, 3, 4, 5, 6 }, w[6] = { 1, 0, -1, 0.5f, 0.5f, 0.5f };
	float y[4];

	spyre_ref_matmul(x, 2, w, 2, 3, y);
	TAP_CHECK(y[0] == -2 && y[1] == 3 && y[2] == -2 && y[3] == 7.5f, "matmul %g %g %g %g", y[0], y[1], y[2], y[3]);
}

static void test_roundings(void)
{
	/* fp16 */
	TAP_CHECK(isinf(spyre_ref_round_f16(65520.0f)), "65520 -> fp16 inf");
	TAP_CHECK(spyre_ref_round_f16(65519.0f) == 65504.0f, "65519 -> 65504");
	TAP_CHECK(spyre_ref_round_f16(1.0f / 3) == 0.333251953125f, "1/3 -> %.12g", spyre_ref_round_f16(1.0f / 3));
	TAP_CHECK(spyre_ref_round_f16(1e-8f) == 0.0f && spyre_ref_round_f16(4e-8f) == 5.9604644775390625e-8f,
		  "fp16 subnormal edge");
	/* DLFloat16: 1/3 = 2^-2 * 1.333..; fraction 171/512 after rounding: exponent 29, bits 0x3aab */
	TAP_EQ(0x3aab, spyre_f32_to_dl16(1.0f / 3));
	TAP_CHECK(spyre_ref_round_dl16(1.0f / 3) == 0.33349609375f, "1/3 -> %.12g", spyre_ref_round_dl16(1.0f / 3));
	TAP_EQ(0x3e00, spyre_f32_to_dl16(1.0f));
	TAP_CHECK(spyre_ref_round_dl16(1.0f + 1.0f / 1024) == 1.0f + 1.0f / 512, "a tie goes away from zero");
	TAP_CHECK(spyre_ref_round_dl16(-(1.0f + 1.0f / 1024)) == -(1.0f + 1.0f / 512), "negative tie away");
	TAP_CHECK(spyre_ref_round_dl16(1.0f + 1.0f / 1024 - 1.0f / 8388608) == 1.0f, "below the tie");
	/* the bottom: the exponent field 0 with fraction 0 is the zero code, so 2^-31 itself is 0;
	 * 2^-31 * (1 + 2^-9) is the smallest non-zero value; below 2^-31 flushes (no subnormals) */
	const float two_m31 = ldexpf(1.0f, -31);

	TAP_CHECK(spyre_ref_round_dl16(two_m31) == 0.0f, "2^-31 -> 0");
	TAP_CHECK(spyre_ref_round_dl16(two_m31 * (1 + 1.0f / 512)) == two_m31 * (1 + 1.0f / 512),
		  "2^-31 (1 + 2^-9) is exact");
	TAP_EQ(0x0001, spyre_f32_to_dl16(two_m31 * (1 + 1.0f / 512)));
	TAP_CHECK(spyre_ref_round_dl16(ldexpf(1.0f, -32)) == 0.0f, "2^-32 -> 0");
	TAP_CHECK(spyre_ref_round_dl16(two_m31 * 0.9999f) == 0.0f, "just below 2^-31 rounds up to the zero code");
	TAP_CHECK(signbit(spyre_ref_round_dl16(-ldexpf(1.0f, -40))), "-tiny -> -0");
	/* the top: 0x7ffe = 2^32 * (1 + 510/512); more is NaN (the one inf/NaN code) */
	TAP_CHECK(spyre_dl16_to_f32(0x7ffe) == ldexpf(1.0f + 510.0f / 512, 32), "largest dl16");
	TAP_CHECK(spyre_ref_round_dl16(ldexpf(1.0f + 510.0f / 512, 32)) == ldexpf(1.0f + 510.0f / 512, 32), "max exact");
	TAP_CHECK(isnan(spyre_ref_round_dl16(1e10f)), "1e10 -> NaN");
	TAP_EQ(0xffff, spyre_f32_to_dl16(-INFINITY));
	TAP_CHECK(isnan(spyre_ref_round_dl16(INFINITY)) && isnan(spyre_ref_round_dl16(NAN)), "inf, NaN -> NaN");
	TAP_CHECK(spyre_ref_round_dl16(65520.0f) == 65536.0f, "dl16 has range: 65520 -> 65536");
	/* bf16 */
	TAP_CHECK(spyre_ref_round_bf16(1.0f / 3) == 0.333984375f, "bf16 1/3");
	/* the codes */
	TAP_CHECK(spyre_ref_round_fn(0) == spyre_ref_round_none && spyre_ref_round_fn(1) == spyre_ref_round_f16 &&
		  spyre_ref_round_fn(2) == spyre_ref_round_bf16 && spyre_ref_round_fn(3) == spyre_ref_round_dl16 &&
		  !spyre_ref_round_fn(4), "dtype codes");
	TAP_STREQ("dl16", spyre_ref_dtype_name(3));
}

static int same_float(float a, float b)
{
	return (isnan(a) && isnan(b)) || !memcmp(&a, &b, sizeof(a));
}

/* The storage roundings of the reference are the ISA's (what the device stores): f -> dtype -> f32. */
static unsigned int rounding_misses(float f)
{
	return !same_float(spyre_ref_round_f16(f), spyre_f16_to_f32(spyre_f32_to_f16(f))) +
	       !same_float(spyre_ref_round_bf16(f), spyre_bf16_to_f32(spyre_f32_to_bf16(f))) +
	       !same_float(spyre_ref_round_dl16(f), spyre_dl16_to_f32(spyre_f32_to_dl16(f)));
}

static void test_roundings_are_isa(void)
{
	unsigned int bad = 0;
	uint64_t n = 0;
	float f;

	/* about 1.6 million fp32 patterns: a stride through all of them, and around every fp16/dl16 step */
	for (uint64_t u = 0; u <= 0xffffffffull; u += 4099, n++) {
		uint32_t b = (uint32_t)u;

		memcpy(&f, &b, sizeof(f));
		bad += rounding_misses(f);
	}
	for (uint32_t e = 0; e < 0x200; e++)
		for (uint32_t d = 0; d < 0x400; d += 3, n++) {
			uint32_t u = e << 23 | (0x1000u - 2 + (d & 3)) << ((d >> 2) % 11) | (d >> 2);

			u |= e & 0x100 ? 0x80000000u : 0;
			memcpy(&f, &u, sizeof(f));
			bad += rounding_misses(f);
		}
	TAP_EQ(0, bad);
	tap_diag("%llu fp32 values: spyre_ref_round_{f16,bf16,dl16} == the isa/dtype.c round trips",
		 (unsigned long long)n);
}

/* ---- an independent implementation in double ---- */

static void naive_rmsnorm(const double *x, const float *w, uint32_t n, double eps, double *out)
{
	double ss = 0;

	for (uint32_t i = 0; i < n; i++)
		ss += x[i] * x[i];
	for (uint32_t i = 0; i < n; i++)
		out[i] = x[i] / sqrt(ss / n + eps) * w[i];
}

/* out[o] = sum_i W[o][i] in[i], W [rows, cols] */
static void naive_linear(const float *W, uint32_t rows, uint32_t cols, const double *in, double *out)
{
	for (uint32_t o = 0; o < rows; o++) {
		double s = 0;

		for (uint32_t i = 0; i < cols; i++)
			s += (double)W[(size_t)o * cols + i] * in[i];
		out[o] = s;
	}
}

static void naive_rope(double *v, uint32_t nheads, uint32_t hd, uint32_t pos, double theta)
{
	for (uint32_t h = 0; h < nheads; h++)
		for (uint32_t i = 0; i < hd / 2; i++) {
			double ang = pos * pow(theta, -2.0 * i / hd), *x = v + h * hd;
			double a = x[i], b = x[i + hd / 2];

			/* HF: x * cos + rotate_half(x) * sin, rotate_half(x) = cat(-x2, x1) */
			x[i] = a * cos(ang) - b * sin(ang);
			x[i + hd / 2] = b * cos(ang) + a * sin(ang);
		}
}

/* The logits after tokens[0..n): everything recomputed from scratch, no cache. */
static void naive_logits(const struct spyre_model_config *c, const struct spyre_model_weights *w,
			 const int32_t *tok, uint32_t n, float *logits)
{
	uint32_t H = c->hidden, D = c->head_dim, Q = c->heads * D, KV = c->kv_heads * D, F = c->ffn;
	double *x = calloc((size_t)n * H, sizeof(double)), *h = calloc(H > Q ? H : Q, sizeof(double));
	double *q = calloc((size_t)n * Q, sizeof(double)), *k = calloc((size_t)n * KV, sizeof(double));
	double *v = calloc((size_t)n * KV, sizeof(double)), *a = calloc(Q, sizeof(double));
	double *o = calloc(H, sizeof(double)), *g = calloc(F, sizeof(double)), *u = calloc(F, sizeof(double));
	double *p = calloc(n, sizeof(double)), *lg = calloc(c->vocab, sizeof(double));

	for (uint32_t t = 0; t < n; t++)
		for (uint32_t i = 0; i < H; i++)
			x[t * H + i] = (double)w->embed[(size_t)tok[t] * H + i] * c->embedding_multiplier;
	for (uint32_t l = 0; l < c->layers; l++) {
		const struct spyre_layer_weights *L = &w->layer[l];

		for (uint32_t t = 0; t < n; t++) {
			naive_rmsnorm(x + t * H, L->attn_norm, H, c->norm_eps, h);
			naive_linear(L->wq, Q, H, h, q + t * Q);
			naive_linear(L->wk, KV, H, h, k + t * KV);
			naive_linear(L->wv, KV, H, h, v + t * KV);
			naive_rope(q + t * Q, c->heads, D, t, c->rope_theta);
			naive_rope(k + t * KV, c->kv_heads, D, t, c->rope_theta);
		}
		for (uint32_t t = 0; t < n; t++) {
			for (uint32_t hh = 0; hh < c->heads; hh++) {
				uint32_t kvh = hh / (c->heads / c->kv_heads);
				double m = -INFINITY, sum = 0;

				for (uint32_t s = 0; s <= t; s++) {
					double d = 0;

					for (uint32_t i = 0; i < D; i++)
						d += q[t * Q + hh * D + i] * k[s * KV + kvh * D + i];
					p[s] = d * c->attention_multiplier;
					m = p[s] > m ? p[s] : m;
				}
				for (uint32_t s = 0; s <= t; s++)
					sum += p[s] = exp(p[s] - m);
				for (uint32_t i = 0; i < D; i++) {
					double acc = 0;

					for (uint32_t s = 0; s <= t; s++)
						acc += p[s] / sum * v[s * KV + kvh * D + i];
					a[hh * D + i] = acc;
				}
			}
			naive_linear(L->wo, H, Q, a, o);
			for (uint32_t i = 0; i < H; i++)
				x[t * H + i] += c->residual_multiplier * o[i];
		}
		for (uint32_t t = 0; t < n; t++) {
			naive_rmsnorm(x + t * H, L->mlp_norm, H, c->norm_eps, h);
			naive_linear(L->w_gate, F, H, h, g);
			naive_linear(L->w_up, F, H, h, u);
			for (uint32_t i = 0; i < F; i++)
				g[i] = g[i] / (1 + exp(-g[i])) * u[i];
			naive_linear(L->w_down, H, F, g, o);
			for (uint32_t i = 0; i < H; i++)
				x[t * H + i] += c->residual_multiplier * o[i];
		}
	}
	naive_rmsnorm(x + (n - 1) * H, w->final_norm, H, c->norm_eps, h);
	naive_linear(w->lm_head, c->vocab, H, h, lg);
	for (uint32_t i = 0; i < c->vocab; i++)
		logits[i] = (float)(lg[i] / c->logits_scaling);
	free(x); free(h); free(q); free(k); free(v); free(a); free(o); free(g); free(u); free(p); free(lg);
}

/* Three shapes: tiny; untied with kv_heads == heads; hidden != heads * head_dim with GQA 3:1. */
static struct spyre_model_config shape(int i)
{
	struct spyre_model_config c = spyre_model_config_tiny();

	if (i == 1) {
		c.layers = 3;
		c.hidden = 48;
		c.heads = c.kv_heads = 3;
		c.head_dim = 16;
		c.ffn = 80;
		c.vocab = 70;
		c.max_pos = 40;
		c.tied_embeddings = false;
		c.embedding_multiplier = 1;
		c.attention_multiplier = 0.25f;
		c.residual_multiplier = 1;
		c.logits_scaling = 1;
		c.rope_theta = 500000;
		snprintf(c.name, sizeof(c.name), "llama");
	} else if (i == 2) {
		c.layers = 1;
		c.hidden = 40;
		c.heads = 6;
		c.kv_heads = 2;
		c.head_dim = 12;
		c.ffn = 64;
		c.vocab = 90;
		c.max_pos = 24;
	}
	return c;
}

static const int32_t prompt[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };

static void test_against_naive(void)
{
	for (int s = 0; s < 3; s++) {
		struct spyre_model_config c = shape(s);
		struct spyre_model_weights w;
		struct spyre_ref *r;
		float *got = calloc(c.vocab, sizeof(float)), *want = calloc(c.vocab, sizeof(float));
		int32_t tok[12];

		TAP_EQ(0, spyre_model_config_validate(&c, err, sizeof(err)));
		if (!TAP_CHECK(spyre_model_weights_random(&c, 7 + (uint64_t)s, &w) == 0, "weights"))
			continue;
		for (int i = 0; i < 12; i++)
			tok[i] = (int32_t)((i * 37 + 5 * s) % c.vocab);
		r = spyre_ref_new(&c, &w, SPYRE_REF_FP32);
		for (uint32_t n = 1; n <= 12; n += 5) {
			spyre_ref_reset(r);
			TAP_EQ(0, spyre_ref_prefill(r, tok, n, got));
			naive_logits(&c, &w, tok, n, want);
			TAP_CHECK(rel_err(got, want, c.vocab) < 1e-4, "shape %d, %u tokens: relative error %.3g", s, n,
				  rel_err(got, want, c.vocab));
			TAP_EQ(spyre_argmax(want, c.vocab), spyre_argmax(got, c.vocab));
		}
		spyre_ref_free(r);
		spyre_model_weights_free(&w);
		free(got);
		free(want);
	}
}

/* ---- the model ---- */

static void test_prefill_equals_decode(void)
{
	struct spyre_model_config c = spyre_model_config_tiny();
	struct spyre_model_weights w;
	float pre[512], dec[512], chunk[512];

	if (!TAP_CHECK(spyre_model_weights_random(&c, 1, &w) == 0, "weights"))
		return;
	for (unsigned int dt = 0; dt < 4; dt++) {
		struct spyre_ref *a = spyre_ref_new(&c, &w, dt), *b = spyre_ref_new(&c, &w, dt),
				 *d = spyre_ref_new(&c, &w, dt);

		TAP_EQ(0, spyre_ref_prefill(a, prompt, 8, pre));
		for (int i = 0; i < 8; i++)
			TAP_EQ(0, spyre_ref_decode(b, prompt[i], dec));
		TAP_EQ(0, spyre_ref_prefill(d, prompt, 3, NULL));
		TAP_EQ(0, spyre_ref_prefill(d, prompt + 3, 5, chunk));
		TAP_EQ(8, spyre_ref_pos(a));
		TAP_EQ(8, spyre_ref_pos(b));
		TAP_CHECK(rel_err(pre, dec, 512) < 1e-5, "%s: prefill(8) vs 8 decode steps: %.3g",
			  spyre_ref_dtype_name(dt), rel_err(pre, dec, 512));
		TAP_CHECK(rel_err(pre, chunk, 512) < 1e-5, "%s: prefill(8) vs prefill(3) + prefill(5): %.3g",
			  spyre_ref_dtype_name(dt), rel_err(pre, chunk, 512));
		/* the next step from either cache is the same too */
		TAP_EQ(0, spyre_ref_decode(a, 42, pre));
		TAP_EQ(0, spyre_ref_decode(b, 42, dec));
		TAP_CHECK(rel_err(pre, dec, 512) < 1e-5, "%s: the 9th step: %.3g", spyre_ref_dtype_name(dt),
			  rel_err(pre, dec, 512));
		/* reset: as new */
		spyre_ref_reset(a);
		TAP_EQ(0, spyre_ref_pos(a));
		TAP_EQ(0, spyre_ref_prefill(a, prompt, 8, pre));
		spyre_ref_reset(d);
		TAP_EQ(0, spyre_ref_prefill(d, prompt, 8, chunk));
		TAP_CHECK(!memcmp(pre, chunk, sizeof(pre)), "%s: after reset", spyre_ref_dtype_name(dt));
		spyre_ref_free(a);
		spyre_ref_free(b);
		spyre_ref_free(d);
	}
	spyre_model_weights_free(&w);
}

/* Greedy decoding of @n tokens after the prompt. */
static void greedy(const struct spyre_model_config *c, const struct spyre_model_weights *w, unsigned int dt,
		   int32_t *out, int n)
{
	struct spyre_ref *r = spyre_ref_new(c, w, dt);
	float *l = calloc(c->vocab, sizeof(float));

	spyre_ref_prefill(r, prompt, 8, l);
	for (int i = 0; i < n; i++) {
		out[i] = spyre_argmax(l, c->vocab);
		if (i + 1 < n)
			spyre_ref_decode(r, out[i], l);
	}
	spyre_ref_free(r);
	free(l);
}

static void test_greedy(void)
{
	struct spyre_model_config c = spyre_model_config_tiny();
	struct spyre_model_weights w, w2;
	int32_t a[32], b[32], h[32], d[32];
	/* seed 1, prompt 1..8: what the reference decodes (README); a change here changes every device check */
	static const int32_t golden[8] = { 491, 89, 28, 126, 273, 490, 188, 361 };
	int distinct = 0, agree16 = 0, agreedl = 0;

	if (!TAP_CHECK(spyre_model_weights_random(&c, 1, &w) == 0 && spyre_model_weights_random(&c, 1, &w2) == 0,
		       "weights"))
		return;
	TAP_CHECK(!memcmp(w.storage, w2.storage, w.nfloats * sizeof(float)), "the same seed, the same weights");
	greedy(&c, &w, 0, a, 32);
	greedy(&c, &w2, 0, b, 32);
	TAP_CHECK(!memcmp(a, b, sizeof(a)), "deterministic");
	for (int i = 0; i < 32; i++) {
		int seen = 0;

		for (int j = 0; j < i; j++)
			seen |= a[j] == a[i];
		distinct += !seen;
	}
	TAP_CMP(distinct, >=, 16);
	TAP_CHECK(!memcmp(a, golden, sizeof(golden)), "golden tokens: %d %d %d %d %d %d %d %d", a[0], a[1], a[2],
		  a[3], a[4], a[5], a[6], a[7]);
	greedy(&c, &w, SPYRE_REF_FP16, h, 32);
	greedy(&c, &w, SPYRE_REF_DL16, d, 32);
	while (agree16 < 32 && h[agree16] == a[agree16])
		agree16++;
	while (agreedl < 32 && d[agreedl] == a[agreedl])
		agreedl++;
	TAP_CMP(agree16, >=, 16);
	TAP_CMP(agreedl, >=, 16);
	tap_diag("seed 1: %d distinct tokens of 32; fp16 agrees for %d, dl16 for %d", distinct, agree16, agreedl);
	spyre_model_weights_free(&w2);
	TAP_EQ(0, spyre_model_weights_random(&c, 2, &w2));
	TAP_CHECK(memcmp(w.storage, w2.storage, w.nfloats * sizeof(float)), "another seed, other weights");
	/* the scales: norms in [0.9, 1.1], embedding std ~0.01 */
	double ss = 0;

	for (uint32_t i = 0; i < c.vocab * c.hidden; i++)
		ss += (double)w.embed[i] * w.embed[i];
	TAP_CHECK(fabs(sqrt(ss / (c.vocab * c.hidden)) - 0.01) < 0.001, "embedding std %g", sqrt(ss / (c.vocab * c.hidden)));
	for (uint32_t i = 0; i < c.hidden; i++)
		TAP_CHECK(w.final_norm[i] >= 0.9f && w.final_norm[i] <= 1.1f, "norm %g", w.final_norm[i]);
	spyre_model_weights_free(&w);
	spyre_model_weights_free(&w2);
}

static void test_storage_dtypes(void)
{
	struct spyre_model_config c = spyre_model_config_tiny();
	struct spyre_model_weights w;
	float l32[512], l[3][512];
	struct spyre_ref *r32, *r[3];
	static const unsigned int dts[3] = { SPYRE_REF_FP16, SPYRE_REF_BF16, SPYRE_REF_DL16 };
	static const double tol[3] = { 1e-2, 5e-2, 2e-2 };	/* relative to the largest logit */
	double worst[3] = { 0 };

	if (!TAP_CHECK(spyre_model_weights_random(&c, 1, &w) == 0, "weights"))
		return;
	r32 = spyre_ref_new(&c, &w, 0);
	for (int k = 0; k < 3; k++)
		r[k] = spyre_ref_new(&c, &w, dts[k]);
	spyre_ref_prefill(r32, prompt, 8, l32);
	for (int k = 0; k < 3; k++)
		spyre_ref_prefill(r[k], prompt, 8, l[k]);
	/* teacher-forced with the fp32 tokens: the logits stay close, and are values of the dtype */
	for (int step = 0; step < 24; step++) {
		int32_t t = spyre_argmax(l32, 512);

		for (int k = 0; k < 3; k++) {
			spyre_round_fn rnd = spyre_ref_rounding(r[k]);
			int exact = 1;

			if (rel_err(l[k], l32, 512) > worst[k])
				worst[k] = rel_err(l[k], l32, 512);
			for (int i = 0; i < 512; i++)
				exact &= rnd(l[k][i]) == l[k][i];
			TAP_CHECK(exact, "%s logits are %s values", spyre_ref_dtype_name(dts[k]),
				  spyre_ref_dtype_name(dts[k]));
			spyre_ref_decode(r[k], t, l[k]);
		}
		spyre_ref_decode(r32, t, l32);
	}
	for (int k = 0; k < 3; k++) {
		TAP_CHECK(worst[k] < tol[k], "%s: relative logit error %.3g", spyre_ref_dtype_name(dts[k]), worst[k]);
		tap_diag("%s: largest relative logit error over 24 steps %.3g", spyre_ref_dtype_name(dts[k]), worst[k]);
		TAP_CHECK(worst[k] > 0, "%s differs from fp32 at all", spyre_ref_dtype_name(dts[k]));
		spyre_ref_free(r[k]);
	}
	spyre_ref_free(r32);
	spyre_model_weights_free(&w);
}

static void test_errors(void)
{
	struct spyre_model_config c = spyre_model_config_tiny();
	struct spyre_model_weights w;
	struct spyre_ref *r;
	float l[512], l2[512];
	int32_t many[300];

	if (!TAP_CHECK(spyre_model_weights_random(&c, 1, &w) == 0, "weights"))
		return;
	TAP_CHECK(spyre_ref_new(&c, &w, 4) == NULL, "dtype 4");
	struct spyre_model_config other = c;

	other.layers = 3;
	TAP_CHECK(spyre_ref_new(&other, &w, 0) == NULL, "weights of another shape");
	r = spyre_ref_new(&c, &w, 0);
	TAP_EQ(0, spyre_ref_prefill(r, prompt, 4, l));
	TAP_EQ(-EINVAL, spyre_ref_decode(r, 512, l2));
	TAP_STREQ("token 0: id 512 is not in [0, 512)", spyre_ref_error(r));
	TAP_EQ(-EINVAL, spyre_ref_prefill(r, (const int32_t[]){ 1, -1 }, 2, l2));
	TAP_STREQ("token 1: id -1 is not in [0, 512)", spyre_ref_error(r));
	TAP_EQ(-EINVAL, spyre_ref_prefill(r, prompt, 0, l2));
	TAP_STREQ("no tokens", spyre_ref_error(r));
	for (int i = 0; i < 300; i++)
		many[i] = i;
	TAP_EQ(-ERANGE, spyre_ref_prefill(r, many, 253, l2));
	TAP_STREQ("positions 4..256 are beyond max_position_embeddings (256)", spyre_ref_error(r));
	TAP_EQ(4, spyre_ref_pos(r));
	/* nothing changed: the next step is what it would have been */
	TAP_EQ(0, spyre_ref_decode(r, 5, l));
	TAP_STREQ("", spyre_ref_error(r));
	spyre_ref_reset(r);
	TAP_EQ(0, spyre_ref_prefill(r, prompt, 5, l2));
	TAP_CHECK(!memcmp(l, l2, sizeof(l)), "failed calls changed nothing");
	/* up to max_pos exactly, then no further */
	TAP_EQ(0, spyre_ref_prefill(r, many, 251, NULL));
	TAP_EQ(256, spyre_ref_pos(r));
	TAP_EQ(-ERANGE, spyre_ref_decode(r, 1, l));
	TAP_STREQ("positions 256..256 are beyond max_position_embeddings (256)", spyre_ref_error(r));
	spyre_ref_free(r);
	spyre_model_weights_free(&w);
}

/* ---- weights ---- */

static char path[256];

static const char *tmp_path(const char *name)
{
	snprintf(path, sizeof(path), "%s/%s", model_tmpdir(), name);
	return path;
}

/* Tensor parallel: the shard shapes, their refusals, and the shards reassembling the weights exactly. */
static void test_tp_shard(void)
{
	struct spyre_model_config c = spyre_model_config_tiny(), sc;
	struct spyre_model_weights w;
	char msg[256];

	TAP_EQ(0, spyre_model_config_tp(&c, 2, &sc, msg, sizeof(msg)));
	TAP_EQ(2u, sc.heads);
	TAP_EQ(1u, sc.kv_heads);
	TAP_EQ(176u, sc.ffn);
	TAP_EQ(c.hidden, sc.hidden);
	TAP_EQ(c.head_dim, sc.head_dim);
	TAP_EQ(-EINVAL, spyre_model_config_tp(&c, 3, &sc, msg, sizeof(msg)));
	TAP_STREQ("tensor parallel over 3 cards: 3 does not divide num_attention_heads (4); it must divide the "
		  "attention heads (4), the KV heads (2) and intermediate_size (352)", msg);
	TAP_EQ(-EINVAL, spyre_model_config_tp(&c, 4, &sc, msg, sizeof(msg)));
	TAP_CHECK(strstr(msg, "4 does not divide num_key_value_heads (2)") != NULL, "%s", msg);
	TAP_EQ(-EINVAL, spyre_model_config_tp(&c, 0, &sc, msg, sizeof(msg)));
	TAP_STREQ("tensor parallel over 0 cards: must be 1 to 64", msg);
	TAP_EQ(-EINVAL, spyre_model_config_tp(&c, 65, &sc, msg, sizeof(msg)));
	c.ffn = 350;
	TAP_EQ(-EINVAL, spyre_model_config_tp(&c, 4, &sc, msg, sizeof(msg)));
	c = spyre_model_config_tiny();
	c.heads = 8;
	c.kv_heads = 4;
	c.ffn = 352;
	if (!TAP_CHECK(spyre_model_weights_random(&c, 5, &w) == 0, "weights"))
		return;
	for (uint32_t tp = 1; tp <= 4; tp *= 2) {
		uint64_t hd = c.head_dim, hid = c.hidden, qs, ks, fs;
		struct spyre_model_weights sw[4];
		float *own[4];

		TAP_EQ(0, spyre_model_config_tp(&c, tp, &sc, msg, sizeof(msg)));
		qs = sc.heads * hd;
		ks = sc.kv_heads * hd;
		fs = sc.ffn;
		for (uint32_t r = 0; r < tp; r++)
			TAP_EQ(0, spyre_model_weights_shard(&c, &sc, &w, r, &sw[r], &own[r]));
		for (uint32_t l = 0; l < c.layers; l++) {
			const struct spyre_layer_weights *lw = &w.layer[l];
			int bad = 0;

			for (uint32_t r = 0; r < tp; r++) {
				const struct spyre_layer_weights *sl = &sw[r].layer[l];

				/* column-parallel: the shard's rows of the full matrix */
				bad |= sl->wq != lw->wq + r * qs * hid || sl->wk != lw->wk + r * ks * hid ||
				       sl->wv != lw->wv + r * ks * hid || sl->w_gate != lw->w_gate + r * fs * hid ||
				       sl->w_up != lw->w_up + r * fs * hid || sl->attn_norm != lw->attn_norm ||
				       sl->mlp_norm != lw->mlp_norm;
				/* row-parallel: row i of Wo and of down is the ranks' pieces in rank order */
				for (uint64_t i = 0; i < hid; i++) {
					bad |= memcmp(sl->wo + i * qs, lw->wo + i * c.heads * hd + r * qs,
						      qs * sizeof(float)) != 0;
					bad |= memcmp(sl->w_down + i * fs, lw->w_down + i * c.ffn + r * fs,
						      fs * sizeof(float)) != 0;
				}
			}
			TAP_CHECK(!bad, "tp %u, layer %u: a shard is not its part of the weights", tp, l);
		}
		for (uint32_t r = 0; r < tp; r++) {
			TAP_CHECK(sw[r].embed == w.embed && sw[r].lm_head == w.lm_head &&
				  sw[r].final_norm == w.final_norm, "tp %u rank %u: replicated weights", tp, r);
			free(own[r]);
			free(sw[r].layer);
		}
	}
	spyre_model_weights_free(&w);
}

static void test_weights_save_load(void)
{
	for (int s = 0; s < 2; s++) {	/* tied (tiny), untied (shape 1) */
		struct spyre_model_config c = shape(s);
		struct spyre_model_weights w, back;
		size_t n;
		struct spyre_model_tensor *t;

		if (!TAP_CHECK(spyre_model_weights_random(&c, 3, &w) == 0, "weights"))
			continue;
		t = spyre_model_weights_list(&c, &w, &n);
		TAP_EQ(2 + 9 * c.layers + (c.tied_embeddings ? 0 : 1), n);
		TAP_STREQ("model.embed_tokens.weight", t[0].name);
		TAP_STREQ("model.layers.0.self_attn.k_proj.weight", t[3].name);
		TAP_EQ((uint64_t)c.kv_heads * c.head_dim, t[3].shape[0]);
		TAP_STREQ(c.tied_embeddings ? "model.norm.weight" : "lm_head.weight", t[n - 1].name);
		free(t);
		TAP_CHECK(c.tied_embeddings ? w.lm_head == w.embed : w.lm_head != w.embed, "lm_head tied: %d",
			  c.tied_embeddings);

		TAP_EQ(0, spyre_model_weights_save(&c, &w, tmp_path("m.safetensors"), SPYRE_ST_F32, err, sizeof(err)));
		if (TAP_CHECK(spyre_model_weights_load_file(&c, path, &back, err, sizeof(err)) == 0, "%s", err)) {
			TAP_CHECK(!memcmp(w.storage, back.storage, w.nfloats * sizeof(float)), "F32: exact");
			spyre_model_weights_free(&back);
		}
		TAP_EQ(0, spyre_model_weights_save(&c, &w, tmp_path("m16.safetensors"), SPYRE_ST_BF16, err, sizeof(err)));
		if (TAP_CHECK(spyre_model_weights_load_file(&c, path, &back, err, sizeof(err)) == 0, "%s", err)) {
			int ok = 1;

			for (uint64_t i = 0; i < w.nfloats; i++)
				ok &= back.storage[i] == spyre_ref_round_bf16(w.storage[i]);
			TAP_CHECK(ok, "BF16: the rounded values");
			spyre_model_weights_free(&back);
		}
		/* the same file for another config: the first tensor of another shape is named */
		struct spyre_model_config o = c;

		o.ffn += 2;
		TAP_CHECK(spyre_model_weights_load_file(&o, tmp_path("m.safetensors"), &back, err, sizeof(err)) == -1 &&
			  strstr(err, path) && strstr(err, "tensor 'model.layers.0.mlp.gate_proj.weight' has shape"),
			  "%s", err);
		TAP_CHECK(back.storage == NULL, "freed on error");
		o = c;
		o.layers--;
		TAP_CHECK(spyre_model_weights_load_file(&o, tmp_path("m.safetensors"), &back, err, sizeof(err)) == -1 &&
			  strstr(err, "unexpected tensor 'model.layers."), "%s", err);
		o = c;
		o.layers++;
		char want[128];

		snprintf(want, sizeof(want), "model.layers.%u.input_layernorm.weight' not found", c.layers);
		TAP_CHECK(spyre_model_weights_load_file(&o, tmp_path("m.safetensors"), &back, err, sizeof(err)) == -1 &&
			  strstr(err, want), "%s", err);
		spyre_model_weights_free(&w);
	}
}

static void test_weights_files(void)
{
	struct spyre_model_config c = shape(2), u = c;
	struct spyre_model_weights w, back;
	struct spyre_model_tensor *t;
	struct spyre_st_out out[16];
	size_t n;

	if (!TAP_CHECK(spyre_model_weights_random(&c, 5, &w) == 0, "weights"))
		return;
	t = spyre_model_weights_list(&c, &w, &n);
	for (size_t i = 0; i < n; i++)
		out[i] = (struct spyre_st_out){ t[i].name, SPYRE_ST_F16, t[i].rank, { t[i].shape[0], t[i].shape[1] },
						t[i].data, NULL };
	/* a missing tensor is named */
	TAP_EQ(0, spyre_st_write(tmp_path("miss.safetensors"), out, n - 1, err, sizeof(err)));
	TAP_CHECK(spyre_model_weights_load_file(&c, path, &back, err, sizeof(err)) == -1 &&
		  strstr(err, "tensor 'model.norm.weight' not found"), "%s", err);
	/* extras: lm_head with tied embeddings and a rotary inv_freq are ignored; a bias is not */
	out[n] = (struct spyre_st_out){ "lm_head.weight", SPYRE_ST_F32, 2, { c.vocab, c.hidden }, w.embed, NULL };
	out[n + 1] = (struct spyre_st_out){ "model.layers.0.self_attn.rotary_emb.inv_freq", SPYRE_ST_F32, 1, { 6 },
					    w.embed, NULL };
	out[n + 2] = (struct spyre_st_out){ "model.layers.0.self_attn.q_proj.bias", SPYRE_ST_F32, 1, { 72 }, w.embed,
					    NULL };
	TAP_EQ(0, spyre_st_write(tmp_path("extra.safetensors"), out, n + 2, err, sizeof(err)));
	TAP_CHECK(spyre_model_weights_load_file(&c, path, &back, err, sizeof(err)) == 0, "%s", err);
	spyre_model_weights_free(&back);
	TAP_EQ(0, spyre_st_write(tmp_path("bias.safetensors"), out, n + 3, err, sizeof(err)));
	TAP_CHECK(spyre_model_weights_load_file(&c, path, &back, err, sizeof(err)) == -1 &&
		  strstr(err, "unexpected tensor 'model.layers.0.self_attn.q_proj.bias' (not part of a 1-layer "
			 "granite model)"), "%s", err);
	/* untied: lm_head is required */
	u.tied_embeddings = false;
	TAP_CHECK(spyre_model_weights_load_file(&u, tmp_path("miss.safetensors"), &back, err, sizeof(err)) == -1 &&
		  strstr(err, "tensor 'model.norm.weight' not found"), "%s", err);
	TAP_CHECK(spyre_model_weights_load_file(&u, tmp_path("bias.safetensors"), &back, err, sizeof(err)) == -1 &&
		  strstr(err, "unexpected tensor 'model.layers.0.self_attn.rotary_emb.inv_freq'") == NULL,
		  "inv_freq is ignored: %s", err);
	out[n] = out[n + 1];
	TAP_EQ(0, spyre_st_write(tmp_path("nohead.safetensors"), out, n + 1, err, sizeof(err)));
	TAP_CHECK(spyre_model_weights_load_file(&u, path, &back, err, sizeof(err)) == -1 &&
		  strstr(err, "tensor 'lm_head.weight' not found"), "%s", err);
	TAP_CHECK(spyre_model_weights_load_file(&c, "/nonexistent/m.safetensors", &back, err, sizeof(err)) == -1 &&
		  strstr(err, "/nonexistent/m.safetensors: No such file"), "%s", err);
	free(t);
	spyre_model_weights_free(&w);
}

static const struct tap_case cases[] = {
	{ "rmsnorm", test_rmsnorm },
	{ "rope", test_rope },
	{ "attention", test_attention },
	{ "small_kernels", test_small_kernels },
	{ "roundings", test_roundings },
	{ "roundings_are_isa", test_roundings_are_isa },
	{ "against_naive", test_against_naive },
	{ "prefill_equals_decode", test_prefill_equals_decode },
	{ "greedy", test_greedy },
	{ "storage_dtypes", test_storage_dtypes },
	{ "errors", test_errors },
	{ "tp_shard", test_tp_shard },
	{ "weights_save_load", test_weights_save_load },
	{ "weights_files", test_weights_files },
};

int main(int argc, char **argv)
{
	int rc;

	if (!model_tmpdir())
		tap_bail("mkdtemp failed");
	rc = TAP_RUN(cases, argc, argv);
	model_rmtmp();
	return rc;
}
