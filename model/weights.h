/* SPDX-License-Identifier: MIT */
/*
 * weights.h - the weights of a model (config.h) as fp32 host arrays in the
 * Hugging Face layout: a projection is [out_features, in_features], row-major,
 * and computes y = W x.
 *
 * Hugging Face names (safetensors), N = 0 .. layers-1:
 *   model.embed_tokens.weight                    embed       [vocab, hidden]
 *   model.layers.N.input_layernorm.weight        attn_norm   [hidden]
 *   model.layers.N.self_attn.q_proj.weight       wq          [heads*head_dim, hidden]
 *   model.layers.N.self_attn.k_proj.weight       wk          [kv_heads*head_dim, hidden]
 *   model.layers.N.self_attn.v_proj.weight       wv          [kv_heads*head_dim, hidden]
 *   model.layers.N.self_attn.o_proj.weight       wo          [hidden, heads*head_dim]
 *   model.layers.N.post_attention_layernorm.weight  mlp_norm [hidden]
 *   model.layers.N.mlp.gate_proj.weight          w_gate      [ffn, hidden]
 *   model.layers.N.mlp.up_proj.weight            w_up        [ffn, hidden]
 *   model.layers.N.mlp.down_proj.weight          w_down      [hidden, ffn]
 *   model.norm.weight                            final_norm  [hidden]
 *   lm_head.weight                               lm_head     [vocab, hidden]
 *                                                (absent when tied: lm_head == embed)
 */
#ifndef SPYRE_MODEL_WEIGHTS_H
#define SPYRE_MODEL_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "safetensors.h"

struct spyre_layer_weights {
	float *attn_norm, *wq, *wk, *wv, *wo;
	float *mlp_norm, *w_gate, *w_up, *w_down;
};

struct spyre_model_weights {
	uint32_t layers;
	float *embed;
	struct spyre_layer_weights *layer;	/* [layers] */
	float *final_norm;
	float *lm_head;		/* == embed when the config ties them */
	float *storage;		/* the one allocation every array is in */
	uint64_t nfloats;	/* its size: spyre_model_param_count() */
};

/* One tensor of the model: its Hugging Face name, shape and array. */
struct spyre_model_tensor {
	char name[80];
	uint32_t rank;
	uint64_t shape[2];
	float *data;
};

/* Zeroed weights for @cfg. 0, or -1 (out of memory, too large) with a message. */
int spyre_model_weights_alloc(const struct spyre_model_config *cfg, struct spyre_model_weights *w,
			      char *err, size_t errlen);
void spyre_model_weights_free(struct spyre_model_weights *w);

/* The model's tensors in file order (lm_head only when untied): a malloc'ed
 * array of *@n (free() it), or NULL when out of memory. */
struct spyre_model_tensor *spyre_model_weights_list(const struct spyre_model_config *cfg,
						    const struct spyre_model_weights *w, size_t *n);

/*
 * Load every tensor by name from @st (any of F32/F16/BF16), checking shapes.
 * Errors name the tensor: "tensor 'model.norm.weight' not found". A tensor
 * the config does not use is an error ("unexpected tensor ..."), except
 * lm_head.weight when the embeddings are tied and *.rotary_emb.inv_freq (both
 * ignored). On error @w is freed.
 */
int spyre_model_weights_load(const struct spyre_model_config *cfg, const struct spyre_st *st,
			     struct spyre_model_weights *w, char *err, size_t errlen);
/* The same from a file; errors start with the path. */
int spyre_model_weights_load_file(const struct spyre_model_config *cfg, const char *path,
				  struct spyre_model_weights *w, char *err, size_t errlen);

/* The next value of the splitmix64 stream of state @s (the generated weights' and prompts' generator). */
/*
 * Rank @r's shard of @w over the ranks of @sc (spyre_model_config_tp() of
 * @cfg), Megatron's split: the rows of its heads of Wq, Wk, Wv and of its
 * part of the gate and up projections are contiguous in HF's [out x in]
 * (pointers into @w); the columns of Wo and of the down projection are
 * copied into *@own. Embeddings, norms and the LM head are @w's. The caller
 * frees *@own and @shard->layer (not with spyre_model_weights_free());
 * @shard lives no longer than @w. 0 or -ENOMEM.
 */
int spyre_model_weights_shard(const struct spyre_model_config *cfg, const struct spyre_model_config *sc,
			      const struct spyre_model_weights *w, uint32_t r, struct spyre_model_weights *shard,
			      float **own);
uint64_t spyre_splitmix64(uint64_t *s);

/*
 * Deterministic random weights (splitmix64, no libc rand, no libm: the same
 * bits on every machine) scaled so activations stay O(1) and greedy decoding
 * is not degenerate: model/README.md gives the scales. 0, or -1 (out of memory).
 */
int spyre_model_weights_random(const struct spyre_model_config *cfg, uint64_t seed,
			       struct spyre_model_weights *w);

/* Write the weights as safetensors (each tensor in @dtype: F32, F16 or BF16). */
int spyre_model_weights_save(const struct spyre_model_config *cfg, const struct spyre_model_weights *w,
			     const char *path, enum spyre_st_dtype dtype, char *err, size_t errlen);

#endif /* SPYRE_MODEL_WEIGHTS_H */
