// SPDX-License-Identifier: MIT
/*
 * Element conversions for the spyre data types (spyre_dtype.h). Bit-exact,
 * portable C: no reliance on compiler half-precision types, so the engine
 * behaves the same in QEMU on every host. docs/spyre-isa.md §3 states the
 * rules.
 */
#include <math.h>
#include <string.h>

#include "spyre_isa.h"
#include "spyre_dtype.h"

float spyre_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f, frac = h & 0x3ff;

	if (exp == 0x1f)	/* inf / NaN (quiet it) */
		return spyre_bits_f32(sign | 0x7f800000 | (frac ? 0x400000 | (frac << 13) : 0));
	if (exp == 0) {
		/* zero or subnormal: frac * 2^-24, exact in fp32 */
		float v = (float)frac * (1.0f / 16777216.0f);

		return sign ? -v : v;
	}
	return spyre_bits_f32(sign | ((exp + 112) << 23) | (frac << 13));
}

uint16_t spyre_f32_to_f16(float f)
{
	uint32_t u = spyre_f32_bits(f);
	uint16_t sign = (u >> 16) & 0x8000;
	uint32_t a = u & 0x7fffffff;

	if (a >= 0x7f800000)	/* inf / NaN */
		return sign | 0x7c00 | (a > 0x7f800000 ? 0x200 | ((a >> 13) & 0x3ff) : 0);
	if (a >= 0x477ff000)	/* rounds to >= 65520: overflow to inf */
		return sign | 0x7c00;
	if (a < 0x38800000) {	/* below the smallest normal 2^-14: subnormal */
		/* value / 2^-24, rounded to nearest even; 0x33000000 = 2^-25 */
		if (a <= 0x33000000)
			return sign;	/* <= half the smallest subnormal: ties to 0 */
		uint32_t m = (a & 0x7fffff) | 0x800000;
		int shift = 126 - (int)(a >> 23);	/* 14..24 + ... */
		uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);

		if (rem > half || (rem == half && (r & 1)))
			r++;
		return sign | (uint16_t)r;
	}
	/* normal: rebias, round to nearest even on bit 13 */
	uint32_t r = a - 0x38000000;
	uint32_t lsb = (r >> 13) & 1;

	r += 0xfff + lsb;
	return sign | (uint16_t)(r >> 13);
}

float spyre_bf16_to_f32(uint16_t h)
{
	return spyre_bits_f32((uint32_t)h << 16);
}

