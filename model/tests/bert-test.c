// SPDX-License-Identifier: MIT
/*
 * bert-test.c - the BERT encoder (model/bert.[ch]) on the host: the CPU
 * reference against sentence-transformers' all-MiniLM-L6-v2 (vectors computed
 * at build time by bert_ref.py with the set-up's venv: cosine >= 0.9999 for
 * each of 16 varied sentences, the minimum printed); config.json, the
 * sentence-transformers files and the weights refused with the field or
 * tensor named (wrong activation, pooling, shapes, missing and unexpected
 * tensors, a truncated file); a batch's bad ids and lengths.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bert.h"
#include "bert-expect.h"
#include "test-util.h"
#include "../../tests/tap.h"

#ifndef BERT_EXPECTED
#define BERT_EXPECTED "build/model/bert/expected.json"
#endif

static char err[1024];

/* The micro BERT's config.json, member @key set to the raw JSON @val (NULL: removed; a new key: added). */
static const char *micro_json(const char *key, const char *val)
{
	static const char *const kv[][2] = {
		{ "architectures", "[\"BertModel\"]" }, { "model_type", "\"bert\"" }, { "hidden_size", "8" },
		{ "num_hidden_layers", "2" }, { "num_attention_heads", "2" }, { "intermediate_size", "16" },
		{ "vocab_size", "20" }, { "max_position_embeddings", "16" }, { "type_vocab_size", "2" },
		{ "layer_norm_eps", "1e-12" }, { "hidden_act", "\"gelu\"" }, { "pad_token_id", "0" },
	};
	static char buf[1024];
	size_t o = 0;
	int found = 0;

	o += (size_t)snprintf(buf + o, sizeof(buf) - o, "{");
	for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++) {
		const char *v = kv[i][1];

		if (key && !strcmp(key, kv[i][0])) {
			found = 1;
			v = val;
			if (!v)
				continue;
		}
		o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s\"%s\":%s", o > 1 ? "," : "", kv[i][0], v);
	}
	if (key && !found && val)
		o += (size_t)snprintf(buf + o, sizeof(buf) - o, ",\"%s\":%s", key, val);
	snprintf(buf + o, sizeof(buf) - o, "}");
	return buf;
}

static void cfg_bad(const char *key, const char *val, const char *frag)
{
	struct spyre_bert_config c;
	const char *j = micro_json(key, val);

	err[0] = 0;
	TAP_CHECK(spyre_bert_config_parse(j, strlen(j), &c, err, sizeof(err)) == -1 && strstr(err, frag),
		  "%s = %s: expected an error with \"%s\", got \"%s\"", key, val ? val : "(absent)", frag, err);
}

static void test_config(void)
{
	struct spyre_bert_config c;
	const char *j = micro_json(NULL, NULL);

	if (TAP_CHECK(spyre_bert_config_parse(j, strlen(j), &c, err, sizeof(err)) == 0, "%s", err)) {
		TAP_EQ(2u, c.layers);
		TAP_EQ(8u, c.hidden);
		TAP_EQ(4u, c.head_dim);
		TAP_EQ(16u, c.ffn);
		TAP_EQ(16u, c.max_seq_len);
		TAP_CHECK(c.norm_eps == 1e-12f && c.normalize, "eps %g", (double)c.norm_eps);
	}
	/* defaults: type_vocab_size 2, layer_norm_eps 1e-12, hidden_act gelu */
	j = micro_json("hidden_act", NULL);
	TAP_CHECK(spyre_bert_config_parse(j, strlen(j), &c, err, sizeof(err)) == 0, "%s", err);
	cfg_bad("hidden_act", "\"gelu_new\"", "hidden_act = \"gelu_new\" is not supported (only \"gelu\", the erf form");
	cfg_bad("hidden_act", "\"relu\"", "hidden_act = \"relu\" is not supported");
	cfg_bad("hidden_act", "3", "field 'hidden_act' must be a string, not a number");
	cfg_bad("hidden_size", NULL, "missing field 'hidden_size'");
	cfg_bad("num_hidden_layers", "\"6\"", "field 'num_hidden_layers' must be an integer, not a string");
	cfg_bad("num_attention_heads", "3", "hidden_size (8) is not a multiple of num_attention_heads (3)");
	cfg_bad("num_attention_heads", "0", "num_attention_heads (0) must be from 1 to");
	cfg_bad("intermediate_size", "-1", "field 'intermediate_size' must be an integer from 0 to");
	cfg_bad("vocab_size", "2000000", "vocab_size (2000000) must be from 1 to 1048576");
	cfg_bad("num_hidden_layers", "5000", "num_hidden_layers (5000) must be from 1 to 1024");
	cfg_bad("position_embedding_type", "\"relative_key\"", "position_embedding_type = \"relative_key\"");
	cfg_bad("layer_norm_eps", "0", "layer_norm_eps (0) must be in (0, 1)");
	cfg_bad("layer_norm_eps", "1e300", "field 'layer_norm_eps' (1e+300) is out of the range of a float");
	cfg_bad("model_type", "\"llama\"", "model_type = \"llama\" is not supported");
	cfg_bad("is_decoder", "true", "is_decoder = true is not supported");
	cfg_bad("add_cross_attention", "1", "field 'add_cross_attention' must be true or false");
	cfg_bad("pad_token_id", "20", "pad_token_id (20) is not below vocab_size (20)");
	cfg_bad("type_vocab_size", "0", "type_vocab_size (0) must be from 1 to");
	err[0] = 0;
	TAP_CHECK(spyre_bert_config_parse("[1]", 3, &c, err, sizeof(err)) == -1 &&
		  !strcmp(err, "not a JSON object but array"), "%s", err);
	TAP_CHECK(spyre_bert_config_parse("{\"a\":1,}", 8, &c, err, sizeof(err)) == -1 &&
		  strstr(err, "not valid JSON"), "%s", err);
}

