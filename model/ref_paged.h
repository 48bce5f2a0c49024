/* SPDX-License-Identifier: MIT */
/*
 * ref_paged.h - the CPU reference of one serving step over a paged KV cache
 * (what serve/runner.h asks of a runner, and what the card's paged kernels
 * are checked against, kernel by kernel).
 *
 * The KV cache: per layer, K and V of [num_blocks][block_size][kv_heads]
 * [head_dim] fp32 in host memory. A token's K/V row (kv_heads * head_dim
 * floats) lives at slot = block * block_size + offset.
 *
 * A step is vLLM's flattened batch (struct spyre_paged_batch): num_tokens
 * rows; the rows of sequence s are query_start[s] .. query_start[s+1] - 1
 * (a decode one row, a prefill chunk many); row r is token tokens[r] at
 * position positions[r], its K/V goes to slot_mapping[r] (-1: a padding row,
 * nothing written, its attention output is zero). A row of sequence s at
 * position p attends causally to the sequence's positions 0..p, read through
 * block_tables[s * max_blocks + p / block_size] at offset p % block_size;
 * context_lens[s] = the position of its last row + 1.
 *
 * The numerics are ref.c's, row by row: the same kernels (rmsnorm, matmul,
 * rope, attention, silu) and the same rounding model (ref.h), applied to each
 * row at its own position. Every row is computed as spyre_ref_prefill would
 * compute it, so a sequence run through paged steps (prefill in chunks, then
 * decodes, batched with any others) gives bit for bit the logits of
 * spyre_ref alone. Order within a layer: q, k, v of every row; RoPE of each
 * row at its position; every row's K/V written to its slot; then each row's
 * attention (so a prefill chunk sees its own rows).
 */
#ifndef SPYRE_MODEL_REF_PAGED_H
#define SPYRE_MODEL_REF_PAGED_H

#include <stddef.h>
#include <stdint.h>

#include "ref.h"

/* The paged KV cache of a model. */
struct spyre_paged_kv {
	uint32_t layers, num_blocks, block_size, kv_heads, head_dim;
	float **k, **v;		/* [layers], each [num_blocks * block_size * kv_heads * head_dim] */
};

/* A cache for @cfg (zeroed). 0, or -EINVAL (a size of 0, or too large), -ENOMEM. */
int spyre_paged_kv_alloc(struct spyre_paged_kv *kv, const struct spyre_model_config *cfg, uint32_t num_blocks,
			 uint32_t block_size);
void spyre_paged_kv_free(struct spyre_paged_kv *kv);

/* One step's batch (mirrors serve/runner.h's struct spyre_runner_batch). */
struct spyre_paged_batch {
	uint32_t num_tokens;		/* rows, >= 1 */
	const int32_t *tokens;		/* [num_tokens] */
	const int32_t *positions;	/* [num_tokens] */
	const int64_t *slot_mapping;	/* [num_tokens], -1: padding row */
	uint32_t num_seqs;		/* >= 1 */
	const uint32_t *query_start;	/* [num_seqs + 1]: 0, ..., num_tokens; each sequence >= 1 row */
	const uint32_t *context_lens;	/* [num_seqs] */
	const int32_t *block_tables;	/* [num_seqs][max_blocks] */
	uint32_t max_blocks;
};

/*
 * Check @b against the cache and model: every index in range, each
 * sequence's rows non-empty, each row's position < its context_len <=
 * max_blocks * block_size and < max_pos, the blocks a row reads (positions
 * 0..p) and writes in [0, num_blocks), slots in [0, num_blocks * block_size)
 * or -1. 0, or -EINVAL with a message naming the field.
 */
int spyre_paged_batch_check(const struct spyre_paged_batch *b, const struct spyre_paged_kv *kv,
			    uint32_t vocab, uint32_t max_pos, char *err, size_t errlen);

/* ---- the kernels (one layer's cache: kc, vc = kv->k[l], kv->v[l]) ---- */

/*
 * Write @n rows: row r's K and V (kv_heads * head_dim floats at k + r * kvdim,
 * v + r * kvdim) to slot_mapping[r]; rows with slot -1 are skipped.
 */
void spyre_ref_paged_store(float *kc, float *vc, uint32_t kvdim, const int64_t *slot_mapping, uint32_t n,
			   const float *k, const float *v);

/*
 * Gather positions 0..npos-1 of a sequence through @block_table into
 * contiguous [npos][kvdim] arrays (kout, vout; either may be NULL).
 */
void spyre_ref_paged_gather(const float *kc, const float *vc, uint32_t kvdim, uint32_t block_size,
			    const int32_t *block_table, uint32_t npos, float *kout, float *vout);

/*
 * Attention of one query row at position @pos (q [heads * head_dim]) over
 * the sequence's positions 0..pos through @block_table: GQA (query head h
 * reads kv head h / (heads / kv_heads)), scores q.k * @scale, softmax, the
 * weighted V into out [heads * head_dim]. Exactly spyre_ref_attention over
 * the gathered rows. scratch: (pos + 1) * (2 * kv_heads * head_dim + 1) floats.
 */
void spyre_ref_paged_attention(const float *q, const float *kc, const float *vc, uint32_t block_size,
			       const int32_t *block_table, uint32_t pos, uint32_t heads, uint32_t kv_heads,
			       uint32_t head_dim, float scale, float *out, float *scratch);

/*
 * Attention of every row of a batch (q [num_tokens][heads * head_dim], out
 * the same): row r of sequence s at positions[r] over s's block table; a
 * padding row (slot -1) gets zeros. Each sequence's context is gathered once.
 * 0, or -ENOMEM.
 */
int spyre_ref_paged_attention_batch(const struct spyre_paged_batch *b, const float *kc, const float *vc,
				    uint32_t block_size, uint32_t heads, uint32_t kv_heads, uint32_t head_dim,
				    float scale, const float *q, float *out);

/* RoPE of @n rows (each @nheads heads of @head_dim, row stride nheads * head_dim), row r at positions[r]. */
void spyre_ref_rope_rows(float *v, uint32_t n, uint32_t nheads, uint32_t head_dim, const int32_t *positions,
			 float theta);

/* ---- the whole step ---- */

/*
 * One step of the model of @ref (its config, its possibly rounded weights
 * and rounding) over @kv: the rows' K/V written to their slots in every
 * layer; for the last row of each sequence, logits [num_seqs][vocab] (after
 * logits_scaling and rounding, as spyre_ref_prefill's) when @logits is not
 * NULL, and argmax [num_seqs] (spyre_argmax of them) when @argmax is not
 * NULL. 0, or -EINVAL (spyre_paged_batch_check's, or a cache not of the
 * model's shape) or -ENOMEM, with a message in @err; on error nothing is
 * written to the cache unless the failure is -ENOMEM mid-step.
 */
int spyre_ref_paged_step(const struct spyre_ref *ref, struct spyre_paged_kv *kv, const struct spyre_paged_batch *b,
			 float *logits, int32_t *argmax, char *err, size_t errlen);

#endif /* SPYRE_MODEL_REF_PAGED_H */
