// SPDX-License-Identifier: MIT
/*
 * Description: the ISA library's element conversions (isa/dtype.c, what the
 * engine computes with) against independent references: IEEE fp16 against
 * the compiler's _Float16 (exhaustive over all 65536 encodings one way, 2^22
 * seeded fp32 values plus edge cases the other way, exact); bfloat16 against
 * a round-to-nearest-even reference in double; DLFloat16 (s1 e6 bias 31 f9,
 * no subnormals, 0x7fff NaN/inf, fp32 -> DL16 by adding 1 << 13 and
 * truncating) against a frexp-based reference of that rule and fixed points
 * (1.0, max finite ~8.57e9, overflow, underflow); int8/int32 rounding
 * (nearest even) and saturation.
 */
#include <math.h>
#include <string.h>

#include "spyre_isa.h"
#include "spyre_dtype.h"
#include "../../tests/tap.h"

static uint64_t rng = 12345;

static uint32_t rnd(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return (uint32_t)((rng * 0x2545f4914f6cdd1dull) >> 32);
}

/* bf16 reference: the nearer of the two truncation neighbours, ties to even */
static uint16_t ref_bf16(float f)
{
	uint32_t u = spyre_f32_bits(f), lo = u & 0xffff0000u, hi = lo + 0x10000u;
	double vh = isinf(spyre_bits_f32(hi)) ? copysign(ldexp(1.0, 128), f) : (double)spyre_bits_f32(hi);	/* the next binade */
	double dl = fabs((double)f - (double)spyre_bits_f32(lo)), dh = fabs(vh - (double)f);

	if (isnan(f))
		return 0;	/* not compared */
	if (dl < dh || (dl == dh && !((lo >> 16) & 1)))
		return (uint16_t)(lo >> 16);
	return (uint16_t)(hi >> 16);
}

/*
 * DL16 reference from the rule's meaning: the magnitude's 24-bit significand
 * rounded half-up at 9 fraction bits (that is what adding 1 << 13 to the fp32
 * fraction and truncating does), exponent range 2^-31 .. 2^32, the all-zero
 * pattern is zero.
 */
static uint16_t ref_dl16(float f)
{
	uint16_t sign = signbit(f) ? 0x8000 : 0;
	int e;
	double m;

	if (isnan(f) || isinf(f))
		return sign | 0x7fff;
	if (f == 0)
		return sign;
	m = frexp(fabs((double)f), &e);	/* m in [0.5, 1) */
	m *= 2;
	e -= 1;				/* m in [1, 2), value = m 2^e */
	double q = floor((m - 1) * 512 + 0.5);

	if (q == 512) {
		q = 0;
		e++;
	}
	int be = e + 31;

	if (be < 0)
		return sign;
	if (be > 63 || (be == 63 && q == 511))
		return sign | 0x7fff;
	return sign | (uint16_t)(be << 9) | (uint16_t)q;
}

static void test_fp16_to_fp32(void)
{
	int good = 1;

	/* exhaustive */
	for (uint32_t h = 0; h < 65536; h++) {
		_Float16 x;
		uint16_t hh = (uint16_t)h;

		memcpy(&x, &hh, 2);
		float ref = (float)x, got = spyre_f16_to_f32(hh);

		if (isnan(ref) ? !isnan(got) : spyre_f32_bits(ref) != spyre_f32_bits(got))
			good = 0;
	}
	TAP_CHECK(good, "fp16->fp32 exhaustive (65536 encodings) == _Float16");
}

static void test_fp32_to_fp16(void)
{
	int good = 1;
	static const float edge[] = { 0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, 1e-8f, 2.98e-8f, 2.99e-8f,
				      5.96e-8f, 6.1e-5f, 6.103515625e-05f, 1.0f / 3, INFINITY, -INFINITY };

	for (uint32_t i = 0; i < (1u << 22) + 14; i++) {
		float f = i < 14 ? edge[i] : spyre_bits_f32(rnd());
		_Float16 h = (_Float16)f;
		uint16_t ref;

		memcpy(&ref, &h, 2);
		if (isnan(f))
			continue;
		if (spyre_f32_to_f16(f) != ref)
			good = 0;
	}
	TAP_CHECK(good, "fp32->fp16 round-to-nearest-even, subnormals, overflow: 2^22 values == _Float16");
	TAP_CHECK((spyre_f32_to_f16(NAN) & 0x7c00) == 0x7c00 && (spyre_f32_to_f16(NAN) & 0x3ff),
		  "fp32 NaN -> fp16 NaN");
}