/* ---- a micro model in a directory --------------------------------------------- */

static char dir[256];

static void put(const char *name, const char *text)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (strchr(name, '/')) {
		char sub[512];

		snprintf(sub, sizeof(sub), "%s/%.*s", dir, (int)(strchr(name, '/') - name), name);
		mkdir(sub, 0755);
	}
	if (!text) {
		unlink(path);
		return;
	}
	if (model_write_file(path, text, strlen(text)))
		tap_bail("cannot write %s", path);
}

/* The micro model's tensors, all (drop NULL), or without the one named @drop, or with @extra added. */
static int write_weights(const char *drop, const char *prefix, const struct spyre_st_out *extra, size_t nextra,
			 uint64_t bad_shape_of_bq1)
{
	static float data[20 * 16 + 16 * 8 + 2 * 8 + 8 * 8 * 16 + 16 * 16 * 8];
	struct spyre_st_out t[64];
	static char names[64][96];
	size_t n = 0;
	char path[512];

	for (size_t i = 0; i < sizeof(data) / sizeof(data[0]); i++)
		data[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
#define ADD(nm, r, a, b) do {									\
		snprintf(names[n], sizeof(names[n]), "%s%s", prefix, nm);				\
		if (!drop || strcmp(drop, nm)) {							\
			t[n] = (struct spyre_st_out){ .name = names[n], .dtype = SPYRE_ST_F32, .rank = (r), \
						      .shape = { (a), (b) }, .f32 = data };		\
			n++;										\
		}											\
	} while (0)
	ADD("embeddings.word_embeddings.weight", 2, 20, 8);
	ADD("embeddings.position_embeddings.weight", 2, 16, 8);
	ADD("embeddings.token_type_embeddings.weight", 2, 2, 8);
	ADD("embeddings.LayerNorm.weight", 1, 8, 0);
	ADD("embeddings.LayerNorm.bias", 1, 8, 0);
	for (int l = 0; l < 2; l++) {
		static const char *const sq[] = { "attention.self.query", "attention.self.key", "attention.self.value",
						   "attention.output.dense" };
		char nm[96];

		for (int k = 0; k < 4; k++) {
			snprintf(nm, sizeof(nm), "encoder.layer.%d.%s.weight", l, sq[k]);
			ADD(nm, 2, 8, 8);
			snprintf(nm, sizeof(nm), "encoder.layer.%d.%s.bias", l, sq[k]);
			ADD(nm, 1, l == 1 && k == 0 && bad_shape_of_bq1 ? bad_shape_of_bq1 : 8, 0);
		}
		snprintf(nm, sizeof(nm), "encoder.layer.%d.attention.output.LayerNorm.weight", l);
		ADD(nm, 1, 8, 0);
		snprintf(nm, sizeof(nm), "encoder.layer.%d.attention.output.LayerNorm.bias", l);
		ADD(nm, 1, 8, 0);
		snprintf(nm, sizeof(nm), "encoder.layer.%d.intermediate.dense.weight", l);
		ADD(nm, 2, 16, 8);
		snprintf(nm, sizeof(nm), "encoder.layer.%d.intermediate.dense.bias", l);
		ADD(nm, 1, 16, 0);
		snprintf(nm, sizeof(nm), "encoder.layer.%d.output.dense.weight", l);
		ADD(nm, 2, 8, 16);
		snprintf(nm, sizeof(nm), "encoder.layer.%d.output.dense.bias", l);
		ADD(nm, 1, 8, 0);
		snprintf(nm, sizeof(nm), "encoder.layer.%d.output.LayerNorm.weight", l);
		ADD(nm, 1, 8, 0);
		snprintf(nm, sizeof(nm), "encoder.layer.%d.output.LayerNorm.bias", l);
		ADD(nm, 1, 8, 0);
	}
#undef ADD
	for (size_t i = 0; i < nextra; i++)
		t[n++] = extra[i];
	snprintf(path, sizeof(path), "%s/model.safetensors", dir);
	return spyre_st_write(path, t, n, err, sizeof(err));
}

