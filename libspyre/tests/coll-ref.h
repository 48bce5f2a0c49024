/* SPDX-License-Identifier: MIT */
/*
 * The CPU reference of the collectives' tests (spyre_coll_test: the cards of
 * one process; spyre_comm_rank_test: one card per process): each rank's
 * inputs, the sum the ring gives, and its tolerance.
 */
#ifndef SPYRE_COLL_REF_H
#define SPYRE_COLL_REF_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "spyre_dtype.h"

static inline size_t round_sticks(size_t bytes)
{
	return (bytes + 127) / 128 * 128;
}

/* A value of rank @r at @i, rounded to @dt: small integers and quarters (exact sums in fp32). */
static inline float value(int r, size_t i, uint32_t dt, unsigned int seed)
{
	float v = (float)((int)((i * 7 + (size_t)r * 13 + seed) % 61) - 30) * 0.25f;
	/* Round through the dtype, so host and card add the same inputs. */
	uint8_t tmp[4];

	spyre_store_f32(tmp, dt, 0, v);
	return spyre_load_f32(tmp, dt, 0);
}

/* The sum over @n ranks at @i, rounded to @dt after each add as the ring's ADDs round. */
static inline float ref_sum(int n, size_t i, uint32_t dt, unsigned int seed)
{
	float want = value(0, i, dt, seed);
	uint8_t tmp[4];
	int k;

	for (k = 1; k < n; k++) {
		want += value(k, i, dt, seed);
		spyre_store_f32(tmp, dt, 0, want);
		want = spyre_load_f32(tmp, dt, 0);
	}
	return want;
}

/* Exact for 2 ranks; n - 1 roundings of |sum| (ulp of the dtype) beyond. */
static inline float ref_tol(int n, float want, uint32_t dt)
{
	return n <= 2 ? 0.0f :
	       (float)(n - 1) * fabsf(want) * (dt == SPYRE_DT_FP32 ? 1.2e-7f :
					       dt == SPYRE_DT_FP16 ? 9.8e-4f :
					       dt == SPYRE_DT_BF16 ? 7.9e-3f : 2e-3f);
}

#endif
