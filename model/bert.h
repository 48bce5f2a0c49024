/* SPDX-License-Identifier: MIT */
/*
 * bert.h - a BERT-architecture encoder as sentence-transformers runs it for
 * embeddings (all-MiniLM-L6-v2 and its kind): the model directory, its
 * weights, and the CPU reference of the whole pipeline in fp32.
 *
 *	word + position + token-type (0) embeddings, LayerNorm
 *	per layer: bidirectional multi-head attention over the sentence's own
 *	tokens (padding never attended), + residual, LayerNorm (post-LN);
 *	GELU (erf) MLP, + residual, LayerNorm
 *	mean pooling over the sentence's tokens, L2 normalization
 *
 * The model directory (a Hugging Face BertModel plus sentence-transformers'
 * files, as the packaged all-MiniLM-L6-v2 ships it):
 *   config.json        required: hidden_size, num_hidden_layers,
 *                      num_attention_heads, intermediate_size, vocab_size,
 *                      max_position_embeddings; optional: type_vocab_size (2),
 *                      layer_norm_eps (1e-12), pad_token_id (0), model_type
 *                      ("bert"), hidden_act ("gelu", the erf form: any other
 *                      is refused), position_embedding_type ("absolute": any
 *                      other is refused), is_decoder / add_cross_attention
 *                      (false)
 *   model.safetensors  the weights (names below), F32/F16/BF16; the I64
 *                      embeddings.position_ids and the unused pooler.dense.*
 *                      are ignored; "bert." before every name is accepted
 *   modules.json       optional: a sentence_transformers.models.Normalize
 *                      module turns on L2 normalization; absent, a bare
 *                      BertModel gets mean pooling and normalization
 *   1_Pooling/config.json (the Pooling module's path in modules.json)
 *                      optional: pooling_mode_mean_tokens must be true and
 *                      the other pooling_mode_* false (refused by name)
 *   sentence_bert_config.json  optional: max_seq_length (else
 *                      max_position_embeddings), the longest input accepted
 *
 * Weights ([out, in] row-major as nn.Linear keeps them), N = 0 .. layers-1:
 *   embeddings.{word,position,token_type}_embeddings.weight  [vocab|max_pos|type_vocab, hidden]
 *   embeddings.LayerNorm.{weight,bias}                          [hidden]
 *   encoder.layer.N.attention.self.{query,key,value}.{weight,bias}  [hidden, hidden], [hidden]
 *   encoder.layer.N.attention.output.dense.{weight,bias}       [hidden, hidden], [hidden]
 *   encoder.layer.N.attention.output.LayerNorm.{weight,bias}   [hidden]
 *   encoder.layer.N.intermediate.dense.{weight,bias}           [ffn, hidden], [ffn]
 *   encoder.layer.N.output.dense.{weight,bias}                 [hidden, ffn], [hidden]
 *   encoder.layer.N.output.LayerNorm.{weight,bias}             [hidden]
 *
 * Input: a batch of sentences as token ids (with [CLS] ... [SEP], what the
 * WordPiece tokenizer gives), packed one after another: sentence i is
 * lens[i] ids. Output: one vector of hidden floats per sentence.
 */
#ifndef SPYRE_MODEL_BERT_H
#define SPYRE_MODEL_BERT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "safetensors.h"

struct spyre_bert_config {
	char name[64];			/* model_type */
	uint32_t layers, hidden, heads, head_dim, ffn, vocab, max_pos, type_vocab, pad_token_id;
	float norm_eps;
	uint32_t max_seq_len;		/* the longest sentence accepted (<= max_pos) */
	bool normalize;			/* L2-normalize the pooled vector */
};

struct spyre_bert_layer {
	float *wq, *bq, *wk, *bk, *wv, *bv, *wo, *bo, *ln1_w, *ln1_b;
	float *wi, *bi, *wd, *bd, *ln2_w, *ln2_b;
};

struct spyre_bert_weights {
	float *word, *pos, *type, *ln_w, *ln_b;
	struct spyre_bert_layer *layer;		/* [layers] */
	float *storage;				/* the one allocation the arrays are in */
};

struct spyre_bert {
	struct spyre_bert_config cfg;
	struct spyre_bert_weights w;
};

/* config.json text (@len bytes) -> @cfg (pooling: mean, normalized; max_seq_len = max_pos). */
int spyre_bert_config_parse(const char *json, size_t len, struct spyre_bert_config *cfg, char *err,
			    size_t errlen);
/*
 * The model directory @dir's config.json and sentence-transformers' files
 * (above). 0, or -1 with a message starting with the file's path.
 */
int spyre_bert_config_load(const char *dir, struct spyre_bert_config *cfg, char *err, size_t errlen);

/*
 * Every tensor by name from @st, shapes checked: "tensor
 * 'encoder.layer.3.output.dense.bias' not found", "... has shape [383],
 * expected [384]"; a tensor the model does not use is an error ("unexpected
 * tensor 'x'") but for the ignored ones above. On error @w is freed.
 */
int spyre_bert_weights_load(const struct spyre_bert_config *cfg, const struct spyre_st *st,
			    struct spyre_bert_weights *w, char *err, size_t errlen);
void spyre_bert_weights_free(struct spyre_bert_weights *w);

/* config and weights of the model directory @dir; errors name the file. */
int spyre_bert_load(const char *dir, struct spyre_bert **out, char *err, size_t errlen);
void spyre_bert_free(struct spyre_bert *m);

/*
 * Check a batch (the one home of these rules, the card's too): 1 <= @batch
 * <= SPYRE_BERT_MAX_BATCH, 1 <= lens[i] <= max_seq_len, 0 <= id < vocab.
 * 0, or -EINVAL with a message naming the sentence: "sentence 3: 300 tokens,
 * more than max_seq_length 256", "sentence 0, token 5: id 40000 is not
 * below vocab_size 30522".
 */
#define SPYRE_BERT_MAX_BATCH 1024u
int spyre_bert_check_batch(const struct spyre_bert_config *cfg, const int32_t *ids, const uint32_t *lens,
			   uint32_t batch, char *err, size_t errlen);

/*
 * The CPU reference (fp32): @out [batch][hidden] gets each sentence's
 * embedding. 0, -EINVAL (spyre_bert_check_batch) or -ENOMEM, with @err.
 * Thread-safe (the model is only read).
 */
int spyre_bert_embed(const struct spyre_bert *m, const int32_t *ids, const uint32_t *lens, uint32_t batch,
		     float *out, char *err, size_t errlen);

/* Numerics the card's path shares. GELU, erf form: x/2 (1 + erf(x/sqrt 2)). */
float spyre_bert_gelu(float x);

#endif /* SPYRE_MODEL_BERT_H */