/* The micro model directory as sentence-transformers writes one. */
static void micro_dir(void)
{
	snprintf(dir, sizeof(dir), "%s/micro", model_tmpdir());
	mkdir(dir, 0755);
	put("config.json", micro_json(NULL, NULL));
	put("modules.json", "[{\"idx\":0,\"name\":\"0\",\"path\":\"\",\"type\":\"sentence_transformers.models.Transformer\"},"
	    "{\"idx\":1,\"name\":\"1\",\"path\":\"1_Pooling\",\"type\":\"sentence_transformers.models.Pooling\"},"
	    "{\"idx\":2,\"name\":\"2\",\"path\":\"2_Normalize\",\"type\":\"sentence_transformers.models.Normalize\"}]");
	put("1_Pooling/config.json", "{\"word_embedding_dimension\":8,\"pooling_mode_cls_token\":false,"
	    "\"pooling_mode_mean_tokens\":true,\"pooling_mode_max_tokens\":false,"
	    "\"pooling_mode_mean_sqrt_len_tokens\":false}");
	put("sentence_bert_config.json", "{\"max_seq_length\":12,\"do_lower_case\":false}");
	if (write_weights(NULL, "", NULL, 0, 0))
		tap_bail("%s", err);
}

static void load_bad(const char *frag)
{
	struct spyre_bert *m = (struct spyre_bert *)1;

	err[0] = 0;
	TAP_CHECK(spyre_bert_load(dir, &m, err, sizeof(err)) == -1 && !m && strstr(err, frag),
		  "expected an error with \"%s\", got \"%s\"", frag, err);
}

