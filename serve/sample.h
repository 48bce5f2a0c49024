/* SPDX-License-Identifier: MIT */
/*
 * sample.h - sampling a token from a row of logits on the host.
 *
 * The PRNG is xoshiro256** (Blackman and Vigna), its state seeded by four
 * draws of splitmix64 from the request's 64-bit seed: each request has its
 * own generator, so a seed gives the same tokens whatever else the batch
 * holds, and one uniform draw is consumed per sampled token (none when
 * greedy).
 *
 * spyre_sample(): temperature 0 is greedy (spyre_argmax: the lowest index
 * among equal maxima). Otherwise, in this order: logits divided by the
 * temperature (NaN counts as -inf); top-k keeps the k largest (ties broken
 * by the lower token id; k 0 or >= vocab: all); softmax in double over the
 * kept; top-p keeps the smallest prefix of the kept, in that order, whose
 * probability sums to >= top_p (at least one token); then one uniform draw
 * u in [0, 1) (53 bits) picks the first token whose cumulative probability
 * (renormalized over the kept) exceeds u.
 */
#ifndef SPYRE_SERVE_SAMPLE_H
#define SPYRE_SERVE_SAMPLE_H

#include <stdint.h>

#include "engine.h"
#include "weights.h"

struct spyre_rng {
	uint64_t s[4];
};

void spyre_rng_seed(struct spyre_rng *r, uint64_t seed);
uint64_t spyre_rng_next(struct spyre_rng *r);
double spyre_rng_uniform(struct spyre_rng *r);	/* [0, 1), 53 bits */
/* spyre_splitmix64() seeds them: model/weights.h */

/* 0 when @s is valid: temperature finite in [0, 1e4], top_p in (0, 1]; else -EINVAL. */
int spyre_sampling_check(const struct spyre_sampling *s);

/*
 * A token from @logits [vocab] under @s with @rng; @scratch is
 * spyre_sample_scratch_size(vocab) bytes (or NULL when greedy).
 */
int32_t spyre_sample(const float *logits, uint32_t vocab, const struct spyre_sampling *s, struct spyre_rng *rng,
		     void *scratch);
size_t spyre_sample_scratch_size(uint32_t vocab);

#endif /* SPYRE_SERVE_SAMPLE_H */
