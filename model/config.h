/* SPDX-License-Identifier: MIT */
/*
 * config.h - the shape and hyper-parameters of a Granite/Llama-style
 * decoder-only transformer, read from a Hugging Face config.json.
 *
 * Keys read (everything else is ignored):
 *   num_hidden_layers, hidden_size, num_attention_heads, intermediate_size,
 *   vocab_size, max_position_embeddings                          required
 *   num_key_value_heads (default num_attention_heads), head_dim (default
 *   hidden_size / num_attention_heads), rope_theta (10000), rms_norm_eps
 *   (1e-6), tie_word_embeddings (false), bos_token_id / eos_token_id (0;
 *   eos may be a list: its first id), model_type (recorded in name)
 *   Granite: embedding_multiplier (1), attention_multiplier
 *   (1/sqrt(head_dim)), residual_multiplier (1), logits_scaling (1); absent,
 *   the model is a Llama
 *   hidden_act must be "silu"; rope_scaling must be absent or null;
 *   attention_bias and mlp_bias must be absent or false (no bias tensors)
 * A null value counts as absent. Errors name the field, e.g.
 * "num_attention_heads (6) is not a multiple of num_key_value_heads (4)".
 */
#ifndef SPYRE_MODEL_CONFIG_H
#define SPYRE_MODEL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SPYRE_MODEL_MAX_DIM (1u << 20)		/* any size but layers */
#define SPYRE_MODEL_MAX_LAYERS 1024u

struct spyre_model_config {
	char name[64];			/* model_type, e.g. "granite" */
	uint32_t layers, hidden, heads, kv_heads, head_dim, ffn, vocab, max_pos;
	float rope_theta, norm_eps;
	bool tied_embeddings;
	float embedding_multiplier, attention_multiplier, residual_multiplier, logits_scaling;
	uint32_t bos_token_id, eos_token_id;
};

/* Parse config.json text (@len bytes): 0, or -1 with a message in @err. */
int spyre_model_config_parse(const char *json, size_t len, struct spyre_model_config *cfg,
			     char *err, size_t errlen);
/* The same from a file (or a directory holding config.json); errors start with the path. */
int spyre_model_config_load(const char *path, struct spyre_model_config *cfg, char *err, size_t errlen);
/* 0 when @cfg is usable (the parser's checks); -1 with a message naming the field. */
int spyre_model_config_validate(const struct spyre_model_config *cfg, char *err, size_t errlen);

/* A config.json for @cfg (the keys above; floats written so they read back
 * bit-exact): the length written (as snprintf), or -1. */
int spyre_model_config_format(const struct spyre_model_config *cfg, char *buf, size_t len);
int spyre_model_config_save(const struct spyre_model_config *cfg, const char *path, char *err, size_t errlen);

/* Presets. tiny: a 2-layer Granite-shaped model small enough for a slow
 * emulator (model/configs/tiny/config.json holds the same). */
struct spyre_model_config spyre_model_config_tiny(void);
/* The shape of IBM Granite 3.3 8B Instruct (model/configs/granite-3.3-8b). */
struct spyre_model_config spyre_model_config_granite_3_3_8b(void);
/* "tiny" or "granite-3.3-8b": 0 and *@cfg set, or -1. */
int spyre_model_config_preset(const char *name, struct spyre_model_config *cfg);

/* Parameters: embedding, every layer's norms and projections, the final
 * norm, and lm_head unless tied. Bytes of the weights at @dtype_size bytes each. */
/*
 * Tensor parallel: the shape of one rank's shard of @cfg over @tp cards
 * (heads, kv_heads and ffn divided by @tp; hidden, head_dim and the rest
 * unchanged): 0, or -EINVAL with a message naming the size @tp does not
 * divide (or @tp out of 1..SPYRE_MODEL_TP_MAX).
 */
#define SPYRE_MODEL_TP_MAX	64
int spyre_model_config_tp(const struct spyre_model_config *cfg, uint32_t tp, struct spyre_model_config *shard,
			  char *err, size_t errlen);
uint64_t spyre_model_param_count(const struct spyre_model_config *cfg);
uint64_t spyre_model_bytes(const struct spyre_model_config *cfg, unsigned int dtype_size);

#endif /* SPYRE_MODEL_CONFIG_H */