static void test_directory(void)
{
	struct spyre_bert *m;

	micro_dir();
	if (!TAP_CHECK(spyre_bert_load(dir, &m, err, sizeof(err)) == 0, "%s", err))
		return;
	TAP_EQ(12u, m->cfg.max_seq_len);
	TAP_CHECK(m->cfg.normalize, "Normalize module");
	spyre_bert_free(m);

	put("1_Pooling/config.json", "{\"pooling_mode_cls_token\":true,\"pooling_mode_mean_tokens\":true}");
	load_bad("1_Pooling/config.json: pooling_mode_cls_token = true is not supported (mean pooling only)");
	put("1_Pooling/config.json", "{\"pooling_mode_mean_tokens\":false}");
	load_bad("pooling_mode_mean_tokens = false is not supported");
	put("1_Pooling/config.json", "{\"pooling_mode_max_tokens\":\"yes\"}");
	load_bad("field 'pooling_mode_max_tokens' must be true or false");
	put("1_Pooling/config.json", "{\"pooling_mode_mean_tokens\":true}");
	put("sentence_bert_config.json", "{\"max_seq_length\":17}");
	load_bad("max_seq_length (17) must be from 1 to max_position_embeddings (16)");
	put("sentence_bert_config.json", "{\"max_seq_length\":12}");
	put("modules.json", "[{\"type\":\"sentence_transformers.models.Transformer\"},"
	    "{\"type\":\"sentence_transformers.models.Pooling\",\"path\":\"1_Pooling\"},"
	    "{\"type\":\"sentence_transformers.models.Dense\",\"path\":\"2_Dense\"}]");
	load_bad("modules.json: module 2 of type \"sentence_transformers.models.Dense\" is not supported");
	put("modules.json", "[{\"type\":\"sentence_transformers.models.Transformer\"}]");
	load_bad("modules.json: no Pooling module");
	put("modules.json", "{\"a\":1}");
	load_bad("modules.json: not a JSON array");
	put("modules.json", "[{\"type\":\"sentence_transformers.models.Transformer\"},"
	    "{\"type\":\"sentence_transformers.models.Pooling\",\"path\":\"1_Pooling\"}]");
	if (TAP_CHECK(spyre_bert_load(dir, &m, err, sizeof(err)) == 0, "%s", err)) {
		TAP_CHECK(!m->cfg.normalize, "no Normalize module: not normalized");
		spyre_bert_free(m);
	}
	/* a bare BertModel: mean pooling and normalization */
	put("modules.json", NULL);
	put("sentence_bert_config.json", NULL);
	if (TAP_CHECK(spyre_bert_load(dir, &m, err, sizeof(err)) == 0, "%s", err)) {
		TAP_CHECK(m->cfg.normalize && m->cfg.max_seq_len == 16, "bare BertModel");
		spyre_bert_free(m);
	}
	put("config.json", micro_json("hidden_act", "\"gelu_pytorch_tanh\""));
	load_bad("config.json: hidden_act = \"gelu_pytorch_tanh\" is not supported");
	put("config.json", NULL);
	load_bad("config.json: No such file or directory");
	micro_dir();
}

static void test_weights(void)
{
	struct spyre_bert *m;
	static const float ids[64];
	char path[512];

	micro_dir();
	if (write_weights("encoder.layer.1.output.dense.bias", "", NULL, 0, 0))
		tap_bail("%s", err);
	load_bad("model.safetensors: tensor 'encoder.layer.1.output.dense.bias' not found");
	if (write_weights(NULL, "", NULL, 0, 7))
		tap_bail("%s", err);
	load_bad("tensor 'encoder.layer.1.attention.self.query.bias' has shape [7], expected [8]");
	struct spyre_st_out extra[] = {
		{ .name = "encoder.layer.2.output.dense.bias", .dtype = SPYRE_ST_F32, .rank = 1, .shape = { 8 },
		  .f32 = ids },
	};
	if (write_weights(NULL, "", extra, 1, 0))
		tap_bail("%s", err);
	load_bad("unexpected tensor 'encoder.layer.2.output.dense.bias'");
	/* the pooler real checkpoints carry: ignored (their I64 position_ids: the MiniLM case) */
	struct spyre_st_out ign[] = {
		{ .name = "pooler.dense.weight", .dtype = SPYRE_ST_F32, .rank = 2, .shape = { 8, 8 }, .f32 = ids },
		{ .name = "pooler.dense.bias", .dtype = SPYRE_ST_F32, .rank = 1, .shape = { 8 }, .f32 = ids },
	};
	if (write_weights(NULL, "", ign, 2, 0))
		tap_bail("%s", err);
	if (TAP_CHECK(spyre_bert_load(dir, &m, err, sizeof(err)) == 0, "pooler ignored: %s", err))
		spyre_bert_free(m);
	/* BertForX checkpoints: every name after "bert." */
	if (write_weights(NULL, "bert.", NULL, 0, 0))
		tap_bail("%s", err);
	if (TAP_CHECK(spyre_bert_load(dir, &m, err, sizeof(err)) == 0, "bert. prefix: %s", err))
		spyre_bert_free(m);
	/* a truncated file: named */
	if (write_weights(NULL, "", NULL, 0, 0))
		tap_bail("%s", err);
	snprintf(path, sizeof(path), "%s/model.safetensors", dir);
	if (truncate(path, 3000))
		tap_bail("truncate %s", path);
	load_bad("model.safetensors");
	micro_dir();
}

