// SPDX-License-Identifier: MIT
/*
 * half.c - fp32 <-> fp16 / bf16 / DLFloat16, bit-exact (half.h states the rules).
 */
#include <string.h>

#include "half.h"

uint32_t spyre_model_f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

float spyre_model_f32_from_bits(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

float spyre_model_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu, frac = h & 0x3ffu;

	if (exp == 0x1f)	/* inf, or NaN: keep the payload, make it quiet */
		return spyre_model_f32_from_bits(sign | 0x7f800000u |
						  (frac ? 0x400000u | (frac << 13) : 0));
	if (exp == 0) {
		if (frac == 0)
			return spyre_model_f32_from_bits(sign);
		/* subnormal: frac * 2^-24; normalise into an fp32 normal */
		int e = -14;

		while (!(frac & 0x400u)) {
			frac <<= 1;
			e--;
		}
		frac &= 0x3ffu;
		return spyre_model_f32_from_bits(sign | ((uint32_t)(e + 127) << 23) | (frac << 13));
	}
	return spyre_model_f32_from_bits(sign | ((exp + 112) << 23) | (frac << 13));
}

uint16_t spyre_model_f32_to_f16(float f)
{
	uint32_t u = spyre_model_f32_bits(f);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
	uint32_t a = u & 0x7fffffffu;

	if (a >= 0x7f800000u)	/* inf / NaN (NaN stays NaN: a payload bit is forced) */
		return sign | 0x7c00u | (a > 0x7f800000u ? 0x200u | ((a >> 13) & 0x3ffu) : 0);
	if (a >= 0x477ff000u)	/* rounds to >= 65520: inf */
		return sign | 0x7c00u;
	if (a < 0x38800000u) {	/* below 2^-14: an fp16 subnormal or zero */
		if (a <= 0x33000000u)	/* <= 2^-25, half the smallest subnormal: ties to 0 */
			return sign;
		uint32_t m = (a & 0x7fffffu) | 0x800000u;
		unsigned int shift = 126u - (a >> 23);	/* 14 .. 24 */
		uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);

		if (rem > half || (rem == half && (r & 1)))
			r++;
		return sign | (uint16_t)r;
	}
	/* normal: rebias, round to nearest even at bit 13 (a carry may reach inf: fine) */
	uint32_t r = a - 0x38000000u;

	r += 0xfffu + ((r >> 13) & 1);
	return sign | (uint16_t)(r >> 13);
}

float spyre_model_bf16_to_f32(uint16_t h)
{
	return spyre_model_f32_from_bits((uint32_t)h << 16);
}

uint16_t spyre_model_f32_to_bf16(float f)
{
	uint32_t u = spyre_model_f32_bits(f);

	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40u);	/* quiet NaN */
	u += 0x7fffu + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

#define DL16_BIAS 31
#define DL16_NAN 0x7fffu

float spyre_model_dl16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 9) & 0x3fu, frac = h & 0x1ffu;

	if ((h & 0x7fffu) == DL16_NAN)
		return spyre_model_f32_from_bits(0x7fc00000u);
	if ((h & 0x7fffu) == 0)
		return spyre_model_f32_from_bits(sign);
	return spyre_model_f32_from_bits(sign | ((exp + 127 - DL16_BIAS) << 23) | (frac << 14));
}

uint16_t spyre_model_f32_to_dl16(float f)
{
	uint32_t u = spyre_model_f32_bits(f);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
	uint32_t a = u & 0x7fffffffu;

	if (a >= 0x7f800000u)
		return sign | DL16_NAN;
	a += 1u << 13;		/* half an ulp of the 9-bit fraction, then truncate */
	int exp = (int)(a >> 23) - 127 + DL16_BIAS;
	uint32_t frac = (a >> 14) & 0x1ffu;

	if (exp < 0)
		return sign;	/* below 2^-31: flush (no subnormals) */
	if (exp > 63 || (exp == 63 && frac == 0x1ffu))
		return sign | DL16_NAN;	/* overflow saturates to the NaN/inf code */
	return sign | (uint16_t)((uint32_t)exp << 9) | (uint16_t)frac;
}