static void test_bf16(void)
{
	int good = 1;

	for (uint32_t i = 0; i < (1u << 22); i++) {
		float f = spyre_bits_f32(rnd());

		if (isnan(f))
			continue;
		if (spyre_f32_to_bf16(f) != ref_bf16(f))
			good = 0;
	}
	TAP_CHECK(good, "fp32->bf16 round-to-nearest-even: 2^22 values == reference");
	good = 1;
	for (uint32_t h = 0; h < 65536; h++) {
		float f = spyre_bf16_to_f32((uint16_t)h);

		if (!isnan(f) && spyre_f32_to_bf16(f) != h)
			good = 0;
	}
	TAP_CHECK(good, "bf16 -> fp32 -> bf16 round trip, all non-NaN encodings");
	TAP_CHECK(isnan(spyre_bf16_to_f32(spyre_f32_to_bf16(NAN))), "bf16 keeps NaN");
}

static void test_dl16(void)
{
	float mx = spyre_dl16_to_f32(0x7ffe);
	int good = 1;

	TAP_EQ(0x3e00, spyre_f32_to_dl16(1.0f));
	TAP_CHECK(spyre_dl16_to_f32(0x3e00) == 1.0f, "dl16: 0x3e00 == 1.0");
	TAP_EQ(0xc000, spyre_f32_to_dl16(-2.0f));
	TAP_CHECK(fabsf(mx - 8.573e9f) < 1e6f && spyre_f32_to_dl16(mx) == 0x7ffe,
		  "dl16: max finite 0x7ffe = %.4g", mx);
	TAP_CHECK(spyre_f32_to_dl16(1e10f) == 0x7fff && spyre_f32_to_dl16(-1e10f) == 0xffff &&
		  spyre_f32_to_dl16(INFINITY) == 0x7fff && (spyre_f32_to_dl16(NAN) & 0x7fff) == 0x7fff,
		  "dl16: overflow, inf, NaN -> 0x7fff | sign");
	TAP_CHECK(isnan(spyre_dl16_to_f32(0x7fff)) && isnan(spyre_dl16_to_f32(0xffff)),
		  "dl16: 0x7fff/0xffff decode as NaN");
	TAP_CHECK(spyre_f32_to_dl16(1e-10f) == 0 && spyre_f32_to_dl16(-1e-10f) == 0x8000 &&
		  spyre_dl16_to_f32(0x0001) > 0,
		  "dl16: no subnormals: 1e-10 -> 0, exponent-0 patterns are normal");
	/* 1 + 2^-10 is a tie: the rule rounds half up (away from zero) */
	TAP_EQ(0x3e01, spyre_f32_to_dl16(1.0f + 1.0f / 1024));
	TAP_EQ(0x3e00, spyre_f32_to_dl16(1.0f + 1.0f / 2048));

	for (uint32_t i = 0; i < (1u << 22); i++) {
		float f = spyre_bits_f32(rnd());

		if (spyre_f32_to_dl16(f) != ref_dl16(f))
			good = 0;
	}
	TAP_CHECK(good, "fp32->dl16: 2^22 values == reference");
	good = 1;
	for (uint32_t h = 0; h < 65536; h++) {
		if ((h & 0x7fff) == 0x7fff)
			continue;
		if (spyre_f32_to_dl16(spyre_dl16_to_f32((uint16_t)h)) != h)
			good = 0;
	}
	TAP_CHECK(good, "dl16 -> fp32 -> dl16 round trip, all finite encodings");
}

static void test_ints(void)
{
	TAP_CHECK(spyre_f32_to_i8(2.5f) == 2 && spyre_f32_to_i8(3.5f) == 4 && spyre_f32_to_i8(-2.5f) == -2 &&
		  spyre_f32_to_i8(300.0f) == 127 && spyre_f32_to_i8(-300.0f) == -128 &&
		  spyre_f32_to_i8(NAN) == 0,
		  "int8: nearest even, saturation, NaN -> 0");
	TAP_CHECK(spyre_f32_to_i32(3e9f) == INT32_MAX && spyre_f32_to_i32(-3e9f) == INT32_MIN &&
		  spyre_f32_to_i32(2147483648.0f) == INT32_MAX && spyre_f32_to_i32(-0.5f) == 0,
		  "int32: saturation and rounding");
}

static const struct tap_case cases[] = {
	{ "fp16_to_fp32", test_fp16_to_fp32 },
	{ "fp32_to_fp16", test_fp32_to_fp16 },
	{ "bf16", test_bf16 },
	{ "dl16", test_dl16 },
	{ "ints", test_ints },
};

int main(int argc, char **argv)
{
	return TAP_RUN(cases, argc, argv);
}