static void test_batch_checks(void)
{
	struct spyre_bert *m;
	float out[3 * 8];
	const int32_t ids[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17 };

	micro_dir();
	if (!TAP_CHECK(spyre_bert_load(dir, &m, err, sizeof(err)) == 0, "%s", err))
		return;
	TAP_EQ(-EINVAL, spyre_bert_embed(m, ids, (uint32_t[]){ 1 }, 0, out, err, sizeof(err)));
	TAP_STREQ("batch of 0 sentences: from 1 to 1024", err);
	TAP_EQ(-EINVAL, spyre_bert_embed(m, ids, (uint32_t[]){ 2, 0 }, 2, out, err, sizeof(err)));
	TAP_STREQ("sentence 1: 0 tokens, not from 1 to max_seq_length 12", err);
	TAP_EQ(-EINVAL, spyre_bert_embed(m, ids, (uint32_t[]){ 2, 13 }, 2, out, err, sizeof(err)));
	TAP_STREQ("sentence 1: 13 tokens, more than max_seq_length 12", err);
	TAP_EQ(-EINVAL, spyre_bert_embed(m, (int32_t[]){ 1, 2, 3, 20 }, (uint32_t[]){ 2, 2 }, 2, out, err,
					 sizeof(err)));
	TAP_STREQ("sentence 1, token 1: id 20 is not below vocab_size 20", err);
	TAP_EQ(-EINVAL, spyre_bert_embed(m, (int32_t[]){ -1 }, (uint32_t[]){ 1 }, 1, out, err, sizeof(err)));
	TAP_STREQ("sentence 0, token 0: id -1 is not below vocab_size 20", err);
	TAP_EQ(-EINVAL, spyre_bert_embed(m, NULL, (uint32_t[]){ 1 }, 1, out, err, sizeof(err)));
	/* a batch is its sentences alone: each vector as embedded by itself, unit length */
	float one[8];

	TAP_EQ(0, spyre_bert_embed(m, ids, (uint32_t[]){ 3, 12, 1 }, 3, out, err, sizeof(err)));
	TAP_EQ(0, spyre_bert_embed(m, ids + 3, (uint32_t[]){ 12 }, 1, one, err, sizeof(err)));
	TAP_CHECK(!memcmp(one, out + 8, sizeof(one)), "sentence 1 of the batch as alone");
	for (int b = 0; b < 3; b++) {
		double n = 0;

		for (int j = 0; j < 8; j++)
			n += (double)out[b * 8 + j] * out[b * 8 + j];
		TAP_CHECK(fabs(n - 1) < 1e-6, "sentence %d: |v|^2 = %.9f", b, n);
	}
	spyre_bert_free(m);
}

static void test_minilm(void)
{
	struct bert_expect e;
	struct spyre_bert *m;
	float *out;
	double min = 2;
	uint32_t at = 0;

	if (bert_expect_load(BERT_EXPECTED, &e, err, sizeof(err))) {
		tap_skip("%s (make builds it with the set-up's venv: tools/setup/setup.sh venv)", err);
		return;
	}
	if (!TAP_CHECK(spyre_bert_load(e.model_dir, &m, err, sizeof(err)) == 0, "%s", err)) {
		bert_expect_free(&e);
		return;
	}
	TAP_EQ(6u, m->cfg.layers);
	TAP_EQ(384u, m->cfg.hidden);
	TAP_EQ(256u, m->cfg.max_seq_len);
	TAP_EQ(e.hidden, m->cfg.hidden);
	out = calloc((size_t)e.n * e.hidden, sizeof(float));
	if (TAP_CHECK(out && spyre_bert_embed(m, e.ids, e.lens, e.n, out, err, sizeof(err)) == 0, "%s", err)) {
		for (uint32_t i = 0; i < e.n; i++) {
			double c = bert_cosine(out + (size_t)i * e.hidden, e.emb + (size_t)i * e.hidden, e.hidden);

			TAP_CHECK(c >= 0.9999, "sentence %u (%u tokens): cosine %.7f < 0.9999", i, e.lens[i], c);
			if (c < min) {
				min = c;
				at = i;
			}
		}
		tap_diag("CPU reference vs sentence-transformers: %u sentences, min cosine %.9f (1 - cos = %.2g, sentence %u)",
			 e.n, min, 1 - min, at);
	}
	free(out);
	spyre_bert_free(m);
	bert_expect_free(&e);
}

static const struct tap_case cases[] = {
	{ "config", test_config },
	{ "directory", test_directory },
	{ "weights", test_weights },
	{ "batch_checks", test_batch_checks },
	{ "minilm_vs_sentence_transformers", test_minilm },
};

int main(int argc, char **argv)
{
	int rc = TAP_RUN(cases, argc, argv);

	model_rmtmp();
	return rc;
}
