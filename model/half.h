/* SPDX-License-Identifier: MIT */
/*
 * half.h - bit-exact conversions between fp32 and the 16-bit formats the
 * model code reads and writes: IEEE binary16 (fp16), bfloat16 and DLFloat16.
 * Portable C (no compiler half types). The same rules as the device engine's
 * qemu-device/engine/spyre_numerics.c (docs/spyre-isa.md §3), written again
 * here so the model library stands alone; ref-test checks the two agree.
 *
 * fp16: s1 e5 f10, bias 15, subnormals, inf, NaN. fp32 -> fp16 rounds to
 *	nearest even; magnitudes that round to >= 65520 become inf.
 * bf16: the top 16 bits of fp32. fp32 -> bf16 rounds to nearest even; NaN
 *	stays a (quiet) NaN.
 * dl16: s1 e6 f9, bias 31, no subnormals, no infinity: 0x0000/0x8000 are
 *	+-0, 0x7fff/0xffff the one NaN. fp32 -> dl16 adds 1 << 13 to the fp32
 *	magnitude bits and truncates to 9 fraction bits (round to nearest, ties
 *	away from zero); magnitudes that end below 2^-31 flush to +-0;
 *	overflow, inf and NaN give 0x7fff | sign.
 */
#ifndef SPYRE_MODEL_HALF_H
#define SPYRE_MODEL_HALF_H

#include <stdint.h>

float spyre_model_f16_to_f32(uint16_t h);
uint16_t spyre_model_f32_to_f16(float f);
float spyre_model_bf16_to_f32(uint16_t h);
uint16_t spyre_model_f32_to_bf16(float f);
float spyre_model_dl16_to_f32(uint16_t h);
uint16_t spyre_model_f32_to_dl16(float f);

/* The bits of a float and back (memcpy, no aliasing games). */
uint32_t spyre_model_f32_bits(float f);
float spyre_model_f32_from_bits(uint32_t u);

#endif /* SPYRE_MODEL_HALF_H */