uint16_t spyre_f32_to_bf16(float f)
{
	uint32_t u = spyre_f32_bits(f);

	if ((u & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((u >> 16) | 0x40);	/* quiet NaN */
	u += 0x7fff + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

/*
 * DLFloat16: s1 e6 f9, bias 31, no subnormals, no infinities. Every exponent
 * field 0..63 encodes a normal number 2^(e-31) * 1.f, except that 0x0000 and
 * 0x8000 are +-0 and 0x7fff/0xffff is the single NaN/infinity. The largest
 * finite value is 0x7ffe = 2^32 * (1 + 510/512) ~ 8.57e9.
 */
float spyre_dl16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 9) & 0x3f, frac = h & 0x1ff;

	if ((h & 0x7fff) == 0x7fff)
		return spyre_bits_f32(0x7fc00000);
	if ((h & 0x7fff) == 0)
		return spyre_bits_f32(sign);
	return spyre_bits_f32(sign | ((exp + 127 - SPYRE_DL16_BIAS) << 23) | (frac << 14));
}

uint16_t spyre_f32_to_dl16(float f)
{
	uint32_t u = spyre_f32_bits(f);
	uint16_t sign = (u >> 16) & 0x8000;
	uint32_t a = u & 0x7fffffff;

	if (a >= 0x7f800000)
		return sign | SPYRE_DL16_NAN;
	a += 1u << 13;		/* round: add half an ulp of the 9-bit fraction, truncate */
	int exp = (int)(a >> 23) - 127 + SPYRE_DL16_BIAS;
	uint32_t frac = (a >> 14) & 0x1ff;

	if (exp < 0)
		return sign;	/* underflow: no subnormals */
	if (exp > 63 || (exp == 63 && frac == 0x1ff))
		return sign | SPYRE_DL16_NAN;	/* overflow saturates to NaN/inf */
	return sign | (uint16_t)((uint32_t)exp << 9) | (uint16_t)frac;
}

static int64_t round_sat(float f, int64_t lo, int64_t hi)
{
	if (isnan(f))
		return 0;
	if (f <= (float)lo)
		return lo;
	if (f >= (float)hi)
		return hi;
	return (int64_t)nearbyintf(f);	/* default rounding mode: to nearest even */
}

int8_t spyre_f32_to_i8(float f)
{
	return (int8_t)round_sat(f, -128, 127);
}

int32_t spyre_f32_to_i32(float f)
{
	/* (float)INT32_MAX rounds up to 2^31: clamp there, then saturate */
	if (!isnan(f) && f >= 2147483648.0f)
		return INT32_MAX;
	return (int32_t)round_sat(f, INT32_MIN, INT32_MAX);
}

static uint16_t ld16(const void *base, uint64_t idx)
{
	uint16_t v;

	memcpy(&v, (const uint8_t *)base + idx * 2, 2);
	return v;
}

static void st16(void *base, uint64_t idx, uint16_t v)
{
	memcpy((uint8_t *)base + idx * 2, &v, 2);
}

float spyre_load_f32(const void *base, unsigned dt, uint64_t idx)
{
	switch (dt) {
	case SPYRE_DT_FP32: {
		float v;

		memcpy(&v, (const uint8_t *)base + idx * 4, 4);
		return v;
	}
	case SPYRE_DT_FP16:
		return spyre_f16_to_f32(ld16(base, idx));
	case SPYRE_DT_BF16:
		return spyre_bf16_to_f32(ld16(base, idx));
	case SPYRE_DT_DL16:
		return spyre_dl16_to_f32(ld16(base, idx));
	default:
		return (float)spyre_load_int(base, dt, idx);
	}
}

void spyre_store_f32(void *base, unsigned dt, uint64_t idx, float v)
{
	switch (dt) {
	case SPYRE_DT_FP32:
		memcpy((uint8_t *)base + idx * 4, &v, 4);
		break;
	case SPYRE_DT_FP16:
		st16(base, idx, spyre_f32_to_f16(v));
		break;
	case SPYRE_DT_BF16:
		st16(base, idx, spyre_f32_to_bf16(v));
		break;
	case SPYRE_DT_DL16:
		st16(base, idx, spyre_f32_to_dl16(v));
		break;
	case SPYRE_DT_INT8:
		((int8_t *)base)[idx] = spyre_f32_to_i8(v);
		break;
	default: {
		int32_t i = spyre_f32_to_i32(v);

		memcpy((uint8_t *)base + idx * 4, &i, 4);
		break;
	}
	}
}

int64_t spyre_load_int(const void *base, unsigned dt, uint64_t idx)
{
	int32_t i;

	switch (dt) {
	case SPYRE_DT_INT8:
		return ((const int8_t *)base)[idx];
	case SPYRE_DT_INT32:
		memcpy(&i, (const uint8_t *)base + idx * 4, 4);
		return i;
	default:
		return spyre_f32_to_i32(spyre_load_f32(base, dt, idx));
	}
}

void spyre_store_int(void *base, unsigned dt, uint64_t idx, int64_t v)
{
	int32_t i;

	switch (dt) {
	case SPYRE_DT_INT8:
		((int8_t *)base)[idx] = (int8_t)(v < -128 ? -128 : v > 127 ? 127 : v);
		break;
	case SPYRE_DT_INT32:
		i = (int32_t)(v < INT32_MIN ? INT32_MIN : v > INT32_MAX ? INT32_MAX : v);
		memcpy((uint8_t *)base + idx * 4, &i, 4);
		break;
	default:
		spyre_store_f32(base, dt, idx, (float)v);
		break;
	}
}
