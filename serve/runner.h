/* SPDX-License-Identifier: MIT */
/*
 * runner.h - what the serving engine (engine.h) asks of a model: run one
 * step of a batch over a paged KV cache. Two runners implement it:
 * runner_cpu.c (the CPU reference: paged attention over host memory, the
 * reference the card's paged kernels are checked against) and
 * runner_card.c (the model on a spyre card through the kernel library's
 * paged kernels).
 *
 * The KV cache is per layer K and V of [num_blocks, block_size, kv_heads,
 * head_dim]; a token's K/V row lives at slot = block * block_size + offset.
 * The engine owns the blocks (which sequence holds which); the runner owns
 * the memory.
 *
 * A step is vLLM's flattened batch: num_tokens rows, the rows of sequence s
 * are query_start[s] .. query_start[s + 1] - 1 (a decode has one row, a
 * prefill chunk many), row r is token tokens[r] at position positions[r],
 * its K/V goes to slot_mapping[r] (-1: not written, a padding row). The
 * attention of a row at position p of sequence s reads the sequence's
 * positions 0..p (causal) through block_tables[s * max_blocks + i] (the
 * block of positions i*block_size .. (i+1)*block_size - 1); context_lens[s]
 * = the position of the sequence's last row + 1.
 */
#ifndef SPYRE_SERVE_RUNNER_H
#define SPYRE_SERVE_RUNNER_H

#include <stddef.h>
#include <stdint.h>

struct spyre_runner_batch {
	uint32_t num_tokens;		/* rows of the step, >= 1 */
	const int32_t *tokens;		/* [num_tokens] */
	const int32_t *positions;	/* [num_tokens] */
	const int64_t *slot_mapping;	/* [num_tokens] */
	uint32_t num_seqs;		/* sequences of the step, >= 1 */
	const uint32_t *query_start;	/* [num_seqs + 1], query_start[0] = 0, last = num_tokens */
	const uint32_t *context_lens;	/* [num_seqs] */
	const int32_t *block_tables;	/* [num_seqs][max_blocks] */
	uint32_t max_blocks;		/* columns of block_tables */
	/*
	 * Outputs for the last row of each sequence (the row that samples):
	 * logits [num_seqs][vocab] (divided by logits_scaling) when not NULL,
	 * argmax [num_seqs] (greedy token) when not NULL. Either may be NULL.
	 */
	float *logits;
	int32_t *argmax;
};

/*
 * The engine's defaults for its step limits (engine.h), which a runner sized
 * without explicit limits takes too: one home for both.
 */
#define SPYRE_DEFAULT_MAX_NUM_SEQS 32
#define SPYRE_DEFAULT_MAX_NUM_BATCHED_TOKENS 512

/* What a step cost (for benchmarks and /metrics); a runner fills what it knows. */
struct spyre_runner_stats {
	uint64_t host_ns;
	uint64_t device_ns;	/* modeled device time (card runner), 0 on the CPU */
	uint64_t launches;
	uint64_t builds;	/* kernels the step built (card runner: shapes not seen or warmed up before) */
	uint64_t replays;	/* 1 when the step was a replayed launch graph (card runner), else 0 */
};

struct spyre_runner_ops {
	/* 0, or a negative errno with a message in err. */
	int (*step)(void *self, const struct spyre_runner_batch *b, struct spyre_runner_stats *st,
		    char *err, size_t errlen);
	void (*free)(void *self);	/* frees the runner, struct spyre_runner included */
};

struct spyre_runner {
	const struct spyre_runner_ops *ops;
	void *self;
	uint32_t vocab;
	uint32_t block_size;
	uint32_t num_blocks;	/* KV blocks the runner allocated */
	uint32_t max_model_len;	/* max_position_embeddings */
	uint32_t max_num_seqs;	/* sequences a step may hold, 0: any (the engine sizes itself within) */
	uint32_t max_num_tokens;	/* rows a step may hold, 0: any */
	int32_t eos_token_id;
	const char *name;	/* "cpu" or "card" */
};

/* Free a runner made by a runner's constructor (NULL: nothing). */
static inline void spyre_runner_free(struct spyre_runner *r)
{
	if (r)
		r->ops->free(r->self);
}

#endif /* SPYRE_SERVE_RUNNER_H */
