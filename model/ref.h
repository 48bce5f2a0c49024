/* SPDX-License-Identifier: MIT */
/*
 * ref.h - the CPU reference of a Granite/Llama decoder-only transformer
 * (config.h, weights.h): the numbers a device run is compared with.
 *
 * Math (Granite = Llama + four multipliers; Llama when they are 1, 1/sqrt(d), 1, 1):
 *	x = embed[tok] * embedding_multiplier
 *	per layer:
 *		h = rmsnorm(x) * attn_norm          rmsnorm(x) = x / sqrt(mean(x^2) + eps)
 *		q, k, v = h Wq^T, h Wk^T, h Wv^T
 *		q, k = rope(q, p), rope(k, p)       HF "rotate_half": pairs (i, i + d/2),
 *		                                     angle p * theta^(-2i/d)
 *		a = softmax(q k^T * attention_multiplier, causal) v,
 *		    query head j reads kv head j / (heads / kv_heads)
 *		x = x + residual_multiplier * (a Wo^T)
 *		h = rmsnorm(x) * mlp_norm
 *		x = x + residual_multiplier * ((silu(h Wgate^T) * (h Wup^T)) Wdown^T)
 *	logits = (rmsnorm(x) * final_norm) lm_head^T / logits_scaling
 *
 * Precision (act_dtype): 0 computes everything in fp32. A storage dtype (1
 * fp16, 2 bf16, 3 DLFloat16: the codes of SPYRE_DT_* in uapi/spyre_isa.h)
 * models a device that keeps tensors in that dtype between kernels: the
 * weights are rounded to it once, and the activations at each kernel
 * boundary, with ref->round:
 *	the embedding (after the multiplier); each RMSNorm's output; the q, k,
 *	v projections; q and k after RoPE (so the K/V cache holds rounded
 *	values); the attention output (before o_proj); the o_proj output; each
 *	residual sum; silu(gate) * up (gate and up themselves stay fp32, one
 *	fused kernel); the down_proj output; the final norm; the logits.
 * Everything else is fp32: matmuls accumulate in fp32 (8 partial sums per
 * dot product, then added in a fixed order), softmax is fp32 (max
 * subtracted, expf), RoPE's cos/sin are fp32 of an fp32 angle.
 */
#ifndef SPYRE_MODEL_REF_H
#define SPYRE_MODEL_REF_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "weights.h"

#define SPYRE_REF_FP32 0u
#define SPYRE_REF_FP16 1u
#define SPYRE_REF_BF16 2u
#define SPYRE_REF_DL16 3u

/* A rounding: fp32 -> storage dtype -> fp32. */
typedef float (*spyre_round_fn)(float);

float spyre_ref_round_none(float x);	/* identity */
float spyre_ref_round_f16(float x);	/* IEEE fp16, nearest even, subnormals, overflow -> inf */
float spyre_ref_round_bf16(float x);	/* bfloat16, nearest even */
float spyre_ref_round_dl16(float x);	/* DLFloat16 (spyre_dtype.h): ties away, < 2^-31 -> 0, overflow -> NaN */
/* The rounding of an act_dtype code, or NULL for an unknown code. */
spyre_round_fn spyre_ref_round_fn(unsigned int act_dtype);
const char *spyre_ref_dtype_name(unsigned int act_dtype);	/* "fp32", "fp16", "bf16", "dl16" */
/* x[i] = round(x[i]) for @n floats (nothing for spyre_ref_round_none). */
void spyre_ref_round_all(spyre_round_fn round, float *x, size_t n);
/*
 * The rest of a layer after attention, for @n rows: a (the attention output,
 * rounded here) through o_proj into the residual x, then the MLP block into x
 * (ref.c's math above); h, g, u, o are scratch of n x hidden, n x
 * intermediate, n x intermediate, n x hidden floats. Shared by the reference
 * and the paged reference (ref_paged.c).
 */
void spyre_ref_layer_out(const struct spyre_model_config *c, const struct spyre_layer_weights *L, spyre_round_fn R,
			 uint32_t n, float *a, float *x, float *h, float *g, float *u, float *o);

struct spyre_ref;

/*
 * A reference model over @w (weights of @cfg from spyre_model_weights_alloc,
 * _load or _random, which must stay valid; with a storage dtype a rounded
 * copy is made and @w is not read again). NULL when @act_dtype is not one of
 * the codes above, @cfg is invalid, @w is not of its shape, or out of memory.
 */
struct spyre_ref *spyre_ref_new(const struct spyre_model_config *cfg, const struct spyre_model_weights *w,
				unsigned int act_dtype);
void spyre_ref_free(struct spyre_ref *ref);

/*
 * Run @n tokens at positions pos .. pos+n-1 (pos = spyre_ref_pos(); 0 after
 * new/reset), appending their K and V to the cache; @logits_last (vocab
 * floats, or NULL) gets the last position's logits. Returns 0, or a negative
 * errno with nothing changed: -EINVAL (n == 0 or a token id not in [0,
 * vocab)), -ERANGE (pos + n > max_position_embeddings), -ENOMEM.
 * spyre_ref_error() says which.
 */
int spyre_ref_prefill(struct spyre_ref *ref, const int32_t *tokens, uint32_t n, float *logits_last);
/* One token at the next position: spyre_ref_prefill(ref, &token, 1, logits). */
int spyre_ref_decode(struct spyre_ref *ref, int32_t token, float *logits);
uint32_t spyre_ref_pos(const struct spyre_ref *ref);
void spyre_ref_reset(struct spyre_ref *ref);	/* empty the cache: position 0 */
const char *spyre_ref_error(const struct spyre_ref *ref);	/* the last error, "" if none */
spyre_round_fn spyre_ref_rounding(const struct spyre_ref *ref);
/* The model's config, and the weights it computes with (the rounded copy at a storage dtype). */
const struct spyre_model_config *spyre_ref_config(const struct spyre_ref *ref);
const struct spyre_model_weights *spyre_ref_weights(const struct spyre_ref *ref);

/* The index of the largest of @v[0..n) (lowest index on ties, NaNs never
 * win; 0 when all are NaN), -1 when n is 0. */
int32_t spyre_argmax(const float *v, uint32_t n);

/* ---- the kernels, for tests and for checking a device kernel by kernel ---- */

/* out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i] (fp32; out may be x). */
void spyre_ref_rmsnorm(const float *x, const float *w, uint32_t n, float eps, float *out);
/* y[r][o] = sum_k x[r][k] * w[o][k]: x [rows, in], w [out, in], y [rows, out]. */
void spyre_ref_matmul(const float *x, uint32_t rows, const float *w, uint32_t out, uint32_t in, float *y);
/* theta^(-2i/head_dim) in fp32, as Hugging Face computes inv_freq. */
float spyre_ref_rope_inv_freq(uint32_t i, uint32_t head_dim, float theta);
/* Rotate @nheads heads of @head_dim in place for position @pos. */
void spyre_ref_rope(float *v, uint32_t nheads, uint32_t head_dim, uint32_t pos, float theta);
/*
 * Attention of one query position over @npos cached positions: q [heads *
 * head_dim]; k, v [npos][kv_heads * head_dim]; out [heads * head_dim];
 * scratch [npos] floats. Scores are q.k * @scale, softmax over the npos.
 */
void spyre_ref_attention(const float *q, const float *k, const float *v, uint32_t npos, uint32_t heads,
			 uint32_t kv_heads, uint32_t head_dim, float scale, float *out, float *scratch);
float spyre_ref_silu(float x);		/* x / (1 + exp(-x)) */

#endif /* SPYRE_MODEL_REF_H */
