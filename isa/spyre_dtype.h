/* SPDX-License-Identifier: MIT */
/*
 * spyre_dtype.h - the ISA library's element conversions of the spyre data
 * types (uapi/spyre_isa.h SPYRE_DT_*, docs/spyre-isa.md §3): IEEE fp32/fp16,
 * bfloat16, DLFloat16, int8 and int32. They define the ISA's data formats:
 * the engine computes with them, and anything that prepares or checks device
 * data (the kernel library, CPU references) uses them without the engine.
 * Pure functions, no state.
 */
#ifndef SPYRE_DTYPE_H
#define SPYRE_DTYPE_H

#include <stdint.h>
#include <string.h>

/* The bit pattern of an fp32, and the fp32 of a bit pattern (memcpy: no aliasing tricks). */
static inline uint32_t spyre_f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

static inline float spyre_bits_f32(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

float spyre_f16_to_f32(uint16_t h);
uint16_t spyre_f32_to_f16(float f);	/* round to nearest even, subnormals, inf, NaN */
float spyre_bf16_to_f32(uint16_t h);
uint16_t spyre_f32_to_bf16(float f);	/* round to nearest even, NaN stays NaN */
float spyre_dl16_to_f32(uint16_t h);	/* 0x7fff/0xffff -> NaN */
uint16_t spyre_f32_to_dl16(float f);	/* add 1 << 13, truncate; overflow/inf/NaN -> 0x7fff | sign */
int8_t spyre_f32_to_i8(float f);	/* round to nearest even, saturate, NaN -> 0 */
int32_t spyre_f32_to_i32(float f);	/* round to nearest even, saturate, NaN -> 0 */

/* Element idx of a buffer of type dt, as fp32 (ints converted exactly or rounded). */
float spyre_load_f32(const void *base, unsigned dt, uint64_t idx);
void spyre_store_f32(void *base, unsigned dt, uint64_t idx, float v);
int64_t spyre_load_int(const void *base, unsigned dt, uint64_t idx);
void spyre_store_int(void *base, unsigned dt, uint64_t idx, int64_t v); /* saturates */

#endif /* SPYRE_DTYPE_H */
