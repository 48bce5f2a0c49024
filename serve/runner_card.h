/* SPDX-License-Identifier: MIT */
/*
 * runner_card.h - the model on a spyre card as a runner (runner.h): the
 * weights packed once into device memory, a paged KV cache per layer in
 * device memory, and per step one small host-to-device copy (tokens,
 * positions, slot mapping, the rows that sample, context lengths and block
 * tables, in the stick layout the kernels read) followed by the step's
 * launches of the kernel library's paged kernels. No program is patched or
 * rebuilt when the tables change: a kernel is built once per shape (rows
 * of the step, sequences of an attention run) and kept in the kernel cache.
 */
#ifndef SPYRE_SERVE_RUNNER_CARD_H
#define SPYRE_SERVE_RUNNER_CARD_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "runner.h"
#include "spyre.h"
#include "weights.h"

struct spyre_runner_card_opts {
	uint32_t dtype;			/* SPYRE_DT_FP16, _BF16, _DL16 or _FP32 (0 is FP32) */
	uint32_t cores;			/* 0: all the device has */
	uint32_t block_size;		/* tokens per KV block, 0: 64 */
	uint32_t num_blocks;		/* KV blocks per layer, 0: max_num_seqs whole contexts */
	uint32_t max_num_seqs;		/* sequences per step, 0: SPYRE_DEFAULT_MAX_NUM_SEQS (32) */
	uint32_t max_num_batched_tokens;	/* rows per step, 0: SPYRE_DEFAULT_MAX_NUM_BATCHED_TOKENS (512)
						 * rounded up to whole blocks */
	bool warmup;			/* build every kernel of the step's shapes before serving (below) */
	/*
	 * Launch graphs are on unless this is set: a step of N decodes (N
	 * sequences of one row each, 1 <= N <= max_num_seqs) is captured once,
	 * after its first step launched one by one (the warm-up's, when on),
	 * and replayed from then on with one submit: the tables' copy, the
	 * step's kernels and the tokens' copy back. Prefill steps are launched
	 * one by one.
	 */
	bool no_graphs;
};

/*
 * Upload @w for @cfg to @dev: *@out, freed with spyre_runner_free() (its
 * ops->free frees the runner, struct spyre_runner included). @dev must
 * outlive the runner; @cfg and @w are not used after the call. 0, or a
 * negative errno with a message in @err (bad options, too little device
 * memory: how much is needed).
 */
int spyre_runner_card_new(spyre_device_t *dev, const struct spyre_model_config *cfg,
			  const struct spyre_model_weights *w, const struct spyre_runner_card_opts *opts,
			  struct spyre_runner **out, char *err, size_t errlen);

/*
 * The same split over @tp cards of this process, rank r on @devs[r]
 * (Megatron's tensor parallelism, as spyre_dmodel_new_tp(): each card holds
 * its share of the heads with their KV blocks, and of the MLP; two
 * all-reduces a layer; rank 0 alone holds the LM head and samples). @tp
 * must divide the heads, KV heads and intermediate_size; every card gets
 * the same num_blocks. Launch graphs are off (no graph holds the
 * collectives). @tp 1 is spyre_runner_card_new() on @devs[0].
 */
int spyre_runner_card_new_tp(spyre_device_t *const *devs, uint32_t tp, const struct spyre_model_config *cfg,
			     const struct spyre_model_weights *w, const struct spyre_runner_card_opts *opts,
			     struct spyre_runner **out, char *err, size_t errlen);

#endif /* SPYRE_SERVE_RUNNER_CARD_H */
