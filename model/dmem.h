/* SPDX-License-Identifier: MIT */
/*
 * dmem.h - a model's device memory, for the three models on a card
 * (device.c, bert_device.c, serve/runner_card.c): every allocation is
 * remembered and freed together; uploads write host fp32 in the stick
 * layout or, for a kernel's weight slot, in the kernel library's layout;
 * a Granite/Llama decoder's weights (one card's, or one tensor-parallel
 * rank's shard) in one call. Failures return a negative status with a
 * message in the caller's buffer (spyre_model_errv()).
 */
#ifndef SPYRE_MODEL_DMEM_H
#define SPYRE_MODEL_DMEM_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "weights.h"
#include "spyre.h"
#include "spyre_kernels.h"

struct spyre_dmem {
	spyre_device_t *dev;
	char *err;			/* where failures are described (NULL: nowhere) */
	size_t errlen;
	spyre_dptr_t *allocs;
	uint32_t nallocs, capallocs;
};

/*
 * Write @fmt into @err (@errlen bytes; nothing when NULL or 0) and, when
 * @detail and @ret < 0, ": " and spyre_last_error(). Returns @ret if
 * negative, else -EINVAL.
 */
int spyre_model_errv(char *err, size_t errlen, int ret, bool detail, const char *fmt, va_list ap)
	__attribute__((format(printf, 5, 0)));

int spyre_dmem_alloc(struct spyre_dmem *m, uint64_t bytes, spyre_dptr_t *p);
/* Copy @bytes at @buf (freed, also on failure) to a new allocation *@p. */
int spyre_dmem_upload(struct spyre_dmem *m, spyre_dptr_t *p, void *buf, uint64_t bytes);
/* A host fp32 matrix [rows x cols] (a vector: one row) in the stick layout of @dtype. */
int spyre_dmem_upload_matrix(struct spyre_dmem *m, spyre_dptr_t *p, const float *src, uint64_t rows,
			     uint64_t cols, uint32_t dtype);
/* Weight slot @slot of the kernel @d, from the checkpoint's fp32 [out x in]. */
int spyre_dmem_upload_weight(struct spyre_dmem *m, spyre_dptr_t *p, const struct spyre_kdesc *d, uint32_t slot,
			     const float *src);
/* Free every allocation (the device must be done with them). */
void spyre_dmem_free(struct spyre_dmem *m);

/* A decoder layer's device buffers: its weights and KV caches. */
struct spyre_dlayer {
	spyre_dptr_t attn_norm, wq, wk, wv, wo, mlp_norm, wg, wu, wd, kc, vc;
};

/* A decoder's weights on a card. */
struct spyre_ddecoder {
	spyre_dptr_t embed, final_norm, lm_head, rope_cos, rope_sin;
	struct spyre_dlayer *layer;	/* cfg->layers of them (allocated here, the caller frees) */
};

/*
 * Upload @w (of @cfg: the whole model, or one rank's shard) as the kernels
 * of @base's dtype, cores and scratchpad read it: the projections through
 * the kernel library's packing (Q/K/V grouped by head, O by head on its
 * input), norms and embeddings in the stick layout, the LM head only with
 * @lm_head (tensor parallel: rank 0), KV caches of @cache_bytes each, and
 * the fp32 RoPE tables for max_pos positions.
 */
int spyre_dmem_upload_decoder(struct spyre_dmem *m, const struct spyre_model_config *cfg,
			      const struct spyre_model_weights *w, const struct spyre_kdesc *base, bool lm_head,
			      uint64_t cache_bytes, struct spyre_ddecoder *out);

#endif
